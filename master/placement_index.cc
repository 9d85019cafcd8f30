// Copyright 2026 The Larder Authors.
#include "master/placement_index.h"

#include <algorithm>
#include <cstring>

namespace larder {

PlacementIndex::PlacementIndex()
    : shards_(std::make_unique<std::array<Shard, kShards>>()) {}

namespace {
constexpr size_t kPrefetch = 8;
}  // namespace

template <typename Fn>
void PlacementIndex::ByShard(absl::Span<const BlockKey> keys, size_t first,
                             Fn fn) {
  if (keys.size() <= 32) {  // A heartbeat's few changes: one lock each.
    for (const BlockKey& k : keys) fn(ShardOf(k), absl::MakeConstSpan(&k, 1));
    return;
  }
  // A counting sort by shard, so that each shard is locked once.
  std::array<size_t, kShards + 1> start{};
  for (const BlockKey& k : keys) ++start[ShardOf(k) + 1];
  for (size_t s = 0; s < kShards; ++s) start[s + 1] += start[s];
  std::vector<BlockKey> sorted(keys.size());
  std::array<size_t, kShards> next;
  std::copy(start.begin(), start.end() - 1, next.begin());
  for (const BlockKey& k : keys) sorted[next[ShardOf(k)]++] = k;
  for (size_t i = 0; i < kShards; ++i) {
    const size_t s = (first + i) % kShards;
    if (start[s] == start[s + 1]) continue;
    fn(s,
       absl::MakeConstSpan(sorted.data() + start[s], start[s + 1] - start[s]));
  }
}

PlacementIndex::Key::Key(const BlockKey& k) {
  static_assert(sizeof(std::pair<const Key, Holder>) == 20);
  std::memcpy(w, &k.low, 8);
  std::memcpy(w + 2, &k.high, 8);
}

bool PlacementIndex::AddTo(Shard& s, Holder holder, const BlockKey& block) {
  const Key key(block);
  auto [it, inserted] = s.keys.try_emplace(key, holder);
  Holder& h = it->second;
  if (inserted) {
    // The common case: a block on one worker.
  } else if (h == holder) {
    return false;
  } else if (h == kMany) {
    std::vector<Holder>& list = s.many[key];
    if (std::find(list.begin(), list.end(), holder) != list.end()) return false;
    list.push_back(holder);
  } else {
    s.many[key] = {h, holder};
    h = kMany;
  }
  ++s.replicas;
  return true;
}

bool PlacementIndex::RemoveFrom(Shard& s, Holder holder,
                                const BlockKey& block) {
  const Key key(block);
  auto it = s.keys.find(key);
  if (it == s.keys.end()) return false;
  Holder& h = it->second;
  if (h == kMany) {
    auto m = s.many.find(key);
    std::vector<Holder>& list = m->second;
    auto p = std::find(list.begin(), list.end(), holder);
    if (p == list.end()) return false;
    list.erase(p);
    if (list.size() == 1) {
      h = list[0];
      s.many.erase(m);
    }
  } else if (h == holder) {
    s.keys.erase(it);
  } else {
    return false;
  }
  --s.replicas;
  return true;
}

size_t PlacementIndex::Apply(Holder holder, absl::Span<const BlockKey> keys,
                             bool adding,
                             bool (*op)(Shard&, Holder, const BlockKey&)) {
  size_t changed = 0;
  ByShard(keys, holder % kShards,
          [&](size_t i, absl::Span<const BlockKey> part) {
            Shard& s = (*shards_)[i];
            absl::MutexLock lock(&s.mu);
            // One resize at most, instead of one per doubling.
            if (adding && part.size() > 1)
              s.keys.reserve(s.keys.size() + part.size());
            // Each key is a cache miss in a large table: fetch a few ahead.
            for (size_t k = 0; k < part.size(); ++k) {
              if (k + kPrefetch < part.size())
                s.keys.prefetch(Key(part[k + kPrefetch]));
              changed += op(s, holder, part[k]);
            }
          });
  return changed;
}

size_t PlacementIndex::Add(Holder holder, absl::Span<const BlockKey> keys) {
  return Apply(holder, keys, true, &AddTo);
}

size_t PlacementIndex::Remove(Holder holder, absl::Span<const BlockKey> keys) {
  return Apply(holder, keys, false, &RemoveFrom);
}

void PlacementIndex::Find(const BlockKey& block,
                          std::vector<Holder>* out) const {
  const Key key(block);
  const Shard& s = (*shards_)[ShardOf(block)];
  absl::MutexLock lock(&s.mu);
  auto it = s.keys.find(key);
  if (it == s.keys.end()) return;
  if (it->second != kMany) {
    out->push_back(it->second);
    return;
  }
  const std::vector<Holder>& list = s.many.at(key);
  out->insert(out->end(), list.begin(), list.end());
}

bool PlacementIndex::Holds(Holder holder, const BlockKey& block) const {
  const Key key(block);
  const Shard& s = (*shards_)[ShardOf(block)];
  absl::MutexLock lock(&s.mu);
  auto it = s.keys.find(key);
  if (it == s.keys.end()) return false;
  if (it->second != kMany) return it->second == holder;
  const std::vector<Holder>& list = s.many.at(key);
  return std::find(list.begin(), list.end(), holder) != list.end();
}

uint64_t PlacementIndex::replicas() const {
  uint64_t n = 0;
  for (const Shard& s : *shards_) {
    absl::MutexLock lock(&s.mu);
    n += s.replicas;
  }
  return n;
}

uint64_t PlacementIndex::MemoryBytes() const {
  // A Swiss table holds capacity slots and capacity + 16 control bytes.
  using KeySlot = std::pair<const Key, Holder>;
  using ManySlot = std::pair<const Key, std::vector<Holder>>;
  uint64_t bytes = sizeof(*shards_);
  for (const Shard& s : *shards_) {
    absl::MutexLock lock(&s.mu);
    if (s.keys.capacity() > 0)
      bytes += s.keys.capacity() * (sizeof(KeySlot) + 1) + 16;
    if (s.many.capacity() > 0)
      bytes += s.many.capacity() * (sizeof(ManySlot) + 1) + 16;
    for (const auto& [key, list] : s.many)
      bytes += list.capacity() * sizeof(Holder);
  }
  return bytes;
}

}  // namespace larder
