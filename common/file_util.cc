// Copyright 2026 The Larder Authors.
#include "common/file_util.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
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

uint64_t RaiseFdLimit() {
  struct rlimit r;
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return 1024;
  uint64_t nr_open = 0;
  if (absl::StatusOr<std::string> text =
          ReadWholeFile("/proc/sys/fs/nr_open", "fs.nr_open", 64);
      text.ok()) {
    (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &nr_open);
  }
  if (nr_open > r.rlim_max) {
    struct rlimit raised = {nr_open, nr_open};
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) return nr_open;
  }
  if (r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &r) != 0) ::getrlimit(RLIMIT_NOFILE, &r);
  }
  return r.rlim_cur;
}

}  // namespace larder
