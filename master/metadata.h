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
// Under-stores are opened lazily per mount (credentials from this process's
// environment, or the mount's credentials reference: "profile:NAME").
// Thread-safe.
#ifndef LARDER_MASTER_METADATA_H_
#define LARDER_MASTER_METADATA_H_

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "master/mount_registry.h"
#include "understore/options.h"
#include "understore/under_store.h"

namespace larder {

// Opens the under-store of a mount, applying its credentials reference.
absl::StatusOr<std::unique_ptr<UnderStore>> OpenMountStore(
    const v1::MountEntry& mount, const UnderStoreOptions& base);

class MetadataCache {
 public:
  MetadataCache(const MountRegistry* mounts, UnderStoreOptions store_options)
      : mounts_(mounts), store_options_(std::move(store_options)) {}

  // Errors: NotFound (no mount, or no such object), and the under-store's.
  absl::StatusOr<v1::StatResponse> Stat(absl::string_view path);
  absl::StatusOr<v1::ListResponse> List(const v1::ListRequest& request);
  // Drops cached entries at or below `path`; returns how many.
  uint64_t Invalidate(absl::string_view path);
  // The store of a mount (opened on first use).
  absl::StatusOr<std::shared_ptr<UnderStore>> Store(
      const v1::MountEntry& mount);

 private:
  template <typename T>
  struct Cached {
    T value;
    absl::Time expires;
  };
  const MountRegistry* const mounts_;
  const UnderStoreOptions store_options_;
  absl::Mutex mu_;
  // Keyed by "mount-path|uri" so a re-mounted path gets a fresh store.
  absl::flat_hash_map<std::string, std::shared_ptr<UnderStore>> stores_
      ABSL_GUARDED_BY(mu_);
  // Ordered maps: Invalidate removes a key range.
  std::map<std::string, Cached<v1::StatResponse>> stats_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Cached<v1::ListResponse>> lists_ ABSL_GUARDED_BY(mu_);
};

}  // namespace larder

#endif  // LARDER_MASTER_METADATA_H_
