// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: flags.h
// -----------------------------------------------------------------------------
//
// Command-line flags for the options in common/config.h, and the functions that
// turn parsed flags into those structs. Only `main` functions (cli/) call
// these; libraries receive the structs.
//
//   --log_level=info                 debug | info | warning | error
//   --log_file=                      daemons: append the log here
//   --http_max_connections=128       connections kept per backend
//   --http_connect_timeout=5s
//   --store_timeout=20s          no byte moving this long: fail, no retry
//   --http_request_timeout=10m       0 = none
//   --http_low_speed_limit=1024      bytes/s below which a transfer is stalled
//   --http_low_speed_time=30s
//   --http_ca_bundle=                CA bundle path (default: system)
//   --http_verify_tls=true
//   --retry_max_attempts=5
//   --retry_initial_backoff=50ms
//   --retry_max_backoff=2s
//   --tls_cert_file= --tls_key_file= --tls_ca_file=   PEM files (security.h)
//   --tls_require_client_cert=false --tls_server_name=
//   --tls_admin_identities=          certificate identities with admin role
//   --auth_tokens_file=              servers: "<role> <token>" lines
//   --token_file=                    clients: the token to present
//   --allow_insecure_network=false
#ifndef LARDER_COMMON_FLAGS_H_
#define LARDER_COMMON_FLAGS_H_

#include "absl/status/status.h"
#include "common/config.h"

namespace larder {

// HttpOptions (with its RetryOptions) from the --http_* and --retry_* flags.
HttpOptions HttpOptionsFromFlags();

// SecurityOptions from the --tls_*, --auth_tokens_file, --token_file and
// --allow_insecure_network flags.
SecurityOptions SecurityOptionsFromFlags();

// Applies --log_level. Returns InvalidArgument for an unknown level.
absl::Status ApplyLogFlags();

// Daemons: points stderr (the log) at --log_file, opened for appending; with
// no --log_file, at /dev/null if `or_dev_null` (a detached daemon), else
// leaves it. Errors: InvalidArgument (the file cannot be opened).
absl::Status RedirectStderrToLogFile(bool or_dev_null);

}  // namespace larder

#endif  // LARDER_COMMON_FLAGS_H_
