// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: worker_mounts.h
// -----------------------------------------------------------------------------
//
// The worker's view of the cluster's mounts: name -> opened under-store and
// block size. Filled from --mount flags today (and by the master later).
// Thread-safe; under-stores are shared and outlive any in-flight fetch.
#ifndef LARDER_WORKER_WORKER_MOUNTS_H_
#define LARDER_WORKER_WORKER_MOUNTS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/block_key.h"
#include "common/security.h"
#include "proto/master.pb.h"
#include "understore/options.h"
#include "understore/under_store.h"

namespace larder {

struct Mount {
  std::string name;
  std::string uri;  // As given (for the master's mounts: as in its table).
  std::string credentials;  // The master's mounts: the credentials reference.
  uint64_t block_size = 0;
  std::shared_ptr<UnderStore> store;
  // Who may read it through this worker's short-circuit socket (the
  // master's mounts: their owner, group and mode; --mount flags: anyone).
  MountAccess access;
  // The master's mounts: how long their metadata may be kept (the node
  // metadata cache's TTL). Zero for --mount flags (not cached).
  absl::Duration metadata_ttl = absl::ZeroDuration();
  // The master's mounts: whether writers may create objects in it
  // (MountEntry.writable). --mount flags: no.
  bool writable = false;
  // The master's mounts with eviction=epoch: how long a read keeps a block
  // from eviction (CacheIndex's protection). Zero: LRU.
  absl::Duration protect_after_read = absl::ZeroDuration();
};

class WorkerMounts {
 public:
  // Opens the store and adds (or replaces) the mount. Errors: those of
  // OpenUnderStore; InvalidArgument for a bad name or block size.
  absl::Status Add(const std::string& name, const std::string& uri,
                   uint64_t block_size, const UnderStoreOptions& options);
  // Adds (or replaces) a mount of the master's table with its store
  // (OpenMountStore). Errors: InvalidArgument for a bad path or block size.
  absl::Status Add(const v1::MountEntry& entry,
                   std::shared_ptr<UnderStore> store);
  // Adds a mount with an already opened store (tests, embedding).
  absl::Status Add(const std::string& name, std::shared_ptr<UnderStore> store,
                   uint64_t block_size);

  // Errors: NotFound (unknown mount), Unavailable (unknown here, and the
  // master could not be asked). A miss on a cluster path ("/...") first
  // calls the miss hook (the master link: it pulls the master's table at
  // once, so a mount added a moment ago is served without waiting for the
  // next heartbeat), then looks again.
  absl::StatusOr<Mount> Get(absl::string_view name) const;

  // May `caller` read block `id`: MayReadMount for its mount, then, for a
  // mount whose files keep their own owner and mode and a local or
  // anonymous caller other than root, the file's own bits and its
  // directories' (UnderStore::MayRead). Used by every path that hands out
  // bytes (gRPC reads, prefetches, short-circuit leases and exports).
  // Errors: PermissionDenied, and those of Get.
  absl::Status MayRead(const Caller& caller, const BlockId& id) const {
    return MayAccess(caller, id.mount, id.path, PathAccess::kRead);
  }
  // As MayRead, for seeing path `relative` of `mount` (Stat: kLookup) or
  // listing it (kList): MayAccessPath.
  absl::Status MayAccess(const Caller& caller, const std::string& mount,
                         absl::string_view relative, PathAccess want) const;

  // Get without the miss hook (for the hook's own caller).
  absl::StatusOr<Mount> Find(absl::string_view name) const;

  // The master's mount holding cluster path `path` ("/a/b/c": the mount
  // "/a/b" or "/a"; mount paths do not nest); a miss calls the miss hook,
  // as Get does. Errors: NotFound.
  absl::StatusOr<Mount> GetCovering(absl::string_view path) const;

  // Installs the miss hook; it must be callable from any thread. It answers
  // how its pull of the master's table went: when that failed with a
  // retryable error (the master unreachable) and the mount is still
  // unknown, Get answers Unavailable, not NotFound, so that the caller
  // tries again rather than taking the mount for gone.
  void SetMissHook(std::function<absl::Status()> hook);
  std::vector<Mount> List() const;

  // Removes the mounts named by cluster paths ("/...") that `table` (the
  // master's) no longer has. Mounts from --mount flags stay.
  void RetainOnly(const v1::MountTable& table);

  // Parses "--mount NAME=URI" entries and adds them.
  absl::Status AddFromFlags(const std::vector<std::string>& entries,
                            uint64_t block_size,
                            const UnderStoreOptions& options);

 private:
  absl::StatusOr<Mount> FindCovering(absl::string_view path) const;
  // `find`, and again after the miss hook when it missed a cluster path.
  absl::StatusOr<Mount> WithMissHook(
      absl::string_view path,
      absl::FunctionRef<absl::StatusOr<Mount>()> find) const;
  absl::Status AddOpened(
      const std::string& name, std::string uri,
      std::shared_ptr<UnderStore> store, uint64_t block_size,
      std::string credentials = "", MountAccess access = {},
      absl::Duration metadata_ttl = absl::ZeroDuration(), bool writable = false,
      absl::Duration protect_after_read = absl::ZeroDuration());

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Mount> mounts_ ABSL_GUARDED_BY(mu_);
  std::function<absl::Status()> miss_hook_ ABSL_GUARDED_BY(mu_);
};

}  // namespace larder

#endif  // LARDER_WORKER_WORKER_MOUNTS_H_
