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

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace larder {

// FUSE_PASSTHROUGH (INIT, in flags2) and FOPEN_PASSTHROUGH (open replies),
// newer than the <linux/fuse.h> (7.38) the adaptor builds with.
inline constexpr uint64_t kInitPassthrough = 1ull << 37;
inline constexpr uint32_t kOpenPassthrough = 1u << 7;

// The kernel's backing files of one FUSE session. Thread-safe.
class BackingFiles {
 public:
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

 private:
  std::atomic<int> device_{-1};
  std::atomic<bool> enabled_{false};
};

}  // namespace larder

#endif  // LARDER_FUSE_PASSTHROUGH_H_
