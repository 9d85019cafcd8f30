// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: process.h
// -----------------------------------------------------------------------------
//
// Test infrastructure for integration tests and benchmarks (linked only by
// them, never by production code): temporary directories, free loopback
// ports, child processes that die with the test, and readiness polling.
#ifndef LARDER_TESTS_TESTING_PROCESS_H_
#define LARDER_TESTS_TESTING_PROCESS_H_

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace larder::testing {

// The source tree (for tests/servers/node_modules and helper scripts).
std::string SourceDir();

// A fresh directory under $TMPDIR (or /tmp), removed with its contents when
// destroyed. Not thread-safe; owned by one test.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Writes `data` to `path`, creating parent directories.
absl::Status WriteFile(const std::string& path, absl::string_view data);
absl::StatusOr<std::string> ReadFile(const std::string& path);
// The whole file through read(2) after dropping its cached pages, so that a
// read of a FUSE mount reaches the daemon; `err` (if given) gets the errno
// of a failure, 0 otherwise.
absl::StatusOr<std::string> ReadUncached(const std::string& path,
                                         int* err = nullptr);

// `n` pseudo-random bytes, the same for the same seed (test data that a
// shifted or mixed-up range cannot match by accident).
std::string PatternBytes(size_t n, uint64_t seed);

// Sends SIGSTOP to `pid` and waits until every thread of it has stopped
// (kill returns before they have: a thread busy on another CPU goes on for
// a moment). Errors: those of kill, DeadlineExceeded.
absl::Status StopProcess(pid_t pid, absl::Duration timeout = absl::Seconds(5));

// A TCP port on 127.0.0.1 that was free a moment ago.
int PickFreePort();

// True once something accepts TCP connections on 127.0.0.1:port.
bool PortAccepts(int port);

// Polls `condition` every 20 ms until it is true or `timeout` passes.
bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout);

// A child process. It gets SIGKILL if the test process dies (PDEATHSIG), and
// is killed and reaped when this object is destroyed. stdout and stderr go to
// `log_path` (appended). Not thread-safe.
class Subprocess {
 public:
  Subprocess() = default;
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  // `env` entries ("NAME=value") are added to this process's environment.
  absl::Status Start(const std::vector<std::string>& argv,
                     const std::string& log_path,
                     const std::vector<std::string>& env = {});
  // Sends `signal` and waits for the exit (SIGKILL after 5 s).
  void Stop(int signal = 15);
  bool running() const { return pid_ > 0; }
  // True once the process has exited (it is reaped; running() turns false).
  bool Exited();
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

// Runs a command to completion; returns its stdout. Errors: Internal on a
// non-zero exit (with stderr in the message).
absl::StatusOr<std::string> RunCommand(const std::vector<std::string>& argv);

// The exit code and output (stdout and stderr together) of a shell script.
struct Shell {
  int code;
  std::string out;
};
// Runs `script` with /bin/sh -c.
Shell Sh(const std::string& script);

// Writes dirty pages back and empties the kernel's page, dentry and inode
// caches (every mount's: FUSE mounts get FORGETs). Root only; the error
// otherwise.
absl::Status DropKernelCaches();

// A whole file read with read(2), 64 KiB at a time (through a FUSE mount:
// the way a loader reads); the errno as a status on failure.
absl::StatusOr<std::string> ReadAll(const std::string& path);

}  // namespace larder::testing

#endif  // LARDER_TESTS_TESTING_PROCESS_H_
