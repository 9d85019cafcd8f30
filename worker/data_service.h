// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: data_service.h
// -----------------------------------------------------------------------------
//
// The gRPC WorkerData service (proto/worker.proto) over a BlockStore, on
// gRPC's callback API. A RAM hit is answered on the gRPC thread; a miss is
// handed to a bounded executor, so waiting for an under-store never blocks
// gRPC's own threads; a block on NVMe is waited for on threads of its own
// (kNvmeWaitThreads), so a store that hangs, holding every executor thread
// with misses, does not hold up what the worker has on disk. Deadlines and
// cancellation are honoured while waiting; a cancelled read leaves the fetch
// running for the other readers.
//
// ReadBlock is zero-copy: it is a raw method whose responses are ByteBuffers
// made of a few bytes of protobuf framing (ReadBlockResponse wire format) and
// a slice that points into the block's memory, holding a reference to the
// block until gRPC has written it. Chunks of `chunk_bytes` (1 MiB) unless the
// request asks for other (max_chunk_bytes, within [kMinChunkBytes,
// kMaxChunkBytes]); one write in flight at a time (flow control is gRPC's).
//
// Thread-safe. `store`, `metrics` and `executor` must outlive the service.
#ifndef LARDER_WORKER_DATA_SERVICE_H_
#define LARDER_WORKER_DATA_SERVICE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/block_proto.h"
#include "common/security.h"
#include "common/thread_pool.h"
#include "proto/master.pb.h"
#include "proto/worker.grpc.pb.h"
#include "worker/block_store.h"
#include "worker/peers.h"
#include "worker/worker_mounts.h"
#include "worker/writes.h"

namespace larder {

class DataService final
    : public v1::WorkerData::WithRawCallbackMethod_WritePart<
          v1::WorkerData::WithRawCallbackMethod_ReadBlock<
              v1::WorkerData::CallbackService>> {
 public:
  static constexpr size_t kMinChunkBytes = 64 << 10;
  static constexpr size_t kMaxChunkBytes = 4 << 20;

  // `ring_version` (may be null: standalone) is the ring version the worker
  // last heard from the master; ReadBlock passes it on to clients. `auth`
  // checks each caller's role: EvictBlocks needs admin, the rest reader.
  // Reads and prefetches are allowed per mount (WorkerMounts::MayRead with
  // the caller's token scope, or, for a caller without credentials, the
  // mounts' and files' "other" bits).
  DataService(BlockStore* store, WorkerMetrics* metrics, ThreadPool* executor,
              const Authorizer* auth, const WorkerMounts* mounts,
              const std::atomic<uint64_t>* ring_version = nullptr,
              size_t chunk_bytes = 1 << 20)
      : store_(store),
        metrics_(metrics),
        executor_(executor),
        auth_(auth),
        mounts_(mounts),
        ring_version_(ring_version),
        chunk_bytes_(chunk_bytes) {}

  grpc::ServerWriteReactor<grpc::ByteBuffer>* ReadBlock(
      grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* CacheBlocks(
      grpc::CallbackServerContext* context,
      const v1::CacheBlocksRequest* request,
      v1::CacheBlocksResponse* response) override;
  grpc::ServerUnaryReactor* EvictBlocks(
      grpc::CallbackServerContext* context,
      const v1::EvictBlocksRequest* request,
      v1::EvictBlocksResponse* response) override;
  grpc::ServerUnaryReactor* GetStats(grpc::CallbackServerContext* context,
                                     const v1::GetStatsRequest* request,
                                     v1::GetStatsResponse* response) override;

  // Writes (worker/writes.h): WritePart keeps blocks in `staging` and
  // uploads parts on `uploads` (threads of their own, so uploads never
  // hold up the reads' misses). Without them writes are UNIMPLEMENTED.
  // `channels` reach the other workers, to which WritePart and
  // PublishWrite send the blocks they own, when `peers` lists them (both
  // may be null: a standalone worker sends nothing). All must outlive the
  // service.
  // `intake` parses WritePart's messages and copies their data (not gRPC's
  // threads, which the reads share); it must not be `uploads`, whose tasks
  // wait for other workers' intake. `committed` answers what the master
  // committed under a write id (Master.GetCommittedWrite): PublishWrite
  // publishes nothing it does not confirm (null: nothing is published).
  using CommittedLookup = std::function<absl::StatusOr<v1::CommittedWrite>(
      const std::string& write_id)>;
  void EnableWrites(WriteStaging* staging, ThreadPool* uploads,
                    ThreadPool* intake,
                    std::shared_ptr<const ChannelFactory> channels,
                    PeerSet* peers, CommittedLookup committed) {
    staging_ = staging;
    uploads_ = uploads;
    intake_ = intake;
    channels_ = std::move(channels);
    peers_ = peers;
    committed_ = std::move(committed);
    publishes_ =
        std::make_unique<ThreadPool>(kPublishThreads, "larder-publish");
  }
  // Raw (write_part_wire.h): requests are parsed without protobuf's copy
  // of their data, the response is a serialized WritePartResponse.
  grpc::ServerReadReactor<grpc::ByteBuffer>* WritePart(
      grpc::CallbackServerContext* context,
      grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* PublishWrite(
      grpc::CallbackServerContext* context,
      const v1::PublishWriteRequest* request,
      v1::PublishWriteResponse* response) override;

 private:
  friend class ReadBlockReactor;
  friend class WritePartReactor;
  // Sends forwarded kept blocks to their owners, then publishes them there;
  // returns how many they cached.
  uint32_t Forward(const v1::PublishWriteRequest& request,
                   WriteStaging::Forwarded& forwarded);
  // Sends `blocks` of the write to the worker at `address` to be kept
  // there (WritePart without upload), if it is a peer; returns the indexes
  // it kept.
  std::vector<uint64_t> SendKept(
      const std::string& address, const v1::WriteHandle& handle,
      const std::vector<std::pair<uint64_t, WriteStaging::Block>>& blocks);
  WriteStaging* staging_ = nullptr;
  PeerSet* peers_ = nullptr;
  ThreadPool* uploads_ = nullptr;
  ThreadPool* intake_ = nullptr;
  std::shared_ptr<const ChannelFactory> channels_;
  CommittedLookup committed_;
  BlockStore* const store_;
  WorkerMetrics* const metrics_;
  ThreadPool* const executor_;
  const Authorizer* const auth_;
  const WorkerMounts* const mounts_;
  const std::atomic<uint64_t>* const ring_version_;
  const size_t chunk_bytes_;
  // Publishes that forward nothing: each asks the master first (up to
  // 10 s in a failover), which must hold up neither the parts' intake nor
  // the uploads. Joined before the rest (members after it go first).
  static constexpr int kPublishThreads = 4;
  std::unique_ptr<ThreadPool> publishes_;
  // ReadBlock's waits for blocks on NVMe (a disk read each, never the
  // store's). Last: joined first, while the rest is still there.
  static constexpr int kNvmeWaitThreads = 16;
  std::unique_ptr<ThreadPool> nvme_waits_ =
      store_->has_nvme()
          ? std::make_unique<ThreadPool>(kNvmeWaitThreads, "larder-rpc-nvme")
          : nullptr;
};

}  // namespace larder

#endif  // LARDER_WORKER_DATA_SERVICE_H_
