// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: worker_process.h
// -----------------------------------------------------------------------------
//
// A real `larder worker` process for integration tests: free loopback ports,
// a short-circuit socket in a temp directory, kill/restart with the same
// flags, and /metrics scraping.
#ifndef LARDER_TESTS_TESTING_WORKER_PROCESS_H_
#define LARDER_TESTS_TESTING_WORKER_PROCESS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/testing/process.h"

namespace larder::testing {

class WorkerProcess {
 public:
  // Starts `larder worker` with `flags` (plus --listen, --metrics_listen and
  // --short_circuit_socket chosen here) and waits until it serves.
  // `wrapper` runs the worker, e.g. {"prlimit", "--nofile=1000:1000"}.
  static absl::StatusOr<std::unique_ptr<WorkerProcess>> Start(
      std::vector<std::string> flags, std::vector<std::string> env = {},
      std::vector<std::string> wrapper = {});
  ~WorkerProcess();

  void Kill(int signal = 9) { process_.Stop(signal); }
  absl::Status Restart();

  std::string address() const;  // 127.0.0.1:PORT (gRPC)
  const std::string& socket_path() const { return socket_; }
  int metrics_port() const { return metrics_port_; }
  const std::string& log_path() const { return log_; }
  pid_t pid() const { return process_.pid(); }

  // Value of the sample `series` (e.g. `larder_worker_hits_total{tier="ram"}`)
  // from /metrics. Errors: NotFound, Unavailable.
  absl::StatusOr<double> Metric(const std::string& series) const;

 private:
  WorkerProcess() = default;
  absl::Status Launch();
  absl::Status LaunchOnce();

  TempDir dir_;
  std::vector<std::string> flags_;
  std::vector<std::string> env_;
  std::vector<std::string> wrapper_;
  std::string socket_;
  std::string log_;
  int port_ = 0;
  int metrics_port_ = 0;
  Subprocess process_;
};

// A real `larder master` process; Restart keeps its state directory.
class MasterProcess {
 public:
  static absl::StatusOr<std::unique_ptr<MasterProcess>> Start(
      std::vector<std::string> flags = {}, std::vector<std::string> env = {});
  ~MasterProcess() { process_.Stop(9); }
  void Kill(int signal = 9) { process_.Stop(signal); }
  absl::Status Restart();
  std::string address() const;  // 127.0.0.1:PORT
  const std::string& state_dir() const { return state_; }
  // One series of the master's /metrics, e.g. `larder_master_mounts`.
  absl::StatusOr<double> Metric(const std::string& series) const;
  const std::string& log_path() const { return log_; }
  pid_t pid() const { return process_.pid(); }

 private:
  MasterProcess() = default;
  absl::Status Launch();
  absl::Status LaunchOnce();
  TempDir dir_;
  std::vector<std::string> flags_, env_;
  std::string state_, log_;
  int port_ = 0, metrics_port_ = 0;
  Subprocess process_;
};

// `larder fuse MOUNTPOINT` over a running master, mounted on a fresh
// directory. The destructor stops it and makes sure nothing stays mounted.
class FuseProcess {
 public:
  static absl::StatusOr<std::unique_ptr<FuseProcess>> Start(
      const std::string& master, std::vector<std::string> flags = {});
  ~FuseProcess();

  // Sends `signal`; with 9 the mount is left to auto_unmount.
  void Kill(int signal = 9) { process_.Stop(signal); }
  // Starts the daemon again on the same mount point.
  absl::Status Restart();
  bool Exited() { return process_.Exited(); }

  const std::string& mountpoint() const { return mountpoint_; }
  const std::string& log_path() const { return log_; }
  int metrics_port() const { return metrics_port_; }
  pid_t pid() const { return process_.pid(); }
  absl::StatusOr<double> Metric(const std::string& series) const;

 private:
  FuseProcess() = default;
  absl::Status Launch();
  TempDir dir_;
  std::string master_, mountpoint_, log_;
  std::vector<std::string> flags_;
  int metrics_port_ = 0;
  Subprocess process_;
};

// The FUSE channel the suite's daemons use (--fuse_channel):
// $LARDER_TEST_FUSE_CHANNEL, else "classic". For "uring" it switches the
// kernel's io_uring for FUSE on first (root; see fuse/uring_channel.h).
std::string SuiteFuseChannel();

// Whether something is mounted at `path` (per /proc/self/mounts).
bool IsMounted(const std::string& path);
// Unmounts `path` whatever state its FUSE daemon is in (lazy unmount, then
// aborting the FUSE connection), so a failed test never leaves a hung mount.
void ForceUnmount(const std::string& path);

// The value of `series` on the /metrics page at 127.0.0.1:`port`.
absl::StatusOr<double> ScrapeMetric(int port, const std::string& series);

}  // namespace larder::testing

#endif  // LARDER_TESTS_TESTING_WORKER_PROCESS_H_
