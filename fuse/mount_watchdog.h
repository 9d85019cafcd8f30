// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: mount_watchdog.h
// -----------------------------------------------------------------------------
//
// Unmounts a FUSE daemon's mount when the daemon dies, where fusermount3's
// auto_unmount does not: with FUSE over io_uring (Linux 6.18), a daemon
// killed with SIGKILL leaves its mount behind. The kernel ends the
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
// number and is left alone.
#ifndef LARDER_FUSE_MOUNT_WATCHDOG_H_
#define LARDER_FUSE_MOUNT_WATCHDOG_H_

#include <string>

#include "absl/status/status.h"

namespace larder {

// Forks the watchdog of the FUSE mount at `mountpoint` (resolved) of device
// `device` ("major:minor", from mountinfo). Call once, after the mount.
// Errors: Internal (pipe, fork).
absl::Status StartMountWatchdog(const std::string& mountpoint,
                                const std::string& device);

}  // namespace larder

#endif  // LARDER_FUSE_MOUNT_WATCHDOG_H_
