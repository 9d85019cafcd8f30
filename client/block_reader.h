// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: block_reader.h
// -----------------------------------------------------------------------------
//
// Reads one block (or part of one) for the client library, with failover in
// one place: the block's candidates in the router's order, by short-circuit
// for a worker on this node and gRPC for the others; again after a ring
// refresh when every candidate failed; then, unless that fallback is off,
// straight from the under-store. Internal to the client library.
//
// Three sinks share that order: Read copies into the caller's buffer,
// View lends gRPC's buffers (or a buffer of its own), Piece lends a
// slice of the local worker's memory when it can.
//
// Thread-safe.
#ifndef LARDER_CLIENT_BLOCK_READER_H_
#define LARDER_CLIENT_BLOCK_READER_H_

#include <atomic>
#include <functional>
#include <optional>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/local_leases.h"
#include "client/router.h"
#include "common/block_key.h"
#include "larder/client.h"
#include "proto/master.pb.h"
#include "understore/mount_store.h"

namespace larder {

class BlockReader {
 public:
  struct Options {
    int max_workers_per_block = ClientOptions{}.max_workers_per_block;
    absl::Duration worker_timeout = ClientOptions{}.worker_timeout;
    bool under_store_fallback = ClientOptions{}.under_store_fallback;
    // The under-store options of the direct-read fallback.
    UnderStoreOptions fallback;
  };
  // What the reader asks of the rest of the client.
  struct Hooks {
    // Refreshes the ring now (every candidate failed).
    std::function<absl::Status()> refresh_ring;
    // A worker's answer carried the ring version it last heard of.
    std::function<void(uint64_t)> note_ring_version;
    // The mount at `path` (for the under-store fallback).
    std::function<std::optional<v1::MountEntry>(const std::string& path)> mount;
  };
  struct Counters {
    uint64_t short_circuit = 0, grpc = 0, under_store = 0, failovers = 0;
  };

  BlockReader(Options options, Router& router, LocalLeases& local, Hooks hooks);

  // Reads [offset, offset + out.size()) of block `id` into `out`.
  absl::Status Read(const BlockId& id, uint64_t offset, absl::Span<char> out);
  // The same as a view: lent from gRPC's buffers when it streams from a
  // worker, else read into a buffer the view holds.
  absl::StatusOr<ByteView> View(const BlockId& id, uint64_t offset,
                                uint64_t length);
  // The same as a read piece: a slice of the lease of the worker on this
  // node when it owns (or, after a ring change, holds) the block; else a
  // view, from the other candidates with failover.
  absl::StatusOr<ReadPiece> Piece(const BlockId& id, uint64_t offset,
                                  uint64_t length);
  // The object of `first` (block 0) lent whole by the worker on this node,
  // if that worker owns every one of its `blocks` blocks.
  absl::StatusOr<LocalSlice> LocalObject(const BlockId& first, uint64_t blocks);
  // LocalObject for several objects (block 0 of each), leased for `lease`,
  // in one exchange per 64 with the worker on this node. In order.
  std::vector<absl::StatusOr<LocalSlice>> LocalObjects(
      const std::vector<BlockId>& firsts, absl::Duration lease);

  // A block read from a lease the caller held (a batch).
  void CountShortCircuit() { ++sc_blocks_; }
  Counters counters() const;

 private:
  // The short-circuit socket of the worker on this node if it owns every
  // block of the object of `first` (block 0); else FailedPrecondition.
  absl::StatusOr<std::string> LocalOwner(const BlockId& first);
  // Leases granted by the worker at `socket` as slices whose holds give
  // them back (one message each) when dropped; a refusal is noted.
  std::vector<absl::StatusOr<LocalSlice>> ObjectSlices(
      const std::string& socket, const std::vector<BlockId>& firsts,
      absl::Duration lease);

  // The failover order for one block of `want` bytes: `from_worker` on its
  // candidates; again after a ring refresh if all fail; then
  // `from_under_store` unless that fallback is off.
  absl::Status Failover(
      const BlockId& id, uint64_t want,
      absl::FunctionRef<absl::StatusOr<size_t>(const Router::Candidate&)>
          from_worker,
      absl::FunctionRef<absl::Status()> from_under_store);
  absl::StatusOr<size_t> FromWorker(const Router::Candidate& c,
                                    const BlockId& id, uint64_t offset,
                                    absl::Span<char> out);
  absl::Status FromUnderStore(const BlockId& id, uint64_t offset,
                              absl::Span<char> out);

  const Options options_;
  Router& router_;
  LocalLeases& local_;
  const Hooks hooks_;
  // Mounts opened for the under-store fallback.
  MountStores fallback_stores_;
  std::atomic<uint64_t> sc_blocks_{0}, grpc_blocks_{0}, under_store_blocks_{0},
      failovers_{0};
};

}  // namespace larder

#endif  // LARDER_CLIENT_BLOCK_READER_H_
