// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: leadership.h
// -----------------------------------------------------------------------------
//
// Which master leads. Only the leader serves: the others answer every RPC
// with the leader's address (MasterConnection follows it).
//
//  * SoleLeadership: the embedded default, one master that always leads.
//  * EtcdLeadership: several masters campaign for the key PREFIX/leader in
//    etcd. The winner created it with a lease of `lease_ttl` and keeps the
//    lease alive; the key's create revision is its term. It leads only while
//    its lease is surely alive: from the moment a renewal was sent, for the
//    lease's TTL. A leader that cannot renew (etcd down, the process paused
//    by SIGSTOP) stops leading when that time is up, before etcd lets anyone
//    else in, and re-campaigns. A master that stops cleanly revokes its
//    lease, so another takes over at once; one that dies is replaced when
//    its lease expires.
//  * EtcdStateStore: the StateStore over etcd. Every write is a transaction
//    guarded by the term (the leader key's create revision is still this
//    master's), so a leader that was paused and wakes up can never overwrite
//    its successor's state, whatever its clock says.
//
// Thread-safe.
#ifndef LARDER_MASTER_LEADERSHIP_H_
#define LARDER_MASTER_LEADERSHIP_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "master/etcd_client.h"
#include "master/state_store.h"

namespace larder {

class Leadership {
 public:
  virtual ~Leadership() = default;
  // This master's term while it leads; 0 when it does not.
  virtual int64_t Term() const = 0;
  // The leader's address as far as known; empty when there is none now.
  virtual std::string Leader() const = 0;
  // Why there is no leader ("cannot reach etcd at ..."); empty if unknown.
  virtual std::string Why() const = 0;
};

class SoleLeadership final : public Leadership {
 public:
  explicit SoleLeadership(std::string address) : address_(std::move(address)) {}
  int64_t Term() const override { return 1; }
  std::string Leader() const override { return address_; }
  std::string Why() const override { return ""; }

 private:
  const std::string address_;
};

class EtcdLeadership final : public Leadership {
 public:
  struct Options {
    std::string prefix = "/larder/";  // Keys: PREFIX + "leader", "state/...".
    std::string advertise;            // This master's address for clients.
    absl::Duration lease_ttl = absl::Seconds(3);
    // Called on the election thread when this master has won `term`; it
    // leads (Term() != 0) only once this returns OK. An error resigns.
    std::function<absl::Status(int64_t term)> on_elected;
    // Called on the election thread when this master stops leading.
    std::function<void()> on_deposed;
  };
  // `etcd` outlives this. Campaigning starts with Start().
  EtcdLeadership(EtcdClient* etcd, Options options);
  ~EtcdLeadership() override { Stop(); }
  void Start();
  // Stops campaigning; a leader steps down and revokes its lease (another
  // master takes over at once). Term() is 0 from then on.
  void Stop();

  int64_t Term() const override;
  std::string Leader() const override;
  std::string Why() const override;

  // A guarded write found the term over: stop leading now.
  void Lost();

  const std::string& leader_key() const { return key_; }
  const std::string& prefix() const { return options_.prefix; }

 private:
  using Clock = std::chrono::steady_clock;
  void Loop();
  // One round as a follower or a candidate; true if this master now leads.
  bool Campaign();
  // One round as the leader: renew the lease, check the key.
  void Renew();
  void StepDown(const std::string& why);
  // Leads `term` (until `valid_until` unless renewed) once on_elected is
  // done; false if on_elected failed.
  bool Elected(int64_t term, Clock::time_point valid_until);
  void SetFollower(std::string leader, std::string why);
  void Pause(absl::Duration d);

  EtcdClient* const etcd_;
  const Options options_;
  const std::string key_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> lost_{false};
  std::thread thread_;

  mutable absl::Mutex mu_;
  int64_t term_ ABSL_GUARDED_BY(mu_) = 0;  // Won, and on_elected done.
  Clock::time_point valid_until_ ABSL_GUARDED_BY(mu_);
  std::string leader_ ABSL_GUARDED_BY(mu_);
  std::string why_ ABSL_GUARDED_BY(mu_) = "no election held yet";
  // Owned by the election thread.
  int64_t lease_ = 0;
  Clock::time_point next_renewal_;
};

class EtcdStateStore final : public StateStore {
 public:
  // Values live under PREFIX + "state/". Both outlive this.
  EtcdStateStore(EtcdClient* etcd, EtcdLeadership* leadership)
      : etcd_(etcd),
        leadership_(leadership),
        root_(leadership->prefix() + "state/") {}

  absl::StatusOr<std::string> Get(const std::string& name) override;
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> List(
      const std::string& prefix) override;
  absl::Status Put(const std::string& name, const std::string& value) override;
  absl::Status Delete(const std::string& name) override;
  std::string Describe() const override;

  // Writes refused because the term was over.
  uint64_t refused() const { return refused_.load(); }

 private:
  // Runs `op` in a transaction that holds only while this master's term is
  // the leader key's create revision.
  absl::Status Guarded(etcdserverpb::RequestOp op, const std::string& name);

  EtcdClient* const etcd_;
  EtcdLeadership* const leadership_;
  const std::string root_;
  std::atomic<uint64_t> refused_{0};
};

}  // namespace larder

#endif  // LARDER_MASTER_LEADERSHIP_H_
