// Copyright 2026 The Larder Authors.
#include "common/flags.h"

#include <string>

#include "absl/flags/flag.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace {
const larder::HttpOptions kHttpDefaults;
}  // namespace

ABSL_FLAG(std::string, log_level, "info",
          "Minimum log level: debug, info, warning or error.");
ABSL_FLAG(int, http_max_connections, kHttpDefaults.max_connections,
          "HTTP connections kept open for reuse, per under-store.");
ABSL_FLAG(absl::Duration, http_connect_timeout, kHttpDefaults.connect_timeout,
          "TCP/TLS connect timeout for under-store requests.");
ABSL_FLAG(absl::Duration, http_request_timeout, kHttpDefaults.request_timeout,
          "Limit on one under-store request, body included (0 = none).");
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

namespace larder {

HttpOptions HttpOptionsFromFlags() {
  HttpOptions o;
  o.max_connections = absl::GetFlag(FLAGS_http_max_connections);
  o.connect_timeout = absl::GetFlag(FLAGS_http_connect_timeout);
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

absl::Status ApplyLogFlags() {
  LARDER_ASSIGN_OR_RETURN(LogLevel level,
                          ParseLogLevel(absl::GetFlag(FLAGS_log_level)));
  SetMinLogLevel(level);
  return absl::OkStatus();
}

}  // namespace larder
