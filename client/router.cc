// Copyright 2026 The Larder Authors.
#include "client/router.h"

#include <algorithm>

#include "common/block_proto.h"
#include "common/log.h"

namespace larder {

Router::Router(Options options, LocateFn locate, RefusedFn refused,
               ConnectFn connect)
    : options_(std::move(options)),
      locate_(std::move(locate)),
      refused_(std::move(refused)),
      connect_(std::move(connect)),
      ring_(std::make_shared<const RingSnapshot>()) {}

bool Router::Install(const v1::Ring& ring) {
  absl::MutexLock lock(&install_mu_);
  std::shared_ptr<const RingSnapshot> old = snapshot();
  const absl::Time changed_at = absl::FromUnixMillis(ring.changed_unix_ms());
  // Versions count within a master run (a new leader's may start anywhere).
  if (ring.metadata_epoch() == old->epoch && ring.version() < old->version &&
      !old->workers.empty()) {
    return false;
  }
  const bool changed = ring.version() != old->version ||
                       ring.metadata_epoch() != old->epoch ||
                       old->workers.empty();
  if (!changed && changed_at == old->changed_at) return false;
  auto next = std::make_shared<RingSnapshot>();
  next->changed_at = changed_at;
  next->epoch = ring.metadata_epoch();
  if (!changed) {  // Only the time of the last change is news.
    next->version = old->version;
    next->ring = old->ring;
    next->workers = old->workers;
    next->clients = old->clients;
  } else {
    next->version = ring.version();
    std::vector<RingMember> members;
    for (const v1::WorkerInfo& w : ring.workers()) {
      members.push_back({w.id(), static_cast<double>(std::max<uint64_t>(
                                     1, w.capacity_bytes()))});
    }
    next->ring = HashRing(std::move(members), static_cast<int>(ring.vnodes()));
    next->workers.assign(ring.workers().begin(), ring.workers().end());
    for (const v1::WorkerInfo& w : next->workers) {
      std::shared_ptr<WorkerClient> c;
      for (size_t i = 0; i < old->workers.size(); ++i) {
        if (old->workers[i].address() == w.address()) c = old->clients[i];
      }
      next->clients.push_back(c ? std::move(c) : connect_(w.address()));
    }
  }
  ring_.store(std::move(next), std::memory_order_release);
  return changed;
}

Router::Route Router::Owners(std::shared_ptr<const RingSnapshot> ring,
                             const BlockId& id, int n) const {
  Route r;
  r.ring = std::move(ring);
  for (int i : r.ring->ring.Successors(id.Placement(), n)) {
    const v1::WorkerInfo& w = r.ring->workers[static_cast<size_t>(i)];
    r.candidates.push_back(
        {&w, r.ring->clients[static_cast<size_t>(i)].get(), Local(w)});
  }
  return r;
}

Router::Route Router::Candidates(const BlockId& id, int n) {
  return Order(id, Owners(id, n));
}

bool Router::InRebalanceWindow(const RingSnapshot& ring) const {
  // With one live worker there is nowhere else to look.
  return absl::Now() - ring.changed_at <= options_.rebalance_window &&
         ring.workers.size() > 1;
}

Router::Route Router::Order(const BlockId& id, Route owners) {
  Route r = std::move(owners);
  if (!r.empty() && InRebalanceWindow(*r.ring)) {
    std::vector<std::string> holders;
    const std::string& owner = r.front().worker->id();
    if (Holders(KeyToBytes(id.Key()), owner, &holders) &&
        std::find(holders.begin(), holders.end(), owner) == holders.end()) {
      // Live holders first, then the owners that are not among them.
      absl::InlinedVector<Candidate, 4> out;
      for (const std::string& holder : holders) {
        for (size_t i = 0; i < r.ring->workers.size(); ++i) {
          const v1::WorkerInfo& w = r.ring->workers[i];
          if (w.id() == holder)
            out.push_back({&w, r.ring->clients[i].get(), Local(w)});
        }
      }
      for (const Candidate& c : r.candidates) {
        if (std::none_of(out.begin(), out.end(), [&](const Candidate& o) {
              return o.worker == c.worker;
            })) {
          out.push_back(c);
        }
      }
      r.candidates = std::move(out);
    }
  }
  const absl::Time now = absl::Now();
  if (absl::FromUnixNanos(suspects_until_ns_.load(std::memory_order_relaxed)) <
      now) {
    return r;  // No suspects.
  }
  absl::InlinedVector<Candidate, 4> healthy, suspect;
  {
    absl::MutexLock lock(&suspect_mu_);
    for (const Candidate& c : r.candidates) {
      auto it = suspect_until_.find(c.worker->id());
      (it == suspect_until_.end() || it->second < now ? healthy : suspect)
          .push_back(c);
    }
  }
  for (const Candidate& c : suspect) healthy.push_back(c);
  r.candidates = std::move(healthy);
  return r;
}

void Router::Answered(const Candidate& c) {
  // Nothing to look up while no worker is suspect (every read passes here).
  if (absl::FromUnixNanos(suspects_until_ns_.load(std::memory_order_relaxed)) <
      absl::Now())
    return;
  absl::MutexLock lock(&suspect_mu_);
  suspect_until_.erase(c.worker->id());
}

void Router::MarkSuspect(const Candidate& c, const absl::Status& why) {
  bool first;
  const absl::Time until = absl::Now() + options_.suspect_for;
  {
    absl::MutexLock lock(&suspect_mu_);
    absl::Time& at = suspect_until_[c.worker->id()];
    first = at < absl::Now();
    at = until;
    int64_t latest = suspects_until_ns_.load(std::memory_order_relaxed);
    const int64_t ns = absl::ToUnixNanos(until);
    if (ns > latest) suspects_until_ns_.store(ns, std::memory_order_relaxed);
  }
  if (first) {
    LARDER_LOG(WARNING, "client.failover")
        .Field("worker", c.worker->id())
        .Field("address", c.worker->address())
        .Field("status", why)
        .Field("for", options_.suspect_for);
  }
}

bool Router::Holders(const std::string& key, const std::string& owner,
                     std::vector<std::string>* holders) {
  {
    absl::MutexLock lock(&located_mu_);
    auto it = located_.find(key);
    if (it != located_.end() && it->second.expires > absl::Now()) {
      *holders = it->second.holders;
      return true;
    }
  }
  v1::LocateRequest req;
  req.add_block_keys(key);
  absl::StatusOr<v1::LocateResponse> resp = locate_(req);
  if (!resp.ok() || resp->locations_size() != 1) return false;
  holders->assign(resp->locations(0).worker_ids().begin(),
                  resp->locations(0).worker_ids().end());
  RememberLocated(key, *holders, owner);
  return true;
}

// A block is read in pieces and by many readers: one lookup serves them for
// a while (long when the owner holds it: that stays true).
void Router::RememberLocated(const std::string& key,
                             const std::vector<std::string>& holders,
                             const std::string& owner) {
  const bool owner_has =
      !owner.empty() &&
      std::find(holders.begin(), holders.end(), owner) != holders.end();
  absl::MutexLock lock(&located_mu_);
  if (located_.size() > 100000) located_.clear();
  located_[key] = {holders, absl::Now() + (owner_has ? absl::Seconds(60)
                                                     : absl::Seconds(3))};
}

void Router::LocateAhead(absl::Span<const BlockId* const> ids) {
  const std::shared_ptr<const RingSnapshot> ring = snapshot();
  if (!InRebalanceWindow(*ring)) return;
  std::vector<std::string> keys, owners;
  {
    absl::MutexLock lock(&located_mu_);
    const absl::Time now = absl::Now();
    for (const BlockId* id : ids) {
      std::string key = KeyToBytes(id->Key());
      auto it = located_.find(key);
      if (it != located_.end() && it->second.expires > now) continue;
      keys.push_back(std::move(key));
      std::vector<int> owner = ring->ring.Successors(id->Placement(), 1);
      owners.push_back(owner.empty() ? std::string()
                                     : ring->workers[owner[0]].id());
    }
  }
  constexpr size_t kPerLocate = 1000;
  for (size_t begin = 0; begin < keys.size(); begin += kPerLocate) {
    const size_t end = std::min(keys.size(), begin + kPerLocate);
    v1::LocateRequest req;
    for (size_t k = begin; k < end; ++k) req.add_block_keys(keys[k]);
    absl::StatusOr<v1::LocateResponse> resp = locate_(req);
    if (!resp.ok() || resp->locations_size() != static_cast<int>(end - begin))
      return;  // Candidates asks again, block by block.
    for (size_t k = begin; k < end; ++k) {
      const v1::LocateResponse::Location& at =
          resp->locations(static_cast<int>(k - begin));
      RememberLocated(keys[k],
                      std::vector<std::string>(at.worker_ids().begin(),
                                               at.worker_ids().end()),
                      owners[k]);
    }
  }
}

bool Router::Local(const v1::WorkerInfo& w) const {
  return w.node() == options_.node && !w.short_circuit_socket().empty() &&
         !refused_(w.short_circuit_socket());
}

std::string Router::LocalSocket() const {
  const std::shared_ptr<const RingSnapshot> ring = snapshot();
  for (const v1::WorkerInfo& w : ring->workers) {
    if (Local(w)) return w.short_circuit_socket();
  }
  return "";
}

}  // namespace larder
