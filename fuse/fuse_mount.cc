// Copyright 2026 The Larder Authors.
//
// libfuse3 low-level operations over larder::Client. See fuse_mount.h.
#define FUSE_USE_VERSION 312

#include "fuse/fuse_mount.h"

#include <fcntl.h>
#include <fuse3/fuse_lowlevel.h>
#include <linux/fuse.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "common/log.h"
#include "common/ops_server.h"
#include "common/security.h"
#include "common/status_macros.h"
#include "fuse/inode_table.h"
#include "understore/uri.h"

namespace larder {
namespace {

// Operation types, for metrics.
enum Op {
  kLookup,
  kForget,
  kGetattr,
  kOpendir,
  kReaddir,
  kReaddirplus,
  kReleasedir,
  kOpen,
  kRead,
  kRelease,
  kStatfs,
  kGetxattr,
  kListxattr,
  kWrite,  // Every modifying operation (all answered EROFS).
  kOpCount
};
constexpr std::array<const char*, kOpCount> kOpNames = {
    "lookup",      "forget",     "getattr",   "opendir", "readdir",
    "readdirplus", "releasedir", "open",      "read",    "release",
    "statfs",      "getxattr",   "listxattr", "write"};

struct FuseMetrics {
  explicit FuseMetrics(prometheus::Registry& r) {
    auto& ops_family = prometheus::BuildCounter()
                           .Name("larder_fuse_operations_total")
                           .Help("FUSE requests served, by operation")
                           .Register(r);
    auto& errors_family =
        prometheus::BuildCounter()
            .Name("larder_fuse_errors_total")
            .Help("FUSE requests answered with an error, by operation")
            .Register(r);
    auto& latency_family = prometheus::BuildHistogram()
                               .Name("larder_fuse_operation_seconds")
                               .Help("FUSE request latency, by operation")
                               .Register(r);
    for (int i = 0; i < kOpCount; ++i) {
      ops[i] = &ops_family.Add({{"op", kOpNames[i]}});
      errors[i] = &errors_family.Add({{"op", kOpNames[i]}});
      latency[i] = &latency_family.Add(
          {{"op", kOpNames[i]}},
          prometheus::Histogram::BucketBoundaries{
              0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
              0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10});
    }
    read_bytes = &prometheus::BuildCounter()
                      .Name("larder_fuse_read_bytes_total")
                      .Help("Bytes returned by FUSE reads")
                      .Register(r)
                      .Add({});
    open_files = &prometheus::BuildGauge()
                      .Name("larder_fuse_open_files")
                      .Help("Files open through the mount")
                      .Register(r)
                      .Add({});
    passthrough_opens =
        &prometheus::BuildCounter()
             .Name("larder_fuse_passthrough_opens_total")
             .Help(
                 "Opens handed to the kernel as the local worker's memfd "
                 "(their reads bypass the daemon)")
             .Register(r)
             .Add({});
    inodes = &prometheus::BuildGauge()
                  .Name("larder_fuse_inodes")
                  .Help("Inodes the kernel holds references to")
                  .Register(r)
                  .Add({});
    auto& lookups =
        prometheus::BuildCounter()
            .Name("larder_fuse_metadata_lookups_total")
            .Help(
                "Metadata lookups (stat, open, list) by where the answer came "
                "from: hit (the node's metadata cache), miss (the master), "
                "stale (an expired entry, the master or under-store being "
                "unreachable)")
            .Register(r);
    meta_hits = &lookups.Add({{"result", "hit"}});
    meta_misses = &lookups.Add({{"result", "miss"}});
    meta_stale = &lookups.Add({{"result", "stale"}});
    meta_evictions = &prometheus::BuildCounter()
                          .Name("larder_fuse_metadata_evictions_total")
                          .Help(
                              "Metadata cache entries dropped to stay "
                              "within its entry and byte bounds")
                          .Register(r)
                          .Add({});
    meta_invalidated =
        &prometheus::BuildCounter()
             .Name("larder_fuse_metadata_invalidated_total")
             .Help("Metadata cache entries dropped by invalidations")
             .Register(r)
             .Add({});
    meta_entries = &prometheus::BuildGauge()
                        .Name("larder_fuse_metadata_cache_entries")
                        .Help("Stats and listings in the metadata cache")
                        .Register(r)
                        .Add({});
    meta_bytes = &prometheus::BuildGauge()
                      .Name("larder_fuse_metadata_cache_bytes")
                      .Help("Estimated bytes held by the metadata cache")
                      .Register(r)
                      .Add({});
  }

  // Moves the client's metadata counters to their series.
  void Update(const ClientStats& now) ABSL_LOCKS_EXCLUDED(mu) {
    absl::MutexLock lock(&mu);
    auto add = [](prometheus::Counter* c, uint64_t now, uint64_t& last) {
      if (now > last) c->Increment(static_cast<double>(now - last));
      last = now;
    };
    add(meta_hits, now.metadata_hits, last.metadata_hits);
    add(meta_misses, now.metadata_misses, last.metadata_misses);
    add(meta_stale, now.metadata_stale_served, last.metadata_stale_served);
    add(meta_evictions, now.metadata_evictions, last.metadata_evictions);
    add(meta_invalidated, now.metadata_invalidated, last.metadata_invalidated);
    meta_entries->Set(static_cast<double>(now.metadata_entries));
    meta_bytes->Set(static_cast<double>(now.metadata_bytes));
  }
  std::array<prometheus::Counter*, kOpCount> ops{}, errors{};
  std::array<prometheus::Histogram*, kOpCount> latency{};
  prometheus::Counter* read_bytes;
  prometheus::Counter* passthrough_opens;
  prometheus::Gauge* open_files;
  prometheus::Gauge* inodes;
  prometheus::Counter *meta_hits, *meta_misses, *meta_stale, *meta_evictions,
      *meta_invalidated;
  prometheus::Gauge *meta_entries, *meta_bytes;
  absl::Mutex mu;
  ClientStats last ABSL_GUARDED_BY(mu);  // At the previous scrape.
};

// An open file: the client's File, pinned to the version seen at open, and
// its inode (whose open state it shares with other opens of the file).
struct OpenFile {
  std::unique_ptr<File> file;
  fuse_ino_t ino = 0;
  std::shared_ptr<Inode> inode;
  bool passthrough = false;  // Read by the kernel from a backing memfd.
  bool counted = false;      // Counted in Inode::daemon_opens.
};

// FUSE passthrough (kernel 7.40 protocol, Linux 6.9+), which libfuse 3.14
// does not know: the INIT flag, the open flag, and the /dev/fuse ioctls that
// register a backing file.
constexpr uint64_t kInitPassthrough = 1ull << 37;
constexpr uint32_t kOpenPassthrough = 1u << 7;
struct BackingMap {
  int32_t fd;
  uint32_t flags;
  uint64_t padding;
};
constexpr unsigned long kBackingOpen = _IOW(229, 1, BackingMap);
constexpr unsigned long kBackingClose = _IOW(229, 2, uint32_t);

// The backing id of the open reply this thread is sending (0: none); the
// channel writes it into the reply, which libfuse 3.14 cannot.
thread_local int tls_open_backing = 0;

// An open directory: the whole listing from the node's metadata cache
// (shared with it, so an open directory costs no copy), or, for a directory
// too large for the cache, one page of the master's listing at a time. Entry
// i of the listing has the readdir offset i + 3 ("." is 1, ".." is 2).
struct DirHandle {
  absl::Mutex mu;
  std::string path;
  bool loaded ABSL_GUARDED_BY(mu) = false;
  // The whole listing, shared with the node's metadata cache; empty for a
  // directory too large to cache, which is paged through the master below.
  std::shared_ptr<const std::vector<FileInfo>> all ABSL_GUARDED_BY(mu);
  bool paged ABSL_GUARDED_BY(mu) = false;
  uint64_t page_start ABSL_GUARDED_BY(mu) = 0;  // Listing index of page[0].
  std::vector<FileInfo> page ABSL_GUARDED_BY(mu);
  std::string next_token ABSL_GUARDED_BY(mu);
};

std::string BaseName(absl::string_view path) {
  const size_t slash = path.rfind('/');
  return std::string(slash == absl::string_view::npos ? path
                                                      : path.substr(slash + 1));
}

// One line of /proc/self/mountinfo.
struct MountInfo {
  std::string device;  // "major:minor"
  std::string source, type;
};

// Undoes the octal escapes (\040 for a space) of mountinfo paths.
std::string Unescape(absl::string_view in) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '\\' && i + 3 < in.size()) {
      int v = 0;
      bool ok = true;
      for (size_t k = 1; k <= 3; ++k) {
        if (in[i + k] < '0' || in[i + k] > '7') {
          ok = false;
          break;
        }
        v = v * 8 + (in[i + k] - '0');
      }
      if (ok) {
        out.push_back(static_cast<char>(v));
        i += 3;
        continue;
      }
    }
    out.push_back(in[i]);
  }
  return out;
}

// The topmost mount at `path` (a resolved path), if any.
std::optional<MountInfo> FindMount(const std::string& path) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  std::optional<MountInfo> found;
  while (std::getline(in, line)) {
    // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE ...
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    if (f.size() < 5 || Unescape(f[4]) != path) continue;
    MountInfo m;
    m.device = f[2];
    for (size_t i = 5; i + 2 < f.size(); ++i) {
      if (f[i] == "-") {
        m.type = f[i + 1];
        m.source = f[i + 2];
        break;
      }
    }
    found = m;
  }
  return found;
}

}  // namespace

int ErrnoFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return 0;
    case absl::StatusCode::kNotFound:
      return ENOENT;
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      return EACCES;
    case absl::StatusCode::kDeadlineExceeded:
      return ETIMEDOUT;
    case absl::StatusCode::kFailedPrecondition:
      return ESTALE;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return EINVAL;
    case absl::StatusCode::kUnimplemented:
      return ENOTSUP;
    case absl::StatusCode::kResourceExhausted:
      return EAGAIN;
    default:
      return EIO;
  }
}

class FuseMount::Fs {
 public:
  Fs(FuseOptions options, std::unique_ptr<Client> client)
      : options_(std::move(options)),
        client_(std::move(client)),
        registry_(std::make_shared<prometheus::Registry>()),
        metrics_(*registry_) {}

  ~Fs() {
    client_->SetInvalidationHook(nullptr);
    if (notifier_.joinable()) {
      {
        absl::MutexLock lock(&notify_mu_);
        notify_stop_ = true;
      }
      notifier_.join();
    }
    if (session_ != nullptr) {
      if (mounted_) fuse_session_unmount(session_);
      fuse_session_destroy(session_);
    }
  }

  absl::Status Mount();
  absl::Status Serve();
  int ops_port() const { return ops_ ? ops_->port() : 0; }

 private:
  // Times one request and counts its outcome.
  class Scope {
   public:
    Scope(Fs* fs, Op op)
        : fs_(fs), op_(op), start_(std::chrono::steady_clock::now()) {}
    ~Scope() {
      fs_->metrics_.ops[op_]->Increment();
      if (failed_) fs_->metrics_.errors[op_]->Increment();
      fs_->metrics_.latency[op_]->Observe(
          std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                        start_)
              .count());
    }
    void Failed() { failed_ = true; }

   private:
    Fs* fs_;
    Op op_;
    std::chrono::steady_clock::time_point start_;
    bool failed_ = false;
  };

  static Fs* Self(fuse_req_t req) {
    return static_cast<Fs*>(fuse_req_userdata(req));
  }

  // Replies with the errno for `status`; unexpected failures are logged with
  // their cause (NotFound is an answer, not a failure).
  void ReplyError(fuse_req_t req, Scope& scope, const char* op,
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

  void ReplyReadOnly(fuse_req_t req, const char* op, fuse_ino_t ino,
                     absl::string_view name = "") {
    Scope scope(this, kWrite);
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
  struct stat Attr(absl::string_view path, const FileInfo& info) const {
    struct stat st {};
    st.st_ino = InodeTable::StableIno(path);
    // The mount's mode (MountEntry) as MountAccess gives it to every path
    // (no write, setuid, setgid or sticky bit), x added to directories where
    // r is set; or each file's and directory's own bits (own_mode), as a
    // bind mount shows them. The workers decide by the same bits.
    const mode_t mode =
        MountAccess{info.uid, info.gid, info.mode, info.own_mode}.FileMode();
    st.st_mode =
        info.is_dir
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
    return st;
  }

  absl::StatusOr<FileInfo> StatPath(const std::string& path) {
    if (path == "/") {
      FileInfo root;
      root.path = "/";
      root.is_dir = true;
      root.mtime = start_time_;
      return root;
    }
    return client_->Stat(path);
  }

  // --- operations ----------------------------------------------------------

  static void Init(void* userdata, struct fuse_conn_info* conn) {
    Fs* fs = static_cast<Fs*>(userdata);
    conn->max_read = fs->options_.max_read;
    // Readahead and the number of requests the kernel keeps in flight decide
    // sequential throughput: each FUSE round trip costs tens of
    // microseconds, so many must overlap.
    conn->max_readahead = static_cast<unsigned>(std::max<uint64_t>(
        fs->options_.max_read,
        std::min<uint64_t>(fs->options_.read_ahead, 64u << 20)));
    conn->max_background = 64;
    conn->congestion_threshold = 48;
    if (conn->capable & FUSE_CAP_ASYNC_READ) conn->want |= FUSE_CAP_ASYNC_READ;
    if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA)
      conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
    if (conn->capable & FUSE_CAP_READDIRPLUS)
      conn->want |= FUSE_CAP_READDIRPLUS;
    if (conn->capable & FUSE_CAP_READDIRPLUS_AUTO)
      conn->want |= FUSE_CAP_READDIRPLUS_AUTO;
    if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
      conn->want |= FUSE_CAP_PARALLEL_DIROPS;
    if (conn->capable & FUSE_CAP_SPLICE_WRITE)
      conn->want |= FUSE_CAP_SPLICE_WRITE;
    // Not SPLICE_MOVE: the kernel would try (and fail) to steal each of
    // the worker's memfd pages before copying it.
    conn->want &= ~FUSE_CAP_SPLICE_MOVE;
    conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
    LARDER_LOG(INFO, "fuse.init")
        .Field("proto", absl::StrCat(conn->proto_major, ".", conn->proto_minor))
        .Field("splice_write", (conn->want & FUSE_CAP_SPLICE_WRITE) != 0)
        .Field("max_readahead", conn->max_readahead)
        .Field("max_background", conn->max_background);
  }

  // The kernel applies INIT's readahead limit after Init returns; the bdi
  // window is raised on the first request after it.
  void AfterInit() {
    std::call_once(tuned_, [this] { TuneReadahead(); });
  }

  static void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
    Fs* fs = Self(req);
    fs->AfterInit();
    Scope scope(fs, kLookup);
    std::optional<std::string> dir = fs->inodes_.Path(parent);
    if (!dir) {
      scope.Failed();
      fuse_reply_err(req, ESTALE);
      return;
    }
    const std::string path = InodeTable::Child(*dir, name);
    absl::StatusOr<FileInfo> info = fs->StatPath(path);
    if (!info.ok()) {
      if (info.status().code() == absl::StatusCode::kNotFound &&
          fs->options_.negative_timeout > absl::ZeroDuration()) {
        // Ino 0: the kernel caches "no such name" for the timeout.
        fuse_entry_param e{};
        e.ino = 0;
        e.entry_timeout = absl::ToDoubleSeconds(fs->options_.negative_timeout);
        scope.Failed();
        fuse_reply_entry(req, &e);
        return;
      }
      fs->ReplyError(req, scope, "lookup", path, info.status());
      return;
    }
    fuse_entry_param e{};
    e.ino = fs->inodes_.Ref(path, info->version);
    e.attr = fs->Attr(path, *info);
    e.attr_timeout = absl::ToDoubleSeconds(fs->options_.attr_timeout);
    e.entry_timeout = absl::ToDoubleSeconds(fs->options_.entry_timeout);
    fs->metrics_.inodes->Set(static_cast<double>(fs->inodes_.size()));
    if (fuse_reply_entry(req, &e) != 0) fs->inodes_.Forget(e.ino, 1);
  }

  static void Forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
    Fs* fs = Self(req);
    Scope scope(fs, kForget);
    fs->inodes_.Forget(ino, nlookup);
    fuse_reply_none(req);
  }

  static void ForgetMulti(fuse_req_t req, size_t count,
                          struct fuse_forget_data* forgets) {
    Fs* fs = Self(req);
    Scope scope(fs, kForget);
    for (size_t i = 0; i < count; ++i)
      fs->inodes_.Forget(forgets[i].ino, forgets[i].nlookup);
    fs->metrics_.inodes->Set(static_cast<double>(fs->inodes_.size()));
    fuse_reply_none(req);
  }

  static void Getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
    Fs* fs = Self(req);
    fs->AfterInit();
    Scope scope(fs, kGetattr);
    std::optional<std::string> path = fs->inodes_.Path(ino);
    if (!path) {
      scope.Failed();
      fuse_reply_err(req, ESTALE);
      return;
    }
    absl::StatusOr<FileInfo> info = fs->StatPath(*path);
    if (!info.ok()) {
      fs->ReplyError(req, scope, "getattr", *path, info.status());
      return;
    }
    struct stat st = fs->Attr(*path, *info);
    fs->inodes_.RepliedVersion(ino, info->version);
    fuse_reply_attr(req, &st, absl::ToDoubleSeconds(fs->options_.attr_timeout));
  }

  static void Opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    Fs* fs = Self(req);
    Scope scope(fs, kOpendir);
    std::optional<std::string> path = fs->inodes_.Path(ino);
    if (!path) {
      scope.Failed();
      fuse_reply_err(req, ESTALE);
      return;
    }
    auto* d = new DirHandle;
    d->path = *path;
    fi->fh = reinterpret_cast<uint64_t>(d);
    fi->cache_readdir = 0;
    if (fuse_reply_open(req, fi) != 0) delete d;
  }

  // Makes sure the page holding listing index `index` is loaded; false with
  // `status` OK means the listing ends before `index`.
  absl::StatusOr<bool> Seek(DirHandle& d, uint64_t index)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(d.mu) {
    if (!d.loaded && !d.paged) {
      absl::StatusOr<std::shared_ptr<const std::vector<FileInfo>>> all =
          client_->ListDir(d.path);
      if (all.ok()) {
        d.loaded = true;
        d.all = *std::move(all);
      } else if (all.status().code() == absl::StatusCode::kResourceExhausted) {
        d.paged = true;
      } else {
        return all.status();
      }
    }
    if (d.all) {
      if (index >= d.all->size()) return false;
      return true;
    }
    if (!d.loaded || index < d.page_start) {  // (Re)start the listing.
      LARDER_ASSIGN_OR_RETURN(
          ListResult r, client_->List(d.path, "", options_.list_page_size));
      d.loaded = true;
      d.page_start = 0;
      d.page = std::move(r.entries);
      d.next_token = std::move(r.next_page_token);
    }
    while (index >= d.page_start + d.page.size()) {
      if (d.next_token.empty()) return false;
      LARDER_ASSIGN_OR_RETURN(
          ListResult r,
          client_->List(d.path, d.next_token, options_.list_page_size));
      d.page_start += d.page.size();
      d.page = std::move(r.entries);
      d.next_token = std::move(r.next_page_token);
      if (d.page.empty() && d.next_token.empty()) return false;
    }
    return true;
  }

  // Fills `buf` with entries from offset `off`; returns the bytes used. An
  // error with nothing filled is returned as the status.
  absl::StatusOr<size_t> FillDir(fuse_req_t req, DirHandle& d, fuse_ino_t ino,
                                 off_t off, bool plus, std::vector<char>& buf)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(d.mu) {
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
    for (uint64_t index = off < 2 ? 0 : static_cast<uint64_t>(off) - 2;;
         ++index) {
      absl::StatusOr<bool> more = Seek(d, index);
      if (!more.ok()) {
        if (used > 0) return used;  // What we have; the error comes next.
        return more.status();
      }
      if (!*more) return used;
      const FileInfo& entry =
          d.all ? (*d.all)[index] : d.page[index - d.page_start];
      const std::string name = BaseName(entry.path);
      if (name.empty()) continue;
      const std::string path = InodeTable::Child(d.path, name);
      struct stat st = Attr(path, entry);
      if (!add(name.c_str(), st, static_cast<off_t>(index + 3), true, path,
               entry.version))
        return used;
    }
  }

  void DoReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                 fuse_file_info* fi, bool plus) {
    Scope scope(this, plus ? kReaddirplus : kReaddir);
    auto* d = reinterpret_cast<DirHandle*>(fi->fh);
    std::vector<char> buf(size);
    absl::StatusOr<size_t> used;
    {
      // Unlocked before the reply: once the kernel has its answer, the
      // directory may be closed, and the handle deleted, at once.
      absl::MutexLock lock(&d->mu);
      used = FillDir(req, *d, ino, off, plus, buf);
    }
    metrics_.inodes->Set(static_cast<double>(inodes_.size()));
    if (!used.ok()) {
      ReplyError(req, scope, plus ? "readdirplus" : "readdir", d->path,
                 used.status());
      return;
    }
    fuse_reply_buf(req, buf.data(), *used);
  }

  static void Readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                      fuse_file_info* fi) {
    Self(req)->DoReaddir(req, ino, size, off, fi, false);
  }
  static void Readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
                          off_t off, fuse_file_info* fi) {
    Self(req)->DoReaddir(req, ino, size, off, fi, true);
  }

  static void Releasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
    Fs* fs = Self(req);
    Scope scope(fs, kReleasedir);
    delete reinterpret_cast<DirHandle*>(fi->fh);
    fuse_reply_err(req, 0);
  }

  static void Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    Fs* fs = Self(req);
    if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
      fs->ReplyReadOnly(req, "open for writing", ino);
      return;
    }
    Scope scope(fs, kOpen);
    std::shared_ptr<Inode> inode = fs->inodes_.Get(ino);
    if (!inode) {
      scope.Failed();
      fuse_reply_err(req, ESTALE);
      return;
    }
    absl::StatusOr<std::unique_ptr<File>> file = fs->client_->Open(inode->path);
    if (!file.ok()) {
      fs->ReplyError(req, scope, "open", inode->path, file.status());
      return;
    }
    const InodeTable::OpenCheck check =
        fs->inodes_.OpenedVersion(ino, (*file)->info().version);
    if (check.attrs_stale) {
      // The kernel holds another version's size: an open right after a
      // replace would read the new bytes up to the old length. Its
      // attributes and pages are dropped, so the reads that follow fetch
      // them again (getattr) and see this version's size.
      fuse_lowlevel_notify_inval_inode(fs->session_, ino, 0, 0);
    }
    fi->keep_cache = fs->options_.keep_cache && check.same_as_last_open;
    fi->direct_io = fs->UseDirectIo((*file)->info().size);
    auto* f = new OpenFile{std::move(*file)};
    f->ino = ino;
    f->inode = std::move(inode);
    int backing = 0;
    {
      absl::StatusOr<int> b = fs->AttachFile(*f, fi->flags, fi->direct_io);
      if (!b.ok()) {
        fs->ReplyError(req, scope, "open", f->file->info().path, b.status());
        delete f;
        return;
      }
      backing = *b;
    }
    if (backing > 0) {
      // The kernel allows no page cache and no direct_io reads beside it.
      fi->direct_io = 0;
      fi->keep_cache = 0;
    }
    fi->fh = reinterpret_cast<uint64_t>(f);
    fs->metrics_.open_files->Increment();
    tls_open_backing = backing;
    const int sent = fuse_reply_open(req, fi);
    tls_open_backing = 0;
    if (sent != 0) {  // Interrupted: the kernel sends no release.
      fs->DetachFile(*f);
      delete f;
      fs->metrics_.open_files->Decrement();
    }
  }

  static void Read(fuse_req_t req, fuse_ino_t, size_t size, off_t off,
                   fuse_file_info* fi) {
    Fs* fs = Self(req);
    Scope scope(fs, kRead);
    File& file = *reinterpret_cast<OpenFile*>(fi->fh)->file;
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
      fs->ReplyError(req, scope, "read", file.info().path, pieces.status());
      return;
    }
    size_t total = 0, local = 0, buffers = 0;
    for (const ReadPiece& p : *pieces) {
      total += p.size();
      if (p.is_local()) ++local;
      buffers += p.is_local() ? 1 : p.view.pieces.size();
    }
    fs->metrics_.read_bytes->Increment(static_cast<double>(total));
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
        b.flags =
            static_cast<fuse_buf_flags>(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
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

  static void Release(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
    Fs* fs = Self(req);
    Scope scope(fs, kRelease);
    auto* f = reinterpret_cast<OpenFile*>(fi->fh);
    fs->DetachFile(*f);
    delete f;
    fs->metrics_.open_files->Decrement();
    fuse_reply_err(req, 0);
  }

  static void Statfs(fuse_req_t req, fuse_ino_t) {
    Fs* fs = Self(req);
    Scope scope(fs, kStatfs);
    struct statvfs st {};
    st.f_bsize = 4096;
    st.f_frsize = 4096;
    st.f_namemax = 1024;
    st.f_flag = ST_RDONLY | ST_NOSUID;
    fuse_reply_statfs(req, &st);
  }

  // Extended attributes of files: user.larder.{version,cached_bytes}.
  static constexpr std::array<const char*, 2> kXattrs = {
      "user.larder.version", "user.larder.cached_bytes"};

  static void ReplyXattr(fuse_req_t req, const std::string& value,
                         size_t size) {
    if (size == 0) {
      fuse_reply_xattr(req, value.size());
    } else if (size < value.size()) {
      fuse_reply_err(req, ERANGE);
    } else {
      fuse_reply_buf(req, value.data(), value.size());
    }
  }

  static void Getxattr(fuse_req_t req, fuse_ino_t ino, const char* name,
                       size_t size) {
    Fs* fs = Self(req);
    Scope scope(fs, kGetxattr);
    std::optional<std::string> path = fs->inodes_.Path(ino);
    if (!path) {
      scope.Failed();
      fuse_reply_err(req, ESTALE);
      return;
    }
    const absl::string_view want = name;
    if (!absl::StartsWith(want, "user.larder.") || *path == "/") {
      fuse_reply_err(req, ENODATA);
      return;
    }
    if (want == "user.larder.cached_bytes") {
      absl::StatusOr<uint64_t> n = fs->client_->CachedBytes(*path);
      if (!n.ok()) {
        fs->ReplyError(req, scope, "getxattr", *path, n.status());
        return;
      }
      ReplyXattr(req, absl::StrCat(*n), size);
      return;
    }
    absl::StatusOr<FileInfo> info = fs->client_->Stat(*path);
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

  static void Listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
    Fs* fs = Self(req);
    Scope scope(fs, kListxattr);
    std::string names;
    if (ino != InodeTable::kRoot) {
      for (const char* n : kXattrs) names.append(n).push_back('\0');
    }
    ReplyXattr(req, names, size);
  }

  // Every modifying operation: EROFS, logged.
  static void Setattr(fuse_req_t req, fuse_ino_t ino, struct stat*, int,
                      fuse_file_info*) {
    Self(req)->ReplyReadOnly(req, "setattr", ino);
  }
  static void Mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t,
                    dev_t) {
    Self(req)->ReplyReadOnly(req, "mknod", parent, name);
  }
  static void Mkdir(fuse_req_t req, fuse_ino_t parent, const char* name,
                    mode_t) {
    Self(req)->ReplyReadOnly(req, "mkdir", parent, name);
  }
  static void Unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
    Self(req)->ReplyReadOnly(req, "unlink", parent, name);
  }
  static void Rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
    Self(req)->ReplyReadOnly(req, "rmdir", parent, name);
  }
  static void Symlink(fuse_req_t req, const char*, fuse_ino_t parent,
                      const char* name) {
    Self(req)->ReplyReadOnly(req, "symlink", parent, name);
  }
  static void Rename(fuse_req_t req, fuse_ino_t parent, const char* name,
                     fuse_ino_t, const char*, unsigned) {
    Self(req)->ReplyReadOnly(req, "rename", parent, name);
  }
  static void Link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t,
                   const char* name) {
    Self(req)->ReplyReadOnly(req, "link", ino, name);
  }
  static void Write(fuse_req_t req, fuse_ino_t ino, const char*, size_t, off_t,
                    fuse_file_info*) {
    Self(req)->ReplyReadOnly(req, "write", ino);
  }
  static void Create(fuse_req_t req, fuse_ino_t parent, const char* name,
                     mode_t, fuse_file_info*) {
    Self(req)->ReplyReadOnly(req, "create", parent, name);
  }
  static void Setxattr(fuse_req_t req, fuse_ino_t ino, const char*, const char*,
                       size_t, int) {
    Self(req)->ReplyReadOnly(req, "setxattr", ino);
  }
  static void Removexattr(fuse_req_t req, fuse_ino_t ino, const char*) {
    Self(req)->ReplyReadOnly(req, "removexattr", ino);
  }
  static void Fallocate(fuse_req_t req, fuse_ino_t ino, int, off_t, off_t,
                        fuse_file_info*) {
    Self(req)->ReplyReadOnly(req, "fallocate", ino);
  }

  static fuse_lowlevel_ops Ops() {
    fuse_lowlevel_ops ops{};
    ops.init = &Init;
    ops.lookup = &Lookup;
    ops.forget = &Forget;
    ops.forget_multi = &ForgetMulti;
    ops.getattr = &Getattr;
    ops.opendir = &Opendir;
    ops.readdir = &Readdir;
    ops.readdirplus = &Readdirplus;
    ops.releasedir = &Releasedir;
    ops.open = &Open;
    ops.read = &Read;
    ops.release = &Release;
    ops.statfs = &Statfs;
    ops.getxattr = &Getxattr;
    ops.listxattr = &Listxattr;
    ops.setattr = &Setattr;
    ops.mknod = &Mknod;
    ops.mkdir = &Mkdir;
    ops.unlink = &Unlink;
    ops.rmdir = &Rmdir;
    ops.symlink = &Symlink;
    ops.rename = &Rename;
    ops.link = &Link;
    ops.write = &Write;
    ops.create = &Create;
    ops.setxattr = &Setxattr;
    ops.removexattr = &Removexattr;
    ops.fallocate = &Fallocate;
    return ops;
  }

  absl::Status CheckMountpoint();
  void TuneReadahead() const;

  // --- the kernel channel ---------------------------------------------------
  // libfuse 3.14 speaks FUSE 7.38 and derives the largest request from
  // max_write (1 MiB). Two newer kernel features are switched on by amending
  // its INIT reply on the way to the kernel, when the kernel offers them:
  // max_pages up to max_read (requests of up to 4 MiB, one round trip per
  // block instead of four; the kernel bounds it by fs.fuse.max_pages_limit),
  // and FUSE_DIRECT_IO_ALLOW_MMAP (kernel 6.6+), so files opened with
  // direct_io can still be mmap'ed shared (numpy.memmap, LMDB).
  static constexpr uint64_t kDirectIoAllowMmap = 1ull << 36;
  static ssize_t ChannelRead(int fd, void* buf, size_t len, void* self);
  static ssize_t ChannelWritev(int fd, struct iovec* iov, int count,
                               void* self);
  static ssize_t ChannelSplice(int fdin, off_t* offin, int fdout, off_t* offout,
                               size_t len, unsigned flags, void* self);
  // --- passthrough ------------------------------------------------------
  // A large file (direct_io) whose every block the worker on this node holds
  // in RAM as one memfd is registered with the kernel as the backing file of
  // its inode: reads and mmap go from the worker's memory to the reader,
  // with no request to this daemon (fuse_read_bench, warm 1 GiB shard:
  // 65-66% of the page-cache ceiling, against 24-31% through the daemon;
  // rounds after the worker's 2 MiB collapse up to 90%). The kernel requires
  // every open of an inode with a backing file to use that same file, and none
  // while the inode is in page-cache mode (a direct_io file mmap'ed), so
  // the daemon keeps one backing per inode, counted by opens, and only sets
  // one up when no other open of the inode reads through it.
  // Every open: the backing id to reply with, or 0 to read through the
  // daemon (passthrough is tried for `large`, direct_io, files only).
  // Errors: FailedPrecondition (the inode is open by passthrough for
  // another version of the object: the kernel would serve that one's
  // bytes).
  absl::StatusOr<int> AttachFile(OpenFile& f, int open_flags, bool large);
  void DetachFile(const OpenFile& f);
  std::atomic<bool> passthrough_{false};  // Negotiated at INIT.

  // Only where the kernel lets direct_io files be mmap'ed shared (6.6+):
  // before that, MAP_SHARED of them fails with ENODEV.
  bool UseDirectIo(uint64_t size) const {
    return size >= options_.direct_io_min_size && direct_io_mmap_;
  }

  std::atomic<uint64_t> init_unique_{0};
  std::atomic<uint64_t> kernel_init_flags_{0};
  std::atomic<bool> direct_io_mmap_{false};

  const FuseOptions options_;
  const std::unique_ptr<Client> client_;
  const std::shared_ptr<prometheus::Registry> registry_;
  FuseMetrics metrics_;
  InodeTable inodes_;
  const uid_t uid_ = ::getuid();
  const gid_t gid_ = ::getgid();
  const absl::Time start_time_ = absl::Now();
  std::string resolved_mountpoint_;
  std::once_flag tuned_;

  // --- invalidations, passed on to the kernel ------------------------------
  // Paths the master invalidated (the client's hook) go to the kernel from a
  // thread of their own: a FUSE handler must not send entry notifications
  // itself (the kernel may hold the directory's lock for that very request).
  // For every inode at or below the path: its attributes and pages
  // (notify_inval_inode), and its name (notify_inval_entry), so the next
  // access asks this daemon, whose metadata cache asks the master.
  void KernelInvalidations();
  void InvalidateInKernel(const std::string& path);
  bool NotifyReady() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(notify_mu_) {
    return notify_stop_ || !notify_queue_.empty();
  }
  absl::Mutex notify_mu_;
  std::deque<std::string> notify_queue_ ABSL_GUARDED_BY(notify_mu_);
  bool notify_stop_ ABSL_GUARDED_BY(notify_mu_) = false;
  std::thread notifier_;
  fuse_session* session_ = nullptr;
  bool mounted_ = false;
  std::unique_ptr<OpsServer> ops_;
};

absl::Status FuseMount::Fs::CheckMountpoint() {
  const std::string& mp = options_.mountpoint;
  if (mp.empty()) return absl::InvalidArgumentError("no mount point given");
  struct stat st {};
  if (::stat(mp.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT)
      return absl::NotFoundError(absl::StrCat(
          "mount point ", mp, " does not exist (create it with mkdir)"));
    if (err == ENOTCONN)
      return absl::FailedPreconditionError(absl::StrCat(
          "mount point ", mp,
          " is a dead FUSE mount (Transport endpoint is not connected); "
          "clear it with `fusermount3 -u ",
          mp, "`"));
    return absl::InvalidArgumentError(
        absl::StrCat("mount point ", mp, ": ", std::strerror(err)));
  }
  if (!S_ISDIR(st.st_mode))
    return absl::InvalidArgumentError(
        absl::StrCat("mount point ", mp, " is not a directory"));
  // Busy: something is mounted there already.
  char resolved[PATH_MAX];
  if (::realpath(mp.c_str(), resolved) == nullptr)
    return absl::InvalidArgumentError(
        absl::StrCat("mount point ", mp, ": ", std::strerror(errno)));
  resolved_mountpoint_ = resolved;
  if (std::optional<MountInfo> m = FindMount(resolved_mountpoint_);
      m && resolved_mountpoint_ != "/") {
    return absl::FailedPreconditionError(absl::StrCat(
        "mount point ", mp, " is busy: ", m->source, " (", m->type,
        ") is mounted there; unmount it first (fusermount3 -u ", mp, ")"));
  }
  return absl::OkStatus();
}

// The kernel's readahead window for a FUSE mount defaults to 128 KiB; a
// sequential reader of a cache that answers in large blocks wants more. (The
// mount is not served yet: nothing here may touch the mount point itself.)
void FuseMount::Fs::TuneReadahead() const {
  if (options_.read_ahead == 0) return;
  std::optional<MountInfo> m = FindMount(resolved_mountpoint_);
  if (!m) return;
  const std::string file =
      absl::StrCat("/sys/class/bdi/", m->device, "/read_ahead_kb");
  std::ofstream out(file);
  out << options_.read_ahead / 1024;
  out.flush();
  if (!out) {
    LARDER_LOG(INFO, "fuse.readahead_untuned")
        .Field("file", file)
        .Field("reason", "not writable (not root?)");
  }
}

// Replies are spliced from the workers' memfds into the kernel through a
// pipe that must hold a whole reply (max_read plus headers); libfuse falls
// back to copying when the pipe cannot grow that far, which the kernel
// limits by fs.pipe-max-size (1 MiB by default).
static void RaisePipeMaxSize(uint64_t max_read) {
  // The kernel rounds a pipe's size up to a power of two pages.
  uint64_t need = 4096;
  while (need < max_read + 4096) need *= 2;
  uint64_t have = 0;
  std::ifstream("/proc/sys/fs/pipe-max-size") >> have;
  if (have >= need) return;
  std::ofstream out("/proc/sys/fs/pipe-max-size");
  out << need;
  out.flush();
  if (!out) {
    LARDER_LOG(WARNING, "fuse.no_splice")
        .Field("pipe_max_size", have)
        .Field("hint",
               absl::StrCat("reads are copied through the daemon; allow "
                            "zero-copy splice with `sysctl fs.pipe-max-size=",
                            need, "` (or a smaller --max_read)"));
  }
}

// Requests larger than 1 MiB need fs.fuse.max_pages_limit (kernel 6.13+;
// fixed at 256 pages before) raised before the mount; the kernel applies it
// to connections made afterwards. Raising it changes no other mount: each
// asks for its own max_pages.
static void RaiseMaxPagesLimit(uint64_t max_read) {
  const uint64_t pages = (max_read + 4095) / 4096;
  if (pages <= 256) return;
  const char* file = "/proc/sys/fs/fuse/max_pages_limit";
  uint64_t have = 0;
  if (!(std::ifstream(file) >> have)) {
    LARDER_LOG(INFO, "fuse.max_pages_fixed")
        .Field("max_read", max_read)
        .Field("reason", "this kernel caps requests at 1 MiB");
    return;
  }
  if (have >= pages) return;
  std::ofstream out(file);
  out << pages;
  out.flush();
  if (!out) {
    LARDER_LOG(WARNING, "fuse.max_pages_limited")
        .Field("max_pages_limit", have)
        .Field("hint", absl::StrCat("requests stay at ", have * 4,
                                    " KiB; allow larger ones with `sysctl "
                                    "fs.fuse.max_pages_limit=",
                                    pages, "`"));
  }
}

absl::StatusOr<int> FuseMount::Fs::AttachFile(OpenFile& f, int open_flags,
                                              bool large) {
  const FileInfo& info = f.file->info();
  Inode& inode = *f.inode;
  absl::MutexLock lock(&inode.mu);
  if (inode.backing_id > 0) {
    if (inode.backing_version != info.version) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the file changed while open for passthrough reads of version ",
          inode.backing_version,
          "; open it again once those readers closed it"));
    }
    ++inode.backing_opens;
    f.passthrough = true;
    metrics_.passthrough_opens->Increment();
    return inode.backing_id;
  }
  // O_DIRECT cannot be passed on: memfds do not take it.
  if (passthrough_ && (open_flags & O_DIRECT) == 0 && large &&
      inode.daemon_opens == 0) {
    absl::StatusOr<LocalSlice> object = f.file->OpenLocalObject();
    if (object.ok()) {
      BackingMap map{object->fd, 0, 0};
      const int id = ::ioctl(fuse_session_fd(session_), kBackingOpen, &map);
      if (id > 0) {
        inode.backing_id = id;
        inode.backing_version = info.version;
        inode.backing_opens = 1;
        inode.backing_object = *std::move(object);
        f.passthrough = true;
        metrics_.passthrough_opens->Increment();
        return id;
      }
      // Not root (CAP_SYS_ADMIN), or the kernel refuses: stop asking.
      LARDER_LOG(WARNING, "fuse.passthrough_off")
          .Field("error", std::strerror(errno))
          .Field("effect", "large files are read through the daemon");
      passthrough_ = false;
    } else {
      LARDER_LOG(DEBUG, "fuse.no_passthrough")
          .Field("path", info.path)
          .Field("why", object.status());
    }
  }
  ++inode.daemon_opens;
  f.counted = true;
  return 0;
}

void FuseMount::Fs::DetachFile(const OpenFile& f) {
  Inode& inode = *f.inode;
  absl::MutexLock lock(&inode.mu);
  if (f.passthrough) {
    if (inode.backing_id == 0 || --inode.backing_opens > 0) return;
    uint32_t id = static_cast<uint32_t>(inode.backing_id);
    if (::ioctl(fuse_session_fd(session_), kBackingClose, &id) != 0) {
      LARDER_LOG(WARNING, "fuse.backing_close")
          .Field("path", f.file->info().path)
          .Field("error", std::strerror(errno));
    }
    inode.backing_id = 0;
    inode.backing_object = LocalSlice{};  // Gives the worker's lease back.
  } else if (f.counted) {
    --inode.daemon_opens;
  }
}

void FuseMount::Fs::KernelInvalidations() {
  while (true) {
    std::string path;
    {
      absl::MutexLock lock(&notify_mu_,
                           absl::Condition(this, &Fs::NotifyReady));
      if (notify_stop_) return;
      path = std::move(notify_queue_.front());
      notify_queue_.pop_front();
    }
    InvalidateInKernel(path);
  }
}

void FuseMount::Fs::InvalidateInKernel(const std::string& path) {
  auto drop_name = [&](const std::string& p) {
    if (p == "/") return;
    const uint64_t parent = inodes_.Find(ParentClusterPath(p));
    if (parent == 0) return;
    const std::string name = p.substr(p.rfind('/') + 1);
    // -ENOENT when the kernel holds no such name: nothing to drop.
    fuse_lowlevel_notify_inval_entry(session_, parent, name.c_str(),
                                     name.size());
  };
  std::vector<std::pair<uint64_t, std::string>> inodes = inodes_.Under(path);
  for (const auto& [ino, p] : inodes) {
    fuse_lowlevel_notify_inval_inode(session_, ino, 0, 0);
    drop_name(p);
  }
  // A name the kernel remembers as missing has no inode.
  if (inodes.empty()) drop_name(path);
  LARDER_LOG(DEBUG, "fuse.kernel_invalidated")
      .Field("path", path)
      .Field("inodes", inodes.size());
}

ssize_t FuseMount::Fs::ChannelRead(int fd, void* buf, size_t len, void* self) {
  const ssize_t n = ::read(fd, buf, len);
  if (n >= static_cast<ssize_t>(sizeof(fuse_in_header) + sizeof(fuse_init_in) -
                                sizeof(fuse_init_in::unused))) {
    const auto* in = static_cast<const fuse_in_header*>(buf);
    if (in->opcode == FUSE_INIT) {
      const auto* init = reinterpret_cast<const fuse_init_in*>(in + 1);
      uint64_t flags = init->flags;
      if (flags & FUSE_INIT_EXT) flags |= uint64_t{init->flags2} << 32;
      Fs* fs = static_cast<Fs*>(self);
      fs->kernel_init_flags_ = flags;
      fs->init_unique_ = in->unique;
    }
  }
  return n;
}

ssize_t FuseMount::Fs::ChannelWritev(int fd, struct iovec* iov, int count,
                                     void* self) {
  Fs* fs = static_cast<Fs*>(self);
  const auto* out = static_cast<const fuse_out_header*>(iov[0].iov_base);
  if (tls_open_backing != 0 && out->error == 0 && count == 2 &&
      iov[1].iov_len == sizeof(fuse_open_out)) {
    // An open reply for passthrough: FOPEN_PASSTHROUGH and the backing id
    // (which takes the place of 7.38's padding).
    fuse_open_out reply;
    std::memcpy(&reply, iov[1].iov_base, sizeof(reply));
    reply.open_flags |= kOpenPassthrough;
    reply.padding = static_cast<uint32_t>(tls_open_backing);
    tls_open_backing = 0;
    iovec amended[2] = {iov[0], {&reply, sizeof(reply)}};
    return ::writev(fd, amended, 2);
  }
  const uint64_t init = fs->init_unique_.load(std::memory_order_relaxed);
  if (init == 0 || out->unique != init || out->error != 0 || count != 2 ||
      iov[1].iov_len < offsetof(fuse_init_out, unused))
    return ::writev(fd, iov, count);
  // The INIT reply: amend a copy of libfuse's.
  fs->init_unique_ = 0;
  fuse_init_out reply{};
  std::memcpy(&reply, iov[1].iov_base, std::min(iov[1].iov_len, sizeof(reply)));
  const uint64_t offered = fs->kernel_init_flags_;
  if (offered & FUSE_MAX_PAGES) {
    const uint32_t pages = static_cast<uint32_t>(
        std::min<uint64_t>((fs->options_.max_read + 4095) / 4096, 65535));
    reply.flags |= FUSE_MAX_PAGES;
    reply.max_pages =
        static_cast<uint16_t>(std::max<uint32_t>(pages, reply.max_pages));
  }
  if ((offered & kDirectIoAllowMmap) && (offered & FUSE_INIT_EXT)) {
    reply.flags |= FUSE_INIT_EXT;
    reply.flags2 |= static_cast<uint32_t>(kDirectIoAllowMmap >> 32);
    fs->direct_io_mmap_ = true;
  }
  // Passthrough needs max_stack_depth (7.40, the first unused word): the
  // backing memfds sit on no stacked file system, so 1.
  if (fs->options_.passthrough && (offered & kInitPassthrough) &&
      (offered & FUSE_INIT_EXT) && !(reply.flags & FUSE_WRITEBACK_CACHE) &&
      iov[1].iov_len > offsetof(fuse_init_out, unused)) {
    reply.flags |= FUSE_INIT_EXT;
    reply.flags2 |= static_cast<uint32_t>(kInitPassthrough >> 32);
    reply.unused[0] = 1;
    fs->passthrough_ = true;
  }
  LARDER_LOG(INFO, "fuse.init_reply")
      .Field("max_pages", reply.max_pages)
      .Field("direct_io_mmap", fs->direct_io_mmap_.load())
      .Field("passthrough", fs->passthrough_.load());
  iovec amended[2] = {iov[0], {&reply, iov[1].iov_len}};
  return ::writev(fd, amended, 2);
}

ssize_t FuseMount::Fs::ChannelSplice(int fdin, off_t* offin, int fdout,
                                     off_t* offout, size_t len, unsigned flags,
                                     void*) {
  return ::splice(fdin, offin, fdout, offout, len, flags);
}

absl::Status FuseMount::Fs::Mount() {
  LARDER_RETURN_IF_ERROR(CheckMountpoint());
  RaisePipeMaxSize(options_.max_read);
  RaiseMaxPagesLimit(options_.max_read);
  std::string opts =
      absl::StrCat("fsname=larder,subtype=larder,default_permissions,max_read=",
                   options_.max_read);
  if (options_.allow_other) opts += ",allow_other";
  if (options_.auto_unmount) opts += ",auto_unmount";
  std::vector<std::string> argv = {"larder-fuse", "-o", opts};
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(cargv.size()), cargv.data());
  static const fuse_lowlevel_ops ops = Ops();
  session_ = fuse_session_new(&args, &ops, sizeof(ops), this);
  fuse_opt_free_args(&args);
  if (session_ == nullptr)
    return absl::InvalidArgumentError(
        absl::StrCat("libfuse rejected the mount options '", opts, "'"));
  if (fuse_session_mount(session_, options_.mountpoint.c_str()) != 0) {
    return absl::InternalError(absl::StrCat(
        "cannot mount FUSE at ", options_.mountpoint,
        " (is /dev/fuse there and fusermount3 installed? see the log above)"));
  }
  mounted_ = true;
  notifier_ = std::thread([this] { KernelInvalidations(); });
  client_->SetInvalidationHook([this](const std::string& path) {
    absl::MutexLock lock(&notify_mu_);
    notify_queue_.push_back(path);
  });
  static const fuse_custom_io channel = {&ChannelWritev, &ChannelRead, nullptr,
                                         &ChannelSplice};
  if (fuse_session_custom_io(session_, &channel, fuse_session_fd(session_)) !=
      0)
    return absl::InternalError("cannot attach the FUSE channel");
  if (!options_.ops_listen.empty()) {
    OpsServer::Options o;
    o.listen = options_.ops_listen;
    o.registry = registry_;
    o.before_scrape = [this] { metrics_.Update(client_->stats()); };
    LARDER_ASSIGN_OR_RETURN(ops_, OpsServer::Start(std::move(o)));
  }
  LARDER_LOG(INFO, "fuse.mounted")
      .Field("mountpoint", options_.mountpoint)
      .Field("max_read", options_.max_read)
      .Field("keep_cache", options_.keep_cache)
      .Field("direct_io_min_size", options_.direct_io_min_size)
      .Field("attr_timeout", options_.attr_timeout);
  return absl::OkStatus();
}

absl::Status FuseMount::Fs::Serve() {
  if (fuse_set_signal_handlers(session_) != 0)
    return absl::InternalError("cannot install signal handlers");
  sigset_t signals;
  sigemptyset(&signals);
  for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&signals, s);
  pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);

  fuse_loop_config* config = fuse_loop_cfg_create();
  fuse_loop_cfg_set_clone_fd(config, 1);
  fuse_loop_cfg_set_max_threads(config,
                                static_cast<unsigned>(options_.max_threads));
  // Threads stay: creating one per burst of requests costs more than it
  // saves.
  fuse_loop_cfg_set_idle_threads(config,
                                 static_cast<unsigned>(options_.max_threads));
  const int rc = fuse_session_loop_mt(session_, config);
  fuse_loop_cfg_destroy(config);

  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  fuse_remove_signal_handlers(session_);
  fuse_session_unmount(session_);
  mounted_ = false;
  LARDER_LOG(INFO, "fuse.unmounted")
      .Field("mountpoint", options_.mountpoint)
      .Field("exit", rc);
  // rc > 0 is the signal that ended the loop: a clean stop.
  if (rc < 0)
    return absl::InternalError(
        absl::StrCat("FUSE session ended with error ", std::strerror(-rc)));
  return absl::OkStatus();
}

FuseMount::FuseMount(std::unique_ptr<Fs> fs) : fs_(std::move(fs)) {}
FuseMount::~FuseMount() = default;

absl::StatusOr<std::unique_ptr<FuseMount>> FuseMount::Mount(
    FuseOptions options, std::unique_ptr<Client> client) {
  if (client == nullptr) return absl::InvalidArgumentError("no client");
  if (options.max_read < 4096 || options.max_read > (16u << 20))
    return absl::InvalidArgumentError(absl::StrCat(
        "max_read ", options.max_read, " out of range (4 KiB to 16 MiB)"));
  auto fs = std::make_unique<Fs>(std::move(options), std::move(client));
  LARDER_RETURN_IF_ERROR(fs->Mount());
  return std::unique_ptr<FuseMount>(new FuseMount(std::move(fs)));
}

absl::Status FuseMount::Serve() { return fs_->Serve(); }
int FuseMount::ops_port() const { return fs_->ops_port(); }

}  // namespace larder
