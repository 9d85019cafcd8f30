// Copyright 2026 The Larder Authors.
#include "master/mount_registry.h"

#include <fcntl.h>
#include <google/protobuf/text_format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/block_key.h"
#include "common/status_macros.h"
#include "understore/uri.h"

namespace larder {

absl::StatusOr<std::unique_ptr<MountRegistry>> MountRegistry::Open(
    const std::string& state_dir) {
  std::error_code ec;
  std::filesystem::create_directories(state_dir, ec);
  if (ec)
    return absl::PermissionDeniedError(absl::StrCat(
        "cannot create state directory ", state_dir, ": ", ec.message()));
  std::unique_ptr<MountRegistry> r(
      new MountRegistry(state_dir + "/mounts.textproto"));
  if (std::filesystem::exists(r->file_)) {
    int fd = ::open(r->file_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return absl::PermissionDeniedError(
          absl::StrCat("cannot read ", r->file_, ": ", std::strerror(errno)));
    std::string text;
    char buf[65536];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof(buf))) > 0)
      text.append(buf, static_cast<size_t>(n));
    ::close(fd);
    absl::MutexLock lock(&r->mu_);
    if (!google::protobuf::TextFormat::ParseFromString(text, &r->table_)) {
      return absl::DataLossError(absl::StrCat("mount table ", r->file_,
                                              " is corrupt; fix or remove it"));
    }
  }
  return r;
}

absl::Status MountRegistry::Persist(const v1::MountTable& table) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(table, &text);
  const std::string tmp = file_ + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return absl::InternalError(
        absl::StrCat("cannot write ", tmp, ": ", std::strerror(errno)));
  bool ok = ::write(fd, text.data(), text.size()) ==
                static_cast<ssize_t>(text.size()) &&
            ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), file_.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return absl::InternalError(
        absl::StrCat("cannot persist the mount table to ", file_, ": ",
                     std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::MountTable> MountRegistry::Add(v1::MountEntry entry) {
  LARDER_ASSIGN_OR_RETURN(std::string path, NormalizeClusterPath(entry.path()));
  if (path == "/") return absl::InvalidArgumentError("cannot mount on '/'");
  entry.set_path(path);
  if (entry.block_size() == 0) entry.set_block_size(kDefaultBlockSize);
  if (entry.block_size() < 4096 || entry.block_size() > (1ull << 30)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "block size ", entry.block_size(), " out of range (4 KiB to 1 GiB)"));
  }
  if (entry.metadata_ttl_ms() == 0) entry.set_metadata_ttl_ms(60000);
  if (entry.mode() > 07777) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "mode 0%o is not a permission mode (0 to 07777)", entry.mode()));
  }
  // The URI must parse and the store must open (credentials are checked on
  // first use by each process).
  LARDER_ASSIGN_OR_RETURN(StoreUri uri, ParseStoreUri(entry.uri()));
  (void)uri;
  absl::MutexLock lock(&mu_);
  for (const v1::MountEntry& m : table_.mounts()) {
    if (m.path() == path || absl::StartsWith(path, m.path() + "/") ||
        absl::StartsWith(m.path(), path + "/")) {
      return absl::AlreadyExistsError(absl::StrCat(
          "'", path, "' overlaps the existing mount '", m.path(), "'"));
    }
  }
  v1::MountTable next = table_;
  *next.add_mounts() = entry;
  next.set_version(table_.version() + 1);
  LARDER_RETURN_IF_ERROR(Persist(next));
  table_ = std::move(next);
  return table_;
}

absl::StatusOr<v1::MountTable> MountRegistry::Remove(const std::string& raw) {
  LARDER_ASSIGN_OR_RETURN(std::string path, NormalizeClusterPath(raw));
  absl::MutexLock lock(&mu_);
  v1::MountTable next;
  bool found = false;
  for (const v1::MountEntry& m : table_.mounts()) {
    if (m.path() == path) {
      found = true;
    } else {
      *next.add_mounts() = m;
    }
  }
  if (!found)
    return absl::NotFoundError(absl::StrCat("no mount at '", path, "'"));
  next.set_version(table_.version() + 1);
  LARDER_RETURN_IF_ERROR(Persist(next));
  table_ = std::move(next);
  return table_;
}

v1::MountTable MountRegistry::Get() const {
  absl::MutexLock lock(&mu_);
  return table_;
}

std::vector<std::string> MountRegistry::VirtualChildren(
    absl::string_view raw) const {
  absl::StatusOr<std::string> path = NormalizeClusterPath(raw);
  if (!path.ok()) return {};
  const std::string prefix = *path == "/" ? "/" : *path + "/";
  std::vector<std::string> out;
  absl::MutexLock lock(&mu_);
  for (const v1::MountEntry& m : table_.mounts()) {
    if (!absl::StartsWith(m.path(), prefix)) continue;
    const size_t end = m.path().find('/', prefix.size());
    out.push_back(m.path().substr(0, end));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

absl::StatusOr<std::pair<v1::MountEntry, std::string>> MountRegistry::Resolve(
    absl::string_view raw) const {
  LARDER_ASSIGN_OR_RETURN(std::string path, NormalizeClusterPath(raw));
  absl::MutexLock lock(&mu_);
  for (const v1::MountEntry& m : table_.mounts()) {
    if (path == m.path()) return std::make_pair(m, std::string());
    if (absl::StartsWith(path, m.path() + "/"))
      return std::make_pair(m, path.substr(m.path().size() + 1));
  }
  return absl::NotFoundError(
      absl::StrCat("no mount holds '", path, "' (see larder mount)"));
}

}  // namespace larder
