// Copyright 2026 The Larder Authors.
#include "understore/mount_store.h"

#include <climits>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/block_key.h"
#include "common/status_macros.h"
#include "understore/aws_credentials.h"
#include "understore/factory.h"
#include "understore/file_store.h"
#include "understore/uri.h"

namespace larder {

namespace {

// The real path of `path`, with symlinks resolved.
absl::StatusOr<std::string> RealPath(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr)
    return absl::ErrnoToStatus(errno, absl::StrCat("file:// root ", path));
  return std::string(buf);
}

// Whether `root` (the real path of file:// root `path`) lies in one of the
// allowed roots.
absl::Status CheckAllowedRoot(const std::string& path, const std::string& root,
                              const std::vector<std::string>& allowed) {
  for (const std::string& a : allowed) {
    absl::StatusOr<std::string> allowed_root = RealPath(a);
    if (!allowed_root.ok()) continue;
    if (*allowed_root == "/" || root == *allowed_root ||
        absl::StartsWith(root, *allowed_root + "/"))
      return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "file:// root ", path, root == path ? "" : absl::StrCat(" (", root, ")"),
      " is outside the directories this cluster may serve (",
      allowed.empty() ? "none are allowed"
                      : absl::StrCat("allowed: ", absl::StrJoin(allowed, ",")),
      "); the operator allows roots with --allowed_file_roots on the master "
      "and the workers"));
}

absl::Status CheckFileRoot(const StoreUri& u,
                           const std::vector<std::string>& allowed) {
  absl::StatusOr<std::string> real = RealPath(u.path);
  if (absl::IsNotFound(real.status())) {
    return absl::InvalidArgumentError(
        absl::StrCat("file:// root ", u.path, " does not exist"));
  }
  LARDER_ASSIGN_OR_RETURN(std::string root, std::move(real));
  return CheckAllowedRoot(u.path, root, allowed);
}

}  // namespace

MountAccess MountAccessOf(const v1::MountEntry& mount) {
  MountAccess access;
  if (mount.has_uid()) access.uid = mount.uid();
  if (mount.has_gid()) access.gid = mount.gid();
  access.mode = mount.mode();
  access.per_file = absl::StartsWith(mount.uri(), "file://") &&
                    !mount.has_uid() && !mount.has_gid() && mount.mode() == 0;
  return access;
}

absl::Status ValidateMountEntry(const v1::MountEntry& mount) {
  absl::StatusOr<std::string> path = NormalizeClusterPath(mount.path());
  if (!path.ok()) return path.status();
  if (*path != mount.path()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mount path '", mount.path(), "' is not normalized ('", *path, "')"));
  }
  if (*path == "/") return absl::InvalidArgumentError("cannot mount on '/'");
  LARDER_RETURN_IF_ERROR(CheckBlockSize(mount.block_size()));
  if (mount.mode() > 07777) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "mode 0%o is not a permission mode (0 to 07777)", mount.mode()));
  }
  if (mount.eviction() != "" && mount.eviction() != "lru" &&
      mount.eviction() != "epoch") {
    return absl::InvalidArgumentError(absl::StrCat(
        "eviction '", mount.eviction(), "' is not a policy (lru or epoch)"));
  }
  if (mount.epoch_window_ms() > uint64_t{366} * 24 * 3600 * 1000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "epoch window ", mount.epoch_window_ms(), " ms is over a year"));
  }
  return ParseStoreUri(mount.uri()).status();
}

absl::StatusOr<std::unique_ptr<UnderStore>> OpenMountStore(
    const v1::MountEntry& mount, const UnderStoreOptions& base) {
  LARDER_ASSIGN_OR_RETURN(StoreUri u, ParseStoreUri(mount.uri()));
  if (u.scheme == "file" && base.allowed_file_roots) {
    LARDER_RETURN_IF_ERROR(CheckFileRoot(u, *base.allowed_file_roots));
    // The root that was opened is checked again, not only the path resolved
    // a moment before: a directory swapped for a link in between (by a user
    // who owns it) would lead anywhere, / included.
    LARDER_ASSIGN_OR_RETURN(std::unique_ptr<FileStore> store,
                            FileStore::Open(u));
    LARDER_RETURN_IF_ERROR(
        CheckAllowedRoot(u.path, store->root(), *base.allowed_file_roots));
    return std::unique_ptr<UnderStore>(std::move(store));
  }
  UnderStoreOptions o = base;
  absl::string_view ref = mount.credentials();
  if (!ref.empty()) {
    if (!absl::ConsumePrefix(&ref, "profile:") || ref.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "mount ", mount.path(), ": unknown credentials reference '",
          mount.credentials(), "' (want profile:NAME)"));
    }
    LARDER_ASSIGN_OR_RETURN(AwsCredentials c,
                            LoadAwsCredentials(ref, base.env));
    o.aws_credentials = c;
  }
  return OpenUnderStore(mount.uri(), o);
}

absl::StatusOr<std::shared_ptr<UnderStore>> MountStores::Get(
    const v1::MountEntry& mount) {
  {
    absl::MutexLock lock(&mu_);
    if (auto it = stores_.find(mount.path());
        it != stores_.end() && it->second.uri == mount.uri() &&
        it->second.credentials == mount.credentials())
      return it->second.store;
  }
  LARDER_ASSIGN_OR_RETURN(std::unique_ptr<UnderStore> opened,
                          OpenMountStore(mount, base_));
  std::shared_ptr<UnderStore> store(std::move(opened));
  absl::MutexLock lock(&mu_);
  stores_[mount.path()] = Opened{mount.uri(), mount.credentials(), store};
  return store;
}

void MountStores::Drop(const std::string& path) {
  absl::MutexLock lock(&mu_);
  stores_.erase(path);
}

void MountStores::SetForTesting(const v1::MountEntry& mount,
                                std::shared_ptr<UnderStore> store) {
  absl::MutexLock lock(&mu_);
  stores_[mount.path()] =
      Opened{mount.uri(), mount.credentials(), std::move(store)};
}

}  // namespace larder
