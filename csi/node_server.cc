// Copyright 2026 The Larder Authors.
#include "csi/node_server.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <memory>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace larder {
namespace {

constexpr size_t kMaxPath = 4096;

std::string Errno(int err) { return std::string(strerror(err)); }

bool IsFuse(const MountInfo& m) {
  return m.type == "fuse" || absl::StartsWith(m.type, "fuse.");
}

// The gRPC answer to a publish or unpublish; a failure is logged with the
// request's volume and target.
template <typename Request>
grpc::Status Answer(absl::string_view event, const Request& req,
                    const absl::Status& st) {
  if (!st.ok()) {
    LARDER_LOG(WARNING, event)
        .Field("volume", req.volume_id())
        .Field("target", req.target_path())
        .Field("status", st);
  }
  return ToGrpcStatus(st);
}

// Runs `fn` (returning 0 or an errno) on a thread of its own and waits at
// most `timeout`: a call into a hung FUSE daemon must not hang the plugin.
// ETIMEDOUT when it did not return in time (the thread is left to finish).
int BoundedCall(std::function<int()> fn, absl::Duration timeout) {
  struct Call {
    absl::Notification done;
    int result = 0;
  };
  auto call = std::make_shared<Call>();
  std::thread([call, fn = std::move(fn)] {
    call->result = fn();
    call->done.Notify();
  }).detach();
  if (!call->done.WaitForNotificationWithTimeout(timeout)) return ETIMEDOUT;
  return call->result;
}

bool HasOption(absl::string_view options, absl::string_view option) {
  for (absl::string_view o : absl::StrSplit(options, ',')) {
    if (o == option) return true;
  }
  return false;
}

// Mounts `source` at `target` read-only, nosuid, nodev. The flags are set on
// a detached copy before it is attached (open_tree, mount_setattr,
// move_mount; Linux 5.12+), so that every copy the attachment propagates to
// (the host's, the pod's: the kubelet's pods directory is shared) is made
// read-only too: a bind followed by a read-only remount changes only the one
// mount, and the propagated copies stay writable. Other flags of the source
// (noexec, atime) are kept.
absl::Status BindReadOnly(const std::string& source,
                          const std::string& target) {
  const int fd = static_cast<int>(::open_tree(
      AT_FDCWD, source.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
  if (fd >= 0) {
    struct mount_attr attr {};
    attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    absl::Status st;
    if (::mount_setattr(fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) != 0) {
      st = absl::InternalError(
          absl::StrCat("making ", source, "'s copy read-only: ", Errno(errno)));
    } else if (::move_mount(fd, "", AT_FDCWD, target.c_str(),
                            MOVE_MOUNT_F_EMPTY_PATH) != 0) {
      st = absl::InternalError(absl::StrCat("mounting ", source, " on ", target,
                                            ": ", Errno(errno)));
    }
    ::close(fd);
    return st;
  }
  if (errno != ENOSYS) {
    return absl::InternalError(
        absl::StrCat("cloning the mount of ", source, ": ", Errno(errno)));
  }
  // A kernel before 5.12: bind, then remount read-only. The copies that the
  // bind propagated keep the source's flags.
  LARDER_LOG(WARNING, "csi.no_mount_setattr")
      .Field("target", target)
      .Field("note",
             "kernel before 5.12: the read-only flag stays on this mount; "
             "propagated copies are as the FUSE mount is");
  if (::mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    return absl::InternalError(absl::StrCat("bind mount ", source, " on ",
                                            target, ": ", Errno(errno)));
  }
  if (::mount(nullptr, target.c_str(), nullptr,
              MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
              nullptr) != 0) {
    const int err = errno;
    ::umount2(target.c_str(), MNT_DETACH);
    return absl::InternalError(
        absl::StrCat("remounting ", target, " read-only: ", Errno(err)));
  }
  return absl::OkStatus();
}

grpc::Status Unimplemented(absl::string_view rpc) {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                      absl::StrCat(rpc,
                                   " is not offered by larder csi (it "
                                   "advertises no such capability)"));
}

}  // namespace

absl::StatusOr<std::string> CleanAbsolutePath(absl::string_view path,
                                              absl::string_view what) {
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must be an absolute path, not '", path, "'"));
  }
  if (path.size() > kMaxPath || path.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is longer than ", kMaxPath, " bytes or holds NUL"));
  }
  std::vector<absl::string_view> parts =
      absl::StrSplit(path, '/', absl::SkipEmpty());
  for (absl::string_view p : parts) {
    if (p == "." || p == "..") {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " '", path, "' has a '", p, "' component: name it plainly"));
    }
  }
  return absl::StrCat("/", absl::StrJoin(parts, "/"));
}

absl::StatusOr<MountInfo> CsiNodeServer::FuseMount() const {
  absl::StatusOr<std::vector<MountInfo>> mounts =
      ReadMountInfo(options_.mountinfo);
  if (!mounts.ok())
    return absl::FailedPreconditionError(mounts.status().message());
  const MountInfo* top = TopMountAt(*mounts, options_.fuse_mountpoint);
  if (top == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("no FUSE mount at ", options_.fuse_mountpoint,
                     ": is `larder fuse ", options_.fuse_mountpoint,
                     "` running on this node (the chart's fuse container)?"));
  }
  if (!IsFuse(*top)) {
    return absl::FailedPreconditionError(
        absl::StrCat(options_.fuse_mountpoint, " holds a ", top->type,
                     " mount, not larder fuse's"));
  }
  return *top;
}

absl::Status CsiNodeServer::FuseUp() const {
  LARDER_RETURN_IF_ERROR(FuseMount().status());
  // statfs always reaches the daemon (a stat may be answered from the
  // kernel's attribute cache after the daemon died).
  const int err = BoundedCall(
      [path = options_.fuse_mountpoint] {
        struct statvfs vfs;
        return ::statvfs(path.c_str(), &vfs) == 0 ? 0 : errno;
      },
      options_.fuse_timeout);
  if (err != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the FUSE mount at ", options_.fuse_mountpoint, " does not answer (",
        err == ETIMEDOUT
            ? "no answer in " + absl::FormatDuration(options_.fuse_timeout)
            : Errno(err),
        "): its `larder fuse` daemon is down or hung"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> CsiNodeServer::CanonicalTarget(
    const std::string& target) const {
  // The kubelet names the target under its pods directory; a symlink on
  // the way would make the mount table (which holds resolved paths) miss it.
  const size_t slash = target.rfind('/');
  const std::string parent = slash == 0 ? "/" : target.substr(0, slash);
  char resolved[PATH_MAX];
  if (::realpath(parent.c_str(), resolved) == nullptr) {
    const int err = errno;
    return absl::Status(
        err == ENOENT ? absl::StatusCode::kNotFound
                      : absl::StatusCode::kInternal,
        absl::StrCat("the target's directory ", parent, ": ", Errno(err)));
  }
  const std::string base = target.substr(slash + 1);
  return std::string(resolved) == "/" ? "/" + base
                                      : absl::StrCat(resolved, "/", base);
}

absl::Status CsiNodeServer::Publish(
    const csi::v1::NodePublishVolumeRequest& req) {
  if (req.volume_id().empty())
    return absl::InvalidArgumentError("volume_id is required");
  LARDER_ASSIGN_OR_RETURN(std::string target,
                          CleanAbsolutePath(req.target_path(), "target_path"));
  if (!req.has_volume_capability())
    return absl::InvalidArgumentError("volume_capability is required");
  const csi::v1::VolumeCapability& cap = req.volume_capability();
  if (cap.has_block()) {
    return absl::InvalidArgumentError(
        "a block volume was asked for: a Larder volume is a directory "
        "(volumeMode: Filesystem)");
  }
  if (!cap.has_mount()) {
    return absl::InvalidArgumentError(
        "volume_capability has no access type (mount)");
  }
  auto it = req.volume_context().find("path");
  if (it == req.volume_context().end() || it->second.empty()) {
    return absl::InvalidArgumentError(
        "the volume has no 'path' attribute: give the cluster path in "
        "volumeAttributes, e.g. {path: /datasets/imagenet}");
  }
  LARDER_ASSIGN_OR_RETURN(
      std::string path, CleanAbsolutePath(it->second, "the 'path' attribute"));
  auto eph = req.volume_context().find("csi.storage.k8s.io/ephemeral");
  if (eph != req.volume_context().end() && eph->second == "true" &&
      !options_.allow_ephemeral) {
    return absl::PermissionDeniedError(
        "inline (ephemeral) volumes are off on this node: use a "
        "PersistentVolume, or start larder csi with --csi_ephemeral "
        "(csi.ephemeral in the chart)");
  }
  bool allowed = false;
  for (const std::string& prefix : options_.allowed_paths) {
    allowed |=
        prefix == "/" || path == prefix || absl::StartsWith(path, prefix + "/");
  }
  if (!allowed) {
    return absl::PermissionDeniedError(
        absl::StrCat(path,
                     " is outside the paths this node's CSI plugin may "
                     "publish (--csi_allowed_paths: ",
                     absl::StrJoin(options_.allowed_paths, ","), ")"));
  }

  // The FUSE daemon first, each call bounded: a hung daemon fails this
  // publish, not every later publish and unpublish.
  LARDER_RETURN_IF_ERROR(FuseUp());
  const std::string source =
      path == "/" ? options_.fuse_mountpoint : options_.fuse_mountpoint + path;
  // Shared: a call that times out still writes it later.
  auto st = std::make_shared<struct stat>();
  const int err = BoundedCall(
      [source, st] {
        return ::stat(source.c_str(), st.get()) == 0 ? 0 : errno;
      },
      options_.fuse_timeout);
  if (err != 0) {
    if (err == ENOENT || err == ENOTDIR) {
      return absl::NotFoundError(
          absl::StrCat("no ", path,
                       " in the cluster namespace (is it mounted "
                       "with `larder mount`?)"));
    }
    if (err == ENOTCONN || err == ECONNABORTED || err == ETIMEDOUT) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the FUSE mount at ", options_.fuse_mountpoint, " does not answer (",
          Errno(err), "): its `larder fuse` daemon is down or hung"));
    }
    if (err == EACCES || err == EPERM) {
      return absl::PermissionDeniedError(absl::StrCat(path, ": ", Errno(err)));
    }
    return absl::InternalError(absl::StrCat("stat ", source, ": ", Errno(err)));
  }
  if (!S_ISDIR(st->st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " is a file: a volume is a directory of the cluster namespace"));
  }
  LARDER_ASSIGN_OR_RETURN(target, CanonicalTarget(target));

  absl::MutexLock lock(&mu_);
  LARDER_ASSIGN_OR_RETURN(MountInfo fuse, FuseMount());
  const std::string root =
      fuse.root == "/" ? path : (path == "/" ? fuse.root : fuse.root + path);
  LARDER_ASSIGN_OR_RETURN(std::vector<MountInfo> mounts,
                          ReadMountInfo(options_.mountinfo));
  if (const MountInfo* there = TopMountAt(mounts, target)) {
    if (!IsFuse(*there) || there->root != root) {
      return absl::AlreadyExistsError(
          absl::StrCat("target ", target, " already holds a mount (",
                       there->type, " of ", there->root, "), not ", path));
    }
    if (there->device == fuse.device && HasOption(there->options, "ro")) {
      return absl::OkStatus();  // Published already: idempotent.
    }
    // Ours, but dead (from a FUSE connection that is gone: the daemon
    // restarted since) or half made (a plugin that stopped between the
    // bind and the read-only flag, on the fallback path): made again. A
    // live mount of another FUSE file system is left alone.
    struct statvfs vfs;
    const bool dead = ::statvfs(target.c_str(), &vfs) != 0 &&
                      (errno == ENOTCONN || errno == ECONNABORTED);
    if (!dead && there->device != fuse.device) {
      return absl::AlreadyExistsError(
          absl::StrCat("target ", target,
                       " holds a live mount of another FUSE file system"));
    }
    if (::umount2(target.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0) {
      return absl::InternalError(absl::StrCat("unmounting the old mount at ",
                                              target, ": ", Errno(errno)));
    }
    LARDER_LOG(INFO, "csi.replaced")
        .Field("target", target)
        .Field("path", path)
        .Field("reason", dead ? "stale" : "not read-only");
  }
  if (::mkdir(target.c_str(), 0750) != 0 && errno != EEXIST) {
    return absl::InternalError(
        absl::StrCat("mkdir ", target, ": ", Errno(errno)));
  }
  LARDER_RETURN_IF_ERROR(BindReadOnly(source, target));
  LARDER_LOG(INFO, "csi.published")
      .Field("volume", req.volume_id())
      .Field("path", path)
      .Field("target", target);
  return absl::OkStatus();
}

absl::Status CsiNodeServer::Unpublish(
    const csi::v1::NodeUnpublishVolumeRequest& req) {
  if (req.volume_id().empty())
    return absl::InvalidArgumentError("volume_id is required");
  LARDER_ASSIGN_OR_RETURN(std::string target,
                          CleanAbsolutePath(req.target_path(), "target_path"));
  absl::StatusOr<std::string> canonical = CanonicalTarget(target);
  if (absl::IsNotFound(canonical.status())) return absl::OkStatus();  // Gone.
  LARDER_RETURN_IF_ERROR(canonical.status());
  target = *std::move(canonical);
  absl::MutexLock lock(&mu_);
  // Every mount stacked there (a publish repeated after a crash may have
  // left two), then the directory.
  for (int i = 0; i < 16; ++i) {
    LARDER_ASSIGN_OR_RETURN(std::vector<MountInfo> mounts,
                            ReadMountInfo(options_.mountinfo));
    if (TopMountAt(mounts, target) == nullptr) break;
    if (::umount2(target.c_str(), UMOUNT_NOFOLLOW) != 0) {
      const int err = errno;
      // In use (a process of the pod still inside): detach it, as kubelet
      // means the pod is gone.
      if (err != EBUSY ||
          ::umount2(target.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0) {
        return absl::InternalError(
            absl::StrCat("unmount ", target, ": ", Errno(err)));
      }
    }
  }
  if (::rmdir(target.c_str()) != 0 && errno != ENOENT) {
    const int err = errno;
    if (err != ENOTDIR || ::unlink(target.c_str()) != 0) {
      return absl::InternalError(
          absl::StrCat("removing ", target, ": ", Errno(err)));
    }
  }
  LARDER_LOG(INFO, "csi.unpublished")
      .Field("volume", req.volume_id())
      .Field("target", target);
  return absl::OkStatus();
}

grpc::Status CsiNodeServer::GetPluginInfo(
    grpc::ServerContext*, const csi::v1::GetPluginInfoRequest*,
    csi::v1::GetPluginInfoResponse* resp) {
  resp->set_name(options_.driver_name);
  resp->set_vendor_version(options_.version);
  return grpc::Status::OK;
}

grpc::Status CsiNodeServer::GetPluginCapabilities(
    grpc::ServerContext*, const csi::v1::GetPluginCapabilitiesRequest*,
    csi::v1::GetPluginCapabilitiesResponse*) {
  return grpc::Status::OK;  // No controller service.
}

grpc::Status CsiNodeServer::Probe(grpc::ServerContext*,
                                  const csi::v1::ProbeRequest*,
                                  csi::v1::ProbeResponse* resp) {
  resp->mutable_ready()->set_value(FuseUp().ok());
  return grpc::Status::OK;
}

grpc::Status CsiNodeServer::NodeStageVolume(
    grpc::ServerContext*, const csi::v1::NodeStageVolumeRequest*,
    csi::v1::NodeStageVolumeResponse*) {
  return Unimplemented("NodeStageVolume");
}

grpc::Status CsiNodeServer::NodeUnstageVolume(
    grpc::ServerContext*, const csi::v1::NodeUnstageVolumeRequest*,
    csi::v1::NodeUnstageVolumeResponse*) {
  return Unimplemented("NodeUnstageVolume");
}

grpc::Status CsiNodeServer::NodePublishVolume(
    grpc::ServerContext*, const csi::v1::NodePublishVolumeRequest* req,
    csi::v1::NodePublishVolumeResponse*) {
  return Answer("csi.publish_failed", *req, Publish(*req));
}

grpc::Status CsiNodeServer::NodeUnpublishVolume(
    grpc::ServerContext*, const csi::v1::NodeUnpublishVolumeRequest* req,
    csi::v1::NodeUnpublishVolumeResponse*) {
  return Answer("csi.unpublish_failed", *req, Unpublish(*req));
}

grpc::Status CsiNodeServer::NodeGetVolumeStats(
    grpc::ServerContext*, const csi::v1::NodeGetVolumeStatsRequest*,
    csi::v1::NodeGetVolumeStatsResponse*) {
  return Unimplemented("NodeGetVolumeStats");
}

grpc::Status CsiNodeServer::NodeGetCapabilities(
    grpc::ServerContext*, const csi::v1::NodeGetCapabilitiesRequest*,
    csi::v1::NodeGetCapabilitiesResponse*) {
  return grpc::Status::OK;  // Publish and unpublish only: no staging.
}

grpc::Status CsiNodeServer::NodeGetInfo(grpc::ServerContext*,
                                        const csi::v1::NodeGetInfoRequest*,
                                        csi::v1::NodeGetInfoResponse* resp) {
  resp->set_node_id(options_.node_id);
  return grpc::Status::OK;
}

}  // namespace larder
