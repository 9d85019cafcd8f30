// Copyright 2026 The Larder Authors.
#include "common/flags.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace {
const larder::HttpOptions kHttpDefaults;
}  // namespace

ABSL_FLAG(std::string, log_level, "info",
          "Minimum log level: debug, info, warning or error.");
ABSL_FLAG(std::string, log_file, "",
          "Daemons: append the log to this file instead of stderr (with "
          "fuse --daemon: else the log is dropped).");
ABSL_FLAG(int, http_max_connections, kHttpDefaults.max_connections,
          "HTTP connections kept open for reuse, per under-store.");
ABSL_FLAG(absl::Duration, http_connect_timeout, kHttpDefaults.connect_timeout,
          "TCP/TLS connect timeout for under-store requests.");
ABSL_FLAG(absl::Duration, http_request_timeout, kHttpDefaults.request_timeout,
          "Limit on one under-store request, body included (0 = none).");
ABSL_FLAG(absl::Duration, store_timeout, kHttpDefaults.store_timeout,
          "How long an under-store request may go without a byte moving "
          "(connecting, waiting for the first byte, or stalled mid-transfer) "
          "before it fails, not retried: a read of uncached data fails "
          "within it when the store hangs.");
ABSL_FLAG(int64_t, http_low_speed_limit, kHttpDefaults.low_speed_bytes_per_sec,
          "Bytes/s below which a transfer counts as stalled (see "
          "--http_low_speed_time).");
ABSL_FLAG(absl::Duration, http_low_speed_time, kHttpDefaults.low_speed_time,
          "How long a transfer may stay below --http_low_speed_limit before it "
          "is retried.");
ABSL_FLAG(std::string, http_ca_bundle, "",
          "CA bundle for TLS (default: the system's).");
ABSL_FLAG(bool, http_verify_tls, true,
          "Verify TLS certificates of under-store endpoints.");
ABSL_FLAG(
    int, retry_max_attempts, kHttpDefaults.retry.max_attempts,
    "Attempts per under-store request, the first included (1 = no retries).");
ABSL_FLAG(absl::Duration, retry_initial_backoff,
          kHttpDefaults.retry.initial_backoff,
          "Backoff ceiling of the first retry; doubles per attempt, with full "
          "jitter.");
ABSL_FLAG(absl::Duration, retry_max_backoff, kHttpDefaults.retry.max_backoff,
          "Upper bound of one backoff sleep.");

ABSL_FLAG(std::string, tls_cert_file, "",
          "PEM certificate chain: served by the master and workers; presented "
          "by clients as their client certificate (mutual TLS).");
ABSL_FLAG(std::string, tls_key_file, "", "PEM private key of --tls_cert_file.");
ABSL_FLAG(std::string, tls_ca_file, "",
          "PEM CA bundle. Clients: use TLS and verify servers with it. "
          "Servers: verify client certificates with it.");
ABSL_FLAG(bool, tls_require_client_cert, false,
          "Servers with --tls_ca_file: refuse clients without a certificate "
          "(default: let them in to authenticate with a token).");
ABSL_FLAG(std::string, tls_server_name, "",
          "Clients: name expected in the server's certificate, when it is not "
          "the host part of the address.");
ABSL_FLAG(std::vector<std::string>, tls_admin_identities, {},
          "Servers: client-certificate identities (SAN or CN) with the admin "
          "role; other verified certificates are readers.");
ABSL_FLAG(std::string, auth_tokens_file, "",
          "Servers: file of '<admin|reader> <token>' lines accepted as bearer "
          "tokens (empty = no token authentication).");
ABSL_FLAG(std::string, token_file, "",
          "Clients: file holding the bearer token to present (default: "
          "$LARDER_TOKEN, else the file named by $LARDER_TOKEN_FILE).");
ABSL_FLAG(std::string, admin_token_file, "",
          "Servers without --auth_tokens_file or client certificates: the "
          "0600 file of their own admin token, made at first start; clients "
          "without a token present it to loopback servers when they can read "
          "it (default /var/lib/larder/admin.token for root, else "
          "~/.local/state/larder/admin.token).");
ABSL_FLAG(bool, allow_insecure_network, false,
          "Servers: listen beyond loopback without authenticating callers.");

namespace larder {

SecurityOptions SecurityOptionsFromFlags() {
  SecurityOptions o;
  o.tls_cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  o.tls_key_file = absl::GetFlag(FLAGS_tls_key_file);
  o.tls_ca_file = absl::GetFlag(FLAGS_tls_ca_file);
  o.tls_require_client_cert = absl::GetFlag(FLAGS_tls_require_client_cert);
  o.tls_server_name = absl::GetFlag(FLAGS_tls_server_name);
  o.tls_admin_identities = absl::GetFlag(FLAGS_tls_admin_identities);
  o.auth_tokens_file = absl::GetFlag(FLAGS_auth_tokens_file);
  o.token_file = absl::GetFlag(FLAGS_token_file);
  o.admin_token_file = absl::GetFlag(FLAGS_admin_token_file);
  o.allow_insecure_network = absl::GetFlag(FLAGS_allow_insecure_network);
  return o;
}

HttpOptions HttpOptionsFromFlags() {
  HttpOptions o;
  o.max_connections = absl::GetFlag(FLAGS_http_max_connections);
  o.connect_timeout = absl::GetFlag(FLAGS_http_connect_timeout);
  o.store_timeout = absl::GetFlag(FLAGS_store_timeout);
  o.request_timeout = absl::GetFlag(FLAGS_http_request_timeout);
  o.low_speed_bytes_per_sec = absl::GetFlag(FLAGS_http_low_speed_limit);
  o.low_speed_time = absl::GetFlag(FLAGS_http_low_speed_time);
  o.ca_bundle = absl::GetFlag(FLAGS_http_ca_bundle);
  o.verify_tls = absl::GetFlag(FLAGS_http_verify_tls);
  o.retry.max_attempts = absl::GetFlag(FLAGS_retry_max_attempts);
  o.retry.initial_backoff = absl::GetFlag(FLAGS_retry_initial_backoff);
  o.retry.max_backoff = absl::GetFlag(FLAGS_retry_max_backoff);
  return o;
}

absl::Status RedirectStderrToLogFile(bool or_dev_null) {
  std::string path = absl::GetFlag(FLAGS_log_file);
  if (path.empty()) {
    if (!or_dev_null) return absl::OkStatus();
    path = "/dev/null";
  }
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--log_file: cannot open '", path, "': ", std::strerror(errno)));
  }
  const bool ok = ::dup2(fd, STDERR_FILENO) >= 0;
  const int saved = errno;
  ::close(fd);
  if (!ok) {
    return absl::InternalError(
        absl::StrCat("--log_file: dup2: ", std::strerror(saved)));
  }
  return absl::OkStatus();
}

absl::Status ApplyLogFlags() {
  LARDER_ASSIGN_OR_RETURN(LogLevel level,
                          ParseLogLevel(absl::GetFlag(FLAGS_log_level)));
  SetMinLogLevel(level);
  return absl::OkStatus();
}

}  // namespace larder
