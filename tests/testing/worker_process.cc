// Copyright 2026 The Larder Authors.
#include "tests/testing/worker_process.h"

#include <sys/mount.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/testing/pki.h"
#include "understore/http_client.h"

namespace larder::testing {
namespace {

// In a secure suite (pki.h), masters and workers serve TLS and authenticate.
void AddSuiteSecurity(std::vector<std::string>& argv) {
  if (const Pki* pki = SuitePki()) {
    for (std::string& f : pki->NodeFlags()) argv.push_back(std::move(f));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<WorkerProcess>> WorkerProcess::Start(
    std::vector<std::string> flags, std::vector<std::string> env,
    std::vector<std::string> wrapper) {
  std::unique_ptr<WorkerProcess> w(new WorkerProcess);
  w->flags_ = std::move(flags);
  w->env_ = std::move(env);
  w->wrapper_ = std::move(wrapper);
  w->socket_ = w->dir_.path() + "/worker.sock";
  w->log_ = w->dir_.path() + "/worker.log";
  w->port_ = PickFreePort();
  w->metrics_port_ = PickFreePort();
  absl::Status st = w->Launch();
  if (!st.ok()) return st;
  return w;
}

WorkerProcess::~WorkerProcess() { process_.Stop(9); }

// Waits until `log` contains `ready` (printed by the daemon once every port is
// bound) or the process exits. Free ports picked earlier can be taken by
// another test's process or an outgoing connection before the daemon binds
// them; an exit then means: pick new ports and start again.
static absl::Status AwaitReady(Subprocess& process, const std::string& log,
                               size_t log_start, const std::string& ready,
                               bool* exited) {
  *exited = false;
  const bool ok = WaitFor(
      [&] {
        if (process.Exited()) {
          *exited = true;
          return true;
        }
        auto text = ReadFile(log);  // Only what this process wrote: the log is
                                    // appended across restarts.
        return text.ok() && text->size() > log_start &&
               text->find(ready, log_start) != std::string::npos;
      },
      absl::Seconds(30));
  if (ok && !*exited) return absl::OkStatus();
  auto text = ReadFile(log);
  return absl::DeadlineExceededError(
      absl::StrCat(*exited ? "exited during start-up" : "did not start",
                   "; log:\n", text.ok() ? *text : "(none)"));
}

absl::Status WorkerProcess::Launch() {
  absl::Status st;
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (attempt > 0) {
      port_ = PickFreePort();
      metrics_port_ = PickFreePort();
    }
    auto before = ReadFile(log_);
    st = LaunchOnce();
    bool exited = false;
    if (st.ok())
      st = AwaitReady(process_, log_, before.ok() ? before->size() : 0,
                      "larder worker: gRPC port", &exited);
    if (st.ok() || !exited) return st;
  }
  return st;
}

absl::Status WorkerProcess::LaunchOnce() {
  std::vector<std::string> argv = {
      LARDER_CLI_BINARY, "worker", absl::StrCat("--listen=127.0.0.1:", port_),
      absl::StrCat("--metrics_listen=127.0.0.1:", metrics_port_),
      absl::StrCat("--short_circuit_socket=", socket_)};
  AddSuiteSecurity(argv);
  argv.insert(argv.end(), flags_.begin(), flags_.end());
  argv.insert(argv.begin(), wrapper_.begin(), wrapper_.end());
  absl::Status st = process_.Start(argv, log_, env_);
  if (!st.ok()) return st;
  const int port = port_, mport = metrics_port_;
  // An exit (a picked port taken meanwhile: "address in use") is seen by
  // AwaitReady at once, and Launch starts again on new ports.
  if (!WaitFor(
          [&] {
            return process_.Exited() ||
                   (PortAccepts(port) && PortAccepts(mport));
          },
          absl::Seconds(30))) {
    auto log = ReadFile(log_);
    return absl::DeadlineExceededError(absl::StrCat(
        "worker did not start; log:\n", log.ok() ? *log : "(none)"));
  }
  return absl::OkStatus();
}

absl::Status WorkerProcess::Restart() {
  process_.Stop(9);
  return Launch();
}

std::string WorkerProcess::address() const {
  return absl::StrCat("127.0.0.1:", port_);
}

absl::StatusOr<double> WorkerProcess::Metric(const std::string& series) const {
  return ScrapeMetric(metrics_port_, series);
}

absl::StatusOr<double> MasterProcess::Metric(const std::string& series) const {
  return ScrapeMetric(metrics_port_, series);
}

absl::StatusOr<double> ScrapeMetric(int port, const std::string& series) {
  HttpOptions o;
  o.retry.max_attempts = 1;
  HttpClient http(o);
  HttpRequest req;
  req.url = absl::StrCat("http://127.0.0.1:", port, "/metrics");
  absl::StatusOr<HttpResponse> r = http.Send(req);
  if (!r.ok()) return r.status();
  for (absl::string_view line : absl::StrSplit(r->body, '\n')) {
    if (line.size() > series.size() &&
        line.substr(0, series.size()) == series && line[series.size()] == ' ') {
      double v;
      if (absl::SimpleAtod(line.substr(series.size() + 1), &v)) return v;
    }
  }
  return absl::NotFoundError(absl::StrCat("no metric ", series));
}

absl::StatusOr<std::unique_ptr<MasterProcess>> MasterProcess::Start(
    std::vector<std::string> flags, std::vector<std::string> env) {
  std::unique_ptr<MasterProcess> m(new MasterProcess);
  m->flags_ = std::move(flags);
  m->env_ = std::move(env);
  m->state_ = m->dir_.path() + "/state";
  m->log_ = m->dir_.path() + "/master.log";
  m->port_ = PickFreePort();
  m->metrics_port_ = PickFreePort();
  absl::Status st = m->Launch();
  if (!st.ok()) return st;
  return m;
}

absl::Status MasterProcess::Launch() {
  absl::Status st;
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (attempt > 0)
      metrics_port_ = PickFreePort();  // The gRPC port stays: clients know it.
    auto before = ReadFile(log_);
    st = LaunchOnce();
    bool exited = false;
    if (st.ok())
      st = AwaitReady(process_, log_, before.ok() ? before->size() : 0,
                      "larder master: gRPC port", &exited);
    if (st.ok() || !exited) return st;
  }
  return st;
}

absl::Status MasterProcess::LaunchOnce() {
  std::vector<std::string> argv = {
      LARDER_CLI_BINARY, "master",
      absl::StrCat("--master_listen=127.0.0.1:", port_),
      absl::StrCat("--master_metrics_listen=127.0.0.1:", metrics_port_),
      absl::StrCat("--state_dir=", state_)};
  AddSuiteSecurity(argv);
  argv.insert(argv.end(), flags_.begin(), flags_.end());
  absl::Status st = process_.Start(argv, log_, env_);
  if (!st.ok()) return st;
  const int port = port_;
  // An exit is seen by AwaitReady at once (see WorkerProcess::LaunchOnce).
  if (!WaitFor([&] { return process_.Exited() || PortAccepts(port); },
               absl::Seconds(30))) {
    auto log = ReadFile(log_);
    return absl::DeadlineExceededError(absl::StrCat(
        "master did not start; log:\n", log.ok() ? *log : "(none)"));
  }
  return absl::OkStatus();
}

absl::Status MasterProcess::Restart() {
  process_.Stop(9);
  return Launch();
}

std::string MasterProcess::address() const {
  return absl::StrCat("127.0.0.1:", port_);
}

bool IsMounted(const std::string& path) {
  auto mounts = ReadFile("/proc/self/mounts");
  if (!mounts.ok()) return false;
  for (absl::string_view line : absl::StrSplit(*mounts, '\n')) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
    if (f.size() > 1 && f[1] == path) return true;
  }
  return false;
}

void ForceUnmount(const std::string& path) {
  // The mount's device ("0:NN") names its FUSE connection (NN).
  std::string minor;
  auto info = ReadFile("/proc/self/mountinfo");
  for (absl::string_view line : absl::StrSplit(info.value_or(""), '\n')) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
    if (f.size() > 4 && f[4] == path) {
      std::vector<absl::string_view> dev = absl::StrSplit(f[2], ':');
      if (dev.size() == 2) minor = std::string(dev[1]);
    }
  }
  if (minor.empty()) return;
  ::umount2(path.c_str(), MNT_DETACH);
  // A hung daemon would leave readers stuck in the kernel: abort this
  // connection (and only this one).
  ::mount("fusectl", "/sys/fs/fuse/connections", "fusectl", 0, nullptr);
  (void)WriteFile(absl::StrCat("/sys/fs/fuse/connections/", minor, "/abort"),
                  "1");
}

absl::StatusOr<std::unique_ptr<FuseProcess>> FuseProcess::Start(
    const std::string& master, std::vector<std::string> flags) {
  std::unique_ptr<FuseProcess> f(new FuseProcess);
  f->master_ = master;
  f->flags_ = std::move(flags);
  f->mountpoint_ = f->dir_.path() + "/mnt";
  f->log_ = f->dir_.path() + "/fuse.log";
  if (::mkdir(f->mountpoint_.c_str(), 0755) != 0)
    return absl::InternalError("cannot create the mount point");
  absl::Status st = f->Launch();
  if (!st.ok()) return st;
  return f;
}

std::string SuiteFuseChannel() {
  const char* env = std::getenv("LARDER_TEST_FUSE_CHANNEL");
  const std::string channel = env != nullptr && *env ? env : "classic";
  static std::once_flag once;
  if (channel == "uring") {
    // The kernel offers io_uring to FUSE daemons only with this on (as
    // root); it changes nothing for a daemon that does not ask for it.
    // Once: a test may turn it off for a while.
    std::call_once(once, [] {
      std::ofstream("/sys/module/fuse/parameters/enable_uring") << "Y";
    });
  }
  return channel;
}

absl::Status FuseProcess::Launch() {
  absl::Status st;
  for (int attempt = 0; attempt < 5; ++attempt) {
    metrics_port_ = PickFreePort();
    std::vector<std::string> argv = {
        LARDER_CLI_BINARY, "fuse", mountpoint_,
        absl::StrCat("--master=", master_),
        absl::StrCat("--fuse_metrics_listen=127.0.0.1:", metrics_port_)};
    if (const Pki* pki = SuitePki()) {
      argv.push_back(absl::StrCat("--tls_ca_file=", pki->ca()));
      argv.push_back(absl::StrCat("--tls_cert_file=", pki->reader().cert));
      argv.push_back(absl::StrCat("--tls_key_file=", pki->reader().key));
    }
    argv.push_back(absl::StrCat("--fuse_channel=", SuiteFuseChannel()));
    argv.insert(argv.end(), flags_.begin(), flags_.end());
    auto before = ReadFile(log_);
    st = process_.Start(argv, log_);
    if (!st.ok()) return st;
    bool exited = false;
    st = AwaitReady(process_, log_, before.ok() ? before->size() : 0,
                    "larder fuse: mounted", &exited);
    if (st.ok() || !exited) return st;
    auto text = ReadFile(log_);
    if (text.ok() && text->find("busy") != std::string::npos) return st;
  }
  return st;
}

absl::Status FuseProcess::Restart() {
  process_.Stop(9);
  WaitFor([&] { return !IsMounted(mountpoint_); }, absl::Seconds(10));
  ForceUnmount(mountpoint_);
  return Launch();
}

FuseProcess::~FuseProcess() {
  if (process_.running() && process_.Exited()) {
    // Died during the test: its log says why.
    auto log = ReadFile(log_);
    std::fprintf(stderr, "larder fuse exited during the test; its log:\n%s\n",
                 log.value_or("(none)").c_str());
  }
  process_.Stop(15);
  WaitFor([&] { return !IsMounted(mountpoint_); }, absl::Seconds(5));
  ForceUnmount(mountpoint_);
}

absl::StatusOr<double> FuseProcess::Metric(const std::string& series) const {
  return ScrapeMetric(metrics_port_, series);
}

}  // namespace larder::testing
