// Copyright 2026 The Larder Authors.
#include "common/file_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace larder {

absl::StatusOr<std::string> ReadWholeFile(const std::string& path,
                                          absl::string_view what,
                                          size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    const std::string msg =
        absl::StrCat("cannot read ", what, " ", path, ": ", std::strerror(e));
    if (e == ENOENT) return absl::NotFoundError(msg);
    if (e == EACCES || e == EPERM) return absl::PermissionDeniedError(msg);
    return absl::InvalidArgumentError(msg);
  }
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot read ", what, " ", path, ": ", std::strerror(e)));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) {
      ::close(fd);
      return absl::InvalidArgumentError(absl::StrCat(
          what, " ", path, " is larger than ", max_bytes >> 10, " KiB"));
    }
  }
  ::close(fd);
  return out;
}

}  // namespace larder
