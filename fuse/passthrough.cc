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
  uint32_t backing = static_cast<uint32_t>(id);
  if (::ioctl(device_, kBackingClose, &backing) != 0) {
    LARDER_LOG(WARNING, "fuse.backing_close")
        .Field("path", path)
        .Field("error", std::strerror(errno));
  }
}

absl::StatusOr<int> Inode::AttachOpen(
    const std::string& version, bool may_set_up, BackingFiles& backing,
    absl::FunctionRef<absl::StatusOr<LocalSlice>()> local_object) {
  absl::MutexLock lock(&mu_);
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
  absl::MutexLock lock(&mu_);
  if (!passthrough) {
    --daemon_opens_;
    return;
  }
  if (backing_id_ == 0 || --backing_opens_ > 0) return;
  backing.Close(backing_id_, path);
  backing_id_ = 0;
  backing_object_ = LocalSlice{};  // Gives the worker's lease back.
}

}  // namespace larder
