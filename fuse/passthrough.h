// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: passthrough.h
// -----------------------------------------------------------------------------
//
// FUSE passthrough (FUSE protocol 7.40, Linux 6.9+), which libfuse 3.14 does
// not know: the INIT and open flags, and the /dev/fuse ioctls that register
// a backing file with the kernel.
//
// A large file (direct_io) whose every block the worker on this node holds
// in RAM as one memfd is registered with the kernel as the backing file of
// its inode: reads and mmap go from the worker's memory to the reader, with
// no request to this daemon (fuse_read_bench, warm 1 GiB shard: 65-66% of
// the page-cache ceiling, against 24-31% through the daemon; rounds after
// the worker's 2 MiB collapse up to 90%). The kernel requires every open of
// an inode with a backing file to use that same file, and none while the
// inode is in page-cache mode (a direct_io file mmap'ed), so the daemon
// keeps one backing file per inode, counted by opens, and only sets one up
// when no other open of the inode reads through it. That per-inode state
// and its rules are Inode's (Inode::AttachOpen and Inode::DetachOpen in
// inode_table.h, defined in passthrough.cc); BackingFiles below issues the
// ioctls.
//
// The kernel channel (kernel_channel.h) asks for passthrough at INIT and
// marks open replies with FOPEN_PASSTHROUGH and the backing id.
#ifndef LARDER_FUSE_PASSTHROUGH_H_
#define LARDER_FUSE_PASSTHROUGH_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace larder {

class Inode;  // inode_table.h

// FUSE_PASSTHROUGH (INIT, in flags2) and FOPEN_PASSTHROUGH (open replies),
// newer than the <linux/fuse.h> (7.38) the adaptor builds with.
inline constexpr uint64_t kInitPassthrough = 1ull << 37;
inline constexpr uint32_t kOpenPassthrough = 1u << 7;

// The kernel's backing files of one FUSE session. Thread-safe.
class BackingFiles {
 public:
  BackingFiles() = default;
  // Lets go of the kept backing files (the session, and the kernel's
  // backing files with it, are gone by then).
  ~BackingFiles();

  // The session's /dev/fuse descriptor, which the ioctls go to.
  void set_device(int fd) { device_ = fd; }

  // Passthrough is used once the kernel agreed to it at INIT (Enable), until
  // the kernel refuses a backing file.
  void Enable() { enabled_ = true; }
  bool enabled() const { return enabled_; }

  // Registers `fd` as a backing file: its id (> 0). When the kernel refuses
  // (not root, CAP_SYS_ADMIN, or no passthrough), passthrough is switched off
  // for the session (logged) and Unavailable returned.
  absl::StatusOr<int> Open(int fd);
  // Unregisters backing file `id` (of cluster path `path`, for the log).
  void Close(int id, absl::string_view path);

  // How long a backing file is kept after its last open
  // (FuseOptions::passthrough_keep). The worker's lease on the object lasts
  // as long as the backing file does (the daemon asks for one until
  // released), so the worker never counts as freed what the kernel still
  // reads. Zero: closed at once.
  void set_keep(absl::Duration keep) { keep_ = keep; }
  absl::Duration keep() const { return keep_; }
  // Whether one more backing file may be kept after its last open (each
  // holds a descriptor: at most `max_kept`, set from the descriptor limit).
  // Notes `inode` for the sweep that closes it when its time is up.
  bool Keep(std::weak_ptr<Inode> inode, absl::Time until);
  // A kept backing file was opened again, or closed.
  void Unkept() { --kept_count_; }
  // Closes the kept backing files whose time is up, at most `max` (a few
  // at a time from every open and release; all of them from the daemon's
  // sweeper, every second, so that an idle mount lets go of them too).
  void Sweep(absl::Time now, int max = 8);
  void set_max_kept(size_t n) { max_kept_ = n; }
  size_t kept() const { return kept_count_.load(); }

 private:
  std::atomic<int> device_{-1};
  std::atomic<bool> enabled_{false};
  std::atomic<size_t> max_kept_{4096};
  absl::Duration keep_ = absl::Seconds(20);  // Set before the session.
  std::atomic<size_t> kept_count_{0};
  mutable absl::Mutex mu_;
  // Kept backing files by the time they are due; an entry whose inode has
  // opened it again, or gone, is skipped when due.
  std::deque<std::pair<absl::Time, std::weak_ptr<Inode>>> kept_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace larder

#endif  // LARDER_FUSE_PASSTHROUGH_H_
