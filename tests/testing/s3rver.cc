// Copyright 2026 The Larder Authors.
#include "tests/testing/s3rver.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "understore/factory.h"

namespace larder::testing {

absl::StatusOr<std::unique_ptr<S3rver>> S3rver::Start(
    const std::string& bucket) {
  return StartTls(bucket, "", "");  // No certificate: plain HTTP.
}

absl::StatusOr<std::unique_ptr<S3rver>> S3rver::StartTls(
    const std::string& bucket, const std::string& cert,
    const std::string& key) {
  std::unique_ptr<S3rver> s(new S3rver);
  s->bucket_ = bucket;
  s->tls_cert_ = cert;
  s->tls_key_ = key;
  s->log_path_ = absl::StrCat(s->dir_.path(), "/s3rver.log");
  std::filesystem::create_directories(absl::StrCat(s->dir_.path(), "/data"));
  s->port_ = PickFreePort();
  absl::Status st = s->Launch();
  if (!st.ok()) return st;
  return s;
}

S3rver::~S3rver() { process_.Stop(9); }

absl::Status S3rver::Launch() {
  const std::string script =
      SourceDir() + "/tests/servers/node_modules/s3rver/bin/s3rver.js";
  if (!std::filesystem::exists(script)) {
    return absl::FailedPreconditionError(
        absl::StrCat(script, " is missing: run scripts/install-deps.sh"));
  }
  std::vector<std::string> argv = {"node",
                                   script,
                                   "--address",
                                   "127.0.0.1",
                                   "--port",
                                   absl::StrCat(port_),
                                   "--directory",
                                   absl::StrCat(dir_.path(), "/data"),
                                   "--configure-bucket",
                                   bucket_};
  if (!tls_cert_.empty())
    argv.insert(argv.end(), {"--cert", tls_cert_, "--key", tls_key_});
  absl::Status st = process_.Start(argv, log_path_,
                                   {"NODE_OPTIONS=--openssl-legacy-provider"});
  if (!st.ok()) return st;
  const int port = port_;
  if (!WaitFor([port] { return PortAccepts(port); }, absl::Seconds(30))) {
    return absl::DeadlineExceededError(
        absl::StrCat("s3rver did not listen on ", port_, "; see ", log_path_));
  }
  return absl::OkStatus();
}

void S3rver::Kill() { process_.Stop(9); }

absl::Status S3rver::Restart() {
  process_.Stop(9);
  return Launch();
}

std::string S3rver::endpoint() const {
  return absl::StrCat(tls_cert_.empty() ? "http" : "https",
                      "://127.0.0.1:", port_);
}

std::string S3rver::Uri(const std::string& prefix) const {
  return absl::StrCat("s3://", bucket_, prefix.empty() ? "" : "/", prefix,
                      "?endpoint=", endpoint(),
                      "&region=us-east-1&path_style=true");
}

int S3rver::CountRequests(const std::string& needle) const {
  std::ifstream in(log_path_);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    if (absl::StrContains(line, needle)) ++n;
  }
  return n;
}

int S3rver::WaitForRequests(const std::string& needle, int at_least) const {
  WaitFor([&] { return CountRequests(needle) >= at_least; }, absl::Seconds(10));
  return CountRequests(needle);
}

absl::StatusOr<std::unique_ptr<S3Store>> S3rver::OpenStore(
    const std::string& prefix) const {
  UnderStoreOptions o;
  o.aws_credentials = Credentials();
  absl::StatusOr<std::unique_ptr<UnderStore>> store =
      OpenUnderStore(Uri(prefix), o);
  if (!store.ok()) return store.status();
  return std::unique_ptr<S3Store>(static_cast<S3Store*>(store->release()));
}

}  // namespace larder::testing
