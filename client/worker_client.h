// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: worker_client.h
// -----------------------------------------------------------------------------
//
// Reads blocks from one worker over gRPC (WorkerData.ReadBlock), straight into
// the caller's buffer. Internal to the client library; larder::Client (issue
// 4) routes block reads to these by ring position.
//
// ReadBlock goes through gRPC's generic stub: the response messages stay raw
// ByteBuffers and their data field is copied once, from gRPC's slices into
// the caller's buffer (the protobuf path would copy twice more);
// ReadBlockView does not copy it at all.
//
// Thread-safe: one instance per worker, shared by every loader thread.
// `connections` > 1 opens that many HTTP/2 connections and spreads streams
// over them (one TCP connection caps a single stream's throughput).
#ifndef LARDER_CLIENT_WORKER_CLIENT_H_
#define LARDER_CLIENT_WORKER_CLIENT_H_

#include <grpcpp/channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/slice.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/block_key.h"
#include "common/security.h"
#include "larder/client.h"
#include "proto/worker.grpc.pb.h"

namespace larder {

// Calls that a stop cancels at once, in flight or not yet started: Cancel
// cancels every call registered (grpc::ClientContext::TryCancel) and refuses
// new ones until Reset. Thread-safe.
class CallCancels {
 public:
  // Registers `ctx` until Done; false (the call must not start) once
  // cancelled.
  bool Start(grpc::ClientContext* ctx);
  void Done(grpc::ClientContext* ctx);
  void Cancel();
  void Reset();

 private:
  absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_set<grpc::ClientContext*> calls_ ABSL_GUARDED_BY(mu_);
};

class WorkerClient {
 public:
  // `channels` makes the connections (TLS, token); used only here.
  explicit WorkerClient(
      const std::string& address,
      const ChannelFactory& channels = *ChannelFactory::Insecure(),
      int connections = 1);

  // Reads up to buffer.size() bytes of block `id` from `offset` (within the
  // block); returns the number read (short only at the block's end).
  // `source` (optional) receives where the worker found it (ram, nvme,
  // under_store); `ring_version` (optional) the ring version the worker last
  // heard from the master (0 if unknown). Errors: the worker's (NotFound,
  // FailedPrecondition, Unavailable...), DeadlineExceeded, Unavailable (worker
  // down).
  absl::StatusOr<size_t> ReadBlock(const BlockId& id, uint64_t offset,
                                   absl::Span<char> buffer,
                                   absl::Duration timeout = absl::Seconds(60),
                                   std::string* source = nullptr,
                                   uint64_t* ring_version = nullptr);

  // ReadBlock without the copy: up to `length` bytes as slices of the buffers
  // gRPC read the socket into, lent by the view. Same errors.
  absl::StatusOr<ByteView> ReadBlockView(
      const BlockId& id, uint64_t offset, uint64_t length,
      absl::Duration timeout = absl::Seconds(60), std::string* source = nullptr,
      uint64_t* ring_version = nullptr);

  // Asks the worker to fetch blocks; with `wait`, returns the first failure.
  // With `cancels`, the call is cancelled by its Cancel (Cancelled).
  absl::Status CacheBlocks(const std::vector<BlockId>& ids, bool wait,
                           absl::Duration timeout = absl::Minutes(5),
                           CallCancels* cancels = nullptr);
  absl::StatusOr<v1::GetStatsResponse> GetStats(
      absl::Duration timeout = absl::Seconds(10));
  // Drops the blocks `request` names (and those under its path prefix) from
  // the worker's tiers; returns how many. Needs the admin role.
  absl::StatusOr<uint64_t> EvictBlocks(const v1::EvictBlocksRequest& request);
  absl::StatusOr<uint64_t> EvictPrefix(const std::string& mount_path_prefix);

  // Writes (proto/worker.proto): sends one part, `data` in messages of at
  // most 1 MiB, under `header` (whose size must be data.size()). With
  // `owner` (what keeps data's bytes alive) they are sent from where they
  // are, without a copy (gRPC may hold `owner` past the call's end);
  // without it each message's bytes are copied once.
  absl::StatusOr<v1::WritePartResponse> WritePart(
      const v1::WritePartHeader& header, absl::string_view data,
      std::shared_ptr<const void> owner = nullptr,
      absl::Duration timeout = absl::Minutes(10));
  absl::StatusOr<v1::PublishWriteResponse> PublishWrite(
      const v1::PublishWriteRequest& request,
      absl::Duration timeout = absl::Minutes(2));

  const std::string& address() const { return address_; }

 private:
  size_t Next() { return next_++ % stubs_.size(); }
  // One ReadBlock call: copies into `buffer`, or, with `pieces`, collects up
  // to buffer.size() bytes there as slices.
  absl::StatusOr<size_t> Call(const BlockId& id, uint64_t offset,
                              absl::Span<char> buffer,
                              std::vector<grpc::Slice>* pieces,
                              absl::Duration timeout, std::string* source,
                              uint64_t* ring_version);

  const std::string address_;
  std::vector<std::unique_ptr<v1::WorkerData::Stub>> stubs_;
  std::vector<std::unique_ptr<grpc::GenericStub>> generic_stubs_;
  std::atomic<size_t> next_{0};
};

}  // namespace larder

#endif  // LARDER_CLIENT_WORKER_CLIENT_H_
