// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: etcd.h
// -----------------------------------------------------------------------------
//
// A real single-member etcd (Debian's etcd-server) for HA tests: loopback
// ports picked at run time, a data directory that survives Restart (so
// leases and keys do, as in production), and stop/start at will.
#ifndef LARDER_TESTS_TESTING_ETCD_H_
#define LARDER_TESTS_TESTING_ETCD_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/testing/process.h"

namespace larder::testing {

class EtcdProcess {
 public:
  // `tls`: serve TLS with this certificate and key, and require client
  // certificates from `ca` (etcd's --client-cert-auth). Errors: the etcd
  // binary is missing (run scripts/install-deps.sh), or it did not start.
  struct Tls {
    std::string ca, cert, key;
  };
  static absl::StatusOr<std::unique_ptr<EtcdProcess>> Start(
      std::optional<Tls> tls = std::nullopt);
  ~EtcdProcess() { process_.Stop(9); }

  // SIGTERM (etcd's clean stop) or another signal.
  void Stop(int signal = 15) { process_.Stop(signal); }
  // Starts it again on the same ports and data.
  absl::Status Restart();

  std::string endpoint() const;  // 127.0.0.1:PORT
  const std::string& log_path() const { return log_; }

 private:
  EtcdProcess() = default;
  absl::Status Launch();
  TempDir dir_;
  std::optional<Tls> tls_;
  std::string log_;
  int client_port_ = 0, peer_port_ = 0;
  Subprocess process_;
};

}  // namespace larder::testing

#endif  // LARDER_TESTS_TESTING_ETCD_H_
