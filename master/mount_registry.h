// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: mount_registry.h
// -----------------------------------------------------------------------------
//
// The cluster's mount table: cluster paths ("/datasets/imagenet") backed by
// under-store URIs, with per-mount options. Kept in the master's StateStore
// as `mounts.textproto` (a file in the state directory, or a key in etcd), so
// it survives a restart or a change of leader. Every change bumps the
// version, and is stored before it is applied.
//
// Thread-safe.
#ifndef LARDER_MASTER_MOUNT_REGISTRY_H_
#define LARDER_MASTER_MOUNT_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/mount_set.h"
#include "master/state_store.h"
#include "proto/master.pb.h"
#include "understore/uri.h"

namespace larder {

class MountRegistry {
 public:
  // Loads the table from `store` (`store` outlives this). Errors: DataLoss
  // (the stored table is unreadable), those of the store.
  static absl::StatusOr<std::unique_ptr<MountRegistry>> Open(StateStore* store);
  // An empty table over `store`, read later with Reload (a master that is
  // not the leader yet).
  static std::unique_ptr<MountRegistry> Unloaded(StateStore* store);
  // The same over a LocalStateStore of `state_dir`, owned by the registry.
  static absl::StatusOr<std::unique_ptr<MountRegistry>> Open(
      const std::string& state_dir);
  // Reads the table again (a master that becomes the leader). Errors: as
  // Open; the table in memory is kept on an error.
  absl::Status Reload();

  // Adds a mount. Errors: InvalidArgument (bad path, URI, block size, or a
  // secret in the URI), AlreadyExists (the path or a parent/child of it is
  // mounted), and the under-store's errors if the URI cannot be opened.
  absl::StatusOr<v1::MountTable> Add(v1::MountEntry entry);
  // Errors: NotFound.
  absl::StatusOr<v1::MountTable> Remove(const std::string& path);
  v1::MountTable Get() const;

  // Directories that exist only as prefixes of mount paths ("/" and
  // "/datasets" when "/datasets/imagenet" is mounted): the cluster paths of
  // their children ("/datasets", "/datasets/imagenet"), sorted. Empty if
  // `path` is no such prefix.
  std::vector<std::string> VirtualChildren(absl::string_view path) const;

  // The mount holding `cluster_path` and the path within it.
  // Errors: NotFound ("no mount holds PATH"), InvalidArgument (bad path).
  absl::StatusOr<std::pair<v1::MountEntry, std::string>> Resolve(
      absl::string_view cluster_path) const;

 private:
  explicit MountRegistry(StateStore* store) : store_(store) {}
  absl::Status Persist(const v1::MountTable& table)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::unique_ptr<StateStore> owned_store_;
  StateStore* const store_;
  mutable absl::Mutex mu_;
  MountSet mounts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace larder

#endif  // LARDER_MASTER_MOUNT_REGISTRY_H_
