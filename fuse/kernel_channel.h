// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: kernel_channel.h
// -----------------------------------------------------------------------------
//
// The daemon's side of the kernel: what libfuse 3.14 does not do for it.
//
// KernelChannel is the session's custom I/O (fuse_session_custom_io).
// libfuse 3.14 speaks FUSE 7.38 and derives the largest request from
// max_write (1 MiB). Newer kernel features are switched on by amending its
// INIT reply on the way to the kernel, when the kernel offers them:
// max_pages up to max_read (requests of up to 4 MiB, one round trip per
// block instead of four; the kernel bounds it by fs.fuse.max_pages_limit),
// FUSE_DIRECT_IO_ALLOW_MMAP (kernel 6.6+), so files opened with direct_io
// can still be mmap'ed shared (numpy.memmap, LMDB), and passthrough
// (passthrough.h). Open replies for passthrough get FOPEN_PASSTHROUGH and
// their backing id (OpenBacking).
//
// The kernel's tuning knobs: fs.pipe-max-size and fs.fuse.max_pages_limit
// (raised before the mount when the daemon may), and the mount's bdi
// readahead window (after INIT). And /proc/self/mountinfo, to find what is
// mounted at a path.
#ifndef LARDER_FUSE_KERNEL_CHANNEL_H_
#define LARDER_FUSE_KERNEL_CHANNEL_H_

#include <linux/fuse.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "common/mount_table.h"

namespace larder {

class BackingFiles;  // passthrough.h
class UringChannel;  // uring_channel.h

// FUSE_DIRECT_IO_ALLOW_MMAP (INIT, in flags2; FUSE 7.39), newer than the
// <linux/fuse.h> (7.38) the adaptor builds with.
inline constexpr uint64_t kDirectIoAllowMmap = 1ull << 36;

class KernelChannel {
 public:
  struct Options {
    uint32_t max_read = 4 << 20;  // Largest request, bytes.
    bool passthrough = true;      // Ask for passthrough at INIT.
    // Ask for FUSE over io_uring at INIT (uring_channel.h) when the kernel
    // offers it; `start_uring` is then called once the INIT reply that
    // switched it on has been written, on that thread.
    bool uring = false;
    std::function<void()> start_uring;
  };
  // `backing` is enabled when the kernel agrees to passthrough.
  KernelChannel(Options options, BackingFiles& backing)
      : options_(options), backing_(backing) {}

  // The custom I/O functions (libfuse passes the session's userdata, from
  // which the caller finds this channel). Read notes the kernel's INIT
  // request; Writev amends the INIT reply and passthrough open replies.
  ssize_t Read(int fd, void* buf, size_t len);
  ssize_t Writev(int fd, struct iovec* iov, int count);
  static ssize_t Splice(int fdin, off_t* offin, int fdout, off_t* offout,
                        size_t len, unsigned flags);

  // Whether the kernel lets direct_io files be mmap'ed shared (6.6+):
  // before that, MAP_SHARED of them fails with ENODEV. Known after INIT.
  bool direct_io_mmap() const { return direct_io_mmap_; }
  // Whether the INIT reply will ask for io_uring (the kernel offered it and
  // it is wanted): known once the INIT request was read, before libfuse's
  // init callback. Replies are then never spliced into /dev/fuse (a ring
  // request's reply must go to its ring entry).
  bool WillUseUring() const;
  // Replies to ring requests go to `uring` from now (null: none).
  void SetUring(UringChannel* uring) { uring_ = uring; }
  // Whether requests come through io_uring (SetUring with a channel).
  bool UsingUring() const {
    return uring_.load(std::memory_order_acquire) != nullptr;
  }

  // While one lives, the open reply its thread sends is for passthrough
  // from backing file `id` (0: an ordinary reply), which libfuse 3.14
  // cannot write.
  class OpenBacking {
   public:
    explicit OpenBacking(int id);
    ~OpenBacking();
    OpenBacking(const OpenBacking&) = delete;
    OpenBacking& operator=(const OpenBacking&) = delete;
  };

  // The kernel's INIT flags (flags2 included) if the `n` bytes at `buf` are
  // an INIT request; sets `unique` to its id.
  static std::optional<uint64_t> InitRequestFlags(const void* buf, size_t n,
                                                  uint64_t& unique);
  // What an amended INIT reply switched on.
  struct InitResult {
    bool direct_io_mmap = false;
    bool passthrough = false;
    bool uring = false;
  };
  // Amends libfuse's INIT `reply` (`reply_len` bytes of it are sent) for
  // the kernel's `offered` flags: FUSE_PARALLEL_DIROPS (libfuse 3.14 leaves
  // it out of its reply even when the file system wants it, and the kernel
  // then sends one lookup of a directory at a time), max_pages for
  // `max_read`, FUSE_DIRECT_IO_ALLOW_MMAP, and passthrough when `passthrough`
  // is wanted (not with a writeback cache, and only where the reply is long
  // enough to carry max_stack_depth).
  static InitResult AmendInitReply(fuse_init_out& reply, size_t reply_len,
                                   uint64_t offered, uint32_t max_read,
                                   bool passthrough, bool uring = false);
  // Marks an open reply for passthrough from backing file `id`.
  static void AmendOpenReply(fuse_open_out& reply, int id);

 private:
  const Options options_;
  BackingFiles& backing_;
  // The INIT request's id (0 once answered) and the kernel's flags.
  std::atomic<uint64_t> init_unique_{0};
  std::atomic<uint64_t> kernel_init_flags_{0};
  std::atomic<bool> direct_io_mmap_{false};
  std::atomic<UringChannel*> uring_{nullptr};

  // Writes a reply: into its ring entry when it answers a ring request,
  // else to `fd`.
  ssize_t Send(int fd, struct iovec* iov, int count);
};

// Replies are spliced from the workers' memfds into the kernel through a
// pipe that must hold a whole reply (max_read plus headers); libfuse falls
// back to copying when the pipe cannot grow that far, which the kernel
// limits by fs.pipe-max-size (1 MiB by default). Raises it where needed and
// allowed, else logs the sysctl that would.
void RaisePipeMaxSize(uint64_t max_read);

// Requests larger than 1 MiB need fs.fuse.max_pages_limit (kernel 6.13+;
// fixed at 256 pages before) raised before the mount; the kernel applies it
// to connections made afterwards. Raising it changes no other mount: each
// asks for its own max_pages.
void RaiseMaxPagesLimit(uint64_t max_read);

// The kernel's readahead window for a FUSE mount defaults to 128 KiB; a
// sequential reader of a cache that answers in large blocks wants more.
// Sets the bdi read_ahead_kb of the mount at `mountpoint` (resolved) to
// `read_ahead` bytes (0: leaves it). The kernel applies INIT's readahead
// limit after the INIT reply, so this is called after it.
void TuneReadahead(const std::string& mountpoint, uint64_t read_ahead);

}  // namespace larder

#endif  // LARDER_FUSE_KERNEL_CHANNEL_H_
