// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: uring_channel.h
// -----------------------------------------------------------------------------
//
// FUSE over io_uring (Linux 6.14+, with the fuse module's enable_uring
// parameter on), which libfuse 3.14 does not know: the kernel hands
// requests to the daemon, and takes its replies, through io_uring commands
// on /dev/fuse instead of a read(2) and a writev(2) each.
//
// There is one queue per CPU (the kernel puts a request on the queue of the
// CPU that made it), each an io_uring with entries the kernel fills: a
// header buffer (the request's header and its fixed argument) and a payload
// buffer (the rest). A few threads per queue take turns waiting on its ring
// and serve the request they took inline, so a request that waits for the
// object store does not hold up the others of its CPU. A request taken from
// a ring is laid out as /dev/fuse would give it and handed to libfuse
// (fuse_session_process_buf); its reply, which libfuse writes through the
// session's custom I/O (KernelChannel::Writev, which calls Reply), is copied
// into the entry and committed, which also fetches the entry's next request.
// Interrupts, forgets and the daemon's notifications stay on /dev/fuse (the
// kernel's choice), so the classic loop keeps running beside the rings.
//
// The INIT reply asks for it (KernelChannel); Start follows that reply.
//
// Measured on a 2-core VM (small_files_bench, warm small files by
// passthrough): 12-13% of the page cache against 18-22% for /dev/fuse,
// whatever the threads per queue (1, 2, 8): a request is served on the
// queue of the CPU its reader runs on, so reader and daemon take turns on
// one core. Hence opt-in (FuseOptions::channel), to be measured on more
// cores. A daemon killed with SIGKILL is not unmounted by fusermount3 on
// Linux 6.18 over io_uring: mount_watchdog.h does it.
//
//   if (UringChannel::KernelAllows()) ... ask at INIT ...
//   auto uring = UringChannel::Start(session, fd, {.threads = 32});
//   channel.SetUring(uring->get());  // Replies go to the rings.
//   (*uring)->Run();
//
// Thread-safe.
#ifndef LARDER_FUSE_URING_CHANNEL_H_
#define LARDER_FUSE_URING_CHANNEL_H_

#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "fuse/libfuse.h"

namespace larder {

// FUSE_OVER_IO_URING (INIT, in flags2; FUSE 7.42), newer than the
// <linux/fuse.h> (7.38) the adaptor builds with.
inline constexpr uint64_t kInitOverIoUring = 1ull << 41;

class UringChannel {
 public:
  struct Options {
    // Threads serving requests, over every queue (at least 2 a queue); each
    // has an entry of its queue's ring.
    int threads = 32;
    // Bytes of an entry's payload buffer: at least the largest request and
    // reply (the kernel refuses smaller: max_read, max_write).
    size_t payload_bytes = 4 << 20;
  };

  // Whether the kernel lets FUSE use io_uring (/sys/module/fuse/parameters/
  // enable_uring is Y).
  static bool KernelAllows();

  // Sets up a queue per CPU on `fd` (the session's /dev/fuse descriptor)
  // and registers the entries with the kernel, which may put requests in
  // them from then on; Run serves them. Call it after the INIT reply that
  // switched io_uring on, and Run once replies reach Reply (a reply to a
  // ring's request written to /dev/fuse is lost, and its caller hangs).
  // Errors: Unavailable (the kernel refused a ring or an entry: the caller
  // goes on with /dev/fuse alone).
  static absl::StatusOr<std::unique_ptr<UringChannel>> Start(
      fuse_session* session, int fd, Options options);
  // Starts the threads that serve the rings.
  void Run();

  // Stops and joins the threads (call after the unmount: the kernel ends
  // the entries it holds then) and releases the rings and buffers.
  ~UringChannel();
  UringChannel(const UringChannel&) = delete;
  UringChannel& operator=(const UringChannel&) = delete;

  // A reply libfuse wrote (iov[0] is its fuse_out_header): when it answers
  // a request taken from a ring, copies it into that request's entry and
  // commits it, returning true; false when it is not one (a reply to a
  // request that came through /dev/fuse, or a notification: the caller
  // writes it there).
  bool Reply(const iovec* iov, int count);

  int queues() const;
  // Requests served from the rings so far.
  uint64_t requests() const { return requests_.load(); }

 private:
  struct Queue;
  struct Entry;
  explicit UringChannel(fuse_session* session);
  void Serve(Queue& q);
  void Handle(Entry& e);

  fuse_session* const session_;
  std::atomic<uint64_t> requests_{0};
  std::vector<std::unique_ptr<Queue>> queues_;
  struct Pending;
  std::unique_ptr<Pending> pending_;  // Requests taken, by unique.
};

}  // namespace larder

#endif  // LARDER_FUSE_URING_CHANNEL_H_
