// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: pki.h
// -----------------------------------------------------------------------------
//
// Real certificates and tokens for tests, made with the `openssl` command in a
// temp directory: a cluster CA; a node certificate (CN and SAN larder-node,
// SAN 127.0.0.1 and localhost, for servers and as a client) that masters and
// workers use; admin and reader client certificates; a certificate from
// another CA; a tokens file with one admin and one reader token, and a file
// for each token.
//
// Secure suites: when $LARDER_TEST_SECURE is set (ctest runs cluster_test a
// second time so), SuitePki() returns one shared Pki, and the test processes
// of worker_process.h start with TLS and authentication on: masters and
// workers with NodeFlags(), FUSE daemons with a reader certificate. Tests
// reach them with SuiteSecurity().
#ifndef LARDER_TESTS_TESTING_PKI_H_
#define LARDER_TESTS_TESTING_PKI_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config.h"
#include "common/security.h"
#include "tests/testing/process.h"

namespace larder::testing {

struct KeyPair {
  std::string cert;  // PEM file paths.
  std::string key;
};

class Pki {
 public:
  // Errors: Internal (openssl failed; its output in the message).
  static absl::StatusOr<std::unique_ptr<Pki>> Create();

  const std::string& dir() const { return dir_.path(); }
  std::string ca() const { return dir() + "/ca.pem"; }
  KeyPair node() const { return {dir() + "/node.pem", dir() + "/node.key"}; }
  KeyPair admin() const { return {dir() + "/admin.pem", dir() + "/admin.key"}; }
  KeyPair reader() const {
    return {dir() + "/reader.pem", dir() + "/reader.key"};
  }
  // Signed by a CA the cluster does not trust.
  KeyPair rogue() const { return {dir() + "/rogue.pem", dir() + "/rogue.key"}; }
  std::string tokens_file() const { return dir() + "/tokens"; }
  std::string admin_token_file() const { return dir() + "/admin.token"; }
  std::string reader_token_file() const { return dir() + "/reader.token"; }
  // A writer token limited to the mounts below /ckpt.
  std::string writer_token_file() const { return dir() + "/writer.token"; }
  const std::string& admin_token() const { return admin_token_; }
  const std::string& reader_token() const { return reader_token_; }

  // A master's or worker's flags: TLS with the node certificate, client
  // certificates verified (larder-node and larder-admin are admins), the
  // tokens file, and the node certificate as its own client credential.
  std::vector<std::string> NodeFlags() const;
  // A client with TLS and, for kAdmin/kReader, that role's token (kNone: no
  // token, no certificate).
  SecurityOptions Client(Role role) const;

 private:
  Pki() = default;
  TempDir dir_;
  std::string admin_token_, reader_token_, writer_token_;
};

// The suite's Pki when $LARDER_TEST_SECURE is set, else null.
const Pki* SuitePki();
// Client options for the suite's cluster: plain without SuitePki().
SecurityOptions SuiteSecurity(Role role);
// A channel factory for SuiteSecurity(role); aborts if it cannot be made.
std::shared_ptr<const ChannelFactory> SuiteChannels(Role role);

}  // namespace larder::testing

#endif  // LARDER_TESTS_TESTING_PKI_H_
