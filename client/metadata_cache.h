// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: metadata_cache.h
// -----------------------------------------------------------------------------
//
// The node's metadata cache: what the master answered about cluster paths,
// kept by the client library so that a warm open sends no RPC at all. Two
// kinds of entry, both keyed by normalized cluster path:
//
//   - a Stat: the master's StatResponse, or NotFound (a negative entry);
//   - a Listing: one whole directory, sorted by path. A Stat miss below a
//     listed directory is answered from the listing (found, or NotFound),
//     so listing a directory of 2,000 files makes its 2,000 opens free.
//
// Entries carry the time their TTL ends; the cache returns expired entries
// too (the client serves them for a bounded stale window when the master or
// the under-store cannot be reached) and drops entries only to stay within
// its bounds (least recently used first) or when invalidated.
//
// Memory is bounded by entry count and by an estimate of bytes; a listing
// larger than a quarter of the byte bound is not kept (the FUSE adaptor
// then pages through the master instead).
//
//   NodeMetadataCache cache({.max_entries = 100000});
//   cache.PutStat("/d/x", {absl::OkStatus(), response}, now + ttl);
//   if (auto hit = cache.GetStat("/d/x"); hit && hit->expires > now) ...
//
// Thread-safe. Values are shared, immutable snapshots.
#ifndef LARDER_CLIENT_METADATA_CACHE_H_
#define LARDER_CLIENT_METADATA_CACHE_H_

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "larder/client.h"
#include "proto/master.pb.h"

namespace larder {

struct MetadataCacheOptions {
  // Most entries (stats plus listings) held. Default 1,000,000.
  size_t max_entries = ClientOptions::kDefaultMetadataCacheEntries;
  // Most bytes held (estimated: paths, versions and per-entry overhead).
  // Default 256 MiB.
  size_t max_bytes = ClientOptions::kDefaultMetadataCacheBytes;
};

// How long an answer stays fresh: its mount's `ttl`, or less when the
// answer says it has only `remaining_ms` left (0: not said): a cache keeps
// what is left of an answer's TTL, never a whole TTL again, so a replaced
// object is seen within one TTL.
absl::Duration FreshFor(absl::Duration ttl, uint64_t remaining_ms);

class NodeMetadataCache {
 public:
  // One path's Stat: `status` OK with `response`, or NotFound.
  struct Stat {
    absl::Status status;
    v1::StatResponse response;
  };
  // One directory's entries, sorted by path.
  using Listing = std::vector<FileInfo>;

  template <typename T>
  struct Found {
    std::shared_ptr<const T> value;
    absl::Time expires;  // End of its TTL (it may have passed).
  };

  struct Counters {
    uint64_t entries = 0;
    uint64_t bytes = 0;
    uint64_t evictions = 0;      // Dropped to stay within the bounds.
    uint64_t invalidations = 0;  // Entries dropped by Invalidate/Clear.
  };

  explicit NodeMetadataCache(MetadataCacheOptions options = {})
      : options_(options) {}

  std::optional<Found<Stat>> GetStat(const std::string& path);
  void PutStat(const std::string& path, Stat stat, absl::Time expires);

  std::optional<Found<Listing>> GetListing(const std::string& dir);
  // Keeps the listing of `dir`; false (and nothing kept) when it is larger
  // than ListingLimitBytes().
  bool PutListing(const std::string& dir,
                  std::shared_ptr<const Listing> listing, absl::Time expires);
  size_t ListingLimitBytes() const { return options_.max_bytes / 4; }
  // The bytes a listing entry is counted as.
  static size_t EntryBytes(const FileInfo& info);

  // Drops every entry at or below `path`, and the listing and a NotFound
  // stat of each directory above it (the parent's listing holds the path's
  // Stat; a path created below directories that did not exist creates
  // them); returns how many.
  uint64_t Invalidate(const std::string& path);
  void Clear();

  Counters counters() const;

 private:
  // One cached value; `lru` is its place in lru_ (front: most recent).
  struct Entry {
    std::shared_ptr<const Stat> stat;
    std::shared_ptr<const Listing> listing;
    absl::Time expires;
    size_t bytes = 0;
    std::list<std::pair<bool, std::string>>::iterator lru;
  };
  using Map = std::map<std::string, Entry>;

  Map& MapOf(bool listing) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return listing ? listings_ : stats_;
  }
  void Insert(bool listing, const std::string& key, Entry entry)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Erase(bool listing, Map::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Touch(const Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const MetadataCacheOptions options_;
  mutable absl::Mutex mu_;
  // Ordered maps: Invalidate removes a key range.
  Map stats_ ABSL_GUARDED_BY(mu_);
  Map listings_ ABSL_GUARDED_BY(mu_);
  // (is a listing, key), most recently used first.
  std::list<std::pair<bool, std::string>> lru_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t evictions_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t invalidations_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace larder

#endif  // LARDER_CLIENT_METADATA_CACHE_H_
