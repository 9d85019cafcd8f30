// Copyright 2026 The Larder Authors.
#include "worker/worker_mounts.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/block_key.h"
#include "common/config.h"
#include "common/mount_set.h"
#include "common/retry.h"
#include "common/status_macros.h"
#include "understore/factory.h"
#include "understore/mount_store.h"

namespace larder {

absl::Status WorkerMounts::Add(const std::string& name,
                               std::shared_ptr<UnderStore> store,
                               uint64_t block_size) {
  std::string uri = store->DebugString();
  return AddOpened(name, std::move(uri), std::move(store), block_size);
}

absl::Status WorkerMounts::Add(const std::string& name, const std::string& uri,
                               uint64_t block_size,
                               const UnderStoreOptions& options) {
  LARDER_ASSIGN_OR_RETURN(std::unique_ptr<UnderStore> store,
                          OpenUnderStore(uri, options));
  return AddOpened(name, uri, std::shared_ptr<UnderStore>(std::move(store)),
                   block_size);
}

absl::Status WorkerMounts::Add(const v1::MountEntry& entry,
                               std::shared_ptr<UnderStore> store) {
  LARDER_RETURN_IF_ERROR(ValidateMountEntry(entry));
  const MountAccess access = MountAccessOf(entry);
  const absl::Duration protect =
      entry.eviction() != "epoch" ? absl::ZeroDuration()
      : entry.epoch_window_ms() == 0
          ? kDefaultEpochWindow
          : absl::Milliseconds(entry.epoch_window_ms());
  return AddOpened(entry.path(), entry.uri(), std::move(store),
                   entry.block_size(), entry.credentials(), access,
                   absl::Milliseconds(entry.metadata_ttl_ms()),
                   entry.writable(), protect);
}

absl::Status WorkerMounts::AddOpened(const std::string& name, std::string uri,
                                     std::shared_ptr<UnderStore> store,
                                     uint64_t block_size,
                                     std::string credentials,
                                     MountAccess access,
                                     absl::Duration metadata_ttl, bool writable,
                                     absl::Duration protect_after_read) {
  // A flag-defined mount has a plain name; a master-defined one is a cluster
  // path ("/datasets/imagenet").
  if (name.empty() || (name.find('/') != std::string::npos && name[0] != '/')) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad mount name '", name,
                     "' (a plain name, or a cluster path starting with '/')"));
  }
  if (absl::Status st = CheckBlockSize(block_size); !st.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("mount '", name, "': ", st.message()));
  }
  absl::MutexLock lock(&mu_);
  mounts_[name] = Mount{name,         std::move(uri),   std::move(credentials),
                        block_size,   std::move(store), access,
                        metadata_ttl, writable,         protect_after_read};
  return absl::OkStatus();
}

absl::StatusOr<Mount> WorkerMounts::GetCovering(absl::string_view path) const {
  return WithMissHook(path, [&] { return FindCovering(path); });
}

absl::StatusOr<Mount> WorkerMounts::WithMissHook(
    absl::string_view path,
    absl::FunctionRef<absl::StatusOr<Mount>()> find) const {
  absl::StatusOr<Mount> m = find();
  if (m.ok() || path.empty() || path[0] != '/') return m;
  std::function<absl::Status()> hook;
  {
    absl::MutexLock lock(&mu_);
    hook = miss_hook_;
  }
  if (!hook) return m;
  const absl::Status pulled = hook();
  m = find();
  if (!m.ok() && IsRetryable(pulled)) {
    return absl::UnavailableError(absl::StrCat(
        m.status().message(),
        ", and the master could not be asked for its mount table: ",
        pulled.message()));
  }
  return m;
}

absl::StatusOr<Mount> WorkerMounts::FindCovering(absl::string_view path) const {
  if (path.empty() || path[0] != '/')
    return absl::NotFoundError(absl::StrCat("'", path, "' is no cluster path"));
  absl::MutexLock lock(&mu_);
  // The lock is held for the whole walk; the analysis does not follow it
  // into the callback.
  const auto* mounts = &mounts_;
  const absl::string_view at = MountSet::Covering(
      path, [&](absl::string_view p) { return mounts->contains(p); });
  if (!at.empty()) return mounts->find(at)->second;
  return absl::NotFoundError(absl::StrCat("no mount holds '", path, "'"));
}

absl::StatusOr<Mount> WorkerMounts::Find(absl::string_view name) const {
  absl::MutexLock lock(&mu_);
  auto it = mounts_.find(name);
  if (it == mounts_.end())
    return absl::NotFoundError(absl::StrCat("unknown mount '", name, "'"));
  return it->second;
}

absl::Status WorkerMounts::MayAccess(const Caller& caller,
                                     const std::string& mount,
                                     absl::string_view relative,
                                     PathAccess want) const {
  MountAccess access;
  std::shared_ptr<UnderStore> store;
  {
    absl::MutexLock lock(&mu_);
    if (auto it = mounts_.find(mount); it != mounts_.end()) {
      access = it->second.access;
      store = it->second.store;
    }
  }
  if (store == nullptr) {
    LARDER_ASSIGN_OR_RETURN(Mount m, Get(mount));
    access = m.access;
    store = m.store;
  }
  // The daemon's own ids stand for an unset owner and group; they do not
  // change while it runs (asked once: two system calls per read otherwise).
  static const uint32_t daemon_uid = ::geteuid();
  static const uint32_t daemon_gid = ::getegid();
  // A mount whose files keep their own owner and mode: this path's, as the
  // file system holds them now.
  return MayAccessPath(caller, mount, access, *store, relative, want,
                       daemon_uid, daemon_gid);
}

absl::StatusOr<Mount> WorkerMounts::Get(absl::string_view name) const {
  return WithMissHook(name, [&] { return Find(name); });
}

void WorkerMounts::SetMissHook(std::function<absl::Status()> hook) {
  absl::MutexLock lock(&mu_);
  miss_hook_ = std::move(hook);
}

std::vector<Mount> WorkerMounts::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<Mount> out;
  for (const auto& [k, v] : mounts_) out.push_back(v);
  return out;
}

void WorkerMounts::RetainOnly(const v1::MountTable& table) {
  absl::MutexLock lock(&mu_);
  for (auto it = mounts_.begin(); it != mounts_.end();) {
    bool keep = it->first[0] != '/';
    for (const v1::MountEntry& m : table.mounts())
      keep = keep || m.path() == it->first;
    if (keep) {
      ++it;
    } else {
      mounts_.erase(it++);
    }
  }
}

absl::Status WorkerMounts::AddFromFlags(const std::vector<std::string>& entries,
                                        uint64_t block_size,
                                        const UnderStoreOptions& options) {
  for (const std::string& e : entries) {
    if (e.empty()) continue;
    size_t eq = e.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad --mount '", e, "': want NAME=URI"));
    }
    LARDER_RETURN_IF_ERROR(
        Add(e.substr(0, eq), e.substr(eq + 1), block_size, options));
  }
  return absl::OkStatus();
}

}  // namespace larder
