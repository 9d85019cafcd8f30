// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: s3rver.h
// -----------------------------------------------------------------------------
//
// A real s3rver (the npm S3 API server, tests/servers/) on a free loopback
// port, for integration tests and benchmarks. Facts that shape this helper
// (shared/TESTING-NOTES.md): s3rver binds ::1 for "localhost" so we pass
// 127.0.0.1; listings over 1000 keys need --openssl-legacy-provider on Node
// 20; it rejects unknown access keys and accepts any signature; its built-in
// credentials are S3RVER / S3RVER. It logs one line per request, which
// CountRequests reads.
#ifndef LARDER_TESTS_TESTING_S3RVER_H_
#define LARDER_TESTS_TESTING_S3RVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tests/testing/process.h"
#include "understore/aws_credentials.h"
#include "understore/s3_store.h"

namespace larder::testing {

class S3rver {
 public:
  // Starts s3rver with `bucket` created, data under a fresh temp directory.
  // Errors: FailedPrecondition if node or s3rver is missing (run
  // scripts/install-deps.sh), DeadlineExceeded if it does not come up.
  static absl::StatusOr<std::unique_ptr<S3rver>> Start(
      const std::string& bucket = "larder-test");
  // The same over TLS with this certificate and key (PEM files): its
  // endpoint is https://127.0.0.1:PORT.
  static absl::StatusOr<std::unique_ptr<S3rver>> StartTls(
      const std::string& bucket, const std::string& cert,
      const std::string& key);

  ~S3rver();

  // Stops the server (SIGKILL, like a crash); Restart brings it back on the
  // same port with the same data.
  void Kill();
  absl::Status Restart();

  int port() const { return port_; }
  pid_t pid() const { return process_.pid(); }  // SIGSTOP: a hung store.
  std::string endpoint() const;  // "http://127.0.0.1:PORT" (or https)
  const std::string& bucket() const { return bucket_; }
  // s3://BUCKET/PREFIX?endpoint=...&region=us-east-1&path_style=true
  std::string Uri(const std::string& prefix = "") const;
  static AwsCredentials Credentials() { return {"S3RVER", "S3RVER", ""}; }
  // An S3Store on Uri(prefix) with s3rver's keys (tests write objects with
  // its Put).
  absl::StatusOr<std::unique_ptr<S3Store>> OpenStore(
      const std::string& prefix) const;

  // Number of logged requests whose line contains `needle` (e.g. "GET" plus
  // a key) since the start.
  int CountRequests(const std::string& needle) const;
  // s3rver writes its log asynchronously: polls until at least `at_least`
  // matching lines are there (or 10 s pass), then returns the count.
  int WaitForRequests(const std::string& needle, int at_least) const;
  const std::string& log_path() const { return log_path_; }

 private:
  S3rver() = default;
  absl::Status Launch();

  TempDir dir_;
  std::string bucket_;
  std::string tls_cert_, tls_key_;  // Empty: plain HTTP.
  std::string log_path_;
  int port_ = 0;
  Subprocess process_;
};

}  // namespace larder::testing

#endif  // LARDER_TESTS_TESTING_S3RVER_H_
