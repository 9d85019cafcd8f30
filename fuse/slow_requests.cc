// Copyright 2026 The Larder Authors.
//
// The operations table, and which requests leave the channel's threads.
//
// Through /dev/fuse the daemon runs a few channel threads
// (FuseOptions::channel_threads): each reads a request and serves it, and
// the kernel wakes the thread that has waited longest, so a few busy
// threads serve warm files far faster than many sleepy ones. A request that
// may wait on the network would hold one of those few for the wait, and
// with it every reader behind it; such requests are handed to the slow pool
// (FuseOptions::max_threads threads) and replied from there:
//
//   - reads that reach the daemon (passthrough files never do): a cold
//     block waits for the object store;
//   - lookups and getattrs the metadata cache cannot answer (a directory's
//     first lookup lists it), and directory reads;
//   - every request of a write (uploads and commits), extended attributes
//     of Larder's own (they ask the workers).
//
// libfuse lets any thread reply to a request; the arguments the kernel's
// buffer holds (names, data, the fuse_file_info) are copied first. Over
// io_uring each ring has threads enough of its own (uring_channel.h) and
// nothing moves.

#include <fcntl.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "fuse/fuse_ops.h"

namespace larder {

std::function<void()> FuseOps::Queued(fuse_req_t req, Kind kind,
                                      std::function<void()> run) {
  metrics_.slow_queued->Increment();
  return [this, req, kind, run = std::move(run),
          queued = std::chrono::steady_clock::now()] {
    metrics_.slow_queued->Decrement();
    metrics_.slow_wait->Observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - queued)
            .count());
    if (kind == Kind::kRead && stopping_.load(std::memory_order_acquire)) {
      fuse_reply_err(req, EIO);  // The daemon is stopping.
      return;
    }
    run();
  };
}

void FuseOps::Slow(fuse_req_t req, Kind kind,
                   std::function<void(fuse_req_t)> task) {
  FuseOps* fs = Self(req);
  if (fs->offloading()) {
    absl::ReaderMutexLock lock(&fs->slow_mu_);
    if (fs->slow_ != nullptr) {
      fs->slow_->Schedule(
          fs->Queued(req, kind, [req, task = std::move(task)] { task(req); }));
      return;
    }
  }
  task(req);
}

void FuseOps::Offload(fuse_req_t req, OpScope&& scope,
                      std::function<void(OpScope&)> task) {
  {
    absl::ReaderMutexLock lock(&slow_mu_);
    if (slow_ != nullptr) {
      // std::function copies what it holds: the scope goes by pointer.
      auto moved = std::make_shared<OpScope>(std::move(scope));
      slow_->Schedule(Queued(
          req, Kind::kRead, [moved, task = std::move(task)] { task(*moved); }));
      return;
    }
  }
  task(scope);
}

void FuseOps::StopSlowPool() {
  stopping_.store(true, std::memory_order_release);
  std::unique_ptr<ThreadPool> pool;
  {
    absl::WriterMutexLock lock(&slow_mu_);
    pool = std::move(slow_);
  }
  pool.reset();  // Answers what is queued, then joins.
}

std::optional<absl::StatusOr<FileInfo>> FuseOps::CachedStatPath(
    const std::string& path) {
  if (path == "/" || local_dirs_.Get(path)) return StatPath(path);
  return client_.CachedStat(path);
}

bool FuseOps::OpenIsQuick(fuse_ino_t ino) {
  if (!offloading() || no_open_) return true;
  std::optional<std::string> path = inodes_.Path(ino);
  // Its attributes cached: the open asks the master nothing (a stale inode
  // is answered at once).
  return !path || CachedStatPath(*path).has_value();
}

fuse_lowlevel_ops FuseOps::MakeOperations() {
  fuse_lowlevel_ops ops{};
  ops.init = &Init;
  ops.lookup = &Lookup;  // Hands misses of the metadata cache on itself.
  ops.forget = &Forget;
  ops.forget_multi = &ForgetMulti;
  ops.getattr = &Getattr;  // Likewise.
  ops.opendir = &Opendir;
  ops.readdir = [](fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                   fuse_file_info* fi) {
    Slow(req, Kind::kRead, [ino, size, off, f = *fi](fuse_req_t r) mutable {
      Readdir(r, ino, size, off, &f);
    });
  };
  ops.readdirplus = [](fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       fuse_file_info* fi) {
    Slow(req, Kind::kRead, [ino, size, off, f = *fi](fuse_req_t r) mutable {
      Readdirplus(r, ino, size, off, &f);
    });
  };
  ops.releasedir = &Releasedir;
  ops.open = [](fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    const bool write = IsWriteOpen(fi) || (fi->flags & O_TRUNC);
    if (!write && Self(req)->OpenIsQuick(ino)) {
      Open(req, ino, fi);  // A lease taken ahead, or a local exchange.
      return;
    }
    Slow(req, write ? Kind::kWrite : Kind::kRead,
         [ino, f = *fi](fuse_req_t r) mutable { Open(r, ino, &f); });
  };
  ops.read = [](fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                fuse_file_info* fi) {
    Slow(req, Kind::kRead, [ino, size, off, f = *fi](fuse_req_t r) mutable {
      Read(r, ino, size, off, &f);
    });
  };
  ops.release = [](fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    if (!IsWriteHandle(fi)) {
      Release(req, ino, fi);
      return;
    }
    Slow(req, Kind::kWrite,
         [ino, f = *fi](fuse_req_t r) mutable { Release(r, ino, &f); });
  };
  ops.statfs = &Statfs;
  ops.getxattr = [](fuse_req_t req, fuse_ino_t ino, const char* name,
                    size_t size) {
    if (!absl::StartsWith(name, "user.larder.")) {
      Getxattr(req, ino, name, size);  // ENODATA at once.
      return;
    }
    Slow(req, Kind::kRead, [ino, n = std::string(name), size](fuse_req_t r) {
      Getxattr(r, ino, n.c_str(), size);
    });
  };
  ops.listxattr = &Listxattr;
  // Writes of writable mounts (fuse_writes.cc).
  ops.create = [](fuse_req_t req, fuse_ino_t parent, const char* name,
                  mode_t mode, fuse_file_info* fi) {
    Slow(req, Kind::kWrite,
         [parent, n = std::string(name), mode, f = *fi](fuse_req_t r) mutable {
           Create(r, parent, n.c_str(), mode, &f);
         });
  };
  ops.write = [](fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size,
                 off_t off, fuse_file_info* fi) {
    if (!FuseOps::Self(req)->offloading()) {
      Write(req, ino, buf, size, off, fi);
      return;
    }
    // The request's buffer is the channel thread's, for its next request.
    Slow(req, Kind::kWrite,
         [ino, data = std::make_shared<const std::string>(buf, size), off,
          f = *fi](fuse_req_t r) mutable {
           Write(r, ino, data->data(), data->size(), off, &f);
         });
  };
  ops.flush = [](fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    Slow(req, Kind::kWrite,
         [ino, f = *fi](fuse_req_t r) mutable { Flush(r, ino, &f); });
  };
  ops.setattr = [](fuse_req_t req, fuse_ino_t ino, struct stat* attr,
                   int to_set, fuse_file_info* fi) {
    const bool has_fi = fi != nullptr;
    Slow(req, Kind::kWrite,
         [ino, a = *attr, to_set, has_fi,
          f = has_fi ? *fi : fuse_file_info{}](fuse_req_t r) mutable {
           Setattr(r, ino, &a, to_set, has_fi ? &f : nullptr);
         });
  };
  ops.mkdir = [](fuse_req_t req, fuse_ino_t parent, const char* name,
                 mode_t mode) {
    Slow(req, Kind::kWrite,
         [parent, n = std::string(name), mode](fuse_req_t r) {
           Mkdir(r, parent, n.c_str(), mode);
         });
  };
  ops.rmdir = [](fuse_req_t req, fuse_ino_t parent, const char* name) {
    Slow(req, Kind::kWrite, [parent, n = std::string(name)](fuse_req_t r) {
      Rmdir(r, parent, n.c_str());
    });
  };
  // Every other modifying operation: EROFS, logged.
  ops.mknod = [](fuse_req_t req, fuse_ino_t parent, const char* name, mode_t,
                 dev_t) {
    Self(req)->ReplyReadOnly(req, "mknod", parent, name);
  };
  ops.unlink = [](fuse_req_t req, fuse_ino_t parent, const char* name) {
    Self(req)->ReplyReadOnly(req, "unlink", parent, name);
  };
  ops.symlink = [](fuse_req_t req, const char*, fuse_ino_t parent,
                   const char* name) {
    Self(req)->ReplyReadOnly(req, "symlink", parent, name);
  };
  ops.rename = [](fuse_req_t req, fuse_ino_t parent, const char* name,
                  fuse_ino_t, const char*, unsigned) {
    Self(req)->ReplyReadOnly(req, "rename", parent, name);
  };
  ops.link = [](fuse_req_t req, fuse_ino_t ino, fuse_ino_t, const char* name) {
    Self(req)->ReplyReadOnly(req, "link", ino, name);
  };
  ops.setxattr = [](fuse_req_t req, fuse_ino_t ino, const char*, const char*,
                    size_t,
                    int) { Self(req)->ReplyReadOnly(req, "setxattr", ino); };
  ops.removexattr = [](fuse_req_t req, fuse_ino_t ino, const char*) {
    Self(req)->ReplyReadOnly(req, "removexattr", ino);
  };
  ops.fallocate = [](fuse_req_t req, fuse_ino_t ino, int, off_t, off_t,
                     fuse_file_info*) {
    Self(req)->ReplyReadOnly(req, "fallocate", ino);
  };
  return ops;
}

const fuse_lowlevel_ops& FuseOps::Operations() {
  static const fuse_lowlevel_ops ops = MakeOperations();
  return ops;
}

const fuse_custom_io& FuseOps::ChannelIo() {
  // libfuse passes each the session's userdata: the FuseOps.
  static const fuse_custom_io io = {
      [](int fd, struct iovec* iov, int count, void* ops) {
        return static_cast<FuseOps*>(ops)->channel_.Writev(fd, iov, count);
      },
      [](int fd, void* buf, size_t len, void* ops) {
        return static_cast<FuseOps*>(ops)->channel_.Read(fd, buf, len);
      },
      nullptr,
      [](int fdin, off_t* offin, int fdout, off_t* offout, size_t len,
         unsigned flags, void*) {
        return KernelChannel::Splice(fdin, offin, fdout, offout, len, flags);
      }};
  return io;
}

}  // namespace larder
