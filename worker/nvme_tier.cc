// Copyright 2026 The Larder Authors.
#include "worker/nvme_tier.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace larder {
namespace {

constexpr char kMagic[8] = {'L', 'R', 'D', 'R', 'B', 'L', 'K', '1'};
constexpr uint32_t kFormat = 1;
constexpr size_t kFixedHeader = 104;
constexpr size_t kHeaderChecksumAt = 96;
constexpr size_t kAlign = 4096;

template <typename T>
void Put(std::string& buf, size_t at, T v) {
  std::memcpy(&buf[at], &v, sizeof(v));
}
template <typename T>
T Get(absl::string_view buf, size_t at) {
  T v;
  std::memcpy(&v, buf.data() + at, sizeof(v));
  return v;
}

uint64_t DataChecksum(absl::string_view data) {
  return XXH3_64bits(data.data(), data.size());
}

std::string EncodeHeader(const Block& block) {
  const BlockId& id = block.id();
  const size_t strings = id.mount.size() + id.path.size() + id.version.size();
  const size_t size = (kFixedHeader + strings + kAlign - 1) / kAlign * kAlign;
  std::string h(size, '\0');
  std::memcpy(&h[0], kMagic, 8);
  Put<uint32_t>(h, 8, kFormat);
  Put<uint32_t>(h, 12, static_cast<uint32_t>(size));
  Put<uint64_t>(h, 16, block.key().low);
  Put<uint64_t>(h, 24, block.key().high);
  Put<uint64_t>(h, 32, block.length());
  Put<uint64_t>(h, 40, DataChecksum(block.data()));
  Put<int64_t>(h, 48, absl::ToUnixNanos(absl::Now()));
  Put<uint64_t>(h, 56, id.index);
  Put<uint64_t>(h, 64, id.block_size);
  Put<uint64_t>(h, 72, id.object_size);
  Put<uint32_t>(h, 80, static_cast<uint32_t>(id.mount.size()));
  Put<uint32_t>(h, 84, static_cast<uint32_t>(id.path.size()));
  Put<uint32_t>(h, 88, static_cast<uint32_t>(id.version.size()));
  size_t at = kFixedHeader;
  for (const std::string* s : {&id.mount, &id.path, &id.version}) {
    std::memcpy(&h[at], s->data(), s->size());
    at += s->size();
  }
  Put<uint64_t>(h, kHeaderChecksumAt, XXH3_64bits(h.data(), h.size()));
  return h;
}

struct Header {
  BlockKey key;
  BlockId id;
  uint64_t length = 0;
  uint64_t checksum = 0;
  uint32_t size = 0;
};

// Reads and validates the header of an open block file.
absl::StatusOr<Header> ReadHeader(int fd, const std::string& path) {
  std::string buf(kAlign, '\0');
  ssize_t n = ::pread(fd, buf.data(), buf.size(), 0);
  if (n < static_cast<ssize_t>(kFixedHeader) ||
      std::memcmp(buf.data(), kMagic, 8) != 0) {
    return absl::DataLossError(
        absl::StrCat(path, ": not a block file (bad magic or short)"));
  }
  Header h;
  h.size = Get<uint32_t>(buf, 12);
  if (Get<uint32_t>(buf, 8) != kFormat || h.size < kAlign ||
      h.size % kAlign != 0 || h.size > (1u << 20)) {
    return absl::DataLossError(absl::StrCat(path, ": unsupported header"));
  }
  if (h.size > buf.size()) {
    buf.resize(h.size);
    if (::pread(fd, buf.data(), buf.size(), 0) !=
        static_cast<ssize_t>(buf.size())) {
      return absl::DataLossError(absl::StrCat(path, ": short header"));
    }
  }
  const uint64_t stored = Get<uint64_t>(buf, kHeaderChecksumAt);
  Put<uint64_t>(buf, kHeaderChecksumAt, 0);
  if (XXH3_64bits(buf.data(), buf.size()) != stored) {
    return absl::DataLossError(
        absl::StrCat(path, ": header checksum mismatch"));
  }
  h.key = {Get<uint64_t>(buf, 16), Get<uint64_t>(buf, 24)};
  h.length = Get<uint64_t>(buf, 32);
  h.checksum = Get<uint64_t>(buf, 40);
  h.id.index = Get<uint64_t>(buf, 56);
  h.id.block_size = Get<uint64_t>(buf, 64);
  h.id.object_size = Get<uint64_t>(buf, 72);
  const uint32_t lens[3] = {Get<uint32_t>(buf, 80), Get<uint32_t>(buf, 84),
                            Get<uint32_t>(buf, 88)};
  if (kFixedHeader + uint64_t{lens[0]} + lens[1] + lens[2] > h.size) {
    return absl::DataLossError(
        absl::StrCat(path, ": bad header string lengths"));
  }
  size_t at = kFixedHeader;
  std::string* out[3] = {&h.id.mount, &h.id.path, &h.id.version};
  for (int i = 0; i < 3; ++i) {
    out[i]->assign(buf.data() + at, lens[i]);
    at += lens[i];
  }
  if (h.id.Key() != h.key || h.id.length() != h.length) {
    return absl::DataLossError(
        absl::StrCat(path, ": header identity does not match its key"));
  }
  return h;
}

absl::Status WriteFully(int fd, absl::string_view data, uint64_t offset) {
  while (!data.empty()) {
    ssize_t n =
        ::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(std::strerror(errno));
    }
    data.remove_prefix(static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

// Makes `path` a directory that only the worker may enter: created 0700
// (its missing parents with the default mode), or, if it exists, owned by
// the worker and left to no one else. Block files name the mount and path of
// what they hold, and hold the bytes of mounts that the OS or a mount's mode
// denies to most users: nobody but the worker (root) may read them.
// Errors: PermissionDenied (cannot create it; it belongs to another user;
// others may write to it, where they could plant or swap block files).
absl::Status PrivateDirectory(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path parent =
      std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::PermissionDeniedError(absl::StrCat(
        "cannot create NVMe directory ", path, ": ", std::strerror(errno)));
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::PermissionDeniedError(
        absl::StrCat("NVMe directory ", path, " is not a directory"));
  }
  if (st.st_uid != ::geteuid()) {
    return absl::PermissionDeniedError(
        absl::StrCat("NVMe directory ", path, " belongs to uid ", st.st_uid,
                     ", not to the worker's uid ", ::geteuid(),
                     ": give the worker a directory of its own"));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "NVMe directory %s is writable by others (mode %04o): others could "
        "plant or swap cached blocks; run chmod go-w on it",
        path, st.st_mode & 07777));
  }
  return absl::OkStatus();
}

// Directories that the worker made under a cache directory: 0700, also when
// an older worker made them with the default mode.
absl::Status WorkerOnlyDirectory(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  if (::chmod(path.c_str(), 0700) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot restrict ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

uint64_t FreeBytes(const std::string& path) {
  struct statvfs s;
  if (::statvfs(path.c_str(), &s) != 0) return 0;
  return static_cast<uint64_t>(s.f_bavail) * s.f_frsize;
}

}  // namespace

absl::StatusOr<std::unique_ptr<NvmeTier>> NvmeTier::Open(
    NvmeOptions options, const CacheRules* rules) {
  if (options.dirs.empty())
    return absl::InvalidArgumentError("NVMe tier without directories");
  std::unique_ptr<NvmeTier> tier(new NvmeTier(options, rules));
  absl::MutexLock lock(&tier->mu_);
  for (const NvmeDirOptions& d : options.dirs) {
    if (d.capacity_bytes == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("NVMe directory ", d.path, " has no capacity"));
    }
    std::error_code ec;
    LARDER_RETURN_IF_ERROR(PrivateDirectory(d.path));
    LARDER_RETURN_IF_ERROR(WorkerOnlyDirectory(d.path + "/tmp"));
    LARDER_RETURN_IF_ERROR(WorkerOnlyDirectory(d.path + "/blocks"));
    // Half-written files of a previous life.
    for (const auto& e :
         std::filesystem::directory_iterator(d.path + "/tmp", ec)) {
      std::filesystem::remove(e.path(), ec);
    }
    tier->dirs_.push_back(
        std::make_unique<Dir>(d.path, d.capacity_bytes, options.policy));
  }
  for (int i = 0; i < static_cast<int>(tier->dirs_.size()); ++i) {
    LARDER_RETURN_IF_ERROR(tier->Rebuild(i));
  }
  return tier;
}

absl::Status NvmeTier::Rebuild(int dir) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  Dir& d = *dirs_[dir];
  struct Found {
    absl::Time mtime;
    std::string path;
    Header header;
    uint64_t size;
  };
  std::vector<Found> found;
  std::error_code ec;
  for (const auto& sub :
       std::filesystem::directory_iterator(d.path + "/blocks", ec)) {
    // Made 0755 by workers before block files were private.
    ::chmod(sub.path().c_str(), 0700);
    for (const auto& f : std::filesystem::directory_iterator(sub.path(), ec)) {
      const std::string path = f.path().string();
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
      if (fd < 0) continue;
      struct stat st;
      absl::StatusOr<Header> h = ReadHeader(fd, path);
      if (h.ok() && ::fstat(fd, &st) == 0 && (st.st_mode & 077) != 0)
        ::fchmod(fd, 0600);
      bool ok = h.ok() && ::fstat(fd, &st) == 0 &&
                static_cast<uint64_t>(st.st_size) == h->size + h->length &&
                f.path().filename().string() == h->key.ToHex() + ".blk";
      ::close(fd);
      if (!ok) {
        LARDER_LOG(WARNING, "nvme.rebuild.drop")
            .Field("path", path)
            .Field("why", h.ok() ? std::string("size or name mismatch")
                                 : h.status().ToString());
        std::filesystem::remove(path, ec);
        ++dropped_;
        continue;
      }
      found.push_back({absl::TimeFromTimespec(st.st_mtim), path, std::move(*h),
                       static_cast<uint64_t>(st.st_size)});
    }
  }
  if (ec)
    return absl::InternalError(
        absl::StrCat("cannot scan ", d.path, ": ", ec.message()));
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return a.mtime < b.mtime; });
  const absl::Time now = absl::Now();
  for (Found& f : found) {
    std::vector<FileInfo> evicted;
    const BlockKey key = f.header.key;
    if (where_.contains(key)) {  // Same block in two directories: keep one.
      std::filesystem::remove(f.path, ec);
      continue;
    }
    bool pinned = rules_ && rules_->Pinned(f.header.id);
    absl::Duration ttl =
        rules_ ? rules_->Ttl(f.header.id) : absl::InfiniteDuration();
    if (!d.index.Admit(key, FileInfo{dir, f.header.id}, f.size, pinned, ttl,
                       now, &evicted)) {
      std::filesystem::remove(f.path, ec);  // Capacity shrank since.
      ++dropped_;
      continue;
    }
    where_[key] = dir;
    ++rebuilt_;
    for (const FileInfo& v : evicted) {
      where_.erase(v.id.Key());
      std::filesystem::remove(BlockPath(dir, v.id.Key()), ec);
      ++dropped_;
    }
  }
  LARDER_LOG(INFO, "nvme.rebuild")
      .Field("dir", d.path)
      .Field("blocks", d.index.size())
      .Field("bytes", d.index.used());
  return absl::OkStatus();
}

std::string NvmeTier::BlockPath(int dir, const BlockKey& key) const
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  const std::string hex = key.ToHex();
  return absl::StrCat(dirs_[dir]->path, "/blocks/", hex.substr(0, 2), "/", hex,
                      ".blk");
}

bool NvmeTier::Contains(const BlockKey& key) {
  absl::MutexLock lock(&mu_);
  return where_.contains(key) && !writing_.contains(key);
}

void NvmeTier::DeleteFiles(const std::vector<FileInfo>& victims) {
  for (const FileInfo& v : victims) {
    std::string path;
    {
      absl::MutexLock lock(&mu_);
      path = BlockPath(v.dir, v.id.Key());
    }
    ::unlink(path.c_str());
  }
}

void NvmeTier::Degrade(int dir, absl::string_view why) {
  dirs_[dir]->degraded_until = absl::Now() + absl::Seconds(30);
  LARDER_LOG(WARNING, "nvme.degraded")
      .Field("dir", dirs_[dir]->path)
      .Field("why", why)
      .Field("retry_in", absl::Seconds(30));
}

absl::StatusOr<std::shared_ptr<const Block>> NvmeTier::Read(
    const BlockId& id, std::shared_ptr<const ObjectFile> object) {
  const BlockKey key = id.Key();
  std::string path;
  bool expired = false;
  Dir* dir = nullptr;  // Directories live as long as the tier.
  {
    absl::MutexLock lock(&mu_);
    auto it = where_.find(key);
    if (it == where_.end()) return absl::NotFoundError("not in the NVMe tier");
    if (writing_.contains(key))
      return absl::NotFoundError("still being written to the NVMe tier");
    path = BlockPath(it->second, key);
    dir = dirs_[it->second].get();
    if (dirs_[it->second]->index.Find(key, absl::Now()) ==
        nullptr) {  // Past its TTL.
      where_.erase(it);
      removed_.push_back(key);
      expired = true;
    }
  }
  if (expired) {
    ::unlink(path.c_str());
    return absl::NotFoundError("expired in the NVMe tier");
  }
  auto drop = [&](absl::Status why) -> absl::Status {
    {
      absl::MutexLock lock(&mu_);
      if (auto it = where_.find(key); it != where_.end()) {
        dirs_[it->second]->index.Erase(key);
        where_.erase(it);
        removed_.push_back(key);
      }
    }
    ::unlink(path.c_str());
    if (why.code() == absl::StatusCode::kDataLoss) {
      checksum_failures_.fetch_add(1, std::memory_order_relaxed);
      LARDER_LOG(ERROR, "nvme.corrupt")
          .Field("block", id.DebugString())
          .Field("status", why);
    }
    return why;
  };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT)
      return drop(absl::NotFoundError("block file vanished"));
    return absl::UnavailableError(
        absl::StrCat("open ", path, ": ", std::strerror(errno)));
  }
  absl::StatusOr<Header> h = ReadHeader(fd, path);
  if (!h.ok()) {
    ::close(fd);
    return drop(h.status());
  }
  if (h->key != key) {
    ::close(fd);
    return drop(
        absl::DataLossError(absl::StrCat(path, ": holds another block")));
  }
  // The file is sound, but the request describes another object (size):
  // refuse the request, keep the file.
  if (absl::Status same = CheckSameBlock(h->id, id); !same.ok()) {
    ::close(fd);
    return same;
  }
  absl::StatusOr<BlockWriter> w = BlockWriter::Create(id, std::move(object));
  if (!w.ok()) {
    ::close(fd);
    return w.status();
  }
  absl::Span<char> buf = w->buffer();
  size_t done = 0;
  while (done < buf.size()) {
    ssize_t n = ::pread(fd, buf.data() + done, buf.size() - done,
                        static_cast<off_t>(h->size + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  if (done != buf.size())
    return drop(
        absl::DataLossError(absl::StrCat(path, ": truncated block file")));
  if (DataChecksum(absl::string_view(buf.data(), buf.size())) != h->checksum) {
    return drop(
        absl::DataLossError(absl::StrCat(path, ": data checksum mismatch")));
  }
  dir->hits.fetch_add(1, std::memory_order_relaxed);
  return std::move(*w).Finish();
}

absl::Status NvmeTier::Write(const Block& block, absl::Duration protect) {
  const BlockKey key = block.key();
  const std::string header = EncodeHeader(block);
  const uint64_t size = header.size() + block.length();
  const bool pinned = rules_ && rules_->Pinned(block.id());
  const absl::Duration ttl =
      rules_ ? rules_->Ttl(block.id()) : absl::InfiniteDuration();
  int dir = -1;
  uint64_t token = 0;
  std::vector<FileInfo> evicted;
  std::string path, tmp;
  {
    absl::MutexLock lock(&mu_);
    if (where_.contains(key)) return absl::OkStatus();
    const absl::Time now = absl::Now();
    const int n = static_cast<int>(dirs_.size());
    for (int i = 0; i < n && dir < 0; ++i) {
      const int d = (next_dir_ + i) % n;
      Dir& dd = *dirs_[d];
      if (dd.degraded_until > now) continue;
      // The reserve: room for this block plus the reserve must remain. Where
      // the disk is fuller than the tier's capacity says (others use it,
      // or the capacity is set above the disk), this directory's own
      // blocks make up the difference, least recent first; only when they
      // cannot is the directory degraded.
      const uint64_t free = FreeBytes(dd.path);
      const uint64_t must_free = free < size + options_.reserve_bytes
                                     ? size + options_.reserve_bytes - free
                                     : 0;
      if (dd.index.Admit(key, FileInfo{d, block.id()}, size, pinned, ttl, now,
                         &evicted, protect, must_free)) {
        dir = d;
      } else if (must_free > 0) {
        Degrade(d, "free space below the reserve");
      }
    }
    if (dir < 0) {
      write_failures_.fetch_add(1, std::memory_order_relaxed);
      return absl::ResourceExhaustedError(
          "no NVMe directory can take the block");
    }
    next_dir_ = (dir + 1) % n;
    where_[key] = dir;
    token = ++next_write_;
    writing_[key] = token;
    for (const FileInfo& v : evicted) {
      where_.erase(v.id.Key());
      writing_.erase(v.id.Key());
      removed_.push_back(v.id.Key());
    }
    path = BlockPath(dir, key);
    tmp = absl::StrCat(dirs_[dir]->path, "/tmp/", key.ToHex(), ".",
                       absl::Uniform<uint32_t>(absl::BitGen()), ".tmp");
  }
  DeleteFiles(evicted);

  absl::Status st;
  // 0600, as created (the mode applies from the first byte, not after a
  // chmod): block files are the worker's alone.
  int fd = ::open(tmp.c_str(),
                  O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  int err = 0;
  if (fd < 0) {
    err = errno;
    st = absl::InternalError(
        absl::StrCat("create ", tmp, ": ", std::strerror(err)));
  } else {
    st = WriteFully(fd, header, 0);
    if (st.ok()) st = WriteFully(fd, block.data(), header.size());
    if (!st.ok()) err = errno;
    if (st.ok() && options_.sync_writes && ::fdatasync(fd) != 0) {
      err = errno;
      st = absl::InternalError(
          absl::StrCat("fdatasync ", tmp, ": ", std::strerror(err)));
    }
    ::close(fd);
  }
  if (st.ok()) {
    const std::string parent =
        std::filesystem::path(path).parent_path().string();
    if (::mkdir(parent.c_str(), 0700) != 0 && errno != EEXIST) {
      err = errno;
      st = absl::InternalError(
          absl::StrCat("mkdir ", parent, ": ", std::strerror(err)));
    }
    if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
      err = errno;
      st = absl::InternalError(
          absl::StrCat("rename ", tmp, ": ", std::strerror(err)));
    }
  }
  absl::MutexLock lock(&mu_);
  auto it = writing_.find(key);
  const bool ours = it != writing_.end() && it->second == token;
  if (ours) writing_.erase(it);
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    write_failures_.fetch_add(1, std::memory_order_relaxed);
    if (ours) {
      dirs_[dir]->index.Erase(key);
      where_.erase(key);
    }
    Degrade(dir, st.message());
    return st;
  }
  // Left the tier while it was written (erased, evicted) and not taken
  // again since, or taken again into another directory: this file is no
  // entry's. Deleted under the lock, so that no new Write of the key into
  // this directory renames its file in between.
  if (!ours) {
    auto now_at = where_.find(key);
    if (now_at == where_.end() || now_at->second != dir) ::unlink(path.c_str());
  }
  return absl::OkStatus();
}

size_t NvmeTier::Erase(const std::vector<BlockKey>& keys) {
  std::vector<FileInfo> victims;
  {
    absl::MutexLock lock(&mu_);
    for (const BlockKey& k : keys) {
      auto it = where_.find(k);
      if (it == where_.end()) continue;
      if (auto v = dirs_[it->second]->index.Erase(k))
        victims.push_back(std::move(*v));
      where_.erase(it);
      writing_.erase(k);
      removed_.push_back(k);
    }
  }
  DeleteFiles(victims);
  return victims.size();
}

size_t NvmeTier::ErasePrefix(absl::string_view prefix) {
  std::vector<FileInfo> victims;
  {
    absl::MutexLock lock(&mu_);
    for (auto& d : dirs_) {
      std::vector<FileInfo> v =
          d->index.EraseIf([&](const BlockKey&, const FileInfo& f) {
            return absl::StartsWith(absl::StrCat(f.id.mount, "/", f.id.path),
                                    prefix);
          });
      for (FileInfo& f : v) {
        where_.erase(f.id.Key());
        writing_.erase(f.id.Key());
        removed_.push_back(f.id.Key());
        victims.push_back(std::move(f));
      }
    }
  }
  DeleteFiles(victims);
  return victims.size();
}

std::vector<BlockKey> NvmeTier::Keys() {
  absl::MutexLock lock(&mu_);
  std::vector<BlockKey> out;
  out.reserve(where_.size());
  for (const auto& [k, d] : where_) {
    if (!writing_.contains(k)) out.push_back(k);
  }
  return out;
}

std::vector<BlockKey> NvmeTier::TakeRemoved() {
  absl::MutexLock lock(&mu_);
  std::vector<BlockKey> out;
  out.swap(removed_);
  return out;
}

NvmeTier::Stats NvmeTier::GetStats() {
  Stats s;
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  for (const auto& d : dirs_) {
    s.dirs.push_back({d->path, d->index.capacity(), d->index.used(),
                      d->index.size(), d->index.evictions(),
                      d->hits.load(std::memory_order_relaxed),
                      d->degraded_until > now});
  }
  s.checksum_failures = checksum_failures_.load();
  s.write_failures = write_failures_.load();
  s.rebuilt_blocks = rebuilt_;
  s.dropped_at_rebuild = dropped_;
  return s;
}

}  // namespace larder
