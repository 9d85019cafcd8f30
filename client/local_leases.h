// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: local_leases.h
// -----------------------------------------------------------------------------
//
// A client's ties to the workers on its node: a pool of short-circuit
// connections per socket (one request at a time each, so parallel block
// reads do not queue behind each other), the sockets that refused this
// process (read over gRPC from then on), and the block leases it keeps.
//
// Leases are kept for a while, so a reader that reads a block in pieces
// (FUSE asks for 1 MiB at a time) opens it once. The fd stays valid even
// after the worker evicts the block (a sealed memfd or an unlinked file
// keeps its bytes), so a kept lease never returns wrong data; it only keeps
// the memory alive a little longer. Bounded by count (kKept) and age
// (kKeep).
//
// Thread-safe, with locks of its own (no client-wide lock).
#ifndef LARDER_CLIENT_LOCAL_LEASES_H_
#define LARDER_CLIENT_LOCAL_LEASES_H_

#include <atomic>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/short_circuit_client.h"
#include "common/block_key.h"

namespace larder {

// Whether a failed block read says the worker failed (try the next one),
// not the object (NotFound, FailedPrecondition...: every worker would say
// the same).
bool WorkerFailure(const absl::Status& s);

class LocalLeases {
 public:
  static constexpr size_t kKept = 32;
  static constexpr absl::Duration kKeep =
      absl::Seconds(10);  // The worker's lease lasts 30 s.
  // After an exchange with a worker got no answer within the timeout, its
  // socket is not asked again for this long: each new connection would
  // wait the whole timeout again (a stopped worker's kernel still accepts
  // them), so its blocks are read elsewhere meanwhile.
  static constexpr absl::Duration kQuietAfterSilence = absl::Seconds(10);

  // `timeout`: how long an exchange with a worker waits for its answer
  // (ShortCircuitClient::Connect).
  explicit LocalLeases(
      absl::Duration timeout = ShortCircuitClient::kDefaultTimeout)
      : timeout_(timeout) {}

  // One lease, released (on the connection that granted it: lease ids are
  // per connection) when its last holder drops it.
  struct Lease {
    Lease(std::shared_ptr<ShortCircuitClient> c, ShortCircuitClient::Lease l)
        : conn(std::move(c)), lease(std::move(l)) {}
    ~Lease() { conn->Release(lease).IgnoreError(); }
    const std::shared_ptr<ShortCircuitClient> conn;
    ShortCircuitClient::Lease lease;
    absl::Time expires = absl::Now() + kKeep;
  };

  // Whether the worker at `socket` refused this process (its uid/gid is not
  // allowed there).
  bool Refused(const std::string& socket) const;
  // Notes (and logs once) that it did: that worker is read over gRPC.
  void NoteRefused(const std::string& socket, const absl::Status& why);

  // A connection to `socket` from the pool, or a new one. Errors: those of
  // ShortCircuitClient::Connect (a socket served by an untrusted user is
  // noted as refused), Unavailable (the worker left an exchange unanswered
  // less than kQuietAfterSilence ago).
  absl::StatusOr<std::shared_ptr<ShortCircuitClient>> Take(
      const std::string& socket, bool* reused = nullptr);
  // Back to the pool (at most 16 idle per socket); a broken connection
  // (ShortCircuitClient::broken) is dropped instead.
  void Give(const std::string& socket, std::shared_ptr<ShortCircuitClient> c);

  // `ids` opened on a connection to `socket` (one exchange per 64 blocks);
  // none when the socket cannot be reached or refuses this process.
  struct Opened {
    std::shared_ptr<ShortCircuitClient> conn;
    std::vector<absl::StatusOr<ShortCircuitClient::Lease>> leases;
  };
  std::optional<Opened> OpenOn(const std::string& socket,
                               const std::vector<BlockId>& ids);
  // Opens `ids` in one exchange and keeps the leases for the reads to come;
  // failures are left to those reads.
  void LeaseAhead(const std::string& socket, const std::vector<BlockId>& ids);

  // A lease on `id` from the worker at `socket`: kept, or opened now; null
  // (and no error) when the socket cannot be reached or the worker has no
  // room for another connection: read that worker over gRPC. A pooled
  // connection that the worker closed (it restarted since) is tried again
  // once on a new one. Errors are the worker's answer.
  absl::StatusOr<std::shared_ptr<Lease>> From(const std::string& socket,
                                              const BlockId& id);
  // A kept, unexpired lease on `id`, or null.
  std::shared_ptr<Lease> Find(const std::string& socket, const BlockId& id);
  void Keep(const std::string& socket, const BlockId& id,
            std::shared_ptr<Lease> lease);

 private:
  static std::string Key(const std::string& socket, const BlockId& id);
  bool FrontExpired(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(lease_mu_);

  const absl::Duration timeout_;
  std::atomic<bool> any_refused_{false};
  mutable absl::Mutex refused_mu_;
  absl::flat_hash_set<std::string> refused_ ABSL_GUARDED_BY(refused_mu_);
  absl::Mutex pool_mu_;
  absl::flat_hash_map<std::string,
                      std::vector<std::shared_ptr<ShortCircuitClient>>>
      idle_ ABSL_GUARDED_BY(pool_mu_);
  // Sockets whose worker left an exchange unanswered: not asked until then.
  absl::flat_hash_map<std::string, absl::Time> quiet_until_
      ABSL_GUARDED_BY(pool_mu_);
  absl::Mutex lease_mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Lease>> leases_
      ABSL_GUARDED_BY(lease_mu_);
  std::deque<std::string> order_ ABSL_GUARDED_BY(lease_mu_);
};

}  // namespace larder

#endif  // LARDER_CLIENT_LOCAL_LEASES_H_
