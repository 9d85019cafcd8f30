// Copyright 2026 The Larder Authors.
#include "master/state_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"

namespace larder {
namespace {

// Names are relative, without "..": they come from this program, but a
// mistake must not write outside the state directory.
absl::Status CheckName(const std::string& name) {
  if (name.empty() || name[0] == '/' || absl::StrContains(name, ".."))
    return absl::InternalError(absl::StrCat("bad state name '", name, "'"));
  return absl::OkStatus();
}

// The state is a few small text protos; a ring of thousands of workers is
// the largest.
constexpr size_t kMaxStateBytes = 64 << 20;

absl::StatusOr<std::string> ReadWhole(const std::string& path) {
  return ReadWholeFile(path, "master state", kMaxStateBytes);
}

}  // namespace

absl::StatusOr<std::unique_ptr<LocalStateStore>> LocalStateStore::Open(
    const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return absl::PermissionDeniedError(absl::StrCat(
        "cannot create state directory ", dir, ": ", ec.message()));
  return std::unique_ptr<LocalStateStore>(new LocalStateStore(dir));
}

absl::StatusOr<std::string> LocalStateStore::Get(const std::string& name) {
  if (absl::Status st = CheckName(name); !st.ok()) return st;
  return ReadWhole(dir_ + "/" + name);
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>>
LocalStateStore::List(const std::string& prefix) {
  if (absl::Status st = CheckName(prefix); !st.ok()) return st;
  std::vector<std::pair<std::string, std::string>> out;
  std::error_code ec;
  const std::string folder = dir_ + "/" + prefix;
  if (!std::filesystem::is_directory(folder, ec)) return out;
  for (const auto& e : std::filesystem::directory_iterator(folder, ec)) {
    const std::string file = e.path().filename().string();
    if (!e.is_regular_file() || absl::EndsWith(file, ".tmp")) continue;
    absl::StatusOr<std::string> v = ReadWhole(e.path().string());
    if (!v.ok()) {
      if (absl::IsNotFound(v.status())) continue;  // Deleted meanwhile.
      return v.status();
    }
    out.emplace_back(prefix + file, *std::move(v));
  }
  if (ec)
    return absl::InternalError(
        absl::StrCat("cannot list ", folder, ": ", ec.message()));
  return out;
}

absl::Status LocalStateStore::Put(const std::string& name,
                                  const std::string& value) {
  if (absl::Status st = CheckName(name); !st.ok()) return st;
  const std::string file = dir_ + "/" + name;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(file).parent_path(),
                                      ec);
  const std::string tmp = file + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return absl::InternalError(
        absl::StrCat("cannot write ", tmp, ": ", std::strerror(errno)));
  bool ok = ::write(fd, value.data(), value.size()) ==
                static_cast<ssize_t>(value.size()) &&
            ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), file.c_str()) != 0) {
    const int why = ok ? errno : err;
    ::unlink(tmp.c_str());
    return absl::InternalError(
        absl::StrCat("cannot write ", file, ": ", std::strerror(why)));
  }
  // The rename is durable only once its directory is: without this, a
  // power loss after Put returned could bring back the old mount table.
  const std::string parent = std::filesystem::path(file).parent_path().string();
  const int dir = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0 || ::fsync(dir) != 0) {
    const int why = errno;
    if (dir >= 0) ::close(dir);
    return absl::InternalError(absl::StrCat("cannot sync ", parent,
                                            " after writing ", file, ": ",
                                            std::strerror(why)));
  }
  ::close(dir);
  return absl::OkStatus();
}

absl::Status LocalStateStore::Delete(const std::string& name) {
  if (absl::Status st = CheckName(name); !st.ok()) return st;
  const std::string file = dir_ + "/" + name;
  if (::unlink(file.c_str()) != 0 && errno != ENOENT)
    return absl::InternalError(
        absl::StrCat("cannot delete ", file, ": ", std::strerror(errno)));
  return absl::OkStatus();
}

}  // namespace larder
