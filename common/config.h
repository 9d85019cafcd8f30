// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: config.h
// -----------------------------------------------------------------------------
//
// Typed configuration shared by several components. Every option documents its
// default and unit here; the command-line flags in common/flags.h are generated
// from these defaults, so the two never disagree.
//
// Libraries take these structs, never read flags themselves: that keeps two
// differently configured clients in one process (and unit tests) possible.
#ifndef LARDER_COMMON_CONFIG_H_
#define LARDER_COMMON_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace larder {

// How long a mount's metadata (Stat and List answers) is kept when `larder
// mount` does not say: the master's default, and the CLI flag's.
inline constexpr absl::Duration kDefaultMetadataTtl = absl::Seconds(60);

// How long a read keeps a block of an eviction=epoch mount from eviction
// when `larder mount --eviction=epoch` does not say (--epoch_window).
inline constexpr absl::Duration kDefaultEpochWindow = absl::Hours(1);

// Retries of idempotent remote calls: exponential backoff with full jitter
// (sleep = uniform(0, min(max_backoff, initial_backoff * 2^attempt))).
struct RetryOptions {
  // Total attempts including the first. 1 disables retries. Default 5.
  int max_attempts = 5;
  // Backoff ceiling of the first retry. Default 50 ms.
  absl::Duration initial_backoff = absl::Milliseconds(50);
  // Upper bound of any single backoff. Default 2 s.
  absl::Duration max_backoff = absl::Seconds(2);
};

// HTTP client (libcurl) settings used by the object-store backends.
struct HttpOptions {
  // Connections kept open for reuse, per backend instance. Requests beyond this
  // wait for a free connection. Default 128, as the worker's fetch threads:
  // fewer would leave fetches waiting for a connection.
  int max_connections = 128;
  // TCP + TLS connect timeout. Default 5 s.
  absl::Duration connect_timeout = absl::Seconds(5);
  // How long a request may go without a byte moving either way: to
  // connect, to the first byte of the answer, and within a transfer. A
  // request that waits this long fails with DeadlineExceeded and is not
  // retried (a store that said nothing for this long is not answering), so
  // a read of data that is not cached fails within it when the store hangs.
  // Default 20 s (--store_timeout).
  absl::Duration store_timeout = absl::Seconds(20);
  // A transfer slower than `low_speed_bytes_per_sec` for `low_speed_time` is
  // aborted as stalled (and retried). Defaults: 1 KiB/s for 30 s.
  int64_t low_speed_bytes_per_sec = 1024;
  absl::Duration low_speed_time = absl::Seconds(30);
  // Hard limit on one request, including the body. Default 10 min; 0 = none.
  absl::Duration request_timeout = absl::Minutes(10);
  // CA bundle for TLS verification; empty = the system default. Also read from
  // AWS_CA_BUNDLE by the S3 backend.
  std::string ca_bundle;
  // Verify TLS certificates. Default true; turn off only for test endpoints.
  bool verify_tls = true;
  RetryOptions retry;
};

// Transport security and authentication of Larder's own gRPC traffic (see
// common/security.h). One struct serves both sides, since a worker is a
// server and a client of the master at once. Every field defaults to off:
// plain gRPC, no authentication, which the daemons accept on loopback only.
struct SecurityOptions {
  // PEM certificate chain and private key. Servers serve TLS with them;
  // clients present them as their client certificate (mutual TLS).
  std::string tls_cert_file;
  std::string tls_key_file;
  // PEM CA bundle. Clients: turns TLS on and verifies servers against it.
  // Servers: verifies client certificates against it (mutual TLS).
  std::string tls_ca_file;
  // Servers with tls_ca_file: refuse a TLS handshake without a client
  // certificate (true), or let such a client in to authenticate with a token
  // (false, the default). A certificate from another CA is always refused.
  bool tls_require_client_cert = false;
  // Clients: the name expected in the server's certificate, when it is not
  // the host part of the address (e.g. "larder-master" while dialling an IP).
  std::string tls_server_name;
  // Servers: client-certificate identities (a DNS/URI SAN or the CN) that
  // have the admin role; other verified certificates are readers.
  std::vector<std::string> tls_admin_identities;
  // Servers: the file of "<role> <token>" lines accepted as bearer tokens;
  // empty = no token authentication.
  std::string auth_tokens_file;
  // Clients: file holding the bearer token to present; empty = $LARDER_TOKEN,
  // else the file named by $LARDER_TOKEN_FILE, else none.
  std::string token_file;
  // Servers with neither auth_tokens_file nor client certificates: where
  // their own admin token is kept (made at first start). Clients with no
  // token: the admin token presented to loopback servers when this process
  // may read it. Empty = DefaultAdminTokenPath() (common/security.h).
  std::string admin_token_file;
  // Servers: listen beyond loopback without authenticating callers.
  bool allow_insecure_network = false;
};

}  // namespace larder

#endif  // LARDER_COMMON_CONFIG_H_
