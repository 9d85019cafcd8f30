// Copyright 2026 The Larder Authors.
#include "fuse/mount_watchdog.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace larder {
namespace {

// The child of a multi-threaded process runs only async-signal-safe code
// (system calls, and arithmetic on memory that is its own): everything it
// needs is prepared by the parent, and mountinfo is read into this buffer.
constexpr size_t kMountInfoMax = 4 << 20;
char mountinfo[kMountInfoMax];

// The mount point as mountinfo writes it (a space as \040).
std::string EscapeMountInfo(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\\') {
      out += absl::StrCat("\\", c == ' '    ? "040"
                                : c == '\t' ? "011"
                                : c == '\n' ? "012"
                                            : "134");
    } else {
      out += c;
    }
  }
  return out;
}

void WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= static_cast<size_t>(w);
  }
}

bool FieldIs(const char* begin, const char* end, const std::string& want) {
  return static_cast<size_t>(end - begin) == want.size() &&
         std::memcmp(begin, want.data(), want.size()) == 0;
}

// Whether the topmost mount at `mount_point` (escaped) in mountinfo is of
// `device`: fields 3 and 5 of the last line whose field 5 it is.
bool Topmost(const char* text, size_t size, const std::string& device,
             const std::string& mount_point) {
  const char* p = text;
  const char* const end = text + size;
  bool ours = false;
  while (p < end) {
    const char* eol = static_cast<const char*>(std::memchr(p, '\n', end - p));
    if (eol == nullptr) eol = end;
    const char* field[6];
    int n = 0;
    const char* q = p;
    while (n < 6 && q <= eol) {
      field[n++] = q;
      const char* sp = static_cast<const char*>(std::memchr(q, ' ', eol - q));
      if (sp == nullptr) break;
      q = sp + 1;
    }
    if (n == 6 && FieldIs(field[4], field[5] - 1, mount_point))
      ours = FieldIs(field[2], field[3] - 1, device);
    p = eol + 1;
  }
  return ours;
}

// What the watchdog needs, prepared before the clone.
struct Plan {
  int pipe_fd;
  int max_fd;  // Descriptors below it are closed where close_range is not.
  std::string mount_point, escaped, device, abort_path, unmounted,
      not_unmounted;
};

[[noreturn]] void Watch(const Plan& plan) {
  // Nothing of the daemon's: its /dev/fuse and io_uring descriptors would
  // keep the connection open. The pipe becomes 3; stderr (the log) stays.
  if (plan.pipe_fd != 3 && ::dup2(plan.pipe_fd, 3) < 0) ::_exit(1);
  if (::close_range(4, ~0u, 0) != 0) {
    for (int fd = 4; fd < plan.max_fd; ++fd) ::close(fd);
  }
  if (int null = ::open("/dev/null", O_RDWR); null >= 0) {
    ::dup2(null, STDIN_FILENO);
    ::dup2(null, STDOUT_FILENO);
    if (null > 3) ::close(null);
  }
  ::setsid();  // A kill of the daemon's process group spares it.
  (void)!::chdir("/");
  ::prctl(PR_SET_NAME, "larder-watchdog", 0, 0, 0);
  // The daemon's signals (a terminal's ^C, a stop) end the daemon, which
  // unmounts; this process stays to see whether it did.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGPIPE})
    ::sigaction(s, &ignore, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  char byte;
  for (;;) {
    const ssize_t r = ::read(3, &byte, 1);
    if (r == 0 || (r < 0 && errno != EINTR)) break;  // The daemon is gone.
  }
  size_t size = 0;
  if (int fd = ::open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC); fd >= 0) {
    for (;;) {
      const ssize_t r = ::read(fd, mountinfo + size, kMountInfoMax - size);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      size += static_cast<size_t>(r);
      if (size == kMountInfoMax) break;
    }
    ::close(fd);
  }
  if (!Topmost(mountinfo, size, plan.device, plan.escaped))
    ::_exit(0);  // Unmounted (or covered by another mount): nothing to do.
  if (int fd = ::open(plan.abort_path.c_str(), O_WRONLY | O_CLOEXEC); fd >= 0) {
    WriteAll(fd, "1", 1);
    ::close(fd);
  }
  if (::umount2(plan.mount_point.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) == 0) {
    WriteAll(STDERR_FILENO, plan.unmounted.data(), plan.unmounted.size());
  } else {
    WriteAll(STDERR_FILENO, plan.not_unmounted.data(),
             plan.not_unmounted.size());
  }
  ::_exit(0);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MountWatchdog>> MountWatchdog::Start(
    const std::string& mountpoint, const std::string& device) {
  const size_t colon = device.find(':');
  if (colon == std::string::npos)
    return absl::InvalidArgumentError(absl::StrCat("bad device ", device));
  Plan plan;
  plan.mount_point = mountpoint;
  plan.escaped = EscapeMountInfo(mountpoint);
  plan.device = device;
  plan.abort_path = absl::StrCat("/sys/fs/fuse/connections/",
                                 device.substr(colon + 1), "/abort");
  plan.unmounted = absl::StrCat(
      "WARN fuse.watchdog_unmounted mountpoint=", mountpoint,
      " reason=\"the FUSE daemon died without unmounting; its connection "
      "was aborted and the mount detached\"\n");
  plan.not_unmounted = absl::StrCat(
      "ERROR fuse.watchdog_failed mountpoint=", mountpoint,
      " reason=\"the FUSE daemon died without unmounting and the mount "
      "could not be detached (run umount -l)\"\n");
  rlimit nofile{};
  plan.max_fd =
      ::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < (1u << 20)
          ? static_cast<int>(nofile.rlim_cur)
          : (1 << 20);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  plan.pipe_fd = fds[0];
  // A raw clone, not fork(): no pthread_atfork handler (gRPC's) runs in
  // the child, which runs only system calls on memory prepared here.
  const long pid =
      ::syscall(SYS_clone, SIGCHLD, nullptr, nullptr, nullptr, nullptr);
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return absl::InternalError(absl::StrCat("clone: ", std::strerror(err)));
  }
  // The write end closes with the rest (close_range) unless it is 3,
  // which dup2 replaces.
  if (pid == 0) Watch(plan);
  ::close(fds[0]);
  return std::unique_ptr<MountWatchdog>(
      new MountWatchdog(static_cast<pid_t>(pid), fds[1]));
}

MountWatchdog::~MountWatchdog() {
  ::close(fd_);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace larder
