// Copyright 2026 The Larder Authors.
#include "common/mount_table.h"

#include <errno.h>
#include <string.h>

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace larder {

std::string UnescapeMountInfo(absl::string_view in) {
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

std::optional<MountInfo> ParseMountInfoLine(absl::string_view line) {
  std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
  size_t dash = 6;  // The optional fields end at "-".
  while (dash < f.size() && f[dash] != "-") ++dash;
  if (f.size() < 6 || dash + 2 >= f.size()) return std::nullopt;
  return MountInfo{std::string(f[2]),        UnescapeMountInfo(f[3]),
                   UnescapeMountInfo(f[4]),  std::string(f[5]),
                   std::string(f[dash + 1]), UnescapeMountInfo(f[dash + 2])};
}

absl::StatusOr<std::vector<MountInfo>> ReadMountInfo(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    const int err = errno;
    return absl::Status(err == ENOENT ? absl::StatusCode::kNotFound
                                      : absl::StatusCode::kPermissionDenied,
                        absl::StrCat("cannot read the mount table ", path, ": ",
                                     strerror(err)));
  }
  std::vector<MountInfo> out;
  std::string line;
  while (std::getline(in, line)) {
    std::optional<MountInfo> m = ParseMountInfoLine(line);
    if (!m) {
      return absl::DataLossError(
          absl::StrCat("a line of ", path, " does not parse: ", line));
    }
    out.push_back(*std::move(m));
  }
  return out;
}

const MountInfo* TopMountAt(const std::vector<MountInfo>& mounts,
                            absl::string_view path) {
  const MountInfo* top = nullptr;
  for (const MountInfo& m : mounts) {
    if (m.mount_point == path) top = &m;
  }
  return top;
}

std::optional<MountInfo> FindMountIn(absl::string_view mountinfo,
                                     absl::string_view path) {
  std::optional<MountInfo> found;
  for (absl::string_view line : absl::StrSplit(mountinfo, '\n')) {
    std::optional<MountInfo> m = ParseMountInfoLine(line);
    if (m && m->mount_point == path) found = std::move(m);
  }
  return found;
}

std::optional<MountInfo> FindMount(absl::string_view path) {
  std::ifstream in("/proc/self/mountinfo");
  std::stringstream text;
  text << in.rdbuf();
  return FindMountIn(text.str(), path);
}

}  // namespace larder
