// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: fuse_ops.h
// -----------------------------------------------------------------------------
//
// The FUSE operations: libfuse3 low-level handlers over larder::Client for a
// read-only view of the cluster namespace (see fuse_mount.h for what the
// mount shows and how errors map to errno).
//
// Lookups and readdirplus hand the kernel node ids from the InodeTable;
// reads are one File::ReadPieces call each, answered in one reply that
// splices the blocks cached on this node from the worker's memfds and
// writes the others from the buffers gRPC read them into; opens of large
// files held whole by the local worker are handed to the kernel for
// passthrough (passthrough.h). Files in writable mounts are written
// sequentially (fuse_writes.cc: create, or open with O_TRUNC; the upload
// is committed on the first flush), and new directories made in them live
// here until a file below them is committed (local_dirs.h); every other
// modifying operation is answered EROFS and logged. Each request is counted and
// timed in FuseMetrics.
//
// A FuseOps is the userdata of its FUSE session: Operations() and
// ChannelIo() go to fuse_session_new and fuse_session_custom_io. It works
// with parts the mount owns, which outlive it.
#ifndef LARDER_FUSE_FUSE_OPS_H_
#define LARDER_FUSE_FUSE_OPS_H_

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/thread_pool.h"
#include "fuse/dir_handle.h"
#include "fuse/fuse_mount.h"
#include "fuse/inode_table.h"
#include "fuse/kernel_channel.h"
#include "fuse/lease_ahead.h"
#include "fuse/libfuse.h"
#include "fuse/local_dirs.h"
#include "fuse/metrics.h"
#include "fuse/passthrough.h"
#include "larder/client.h"

namespace larder {

class FuseOps {
 public:
  // `mountpoint`: the resolved mount point (its bdi is tuned after INIT).
  FuseOps(const FuseOptions& options, Client& client, InodeTable& inodes,
          FuseMetrics& metrics, KernelChannel& channel, BackingFiles& backing,
          LeaseAhead& ahead, std::string mountpoint)
      : options_(options),
        client_(client),
        inodes_(inodes),
        metrics_(metrics),
        channel_(channel),
        backing_(backing),
        ahead_(ahead),
        mountpoint_(std::move(mountpoint)),
        slow_(std::make_unique<ThreadPool>(std::max(1, options.max_threads),
                                           "fuse-slow")) {}
  FuseOps(const FuseOps&) = delete;
  FuseOps& operator=(const FuseOps&) = delete;

  // The handlers, for a session whose userdata is this FuseOps.
  static const fuse_lowlevel_ops& Operations();
  // The session's custom I/O: this FuseOps's KernelChannel.
  static const fuse_custom_io& ChannelIo();

  // The session, once created: opens send it inode invalidations.
  void set_session(fuse_session* session) { session_ = session; }
  // Serves the requests handed to the slow pool, then stops it: before the
  // session is destroyed (their replies go to it). Requests arriving after
  // are served on their own threads.
  void StopSlowPool() ABSL_LOCKS_EXCLUDED(slow_mu_);

 private:
  static FuseOps* Self(fuse_req_t req) {
    return static_cast<FuseOps*>(fuse_req_userdata(req));
  }

  // Requests that may wait on the network (slow_requests.cc). Through
  // /dev/fuse, a few channel threads take every request
  // (FuseOptions::channel_threads) and serve the quick ones; the others go
  // to a pool of FuseOptions::max_threads threads. Over io_uring each ring
  // has threads enough of its own: everything is served where it arrives.
  bool offloading() const { return !channel_.UsingUring(); }
  // task(req) on a thread of the slow pool when offloading, else here.
  // `reads`: a request that changes nothing, answered EIO instead of run
  // if it is still queued when the daemon stops (a frozen store would hold
  // the unmount for a fetch deadline per wave of the pool); the others (the
  // requests of a write) run.
  enum class Kind { kRead, kWrite };
  static void Slow(fuse_req_t req, Kind kind,
                   std::function<void(fuse_req_t)> task);
  // A read's task(scope) on the slow pool (the request's scope moved
  // there), or here.
  void Offload(fuse_req_t req, OpScope&& scope,
               std::function<void(OpScope&)> task)
      ABSL_LOCKS_EXCLUDED(slow_mu_);
  // The task the pool runs for `req`: `run`, or EIO once stopping.
  std::function<void()> Queued(fuse_req_t req, Kind kind,
                               std::function<void()> run);
  // Whether a read-only open of `ino` can be served on a channel thread:
  // its metadata is cached (a lease taken ahead, or one exchange with the
  // local worker, is all it waits for).
  bool OpenIsQuick(fuse_ino_t ino);
  // StatPath's answer if it needs nobody asked (the root, a directory made
  // here, the metadata cache's fresh answer); else none.
  std::optional<absl::StatusOr<FileInfo>> CachedStatPath(
      const std::string& path);
  // Replies to a lookup of `path` with `info`.
  void ReplyEntry(fuse_req_t req, OpScope& scope, const std::string& path,
                  const absl::StatusOr<FileInfo>& info);
  // Replies to a getattr of `ino` (`path`) with `info`.
  void ReplyAttr(fuse_req_t req, OpScope& scope, fuse_ino_t ino,
                 const std::string& path, const absl::StatusOr<FileInfo>& info);

  // The cluster path of inode `ino`; none, and ESTALE replied, for an inode
  // the kernel should no longer hold.
  std::optional<std::string> PathOf(fuse_req_t req, fuse_ino_t ino,
                                    OpScope& scope);
  // Replies with the errno for `status`; unexpected failures are logged with
  // their cause (NotFound is an answer, not a failure).
  void ReplyError(fuse_req_t req, OpScope& scope, const char* op,
                  absl::string_view path, const absl::Status& status);
  // Every modifying operation: EROFS, logged.
  void ReplyReadOnly(fuse_req_t req, const char* op, fuse_ino_t ino,
                     absl::string_view name = "");
  struct stat Attr(absl::string_view path, const FileInfo& info) const;
  // A read with no open (no_open_, kernel_opens.cc): the inode's File, of the
  // version whose attributes the kernel holds; ESTALE (and the kernel's
  // attributes dropped at its next ask) when the object is now another.
  std::shared_ptr<File> SharedFile(fuse_req_t req, fuse_ino_t ino,
                                   OpScope& scope)
      ABSL_LOCKS_EXCLUDED(shared_mu_);
  // Forgets the File of an inode the kernel no longer holds.
  void DropShared(fuse_ino_t ino) ABSL_LOCKS_EXCLUDED(shared_mu_);
  // Replies to a read of [off, off + size) of `file`.
  void ReplyRead(fuse_req_t req, OpScope& scope, File& file, size_t size,
                 off_t off);

  // A file being written: its Writer, the offset the next write must
  // start at, and whether it was committed (by the first flush).
  struct WriteFile {
    std::string path;
    fuse_ino_t ino = 0;
    uid_t uid = 0;
    gid_t gid = 0;
    absl::Time started;
    absl::Mutex mu;
    std::unique_ptr<Writer> writer ABSL_GUARDED_BY(mu);
    uint64_t next ABSL_GUARDED_BY(mu) = 0;
    // `next`, for getattr without `mu`: a write or commit holds `mu` while
    // it waits on the upload, and getattr runs on a channel thread.
    std::atomic<uint64_t> written{0};
    bool committed ABSL_GUARDED_BY(mu) = false;
    absl::Status error ABSL_GUARDED_BY(mu);
  };
  static bool IsWriteOpen(const fuse_file_info* fi) {
    return (fi->flags & O_ACCMODE) != O_RDONLY;
  }
  // A file handle is a WriteFile* with its low bit set (an OpenFile* has
  // it clear): FLUSH requests carry no open flags to tell them apart.
  static bool IsWriteHandle(const fuse_file_info* fi) { return fi->fh & 1; }
  static WriteFile* WriteHandle(const fuse_file_info* fi) {
    return reinterpret_cast<WriteFile*>(fi->fh & ~uint64_t{1});
  }
  // Starts writing `path` (create: a new inode; else `ino`'s file) and
  // replies to the create or open. Errors are replied.
  void StartWrite(fuse_req_t req, OpScope& scope, const std::string& path,
                  fuse_ino_t ino, bool create, fuse_file_info* fi);
  // Commits `w` once (its first flush, else its release); the status
  // of the commit, or of the write that failed before it. With
  // `killed_by` (the flushing writer is dying of that signal), or after a
  // failed write, the upload is aborted instead and nothing appears. Either
  // way `w` leaves writing_.
  absl::Status Commit(WriteFile& w,
                      std::optional<int> killed_by = std::nullopt);
  // Takes `w` out of writing_ (before it is deleted).
  void Unlist(WriteFile& w);
  // The attributes of a file being written, or null.
  std::optional<struct stat> WritingAttr(fuse_ino_t ino);
  struct stat WriteAttr(WriteFile& w, uint64_t size) const;
  // The cluster's answer for `path`, or a directory made here (LocalDirs).
  absl::StatusOr<FileInfo> StatPath(const std::string& path);
  // Raises the bdi readahead window once, on the first request after INIT.
  void AfterInit();
  // Only where the kernel lets direct_io files be mmap'ed shared.
  bool UseDirectIo(uint64_t size) const {
    return size >= options_.direct_io_min_size && channel_.direct_io_mmap();
  }
  // `referenced` gets the inode of each readdirplus entry that counts a
  // lookup, for the kernel's FORGET; a reply the kernel never got (an
  // interrupted request) must give them back.
  absl::StatusOr<size_t> FillDir(fuse_req_t req, DirHandle& d, off_t off,
                                 bool plus, std::vector<char>& buf,
                                 std::vector<uint64_t>* referenced)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(d.mu);
  void DoReaddir(fuse_req_t req, size_t size, off_t off, fuse_file_info* fi,
                 bool plus);

  // The handlers (fuse_lowlevel_ops).
  static void Init(void* userdata, struct fuse_conn_info* conn);
  static void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name);
  static void Forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
  static void ForgetMulti(fuse_req_t req, size_t count,
                          struct fuse_forget_data* forgets);
  static void Getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*);
  static void Opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  static void Readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                      fuse_file_info* fi);
  static void Readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
                          off_t off, fuse_file_info* fi);
  static void Releasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi);
  static void Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  static void Read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                   fuse_file_info* fi);
  static void Release(fuse_req_t req, fuse_ino_t, fuse_file_info* fi);
  // Writes (fuse_writes.cc).
  static void Create(fuse_req_t req, fuse_ino_t parent, const char* name,
                     mode_t mode, fuse_file_info* fi);
  static void Write(fuse_req_t req, fuse_ino_t ino, const char* buf,
                    size_t size, off_t off, fuse_file_info* fi);
  static void Flush(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  static void Setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr,
                      int to_set, fuse_file_info* fi);
  static void Mkdir(fuse_req_t req, fuse_ino_t parent, const char* name,
                    mode_t mode);
  static void Rmdir(fuse_req_t req, fuse_ino_t parent, const char* name);
  static void Statfs(fuse_req_t req, fuse_ino_t);
  static void Getxattr(fuse_req_t req, fuse_ino_t ino, const char* name,
                       size_t size);
  static void Listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
  static fuse_lowlevel_ops MakeOperations();

  const FuseOptions& options_;
  Client& client_;
  InodeTable& inodes_;
  FuseMetrics& metrics_;
  KernelChannel& channel_;
  BackingFiles& backing_;
  LeaseAhead& ahead_;
  const std::string mountpoint_;
  fuse_session* session_ = nullptr;
  const uid_t uid_ = ::getuid();
  const gid_t gid_ = ::getgid();
  const absl::Time start_time_ = absl::Now();
  absl::Mutex writes_mu_;
  absl::flat_hash_map<fuse_ino_t, WriteFile*> writing_
      ABSL_GUARDED_BY(writes_mu_);
  // writing_.size(), read without the lock: getattr (on every read path)
  // looks in writing_ only while something is being written.
  std::atomic<size_t> writing_count_{0};
  // Directories made here that hold no committed file yet.
  LocalDirs local_dirs_;
  std::once_flag tuned_;
  // opens == "kernel" and the kernel takes it (INIT): OPEN and FLUSH are
  // declined with ENOSYS, and reads (file handle 0) use a File per inode.
  std::atomic<bool> no_open_{false};
  absl::Mutex shared_mu_;
  absl::flat_hash_map<fuse_ino_t, std::shared_ptr<File>> shared_files_
      ABSL_GUARDED_BY(shared_mu_);
  // The slow pool; null once stopped (StopSlowPool). Last: destroyed first,
  // its queued requests served while everything they use is still here.
  absl::Mutex slow_mu_;
  std::unique_ptr<ThreadPool> slow_ ABSL_GUARDED_BY(slow_mu_);
  std::atomic<bool> stopping_{false};  // StopSlowPool was called.
};

}  // namespace larder

#endif  // LARDER_FUSE_FUSE_OPS_H_
