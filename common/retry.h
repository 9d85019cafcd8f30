// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: retry.h
// -----------------------------------------------------------------------------
//
// Retries an idempotent operation with exponential backoff and equal jitter
// ("Exponential Backoff And Jitter", AWS Architecture Blog): with ceiling
// c = min(max_backoff, initial_backoff * 2^n), the n-th retry sleeps
// c/2 + uniform(0, c/2), so retries stay spread out while their total time
// never falls below half the nominal budget.
//
// Usage:
//
//   absl::Status s = larder::RetryWithBackoff(options.retry, "s3.get", [&] {
//     return DoOneGet();
//   });
#ifndef LARDER_COMMON_RETRY_H_
#define LARDER_COMMON_RETRY_H_

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/config.h"

namespace larder {

// True for the codes that mean "the same request may succeed later":
// Unavailable (server down, 5xx, connection reset), DeadlineExceeded (timeout)
// and ResourceExhausted (throttling, 429/503 SlowDown); not a stalled
// request (IsStalled).
bool IsRetryable(const absl::Status& status);

// A request that got no byte from the store for the whole --store_timeout:
// DeadlineExceeded, and not retryable (IsRetryable is false for it).
absl::Status StalledError(absl::string_view message);
bool IsStalled(const absl::Status& status);

// The backoff ceiling before retry number `retry` (0-based), without jitter.
absl::Duration BackoffCeiling(const RetryOptions& options, int retry);

// Calls `attempt` until it returns a non-retryable status or
// `options.max_attempts` calls were made; returns the last status. Each retry
// is logged at WARNING with `what`. Thread-safe (no shared state).
absl::Status RetryWithBackoff(const RetryOptions& options,
                              absl::string_view what,
                              absl::FunctionRef<absl::Status()> attempt);

}  // namespace larder

#endif  // LARDER_COMMON_RETRY_H_
