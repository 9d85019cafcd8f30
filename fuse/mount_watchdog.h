// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: mount_watchdog.h
// -----------------------------------------------------------------------------
//
// Unmounts a FUSE daemon's mount when the daemon dies, where fusermount3's
// auto_unmount does not: with FUSE over io_uring (Linux 6.18), a daemon
// killed with SIGKILL leaves its mount behind (and, rarely, one on
// /dev/fuse does too once the kernel allows io_uring). The kernel ends the
// connection (every access then fails with ENOTCONN, "Transport endpoint is
// not connected") but fusermount3 gives up on the mount point it can no
// longer stat, so the directory stays unusable until an operator runs
// `umount -l`. Measured: a lazy unmount then removes it at once.
//
// The watchdog is a child process forked right after the mount, which keeps
// nothing of the daemon (every descriptor but its pipe and stderr closed, so
// it holds neither /dev/fuse nor the rings) and waits for the end of its
// pipe: the daemon's death, or its exit. It then looks for the daemon's own
// mount (its device number, which no other mount can have while it exists)
// at the mount point; if it is still there, it aborts the connection
// (/sys/fs/fuse/connections/MINOR/abort) and unmounts it lazily, with a log
// line. A clean exit has unmounted already: it finds nothing and exits. A
// daemon started again meanwhile on the same mount point has another device
// number and is left alone, as is anything mounted over the dead mount (only
// the topmost mount at the path is taken). It runs in a session of its own
// (a kill of the daemon's process group spares it) and is started with a
// raw clone, so no handler registered with pthread_atfork runs in it; a
// kill of the whole cgroup (a container's OOM) still takes it too.
#ifndef LARDER_FUSE_MOUNT_WATCHDOG_H_
#define LARDER_FUSE_MOUNT_WATCHDOG_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace larder {

class MountWatchdog {
 public:
  // Starts the watchdog of the FUSE mount at `mountpoint` (resolved) of
  // device `device` ("major:minor", from mountinfo), after the mount.
  // Errors: InvalidArgument (device), Internal (pipe, clone).
  static absl::StatusOr<std::unique_ptr<MountWatchdog>> Start(
      const std::string& mountpoint, const std::string& device);
  // Ends it, after the daemon unmounted: it finds the mount gone and exits
  // (reaped here).
  ~MountWatchdog();
  MountWatchdog(const MountWatchdog&) = delete;
  MountWatchdog& operator=(const MountWatchdog&) = delete;

  pid_t pid() const { return pid_; }

 private:
  MountWatchdog(pid_t pid, int fd) : pid_(pid), fd_(fd) {}
  const pid_t pid_;
  const int fd_;  // The daemon's end of the pipe.
};

}  // namespace larder

#endif  // LARDER_FUSE_MOUNT_WATCHDOG_H_
