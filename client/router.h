// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: router.h
// -----------------------------------------------------------------------------
//
// Which workers to read a block from, in the order to try them. Internal to
// the client library.
//
// The ring is an immutable snapshot (the master's workers, the hash ring built
// from them and one gRPC client per worker) swapped atomically when the
// master's ring changes: routing a block takes no lock. Two things reorder a
// block's owners:
//
//  - Suspects. A worker that just failed is tried after the others for
//    `suspect_for` (until the master's ring drops it, or it answers again),
//    so a dead owner costs one failed connection, not one per block.
//  - The rebalance window. After a ring change (a worker joined, left or came
//    back), blocks may be cached on a worker that no longer owns them. For
//    `rebalance_window` after each change the master's placement index is
//    asked where a block is (Locate, one lookup serving every reader for a
//    while), and a live worker that holds it is tried before the new owner,
//    which would refetch it from the under-store.
//
// Thread-safe.
#ifndef LARDER_CLIENT_ROUTER_H_
#define LARDER_CLIENT_ROUTER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/worker_client.h"
#include "common/block_key.h"
#include "common/ring.h"
#include "proto/master.pb.h"

namespace larder {

// The ring as the master last described it. Immutable once installed.
struct RingSnapshot {
  uint64_t version = 0;
  uint64_t epoch = 0;  // The master run's (Ring.metadata_epoch).
  absl::Time changed_at = absl::InfinitePast();
  HashRing ring;
  std::vector<v1::WorkerInfo> workers;
  // workers[i]'s gRPC client (carried over from the previous snapshot for an
  // address it already had).
  std::vector<std::shared_ptr<WorkerClient>> clients;
};

class Router {
 public:
  struct Options {
    // This node's name: a worker on it with a short-circuit socket is read
    // through that socket.
    std::string node;
    absl::Duration rebalance_window = absl::Minutes(10);
    absl::Duration suspect_for = absl::Seconds(5);
  };
  // The master's placement index (Locate).
  using LocateFn = std::function<absl::StatusOr<v1::LocateResponse>(
      const v1::LocateRequest&)>;
  // Whether the worker at a short-circuit socket refused this process.
  using RefusedFn = std::function<bool(const std::string& socket)>;
  // A gRPC client for a worker address.
  using ConnectFn =
      std::function<std::shared_ptr<WorkerClient>(const std::string& address)>;

  Router(Options options, LocateFn locate, RefusedFn refused,
         ConnectFn connect);

  // Uses `ring` from now on (clients of workers already known are kept),
  // unless it is older than the one in use: the same master run's, with a
  // lower version (a slow reply that lost a race with a newer one). Returns
  // whether it was installed with a version other than the one in use.
  bool Install(const v1::Ring& ring);
  std::shared_ptr<const RingSnapshot> snapshot() const {
    return ring_.load(std::memory_order_acquire);
  }
  uint64_t version() const { return snapshot()->version; }

  // One worker to try.
  struct Candidate {
    const v1::WorkerInfo* worker;
    WorkerClient* client;
    bool local;  // Read through its short-circuit socket.
  };
  // Candidates for one block, in order; they point into `ring`, which the
  // route keeps alive.
  struct Route {
    std::shared_ptr<const RingSnapshot> ring;
    absl::InlinedVector<Candidate, 4> candidates;
    bool empty() const { return candidates.empty(); }
    const Candidate& front() const { return candidates.front(); }
  };

  // The block's first `n` owners, in ring order (in `ring`, or the current
  // ring).
  Route Owners(std::shared_ptr<const RingSnapshot> ring, const BlockId& id,
               int n) const;
  Route Owners(const BlockId& id, int n) const {
    return Owners(snapshot(), id, n);
  }
  // The order to read the block in: its first `n` owners, live holders
  // first in a rebalance window, suspects last.
  Route Candidates(const BlockId& id, int n);
  // `owners` (from Owners) in the order Candidates gives.
  Route Order(const BlockId& id, Route owners);

  // `c` failed with `why`: try it after the others for a while.
  void MarkSuspect(const Candidate& c, const absl::Status& why);
  // `c` served a read: a suspect no longer (its blocks go to it first
  // again, not to workers that do not cache them).
  void Answered(const Candidate& c);
  // What Candidates would ask the master block by block, asked in one Locate
  // per 1,000 blocks. Nothing to do outside a rebalance window.
  void LocateAhead(absl::Span<const BlockId* const> ids);

  // Whether `w` is on this node and serves short-circuit to this process.
  bool Local(const v1::WorkerInfo& w) const;
  // The short-circuit socket of a worker on this node; "" when none.
  std::string LocalSocket() const;

 private:
  bool InRebalanceWindow(const RingSnapshot& ring) const;
  // Which workers hold the block by the placement index (cached); false when
  // the master cannot say.
  bool Holders(const std::string& key, const std::string& owner,
               std::vector<std::string>* holders);
  void RememberLocated(const std::string& key,
                       const std::vector<std::string>& holders,
                       const std::string& owner);

  const Options options_;
  const LocateFn locate_;
  const RefusedFn refused_;
  const ConnectFn connect_;
  std::atomic<std::shared_ptr<const RingSnapshot>> ring_;
  absl::Mutex install_mu_;  // One Install at a time.

  // Until when each suspect is tried last. `suspects_until_ns_` is the latest
  // of those times: once it has passed, ordering takes no lock.
  std::atomic<int64_t> suspects_until_ns_{0};
  absl::Mutex suspect_mu_;
  absl::flat_hash_map<std::string, absl::Time> suspect_until_
      ABSL_GUARDED_BY(suspect_mu_);

  struct Located {
    std::vector<std::string> holders;
    absl::Time expires;
  };
  absl::Mutex located_mu_;
  absl::flat_hash_map<std::string, Located> located_
      ABSL_GUARDED_BY(located_mu_);
};

}  // namespace larder

#endif  // LARDER_CLIENT_ROUTER_H_
