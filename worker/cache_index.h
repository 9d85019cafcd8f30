// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: cache_index.h
// -----------------------------------------------------------------------------
//
// The bookkeeping of one cache tier, independent of where the bytes live:
// capacity accounting, the eviction policy, pins, TTLs and leases.
//
//   * Policy kLru: when a new entry does not fit, the least recently used
//     evictable entries go. Policy kNone: admit until full, then refuse new
//     entries (for datasets larger than the cache read in random order, where
//     LRU thrashes and a stable subset gives a better hit rate).
//   * Pinned entries are never evicted (they still count toward capacity).
//   * An entry past its TTL is treated as absent and removed when seen.
//   * A leased entry (a local client reads its fd) is not evicted until the
//     lease expires or is released.
//   * A protected entry (Admit's `protect`: the mounts with eviction=epoch)
//     is not evicted for `protect` after it was admitted or last found, so
//     a dataset somewhat larger than the tier read in epochs keeps the part
//     of itself that fits, every epoch, where LRU would evict each block
//     just before it is read again; a new entry that finds no room is then
//     refused (the caller serves it uncached).
//
// Used bytes never exceed capacity, nor entries max_entries. Not thread-safe:
// the owning tier locks.
#ifndef LARDER_WORKER_CACHE_INDEX_H_
#define LARDER_WORKER_CACHE_INDEX_H_

#include <cstdint>
#include <functional>
#include <list>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "common/block_key.h"

namespace larder {

enum class EvictionPolicy { kLru, kNone };

// Parses "lru" or "none". InvalidArgument otherwise.
absl::StatusOr<EvictionPolicy> ParseEvictionPolicy(absl::string_view name);

// Per-path rules, matched against "mount/path" by longest prefix.
struct CacheRules {
  struct Rule {
    std::string prefix;
    bool pin = false;
    absl::Duration ttl = absl::InfiniteDuration();
  };
  std::vector<Rule> rules;

  // Parses the --pin ("prefix,prefix") and --ttl ("prefix=30m,prefix=1h")
  // flag values. InvalidArgument on malformed entries.
  static absl::StatusOr<CacheRules> Parse(const std::vector<std::string>& pins,
                                          const std::vector<std::string>& ttls);

  bool Pinned(const BlockId& id) const;
  absl::Duration Ttl(const BlockId& id) const;
};

template <typename Value>
class CacheIndex {
 public:
  struct Entry {
    Value value;
    uint64_t size = 0;
    bool pinned = false;
    absl::Time expires = absl::InfiniteFuture();
    // Leases with a duration (the latest end of those held), and leases
    // until released (held: an until of InfiniteFuture), apart: one until
    // released must not make the others last as long.
    absl::Time lease_until = absl::InfinitePast();
    int leases = 0;
    int held = 0;
    absl::Duration protect = absl::ZeroDuration();
    absl::Time protected_until = absl::InfinitePast();
    typename std::list<BlockKey>::iterator lru;  // Valid unless pinned.
  };

  // `max_entries` bounds the number of entries as `capacity` bounds their
  // bytes (0 = no bound): every RAM block holds a file descriptor.
  CacheIndex(uint64_t capacity, EvictionPolicy policy, size_t max_entries = 0)
      : capacity_(capacity),
        policy_(policy),
        max_entries_(max_entries == 0 ? SIZE_MAX : max_entries) {}

  uint64_t capacity() const { return capacity_; }
  size_t max_entries() const { return max_entries_; }
  uint64_t used() const { return used_; }
  size_t size() const { return map_.size(); }

  // The live entry for `key` (touching it in LRU order), or nullptr. An
  // expired entry is removed and reported through `evicted`.
  Entry* Find(const BlockKey& key, absl::Time now,
              std::vector<Value>* evicted = nullptr) {
    auto it = map_.find(key);
    if (it == map_.end()) return nullptr;
    if (it->second.expires <= now && !Leased(it->second, now)) {
      if (evicted) evicted->push_back(std::move(it->second.value));
      Remove(it);
      return nullptr;
    }
    Touch(it->second, now);
    return &it->second;
  }

  bool Contains(const BlockKey& key) const { return map_.contains(key); }

  // Admits an entry, evicting (LRU policy) as needed; evicted values are
  // appended to `evicted`. Returns false, changing nothing, if it cannot be
  // admitted (larger than the tier, policy kNone and full, or everything
  // evictable is pinned, leased or protected). Replaces an existing entry of
  // `key`. `protect` > 0: the entry is not evicted within `protect` of its
  // admission or its last Find. `must_free` > 0: entries of at least that
  // many bytes are evicted too, whatever the capacity (the disk under the
  // tier is fuller than its capacity says: others use it too).
  bool Admit(const BlockKey& key, Value value, uint64_t size, bool pinned,
             absl::Duration ttl, absl::Time now, std::vector<Value>* evicted,
             absl::Duration protect = absl::ZeroDuration(),
             uint64_t must_free = 0) {
    if (auto it = map_.find(key); it != map_.end()) {
      if (evicted) evicted->push_back(std::move(it->second.value));
      Remove(it);
    }
    if (size > capacity_) return false;
    if (!MakeRoom(size, now, evicted, must_free)) return false;
    Entry e;
    e.value = std::move(value);
    e.size = size;
    e.pinned = pinned;
    e.expires =
        ttl == absl::InfiniteDuration() ? absl::InfiniteFuture() : now + ttl;
    if (ttl != absl::InfiniteDuration()) ++expiring_;
    if (protect > absl::ZeroDuration()) {
      e.protect = protect;
      e.protected_until = now + protect;
      ++protects_[absl::ToInt64Nanoseconds(protect)];
    }
    if (!pinned) {
      lru_.push_front(key);
      e.lru = lru_.begin();
    }
    used_ += size;
    map_.emplace(key, std::move(e));
    return true;
  }

  // Removes `key`; returns its value if present.
  std::optional<Value> Erase(const BlockKey& key) {
    auto it = map_.find(key);
    if (it == map_.end()) return std::nullopt;
    Value v = std::move(it->second.value);
    Remove(it);
    return v;
  }

  // Removes every entry for which pred(key, value) is true; returns them.
  std::vector<Value> EraseIf(
      const std::function<bool(const BlockKey&, const Value&)>& pred) {
    std::vector<Value> out;
    for (auto it = map_.begin(); it != map_.end();) {
      auto next = std::next(it);
      if (pred(it->first, it->second.value)) {
        out.push_back(std::move(it->second.value));
        Remove(it);
      }
      it = next;
    }
    return out;
  }

  // Protects `key` from eviction until `until` (InfiniteFuture: until
  // Unlease), or Unlease with the same `until`. Returns false if absent.
  bool Lease(const BlockKey& key, absl::Time until) {
    auto it = map_.find(key);
    if (it == map_.end()) return false;
    Entry& e = it->second;
    if (until == absl::InfiniteFuture()) {
      ++e.held;
    } else {
      ++e.leases;
      e.lease_until = std::max(e.lease_until, until);
    }
    return true;
  }
  void Unlease(const BlockKey& key, absl::Time until = absl::InfinitePast()) {
    auto it = map_.find(key);
    if (it == map_.end()) return;
    Entry& e = it->second;
    if (until == absl::InfiniteFuture()) {
      if (e.held > 0) --e.held;
    } else if (e.leases > 0 && --e.leases == 0) {
      e.lease_until = absl::InfinitePast();
    }
  }

  // Calls fn(key, entry) for every entry (for stats and placement reports).
  void ForEach(
      const std::function<void(const BlockKey&, const Entry&)>& fn) const {
    for (const auto& [k, e] : map_) fn(k, e);
  }

 private:
  static bool Leased(const Entry& e, absl::Time now) {
    return e.held > 0 || (e.leases > 0 && e.lease_until > now);
  }

  void Touch(Entry& e, absl::Time now) {
    if (!e.pinned) lru_.splice(lru_.begin(), lru_, e.lru);
    if (e.protect > absl::ZeroDuration())
      e.protected_until = std::max(e.protected_until, now + e.protect);
  }

  void Remove(typename absl::flat_hash_map<BlockKey, Entry>::iterator it) {
    const Entry& e = it->second;
    used_ -= e.size;
    if (!e.pinned) lru_.erase(e.lru);
    if (e.expires != absl::InfiniteFuture()) --expiring_;
    if (e.protect > absl::ZeroDuration()) {
      auto p = protects_.find(absl::ToInt64Nanoseconds(e.protect));
      if (--p->second == 0) protects_.erase(p);
    }
    map_.erase(it);
  }

  bool MakeRoom(uint64_t size, absl::Time now, std::vector<Value>* evicted,
                uint64_t must_free = 0) {
    std::vector<BlockKey> victims;
    uint64_t freed = 0;
    // Room for `size` more bytes and one more entry once `victims` go, and
    // at least `must_free` bytes freed.
    auto short_of_room = [&] {
      return used_ + size > capacity_ + freed || freed < must_free ||
             map_.size() - victims.size() + 1 > max_entries_;
    };
    if (!short_of_room()) return true;
    // Expired entries go first, whatever the policy (a walk only when some
    // entry has a TTL).
    for (auto k = lru_.rbegin();
         expiring_ > 0 && k != lru_.rend() && short_of_room(); ++k) {
      const Entry& e = map_.at(*k);
      if (e.expires <= now && !Leased(e, now)) {
        victims.push_back(*k);
        freed += e.size;
      }
    }
    if (policy_ == EvictionPolicy::kLru) {
      // Entries of one protection period are protected in LRU order: when
      // every unpinned entry has the same one, the first protected entry
      // from the cold end ends the walk (a full tier of an epoch mount
      // refuses a block without looking at all of them).
      const bool one_period =
          protects_.size() == 1 && protects_.begin()->second == lru_.size();
      for (auto k = lru_.rbegin(); k != lru_.rend() && short_of_room(); ++k) {
        const Entry& e = map_.at(*k);
        if (e.protected_until > now) {
          if (one_period) break;
          continue;
        }
        if (Leased(e, now) || e.expires <= now) continue;
        victims.push_back(*k);
        freed += e.size;
      }
    }
    if (short_of_room()) return false;
    for (const BlockKey& k : victims) {
      auto it = map_.find(k);
      if (evicted) evicted->push_back(std::move(it->second.value));
      Remove(it);
      ++evictions_;
    }
    return true;
  }

 public:
  uint64_t evictions() const { return evictions_; }

 private:
  const uint64_t capacity_;
  const EvictionPolicy policy_;
  const size_t max_entries_;
  uint64_t used_ = 0;
  uint64_t evictions_ = 0;
  size_t expiring_ = 0;  // Entries with a TTL.
  // Entries by protection period (ns), for those that have one.
  absl::flat_hash_map<int64_t, size_t> protects_;
  absl::flat_hash_map<BlockKey, Entry> map_;
  std::list<BlockKey>
      lru_;  // Front = most recent. Pinned entries are not in it.
};

}  // namespace larder

#endif  // LARDER_WORKER_CACHE_INDEX_H_
