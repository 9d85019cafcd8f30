// Copyright 2026 The Larder Authors.
#include "fuse/fuse_ops.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/security.h"
#include "understore/uri.h"

namespace larder {
namespace {

// An open file: the client's File, pinned to the version seen at open, and
// its inode (whose open state it shares with other opens of the file).
struct OpenFile {
  std::unique_ptr<File> file;
  std::shared_ptr<Inode> inode;
  bool passthrough = false;  // Read by the kernel from a backing memfd.
};

std::string BaseName(absl::string_view path) {
  const size_t slash = path.rfind('/');
  return std::string(slash == absl::string_view::npos ? path
                                                      : path.substr(slash + 1));
}

// Extended attributes of files: user.larder.{version,cached_bytes}.
constexpr std::array<const char*, 2> kXattrs = {"user.larder.version",
                                                "user.larder.cached_bytes"};

void ReplyXattr(fuse_req_t req, const std::string& value, size_t size) {
  if (size == 0) {
    fuse_reply_xattr(req, value.size());
  } else if (size < value.size()) {
    fuse_reply_err(req, ERANGE);
  } else {
    fuse_reply_buf(req, value.data(), value.size());
  }
}

// What statfs reports. The client knows neither the cluster's cache
// capacity nor the size of the under-stores behind the mounts (no call
// returns them without asking every worker), so, as Mountpoint for S3 does,
// the mount reports a large fixed size: 2^38 fragments of 4 KiB (1 PiB), all
// of them free. df then lists the mount (it hides file systems of zero
// blocks) as 1.0P, 0% used; a node's disk-space alerts (node_exporter's
// "filesystem almost full") stay quiet. The file counts are unknown, and
// left 0.
constexpr uint64_t kStatfsFragment = 4096;
constexpr uint64_t kStatfsBlocks = uint64_t{1} << 38;
constexpr uint64_t kStatfsNameMax = 255;

}  // namespace

std::optional<std::string> FuseOps::PathOf(fuse_req_t req, fuse_ino_t ino,
                                           OpScope& scope) {
  std::optional<std::string> path = inodes_.Path(ino);
  if (!path) {
    scope.Failed();
    fuse_reply_err(req, ESTALE);
  }
  return path;
}

void FuseOps::ReplyError(fuse_req_t req, OpScope& scope, const char* op,
                         absl::string_view path, const absl::Status& status) {
  scope.Failed();
  const int err = ErrnoFor(status);
  if (err != ENOENT) {
    LARDER_LOG(WARNING, "fuse.error")
        .Field("op", op)
        .Field("path", path)
        .Field("errno", strerrorname_np(err) ? strerrorname_np(err) : "?")
        .Field("status", status);
  }
  fuse_reply_err(req, err);
}

void FuseOps::ReplyReadOnly(fuse_req_t req, const char* op, fuse_ino_t ino,
                            absl::string_view name) {
  OpScope scope(metrics_, kWrite);
  scope.Failed();
  std::string path = inodes_.Path(ino).value_or("?");
  if (!name.empty()) path = InodeTable::Child(path, name);
  LARDER_LOG(WARNING, "fuse.read_only")
      .Field("op", op)
      .Field("path", path)
      .Field("reason", "the Larder mount is read-only (EROFS)");
  fuse_reply_err(req, EROFS);
}

// Attributes of the file at cluster path `path`. st_ino is the path's
// stable number (InodeTable::StableIno), not the FUSE node id: readdir,
// readdirplus and stat agree on it, and it is never 0 (which readdir(3)
// takes for a deleted entry and skips).
struct stat FuseOps::Attr(absl::string_view path, const FileInfo& info) const {
  struct stat st {};
  st.st_ino = InodeTable::StableIno(path);
  // The mount's mode (MountEntry) as MountAccess gives it to every path
  // (no write, setuid, setgid or sticky bit), x added to directories where
  // r is set; or each file's and directory's own bits (own_mode), as a
  // bind mount shows them. The workers decide by the same bits.
  // A writable mount keeps the write bits its mode gives (the kernel checks
  // them, with default_permissions, before a create or a write).
  const mode_t mode =
      MountAccess{info.uid, info.gid, info.mode, info.own_mode}.FileMode() |
      (info.writable && !info.own_mode ? (info.mode & 0222) : 0);
  st.st_mode = info.is_dir
                   ? (S_IFDIR | mode | (info.own_mode ? 0 : (mode & 0444) >> 2))
                   : (S_IFREG | mode);
  st.st_nlink = info.is_dir ? 2 : 1;
  st.st_uid = info.uid.value_or(uid_);
  st.st_gid = info.gid.value_or(gid_);
  st.st_size = info.is_dir ? 4096 : static_cast<off_t>(info.size);
  st.st_blksize = 1 << 20;
  st.st_blocks = (st.st_size + 511) / 512;
  const int64_t ns = absl::ToUnixNanos(info.mtime);
  st.st_mtim.tv_sec = st.st_atim.tv_sec = st.st_ctim.tv_sec = ns / 1000000000;
  st.st_mtim.tv_nsec = st.st_atim.tv_nsec = st.st_ctim.tv_nsec =
      ns % 1000000000;
  // With opens by the kernel its pages of a file are dropped only when the
  // size or mtime it is told changes (auto_inval_data): an object replaced
  // within its store's mtime resolution (S3: a second) and at the same size
  // must still look changed, so whole-second mtimes carry a fraction made
  // from the version.
  if (no_open_ && !info.is_dir && st.st_mtim.tv_nsec == 0 &&
      !info.version.empty()) {
    st.st_mtim.tv_nsec = st.st_atim.tv_nsec = st.st_ctim.tv_nsec =
        static_cast<long>(std::hash<std::string>{}(info.version) % 999999999 +
                          1);
  }
  return st;
}

absl::StatusOr<FileInfo> FuseOps::StatPath(const std::string& path) {
  if (path == "/") {
    FileInfo root;
    root.path = "/";
    root.is_dir = true;
    root.mtime = start_time_;
    return root;
  }
  // A directory made here is answered here (also while the master cannot
  // be asked); it leaves the table once a file below it is committed.
  if (std::optional<FileInfo> dir = local_dirs_.Get(path)) return *dir;
  return client_.Stat(path);
}

void FuseOps::Init(void* userdata, struct fuse_conn_info* conn) {
  FuseOps* fs = static_cast<FuseOps*>(userdata);
  const FuseOptions& options = fs->options_;
  conn->max_read = options.max_read;
  // Readahead and the number of requests the kernel keeps in flight decide
  // sequential throughput: each FUSE round trip costs tens of
  // microseconds, so many must overlap.
  conn->max_readahead = static_cast<unsigned>(std::max<uint64_t>(
      options.max_read, std::min<uint64_t>(options.read_ahead, 64u << 20)));
  conn->max_background = 64;
  conn->congestion_threshold = 48;
  if (conn->capable & FUSE_CAP_ASYNC_READ) conn->want |= FUSE_CAP_ASYNC_READ;
  if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA)
    conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
  if (conn->capable & FUSE_CAP_READDIRPLUS) conn->want |= FUSE_CAP_READDIRPLUS;
  if (conn->capable & FUSE_CAP_READDIRPLUS_AUTO)
    conn->want |= FUSE_CAP_READDIRPLUS_AUTO;
  if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
    conn->want |= FUSE_CAP_PARALLEL_DIROPS;
  // Not over io_uring: a ring request's reply goes to its ring entry, not
  // spliced into /dev/fuse.
  if ((conn->capable & FUSE_CAP_SPLICE_WRITE) && !fs->channel_.WillUseUring())
    conn->want |= FUSE_CAP_SPLICE_WRITE;
  // Not SPLICE_MOVE: the kernel would try (and fail) to steal each of
  // the worker's memfd pages before copying it.
  conn->want &= ~FUSE_CAP_SPLICE_MOVE;
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
  // open(O_TRUNC) arrives as one open with the flag (a write), not as a
  // truncate first.
  if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
    conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
  if (options.opens == "kernel") {
    if (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT) {
      fs->no_open_ = true;
    } else {
      LARDER_LOG(WARNING, "fuse.no_open_unsupported")
          .Field("why",
                 "the kernel does not let opens go unanswered: every "
                 "open is a request, as with --opens=daemon");
    }
  }
  LARDER_LOG(INFO, "fuse.init")
      .Field("opens", fs->no_open_ ? "kernel" : "daemon")
      .Field("proto", absl::StrCat(conn->proto_major, ".", conn->proto_minor))
      .Field("splice_write", (conn->want & FUSE_CAP_SPLICE_WRITE) != 0)
      .Field("capable", absl::StrCat(absl::Hex(conn->capable)))
      .Field("want", absl::StrCat(absl::Hex(conn->want)))
      .Field("max_readahead", conn->max_readahead)
      .Field("max_background", conn->max_background);
}

// The kernel applies INIT's readahead limit after Init returns; the bdi
// window is raised on the first request after it.
void FuseOps::AfterInit() {
  std::call_once(tuned_,
                 [this] { TuneReadahead(mountpoint_, options_.read_ahead); });
}

void FuseOps::Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  FuseOps* fs = Self(req);
  fs->AfterInit();
  OpScope scope(fs->metrics_, kLookup);
  std::optional<std::string> dir = fs->PathOf(req, parent, scope);
  if (!dir) return;
  std::string path = InodeTable::Child(*dir, name);
  if (fs->offloading()) {
    if (std::optional<absl::StatusOr<FileInfo>> cached =
            fs->CachedStatPath(path)) {
      fs->ReplyEntry(req, scope, path, *cached);
      return;
    }
    fs->Offload(req, std::move(scope), [fs, req, path](OpScope& scope) {
      fs->ReplyEntry(req, scope, path, fs->StatPath(path));
    });
    return;
  }
  fs->ReplyEntry(req, scope, path, fs->StatPath(path));
}

void FuseOps::ReplyEntry(fuse_req_t req, OpScope& scope,
                         const std::string& path,
                         const absl::StatusOr<FileInfo>& info) {
  if (!info.ok()) {
    if (info.status().code() == absl::StatusCode::kNotFound &&
        options_.negative_timeout > absl::ZeroDuration()) {
      // Ino 0: the kernel caches "no such name" for the timeout.
      fuse_entry_param e{};
      e.ino = 0;
      e.entry_timeout = absl::ToDoubleSeconds(options_.negative_timeout);
      scope.Failed();
      fuse_reply_entry(req, &e);
      return;
    }
    ReplyError(req, scope, "lookup", path, info.status());
    return;
  }
  fuse_entry_param e{};
  e.ino = inodes_.Ref(path, info->version);
  e.attr = Attr(path, *info);
  e.attr_timeout = absl::ToDoubleSeconds(options_.attr_timeout);
  e.entry_timeout = absl::ToDoubleSeconds(options_.entry_timeout);
  metrics_.inodes->Set(static_cast<double>(inodes_.size()));
  if (fuse_reply_entry(req, &e) != 0) inodes_.Forget(e.ino, 1);
}

void FuseOps::Forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  FuseOps* fs = Self(req);
  OpScope scope(fs->metrics_, kForget);
  fs->inodes_.Forget(ino, nlookup);
  fs->DropShared(ino);
  fuse_reply_none(req);
}

void FuseOps::ForgetMulti(fuse_req_t req, size_t count,
                          struct fuse_forget_data* forgets) {
  FuseOps* fs = Self(req);
  OpScope scope(fs->metrics_, kForget);
  for (size_t i = 0; i < count; ++i) {
    fs->inodes_.Forget(forgets[i].ino, forgets[i].nlookup);
    fs->DropShared(forgets[i].ino);
  }
  fs->metrics_.inodes->Set(static_cast<double>(fs->inodes_.size()));
  fuse_reply_none(req);
}

void FuseOps::Getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  FuseOps* fs = Self(req);
  fs->AfterInit();
  OpScope scope(fs->metrics_, kGetattr);
  if (std::optional<struct stat> st = fs->WritingAttr(ino)) {
    fuse_reply_attr(req, &*st, 0);  // Being written: what it has so far.
    return;
  }
  std::optional<std::string> path = fs->PathOf(req, ino, scope);
  if (!path) return;
  if (fs->offloading()) {
    if (std::optional<absl::StatusOr<FileInfo>> cached =
            fs->CachedStatPath(*path)) {
      fs->ReplyAttr(req, scope, ino, *path, *cached);
      return;
    }
    fs->Offload(req, std::move(scope),
                [fs, req, ino, p = *path](OpScope& scope) {
                  fs->ReplyAttr(req, scope, ino, p, fs->StatPath(p));
                });
    return;
  }
  fs->ReplyAttr(req, scope, ino, *path, fs->StatPath(*path));
}

void FuseOps::ReplyAttr(fuse_req_t req, OpScope& scope, fuse_ino_t ino,
                        const std::string& path,
                        const absl::StatusOr<FileInfo>& info) {
  if (!info.ok()) {
    ReplyError(req, scope, "getattr", path, info.status());
    return;
  }
  struct stat st = Attr(path, *info);
  inodes_.RepliedVersion(ino, info->version);
  fuse_reply_attr(req, &st, absl::ToDoubleSeconds(options_.attr_timeout));
}

void FuseOps::Opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  FuseOps* fs = Self(req);
  OpScope scope(fs->metrics_, kOpendir);
  std::optional<std::string> path = fs->PathOf(req, ino, scope);
  if (!path) return;
  auto* d = new DirHandle(*path);
  if (fs->local_dirs_.size() > 0) {
    d->local = fs->local_dirs_.Get(*path).has_value();
    d->local_children = fs->local_dirs_.Children(*path);
  }
  fi->fh = reinterpret_cast<uint64_t>(d);
  fi->cache_readdir = 0;
  if (fuse_reply_open(req, fi) != 0) delete d;
}

// Fills `buf` with entries from offset `off`; returns the bytes used. An
// error with nothing filled is returned as the status.
absl::StatusOr<size_t> FuseOps::FillDir(fuse_req_t req, DirHandle& d, off_t off,
                                        bool plus, std::vector<char>& buf,
                                        std::vector<uint64_t>* referenced) {
  const size_t size = buf.size();
  size_t used = 0;
  // Adds one entry; false when the reply buffer is full.
  auto add = [&](const char* name, const struct stat& st, off_t next,
                 bool counts_lookup, const std::string& path,
                 const std::string& version) {
    if (!plus) {
      size_t n = fuse_add_direntry(req, buf.data() + used, size - used, name,
                                   &st, next);
      if (n > size - used) return false;
      used += n;
      return true;
    }
    size_t need = fuse_add_direntry_plus(req, nullptr, 0, name, nullptr, 0);
    if (need > size - used) return false;
    fuse_entry_param e{};
    e.attr = st;
    if (counts_lookup) {
      e.ino = inodes_.Ref(path, version);
      referenced->push_back(e.ino);
      e.attr_timeout = absl::ToDoubleSeconds(options_.attr_timeout);
      e.entry_timeout = absl::ToDoubleSeconds(options_.entry_timeout);
    }
    used += fuse_add_direntry_plus(req, buf.data() + used, size - used, name,
                                   &e, next);
    return true;
  };
  struct stat dir_st {};
  dir_st.st_ino = InodeTable::StableIno(d.path);
  dir_st.st_mode = S_IFDIR;
  if (off < 1 && !add(".", dir_st, 1, false, "", "")) return used;
  dir_st.st_ino = InodeTable::StableIno(ParentClusterPath(d.path));
  if (off < 2 && !add("..", dir_st, 2, false, "", "")) return used;
  uint64_t index = off < 2 ? 0 : static_cast<uint64_t>(off) - 2;
  if (d.local) d.listed = 0;
  for (; !d.listed || index < *d.listed; ++index) {
    absl::StatusOr<bool> more = d.Seek(client_, options_.list_page_size, index);
    if (!more.ok()) {
      if (used > 0) return used;  // What we have; the error comes next.
      return more.status();
    }
    if (!*more) {
      d.listed = index;
      break;
    }
    const FileInfo& entry = d.Entry(index);
    const std::string name = BaseName(entry.path);
    if (name.empty()) continue;
    const std::string path = InodeTable::Child(d.path, name);
    if (entry.is_dir && local_dirs_.size() > 0) local_dirs_.Exists(path);
    struct stat st = Attr(path, entry);
    if (!add(name.c_str(), st, static_cast<off_t>(index + 3), true, path,
             entry.version))
      return used;
  }
  // Then the directories made here (offsets after the listing's).
  for (; index - *d.listed < d.local_children.size(); ++index) {
    const std::string& name = d.local_children[index - *d.listed];
    const std::string path = InodeTable::Child(d.path, name);
    std::optional<FileInfo> dir = local_dirs_.Get(path);
    if (!dir) continue;  // Listed above by now, or removed.
    if (!add(name.c_str(), Attr(path, *dir), static_cast<off_t>(index + 3),
             true, path, ""))
      return used;
  }
  return used;
}

void FuseOps::DoReaddir(fuse_req_t req, size_t size, off_t off,
                        fuse_file_info* fi, bool plus) {
  OpScope scope(metrics_, plus ? kReaddirplus : kReaddir);
  auto* d = reinterpret_cast<DirHandle*>(fi->fh);
  // A directory being listed: its first files are leased for the opens
  // that often follow (a walk of the directory).
  if (off == 0 && !d->local && backing_.enabled()) ahead_.WantDir(d->path);
  std::vector<char> buf(size);
  std::vector<uint64_t> referenced;
  absl::StatusOr<size_t> used;
  {
    // Unlocked before the reply: once the kernel has its answer, the
    // directory may be closed, and the handle deleted, at once.
    absl::MutexLock lock(&d->mu);
    used = FillDir(req, *d, off, plus, buf, &referenced);
  }
  metrics_.inodes->Set(static_cast<double>(inodes_.size()));
  if (!used.ok()) {
    ReplyError(req, scope, plus ? "readdirplus" : "readdir", d->path,
               used.status());
    return;
  }
  // Entries the kernel never got are never forgotten by it (as Lookup).
  if (fuse_reply_buf(req, buf.data(), *used) != 0) {
    for (uint64_t ino : referenced) inodes_.Forget(ino, 1);
  }
}

void FuseOps::Readdir(fuse_req_t req, fuse_ino_t, size_t size, off_t off,
                      fuse_file_info* fi) {
  Self(req)->DoReaddir(req, size, off, fi, false);
}
void FuseOps::Readdirplus(fuse_req_t req, fuse_ino_t, size_t size, off_t off,
                          fuse_file_info* fi) {
  Self(req)->DoReaddir(req, size, off, fi, true);
}

void FuseOps::Releasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  FuseOps* fs = Self(req);
  OpScope scope(fs->metrics_, kReleasedir);
  delete reinterpret_cast<DirHandle*>(fi->fh);
  fuse_reply_err(req, 0);
}

void FuseOps::Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  FuseOps* fs = Self(req);
  if (fs->no_open_ && !IsWriteOpen(fi) && !(fi->flags & O_TRUNC)) {
    // The kernel opens every file itself from now on (no OPEN, no RELEASE;
    // the page cache kept across opens); reads come with file handle 0.
    OpScope scope(fs->metrics_, kOpen);
    fuse_reply_err(req, ENOSYS);
    return;
  }
  if (IsWriteOpen(fi) || (fi->flags & O_TRUNC)) {
    // Only a writable mount's files, and only replaced whole (O_TRUNC).
    std::optional<std::string> path = fs->inodes_.Path(ino);
    absl::StatusOr<FileInfo> info =
        path ? fs->StatPath(*path) : absl::NotFoundError("stale");
    if (!info.ok() || !info->writable) {
      fs->ReplyReadOnly(req, "open for writing", ino);
      return;
    }
    OpScope scope(fs->metrics_, kWrite);
    if (!(fi->flags & O_TRUNC) || !IsWriteOpen(fi)) {
      scope.Failed();
      LARDER_LOG(WARNING, "fuse.write_refused")
          .Field("path", *path)
          .Field("reason",
                 "an existing file is written only whole: open it with "
                 "O_WRONLY|O_TRUNC");
      fuse_reply_err(req, EPERM);
      return;
    }
    fs->StartWrite(req, scope, *path, ino, /*create=*/false, fi);
    return;
  }
  OpScope scope(fs->metrics_, kOpen);
  std::shared_ptr<Inode> inode = fs->inodes_.Get(ino);
  if (!inode) {
    scope.Failed();
    fuse_reply_err(req, ESTALE);
    return;
  }
  absl::StatusOr<std::unique_ptr<File>> file = fs->client_.Open(inode->path);
  if (!file.ok()) {
    fs->ReplyError(req, scope, "open", inode->path, file.status());
    return;
  }
  const InodeTable::OpenCheck check =
      fs->inodes_.OpenedVersion(ino, (*file)->info().version);
  if (check.attrs_stale) {
    // The kernel holds another version's size: an open right after a
    // replace would read the new bytes up to the old length. Its
    // attributes are dropped, so the reads that follow fetch them again
    // (getattr) and see this version's size. Not its pages: the kernel
    // drops those itself at this open unless it is of the version last
    // opened (keep_cache below), and dropping them here would wait on
    // pages locked by readahead whose READs may be queued behind this
    // very thread.
    fuse_lowlevel_notify_inval_inode(fs->session_, ino, -1, 0);
  }
  fi->keep_cache = fs->options_.keep_cache && check.same_as_last_open;
  // A read-only open has nothing to flush: its close(2) costs no FLUSH
  // round trip (the kernel skips it, FOPEN_NOFLUSH).
  fi->noflush = 1;
  fi->direct_io = fs->UseDirectIo((*file)->info().size);
  auto* f = new OpenFile{std::move(*file), std::move(inode)};
  // Passthrough for the files the local worker holds whole in RAM (from
  // --passthrough_min_size up); not O_DIRECT, which memfds do not take.
  const bool may_pass =
      !(fi->flags & O_DIRECT) &&
      f->file->info().size >= fs->options_.passthrough_min_size;
  // The object comes leased ahead when it can (no exchange with the
  // worker); else it is asked for with the files after it. Outside the
  // inode's lock (leasing looks at other inodes).
  std::optional<absl::StatusOr<LocalSlice>> object;
  if (may_pass && fs->ahead_.enabled() && fs->backing_.enabled() &&
      !f->inode->has_backing()) {
    if (std::optional<LocalSlice> ahead =
            fs->ahead_.Take(f->inode->path, f->file->info().version)) {
      object = *std::move(ahead);
    } else {
      object = fs->ahead_.LeaseAround(f->inode->path, *f->file);
    }
  }
  absl::StatusOr<int> backing =
      f->inode->AttachOpen(f->file->info().version, may_pass, fs->backing_,
                           [f, &object]() -> absl::StatusOr<LocalSlice> {
                             if (object) return *std::move(object);
                             return f->file->OpenLocalObject();
                           });
  if (!backing.ok()) {
    fs->ReplyError(req, scope, "open", f->file->info().path, backing.status());
    delete f;
    return;
  }
  if (*backing > 0) {
    f->passthrough = true;
    fs->metrics_.passthrough_opens->Increment();
    // The kernel allows no page cache and no direct_io reads beside it.
    fi->direct_io = 0;
    fi->keep_cache = 0;
  }
  fi->fh = reinterpret_cast<uint64_t>(f);
  fs->metrics_.open_files->Increment();
  int sent;
  {
    KernelChannel::OpenBacking reply_backing(*backing);
    sent = fuse_reply_open(req, fi);
  }
  if (sent != 0) {  // Interrupted: the kernel sends no release.
    f->inode->DetachOpen(f->passthrough, fs->backing_);
    delete f;
    fs->metrics_.open_files->Decrement();
  }
}

void FuseOps::Read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                   fuse_file_info* fi) {
  FuseOps* fs = Self(req);
  OpScope scope(fs->metrics_, kRead);
  if (fi->fh == 0) {  // Not opened (opens == "kernel").
    std::shared_ptr<File> file = fs->SharedFile(req, ino, scope);
    if (file) fs->ReplyRead(req, scope, *file, size, off);
    return;
  }
  fs->ReplyRead(req, scope, *reinterpret_cast<OpenFile*>(fi->fh)->file, size,
                off);
}

void FuseOps::ReplyRead(fuse_req_t req, OpScope& scope, File& file, size_t size,
                        off_t off) {
  const uint64_t file_size = file.info().size;
  if (static_cast<uint64_t>(off) >= file_size) {
    fuse_reply_buf(req, nullptr, 0);
    return;
  }
  // Where each block comes from is decided once, by the client; one reply
  // is built from the pieces.
  absl::StatusOr<std::vector<ReadPiece>> pieces =
      file.ReadPieces(static_cast<uint64_t>(off), size);
  if (!pieces.ok()) {
    ReplyError(req, scope, "read", file.info().path, pieces.status());
    return;
  }
  size_t total = 0, local = 0, buffers = 0;
  for (const ReadPiece& p : *pieces) {
    total += p.size();
    if (p.is_local()) ++local;
    buffers += p.is_local() ? 1 : p.view.pieces.size();
  }
  metrics_.read_bytes->Increment(static_cast<double>(total));
  if (total == 0) {
    fuse_reply_buf(req, nullptr, 0);
    return;
  }
  if (local == 0) {
    // Blocks from other nodes only: written to the kernel straight from
    // the buffers gRPC read them into (one copy, by the kernel).
    std::vector<iovec> iov;
    iov.reserve(buffers);
    for (const ReadPiece& p : *pieces) {
      for (absl::Span<const char> m : p.view.pieces)
        iov.push_back(iovec{const_cast<char*>(m.data()), m.size()});
    }
    fuse_reply_iov(req, iov.data(), static_cast<int>(iov.size()));
    return;
  }
  // Blocks cached on this node go to the kernel by splice, straight from
  // the worker's memfd or block file: no copy through this process; any
  // others ride in the same reply from memory.
  std::vector<char> storage(sizeof(fuse_bufvec) + buffers * sizeof(fuse_buf));
  auto* bufv = reinterpret_cast<fuse_bufvec*>(storage.data());
  bufv->count = 0;
  bufv->idx = 0;
  bufv->off = 0;
  for (const ReadPiece& p : *pieces) {
    if (p.is_local()) {
      fuse_buf& b = bufv->buf[bufv->count++];
      b = fuse_buf{};
      b.size = p.local.length;
      b.flags = static_cast<fuse_buf_flags>(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
      b.fd = p.local.fd;
      b.pos = static_cast<off_t>(p.local.offset);
      continue;
    }
    for (absl::Span<const char> m : p.view.pieces) {
      fuse_buf& b = bufv->buf[bufv->count++];
      b = fuse_buf{};
      b.size = m.size();
      b.mem = const_cast<char*>(m.data());
    }
  }
  fuse_reply_data(req, bufv, fuse_buf_copy_flags{});
}

void FuseOps::Release(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  FuseOps* fs = Self(req);
  OpScope scope(fs->metrics_, kRelease);
  if (IsWriteHandle(fi)) {
    // Committed by its flush, else here (errors only logged: close(2) has
    // returned).
    WriteFile* w = WriteHandle(fi);
    fs->Commit(*w).IgnoreError();
    fs->Unlist(*w);
    delete w;
    fs->metrics_.open_files->Decrement();
    fuse_reply_err(req, 0);
    return;
  }
  auto* f = reinterpret_cast<OpenFile*>(fi->fh);
  if (f == nullptr) {  // Opened by the kernel: nothing of ours to release.
    fuse_reply_err(req, 0);
    return;
  }
  f->inode->DetachOpen(f->passthrough, fs->backing_);
  delete f;
  fs->metrics_.open_files->Decrement();
  fuse_reply_err(req, 0);
}

// See kStatfsBlocks. The kernel takes f_flag from the mount, not from here.
void FuseOps::Statfs(fuse_req_t req, fuse_ino_t) {
  FuseOps* fs = Self(req);
  OpScope scope(fs->metrics_, kStatfs);
  struct statvfs st {};
  st.f_bsize = fs->options_.max_read;  // The preferred read size.
  st.f_frsize = kStatfsFragment;
  st.f_blocks = kStatfsBlocks;
  st.f_bfree = kStatfsBlocks;
  st.f_bavail = kStatfsBlocks;
  st.f_namemax = kStatfsNameMax;
  fuse_reply_statfs(req, &st);
}

void FuseOps::Getxattr(fuse_req_t req, fuse_ino_t ino, const char* name,
                       size_t size) {
  FuseOps* fs = Self(req);
  OpScope scope(fs->metrics_, kGetxattr);
  std::optional<std::string> path = fs->PathOf(req, ino, scope);
  if (!path) return;
  const absl::string_view want = name;
  if (!absl::StartsWith(want, "user.larder.") || *path == "/") {
    fuse_reply_err(req, ENODATA);
    return;
  }
  if (want == "user.larder.cached_bytes") {
    absl::StatusOr<uint64_t> n = fs->client_.CachedBytes(*path);
    if (!n.ok()) {
      fs->ReplyError(req, scope, "getxattr", *path, n.status());
      return;
    }
    ReplyXattr(req, absl::StrCat(*n), size);
    return;
  }
  absl::StatusOr<FileInfo> info = fs->client_.Stat(*path);
  if (!info.ok()) {
    fs->ReplyError(req, scope, "getxattr", *path, info.status());
    return;
  }
  if (want == "user.larder.version") {
    ReplyXattr(req, info->version, size);
  } else {
    fuse_reply_err(req, ENODATA);
  }
}

void FuseOps::Listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  FuseOps* fs = Self(req);
  OpScope scope(fs->metrics_, kListxattr);
  std::string names;
  if (ino != InodeTable::kRoot) {
    for (const char* n : kXattrs) names.append(n).push_back('\0');
  }
  ReplyXattr(req, names, size);
}

}  // namespace larder
