// Copyright 2026 The Larder Authors.
#include "tests/testing/etcd.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace larder::testing {

absl::StatusOr<std::unique_ptr<EtcdProcess>> EtcdProcess::Start(
    std::optional<Tls> tls) {
  if (::access("/usr/bin/etcd", X_OK) != 0)
    return absl::FailedPreconditionError(
        "/usr/bin/etcd is missing: run scripts/install-deps.sh "
        "(Debian's etcd-server)");
  std::unique_ptr<EtcdProcess> e(new EtcdProcess);
  e->tls_ = std::move(tls);
  e->log_ = e->dir_.path() + "/etcd.log";
  absl::Status st;
  for (int attempt = 0; attempt < 5; ++attempt) {
    e->client_port_ = PickFreePort();
    e->peer_port_ = PickFreePort();
    st = e->Launch();
    if (st.ok()) return e;
    e->process_.Stop(9);
  }
  return st;
}

absl::Status EtcdProcess::Launch() {
  const std::string scheme = tls_ ? "https" : "http";
  const std::string client =
      absl::StrCat(scheme, "://127.0.0.1:", client_port_);
  const std::string peer = absl::StrCat("http://127.0.0.1:", peer_port_);
  std::vector<std::string> argv = {
      "/usr/bin/etcd",
      "--name=larder-test",
      absl::StrCat("--data-dir=", dir_.path(), "/data"),
      absl::StrCat("--listen-client-urls=", client),
      absl::StrCat("--advertise-client-urls=", client),
      absl::StrCat("--listen-peer-urls=", peer),
      absl::StrCat("--initial-advertise-peer-urls=", peer),
      absl::StrCat("--initial-cluster=larder-test=", peer),
      "--logger=zap",
      "--log-outputs=stderr"};
  if (tls_) {
    argv.push_back(absl::StrCat("--cert-file=", tls_->cert));
    argv.push_back(absl::StrCat("--key-file=", tls_->key));
    argv.push_back(absl::StrCat("--trusted-ca-file=", tls_->ca));
    argv.push_back("--client-cert-auth");
  }
  absl::Status st = process_.Start(argv, log_);
  if (!st.ok()) return st;
  // Ready once it serves clients and has published itself through raft.
  const bool ready = WaitFor(
      [&] {
        if (process_.Exited()) return true;
        auto text = ReadFile(log_);
        return PortAccepts(client_port_) && text.ok() &&
               text->find("published local member to cluster") !=
                   std::string::npos;
      },
      absl::Seconds(30));
  if (!ready || !process_.running()) {
    auto text = ReadFile(log_);
    return absl::UnavailableError(absl::StrCat("etcd did not start; log:\n",
                                               text.ok() ? *text : "(none)"));
  }
  return absl::OkStatus();
}

absl::Status EtcdProcess::Restart() {
  process_.Stop(9);
  // The log is appended: "ready" from the last run must not count.
  (void)WriteFile(log_, "");
  return Launch();
}

std::string EtcdProcess::endpoint() const {
  return absl::StrCat("127.0.0.1:", client_port_);
}

}  // namespace larder::testing
