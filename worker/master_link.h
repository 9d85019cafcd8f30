// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: master_link.h
// -----------------------------------------------------------------------------
//
// A worker's tie to the master: registers (with a full report of the blocks
// it holds, in parts if it is large), heartbeats with the blocks added and
// removed since, re-registers
// when the master forgot it (a master restart), and keeps the worker's mount
// table equal to the master's (opening the under-store of each new mount).
// Runs on its own thread; a master that is down is retried every heartbeat,
// and the worker keeps serving meanwhile. With several masters (HA) it
// follows the leader, and registers again with a full report when a new
// leader does not know it yet.
#ifndef LARDER_WORKER_MASTER_LINK_H_
#define LARDER_WORKER_MASTER_LINK_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/master_connection.h"
#include "common/security.h"
#include "proto/master.grpc.pb.h"
#include "understore/options.h"
#include "worker/block_store.h"
#include "worker/worker_mounts.h"

namespace larder {

class MasterLink {
 public:
  struct Options {
    std::string master;  // host:port, or several: "a:7060,b:7060".
    // Makes the channel to the master (TLS, token); null = plain.
    std::shared_ptr<const ChannelFactory> channels;
    v1::WorkerInfo self;
    UnderStoreOptions store_options;
    // Updated with the ring version of every master response (may be null).
    std::atomic<uint64_t>* ring_version = nullptr;
    // Block keys per request to the master (256 KiB packed). A larger block
    // report goes in several requests: the registration, then heartbeats
    // adding the rest. Small requests let a master that receives every
    // worker's report at once (after a failover) answer clients in between:
    // 10 workers x 1M blocks at once on 2 cores, client RPC p99 7 ms at
    // 16,384 keys a request, 55 ms at 262,144, 146 ms at 1M
    // (bench/master_scale_bench --report_keys).
    size_t keys_per_request = 16384;
    // Called on the link's thread with the master's latest metadata
    // invalidation (Ring.metadata_epoch, invalidation_seq) after every
    // heartbeat: the node metadata cache follows it (may be empty).
    std::function<void(uint64_t epoch, uint64_t seq)> on_invalidations;
  };
  // `store` and `mounts` must outlive the link. Errors: InvalidArgument (a
  // bad master address).
  static absl::StatusOr<std::unique_ptr<MasterLink>> Start(
      Options options, BlockStore* store, WorkerMounts* mounts);
  ~MasterLink();

  // True once registered with the current master.
  bool registered() const { return registered_.load(); }

 private:
  MasterLink(Options options, BlockStore* store, WorkerMounts* mounts)
      : options_(std::move(options)), store_(store), mounts_(mounts) {}
  void Loop();
  absl::Status Register();
  // Heartbeats with `added` and `removed`, in as many requests as
  // keys_per_request needs (at least one). Stops at a failure or at a
  // "re-register" answer, which `resp` then holds.
  absl::Status Heartbeat(absl::Span<const BlockKey> added,
                         absl::Span<const BlockKey> removed,
                         v1::HeartbeatResponse* resp);
  // Brings the worker's mount table to the master's `version` (0: whatever
  // the master has now). Serialized by sync_mu_.
  absl::Status SyncMounts(uint64_t version) ABSL_LOCKS_EXCLUDED(sync_mu_);
  // `pulled` (if given): how asking the master for its table went, apart
  // from the mounts that then failed to open.
  absl::Status SyncMountsLocked(uint64_t version,
                                absl::Status* pulled = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(sync_mu_);

  const Options options_;
  BlockStore* const store_;
  WorkerMounts* const mounts_;
  std::unique_ptr<MasterConnection> master_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> registered_{false};
  absl::Mutex sync_mu_;
  uint64_t mounts_version_ ABSL_GUARDED_BY(sync_mu_) = 0;
  absl::Time last_forced_sync_ ABSL_GUARDED_BY(sync_mu_) = absl::InfinitePast();
  // How that pull went (the miss hook's answer).
  absl::Status last_forced_status_ ABSL_GUARDED_BY(sync_mu_);
  absl::Duration interval_ = absl::Seconds(1);
  std::thread thread_;
};

}  // namespace larder

#endif  // LARDER_WORKER_MASTER_LINK_H_
