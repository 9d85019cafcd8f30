// Copyright 2026 The Larder Authors.
#include "master/invalidation_log.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace larder {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(InvalidationLogTest, ClientsGetThePathsAfterTheirSeq) {
  InvalidationLog log;
  EXPECT_EQ(log.seq(), 0u);
  log.Add("/a");
  log.Add("/b/c");
  log.Add("/d");
  v1::GetInvalidationsResponse r = log.Since(log.epoch(), 1);
  EXPECT_FALSE(r.reset());
  EXPECT_EQ(r.seq(), 3u);
  EXPECT_THAT(r.paths(), ElementsAre("/d", "/b/c"));
  r = log.Since(log.epoch(), 3);
  EXPECT_FALSE(r.reset());
  EXPECT_THAT(r.paths(), IsEmpty());
}

TEST(InvalidationLogTest, AnotherEpochOrAClientTooFarBehindResets) {
  InvalidationLog log;
  log.Add("/a");
  EXPECT_TRUE(log.Since(log.epoch() + 1, 0).reset());  // A restarted master.
  EXPECT_TRUE(log.Since(log.epoch(), 5).reset());      // Ahead: not this run.
  for (size_t i = 0; i < InvalidationLog::kKept + 1; ++i) log.Add("/x");
  EXPECT_TRUE(log.Since(log.epoch(), 0).reset());  // Fell off the log.
  EXPECT_FALSE(log.Since(log.epoch(), 2).reset());
  EXPECT_EQ(log.Since(log.epoch(), 2).paths_size(),
            static_cast<int>(InvalidationLog::kKept));
}

}  // namespace
}  // namespace larder
