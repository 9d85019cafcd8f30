// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: log.h
// -----------------------------------------------------------------------------
//
// A small structured logger: one line per event, `key=value` fields, written to
// stderr. It never prints a secret:
//
//   * a field whose key names a secret (`secret`, `password`, `token`,
//     `signature`, `authorization`, `credential`, `account_key`, `sas`) is
//     printed as `<redacted>`;
//   * every message and field value passes through `RedactSecrets`, which masks
//     signing material by pattern (Authorization headers, `X-Amz-Signature=`,
//     `X-Amz-Credential=`, `X-Amz-Security-Token=`, SAS `sig=`, `AccountKey=`,
//     `delegation=`) and every value registered with `RegisterSecret` (the
//     credential loaders register what they load).
//
// Error messages built from remote responses should go through RedactSecrets
// too (see understore/), since a status message often ends up in a log line of
// another process.
//
// Usage:
//
//   LARDER_LOG(INFO, "s3.retry").Field("attempt", 2).Field("status", status);
//
// prints
//
//   2026-11-22T01:43:00.123456Z INFO s3.retry attempt=2 status="UNAVAILABLE:
//   ..." src=s3_store.cc:88
//
// Thread-safe: lines from concurrent threads never interleave.
#ifndef LARDER_COMMON_LOG_H_
#define LARDER_COMMON_LOG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace larder {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Parses "debug", "info", "warning" or "error" (case-insensitive).
// Returns InvalidArgument for anything else.
absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name);

// Lines below `level` are dropped. Default: kInfo. Process-wide.
void SetMinLogLevel(LogLevel level);
bool LogEnabled(LogLevel level);

// Registers a secret value (an access key, a signing key, a SAS token) so that
// no later log line or redacted message shows it. Values shorter than 4 bytes
// are ignored (masking them would mangle ordinary text). Process-wide.
void RegisterSecret(absl::string_view secret);

// Returns `text` with every registered secret and every known signing pattern
// replaced by `<redacted>`.
std::string RedactSecrets(absl::string_view text);

// One log line under construction; written when destroyed. Use LARDER_LOG.
class LogLine {
 public:
  LogLine(LogLevel level, absl::string_view event, const char* file, int line);
  ~LogLine();
  LogLine(const LogLine&) = delete;
  LogLine& operator=(const LogLine&) = delete;

  LogLine& Field(absl::string_view key, absl::string_view value);
  LogLine& Field(absl::string_view key, const char* value) {
    return Field(key, absl::string_view(value));
  }
  LogLine& Field(absl::string_view key, const std::string& value) {
    return Field(key, absl::string_view(value));
  }
  LogLine& Field(absl::string_view key, int64_t value);
  LogLine& Field(absl::string_view key, uint64_t value);
  LogLine& Field(absl::string_view key, int value) {
    return Field(key, static_cast<int64_t>(value));
  }
  LogLine& Field(absl::string_view key, unsigned value) {
    return Field(key, static_cast<uint64_t>(value));
  }
  LogLine& Field(absl::string_view key, unsigned long long value) {
    return Field(key, static_cast<uint64_t>(value));
  }
  LogLine& Field(absl::string_view key, long long value) {
    return Field(key, static_cast<int64_t>(value));
  }
  LogLine& Field(absl::string_view key, double value);
  LogLine& Field(absl::string_view key, bool value);
  LogLine& Field(absl::string_view key, absl::Duration value);
  LogLine& Field(absl::string_view key, const absl::Status& value);

  // The line as it will be written, without the trailing newline. Lets tests
  // check the format and the redaction without capturing stderr.
  std::string Render() const;

  // Builds the line but never writes it (for tests).
  void Discard() { discard_ = true; }

 private:
  void AppendRaw(absl::string_view key, absl::string_view value);

  LogLevel level_;
  std::string text_;  // Timestamp, level, event and fields so far.
  std::string source_;
  bool discard_ = false;
};

}  // namespace larder

// `severity` is one of DEBUG, INFO, WARNING, ERROR.
// A one-iteration loop rather than if/else: safe under an unbraced `if`
// (no dangling else) and the arguments are not evaluated when disabled.
#define LARDER_LOG(severity, event)                                         \
  for (bool larder_log_on_ =                                                \
           ::larder::LogEnabled(::larder::log_internal::k##severity);       \
       larder_log_on_; larder_log_on_ = false)                              \
  ::larder::LogLine(::larder::log_internal::k##severity, (event), __FILE__, \
                    __LINE__)

namespace larder::log_internal {
inline constexpr LogLevel kDEBUG = LogLevel::kDebug;
inline constexpr LogLevel kINFO = LogLevel::kInfo;
inline constexpr LogLevel kWARNING = LogLevel::kWarning;
inline constexpr LogLevel kERROR = LogLevel::kError;
}  // namespace larder::log_internal

#endif  // LARDER_COMMON_LOG_H_
