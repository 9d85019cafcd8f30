// Copyright 2026 The Larder Authors.
#include "common/retry.h"

#include <algorithm>

#include "absl/random/random.h"
#include "absl/strings/cord.h"
#include "absl/time/clock.h"
#include "common/log.h"

namespace larder {

namespace {
constexpr char kStalledPayload[] = "type.larder.dev/stalled";
}  // namespace

absl::Status StalledError(absl::string_view message) {
  absl::Status st = absl::DeadlineExceededError(message);
  st.SetPayload(kStalledPayload, absl::Cord("1"));
  return st;
}

bool IsStalled(const absl::Status& status) {
  return status.GetPayload(kStalledPayload).has_value();
}

bool IsRetryable(const absl::Status& status) {
  if (IsStalled(status)) return false;
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kResourceExhausted:
      return true;
    default:
      return false;
  }
}

absl::Duration BackoffCeiling(const RetryOptions& options, int retry) {
  absl::Duration ceiling = options.initial_backoff;
  for (int i = 0; i < retry && ceiling < options.max_backoff; ++i) ceiling *= 2;
  return std::min(ceiling, options.max_backoff);
}

absl::Status RetryWithBackoff(const RetryOptions& options,
                              absl::string_view what,
                              absl::FunctionRef<absl::Status()> attempt) {
  absl::BitGen rng;
  const int attempts = std::max(1, options.max_attempts);
  absl::Status status;
  for (int i = 0; i < attempts; ++i) {
    status = attempt();
    if (status.ok() || !IsRetryable(status) || i + 1 == attempts) break;
    const absl::Duration ceiling = BackoffCeiling(options, i);
    // Equal jitter: at least half the ceiling, so a retry budget lasts at
    // least half its nominal time (full jitter let a load's 8 attempts,
    // nominally 15 s, run out within a 2 s worker restart).
    const int64_t half = absl::ToInt64Nanoseconds(ceiling) / 2;
    const absl::Duration sleep =
        absl::Nanoseconds(half + absl::Uniform<int64_t>(rng, 0, half + 1));
    LARDER_LOG(WARNING, "retry")
        .Field("op", what)
        .Field("attempt", i + 1)
        .Field("of", attempts)
        .Field("backoff", sleep)
        .Field("status", status);
    absl::SleepFor(sleep);
  }
  return status;
}

}  // namespace larder
