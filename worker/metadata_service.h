// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: metadata_service.h
// -----------------------------------------------------------------------------
//
// The node's metadata cache, held by the node's worker and served to every
// client process on the node over the short-circuit socket (STAT). A client
// process keeps its own cache too, but a new process (a DataLoader worker
// of a new epoch, a CLI call, a preprocessing job) starts empty: asking the
// local worker costs a few microseconds, and the master then sees at most
// one Stat per path per node per TTL however many processes ask.
//
//   - A miss asks the master once, however many clients ask at the same
//     time (single flight), and keeps the answer, NotFound included, for
//     the mount's metadata TTL; the client keeps it for what is left of it.
//   - A miss lists its directory rather than Stat one path, once per
//     directory (single flight), and keeps every entry: a first epoch then
//     costs the master one List per directory and node, not one Stat per
//     file (1,000 cold files in 5 directories: 5 Lists, not 1,000 Stats).
//   - A lookup waits for its directory's first page only. A directory of
//     more pages goes on being listed in the background; meanwhile a path
//     in the pages so far is answered from them and any other asks the
//     master, so the first file of a directory of 5,000 costs one page and
//     a Stat, not five pages in turn (0.95 s through a store 25 ms away).
//     A directory of more than kFillPages pages is not listed (its files
//     are Stat'ed) for its TTL.
//   - Invalidations are followed once per node: the master's latest
//     (epoch, seq) arrives with every heartbeat, and a client that has
//     heard of a later one than the worker makes the worker catch up before
//     it answers (so a client never gets back what it has just dropped).
//   - Only paths in the master's mounts that the caller may see, decided
//     as for its reads (WorkerMounts::MayAccess: the mount's modes, or
//     search permission on the way for a mount whose files keep their own),
//     are answered; the rest is left to the master (FailedPrecondition),
//     which decides by token.
//   - Listings (LIST) are the master's, passed on for a local caller the
//     master would hold to a mount's "other" bits (it has no credentials
//     there): the kernel's word on who it is decides here.
//
// Thread-safe.
#ifndef LARDER_WORKER_METADATA_SERVICE_H_
#define LARDER_WORKER_METADATA_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client/metadata_cache.h"
#include "common/master_connection.h"
#include "common/security.h"
#include "common/thread_pool.h"
#include "worker/metrics.h"
#include "worker/worker_mounts.h"

namespace larder {

class MetadataService {
 public:
  struct Options {
    std::string master;  // host:port, or several (HA).
    std::shared_ptr<const ChannelFactory> channels;
    MetadataCacheOptions cache;
    absl::Duration rpc_timeout = absl::Seconds(30);
  };

  // An answer and how much longer it is fresh.
  struct Answer {
    std::shared_ptr<const NodeMetadataCache::Stat> stat;
    absl::Duration ttl;
  };

  // `mounts` and `metrics` must outlive the service. Errors: InvalidArgument
  // (a bad master address). Nothing is contacted here.
  static absl::StatusOr<std::unique_ptr<MetadataService>> Create(
      Options options, const WorkerMounts* mounts, WorkerMetrics* metrics);

  // The Stat of cluster path `path` for `caller`, who has heard of the
  // master's invalidations up to (`epoch`, `seq`) (0, 0: none). Errors:
  // FailedPrecondition (not answered here: ask the master), InvalidArgument
  // (a malformed path), Unavailable and others (the master's).
  absl::StatusOr<Answer> Stat(const Caller& caller, absl::string_view path,
                              uint64_t epoch, uint64_t seq);

  // A page of the master's List for `caller`, asked with the worker's own
  // credentials and answered only if `caller` may list the directory
  // (WorkerMounts::MayAccess, kList); a recursive page leaves out what lies
  // below directories it may not list. Not kept. Errors: FailedPrecondition
  // (not answered here: a path in no mount of the master's, a caller that
  // may not list it, or the master refused the worker), InvalidArgument,
  // the master's.
  absl::StatusOr<v1::ListResponse> List(const Caller& caller,
                                        const v1::ListRequest& request);

  // The master's latest invalidation, as a heartbeat reported it: drops
  // what it invalidated since the last one applied.
  void Follow(uint64_t epoch, uint64_t seq);

  NodeMetadataCache::Counters counters() const { return cache_.counters(); }

  // Stops the listings going on in the background after their current page.
  ~MetadataService();

 private:
  // In-flight asks are joined only by callers of the same generation: one
  // that started before an invalidation may bring what it dropped.
  struct Flight {
    uint64_t generation = 0;
    absl::Notification done;
    absl::StatusOr<std::shared_ptr<const NodeMetadataCache::Stat>> result;
    absl::Time expires;
  };

  MetadataService(Options options, std::unique_ptr<MasterConnection> master,
                  const WorkerMounts* mounts, WorkerMetrics* metrics)
      : options_(std::move(options)),
        master_(std::move(master)),
        mounts_(mounts),
        metrics_(metrics),
        cache_(options_.cache),
        list_pool_(std::make_unique<ThreadPool>(kListThreads, "larder-list")) {}

  // Whether (epoch, seq) is later than what has been applied.
  bool Behind(uint64_t epoch, uint64_t seq) const;
  // Fetches and applies the invalidations after those applied.
  absl::Status CatchUp() ABSL_LOCKS_EXCLUDED(sync_mu_);
  // `key` from the master (single flight), kept for the mount's TTL.
  absl::StatusOr<Answer> Fetch(const std::string& key, const Mount& mount);

  // `key`'s answer from the listing of its directory, which keeps every
  // entry of it (one listing at a time per directory); nullopt when the
  // directory is above the mount or too large, or `key` is not in it, or
  // not in its first page while the rest is being listed (then Stat `key`).
  // Errors: the master's (a Stat would meet the same store).
  struct Listed {
    absl::Status status;  // OK.
    v1::StatResponse response;
    absl::Time expires;
  };
  absl::StatusOr<std::optional<Listed>> FromDirectory(const std::string& key,
                                                      const Mount& mount,
                                                      uint64_t generation);
  static constexpr int kFillPages = 10;  // Of 1,000 entries.
  // Directories listed past their first page at once. A directory waiting
  // here sends its lookups beyond the first page to the master, so not a
  // handful: an epoch's start touches as many directories as it has
  // readers, each for a page or more (the leader used to list inline, one
  // thread per directory).
  static constexpr int kListThreads = 32;
  struct DirFlight {
    uint64_t generation = 0;
    absl::Notification done;
    // Sorted by path; null when not listed, because of `status` (or OK:
    // too large).
    std::shared_ptr<const std::vector<v1::ObjectInfo>> entries;
    absl::Status status;
    absl::Time expires;
    // Notified after the first page (or the end, or an error); then
    // `first` holds its entries, sorted, fresh until `first_expires`, when
    // more pages follow (set once, before the notification).
    absl::Notification first_page;
    std::shared_ptr<const std::vector<v1::ObjectInfo>> first;
    absl::Time first_expires;
  };
  // One page of `dir`'s listing from the master.
  absl::Status ListPage(const std::string& dir, std::string* token,
                        absl::Duration* ttl,
                        std::vector<v1::ObjectInfo>* entries);
  // The pages of `dir` after `token` (up to kFillPages in all), then
  // Finish; on list_pool_.
  void ListRest(const std::string& dir, std::shared_ptr<DirFlight> flight,
                std::string token, absl::Duration ttl,
                std::shared_ptr<std::vector<v1::ObjectInfo>> entries,
                Mount mount, uint64_t generation);
  // Ends `flight`: keeps its entries (or marks `dir` unlisted when there
  // are too many), wakes its waiters.
  void Finish(const std::string& dir, DirFlight& flight, absl::Status st,
              absl::Duration ttl,
              std::shared_ptr<std::vector<v1::ObjectInfo>> entries,
              const Mount& mount, uint64_t generation);
  // Keeps `entries` of `mount` as Stat answers until `expires`, unless an
  // invalidation was applied since `generation`.
  void Keep(const std::vector<v1::ObjectInfo>& entries, const Mount& mount,
            absl::Time expires, uint64_t generation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  const std::unique_ptr<MasterConnection> master_;
  const WorkerMounts* const mounts_;
  WorkerMetrics* const metrics_;
  NodeMetadataCache cache_;

  // Invalidations applied: the master's epoch and seq. `generation_` counts
  // applications, so an answer fetched across one is served but not kept.
  mutable absl::Mutex mu_;
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, std::shared_ptr<Flight>> flights_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<DirFlight>> dir_flights_
      ABSL_GUARDED_BY(mu_);
  // Directories too large to list for a lookup, until when.
  absl::flat_hash_map<std::string, absl::Time> unlisted_ ABSL_GUARDED_BY(mu_);
  absl::Mutex sync_mu_;  // One catch-up at a time.
  std::atomic<bool> stopping_{false};
  // Last: destroyed (its listings ended) before what they use.
  std::unique_ptr<ThreadPool> list_pool_;
};

}  // namespace larder

#endif  // LARDER_WORKER_METADATA_SERVICE_H_
