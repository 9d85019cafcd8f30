// Copyright 2026 The Larder Authors.
#include "tests/testing/process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"

extern char** environ;

namespace larder::testing {

std::string SourceDir() { return LARDER_SOURCE_DIR; }

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl =
      absl::StrCat(base && *base ? base : "/tmp", "/larder-test-XXXXXX");
  char* made = ::mkdtemp(tmpl.data());
  if (made == nullptr) std::abort();
  path_ = made;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

absl::Status WriteFile(const std::string& path, absl::string_view data) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(),
                                      ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<std::string> ReadUncached(const std::string& path, int* err) {
  int unused;
  if (err == nullptr) err = &unused;
  *err = 0;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *err = errno;
    return absl::ErrnoToStatus(*err, path);
  }
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  std::string out;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0)
    out.append(buf, static_cast<size_t>(n));
  if (n < 0) *err = errno;
  ::close(fd);
  if (n < 0) return absl::ErrnoToStatus(*err, path);
  return out;
}

std::string PatternBytes(size_t n, uint64_t seed) {
  std::string s(n, '\0');
  uint64_t x = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (size_t i = 0; i < n; i += 8) {
    x ^= x << 13;  // xorshift64
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(&s[i], &x, std::min<size_t>(8, n - i));
  }
  return s;
}

int PickFreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

bool PortAccepts(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool ok =
      ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (condition()) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return condition();
}

absl::Status StopProcess(pid_t pid, absl::Duration timeout) {
  if (::kill(pid, SIGSTOP) != 0)
    return absl::ErrnoToStatus(errno, absl::StrCat("kill -STOP ", pid));
  // The signal is delivered to each thread as it next enters the kernel:
  // a thread running on another CPU answers a request or two before then.
  auto all_stopped = [pid] {
    std::error_code ec;
    int threads = 0;
    for (const auto& t : std::filesystem::directory_iterator(
             absl::StrCat("/proc/", pid, "/task"), ec)) {
      std::ifstream in(t.path() / "stat");
      std::string stat((std::istreambuf_iterator<char>(in)),
                       std::istreambuf_iterator<char>());
      // pid (comm) STATE ...: comm may hold spaces and parentheses.
      const size_t paren = stat.rfind(')');
      if (paren == std::string::npos || paren + 2 >= stat.size()) return false;
      const char state = stat[paren + 2];
      if (state != 'T' && state != 't') return false;
      ++threads;
    }
    return !ec && threads > 0;
  };
  if (!WaitFor(all_stopped, timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat("process ", pid, " did not stop within ",
                     absl::FormatDuration(timeout)));
  }
  return absl::OkStatus();
}

Subprocess::~Subprocess() { Stop(SIGKILL); }

absl::Status Subprocess::Start(const std::vector<std::string>& argv,
                               const std::string& log_path,
                               const std::vector<std::string>& env) {
  if (running()) return absl::FailedPreconditionError("already running");
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0)
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::setpgid(0, 0);
    int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                    0644);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
    }
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    for (const std::string& e : env) ::putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> args;
    for (const std::string& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  pid_ = pid;
  return absl::OkStatus();
}

bool Subprocess::Exited() {
  if (pid_ <= 0) return true;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return true;
  }
  return false;
}

void Subprocess::Stop(int signal) {
  if (pid_ <= 0) return;
  ::kill(pid_, signal);
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) == 0) {
    if (absl::Now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  pid_ = -1;
}

absl::StatusOr<std::string> RunCommand(const std::vector<std::string>& argv) {
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError("pipe failed");
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    std::vector<char*> args;
    for (const std::string& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  std::string out, err;
  // Drain stderr on a simple alternating basis: read stdout fully, then stderr.
  // Commands used here write little to stderr, so the pipe never fills.
  char buf[65536];
  ssize_t n;
  while ((n = ::read(out_pipe[0], buf, sizeof(buf))) > 0)
    out.append(buf, static_cast<size_t>(n));
  while ((n = ::read(err_pipe[0], buf, sizeof(buf))) > 0)
    err.append(buf, static_cast<size_t>(n));
  ::close(out_pipe[0]);
  ::close(err_pipe[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(
        absl::StrCat(argv[0], " failed (status ", status, "): ", err));
  }
  return out;
}

absl::Status DropKernelCaches() {
  ::sync();
  return WriteFile("/proc/sys/vm/drop_caches", "3");
}

Shell Sh(const std::string& script) {
  const std::string cmd = absl::StrCat(
      "/bin/sh -c '", absl::StrReplaceAll(script, {{"'", "'\\''"}}), "' 2>&1");
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return {-1, absl::StrCat("popen: ", std::strerror(errno))};
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

absl::StatusOr<std::string> ReadAll(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return absl::ErrnoToStatus(errno, path);
  std::string out;
  char buf[1 << 16];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
  const int err = errno;
  ::close(fd);
  if (n < 0) return absl::ErrnoToStatus(err, path);
  return out;
}

}  // namespace larder::testing
