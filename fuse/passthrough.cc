// Copyright 2026 The Larder Authors.
#include "fuse/passthrough.h"

#include <sys/ioctl.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "fuse/inode_table.h"

namespace larder {
namespace {

// The /dev/fuse ioctls that register and unregister a backing file.
struct BackingMap {
  int32_t fd;
  uint32_t flags;
  uint64_t padding;
};
constexpr unsigned long kBackingOpen = _IOW(229, 1, BackingMap);
constexpr unsigned long kBackingClose = _IOW(229, 2, uint32_t);

}  // namespace

absl::StatusOr<int> BackingFiles::Open(int fd) {
  BackingMap map{fd, 0, 0};
  const int id = ::ioctl(device_, kBackingOpen, &map);
  if (id > 0) return id;
  const int err = errno;
  // Not root (CAP_SYS_ADMIN), or the kernel refuses: stop asking.
  LARDER_LOG(WARNING, "fuse.passthrough_off")
      .Field("error", std::strerror(err))
      .Field("effect", "large files are read through the daemon");
  enabled_ = false;
  return absl::UnavailableError(
      absl::StrCat("FUSE_DEV_IOC_BACKING_OPEN: ", std::strerror(err)));
}

void BackingFiles::Close(int id, absl::string_view path) {
  if (device_ < 0) return;  // No session: nothing registered is left.
  uint32_t backing = static_cast<uint32_t>(id);
  if (::ioctl(device_, kBackingClose, &backing) != 0) {
    LARDER_LOG(WARNING, "fuse.backing_close")
        .Field("path", path)
        .Field("error", std::strerror(errno));
  }
}

BackingFiles::~BackingFiles() {
  device_ = -1;
  std::deque<std::pair<absl::Time, std::weak_ptr<Inode>>> kept;
  {
    absl::MutexLock lock(&mu_);
    kept.swap(kept_);
  }
  for (auto& [due, inode] : kept) {
    if (std::shared_ptr<Inode> i = inode.lock())
      i->DropKept(absl::InfiniteFuture());
  }
}

bool BackingFiles::Keep(std::weak_ptr<Inode> inode, absl::Time until) {
  if (kept_count_.load() >= max_kept_.load()) return false;
  ++kept_count_;
  absl::MutexLock lock(&mu_);
  kept_.emplace_back(until, std::move(inode));
  return true;
}

void BackingFiles::Sweep(absl::Time now, int max) {
  // A few at a time: each open and release sweeps, and each kept file
  // added one entry.
  for (int i = 0; i < max; ++i) {
    std::weak_ptr<Inode> due;
    {
      absl::MutexLock lock(&mu_);
      if (kept_.empty() || kept_.front().first > now) return;
      due = std::move(kept_.front().second);
      kept_.pop_front();
    }
    if (std::shared_ptr<Inode> inode = due.lock()) inode->DropKept(now);
  }
}

Inode::~Inode() {
  absl::MutexLock lock(&mu_);
  if (backing_id_ > 0 && kept_by_ != nullptr) CloseBacking(*kept_by_);
}

void Inode::CloseBacking(BackingFiles& backing) {
  backing.Close(backing_id_, path);
  if (kept_by_ != nullptr) backing.Unkept();
  kept_by_ = nullptr;
  backing_id_ = 0;
  has_backing_ = false;
  backing_object_ = LocalSlice{};  // Gives the worker's lease back.
}

void Inode::DropKept(absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (backing_id_ > 0 && kept_by_ != nullptr && backing_opens_ == 0 &&
      kept_until_ <= now)
    CloseBacking(*kept_by_);
}

absl::StatusOr<int> Inode::AttachOpen(
    const std::string& version, bool may_set_up, BackingFiles& backing,
    absl::FunctionRef<absl::StatusOr<LocalSlice>()> local_object) {
  const absl::Time now = absl::Now();
  backing.Sweep(now);
  absl::MutexLock lock(&mu_);
  if (backing_id_ > 0 && kept_by_ != nullptr) {
    // Kept after its last open: used again if still in time and of this
    // version, else closed (a new one is set up below).
    if (kept_until_ > now && backing_version_ == version && may_set_up) {
      backing.Unkept();
      kept_by_ = nullptr;
      backing_opens_ = 1;
      return backing_id_;
    }
    CloseBacking(backing);
  }
  if (backing_id_ > 0) {
    if (backing_version_ != version) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the file changed while open for passthrough reads of version ",
          backing_version_, "; open it again once those readers closed it"));
    }
    ++backing_opens_;
    return backing_id_;
  }
  if (may_set_up && backing.enabled() && daemon_opens_ == 0) {
    absl::StatusOr<LocalSlice> object = local_object();
    if (object.ok()) {
      absl::StatusOr<int> id = backing.Open(object->fd);
      if (id.ok()) {
        backing_id_ = *id;
        has_backing_ = true;
        backing_version_ = version;
        backing_opens_ = 1;
        backing_object_ = *std::move(object);
        return *id;
      }
    } else {
      LARDER_LOG(DEBUG, "fuse.no_passthrough")
          .Field("path", path)
          .Field("why", object.status());
    }
  }
  ++daemon_opens_;
  return 0;
}

void Inode::DetachOpen(bool passthrough, BackingFiles& backing) {
  const absl::Time now = absl::Now();
  backing.Sweep(now);
  absl::MutexLock lock(&mu_);
  if (!passthrough) {
    --daemon_opens_;
    return;
  }
  if (backing_id_ == 0 || --backing_opens_ > 0) return;
  // The last open: kept a while for the next (BackingFiles::keep).
  kept_until_ = now + backing.keep();
  if (backing.keep() > absl::ZeroDuration() &&
      backing.Keep(weak_from_this(), kept_until_)) {
    kept_by_ = &backing;
    return;
  }
  backing.Close(backing_id_, path);
  backing_id_ = 0;
  has_backing_ = false;
  backing_object_ = LocalSlice{};  // Gives the worker's lease back.
}

}  // namespace larder
