// Copyright 2026 The Larder Authors.
//
// Writes through the FUSE mount, in mounts made --writable: a new file
// (create) or one opened with O_TRUNC is a Writer (client/writer.h) that
// takes sequential writes; the first flush (close(2)) uploads the rest and
// commits the object, which appears whole; a release without a flush
// commits too. As Mountpoint for S3 does, a write at any other offset than
// the end fails with EINVAL (logged, saying why), and the file is then
// abandoned: nothing appears. Opening an existing file for writing without
// O_TRUNC, or for reading and writing, is EPERM. mkdir makes a directory
// that lives in this process until a file below it is committed
// (local_dirs.h); rmdir removes only such a directory while it is empty. A
// mount that is not writable answers EROFS, as before.
#include <fcntl.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/log.h"
#include "fuse/fuse_ops.h"
#include "understore/under_store.h"

namespace larder {
namespace {

// The signal the task `tid` is dying of, when it is exiting (its files are
// being closed) with a signal in its exit status; nothing for a task that
// lives, exits normally, or cannot be read (another pid namespace: 0).
std::optional<int> KilledBySignal(pid_t tid) {
  if (tid <= 0) return std::nullopt;
  std::ifstream f(absl::StrCat("/proc/", tid, "/stat"));
  std::string line;
  if (!std::getline(f, line)) return std::nullopt;
  // After "pid (comm) ", fields from the third (state) on; comm may hold
  // spaces and parentheses, so from the last ')'.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::vector<absl::string_view> fields = absl::StrSplit(
      absl::string_view(line).substr(close + 1), ' ', absl::SkipEmpty());
  // Field 9 is the task's flags, field 52 its exit code (Linux 3.5+).
  constexpr size_t kFlags = 9 - 3, kExitCode = 52 - 3;
  constexpr uint64_t kPfExiting = 0x4;  // PF_EXITING
  uint64_t flags = 0;
  int64_t code = 0;
  if (fields.size() <= kExitCode || !absl::SimpleAtoi(fields[kFlags], &flags) ||
      !absl::SimpleAtoi(fields[kExitCode], &code)) {
    return std::nullopt;
  }
  // Exiting with a signal in its status (as waitpid reports it): killed.
  if ((flags & kPfExiting) == 0 || (code & 0x7f) == 0) return std::nullopt;
  return static_cast<int>(code & 0x7f);
}

// The errno for a failed Create: a mount that is not writable reads as a
// read-only file system; an object already there (O_EXCL) as EEXIST.
int CreateErrno(const absl::Status& st) {
  if (st.code() == absl::StatusCode::kPermissionDenied &&
      absl::StrContains(st.message(), "not writable"))
    return EROFS;
  if (st.code() == absl::StatusCode::kAlreadyExists) return EEXIST;
  return ErrnoFor(st);
}

}  // namespace

struct stat FuseOps::WriteAttr(WriteFile& w, uint64_t size) const {
  struct stat st {};
  st.st_ino = InodeTable::StableIno(w.path);
  st.st_mode = S_IFREG | 0644;
  st.st_nlink = 1;
  st.st_uid = w.uid;
  st.st_gid = w.gid;
  st.st_size = static_cast<off_t>(size);
  st.st_blksize = 1 << 20;
  st.st_blocks = (st.st_size + 511) / 512;
  const int64_t ns = absl::ToUnixNanos(w.started);
  st.st_mtim.tv_sec = st.st_atim.tv_sec = st.st_ctim.tv_sec = ns / 1000000000;
  st.st_mtim.tv_nsec = st.st_atim.tv_nsec = st.st_ctim.tv_nsec =
      ns % 1000000000;
  return st;
}

std::optional<struct stat> FuseOps::WritingAttr(fuse_ino_t ino) {
  if (writing_count_.load(std::memory_order_acquire) == 0) return std::nullopt;
  absl::MutexLock lock(&writes_mu_);
  auto it = writing_.find(ino);
  if (it == writing_.end()) return std::nullopt;
  WriteFile& w = *it->second;
  return WriteAttr(w, w.written.load(std::memory_order_acquire));
}

void FuseOps::StartWrite(fuse_req_t req, OpScope& scope,
                         const std::string& path, fuse_ino_t ino, bool create,
                         fuse_file_info* fi) {
  if ((fi->flags & O_ACCMODE) == O_RDWR) {
    scope.Failed();
    LARDER_LOG(WARNING, "fuse.write_refused")
        .Field("path", path)
        .Field("reason",
               "files are written sequentially: open them write-only "
               "(O_RDWR is not supported)");
    fuse_reply_err(req, EPERM);
    return;
  }
  WriteOptions wo;
  // create(2) without O_EXCL replaces a file that is there, as open(2)
  // with O_CREAT|O_TRUNC would; open with O_TRUNC replaces it.
  wo.overwrite = !(fi->flags & O_EXCL);
  absl::StatusOr<std::unique_ptr<Writer>> writer = client_.Create(path, wo);
  if (!writer.ok()) {
    scope.Failed();
    const int err = CreateErrno(writer.status());
    LARDER_LOG(WARNING, "fuse.write_refused")
        .Field("path", path)
        .Field("errno", strerrorname_np(err) ? strerrorname_np(err) : "?")
        .Field("status", writer.status());
    fuse_reply_err(req, err);
    return;
  }
  auto* w = new WriteFile;
  w->path = path;
  w->started = absl::Now();
  const fuse_ctx* ctx = fuse_req_ctx(req);
  w->uid = ctx->uid;
  w->gid = ctx->gid;
  {
    absl::MutexLock lock(&w->mu);
    w->writer = std::move(*writer);
  }
  w->ino = create ? inodes_.Ref(path) : ino;
  {
    absl::MutexLock lock(&writes_mu_);
    writing_[w->ino] = w;
    writing_count_.store(writing_.size(), std::memory_order_release);
  }
  fi->fh = reinterpret_cast<uint64_t>(w) | 1;
  fi->direct_io = 1;  // Every write comes here, at the offset given.
  fi->keep_cache = 0;
  metrics_.open_files->Increment();
  int sent;
  if (create) {
    fuse_entry_param e{};
    e.ino = w->ino;
    e.attr = WriteAttr(*w, 0);
    sent = fuse_reply_create(req, &e, fi);
  } else {
    sent = fuse_reply_open(req, fi);
  }
  if (sent != 0) {  // Interrupted: no release comes.
    {
      absl::MutexLock lock(&writes_mu_);
      writing_.erase(w->ino);
      writing_count_.store(writing_.size(), std::memory_order_release);
    }
    if (create) inodes_.Forget(w->ino, 1);
    {
      absl::MutexLock lock(&w->mu);
      w->writer->Abort().IgnoreError();
    }
    delete w;
    metrics_.open_files->Decrement();
  }
}

void FuseOps::Create(fuse_req_t req, fuse_ino_t parent, const char* name,
                     mode_t, fuse_file_info* fi) {
  FuseOps* fs = Self(req);
  OpScope scope(fs->metrics_, kWrite);
  std::optional<std::string> dir = fs->PathOf(req, parent, scope);
  if (!dir) return;
  fs->StartWrite(req, scope, InodeTable::Child(*dir, name), 0, true, fi);
}

void FuseOps::Write(fuse_req_t req, fuse_ino_t ino, const char* buf,
                    size_t size, off_t off, fuse_file_info* fi) {
  FuseOps* fs = Self(req);
  if (!IsWriteHandle(fi)) {  // Not opened by StartWrite (e.g. by the kernel).
    fs->ReplyReadOnly(req, "write", ino);
    return;
  }
  OpScope scope(fs->metrics_, kWrite);
  WriteFile* w = WriteHandle(fi);
  absl::MutexLock lock(&w->mu);
  const char* why = nullptr;
  if (w->committed) {
    why = "the file was already committed by a flush (close); write a new one";
  } else if (!w->error.ok()) {
    why = "an earlier write failed; the file will not be written";
  } else if (off < 0 || static_cast<uint64_t>(off) != w->next) {
    why =
        "files are written sequentially: a write must start where the "
        "last one ended";
    w->error = absl::InvalidArgumentError(absl::StrCat(
        "write at offset ", off, ", not at the end (", w->next, ")"));
  }
  if (why != nullptr) {
    scope.Failed();
    LARDER_LOG(WARNING, "fuse.write_refused")
        .Field("path", w->path)
        .Field("offset", static_cast<int64_t>(off))
        .Field("expected", w->next)
        .Field("reason", why);
    fuse_reply_err(req, EINVAL);
    return;
  }
  absl::Status st = w->writer->Write(absl::string_view(buf, size));
  if (!st.ok()) {
    w->error = st;
    fs->ReplyError(req, scope, "write", w->path, st);
    return;
  }
  w->next += size;
  w->written.store(w->next, std::memory_order_release);
  fuse_reply_write(req, size);
}

absl::Status FuseOps::Commit(WriteFile& w, std::optional<int> killed_by) {
  absl::Status st;
  uint64_t bytes = 0;
  bool abandoned = false;
  {
    absl::MutexLock lock(&w.mu);
    bytes = w.next;
    if (w.committed) return w.error;
    w.committed = true;
    if (w.error.ok() && killed_by) {
      // The writer was killed (its files are closed as it dies): what it
      // wrote is not a whole file, and nothing appears.
      w.error = absl::AbortedError(
          absl::StrCat("the writer was killed by signal ", *killed_by,
                       " after ", bytes, " bytes: the file is abandoned"));
    }
    if (!w.error.ok()) {
      w.writer->Abort().IgnoreError();
      abandoned = true;
      st = w.error;
    } else {
      absl::StatusOr<FileInfo> info = w.writer->Close();
      st = info.status();
      w.error = st;
    }
  }
  Unlist(w);
  if (abandoned) {
    LARDER_LOG(WARNING, "fuse.write_abandoned")
        .Field("path", w.path)
        .Field("bytes", bytes)
        .Field("status", st);
    return st;
  }
  // The kernel asks again: the committed object's attributes, from the
  // master (whose invalidation this client has already applied).
  if (session_ != nullptr)
    fuse_lowlevel_notify_inval_inode(session_, w.ino, 0, 0);
  if (st.ok()) local_dirs_.Exists(w.path);  // Its directories are real now.
  if (!st.ok()) {
    LARDER_LOG(WARNING, "fuse.write_commit")
        .Field("path", w.path)
        .Field("status", st);
  } else {
    LARDER_LOG(INFO, "fuse.write_committed")
        .Field("path", w.path)
        .Field("bytes", bytes);
  }
  return st;
}

void FuseOps::Unlist(WriteFile& w) {
  absl::MutexLock lock(&writes_mu_);
  auto it = writing_.find(w.ino);
  if (it != writing_.end() && it->second == &w) writing_.erase(it);
  writing_count_.store(writing_.size(), std::memory_order_release);
}

void FuseOps::Flush(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  FuseOps* fs = Self(req);
  if (!IsWriteHandle(fi)) {
    // Nothing to flush; with opens by the kernel, ENOSYS ends FLUSH for
    // good (the kernel sends one per close of a file it opened itself).
    fuse_reply_err(req, fs->no_open_ ? ENOSYS : 0);
    return;
  }
  OpScope scope(fs->metrics_, kWrite);
  // A flush from a process dying of a signal (kill -9, the OOM killer, a
  // crash) abandons the file: only a close by a living writer, or at its
  // normal exit, commits it.
  absl::Status st =
      fs->Commit(*WriteHandle(fi), KilledBySignal(fuse_req_ctx(req)->pid));
  if (!st.ok()) scope.Failed();
  fuse_reply_err(req,
                 st.ok() ? 0 : (ErrnoFor(st) == EINVAL ? EIO : ErrnoFor(st)));
}

void FuseOps::Setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr,
                      int to_set, fuse_file_info*) {
  FuseOps* fs = Self(req);
  std::optional<struct stat> st = fs->WritingAttr(ino);
  if (!st) {
    fs->ReplyReadOnly(req, "setattr", ino);
    return;
  }
  OpScope scope(fs->metrics_, kWrite);
  // A file being written has no attributes to change but its size, and
  // only to the size it has (ftruncate(fd, 0) right after open); times and
  // modes are the object's, set by the store.
  if ((to_set & FUSE_SET_ATTR_SIZE) && attr->st_size != st->st_size) {
    scope.Failed();
    LARDER_LOG(WARNING, "fuse.write_refused")
        .Field("ino", static_cast<uint64_t>(ino))
        .Field("reason",
               "a file being written cannot be truncated or "
               "extended");
    fuse_reply_err(req, EINVAL);
    return;
  }
  fuse_reply_attr(req, &*st, 0);
}

void FuseOps::Mkdir(fuse_req_t req, fuse_ino_t parent, const char* name,
                    mode_t) {
  FuseOps* fs = Self(req);
  std::optional<std::string> dir = fs->inodes_.Path(parent);
  absl::StatusOr<FileInfo> in =
      dir ? fs->StatPath(*dir) : absl::NotFoundError("stale");
  if (!in.ok() || !in->is_dir || !in->writable) {
    // Above the mounts, or in a mount that is not writable.
    fs->ReplyReadOnly(req, "mkdir", parent, name);
    return;
  }
  OpScope scope(fs->metrics_, kWrite);
  const std::string path = InodeTable::Child(*dir, name);
  if (absl::StartsWith(name, kUploadTempPrefix)) {
    scope.Failed();
    LARDER_LOG(WARNING, "fuse.write_refused")
        .Field("path", path)
        .Field("reason",
               absl::StrCat("names starting with '", kUploadTempPrefix,
                            "' are Larder's uploads in progress"));
    fuse_reply_err(req, EPERM);
    return;
  }
  absl::StatusOr<FileInfo> there = fs->StatPath(path);
  if (there.ok()) {
    scope.Failed();
    fuse_reply_err(req, EEXIST);
    return;
  }
  if (!absl::IsNotFound(there.status())) {
    fs->ReplyError(req, scope, "mkdir", path, there.status());
    return;
  }
  // The parent's attributes (the mount's owner and mode), as a new
  // directory of its own.
  FileInfo made = *in;
  made.path = path;
  made.version.clear();
  made.size = 0;
  made.mtime = absl::Now();
  if (!fs->local_dirs_.Add(made)) {  // Another mkdir of it won.
    scope.Failed();
    fuse_reply_err(req, EEXIST);
    return;
  }
  LARDER_LOG(INFO, "fuse.mkdir")
      .Field("path", path)
      .Field("detail",
             "kept in this mount until a file written below it is committed");
  fuse_entry_param e{};
  e.ino = fs->inodes_.Ref(path, "");
  e.attr = fs->Attr(path, made);
  e.attr_timeout = absl::ToDoubleSeconds(fs->options_.attr_timeout);
  e.entry_timeout = absl::ToDoubleSeconds(fs->options_.entry_timeout);
  if (fuse_reply_entry(req, &e) != 0) fs->inodes_.Forget(e.ino, 1);
}

void FuseOps::Rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  FuseOps* fs = Self(req);
  std::optional<std::string> dir = fs->inodes_.Path(parent);
  const std::string path = dir ? InodeTable::Child(*dir, name) : "";
  if (!dir || !fs->local_dirs_.Get(path)) {
    // A directory of the cluster: not removed through the mount.
    fs->ReplyReadOnly(req, "rmdir", parent, name);
    return;
  }
  OpScope scope(fs->metrics_, kWrite);
  // Not empty: a file being written below it, a file committed below it
  // (which made it a directory of the cluster), or a directory made inside
  // it (checked as it is removed).
  bool writing_below = false;
  {
    const std::string below = path + "/";
    absl::MutexLock lock(&fs->writes_mu_);
    for (const auto& [ino, w] : fs->writing_)
      writing_below = writing_below || absl::StartsWith(w->path, below);
  }
  absl::StatusOr<FileInfo> there = fs->client_.Stat(path);
  if (!there.ok() && !absl::IsNotFound(there.status())) {
    fs->ReplyError(req, scope, "rmdir", path, there.status());
    return;
  }
  absl::Status removed = writing_below || there.ok()
                             ? absl::FailedPreconditionError("not empty")
                             : fs->local_dirs_.RemoveIfEmpty(path);
  if (!removed.ok()) {
    scope.Failed();
    fuse_reply_err(req, absl::IsNotFound(removed) ? ENOENT : ENOTEMPTY);
    return;
  }
  fuse_reply_err(req, 0);
}

}  // namespace larder
