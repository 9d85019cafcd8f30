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

#include "absl/time/time.h"

namespace larder {

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
  // wait for a free connection. Default 64.
  int max_connections = 64;
  // TCP + TLS connect timeout. Default 5 s.
  absl::Duration connect_timeout = absl::Seconds(5);
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

}  // namespace larder

#endif  // LARDER_COMMON_CONFIG_H_
