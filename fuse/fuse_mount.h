// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: fuse_mount.h
// -----------------------------------------------------------------------------
//
// The FUSE adaptor: a read-only POSIX view of the cluster namespace, served
// by libfuse3's low-level API over larder::Client. Every mount of the
// master's mount table appears as a directory tree
// (/datasets/imagenet/train/n01440764/x.JPEG); intermediate directories of
// mount paths (/datasets) are virtual.
//
//   auto client = larder::Client::Connect(client_options);
//   auto mount = larder::FuseMount::Mount(fuse_options, std::move(*client));
//   (*mount)->Serve();   // until SIGTERM/SIGINT/SIGHUP or an unmount
//
// Reads: a read request (up to max_read, 4 MiB by default) is one
// File::ReadPieces call, which decides per block where it comes from; the
// reply splices the blocks cached on this node straight from the worker's
// memfds and writes the others from the buffers gRPC read them into, with
// readahead of the following blocks for sequential readers.
// Files of at least direct_io_min_size are opened with direct_io (one copy,
// into the reader's buffer); smaller ones use the kernel page cache, kept
// across opens while the object's version is unchanged (`keep_cache`), so
// repeated reads on one node do not reach the daemon.
//
// Errors map to errno and never end the daemon: NotFound -> ENOENT,
// PermissionDenied -> EACCES, DeadlineExceeded -> ETIMEDOUT, the object
// changed since open -> ESTALE, every source failed -> EIO (logged with the
// cause), any write -> EROFS (logged).
//
// Lifecycle: `auto_unmount` (fusermount3 watches the daemon and unmounts if
// it dies, so a crash never leaves "Transport endpoint is not connected").
// Serve() returns on SIGTERM/SIGINT/SIGHUP once in-flight requests have
// finished, and unmounts. The caller must block those signals in every other
// thread (block them before creating the Client; Serve unblocks them in its
// own thread).
#ifndef LARDER_FUSE_FUSE_MOUNT_H_
#define LARDER_FUSE_FUSE_MOUNT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "larder/client.h"

namespace larder {

struct FuseOptions {
  std::string mountpoint;
  // How long the kernel trusts attributes and name lookups. Metadata also
  // has the master's per-mount TTL behind it.
  absl::Duration attr_timeout = absl::Seconds(10);
  absl::Duration entry_timeout = absl::Seconds(10);
  // How long the kernel remembers that a name does not exist (0: not at all).
  absl::Duration negative_timeout = absl::Seconds(1);
  // Keep the kernel page cache across opens while the version is unchanged.
  bool keep_cache = true;
  // Largest read request (and kernel readahead request), bytes: one block
  // per round trip. Above 1 MiB it needs a kernel that takes max_pages
  // (4.20+) and fs.fuse.max_pages_limit raised (the daemon raises it when it
  // may; otherwise requests stay at the kernel's limit).
  uint32_t max_read = 4 << 20;
  // Files at least this large are opened with direct_io: reads go from the
  // worker's memory straight into the reader's buffer, without a second copy
  // of the bytes in the node's page cache (large shards are streamed once
  // per epoch; the worker already caches them). Smaller files use the page
  // cache (keep_cache). 0: every file; kNoDirectIo: none.
  static constexpr uint64_t kNoDirectIo = ~uint64_t{0};
  uint64_t direct_io_min_size = 64 << 20;
  // Files whose blocks the worker on this node holds whole in RAM are
  // handed to the kernel as that worker's memfd (FUSE passthrough, Linux
  // 6.9+, root): reads then go from the worker's memory to the reader with
  // no request to this daemon, and nothing is cached twice. Elsewhere
  // direct_io (large files) or the page cache.
  bool passthrough = true;
  // Passthrough only for files at least this large (0: every file). A
  // smaller file is read through the kernel page cache (keep_cache): when
  // a dataset fits the node's memory beside the worker's RAM tier, warm
  // epochs are then faster (python_loader_bench: 0.39 of the page cache
  // against 0.32 by passthrough), at the cost of holding it twice.
  uint64_t passthrough_min_size = 0;
  // How long a passthrough file's memfd (and the worker's lease on it) is
  // kept after its last close, for the next open to use without asking
  // the worker: an epoch that opens it again pays no round trip. Default
  // 20 s; at most 25 s (the worker's lease is 30 s); 0 = closed at once.
  absl::Duration passthrough_keep = absl::Seconds(20);
  // Passthrough objects leased from the worker ahead of their opens
  // (lease_ahead.h), in batches of a directory's files: an open of a file
  // leased ahead costs no exchange with the worker. At most this many held
  // (each a descriptor; at most a quarter of the descriptor limit); 0: off.
  size_t lease_ahead = 4096;
  // An object leased ahead and not opened within this is given back.
  absl::Duration lease_ahead_keep = absl::Seconds(10);
  // Kernel readahead window for the mount (bdi read_ahead_kb), bytes; 0
  // leaves the kernel default.
  uint64_t read_ahead = 8 << 20;
  // Most requests served at once: requests that may wait on the network
  // (reads that reach the daemon, lookups and getattrs the metadata cache
  // cannot answer, directory reads, writes) are served by a pool of this
  // many threads, so a cold read waiting on the object store holds none of
  // the channel's threads.
  int max_threads = 32;
  // Threads taking requests from /dev/fuse (the classic channel) and
  // serving the quick ones themselves. Few on purpose: the kernel wakes the
  // waiting thread that has waited longest, so every extra thread is one
  // more that goes to sleep and wakes up cold. On 16 cores (small_files_bench,
  // 16 readers) 4 threads served 69-72k warm files/s at 47-49 us of daemon
  // CPU a file, 32 threads 57-63k at 101-134 us.
  int channel_threads = 4;
  // How requests reach the daemon: "classic" (/dev/fuse: a read and a
  // writev per request) or "uring" (FUSE over io_uring, uring_channel.h,
  // where the kernel allows it: Linux 6.14+ with the fuse module's
  // enable_uring parameter on; else /dev/fuse, with a log line). The
  // daemon logs which it runs (fuse.channel). Not the default: on the
  // 2-core VM it served warm small files at 12-13% of the page cache
  // against 18-22% for classic (a request is served on its CPU's queue,
  // beside the reader that made it).
  std::string channel = "classic";
  // Whether the mount takes writes at all (the read-only flag of its
  // superblock, which every copy of the mount follows). "on": always, so
  // the writable mounts of the table take them; "off": read-only, every
  // write fails with EROFS; "auto": read-only while no mount of the table
  // is writable, read-write within a ring refresh of one becoming so (and
  // back). Setting the flag needs CAP_SYS_ADMIN; without it the mount stays
  // read-write, logged. Read-only saves a GETATTR round trip per open of a
  // file read
  // before: the kernel marks a read-write FUSE file's access time stale at
  // every read, so the fstat(2) that Python's open() makes went to the
  // daemon (python_loader_bench: 3 requests per file per warm epoch -> 2).
  std::string writes = "auto";
  // Who handles opens. "daemon": every open and close is a request (lease,
  // passthrough, per-open version, direct_io). "kernel": the daemon
  // declines OPEN (FUSE no-open, Linux 3.16+ with libfuse 3), so opens and
  // closes cost no request and warm files are read from the kernel's page
  // cache: python_loader_bench's DataLoader at 0.52-0.61 of a local page
  // cache against 0.32-0.42 (this 2-core VM), at the cost of the page
  // cache holding the files
  // beside the worker's RAM tier (no passthrough, no direct_io: large files
  // too), and of a changed object being seen when the kernel next asks for
  // its attributes (attr_timeout) rather than at the next open. Needs
  // writes "off" (a write needs its open).
  std::string opens = "daemon";
  // Let every user (training pods run as non-root) read the mount.
  bool allow_other = true;
  // Unmount by fusermount3 if the daemon dies (over io_uring, by a
  // watchdog process too: mount_watchdog.h).
  bool auto_unmount = true;
  // Entries per master List call for readdir (the daemon holds one page per
  // open directory).
  int list_page_size = 1000;
  // /metrics and /healthz; empty disables.
  std::string ops_listen = "127.0.0.1:7072";
  // The daemon's ClientOptions::readahead_blocks: blocks a sequential
  // reader has fetched ahead. A store that gives each connection 80 MB/s
  // after 25 ms needs 20-odd 4 MiB fetches in flight to fill 1.4 GB/s: a
  // cold 1 GiB shard through FUSE on 16 cores (cold_read_bench) read at
  // 629 MB/s with 16 ahead, 980 with 32 (128 MiB held ahead per reader).
  static constexpr int kReadaheadBlocks = 32;
};

// The errno a FUSE reply carries for `status` (see the file comment).
int ErrnoFor(const absl::Status& status);

class FuseMount {
 public:
  // Checks the mount point and mounts. Errors: NotFound (no mount point),
  // InvalidArgument (not a directory, bad option), FailedPrecondition (the
  // mount point is busy: already a mount point, or a dead FUSE mount),
  // Internal (the kernel refused the mount).
  static absl::StatusOr<std::unique_ptr<FuseMount>> Mount(
      FuseOptions options, std::unique_ptr<Client> client);
  ~FuseMount();

  // Serves requests until a signal or an external unmount; then waits for
  // in-flight requests, unmounts and returns.
  absl::Status Serve();

  int ops_port() const;

  class Fs;

 private:
  explicit FuseMount(std::unique_ptr<Fs> fs);
  std::unique_ptr<Fs> fs_;
};

}  // namespace larder

#endif  // LARDER_FUSE_FUSE_MOUNT_H_
