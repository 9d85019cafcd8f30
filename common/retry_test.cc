// Copyright 2026 The Larder Authors.
#include "common/retry.h"

#include "gtest/gtest.h"

namespace larder {
namespace {

RetryOptions Fast(int attempts) {
  RetryOptions o;
  o.max_attempts = attempts;
  o.initial_backoff = absl::Microseconds(10);
  o.max_backoff = absl::Microseconds(100);
  return o;
}

TEST(RetryTest, RetriesUnavailableUntilSuccess) {
  int calls = 0;
  absl::Status s = RetryWithBackoff(Fast(5), "t", [&] {
    return ++calls < 3 ? absl::UnavailableError("down") : absl::OkStatus();
  });
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(calls, 3);
}

TEST(RetryTest, StopsAtMaxAttemptsWithLastError) {
  int calls = 0;
  absl::Status s = RetryWithBackoff(Fast(4), "t", [&] {
    ++calls;
    return absl::DeadlineExceededError("slow");
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(calls, 4);
}

TEST(RetryTest, NonRetryableReturnsAtOnce) {
  int calls = 0;
  absl::Status s = RetryWithBackoff(Fast(5), "t", [&] {
    ++calls;
    return absl::NotFoundError("gone");
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(calls, 1);
}

TEST(RetryTest, AStalledRequestIsNotRepeated) {
  int calls = 0;
  absl::Status st = RetryWithBackoff(Fast(5), "test", [&] {
    ++calls;
    return StalledError("the store sent nothing for 20s");
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(IsStalled(st));
  EXPECT_FALSE(IsRetryable(st));
  EXPECT_TRUE(IsRetryable(absl::DeadlineExceededError("a timeout")));
}

TEST(RetryTest, BackoffDoublesAndCaps) {
  RetryOptions o;
  o.initial_backoff = absl::Milliseconds(50);
  o.max_backoff = absl::Milliseconds(300);
  EXPECT_EQ(BackoffCeiling(o, 0), absl::Milliseconds(50));
  EXPECT_EQ(BackoffCeiling(o, 1), absl::Milliseconds(100));
  EXPECT_EQ(BackoffCeiling(o, 2), absl::Milliseconds(200));
  EXPECT_EQ(BackoffCeiling(o, 3), absl::Milliseconds(300));
  EXPECT_EQ(BackoffCeiling(o, 30), absl::Milliseconds(300));
}

// Equal jitter: every sleep is at least half its ceiling, so a retry budget
// cannot run out early by luck (10 + 20 + 40 ms at least here).
TEST(RetryTest, RetriesTakeAtLeastHalfTheirNominalTime) {
  RetryOptions o;
  o.max_attempts = 4;
  o.initial_backoff = absl::Milliseconds(20);
  o.max_backoff = absl::Seconds(1);
  for (int round = 0; round < 5; ++round) {
    const absl::Time start = absl::Now();
    absl::Status s =
        RetryWithBackoff(o, "t", [] { return absl::UnavailableError("down"); });
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
    EXPECT_GE(absl::Now() - start, absl::Milliseconds(70));
  }
}

}  // namespace
}  // namespace larder
