// Copyright 2026 The Larder Authors.
#include "client/metadata_cache.h"

#include <algorithm>
#include <utility>

#include "understore/uri.h"

namespace larder {

absl::Duration FreshFor(absl::Duration ttl, uint64_t remaining_ms) {
  if (remaining_ms == 0) return ttl;
  return std::min(ttl,
                  absl::Milliseconds(static_cast<int64_t>(
                      std::min<uint64_t>(remaining_ms, uint64_t{1} << 40))));
}
namespace {

// Per-entry overhead: map node, list node, shared_ptr control block.
constexpr size_t kEntryOverhead = 160;

size_t StatBytes(const std::string& key, const NodeMetadataCache::Stat& s) {
  const v1::StatResponse& r = s.response;
  return kEntryOverhead + 2 * key.size() + r.info().path().size() +
         r.info().version().size() + r.mount().size() + r.relative().size() +
         s.status.message().size() + sizeof(v1::StatResponse);
}

}  // namespace

size_t NodeMetadataCache::EntryBytes(const FileInfo& info) {
  return sizeof(FileInfo) + info.path.size() + info.version.size();
}

std::optional<NodeMetadataCache::Found<NodeMetadataCache::Stat>>
NodeMetadataCache::GetStat(const std::string& path) {
  absl::MutexLock lock(&mu_);
  auto it = stats_.find(path);
  if (it == stats_.end()) return std::nullopt;
  Touch(it->second);
  return Found<Stat>{it->second.stat, it->second.expires};
}

void NodeMetadataCache::PutStat(const std::string& path, Stat stat,
                                absl::Time expires) {
  Entry e;
  e.bytes = StatBytes(path, stat);
  e.stat = std::make_shared<const Stat>(std::move(stat));
  e.expires = expires;
  absl::MutexLock lock(&mu_);
  Insert(false, path, std::move(e));
}

std::optional<NodeMetadataCache::Found<NodeMetadataCache::Listing>>
NodeMetadataCache::GetListing(const std::string& dir) {
  absl::MutexLock lock(&mu_);
  auto it = listings_.find(dir);
  if (it == listings_.end()) return std::nullopt;
  Touch(it->second);
  return Found<Listing>{it->second.listing, it->second.expires};
}

bool NodeMetadataCache::PutListing(const std::string& dir,
                                   std::shared_ptr<const Listing> listing,
                                   absl::Time expires) {
  size_t bytes = kEntryOverhead + 2 * dir.size();
  for (const FileInfo& f : *listing) bytes += EntryBytes(f);
  if (bytes > ListingLimitBytes()) return false;
  Entry e;
  e.bytes = bytes;
  e.listing = std::move(listing);
  e.expires = expires;
  absl::MutexLock lock(&mu_);
  Insert(true, dir, std::move(e));
  return true;
}

void NodeMetadataCache::Insert(bool listing, const std::string& key,
                               Entry entry) {
  Map& map = MapOf(listing);
  if (auto it = map.find(key); it != map.end()) Erase(listing, it);
  lru_.emplace_front(listing, key);
  entry.lru = lru_.begin();
  bytes_ += entry.bytes;
  map.emplace(key, std::move(entry));
  // Least recently used first; the entry just added stays.
  while (lru_.size() > 1 &&
         (lru_.size() > options_.max_entries || bytes_ > options_.max_bytes)) {
    const auto& [victim_is_listing, victim] = lru_.back();
    Map& m = MapOf(victim_is_listing);
    Erase(victim_is_listing, m.find(victim));
    ++evictions_;
  }
}

void NodeMetadataCache::Erase(bool listing, Map::iterator it) {
  bytes_ -= it->second.bytes;
  lru_.erase(it->second.lru);
  MapOf(listing).erase(it);
}

void NodeMetadataCache::Touch(const Entry& e) {
  lru_.splice(lru_.begin(), lru_, e.lru);
}

uint64_t NodeMetadataCache::Invalidate(const std::string& path) {
  absl::MutexLock lock(&mu_);
  uint64_t n = 0;
  // The path itself, then everything below it: "PATH/" up to "PATH0" ('0'
  // is '/' + 1). Siblings such as "PATH-b" sort between and stay.
  const std::string below = path == "/" ? "/" : path + "/";
  const std::string end = path == "/" ? "0" : path + "0";
  for (bool listing : {false, true}) {
    Map& map = MapOf(listing);
    if (auto it = map.find(path); it != map.end()) {
      Erase(listing, it);
      ++n;
    }
    for (auto it = map.lower_bound(below);
         it != map.end() && it->first < end;) {
      auto next = std::next(it);
      Erase(listing, it);
      ++n;
      it = next;
    }
  }
  // Every directory above it: the parent's listing holds the path's entry,
  // and a path created below directories that did not exist (a committed
  // write) creates them, so their listings and their NotFound stats go too.
  // Not what lies below them.
  for (std::string at = path; at != "/";) {
    at = ParentClusterPath(at);
    if (auto it = listings_.find(at); it != listings_.end()) {
      Erase(true, it);
      ++n;
    }
    if (auto it = stats_.find(at);
        it != stats_.end() && !it->second.stat->status.ok()) {
      Erase(false, it);
      ++n;
    }
  }
  invalidations_ += n;
  return n;
}

void NodeMetadataCache::Clear() {
  absl::MutexLock lock(&mu_);
  invalidations_ += stats_.size() + listings_.size();
  stats_.clear();
  listings_.clear();
  lru_.clear();
  bytes_ = 0;
}

NodeMetadataCache::Counters NodeMetadataCache::counters() const {
  absl::MutexLock lock(&mu_);
  return {stats_.size() + listings_.size(), bytes_, evictions_, invalidations_};
}

}  // namespace larder
