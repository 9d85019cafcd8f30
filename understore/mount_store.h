// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: mount_store.h
// -----------------------------------------------------------------------------
//
// "A mount, opened as an under-store with its credentials": the one way every
// process (the master for metadata, the worker for fetches, the client for
// its under-store fallback) turns an entry of the master's mount table into
// an UnderStore.
//
// A mount's credentials reference names credentials that each process holds
// itself; the secret never travels in the mount table:
//   ""              this process's own (environment, default profile, ...);
//   "profile:NAME"  the AWS profile NAME of this process's credentials file.
//
//   MountStores stores(base_options);
//   absl::StatusOr<std::shared_ptr<UnderStore>> s = stores.Get(mount_entry);
//
// MountStores keeps one opened store per mount and opens it again when the
// mount's URI or credentials change (a re-mount). Thread-safe; stores are
// shared and outlive any read in flight.
#ifndef LARDER_UNDERSTORE_MOUNT_STORE_H_
#define LARDER_UNDERSTORE_MOUNT_STORE_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "proto/master.pb.h"
#include "understore/options.h"
#include "understore/under_store.h"

namespace larder {

// Opens `mount`'s under-store with `base` and the mount's credentials.
// A file:// root must lie in one of base.allowed_file_roots when that is
// set (both resolved with realpath, so a symlink cannot lead out; and the
// directory opened is checked, not only the path resolved before it): the
// processes that open mounts run as root, and a mount is data served to
// anyone who may read the cluster.
// Errors: InvalidArgument (an unknown credentials reference, a bad URI),
// PermissionDenied (a file:// root outside the allowed roots; the named
// profile), NotFound (a missing file:// root or profile), Unavailable (the
// file:// root changed while it was opened), and OpenUnderStore's.
absl::StatusOr<std::unique_ptr<UnderStore>> OpenMountStore(
    const v1::MountEntry& mount, const UnderStoreOptions& base);

// Whether `mount` is an entry of a mount table: a normalized cluster path
// other than "/", a block size in range (CheckBlockSize), a permission mode
// (0 to 07777) and a URI that parses. The master checks what it adds, the
// worker what the master's table tells it. Errors: InvalidArgument naming the
// field.
absl::Status ValidateMountEntry(const v1::MountEntry& mount);

// Who may read `mount`'s files: its owner, group and mode; a file:// mount
// that sets none of them keeps each file's own (MountAccess::per_file).
MountAccess MountAccessOf(const v1::MountEntry& mount);

class MountStores {
 public:
  explicit MountStores(UnderStoreOptions base) : base_(std::move(base)) {}

  // The store of `mount`, opened on first use or after its URI or
  // credentials changed. Errors: those of OpenMountStore.
  absl::StatusOr<std::shared_ptr<UnderStore>> Get(const v1::MountEntry& mount);
  // Forgets the store of the mount at `path` (unmounted).
  void Drop(const std::string& path);
  // Makes `store` the store of `mount` until its URI or credentials change
  // (tests: a store that misbehaves on cue).
  void SetForTesting(const v1::MountEntry& mount,
                     std::shared_ptr<UnderStore> store);

 private:
  struct Opened {
    std::string uri, credentials;
    std::shared_ptr<UnderStore> store;
  };
  const UnderStoreOptions base_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Opened> stores_ ABSL_GUARDED_BY(mu_);
};

}  // namespace larder

#endif  // LARDER_UNDERSTORE_MOUNT_STORE_H_
