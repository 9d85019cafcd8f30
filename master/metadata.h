// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: metadata.h
// -----------------------------------------------------------------------------
//
// Stat and List of cluster paths, served from a cache in front of each
// mount's under-store. Entries live for the mount's metadata TTL; Invalidate
// drops every cached entry under a path at once (larder invalidate). Pages of
// large listings are cached one by one, so a 100k-entry directory is never
// held whole.
//
// Stat misses in one directory (a training job opens many files of the same
// directory together) are answered from a listing of the directory: the
// second miss within the TTL lists it (up to kStatListingLimit entries, in
// pages) and caches every entry, so a cold epoch over 2,000 files costs two
// LISTs instead of 2,000 HEADs. Concurrent misses wait for that listing's
// first page only: the rest is listed in the background, and a path not in
// the pages so far gets its own Stat meanwhile. A path the listing does not
// show still gets its own Stat.
//
// One request for each page: concurrent Lists of the same page, and the
// listing for Stat, share one under-store request and its cached answer.
//
// A store that fails with an outage (unreachable or not answering, after
// its own retries: seconds) is not asked again for a pause per mount,
// 1 s doubling to 30 s while it stays down (common/outage_pause.h): Stat and
// List misses of that mount fail at once with the outage, named, and one
// request at the end of each pause tries the store. Every node's misses
// during an outage would otherwise each cost the store a request and its
// caller the retries.
//
// Under-stores are opened lazily per mount (credentials from this process's
// environment, or the mount's credentials reference: "profile:NAME").
// Thread-safe.
#ifndef LARDER_MASTER_METADATA_H_
#define LARDER_MASTER_METADATA_H_

#include <atomic>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/outage_pause.h"
#include "common/thread_pool.h"
#include "master/mount_registry.h"
#include "understore/mount_store.h"
#include "understore/options.h"
#include "understore/under_store.h"

namespace larder {

// `info` as the master answers it for cluster path `cluster_path`: a
// file:// object's own owner, group and mode kept (own_mode), for the
// service's presentation to decide.
void ToProto(const ObjectInfo& info, const std::string& cluster_path,
             v1::ObjectInfo* out);

class UnderStoreMetadata {
 public:
  UnderStoreMetadata(const MountRegistry* mounts,
                     UnderStoreOptions store_options)
      : mounts_(mounts),
        stores_(std::move(store_options)),
        list_pool_(std::make_unique<ThreadPool>(kListThreads, "larder-list")) {}
  // Stops the listings going on in the background after their current page.
  ~UnderStoreMetadata();

  // Errors: NotFound (no mount, or no such object), and the under-store's.
  absl::StatusOr<v1::StatResponse> Stat(absl::string_view path);
  // A page_size above kMaxListPageSize is served as kMaxListPageSize (0: 1000).
  absl::StatusOr<v1::ListResponse> List(const v1::ListRequest& request);
  static constexpr size_t kMaxListPageSize = 5000;
  // Entries a directory listing may cache for Stat; larger directories are
  // listed this far, and their other files are looked up one by one.
  static constexpr int kStatListingLimit = 10000;

  // Under-store metadata requests made so far (for /metrics and tests).
  struct Requests {
    uint64_t stats = 0;  // One per object looked up alone (S3: HEAD).
    uint64_t lists = 0;  // One per listing page (S3: LIST).
    // Answered with a store's outage without asking it (store_pause_).
    uint64_t paused = 0;
  };
  Requests requests() const {
    return {stat_requests_.load(), list_requests_.load(), paused_.load()};
  }
  // Stat and List entries held (expired ones included until swept).
  size_t CachedEntries() {
    absl::MutexLock lock(&mu_);
    return stats_.size() + lists_.size();
  }

  // Drops cached entries at or below `path`, and the stat and listings of
  // each directory above it (which a new path may have created); returns
  // how many.
  uint64_t Invalidate(absl::string_view path);
  // The store of a mount (opened on first use, again after a re-mount).
  absl::StatusOr<std::shared_ptr<UnderStore>> Store(
      const v1::MountEntry& mount) {
    return stores_.Get(mount);
  }
  // Forgets the store of an unmounted path.
  void DropStore(const std::string& path) { stores_.Drop(path); }
  void SetStoreForTesting(const v1::MountEntry& mount,
                          std::shared_ptr<UnderStore> store) {
    stores_.SetForTesting(mount, std::move(store));
  }

 private:
  template <typename T>
  struct Cached {
    T value;
    absl::Time expires;
  };
  // A directory being listed for Stat: notified once its first page is in
  // stats_ (or the listing ended).
  struct StatListing {
    absl::Notification first_page;
  };
  // Stat-miss bookkeeping of one directory, for the TTL of the mount.
  struct DirState {
    absl::Time expires;
    int misses = 0;
    bool listed = false;  // Its listing is in stats_ (as far as it went).
    std::shared_ptr<StatListing> listing;  // In progress.
    bool outage_logged = false;  // A listing failed in a store outage.
  };
  // After a miss of `rel`: whether stats_ may now hold it, from a listing
  // of its directory (made by this call, or by a concurrent one).
  bool ListDirectoryForStat(const v1::MountEntry& mount, const std::string& rel,
                            absl::Time now);
  // The next page of `dir_rel`'s listing for Stat (after *token, which it
  // advances), its entries put in stats_; *listed counts them.
  absl::Status StatListingPage(const v1::MountEntry& mount,
                               const std::string& dir_rel, std::string* token,
                               int* listed);
  // The pages after `token`, up to kStatListingLimit entries, then
  // EndStatListing; on list_pool_.
  void ListRestForStat(v1::MountEntry mount, std::string dir_rel,
                       std::string dir_key, std::string token, int listed,
                       std::shared_ptr<StatListing> mine);
  void EndStatListing(const std::string& dir_key, StatListing& mine,
                      const absl::Status& status);
  // One page of a listing: from the cache, from a request for the same page
  // in flight, or from the under-store.
  absl::StatusOr<v1::ListResponse> ListingPage(const v1::MountEntry& mount,
                                               const std::string& rel,
                                               bool recursive, size_t page_size,
                                               const std::string& token);
  // Joined only by callers of the same generation (see generation_).
  struct PageFlight {
    uint64_t generation = 0;
    absl::Notification done;
    absl::StatusOr<v1::ListResponse> result;
  };
  // When a new listing page, fresh until `expires`, is to be dropped: no
  // later than the unexpired Stat answers held for its entries, so that a
  // node that fills its cache from the page keeps each entry no longer
  // than one TTL from this master's first look at it.
  absl::Time EarliestLook(const v1::ListResponse& page, absl::Time expires,
                          absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const MountRegistry* const mounts_;
  MountStores stores_;
  absl::Mutex mu_;
  // Ordered maps: Invalidate removes a key range.
  std::map<std::string, Cached<v1::StatResponse>> stats_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Cached<v1::ListResponse>> lists_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, DirState> dirs_ ABSL_GUARDED_BY(mu_);
  // Under-store requests for a page in flight, by lists_ key.
  absl::flat_hash_map<std::string, std::shared_ptr<PageFlight>> page_flights_
      ABSL_GUARDED_BY(mu_);
  // Invalidations so far. An answer the store gave to a request made before
  // one (it may hold what was just dropped) is served to its caller but not
  // kept, and not joined by later callers.
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t generation() {
    absl::MutexLock lock(&mu_);
    return generation_;
  }
  // The outage of `mount`'s store, as the error to answer with, while it
  // is paused; OK when this caller may ask. A caller that may ask reports
  // the store's answer with NoteStoreAnswer.
  absl::Status StorePaused(const v1::MountEntry& mount, absl::Time now);
  void NoteStoreAnswer(const v1::MountEntry& mount, absl::Time started,
                       const absl::Status& status);

  OutagePause store_pause_;  // By mount path and URI.
  std::atomic<uint64_t> stat_requests_{0}, list_requests_{0}, paused_{0};
  // Expired entries (and directory states with no listing in progress) are
  // swept after as many insertions as a quarter of the cache (at least
  // 4,096), so the cache holds what was used within a TTL, not every path
  // ever looked up, at O(1) amortized cost.
  void Inserted(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  size_t inserts_since_sweep_ ABSL_GUARDED_BY(mu_) = 0;
  // Listings for Stat past their first page at once: a directory waiting
  // here has its misses beyond that page Stat'ed one by one.
  static constexpr int kListThreads = 32;
  std::atomic<bool> stopping_{false};
  // Last: destroyed (its listings ended) before what they use.
  std::unique_ptr<ThreadPool> list_pool_;
};

}  // namespace larder

#endif  // LARDER_MASTER_METADATA_H_
