// Copyright 2026 The Larder Authors.
#include "understore/file_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace larder {
namespace {

absl::Status ErrnoStatus(int err, absl::string_view what,
                         absl::string_view path) {
  std::string msg = absl::StrCat(what, " '", path, "': ", std::strerror(err));
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(msg);
    case EXDEV:
      return absl::PermissionDeniedError(absl::StrCat(
          what, " '", path,
          "': path escapes the under-store root (symlink pointing outside)"));
    case ELOOP:
      return absl::InvalidArgumentError(absl::StrCat(msg, " (symlink loop)"));
    case ENAMETOOLONG:
      return absl::InvalidArgumentError(msg);
    case EIO:
    case ESTALE:
    case ETIMEDOUT:
    case EAGAIN:
    case EINTR:
      return absl::UnavailableError(msg);
    default:
      return absl::InternalError(msg);
  }
}

std::string VersionOf(const struct stat& st) {
  int64_t ns =
      static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return absl::StrCat(ns, "-", static_cast<uint64_t>(st.st_size));
}

ObjectInfo InfoOf(std::string path, const struct stat& st) {
  ObjectInfo info;
  info.path = std::move(path);
  info.is_dir = S_ISDIR(st.st_mode);
  if (!info.is_dir) {
    info.size = static_cast<uint64_t>(st.st_size);
    info.version = VersionOf(st);
  }
  info.mtime = absl::TimeFromTimespec(st.st_mtim);
  info.uid = st.st_uid;
  info.gid = st.st_gid;
  info.mode = st.st_mode & 07777;
  return info;
}

// Whether `st`'s bits grant `peer` the access in `bit` (4 read, 1 search),
// by the owner's, the group's or the others' bits, as the kernel picks them.
bool Grants(const struct stat& st, const PeerCredentials& peer, unsigned bit) {
  if (peer.uid == st.st_uid) return ((st.st_mode >> 6) & bit) != 0;
  if (peer.InGroup(st.st_gid)) return ((st.st_mode >> 3) & bit) != 0;
  return (st.st_mode & bit) != 0;
}

// The path an open descriptor names now (`what`: for the error).
absl::StatusOr<std::string> PathOfFd(int fd, absl::string_view what) {
  char link[64], path[PATH_MAX];
  std::snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  const ssize_t n = ::readlink(link, path, sizeof(path) - 1);
  if (n < 0) return ErrnoStatus(errno, "cannot resolve", what);
  return std::string(path, static_cast<size_t>(n));
}

// Reads the names of an open directory, except "." and "..", sorted bytewise.
// Takes ownership of `dir_fd`.
absl::StatusOr<std::vector<std::string>> SortedNames(int dir_fd,
                                                     absl::string_view path) {
  DIR* dir = ::fdopendir(dir_fd);
  if (dir == nullptr) {
    int err = errno;
    ::close(dir_fd);
    return ErrnoStatus(err, "cannot list", path);
  }
  absl::Cleanup close_dir = [dir] { ::closedir(dir); };
  std::vector<std::string> names;
  errno = 0;
  while (struct dirent* e = ::readdir(dir)) {
    absl::string_view name(e->d_name);
    if (name != "." && name != "..") names.emplace_back(name);
    errno = 0;
  }
  if (errno != 0) return ErrnoStatus(errno, "cannot list", path);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

absl::StatusOr<std::unique_ptr<FileStore>> FileStore::Open(
    const StoreUri& uri) {
  if (!uri.options.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("file:// URIs take no options, got '",
                     uri.options.begin()->first, "'"));
  }
  if (!uri.authority.empty() && uri.authority != "localhost") {
    return absl::InvalidArgumentError(
        absl::StrCat("file:// URI has host '", uri.authority,
                     "'; write file:///absolute/path (three slashes)"));
  }
  if (uri.path.empty() || uri.path.front() != '/') {
    return absl::InvalidArgumentError(
        "file:// URI needs an absolute path, e.g. file:///data");
  }
  char real[PATH_MAX];
  if (::realpath(uri.path.c_str(), real) == nullptr) {
    return ErrnoStatus(errno, "under-store root", uri.path);
  }
  int fd = ::open(real, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOTDIR) {
      return absl::InvalidArgumentError(
          absl::StrCat("under-store root '", uri.path, "' is not a directory"));
    }
    return ErrnoStatus(errno, "under-store root", uri.path);
  }
  // What was opened is the path realpath gave, not a link put in its place
  // since: root_ names the directory served.
  absl::StatusOr<std::string> landed = PathOfFd(fd, uri.path);
  if (!landed.ok() || *landed != real) {
    ::close(fd);
    return absl::UnavailableError(absl::StrCat(
        "under-store root '", uri.path, "' changed while it was opened"));
  }
  return std::unique_ptr<FileStore>(new FileStore(real, fd));
}

FileStore::~FileStore() { ::close(root_fd_); }

std::string FileStore::DebugString() const {
  return absl::StrCat("file://", root_);
}

absl::StatusOr<int> FileStore::OpenBeneath(const std::string& rel,
                                           int flags) const {
  const char* target = rel.empty() ? "." : rel.c_str();
  struct open_how how;
  std::memset(&how, 0, sizeof(how));
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  for (;;) {
    long fd = ::syscall(SYS_openat2, root_fd_, target, &how, sizeof(how));
    if (fd >= 0) return static_cast<int>(fd);
    if (errno == EINTR || errno == EAGAIN)
      continue;  // EAGAIN: a concurrent rename; retry.
    if (errno != ENOSYS) return ErrnoStatus(errno, "cannot open", rel);
    break;
  }
  // Fallback for kernels without openat2: open, then check where we landed.
  int fd = ::openat(root_fd_, target, flags | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "cannot open", rel);
  if (absl::StatusOr<std::string> landed = PathBeneath(fd, rel); !landed.ok()) {
    ::close(fd);
    return landed.status();
  }
  return fd;
}

absl::StatusOr<std::string> FileStore::PathBeneath(
    int fd, const std::string& rel) const {
  LARDER_ASSIGN_OR_RETURN(const std::string landed, PathOfFd(fd, rel));
  if (landed == root_) return std::string();
  const std::string prefix = root_ == "/" ? root_ : absl::StrCat(root_, "/");
  if (!absl::StartsWith(landed, prefix))
    return ErrnoStatus(EXDEV, "cannot open", rel);
  return landed.substr(prefix.size());
}

absl::StatusOr<ObjectInfo> FileStore::Stat(absl::string_view path) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeStorePath(path));
  if (HasUploadTempComponent(rel)) {
    return absl::NotFoundError(
        absl::StrCat("cannot stat '", rel, "': no such file (an upload's)"));
  }
  LARDER_ASSIGN_OR_RETURN(int fd, OpenBeneath(rel, O_PATH));
  absl::Cleanup close_fd = [fd] { ::close(fd); };
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoStatus(errno, "cannot stat", rel);
  if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    return absl::NotFoundError(
        absl::StrCat("'", rel, "' is neither a file nor a directory"));
  }
  return InfoOf(rel, st);
}

absl::Status FileStore::MayRead(absl::string_view path,
                                const PeerCredentials& peer) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeStorePath(path));
  struct stat st;
  if (rel.empty()) return StatDir("", &st);  // The root is no file to read.
  return MayAccess(rel, peer, 4, "read");
}

absl::Status FileStore::MayLookup(absl::string_view path,
                                  const PeerCredentials& peer) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeStorePath(path));
  return MayAccess(rel, peer, 0, "see");
}

absl::Status FileStore::MayList(absl::string_view dir,
                                const PeerCredentials& peer) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeStorePath(dir));
  // Names need read permission, their attributes search permission.
  return MayAccess(rel, peer, 4 | 1, "list");
}

absl::Status FileStore::MayAccess(const std::string& rel,
                                  const PeerCredentials& peer, unsigned bits,
                                  absl::string_view verb) {
  if (peer.uid == 0) return absl::OkStatus();
  auto denied = [&](absl::string_view what) {
    return absl::PermissionDeniedError(
        absl::StrCat(peer.uid == AnonymousPeer().uid
                         ? std::string("a caller without credentials")
                         : absl::StrCat("uid ", peer.uid),
                     " may not ", verb, " '", rel, "': ", what));
  };
  // The root and every directory on the way (from a short-lived cache), then
  // the path itself, each opened beneath the root as a read would open it.
  struct stat st, dir_st;
  LARDER_RETURN_IF_ERROR(StatDir("", &st));
  if (rel.empty()) {
    if (!Grants(st, peer, 4) && (bits & 4) != 0)
      return denied("the mount's root denies reading");
    if (!Grants(st, peer, 1) && (bits & 1) != 0)
      return denied("the mount's root denies search");
    return absl::OkStatus();
  }
  if (!Grants(st, peer, 1)) return denied("the mount's root denies search");
  for (size_t slash = rel.find('/');; slash = rel.find('/', slash + 1)) {
    if (slash == std::string::npos) {
      LARDER_ASSIGN_OR_RETURN(int fd, OpenBeneath(rel, O_PATH));
      const int r = ::fstat(fd, &st);
      const int err = errno;
      // A symbolic link on the way (the path, or a directory of it) leads
      // elsewhere beneath the root: the kernel searches the directories of
      // the path it lands on too, and so does this check (a link to a file
      // in another user's 0700 directory is no way in).
      absl::StatusOr<std::string> real = PathBeneath(fd, rel);
      ::close(fd);
      if (r != 0) return ErrnoStatus(err, "cannot stat", rel);
      if (!real.ok()) return real.status();
      if (*real != rel) {
        for (size_t at = real->find('/'); at != std::string::npos;
             at = real->find('/', at + 1)) {
          const std::string dir = real->substr(0, at);
          LARDER_RETURN_IF_ERROR(StatDir(dir, &dir_st));
          if (!Grants(dir_st, peer, 1)) {
            return denied(absl::StrCat("directory '", dir, "', where '", rel,
                                       "' leads, denies search"));
          }
        }
      }
      if ((bits & 4) != 0 && !Grants(st, peer, 4))
        return denied("its mode denies reading");
      if ((bits & 1) != 0 && !Grants(st, peer, 1))
        return denied("its mode denies search");
      return absl::OkStatus();
    }
    const std::string dir = rel.substr(0, slash);
    LARDER_RETURN_IF_ERROR(StatDir(dir, &st));
    if (!Grants(st, peer, 1))
      return denied(absl::StrCat("directory '", dir, "' denies search"));
  }
}

absl::Status FileStore::StatDir(const std::string& rel, struct stat* st) {
  const absl::Time now = absl::Now();
  {
    absl::MutexLock lock(&dir_mu_);
    if (auto it = dirs_.find(rel);
        it != dirs_.end() && it->second.until > now) {
      *st = it->second.st;
      return absl::OkStatus();
    }
  }
  int fd = root_fd_;
  if (!rel.empty()) {
    LARDER_ASSIGN_OR_RETURN(fd, OpenBeneath(rel, O_PATH));
  }
  const int r = ::fstat(fd, st);
  const int err = errno;
  if (fd != root_fd_) ::close(fd);
  if (r != 0) return ErrnoStatus(err, "cannot stat", rel.empty() ? root_ : rel);
  absl::MutexLock lock(&dir_mu_);
  if (dirs_.size() >= kMaxCachedDirs) dirs_.clear();
  dirs_[rel] = CachedDir{*st, now + kDirCacheTtl};
  return absl::OkStatus();
}

absl::StatusOr<ListPage> FileStore::List(absl::string_view dir,
                                         const ListOptions& options) {
  LARDER_ASSIGN_OR_RETURN(std::string rel_dir, NormalizeStorePath(dir));
  if (HasUploadTempComponent(rel_dir)) {
    return absl::NotFoundError(absl::StrCat(
        "cannot list '", rel_dir, "': no such directory (an upload's)"));
  }
  const size_t page_size = std::max<size_t>(1, options.page_size);
  std::vector<std::string> token_parts =
      absl::StrSplit(options.page_token, '/', absl::SkipEmpty());
  if (!options.recursive && token_parts.size() > 1) {
    return absl::InvalidArgumentError(
        "page token of a recursive listing used for a flat one");
  }
  for (const std::string& part : token_parts) {
    if (part == "." || part == "..")
      return absl::InvalidArgumentError("bad page token");
  }

  ListPage page;
  // Collects up to page_size + 1 entries: the extra one only tells that
  // another page exists.
  const size_t want = page_size + 1;

  // Describes `name` in directory `dir_fd` (store-relative `rel`), following a
  // symlink only if it stays beneath the root. Returns nullopt for entries to
  // skip (vanished, special files, escaping symlinks).
  auto describe = [&](int dir_fd, const std::string& rel,
                      const std::string& name,
                      bool* is_symlink) -> std::optional<ObjectInfo> {
    struct stat st;
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      return std::nullopt;
    *is_symlink = S_ISLNK(st.st_mode);
    if (*is_symlink) {
      absl::StatusOr<int> fd = OpenBeneath(rel, O_PATH);
      if (!fd.ok()) {
        LARDER_LOG(DEBUG, "file.list.skip")
            .Field("path", rel)
            .Field("status", fd.status());
        return std::nullopt;
      }
      int rc = ::fstat(*fd, &st);
      ::close(*fd);
      if (rc != 0) return std::nullopt;
    }
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) return std::nullopt;
    return InfoOf(rel, st);
  };

  // Depth-first walk in component order, with an explicit stack (one frame
  // per open directory, at most kMaxRecursiveListDepth + 1 of them): a deep
  // chain of directories can neither overflow the thread's stack nor exhaust
  // the descriptors. `token` holds the components of the page token below
  // the frame's directory while the walk is still on the token's path.
  struct Frame {
    int fd;  // Owned, O_RDONLY | O_DIRECTORY.
    std::string rel;
    int depth;  // rel_dir is 0.
    std::vector<std::string> names;
    std::vector<std::string>::const_iterator next;
    std::span<const std::string> token;
  };
  std::vector<Frame> stack;
  absl::Cleanup close_all = [&stack] {
    for (const Frame& f : stack) ::close(f.fd);
  };
  // Takes ownership of `fd`.
  auto push = [&](int fd, std::string rel, int depth,
                  std::span<const std::string> token) -> absl::Status {
    absl::StatusOr<std::vector<std::string>> names =
        SortedNames(::dup(fd), rel);
    if (!names.ok()) {
      ::close(fd);
      return names.status();
    }
    stack.push_back(
        Frame{fd, std::move(rel), depth, std::move(*names), {}, token});
    Frame& f = stack.back();
    f.next = token.empty()
                 ? f.names.cbegin()
                 : std::lower_bound(f.names.cbegin(), f.names.cend(), token[0]);
    return absl::OkStatus();
  };

  LARDER_ASSIGN_OR_RETURN(int dir_fd,
                          OpenBeneath(rel_dir, O_RDONLY | O_DIRECTORY));
  LARDER_RETURN_IF_ERROR(push(dir_fd, rel_dir, 0, token_parts));
  while (!stack.empty() && page.entries.size() < want) {
    Frame& f = stack.back();
    if (f.next == f.names.cend()) {
      ::close(f.fd);
      stack.pop_back();
      continue;
    }
    const std::string& name = *f.next++;
    if (IsUploadTempName(name)) continue;  // An upload in progress.
    const bool at_token = !f.token.empty() && name == f.token[0];
    if (at_token && f.token.size() == 1)
      continue;  // Returned on the previous page.
    std::string child = JoinStorePath(f.rel, name);
    bool is_symlink = false;
    std::optional<ObjectInfo> info = describe(f.fd, child, name, &is_symlink);
    if (!info) continue;
    if (!options.recursive) {
      page.entries.push_back(std::move(*info));
      continue;
    }
    if (!info->is_dir) {
      if (!at_token) page.entries.push_back(std::move(*info));
      continue;
    }
    if (is_symlink) continue;  // No cycles through symlinked directories.
    if (f.depth + 1 > kMaxRecursiveListDepth) {
      return absl::InvalidArgumentError(absl::StrCat(
          "recursive listing of '", rel_dir, "' stopped at '", child,
          "': the tree is deeper than ", kMaxRecursiveListDepth,
          " levels below the directory listed; list a deeper directory "
          "instead"));
    }
    int child_fd = ::openat(f.fd, name.c_str(),
                            O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (child_fd < 0) continue;  // Vanished or unreadable: skip, like `find`.
    const int depth = f.depth + 1;
    std::span<const std::string> below =
        at_token ? f.token.subspan(1) : std::span<const std::string>();
    // `f` dangles once push() grows the stack.
    LARDER_RETURN_IF_ERROR(push(child_fd, std::move(child), depth, below));
  }

  if (page.entries.size() > page_size) {
    page.entries.resize(page_size);
    absl::string_view last = page.entries.back().path;
    if (!rel_dir.empty()) last.remove_prefix(rel_dir.size() + 1);
    page.next_page_token = std::string(last);
  }
  return page;
}

absl::StatusOr<size_t> FileStore::ReadRange(absl::string_view path,
                                            uint64_t offset,
                                            absl::Span<char> buffer,
                                            absl::string_view expected_version,
                                            uint64_t* object_size) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeStorePath(path));
  // O_NONBLOCK: the open of a FIFO put (or swapped) under the root would
  // otherwise wait for a writer forever; no effect on a regular file.
  LARDER_ASSIGN_OR_RETURN(int fd, OpenBeneath(rel, O_RDONLY | O_NONBLOCK));
  absl::Cleanup close_fd = [fd] { ::close(fd); };
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoStatus(errno, "cannot stat", rel);
  if (S_ISDIR(st.st_mode))
    return absl::InvalidArgumentError(
        absl::StrCat("'", rel, "' is a directory"));
  if (!S_ISREG(st.st_mode))
    return absl::InvalidArgumentError(
        absl::StrCat("'", rel, "' is not a regular file"));
  const std::string version = VersionOf(st);
  if (!expected_version.empty() && version != expected_version) {
    return absl::FailedPreconditionError(
        absl::StrCat("'", rel, "' changed: version ", version, ", expected ",
                     expected_version));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (offset > size) {
    return absl::OutOfRangeError(absl::StrCat("read of '", rel, "' at ", offset,
                                              " beyond its size ", size));
  }
  if (object_size != nullptr) *object_size = size;
  const size_t want =
      static_cast<size_t>(std::min<uint64_t>(buffer.size(), size - offset));
  size_t done = 0;
  while (done < want) {
    ssize_t n = ::pread(fd, buffer.data() + done, want - done,
                        static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "cannot read", rel);
    }
    if (n == 0) break;  // Truncated meanwhile; caught by the check below.
    done += static_cast<size_t>(n);
  }
  if (::fstat(fd, &st) != 0) return ErrnoStatus(errno, "cannot stat", rel);
  if (VersionOf(st) != version) {
    return absl::FailedPreconditionError(
        absl::StrCat("'", rel, "' changed during the read"));
  }
  return done;
}

absl::StatusOr<int> FileStore::OpenParent(const std::string& rel, bool create,
                                          std::string* name) const {
  const size_t slash = rel.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "" : rel.substr(0, slash);
  *name = rel.substr(slash == std::string::npos ? 0 : slash + 1);
  absl::StatusOr<int> fd = OpenBeneath(dir, O_RDONLY | O_DIRECTORY);
  if (fd.ok() || !create || fd.status().code() != absl::StatusCode::kNotFound)
    return fd;
  // mkdir -p: each missing directory is made in its parent, itself opened
  // beneath the root, so no symlink on the way can lead the new directories
  // outside it.
  LARDER_ASSIGN_OR_RETURN(int parent, OpenBeneath("", O_RDONLY | O_DIRECTORY));
  for (size_t start = 0; start <= dir.size();) {
    size_t end = dir.find('/', start);
    if (end == std::string::npos) end = dir.size();
    const std::string component = dir.substr(start, end - start);
    const std::string prefix = dir.substr(0, end);
    if (::mkdirat(parent, component.c_str(), 0755) != 0 && errno != EEXIST) {
      const int err = errno;
      ::close(parent);
      return ErrnoStatus(err, "cannot create directory", prefix);
    }
    absl::StatusOr<int> next = OpenBeneath(prefix, O_RDONLY | O_DIRECTORY);
    ::close(parent);
    if (!next.ok()) return next.status();
    parent = *next;
    start = end + 1;
  }
  return parent;
}

absl::StatusOr<int> FileStore::OpenUpload(const std::string& rel,
                                          absl::string_view id, int flags,
                                          int* dir_fd,
                                          std::string* name) const {
  absl::StatusOr<int> dir = OpenParent(rel, /*create=*/false, name);
  if (!dir.ok()) {
    if (dir.status().code() != absl::StatusCode::kNotFound) return dir.status();
    return absl::NotFoundError(absl::StrCat("no upload ", id, " of '", rel,
                                            "': its directory does not exist"));
  }
  const std::string temp = absl::StrCat(kUploadTempPrefix, id);
  const int fd = ::openat(*dir, temp.c_str(), flags | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    ::close(*dir);
    if (err == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat("no upload ", id, " of '", rel,
                       "' (never created, or completed or aborted since)"));
    }
    return ErrnoStatus(err, absl::StrCat("cannot open upload ", id, " of"),
                       rel);
  }
  *dir_fd = *dir;
  return fd;
}

absl::StatusOr<std::string> FileStore::CreateUpload(absl::string_view path) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeUploadPath("file", path));
  std::string name;
  LARDER_ASSIGN_OR_RETURN(int dir_fd, OpenParent(rel, /*create=*/true, &name));
  absl::Cleanup close_dir = [dir_fd] { ::close(dir_fd); };
  // 64 random bits: a collision is all but impossible, and O_EXCL makes one
  // harmless (another id is drawn).
  for (int attempt = 0; attempt < 4; ++attempt) {
    std::string id = NewUploadId();
    const std::string temp = absl::StrCat(kUploadTempPrefix, id);
    const int fd =
        ::openat(dir_fd, temp.c_str(),
                 O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
      ::close(fd);
      return id;
    }
    if (errno != EEXIST)
      return ErrnoStatus(errno, "cannot start an upload of", rel);
  }
  return absl::InternalError(
      absl::StrCat("cannot start an upload of '", rel, "': no free name"));
}

absl::StatusOr<UploadedPart> FileStore::UploadPart(absl::string_view path,
                                                   absl::string_view upload_id,
                                                   uint32_t number,
                                                   uint64_t offset,
                                                   absl::string_view data) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeUploadPath("file", path));
  LARDER_RETURN_IF_ERROR(CheckLocalUploadId("file", upload_id));
  LARDER_RETURN_IF_ERROR(CheckUploadPart("file", number, offset, data.size()));
  if (offset + data.size() > static_cast<uint64_t>(INT64_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "part ", number, " of '", rel, "' ends beyond the largest file"));
  }
  int dir_fd = -1;
  std::string name;
  LARDER_ASSIGN_OR_RETURN(int fd,
                          OpenUpload(rel, upload_id, O_WRONLY, &dir_fd, &name));
  absl::Cleanup close_fds = [fd, dir_fd] {
    ::close(fd);
    ::close(dir_fd);
  };
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::pwrite(fd, data.data() + done, data.size() - done,
                               static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(
          errno, absl::StrCat("cannot write part ", number, " of"), rel);
    }
    done += static_cast<size_t>(n);
  }
  return UploadedPart{number, offset, data.size(), ""};
}

absl::StatusOr<ObjectInfo> FileStore::CompleteUpload(
    absl::string_view path, absl::string_view upload_id,
    const std::vector<UploadedPart>& parts) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeUploadPath("file", path));
  LARDER_RETURN_IF_ERROR(CheckLocalUploadId("file", upload_id));
  LARDER_ASSIGN_OR_RETURN(const uint64_t total,
                          CheckUploadParts("file", parts));
  int dir_fd = -1;
  std::string name;
  LARDER_ASSIGN_OR_RETURN(int fd,
                          OpenUpload(rel, upload_id, O_RDWR, &dir_fd, &name));
  absl::Cleanup close_fds = [fd, dir_fd] {
    ::close(fd);
    ::close(dir_fd);
  };
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoStatus(errno, "cannot stat", rel);
  if (static_cast<uint64_t>(st.st_size) < total) {
    return absl::InvalidArgumentError(absl::StrCat(
        "upload ", upload_id, " of '", rel, "' holds ", st.st_size,
        " bytes where its parts end at ", total, ": a part was not uploaded"));
  }
  // The file as the parts describe it, durable before it takes the name.
  if (::ftruncate(fd, static_cast<off_t>(total)) != 0 ||
      ::fchmod(fd, 0644) != 0 || ::fsync(fd) != 0) {
    return ErrnoStatus(errno, "cannot complete the upload of", rel);
  }
  if (::renameat(dir_fd, absl::StrCat(kUploadTempPrefix, upload_id).c_str(),
                 dir_fd, name.c_str()) != 0) {
    if (errno == EISDIR) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot complete the upload of '", rel,
                       "': a directory has that name"));
    }
    return ErrnoStatus(errno, "cannot complete the upload of", rel);
  }
  if (::fsync(dir_fd) != 0)
    return ErrnoStatus(errno, "cannot sync the directory of", rel);
  // The file just renamed (a Stat by name could meet a later writer's).
  if (::fstat(fd, &st) != 0) return ErrnoStatus(errno, "cannot stat", rel);
  return InfoOf(rel, st);
}

absl::Status FileStore::AbortUpload(absl::string_view path,
                                    absl::string_view upload_id) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeUploadPath("file", path));
  LARDER_RETURN_IF_ERROR(CheckLocalUploadId("file", upload_id));
  std::string name;
  absl::StatusOr<int> dir_fd = OpenParent(rel, /*create=*/false, &name);
  if (!dir_fd.ok()) {
    return dir_fd.status().code() == absl::StatusCode::kNotFound
               ? absl::OkStatus()  // No directory, no upload.
               : dir_fd.status();
  }
  absl::Cleanup close_dir = [fd = *dir_fd] { ::close(fd); };
  if (::unlinkat(*dir_fd, absl::StrCat(kUploadTempPrefix, upload_id).c_str(),
                 0) != 0 &&
      errno != ENOENT) {
    return ErrnoStatus(errno, "cannot abort the upload of", rel);
  }
  return absl::OkStatus();
}

}  // namespace larder
