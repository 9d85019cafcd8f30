// Copyright 2026 The Larder Authors.
#include "cli/advise_model.h"

#include "gtest/gtest.h"

namespace larder::cli {
namespace {

// 100 GB read at 2 GB/s from the cache and 0.5 GB/s from the store, by
// accelerators that consume 1 GB/s.
AdviseRates Rates() {
  return {.dataset_bytes = 100e9,
          .cache_rate = 2e9,
          .store_rate = 0.5e9,
          .gpu_rate = 1e9};
}

TEST(AdviseModelTest, ReadsTheCachedShareAtTheCachesRateAndTheRestAtTheStores) {
  const EpochPrediction none = PredictEpoch(Rates(), 0);
  EXPECT_DOUBLE_EQ(none.hit_fraction, 0);
  EXPECT_DOUBLE_EQ(none.io_seconds, 200);  // 100 GB at 0.5 GB/s.
  EXPECT_DOUBLE_EQ(none.compute_seconds, 100);
  EXPECT_DOUBLE_EQ(none.epoch_seconds, 200);
  EXPECT_DOUBLE_EQ(none.gpu_wait_seconds, 100);
  const EpochPrediction half = PredictEpoch(Rates(), 50e9);
  EXPECT_DOUBLE_EQ(half.io_seconds, 25 + 100);
  EXPECT_DOUBLE_EQ(half.gpu_wait_seconds, 25);
  // All of it: I/O (50 s) hides under the compute (100 s).
  const EpochPrediction all = PredictEpoch(Rates(), 100e9);
  EXPECT_DOUBLE_EQ(all.io_seconds, 50);
  EXPECT_DOUBLE_EQ(all.epoch_seconds, 100);
  EXPECT_DOUBLE_EQ(all.gpu_wait_seconds, 0);
  // More cache than data hits no more than all of it.
  EXPECT_DOUBLE_EQ(PredictEpoch(Rates(), 300e9).hit_fraction, 1);
  // Without an accelerators' rate: I/O alone.
  AdviseRates io = Rates();
  io.gpu_rate = 0;
  EXPECT_DOUBLE_EQ(PredictEpoch(io, 50e9).epoch_seconds, 125);
  EXPECT_DOUBLE_EQ(PredictEpoch(io, 50e9).gpu_wait_seconds, 0);
}

TEST(AdviseModelTest,
     TheCacheToHaveIsTheSmallestThatKeepsTheWaitWithinItsShare) {
  // No wait: f * 50 + (1 - f) * 200 <= 100 -> f >= 2/3.
  const double c = CacheForWaitShare(Rates(), 0);
  EXPECT_NEAR(c, 100e9 * 2 / 3, 1);
  EXPECT_LE(PredictEpoch(Rates(), c).gpu_wait_seconds, 1e-6);
  EXPECT_GT(PredictEpoch(Rates(), c - 1e9).gpu_wait_seconds, 0);
  // 20% wait allowed: I/O within 125 s -> f >= 0.5.
  EXPECT_NEAR(CacheForWaitShare(Rates(), 0.2), 50e9, 1);
  // The store alone keeps up.
  AdviseRates fast_store = Rates();
  fast_store.store_rate = 1.5e9;
  EXPECT_EQ(CacheForWaitShare(fast_store, 0.05), 0);
  // Not even the cache keeps up.
  AdviseRates hungry = Rates();
  hungry.gpu_rate = 3e9;
  EXPECT_EQ(CacheForWaitShare(hungry, 0.05), -1);
  // No accelerators' rate: the whole dataset.
  AdviseRates io = Rates();
  io.gpu_rate = 0;
  EXPECT_EQ(CacheForWaitShare(io, 0.05), 100e9);
}

}  // namespace
}  // namespace larder::cli
