// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: metadata_view.h
// -----------------------------------------------------------------------------
//
// A client's metadata front: Stat and whole-directory listings of cluster
// paths through the process's metadata cache (NodeMetadataCache), in this
// order on a Stat:
//
//   1. a fresh entry of the path, or the fresh listing of its directory
//      (found, or NotFound), answers without asking anyone;
//   2. the node's metadata cache (the local worker's, STAT on its
//      short-circuit socket), for paths in the client's mounts;
//   3. the master.
//
// Answers are kept for what is left of their TTL (the master's
// `ttl_remaining_ms`, the worker's `ttl`), never longer than the mount's
// TTL. When the master cannot be reached, an expired answer is served for
// `stale_window` past its TTL (stale-if-error), counted and logged once per
// path; for a second after a failure the master is not asked again while
// an expired answer can be served. Invalidations published with the ring
// are applied by SyncInvalidations.
//
// Everything the view asks of the rest of the client goes through Backend,
// so it is tested without processes (metadata_view_test.cc). Thread-safe.
#ifndef LARDER_CLIENT_METADATA_VIEW_H_
#define LARDER_CLIENT_METADATA_VIEW_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/metadata_cache.h"
#include "common/outage_pause.h"
#include "larder/client.h"
#include "proto/master.pb.h"

namespace larder {

FileInfo FromProto(const v1::ObjectInfo& o);
void ToProto(const FileInfo& f, v1::ObjectInfo* o);

class MetadataView {
 public:
  // What the view needs from the client: the master, the node's worker and
  // the client's mount table.
  class Backend {
   public:
    virtual ~Backend() = default;
    // The master's answers. Errors: the master's (Unavailable and
    // DeadlineExceeded when it cannot be reached).
    virtual absl::StatusOr<v1::StatResponse> MasterStat(
        const std::string& path) = 0;
    virtual absl::StatusOr<v1::ListResponse> MasterList(
        const std::string& path, const std::string& page_token) = 0;
    virtual absl::StatusOr<v1::GetInvalidationsResponse> MasterInvalidations(
        uint64_t epoch, uint64_t after_seq) = 0;
    // The node metadata cache's answer about `path` (OK or NotFound) and
    // how much longer it is fresh; none when there is no local worker or it
    // does not answer (the master is asked then). An answer whose status is
    // a store error (IsStoreError): the worker asked the master, whose store
    // did not answer; the master is not asked again. (epoch, seq): the
    // invalidations this client has applied.
    struct NodeAnswer {
      NodeMetadataCache::Stat stat;
      absl::Duration ttl;
    };
    virtual std::optional<NodeAnswer> NodeStat(const std::string& path,
                                               uint64_t epoch,
                                               uint64_t seq) = 0;
    // The client's mount holding cluster path `key`, if any.
    virtual std::optional<v1::MountEntry> MountOf(const std::string& key) = 0;
  };

  struct Options {
    // How long past its TTL an answer is served while the master cannot be
    // reached.
    absl::Duration stale_window = absl::Hours(1);
    // The master's address, for messages.
    std::string master;
  };

  struct Counters {
    uint64_t hits = 0;       // Answered from this process's cache.
    uint64_t node_hits = 0;  // Answered by the node's metadata cache.
    uint64_t misses = 0;     // Sent to the master.
    uint64_t stale = 0;      // Expired answers served (stale-if-error).
  };

  // `cache` may be shared with other views (a client started warm from
  // another); `backend` must outlive the view.
  MetadataView(Options options, std::shared_ptr<NodeMetadataCache> cache,
               Backend* backend)
      : options_(std::move(options)),
        cache_(std::move(cache)),
        backend_(backend) {}

  // Errors: InvalidArgument (a malformed path), NotFound, the master's.
  absl::StatusOr<v1::StatResponse> Stat(absl::string_view path);
  // Stat's answer (found, NotFound, or InvalidArgument) if this process's
  // cache holds it fresh; else none, and nobody asked (for a caller that
  // must not wait: the FUSE daemon's few request threads).
  std::optional<absl::StatusOr<v1::StatResponse>> CachedStat(
      absl::string_view path);
  // The whole directory, sorted by path. Errors: those of Stat, and
  // ResourceExhausted for a directory larger than the cache takes (page it
  // with the master's List instead).
  absl::StatusOr<std::shared_ptr<const NodeMetadataCache::Listing>> ListDir(
      absl::string_view path);
  // The cached listing of `path` while fresh, else null: asks nobody.
  std::shared_ptr<const NodeMetadataCache::Listing> CachedListDir(
      absl::string_view path);

  // The master published (epoch, seq) with its ring: drops what was
  // invalidated since the last one applied (everything after a new epoch)
  // and calls the hook with each path dropped ("/" for everything).
  void SyncInvalidations(uint64_t epoch, uint64_t seq);
  void SetInvalidationHook(std::function<void(const std::string&)> hook);
  // The invalidations applied, and setting them (a client started warm).
  std::pair<uint64_t, uint64_t> invalidations() const;
  void StartFrom(uint64_t epoch, uint64_t seq);

  // How long metadata of `key` is kept: its mount's TTL; paths outside any
  // mount (the virtual directories above mount paths) a few seconds.
  absl::Duration TtlOf(const std::string& key);

  const std::shared_ptr<NodeMetadataCache>& cache() const { return cache_; }
  Counters counters() const;

 private:
  // A fresh answer for `key` from this process's cache (a hit, counted);
  // else null, with the freshest expired answer held, if any, in `stale`
  // (expired at `stale_expires`).
  std::shared_ptr<const NodeMetadataCache::Stat> Fresh(
      const std::string& key, absl::Time now,
      std::shared_ptr<const NodeMetadataCache::Stat>* stale,
      absl::Time* stale_expires);
  // Stale-if-error, for a cache miss of `key`: `fetch` asks; when the
  // master (or its under-store) cannot be reached, `stale` (expired at
  // `expired`) is served within the stale window, counted and logged. While
  // the master is known to be down, `fetch` is not even tried.
  template <typename T>
  absl::StatusOr<T> FetchOrStale(const std::string& key, std::optional<T> stale,
                                 absl::Time expired, absl::Time now,
                                 absl::FunctionRef<absl::StatusOr<T>()> fetch);
  // `key`'s Stat from the listing of its directory: found, or NotFound;
  // none when the mount of a file is unknown here (the master is asked).
  std::optional<NodeMetadataCache::Stat> FromListing(
      const std::string& key, const NodeMetadataCache::Listing& listing);
  // A miss of `key`: the node's answer, else the master's, kept.
  absl::StatusOr<std::shared_ptr<const NodeMetadataCache::Stat>> Fetch(
      const std::string& key, absl::Time now);
  bool MasterDown(absl::Time now);
  void NoteMasterDown(absl::Time now);
  absl::Status MasterDownError() const;
  // The under-store of `mount` failed to answer (the master said so): its
  // expired entries are served without asking, for a pause that doubles
  // while the store stays down (store_pause_); the error to serve them with.
  std::optional<absl::Status> StoreDown(const std::string& mount,
                                        absl::Time now);
  void NoteStale(const std::string& key, const absl::Status& why);

  // After the master failed to answer, expired entries are served without
  // asking it again for a second (each try would fail the same way).
  static constexpr absl::Duration kMasterDownPause = absl::Seconds(1);
  // Likewise after a mount's store failed to answer (each try costs the
  // store's retries, seconds, on the master): 1 s, then 2, 4, ... up to 30 s
  // while every try fails; forgotten at the first answer.
  OutagePause store_pause_;

  const Options options_;
  const std::shared_ptr<NodeMetadataCache> cache_;
  Backend* const backend_;
  mutable absl::Mutex mu_;
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time master_down_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::flat_hash_set<std::string> stale_logged_ ABSL_GUARDED_BY(mu_);
  std::function<void(const std::string&)> hook_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> hits_{0}, node_hits_{0}, misses_{0}, stale_{0};
};

}  // namespace larder

#endif  // LARDER_CLIENT_METADATA_VIEW_H_
