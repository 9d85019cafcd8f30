// Copyright 2026 The Larder Authors.
#include "master/membership.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "common/log.h"

namespace larder {

Membership::Membership(absl::Duration heartbeat_timeout, int vnodes,
                       int concurrent_reports)
    : timeout_(heartbeat_timeout),
      vnodes_(vnodes),
      concurrent_reports_(
          concurrent_reports > 0
              ? concurrent_reports
              : std::max(1, static_cast<int>(
                                std::thread::hardware_concurrency() / 2))) {}

Membership::ReportTurn::ReportTurn(Membership* m, bool take)
    : m_(take ? m : nullptr) {
  if (m_ == nullptr) return;
  absl::MutexLock lock(&m_->gate_mu_);
  m_->gate_mu_.Await(absl::Condition(
      +[](Membership* m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(m->gate_mu_) {
        return m->reports_running_ < m->concurrent_reports_;
      },
      m_));
  ++m_->reports_running_;
}

Membership::ReportTurn::~ReportTurn() {
  if (m_ == nullptr) return;
  absl::MutexLock lock(&m_->gate_mu_);
  --m_->reports_running_;
}

Membership::Worker* Membership::FindOrAdd(const std::string& id) {
  absl::MutexLock lock(&mu_);
  Worker*& w = by_id_[id];
  if (w == nullptr) {
    workers_.push_back(std::make_unique<Worker>(
        static_cast<PlacementIndex::Holder>(workers_.size() + 1)));
    w = workers_.back().get();
    w->info.set_id(id);
  }
  return w;
}

void Membership::Forget(Worker& w) {
  for (const std::vector<BlockKey>& batch : w.reported)
    index_.Remove(w.holder, batch);
  w.reported.clear();
  w.reported_keys = 0;
  w.held = 0;
}

void Membership::AddReported(Worker& w, std::vector<BlockKey> keys) {
  if (keys.empty()) return;
  w.reported_keys += keys.size();
  w.reported.push_back(std::move(keys));
  // Merge while the last batch is at least as large as the one before it,
  // as a binary counter carries: each key is copied O(log n) times, there
  // are O(log n) batches, and every batch is allocated to its exact size.
  while (w.reported.size() >= 2) {
    std::vector<BlockKey>& last = w.reported.back();
    std::vector<BlockKey>& before = w.reported[w.reported.size() - 2];
    if (before.size() > last.size()) break;
    before.reserve(before.size() + last.size());
    before.insert(before.end(), last.begin(), last.end());
    w.reported.pop_back();
  }
  if (w.reported_keys > 2 * w.held + 4096) Compact(w);
}

void Membership::Compact(Worker& w) {
  std::vector<BlockKey> all;
  all.reserve(w.reported_keys);
  for (const std::vector<BlockKey>& batch : w.reported)
    all.insert(all.end(), batch.begin(), batch.end());
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  all.erase(std::remove_if(
                all.begin(), all.end(),
                [&](const BlockKey& k) { return !index_.Holds(w.holder, k); }),
            all.end());
  all.shrink_to_fit();
  w.reported.clear();
  w.reported_keys = all.size();
  if (!all.empty()) w.reported.push_back(std::move(all));
}

uint64_t Membership::Register(const v1::WorkerInfo& info,
                              std::vector<BlockKey> blocks, absl::Time now) {
  Worker* w = FindOrAdd(info.id());
  absl::MutexLock report(&w->report_mu);
  {
    // The full report replaces what we knew. Lookups go on meanwhile: the
    // index locks one shard at a time.
    ReportTurn turn(this, true);
    Forget(*w);
    w->held = index_.Add(w->holder, blocks);
    AddReported(*w, std::move(blocks));
  }
  // Read before mu_: the index has locks of its own.
  const bool anything_cached = index_.replicas() != 0;
  absl::MutexLock lock(&mu_);
  const bool changed = !w->alive || w->info.address() != info.address() ||
                       w->info.capacity_bytes() != info.capacity_bytes();
  w->info = info;
  w->last_heartbeat = now;
  w->listed = true;
  w->alive = true;
  w->report_pending = false;
  if (changed) {
    RingChanged(anything_cached);
    LARDER_LOG(INFO, "membership.join")
        .Field("worker", info.id())
        .Field("address", info.address())
        .Field("blocks", w->held.load())
        .Field("ring_version", version_);
  }
  return version_;
}

bool Membership::Heartbeat(const std::string& id, std::vector<BlockKey> added,
                           const std::vector<BlockKey>& removed,
                           absl::Time now) {
  Worker* w = nullptr;
  {
    absl::MutexLock lock(&mu_);
    auto it = by_id_.find(id);
    if (it == by_id_.end() || !it->second->alive || it->second->report_pending)
      return false;
    w = it->second;
    w->last_heartbeat = now;
  }
  if (added.empty() && removed.empty()) return true;
  absl::MutexLock report(&w->report_mu);
  {
    // Expired or restored since: what it holds is no longer tracked.
    absl::MutexLock lock(&mu_);
    if (!w->alive || w->report_pending) return false;
  }
  ReportTurn turn(this, added.size() + removed.size() > kLargeReport);
  w->held += index_.Add(w->holder, added);
  w->held -= index_.Remove(w->holder, removed);
  AddReported(*w, std::move(added));
  return true;
}

void Membership::Restore(const v1::Ring& ring, absl::Time now) {
  absl::flat_hash_map<std::string, const v1::WorkerInfo*> restored;
  for (const v1::WorkerInfo& info : ring.workers()) restored[info.id()] = &info;
  for (const v1::WorkerInfo& info : ring.workers()) FindOrAdd(info.id());
  std::vector<Worker*> all;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& w : workers_) all.push_back(w.get());
  }
  // One worker at a time: a registration of it either went before (and is
  // undone) or comes after (and is its first report to this term).
  for (Worker* w : all) {
    absl::MutexLock report(&w->report_mu);
    {
      absl::MutexLock lock(&mu_);
      auto it = restored.find(w->info.id());
      w->listed = w->alive = w->report_pending = it != restored.end();
      if (w->alive) {
        w->info = *it->second;
        w->last_heartbeat = now;
      }
    }
    Forget(*w);
  }
  absl::MutexLock lock(&mu_);
  version_ = std::max(version_, ring.version());
  RingChanged();
  LARDER_LOG(INFO, "membership.restored")
      .Field("workers", ring.workers_size())
      .Field("ring_version", version_);
}

void Membership::Grace(absl::Time now) {
  absl::MutexLock lock(&mu_);
  for (const auto& w : workers_) {
    if (w->alive) w->last_heartbeat = std::max(w->last_heartbeat, now);
  }
}

std::vector<std::string> Membership::Expire(absl::Time now) {
  std::vector<Worker*> gone;
  std::vector<std::string> ids;
  const bool anything_cached = index_.replicas() != 0;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& w : workers_) {
      if (w->alive && now - w->last_heartbeat > timeout_) {
        w->alive = false;
        gone.push_back(w.get());
        ids.push_back(w->info.id());
      }
    }
    if (gone.empty()) return ids;
    RingChanged(anything_cached);
    for (const std::string& id : ids) {
      LARDER_LOG(WARNING, "membership.leave")
          .Field("worker", id)
          .Field("why", "missed heartbeats")
          .Field("ring_version", version_);
    }
  }
  for (Worker* w : gone) {
    absl::MutexLock report(&w->report_mu);
    bool back;
    {
      absl::MutexLock lock(&mu_);
      back = w->alive;  // Registered again meanwhile: its report stands.
    }
    if (!back) Forget(*w);
  }
  return ids;
}

void Membership::RingChanged(bool anything_cached) {
  ++version_;
  // The rebalance window (clients ask where blocks are cached) opens only
  // when some block is cached somewhere: a change while nothing is (a
  // cluster starting) strands no block on a worker that no longer owns it,
  // and costs no client a Locate.
  if (anything_cached) changed_ = absl::Now();
  ring_lists_stale_ = true;
}

void Membership::BuildRingLists() const {
  if (!ring_lists_stale_) return;
  std::vector<const Worker*> live;
  for (const auto& w : workers_) {
    if (w->alive) live.push_back(w.get());
  }
  std::sort(live.begin(), live.end(), [](const Worker* a, const Worker* b) {
    return a->info.id() < b->info.id();
  });
  ring_workers_.clear();
  ring_members_.clear();
  for (const Worker* w : live) {
    ring_members_.push_back(
        {w->info.id(),
         static_cast<double>(std::max<uint64_t>(1, w->info.capacity_bytes()))});
    ring_workers_.push_back(w->info);
  }
  ring_lists_stale_ = false;
}

v1::Ring Membership::Ring() const {
  absl::MutexLock lock(&mu_);
  BuildRingLists();
  v1::Ring r;
  r.set_version(version_);
  r.set_vnodes(static_cast<uint32_t>(vnodes_));
  r.set_changed_unix_ms(absl::ToUnixMillis(changed_));
  for (const v1::WorkerInfo& w : ring_workers_) *r.add_workers() = w;
  return r;
}

uint64_t Membership::version() const {
  absl::ReaderMutexLock lock(&mu_);
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
    BuildRingLists();
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
  std::vector<PlacementIndex::Holder> holders;
  index_.Find(key, &holders);
  std::vector<std::string> out;
  if (holders.empty()) return out;
  absl::ReaderMutexLock lock(&mu_);
  for (PlacementIndex::Holder h : holders) {
    const Worker& w = *workers_[h - 1];
    if (w.alive) out.push_back(w.info.id());
  }
  return out;
}

uint64_t Membership::BlocksOf(const std::string& id) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = by_id_.find(id);
  return it == by_id_.end() ? 0 : it->second->held.load();
}

std::vector<std::pair<v1::WorkerInfo, bool>> Membership::Workers() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<std::pair<v1::WorkerInfo, bool>> out;
  for (const auto& w : workers_) {
    if (w->listed) out.emplace_back(w->info, w->alive);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.first.id() < b.first.id();
  });
  return out;
}

uint64_t Membership::IndexBytes() const {
  std::vector<Worker*> all;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& w : workers_) all.push_back(w.get());
  }
  uint64_t bytes = index_.MemoryBytes();
  for (Worker* w : all) {
    absl::MutexLock report(&w->report_mu);
    for (const std::vector<BlockKey>& batch : w->reported)
      bytes += batch.capacity() * sizeof(BlockKey);
  }
  return bytes;
}

}  // namespace larder
