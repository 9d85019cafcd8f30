// Copyright 2026 The Larder Authors.
#include "common/log.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"

namespace larder {
namespace {

// Process-wide logging state. Logging is inherently per process (one stderr),
// so this is the one justified piece of shared state; it is created on first
// use and never destroyed, so logging from static destructors stays safe.
struct LogState {
  std::atomic<int> min_level{static_cast<int>(LogLevel::kInfo)};
  absl::Mutex write_mu;
  absl::Mutex secrets_mu;
  std::vector<std::string> secrets ABSL_GUARDED_BY(secrets_mu);
};

LogState& State() {
  static LogState* state = new LogState;
  return *state;
}

constexpr absl::string_view kRedacted = "<redacted>";

// Keys whose values are masked wherever they appear as `key=value` or
// `key: value` in free text. Matched case-insensitively.
constexpr absl::string_view kSecretPatterns[] = {
    "authorization",
    "x-amz-signature",
    "x-amz-credential",
    "x-amz-security-token",
    "sig",
    "accountkey",
    "sharedaccesssignature",
    "delegation",
    "aws_secret_access_key",
    "aws_session_token",
    "password",
};

bool IsKeyChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' ||
         c == '_';
}

// Masks `pattern=value` / `pattern: value` occurrences of every secret pattern.
std::string MaskPatterns(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    bool masked = false;
    if (IsKeyChar(text[i]) && (i == 0 || !IsKeyChar(text[i - 1]))) {
      for (absl::string_view pattern : kSecretPatterns) {
        if (text.size() - i < pattern.size() + 1) continue;
        if (!absl::EqualsIgnoreCase(text.substr(i, pattern.size()), pattern))
          continue;
        size_t j = i + pattern.size();
        if (j < text.size() && IsKeyChar(text[j])) continue;  // Longer word.
        if (text[j] != '=' && text[j] != ':') continue;
        const bool header_style = text[j] == ':';
        ++j;
        while (j < text.size() && text[j] == ' ') ++j;
        size_t end = j;
        if (header_style) {
          // A header value runs to the end of the line.
          while (end < text.size() && text[end] != '\n' && text[end] != '\r' &&
                 text[end] != '"')
            ++end;
        } else {
          while (end < text.size() && !absl::ascii_isspace(text[end]) &&
                 text[end] != '&' && text[end] != ';' && text[end] != '"' &&
                 text[end] != '\'' && text[end] != ',')
            ++end;
        }
        absl::StrAppend(&out, text.substr(i, j - i), kRedacted);
        i = end;
        masked = true;
        break;
      }
    }
    if (!masked) out.push_back(text[i++]);
  }
  return out;
}

bool IsSecretKey(absl::string_view key) {
  std::string lower = absl::AsciiStrToLower(key);
  for (absl::string_view word :
       {"secret", "password", "token", "signature", "authorization",
        "credential", "account_key", "sas"}) {
    if (absl::StrContains(lower, word)) return true;
  }
  return false;
}

bool NeedsQuotes(absl::string_view value) {
  if (value.empty()) return true;
  for (char c : value) {
    if (c == ' ' || c == '"' || c == '=' || c == '\\' ||
        static_cast<unsigned char>(c) < 0x20)
      return true;
  }
  return false;
}

std::string Quote(absl::string_view value) {
  if (!NeedsQuotes(value)) return std::string(value);
  std::string out = "\"";
  for (char c : value) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppend(
              &out, "\\x",
              absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
  return out;
}

absl::string_view LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "DEBUG";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kWarning:
      return "WARN";
    case LogLevel::kError:
      return "ERROR";
  }
  return "?";
}

}  // namespace

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name) {
  std::string lower = absl::AsciiStrToLower(name);
  if (lower == "debug") return LogLevel::kDebug;
  if (lower == "info") return LogLevel::kInfo;
  if (lower == "warning" || lower == "warn") return LogLevel::kWarning;
  if (lower == "error") return LogLevel::kError;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown log level '", name, "' (want debug, info, warning or error)"));
}

void SetMinLogLevel(LogLevel level) {
  State().min_level.store(static_cast<int>(level), std::memory_order_relaxed);
}

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) >=
         State().min_level.load(std::memory_order_relaxed);
}

void RegisterSecret(absl::string_view secret) {
  if (secret.size() < 4) return;
  LogState& state = State();
  absl::MutexLock lock(&state.secrets_mu);
  if (std::find(state.secrets.begin(), state.secrets.end(), secret) ==
      state.secrets.end()) {
    state.secrets.emplace_back(secret);
    // Longest first, so a secret that contains another is masked whole.
    std::sort(state.secrets.begin(), state.secrets.end(),
              [](const std::string& a, const std::string& b) {
                return a.size() > b.size();
              });
  }
}

std::string RedactSecrets(absl::string_view text) {
  std::string out = MaskPatterns(text);
  LogState& state = State();
  absl::MutexLock lock(&state.secrets_mu);
  for (const std::string& secret : state.secrets) {
    if (absl::StrContains(out, secret))
      out = absl::StrReplaceAll(out, {{secret, kRedacted}});
  }
  return out;
}

LogLine::LogLine(LogLevel level, absl::string_view event, const char* file,
                 int line)
    : level_(level) {
  text_ = absl::StrCat(absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::Now(),
                                        absl::UTCTimeZone()),
                       " ", LevelName(level), " ", event);
  absl::string_view f(file);
  if (size_t slash = f.rfind('/'); slash != absl::string_view::npos)
    f.remove_prefix(slash + 1);
  source_ = absl::StrCat(f, ":", line);
}

LogLine::~LogLine() {
  if (discard_) return;
  std::string line = Render();
  line.push_back('\n');
  absl::MutexLock lock(&State().write_mu);
  size_t off = 0;
  while (off < line.size()) {
    ssize_t n = ::write(STDERR_FILENO, line.data() + off, line.size() - off);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
}

std::string LogLine::Render() const {
  return absl::StrCat(text_, " src=", source_);
}

void LogLine::AppendRaw(absl::string_view key, absl::string_view value) {
  absl::StrAppend(&text_, " ", key, "=", Quote(value));
}

LogLine& LogLine::Field(absl::string_view key, absl::string_view value) {
  if (IsSecretKey(key)) {
    AppendRaw(key, kRedacted);
  } else {
    AppendRaw(key, RedactSecrets(value));
  }
  return *this;
}

LogLine& LogLine::Field(absl::string_view key, int64_t value) {
  AppendRaw(key, absl::StrCat(value));
  return *this;
}
LogLine& LogLine::Field(absl::string_view key, uint64_t value) {
  AppendRaw(key, absl::StrCat(value));
  return *this;
}
LogLine& LogLine::Field(absl::string_view key, double value) {
  AppendRaw(key, absl::StrCat(value));
  return *this;
}
LogLine& LogLine::Field(absl::string_view key, bool value) {
  AppendRaw(key, value ? "true" : "false");
  return *this;
}
LogLine& LogLine::Field(absl::string_view key, absl::Duration value) {
  AppendRaw(key, absl::FormatDuration(value));
  return *this;
}
LogLine& LogLine::Field(absl::string_view key, const absl::Status& value) {
  // Without payloads (markers such as MarkStoreError are not for people).
  return Field(key, absl::string_view(value.ToString(
                        absl::StatusToStringMode::kWithNoExtraData)));
}

}  // namespace larder
