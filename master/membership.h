// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: membership.h
// -----------------------------------------------------------------------------
//
// Which workers are alive, the ring built from them, and where blocks are
// cached (the placement index).
//
// Workers register (with a full report of the blocks they hold) and then
// heartbeat (with the blocks added and removed since). A worker whose last
// heartbeat is older than `heartbeat_timeout` leaves the ring; a returning
// worker rejoins under its id. Every change of the live set bumps the ring
// version. After a master restart the index is rebuilt from the full reports
// of re-registering workers (like block reports in HDFS). The index itself
// is a PlacementIndex (compact, sharded): a report of a million blocks does
// not hold up lookups.
//
// Thread-safe.
#ifndef LARDER_MASTER_MEMBERSHIP_H_
#define LARDER_MASTER_MEMBERSHIP_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/block_key.h"
#include "common/block_proto.h"
#include "common/ring.h"
#include "master/placement_index.h"
#include "proto/master.pb.h"

namespace larder {

class Membership {
 public:
  // `concurrent_reports`: large block reports (registrations, and
  // heartbeats with more than kLargeReport changes) applied to the index at
  // once; 0 = half the cores, at least one. Applying a report is CPU-bound:
  // more at once than the cores gains nothing and stalls every other RPC (10
  // reports of a million blocks at once on 2 cores: Locate p99 130 ms, one
  // at a time: 5 ms; bench/master_scale_bench).
  explicit Membership(absl::Duration heartbeat_timeout,
                      int vnodes = HashRing::kDefaultVnodes,
                      int concurrent_reports = 0);
  static constexpr size_t kLargeReport = 4096;

  // Returns the ring version after the change.
  uint64_t Register(const v1::WorkerInfo& info, std::vector<BlockKey> blocks,
                    absl::Time now);
  // Takes over the ring a previous leader (or this master before a restart)
  // stored: its workers count as alive, without blocks, until they
  // re-register with their full reports (their heartbeats are answered
  // "re-register") or stay silent past the timeout. The ring is the same as
  // before, so clients keep routing every block where it was; the version
  // goes on from `ring`'s. Replaces what the membership held.
  void Restore(const v1::Ring& ring, absl::Time now);

  // False if the worker is unknown (it must register again).
  bool Heartbeat(const std::string& id, std::vector<BlockKey> added,
                 const std::vector<BlockKey>& removed, absl::Time now);
  // Drops workers silent for longer than the timeout; returns their ids.
  std::vector<std::string> Expire(absl::Time now);
  // Counts every live worker as heard from at `now`: a master that leads
  // again after refusing heartbeats while deposed (the same term, its state
  // kept) gives them a whole timeout to reach it, instead of dropping all.
  void Grace(absl::Time now);

  v1::Ring Ring() const;
  uint64_t version() const;
  // The live ring with its workers, for routing inside the master.
  std::pair<HashRing, std::vector<v1::WorkerInfo>> Snapshot() const;

  // Workers (live ones) known to cache `key`.
  std::vector<std::string> Locate(const BlockKey& key) const;
  // Blocks the index holds for a worker.
  uint64_t BlocksOf(const std::string& id) const;
  // Every worker registered since the last Restore (live or not), with
  // liveness.
  std::vector<std::pair<v1::WorkerInfo, bool>> Workers() const;

  // Block replicas in the placement index, and the bytes it takes: its
  // tables, and each worker's list of the blocks it reported.
  uint64_t replicas() const { return index_.replicas(); }
  uint64_t IndexBytes() const;

 private:
  // A worker, from its first registration on, under the same number (its
  // holder number in the index) for the life of the process.
  struct Worker {
    explicit Worker(PlacementIndex::Holder n) : holder(n) {}
    const PlacementIndex::Holder holder;
    // Held across a change of this worker's blocks (register, heartbeat,
    // expiry, restore), so that its index entries and its `reported` list
    // agree. Taken before mu_, never while another worker's is held.
    absl::Mutex report_mu;
    // Every key added to the index for this worker since its last full
    // report, in batches: the report, then each heartbeat's additions,
    // merged as they grow (at most log2(n) batches). A key removed since, or
    // added twice, stays until Compact() (when the list is twice what the
    // index holds): this is what Forget() removes, with no per-worker hash
    // set beside the index (16 bytes a block, not ~40).
    std::vector<std::vector<BlockKey>> reported ABSL_GUARDED_BY(report_mu);
    uint64_t reported_keys ABSL_GUARDED_BY(report_mu) = 0;
    std::atomic<uint64_t> held{0};  // Keys the index holds for it.
    // Under mu_ (annotations cannot name the enclosing object's mutex).
    v1::WorkerInfo info;
    absl::Time last_heartbeat;
    bool listed = false;  // Shown by Workers().
    bool alive = false;
    bool report_pending = false;  // Restored: its full report is due.
  };

  // The worker registered as `id`, made if new.
  Worker* FindOrAdd(const std::string& id) ABSL_LOCKS_EXCLUDED(mu_);
  // Drops every block of `w` from the index.
  void Forget(Worker& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w.report_mu);
  void AddReported(Worker& w, std::vector<BlockKey> keys)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(w.report_mu);
  // Drops keys of `reported` the index no longer holds for `w`.
  void Compact(Worker& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w.report_mu);
  // The live set changed: a new ring version; `anything_cached`: whether the
  // placement index held any block when the change came (else no rebalance
  // window opens).
  void RingChanged(bool anything_cached = true)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Builds ring_workers_ and ring_members_ if the live set changed since.
  void BuildRingLists() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // A turn to apply a large report (one of concurrent_reports_), held for
  // the guard's life; `take` false: no turn (a small report).
  class ReportTurn {
   public:
    ReportTurn(Membership* m, bool take);
    ~ReportTurn();
    ReportTurn(const ReportTurn&) = delete;
    ReportTurn& operator=(const ReportTurn&) = delete;

   private:
    Membership* const m_;
  };

  const absl::Duration timeout_;
  const int vnodes_;
  const int concurrent_reports_;
  absl::Mutex gate_mu_;
  int reports_running_ ABSL_GUARDED_BY(gate_mu_) = 0;
  PlacementIndex index_;
  mutable absl::Mutex mu_;
  // workers_[holder - 1]; never shrinks (the index refers to workers by
  // holder number).
  std::vector<std::unique_ptr<Worker>> workers_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Worker*> by_id_ ABSL_GUARDED_BY(mu_);
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time changed_ ABSL_GUARDED_BY(mu_) = absl::UnixEpoch();
  // The live workers in ring order, and their ring weights, built when
  // asked after a change (1,000 workers joining at once change the ring
  // 1,000 times). The HashRing itself (thousands of virtual nodes per
  // worker, sorted) is built only when Snapshot() needs it, outside the
  // lock: built on every join, it made W workers registering at once cost
  // O(W^2) under the mutex (1,000 workers x 1,000 blocks: 232 s;
  // bench/master_scale_bench).
  mutable bool ring_lists_stale_ ABSL_GUARDED_BY(mu_) = true;
  mutable std::vector<v1::WorkerInfo> ring_workers_ ABSL_GUARDED_BY(mu_);
  mutable std::vector<RingMember> ring_members_ ABSL_GUARDED_BY(mu_);
  // Built from ring_members_ at ring_built_version_ (0: never).
  mutable HashRing ring_ ABSL_GUARDED_BY(mu_);
  mutable uint64_t ring_built_version_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace larder

#endif  // LARDER_MASTER_MEMBERSHIP_H_
