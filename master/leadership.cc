// Copyright 2026 The Larder Authors.
#include "master/leadership.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace larder {
namespace {

using Clock = std::chrono::steady_clock;

Clock::duration ToClock(absl::Duration d) {
  return std::chrono::duration_cast<Clock::duration>(
      absl::ToChronoNanoseconds(d));
}

// "The key's create revision is `term`".
etcdserverpb::Compare TermHolds(const std::string& key, int64_t term) {
  etcdserverpb::Compare c;
  c.set_key(key);
  c.set_target(etcdserverpb::Compare::CREATE);
  c.set_result(etcdserverpb::Compare::EQUAL);
  c.set_create_revision(term);
  return c;
}

}  // namespace

EtcdLeadership::EtcdLeadership(EtcdClient* etcd, Options options)
    : etcd_(etcd),
      options_(std::move(options)),
      key_(options_.prefix + "leader") {}

void EtcdLeadership::Stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

void EtcdLeadership::Start() {
  thread_ = std::thread([this] { Loop(); });
}

int64_t EtcdLeadership::Term() const {
  absl::MutexLock lock(&mu_);
  return term_ != 0 && Clock::now() < valid_until_ ? term_ : 0;
}

std::string EtcdLeadership::Leader() const {
  absl::MutexLock lock(&mu_);
  if (term_ != 0) return Clock::now() < valid_until_ ? options_.advertise : "";
  return leader_;
}

std::string EtcdLeadership::Why() const {
  absl::MutexLock lock(&mu_);
  return why_;
}

void EtcdLeadership::Lost() { lost_ = true; }

void EtcdLeadership::Pause(absl::Duration d) {
  const absl::Time until = absl::Now() + d;
  while (!stopping_ && !lost_ && absl::Now() < until)
    absl::SleepFor(absl::Milliseconds(20));
}

void EtcdLeadership::SetFollower(std::string leader, std::string why) {
  absl::MutexLock lock(&mu_);
  if (leader != leader_) {
    LARDER_LOG(INFO, "master.follower")
        .Field("leader", leader.empty() ? "none" : leader)
        .Field("why", why);
  }
  leader_ = std::move(leader);
  why_ = std::move(why);
}

void EtcdLeadership::Loop() {
  const absl::Duration poll =
      std::min(absl::Milliseconds(250), options_.lease_ttl / 6);
  while (!stopping_) {
    bool leading;
    {
      absl::MutexLock lock(&mu_);
      leading = term_ != 0;
    }
    if (!leading) {
      lost_ = false;
      if (!Campaign()) Pause(poll);
      continue;
    }
    while (!stopping_ && !lost_ && Clock::now() < next_renewal_)
      absl::SleepFor(absl::Milliseconds(20));
    if (stopping_) break;
    if (lost_) {
      StepDown("a guarded write found another master's term in etcd");
      continue;
    }
    Renew();
  }
  bool leading;
  {
    absl::MutexLock lock(&mu_);
    leading = term_ != 0;
  }
  if (leading) StepDown("stopping");
  // The key goes with the lease: another master takes over at once.
  if (lease_ != 0) etcd_->RevokeLease(lease_).IgnoreError();
}

bool EtcdLeadership::Campaign() {
  absl::StatusOr<etcdserverpb::RangeResponse> r = etcd_->Range(key_);
  if (!r.ok()) {
    SetFollower("", std::string(r.status().message()));
    return false;
  }
  if (r->kvs_size() > 0) {
    const etcdserverpb::KeyValue& kv = r->kvs(0);
    if (lease_ != 0 && kv.lease() == lease_) {
      // This master's own key, from a term it stopped leading because it
      // could not renew (etcd was down): take it back while the lease lives.
      const Clock::time_point sent = Clock::now();
      absl::StatusOr<absl::Duration> ttl = etcd_->KeepAlive(lease_);
      if (ttl.ok() && *ttl > absl::ZeroDuration())
        return Elected(kv.create_revision(),
                       sent + ToClock(std::min(*ttl, options_.lease_ttl)));
    }
    SetFollower(kv.value(), "");
    return false;
  }
  // Nobody leads: campaign with a fresh lease.
  if (lease_ != 0) {
    etcd_->RevokeLease(lease_).IgnoreError();
    lease_ = 0;
  }
  const Clock::time_point sent = Clock::now();
  absl::StatusOr<int64_t> lease = etcd_->GrantLease(options_.lease_ttl);
  if (!lease.ok()) {
    SetFollower("", std::string(lease.status().message()));
    return false;
  }
  lease_ = *lease;
  etcdserverpb::TxnRequest txn;
  *txn.add_compare() = TermHolds(key_, 0);  // The key does not exist.
  etcdserverpb::PutRequest* put = txn.add_success()->mutable_request_put();
  put->set_key(key_);
  put->set_value(options_.advertise);
  put->set_lease(lease_);
  txn.add_failure()->mutable_request_range()->set_key(key_);
  absl::StatusOr<etcdserverpb::TxnResponse> t = etcd_->Txn(txn);
  if (!t.ok() || !t->succeeded()) {
    std::string leader;
    if (t.ok() && t->responses_size() > 0 &&
        t->responses(0).response_range().kvs_size() > 0)
      leader = t->responses(0).response_range().kvs(0).value();
    etcd_->RevokeLease(lease_).IgnoreError();
    lease_ = 0;
    SetFollower(std::move(leader),
                t.ok() ? "" : std::string(t.status().message()));
    return false;
  }
  return Elected(t->header().revision(), sent + ToClock(options_.lease_ttl));
}

bool EtcdLeadership::Elected(int64_t term, Clock::time_point valid_until) {
  {
    absl::MutexLock lock(&mu_);
    term_ = term;
    valid_until_ = valid_until;
    leader_ = options_.advertise;
    why_.clear();
  }
  next_renewal_ = Clock::now() + ToClock(options_.lease_ttl / 3);
  LARDER_LOG(INFO, "master.elected")
      .Field("term", term)
      .Field("address", options_.advertise);
  absl::Status st =
      options_.on_elected ? options_.on_elected(term) : absl::OkStatus();
  if (!st.ok()) {
    StepDown(absl::StrCat("could not take over: ", st.message()));
    etcd_->RevokeLease(lease_).IgnoreError();
    lease_ = 0;
    Pause(absl::Seconds(1));
    return false;
  }
  return true;
}

void EtcdLeadership::Renew() {
  const Clock::time_point sent = Clock::now();
  absl::StatusOr<absl::Duration> ttl = etcd_->KeepAlive(lease_);
  int64_t term;
  {
    absl::MutexLock lock(&mu_);
    term = term_;
  }
  if (ttl.ok() && *ttl > absl::ZeroDuration()) {
    // The key must still be this term's (nobody deleted it by hand).
    absl::StatusOr<etcdserverpb::RangeResponse> r = etcd_->Range(key_);
    if (r.ok() && (r->kvs_size() == 0 || r->kvs(0).create_revision() != term)) {
      StepDown("the leader key in etcd is gone or another master's");
      return;
    }
    absl::MutexLock lock(&mu_);
    valid_until_ = sent + ToClock(std::min(*ttl, options_.lease_ttl));
    next_renewal_ = sent + ToClock(options_.lease_ttl / 3);
    return;
  }
  if (ttl.ok()) {
    lease_ = 0;
    StepDown("the leader's lease expired in etcd");
    return;
  }
  Clock::time_point until;
  {
    absl::MutexLock lock(&mu_);
    until = valid_until_;
  }
  if (Clock::now() >= until) {
    StepDown(absl::StrCat("cannot renew the leader's lease: ",
                          ttl.status().message()));
  } else {
    next_renewal_ = Clock::now() + std::chrono::milliseconds(200);
  }
}

void EtcdLeadership::StepDown(const std::string& why) {
  {
    absl::MutexLock lock(&mu_);
    if (term_ == 0) return;
    LARDER_LOG(WARNING, "master.stepped_down")
        .Field("term", term_)
        .Field("why", why);
    term_ = 0;
    leader_.clear();
    why_ = why;
  }
  if (options_.on_deposed) options_.on_deposed();
}

// --- EtcdStateStore ---------------------------------------------------------

absl::StatusOr<std::string> EtcdStateStore::Get(const std::string& name) {
  absl::StatusOr<etcdserverpb::RangeResponse> r = etcd_->Range(root_ + name);
  if (!r.ok()) return r.status();
  if (r->kvs_size() == 0) return absl::NotFoundError(root_ + name);
  return r->kvs(0).value();
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>>
EtcdStateStore::List(const std::string& prefix) {
  absl::StatusOr<etcdserverpb::RangeResponse> r =
      etcd_->Range(root_ + prefix, /*prefix=*/true);
  if (!r.ok()) return r.status();
  std::vector<std::pair<std::string, std::string>> out;
  for (const etcdserverpb::KeyValue& kv : r->kvs())
    out.emplace_back(kv.key().substr(root_.size()), kv.value());
  return out;
}

absl::Status EtcdStateStore::Put(const std::string& name,
                                 const std::string& value) {
  etcdserverpb::RequestOp op;
  op.mutable_request_put()->set_key(root_ + name);
  op.mutable_request_put()->set_value(value);
  return Guarded(std::move(op), name);
}

absl::Status EtcdStateStore::Delete(const std::string& name) {
  etcdserverpb::RequestOp op;
  op.mutable_request_delete_range()->set_key(root_ + name);
  return Guarded(std::move(op), name);
}

std::string EtcdStateStore::Describe() const {
  return absl::StrCat("etcd at ", etcd_->endpoints(), " under ", root_);
}

absl::Status EtcdStateStore::Guarded(etcdserverpb::RequestOp op,
                                     const std::string& name) {
  const int64_t term = leadership_->Term();
  if (term == 0) {
    ++refused_;
    return absl::FailedPreconditionError(absl::StrCat(
        "this master is not the leader; nothing was written to etcd"));
  }
  etcdserverpb::TxnRequest txn;
  *txn.add_compare() = TermHolds(leadership_->leader_key(), term);
  *txn.add_success() = std::move(op);
  absl::StatusOr<etcdserverpb::TxnResponse> r = etcd_->Txn(txn);
  if (!r.ok()) return r.status();
  if (!r->succeeded()) {
    ++refused_;
    leadership_->Lost();
    LARDER_LOG(WARNING, "master.write_refused")
        .Field("name", name)
        .Field("term", term);
    return absl::FailedPreconditionError(
        "this master's term as leader is over (another master leads); "
        "nothing was written to etcd");
  }
  return absl::OkStatus();
}

}  // namespace larder
