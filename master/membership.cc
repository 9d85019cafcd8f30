// Copyright 2026 The Larder Authors.
#include "master/membership.h"

#include <algorithm>
#include <cstring>

#include "common/log.h"

namespace larder {

void Membership::Forget(Worker& w) {
  for (const BlockKey& k : w.blocks) {
    auto it = placement_.find(k);
    if (it == placement_.end()) continue;
    auto& v = it->second;
    v.erase(std::remove(v.begin(), v.end(), w.info.id()), v.end());
    if (v.empty()) placement_.erase(it);
  }
  w.blocks.clear();
}

uint64_t Membership::Register(const v1::WorkerInfo& info,
                              const std::vector<BlockKey>& blocks,
                              absl::Time now) {
  absl::MutexLock lock(&mu_);
  Worker& w = workers_[info.id()];
  const bool changed = !w.alive || w.info.address() != info.address() ||
                       w.info.capacity_bytes() != info.capacity_bytes();
  Forget(w);  // The full report replaces what we knew.
  w.info = info;
  w.last_heartbeat = now;
  w.alive = true;
  w.report_pending = false;
  for (const BlockKey& k : blocks) {
    if (w.blocks.insert(k).second) placement_[k].push_back(info.id());
  }
  if (changed) {
    ++version_;
    RebuildRing();
    LARDER_LOG(INFO, "membership.join")
        .Field("worker", info.id())
        .Field("address", info.address())
        .Field("blocks", blocks.size())
        .Field("ring_version", version_);
  }
  return version_;
}

bool Membership::Heartbeat(const std::string& id,
                           const std::vector<BlockKey>& added,
                           const std::vector<BlockKey>& removed,
                           absl::Time now) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(id);
  if (it == workers_.end() || !it->second.alive || it->second.report_pending)
    return false;
  Worker& w = it->second;
  w.last_heartbeat = now;
  for (const BlockKey& k : added) {
    if (w.blocks.insert(k).second) placement_[k].push_back(id);
  }
  for (const BlockKey& k : removed) {
    if (w.blocks.erase(k) == 0) continue;
    auto p = placement_.find(k);
    if (p == placement_.end()) continue;
    p->second.erase(std::remove(p->second.begin(), p->second.end(), id),
                    p->second.end());
    if (p->second.empty()) placement_.erase(p);
  }
  return true;
}

void Membership::Restore(const v1::Ring& ring, absl::Time now) {
  absl::MutexLock lock(&mu_);
  workers_.clear();
  placement_.clear();
  for (const v1::WorkerInfo& info : ring.workers()) {
    Worker& w = workers_[info.id()];
    w.info = info;
    w.last_heartbeat = now;
    w.alive = true;
    w.report_pending = true;
  }
  version_ = std::max(version_, ring.version()) + 1;
  RebuildRing();
  LARDER_LOG(INFO, "membership.restored")
      .Field("workers", ring.workers_size())
      .Field("ring_version", version_);
}

std::vector<std::string> Membership::Expire(absl::Time now) {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> gone;
  for (auto& [id, w] : workers_) {
    if (w.alive && now - w.last_heartbeat > timeout_) {
      w.alive = false;
      Forget(w);
      gone.push_back(id);
    }
  }
  if (!gone.empty()) {
    ++version_;
    RebuildRing();
    for (const std::string& id : gone) {
      LARDER_LOG(WARNING, "membership.leave")
          .Field("worker", id)
          .Field("why", "missed heartbeats")
          .Field("ring_version", version_);
    }
  }
  return gone;
}

void Membership::RebuildRing() {
  changed_ = absl::Now();
  std::vector<RingMember> members;
  ring_workers_.clear();
  std::vector<std::pair<std::string, const Worker*>> live;
  for (const auto& [id, w] : workers_) {
    if (w.alive) live.emplace_back(id, &w);
  }
  std::sort(live.begin(), live.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [id, w] : live) {
    members.push_back({id, static_cast<double>(std::max<uint64_t>(
                               1, w->info.capacity_bytes()))});
    ring_workers_.push_back(w->info);
  }
  ring_members_ = std::move(members);
  ring_built_version_ = 0;  // Snapshot() builds the HashRing when asked.
}

v1::Ring Membership::Ring() const {
  absl::MutexLock lock(&mu_);
  v1::Ring r;
  r.set_version(version_);
  r.set_vnodes(static_cast<uint32_t>(vnodes_));
  r.set_changed_unix_ms(absl::ToUnixMillis(changed_));
  for (const v1::WorkerInfo& w : ring_workers_) *r.add_workers() = w;
  return r;
}

uint64_t Membership::version() const {
  absl::MutexLock lock(&mu_);
  return version_;
}

std::pair<HashRing, std::vector<v1::WorkerInfo>> Membership::Snapshot() const {
  std::vector<RingMember> members;
  std::vector<v1::WorkerInfo> workers;
  uint64_t version;
  {
    absl::MutexLock lock(&mu_);
    if (ring_built_version_ == version_ && version_ != 0)
      return {ring_, ring_workers_};
    members = ring_members_;
    workers = ring_workers_;
    version = version_;
  }
  // Built outside the lock: Register, Heartbeat and Locate go on meanwhile.
  HashRing ring(std::move(members), vnodes_);
  absl::MutexLock lock(&mu_);
  if (version_ == version) {
    ring_ = ring;
    ring_built_version_ = version;
  }
  return {std::move(ring), std::move(workers)};
}

std::vector<std::string> Membership::Locate(const BlockKey& key) const {
  absl::MutexLock lock(&mu_);
  auto it = placement_.find(key);
  return it == placement_.end() ? std::vector<std::string>() : it->second;
}

uint64_t Membership::BlocksOf(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(id);
  return it == workers_.end() ? 0 : it->second.blocks.size();
}

std::vector<std::pair<v1::WorkerInfo, bool>> Membership::Workers() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<v1::WorkerInfo, bool>> out;
  for (const auto& [id, w] : workers_) out.emplace_back(w.info, w.alive);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.first.id() < b.first.id();
  });
  return out;
}

}  // namespace larder
