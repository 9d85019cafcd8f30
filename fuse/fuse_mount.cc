// Copyright 2026 The Larder Authors.
//
// The mount's lifecycle: checks the mount point, mounts with the kernel
// channel and the operations (fuse_ops.h), serves until a signal or an
// unmount, and tears down. See fuse_mount.h.
#include "fuse/fuse_mount.h"

#include <fcntl.h>
#include <limits.h>
#include <prometheus/registry.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/file_util.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/mount_table.h"
#include "common/ops_server.h"
#include "common/status_macros.h"
#include "fuse/fuse_ops.h"
#include "fuse/inode_table.h"
#include "fuse/kernel_channel.h"
#include "fuse/kernel_notifier.h"
#include "fuse/libfuse.h"
#include "fuse/metrics.h"
#include "fuse/mount_watchdog.h"
#include "fuse/passthrough.h"
#include "fuse/uring_channel.h"

namespace larder {

int ErrnoFor(const absl::Status& status) {
  // The under-store failed to answer (down, hung, throttling): an I/O error
  // of the file, whatever the code.
  if (IsStoreError(status) &&
      (status.code() == absl::StatusCode::kUnavailable ||
       status.code() == absl::StatusCode::kDeadlineExceeded ||
       status.code() == absl::StatusCode::kResourceExhausted))
    return EIO;
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return 0;
    case absl::StatusCode::kNotFound:
      return ENOENT;
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      return EACCES;
    case absl::StatusCode::kDeadlineExceeded:
      return ETIMEDOUT;
    case absl::StatusCode::kFailedPrecondition:
      return ESTALE;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return EINVAL;
    case absl::StatusCode::kUnimplemented:
      return ENOTSUP;
    case absl::StatusCode::kResourceExhausted:
      return EAGAIN;
    case absl::StatusCode::kAlreadyExists:
      return EEXIST;
    default:
      return EIO;
  }
}

// The mounted file system: the parts of the daemon and their order of
// setting up and tearing down.
class FuseMount::Fs {
 public:
  Fs(FuseOptions options, std::unique_ptr<Client> client)
      : options_(std::move(options)),
        client_(std::move(client)),
        registry_(std::make_shared<prometheus::Registry>()),
        metrics_(*registry_),
        channel_({.max_read = options_.max_read,
                  .passthrough = options_.passthrough,
                  .uring = options_.channel != "classic",
                  .start_uring = [this] { StartUring(); }},
                 backing_),
        notifier_(inodes_) {}

  ~Fs() {
    StopSweeping();
    StopFollowingWrites();
    client_->SetInvalidationHook(nullptr);
    notifier_.Stop();
    if (ops_) ops_->StopSlowPool();  // Before the session they reply to.
    if (session_ != nullptr) {
      if (mounted_) fuse_session_unmount(session_);
      StopUring();
      fuse_session_destroy(session_);
    }
    watchdog_.reset();
  }

  absl::Status Mount();
  absl::Status Serve();
  int ops_port() const { return ops_server_ ? ops_server_->port() : 0; }

 private:
  absl::Status CheckMountpoint();
  // FUSE over io_uring, once the INIT reply switched it on (on the thread
  // that sent it); /dev/fuse alone if the rings cannot be set up.
  void StartUring();
  // After the unmount: the kernel has ended every ring entry.
  void StopUring();
  // writes == "auto": remounts read-write when a mount of the table becomes
  // writable, read-only when none is (polled every second; the client
  // polls the table every ring_refresh).
  void FollowWrites();
  void StopFollowingWrites();
  // Closes kept passthrough files whose --passthrough_keep is up, every
  // second: opens and releases sweep too, but an idle mount makes none.
  void StartSweeping();
  void StopSweeping();
  // Sets the read-only flag of the mount's superblock (fspick + fsconfig,
  // Linux 5.2+; CAP_SYS_ADMIN).
  absl::Status SetSuperblockReadOnly(bool read_only);

  const FuseOptions options_;
  const std::unique_ptr<Client> client_;
  const std::shared_ptr<prometheus::Registry> registry_;
  FuseMetrics metrics_;
  InodeTable inodes_;
  BackingFiles backing_;
  KernelChannel channel_;
  KernelNotifier notifier_;
  std::string resolved_mountpoint_;
  // Before ops_, which uses it; after client_ and inodes_, which it uses.
  std::unique_ptr<LeaseAhead> lease_ahead_;
  std::unique_ptr<FuseOps> ops_;  // The session's userdata.
  fuse_session* session_ = nullptr;
  bool mounted_ = false;
  std::unique_ptr<OpsServer> ops_server_;
  std::unique_ptr<UringChannel> uring_;
  // Over io_uring: unmounts the mount if this process dies (ended once
  // unmounted).
  std::unique_ptr<MountWatchdog> watchdog_;
  // The mount's kernel read-only flag as last set, and its device (the
  // remount checks that the mount at the path is still this one).
  std::atomic<bool> read_only_{false};
  std::string device_;
  absl::Notification stop_following_;
  std::thread writes_follower_;
  absl::Notification stop_sweeping_;
  std::thread sweeper_;
};

absl::Status FuseMount::Fs::SetSuperblockReadOnly(bool read_only) {
  std::optional<MountInfo> m = FindMount(resolved_mountpoint_);
  if (!m || m->device.empty() || m->device != device_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the mount at ", resolved_mountpoint_, " is no longer this daemon's"));
  }
  // The superblock's flag, not the mount's: every copy of the mount (the
  // host's and the pods' through mount propagation, bind mounts) checks it,
  // where a remount would change the daemon's own copy only. And no
  // request to this daemon (statvfs would be one).
  const int fd = static_cast<int>(
      ::syscall(SYS_fspick, AT_FDCWD, resolved_mountpoint_.c_str(),
                FSPICK_CLOEXEC | FSPICK_NO_AUTOMOUNT));
  absl::Status st;
  if (fd < 0 ||
      ::syscall(SYS_fsconfig, fd, FSCONFIG_SET_FLAG, read_only ? "ro" : "rw",
                nullptr, 0) != 0 ||
      ::syscall(SYS_fsconfig, fd, FSCONFIG_CMD_RECONFIGURE, nullptr, nullptr,
                0) != 0) {
    const int err = errno;
    const std::string what = absl::StrCat(
        "making the mount ", read_only ? "read-only" : "read-write", ": ",
        std::strerror(err));
    if (err == EPERM) {
      st = absl::PermissionDeniedError(what);
    } else if (err == EBUSY) {
      st = absl::UnavailableError(what);  // A file open for writing.
    } else if (err == ENOSYS) {
      st = absl::UnimplementedError(what);  // Before Linux 5.2.
    } else {
      st = absl::InternalError(what);
    }
  } else {
    read_only_ = read_only;
  }
  if (fd >= 0) ::close(fd);
  return st;
}

void FuseMount::Fs::FollowWrites() {
  writes_follower_ = std::thread([this] {
    std::string logged;  // The last failure logged: each is logged once.
    while (!stop_following_.WaitForNotificationWithTimeout(absl::Seconds(1))) {
      const bool want_read_only = !client_->AnyWritableMount();
      if (want_read_only == read_only_) continue;
      const absl::Status st = SetSuperblockReadOnly(want_read_only);
      if (st.ok()) {
        logged.clear();
        LARDER_LOG(INFO, "fuse.remounted")
            .Field("mountpoint", options_.mountpoint)
            .Field("read_only", want_read_only)
            .Field("why", want_read_only ? "no mount of the table is writable"
                                         : "a mount of the table is writable");
        continue;
      }
      // Busy (a file open for writing while going read-only): next tick.
      if (absl::IsUnavailable(st) || st.ToString() == logged) continue;
      logged = st.ToString();
      LARDER_LOG(ERROR, "fuse.remount_failed")
          .Field("mountpoint", options_.mountpoint)
          .Field("read_only", want_read_only)
          .Field("status", st)
          .Field("fix",
                 want_read_only ? "none needed: writes to mounts that are not "
                                  "writable still fail"
                 : absl::IsPermissionDenied(st)
                     ? "run larder fuse as root (CAP_SYS_ADMIN), or with "
                       "--writes=on: until then writes fail with EROFS"
                     : "restart larder fuse with --writes=on: until then "
                       "writes fail with EROFS");
      if (absl::IsPermissionDenied(st) || absl::IsUnimplemented(st) ||
          absl::IsFailedPrecondition(st)) {
        return;  // Will not change: stop asking.
      }
    }
  });
}

void FuseMount::Fs::StartSweeping() {
  if (options_.passthrough_keep <= absl::ZeroDuration()) return;
  sweeper_ = std::thread([this] {
    while (!stop_sweeping_.WaitForNotificationWithTimeout(absl::Seconds(1)))
      backing_.Sweep(absl::Now(), std::numeric_limits<int>::max());
  });
}

void FuseMount::Fs::StopSweeping() {
  if (!sweeper_.joinable()) return;
  stop_sweeping_.Notify();
  sweeper_.join();
}

void FuseMount::Fs::StopFollowingWrites() {
  if (!writes_follower_.joinable()) return;
  stop_following_.Notify();
  writes_follower_.join();
}

void FuseMount::Fs::StartUring() {
  absl::StatusOr<std::unique_ptr<UringChannel>> uring = UringChannel::Start(
      session_, fuse_session_fd(session_),
      {.threads = options_.max_threads,
       .payload_bytes = std::max<size_t>(options_.max_read, 1 << 20) + 4096});
  if (!uring.ok()) {
    LARDER_LOG(WARNING, "fuse.channel")
        .Field("channel", "/dev/fuse")
        .Field("why", uring.status());
    return;
  }
  uring_ = *std::move(uring);
  // Replies find the rings before the first request taken from them is
  // served (one written to /dev/fuse instead is lost: its caller hangs).
  channel_.SetUring(uring_.get());
  uring_->Run();
}

void FuseMount::Fs::StopUring() {
  channel_.SetUring(nullptr);
  uring_.reset();
}

absl::Status FuseMount::Fs::CheckMountpoint() {
  const std::string& mp = options_.mountpoint;
  if (mp.empty()) return absl::InvalidArgumentError("no mount point given");
  struct stat st {};
  if (::stat(mp.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT)
      return absl::NotFoundError(absl::StrCat(
          "mount point ", mp, " does not exist (create it with mkdir)"));
    if (err == ENOTCONN)
      return absl::FailedPreconditionError(absl::StrCat(
          "mount point ", mp,
          " is a dead FUSE mount (Transport endpoint is not connected); "
          "clear it with `fusermount3 -u ",
          mp, "`"));
    return absl::InvalidArgumentError(
        absl::StrCat("mount point ", mp, ": ", std::strerror(err)));
  }
  if (!S_ISDIR(st.st_mode))
    return absl::InvalidArgumentError(
        absl::StrCat("mount point ", mp, " is not a directory"));
  // Busy: something is mounted there already.
  char resolved[PATH_MAX];
  if (::realpath(mp.c_str(), resolved) == nullptr)
    return absl::InvalidArgumentError(
        absl::StrCat("mount point ", mp, ": ", std::strerror(errno)));
  resolved_mountpoint_ = resolved;
  if (std::optional<MountInfo> m = FindMount(resolved_mountpoint_);
      m && resolved_mountpoint_ != "/") {
    return absl::FailedPreconditionError(absl::StrCat(
        "mount point ", mp, " is busy: ", m->source, " (", m->type,
        ") is mounted there; unmount it first (fusermount3 -u ", mp, ")"));
  }
  return absl::OkStatus();
}

absl::Status FuseMount::Fs::Mount() {
  LARDER_RETURN_IF_ERROR(CheckMountpoint());
  RaisePipeMaxSize(options_.max_read);
  RaiseMaxPagesLimit(options_.max_read);
  // A passthrough file kept between opens holds a descriptor (the worker's
  // memfd): half of what the limit allows, at most 65,536.
  const uint64_t fd_limit = RaiseFdLimit();
  backing_.set_max_kept(
      static_cast<size_t>(std::min<uint64_t>(65536, fd_limit / 2)));
  lease_ahead_ = std::make_unique<LeaseAhead>(
      LeaseAhead::Options{
          // Not with opens by the kernel: nothing would take them.
          .capacity = options_.passthrough && options_.opens != "kernel"
                          ? static_cast<size_t>(std::min<uint64_t>(
                                options_.lease_ahead, fd_limit / 4))
                          : 0,
          .keep = options_.lease_ahead_keep,
          .min_size = options_.passthrough_min_size,
          .has_backing =
              [this](const std::string& path) {
                const uint64_t ino = inodes_.Find(path);
                std::shared_ptr<Inode> inode =
                    ino == 0 ? nullptr : inodes_.Get(ino);
                return inode != nullptr && inode->has_backing();
              }},
      *client_);
  backing_.set_keep(options_.passthrough_keep);
  std::string opts =
      absl::StrCat("fsname=larder,subtype=larder,default_permissions,max_read=",
                   options_.max_read);
  if (options_.allow_other) opts += ",allow_other";
  if (options_.auto_unmount) opts += ",auto_unmount";
  std::vector<std::string> argv = {"larder-fuse", "-o", opts};
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(cargv.size()), cargv.data());
  ops_ =
      std::make_unique<FuseOps>(options_, *client_, inodes_, metrics_, channel_,
                                backing_, *lease_ahead_, resolved_mountpoint_);
  session_ = fuse_session_new(&args, &FuseOps::Operations(),
                              sizeof(fuse_lowlevel_ops), ops_.get());
  fuse_opt_free_args(&args);
  if (session_ == nullptr)
    return absl::InvalidArgumentError(
        absl::StrCat("libfuse rejected the mount options '", opts, "'"));
  if (fuse_session_mount(session_, options_.mountpoint.c_str()) != 0) {
    return absl::InternalError(absl::StrCat(
        "cannot mount FUSE at ", options_.mountpoint,
        " (is /dev/fuse there and fusermount3 installed? see the log above)"));
  }
  mounted_ = true;
  const std::optional<MountInfo> mounted = FindMount(resolved_mountpoint_);
  if (mounted) device_ = mounted->device;
  // Read-only (the superblock, so that every copy of the mount is) while
  // no mount takes writes; a daemon that may not set it stays read-write.
  if (options_.writes == "off" ||
      (options_.writes == "auto" && !client_->AnyWritableMount())) {
    if (absl::Status st = SetSuperblockReadOnly(true); !st.ok()) {
      // Opens by the kernel reach no open handler, so the kernel alone may
      // refuse their writes.
      if (options_.opens == "kernel") {
        return absl::FailedPreconditionError(absl::StrCat(
            "--opens=kernel needs a read-only mount, and ", st.message(),
            " (run larder fuse as root, or with --opens=daemon)"));
      }
      LARDER_LOG(WARNING, "fuse.not_read_only")
          .Field("mountpoint", options_.mountpoint)
          .Field("status", st)
          .Field("cost", "a GETATTR round trip per open of a file read before");
    }
  }
  // fusermount3's auto_unmount leaves the mount of a daemon killed with
  // SIGKILL behind when its requests went through io_uring, and now and then
  // through /dev/fuse too once the kernel allows io_uring (seen in CI:
  // ENOTCONN 10 s after the kill of a classic daemon): a watchdog process
  // unmounts it (mount_watchdog.h). Where fusermount3 did, it finds nothing.
  if (options_.auto_unmount) {
    absl::StatusOr<std::unique_ptr<MountWatchdog>> w =
        mounted && absl::StartsWith(mounted->type, "fuse")
            ? MountWatchdog::Start(resolved_mountpoint_, mounted->device)
            : absl::NotFoundError("the new mount is not in mountinfo");
    if (w.ok()) {
      watchdog_ = *std::move(w);
    } else {
      LARDER_LOG(WARNING, "fuse.no_watchdog")
          .Field("mountpoint", options_.mountpoint)
          .Field("status", w.status());
    }
  }
  ops_->set_session(session_);
  backing_.set_device(fuse_session_fd(session_));
  notifier_.Start(session_);
  client_->SetInvalidationHook(
      [this](const std::string& path) { notifier_.Push(path); });
  if (fuse_session_custom_io(session_, &FuseOps::ChannelIo(),
                             fuse_session_fd(session_)) != 0)
    return absl::InternalError("cannot attach the FUSE channel");
  if (!options_.ops_listen.empty()) {
    OpsServer::Options o;
    o.listen = options_.ops_listen;
    o.registry = registry_;
    o.before_scrape = [this] {
      metrics_.Update(client_->stats());
      metrics_.UpdateLeaseAhead(lease_ahead_->counters(), lease_ahead_->held());
    };
    LARDER_ASSIGN_OR_RETURN(ops_server_, OpsServer::Start(std::move(o)));
  }
  if (options_.writes == "auto" && !device_.empty()) FollowWrites();
  StartSweeping();
  LARDER_LOG(INFO, "fuse.mounted")
      .Field("mountpoint", options_.mountpoint)
      .Field("read_only", read_only_.load())
      .Field("writes", options_.writes)
      .Field("why", !read_only_ ? "writes reach the writable mounts"
                    : options_.writes == "off"
                        ? "--writes=off: writes fail (EROFS)"
                        : "no mount of the table is "
                          "writable: writes fail (EROFS) "
                          "until one is (larder mount "
                          "--writable)")
      .Field("max_read", options_.max_read)
      .Field("keep_cache", options_.keep_cache)
      .Field("direct_io_min_size", options_.direct_io_min_size)
      .Field("attr_timeout", options_.attr_timeout);
  return absl::OkStatus();
}

absl::Status FuseMount::Fs::Serve() {
  if (fuse_set_signal_handlers(session_) != 0)
    return absl::InternalError("cannot install signal handlers");
  sigset_t signals;
  sigemptyset(&signals);
  for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&signals, s);
  pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);

  fuse_loop_config* config = fuse_loop_cfg_create();
  fuse_loop_cfg_set_clone_fd(config, 1);
  // A few channel threads (requests that may wait go to the slow pool:
  // slow_requests.cc). Over io_uring they take only forgets and interrupts.
  const auto channel_threads =
      static_cast<unsigned>(std::max(1, options_.channel_threads));
  fuse_loop_cfg_set_max_threads(config, channel_threads);
  // Threads stay: creating one per burst of requests costs more than it
  // saves.
  fuse_loop_cfg_set_idle_threads(config, channel_threads);
  const int rc = fuse_session_loop_mt(session_, config);
  fuse_loop_cfg_destroy(config);
  // The requests handed on are answered while the mount still stands.
  ops_->StopSlowPool();

  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  fuse_remove_signal_handlers(session_);
  StopFollowingWrites();
  StopSweeping();
  fuse_session_unmount(session_);
  mounted_ = false;
  // The session's descriptor is closed: a release served after this (over
  // io_uring) must not send BACKING_CLOSE to whatever reuses its number.
  backing_.set_device(-1);
  watchdog_.reset();
  StopUring();
  LARDER_LOG(INFO, "fuse.unmounted")
      .Field("mountpoint", options_.mountpoint)
      .Field("exit", rc);
  // rc > 0 is the signal that ended the loop: a clean stop.
  if (rc < 0)
    return absl::InternalError(
        absl::StrCat("FUSE session ended with error ", std::strerror(-rc)));
  return absl::OkStatus();
}

FuseMount::FuseMount(std::unique_ptr<Fs> fs) : fs_(std::move(fs)) {}
FuseMount::~FuseMount() = default;

absl::StatusOr<std::unique_ptr<FuseMount>> FuseMount::Mount(
    FuseOptions options, std::unique_ptr<Client> client) {
  if (client == nullptr) return absl::InvalidArgumentError("no client");
  if (options.max_read < 4096 || options.max_read > (16u << 20))
    return absl::InvalidArgumentError(absl::StrCat(
        "max_read ", options.max_read, " out of range (4 KiB to 16 MiB)"));
  if (options.opens == "kernel" && options.writes != "off")
    return absl::InvalidArgumentError(
        "opens \"kernel\" needs writes \"off\": a write goes through its "
        "open");
  auto fs = std::make_unique<Fs>(std::move(options), std::move(client));
  LARDER_RETURN_IF_ERROR(fs->Mount());
  return std::unique_ptr<FuseMount>(new FuseMount(std::move(fs)));
}

absl::Status FuseMount::Serve() { return fs_->Serve(); }
int FuseMount::ops_port() const { return fs_->ops_port(); }

}  // namespace larder
