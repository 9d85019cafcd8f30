// Copyright 2026 The Larder Authors.
#include "common/outage_pause.h"

#include "gtest/gtest.h"

namespace larder {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000000);
absl::Time At(double seconds) { return kT0 + absl::Seconds(seconds); }

TEST(OutagePauseTest, AFailedTryPausesAndEachFailedTryDoublesThePause) {
  OutagePause pause;
  const absl::Status down = absl::UnavailableError("connection refused");
  EXPECT_FALSE(pause.Check("/m", At(0)).has_value());
  pause.Failed("/m", At(0), At(5), down);  // 5 s of the store's retries.

  std::optional<OutagePause::Outage> o = pause.Check("/m", At(5.25));
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->why, down);
  EXPECT_EQ(o->left, absl::Milliseconds(750));
  EXPECT_FALSE(pause.Check("/other", At(5.25)).has_value());

  // The pause over: one caller tries, the others are still answered.
  EXPECT_FALSE(pause.Check("/m", At(6)).has_value());
  o = pause.Check("/m", At(6.5));
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->left, absl::ZeroDuration());
  pause.Failed("/m", At(6), At(7), down);
  EXPECT_EQ(pause.Check("/m", At(7))->left, absl::Seconds(2));
  for (double t = 9;; t += 1) {  // 4, 8, 16, then 30 s at most.
    ASSERT_LT(t, 200);
    if (pause.Check("/m", At(t)).has_value()) continue;
    pause.Failed("/m", At(t), At(t), down);
    if (pause.Check("/m", At(t))->left == absl::Seconds(30)) break;
  }
  EXPECT_EQ(pause.outages(), 1u);
}

TEST(OutagePauseTest, TheFirstAnswerEndsTheOutage) {
  OutagePause pause;
  pause.Failed("/m", At(0), At(1), absl::UnavailableError("down"));
  EXPECT_TRUE(pause.Check("/m", At(1.5)).has_value());
  EXPECT_FALSE(pause.Check("/m", At(2)).has_value());  // The try.
  pause.Succeeded("/m");
  EXPECT_FALSE(pause.Check("/m", At(2.1)).has_value());
  EXPECT_FALSE(pause.Check("/m", At(2.1)).has_value());
  EXPECT_EQ(pause.outages(), 0u);
  // Down again later: the pause starts from 1 s again.
  pause.Failed("/m", At(10), At(11), absl::UnavailableError("down"));
  EXPECT_EQ(pause.Check("/m", At(11))->left, absl::Seconds(1));
}

TEST(OutagePauseTest, FailuresThatCameTogetherDoubleThePauseOnce) {
  OutagePause pause;
  const absl::Status down = absl::DeadlineExceededError("timeout");
  // Three callers asked at 0 and 0.1 s, before anyone knew.
  pause.Failed("/m", At(0), At(5), down);
  pause.Failed("/m", At(0.1), At(5.1), down);
  pause.Failed("/m", At(0.1), At(5.2), down);
  EXPECT_EQ(pause.Check("/m", At(5.5))->left, absl::Milliseconds(500));
  // A caller that asked after the pause ended without Check (one that only
  // consults the pause when it has something else to answer with) doubles.
  pause.Failed("/m", At(6.5), At(7), down);
  EXPECT_EQ(pause.Check("/m", At(7))->left, absl::Seconds(2));
}

TEST(OutagePauseTest, ATryThatSaysNothingOrNeverReportsLetsAnotherTry) {
  OutagePause::Options options;
  options.try_timeout = absl::Seconds(60);
  OutagePause pause(options);
  pause.Failed("/m", At(0), At(0), absl::UnavailableError("down"));
  EXPECT_FALSE(pause.Check("/m", At(1)).has_value());  // A try...
  // Another caller, which was not the try, gives up: the try still holds.
  pause.Abandoned("/m", At(0.9));
  EXPECT_TRUE(pause.Check("/m", At(1.05)).has_value());
  pause.Abandoned("/m", At(1));                          // ...that did not ask.
  EXPECT_FALSE(pause.Check("/m", At(1.1)).has_value());  // The next tries.
  EXPECT_TRUE(pause.Check("/m", At(30)).has_value());
  // That one never reported: after try_timeout, another caller tries.
  EXPECT_FALSE(pause.Check("/m", At(61.2)).has_value());
}

}  // namespace
}  // namespace larder
