// Copyright 2026 The Larder Authors.
#include "worker/cache_index.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "gtest/gtest.h"

namespace larder {
namespace {

BlockKey K(uint64_t i) { return BlockKey{i, 0}; }
const absl::Time kNow = absl::FromUnixSeconds(1000000);

TEST(CacheIndexTest, LruEvictsLeastRecentlyUsedFirst) {
  CacheIndex<int> idx(300, EvictionPolicy::kLru);
  std::vector<int> evicted;
  ASSERT_TRUE(
      idx.Admit(K(1), 1, 100, false, absl::InfiniteDuration(), kNow, &evicted));
  ASSERT_TRUE(
      idx.Admit(K(2), 2, 100, false, absl::InfiniteDuration(), kNow, &evicted));
  ASSERT_TRUE(
      idx.Admit(K(3), 3, 100, false, absl::InfiniteDuration(), kNow, &evicted));
  ASSERT_NE(idx.Find(K(1), kNow), nullptr);  // 1 is now the most recent.
  ASSERT_TRUE(
      idx.Admit(K(4), 4, 150, false, absl::InfiniteDuration(), kNow, &evicted));
  EXPECT_EQ(evicted, (std::vector<int>{2, 3}));
  EXPECT_EQ(idx.used(), 250u);
  EXPECT_EQ(idx.evictions(), 2u);
  EXPECT_NE(idx.Find(K(1), kNow), nullptr);
  EXPECT_EQ(idx.Find(K(2), kNow), nullptr);
}

TEST(CacheIndexTest, NeverAboveCapacity) {
  CacheIndex<int> idx(1000, EvictionPolicy::kLru);
  for (int i = 0; i < 500; ++i) {
    idx.Admit(K(i), i, 1 + (i * 37) % 300, false, absl::InfiniteDuration(),
              kNow, nullptr);
    ASSERT_LE(idx.used(), 1000u);
  }
  EXPECT_FALSE(idx.Admit(K(9999), 0, 1001, false, absl::InfiniteDuration(),
                         kNow, nullptr));
}

TEST(CacheIndexTest, PolicyNoneAdmitsUntilFullThenStops) {
  CacheIndex<int> idx(300, EvictionPolicy::kNone);
  EXPECT_TRUE(
      idx.Admit(K(1), 1, 100, false, absl::InfiniteDuration(), kNow, nullptr));
  EXPECT_TRUE(
      idx.Admit(K(2), 2, 200, false, absl::InfiniteDuration(), kNow, nullptr));
  std::vector<int> evicted;
  EXPECT_FALSE(
      idx.Admit(K(3), 3, 1, false, absl::InfiniteDuration(), kNow, &evicted));
  EXPECT_TRUE(evicted.empty());
  EXPECT_NE(idx.Find(K(1), kNow), nullptr);
  EXPECT_NE(idx.Find(K(2), kNow), nullptr);
}

TEST(CacheIndexTest, PinnedEntriesAreNeverEvicted) {
  CacheIndex<int> idx(300, EvictionPolicy::kLru);
  ASSERT_TRUE(
      idx.Admit(K(1), 1, 200, true, absl::InfiniteDuration(), kNow, nullptr));
  ASSERT_TRUE(
      idx.Admit(K(2), 2, 100, false, absl::InfiniteDuration(), kNow, nullptr));
  std::vector<int> evicted;
  ASSERT_TRUE(
      idx.Admit(K(3), 3, 100, false, absl::InfiniteDuration(), kNow, &evicted));
  EXPECT_EQ(evicted, std::vector<int>{2});
  EXPECT_FALSE(
      idx.Admit(K(4), 4, 150, false, absl::InfiniteDuration(), kNow, nullptr));
  EXPECT_NE(idx.Find(K(1), kNow), nullptr);
}

TEST(CacheIndexTest, TtlExpiresEntries) {
  CacheIndex<int> idx(300, EvictionPolicy::kNone);
  ASSERT_TRUE(idx.Admit(K(1), 1, 300, false, absl::Minutes(5), kNow, nullptr));
  EXPECT_NE(idx.Find(K(1), kNow + absl::Minutes(4)), nullptr);
  // Expired entries make room even under policy none.
  EXPECT_TRUE(idx.Admit(K(2), 2, 100, false, absl::InfiniteDuration(),
                        kNow + absl::Minutes(6), nullptr));
  EXPECT_EQ(idx.Find(K(1), kNow + absl::Minutes(6)), nullptr);
  EXPECT_EQ(idx.used(), 100u);
}

TEST(CacheIndexTest, LeasedEntriesAreNotEvictedUntilReleaseOrExpiry) {
  CacheIndex<int> idx(200, EvictionPolicy::kLru);
  ASSERT_TRUE(
      idx.Admit(K(1), 1, 100, false, absl::InfiniteDuration(), kNow, nullptr));
  ASSERT_TRUE(
      idx.Admit(K(2), 2, 100, false, absl::InfiniteDuration(), kNow, nullptr));
  ASSERT_TRUE(idx.Lease(K(1), kNow + absl::Seconds(30)));
  ASSERT_TRUE(idx.Lease(K(2), kNow + absl::Seconds(30)));
  EXPECT_FALSE(
      idx.Admit(K(3), 3, 100, false, absl::InfiniteDuration(), kNow, nullptr));
  idx.Unlease(K(2));
  std::vector<int> evicted;
  EXPECT_TRUE(
      idx.Admit(K(3), 3, 100, false, absl::InfiniteDuration(), kNow, &evicted));
  EXPECT_EQ(evicted, std::vector<int>{2});
  // After the lease times out, 1 is evictable again.
  EXPECT_TRUE(idx.Admit(K(4), 4, 100, false, absl::InfiniteDuration(),
                        kNow + absl::Seconds(31), &evicted));
}

// A lease until released (an export to the FUSE daemon) holds its entry
// until its Unlease, and lends the leases with a duration beside it none
// of its length: once it is released they end when theirs do.
TEST(CacheIndexTest, ALeaseUntilReleasedDoesNotLengthenTheOthers) {
  CacheIndex<int> idx(200, EvictionPolicy::kLru);
  ASSERT_TRUE(
      idx.Admit(K(1), 1, 100, false, absl::InfiniteDuration(), kNow, nullptr));
  ASSERT_TRUE(
      idx.Admit(K(2), 2, 100, false, absl::InfiniteDuration(), kNow, nullptr));
  ASSERT_TRUE(idx.Lease(K(1), absl::InfiniteFuture()));
  ASSERT_TRUE(idx.Lease(K(1), kNow + absl::Seconds(30)));
  ASSERT_TRUE(idx.Lease(K(2), absl::InfiniteFuture()));
  const absl::Time later = kNow + absl::Hours(1);
  std::vector<int> evicted;
  EXPECT_FALSE(idx.Admit(K(3), 3, 100, false, absl::InfiniteDuration(), later,
                         &evicted));  // Both held, an hour on.
  idx.Unlease(K(1), absl::InfiniteFuture());
  // 1's other lease ran out after 30 s: 1 goes, 2 stays held.
  EXPECT_TRUE(idx.Admit(K(3), 3, 100, false, absl::InfiniteDuration(), later,
                        &evicted));
  EXPECT_EQ(evicted, std::vector<int>{1});
  evicted.clear();
  // 2 stays held: 3 goes instead.
  EXPECT_TRUE(idx.Admit(K(4), 4, 100, false, absl::InfiniteDuration(), later,
                        &evicted));
  EXPECT_EQ(evicted, std::vector<int>{3});
  evicted.clear();
  // A lease with a duration released at once leaves no end behind.
  ASSERT_TRUE(idx.Lease(K(4), later + absl::Hours(5)));
  idx.Unlease(K(4));
  ASSERT_TRUE(idx.Lease(K(4), later + absl::Seconds(1)));
  EXPECT_TRUE(idx.Admit(K(5), 5, 100, false, absl::InfiniteDuration(),
                        later + absl::Seconds(2), &evicted));
  EXPECT_EQ(evicted, std::vector<int>{4});
}

TEST(CacheRulesTest, LongestPrefixWins) {
  auto rules =
      CacheRules::Parse({"imagenet/train"}, {"imagenet=1h", "imagenet/val=5m"});
  ASSERT_TRUE(rules.ok()) << rules.status();
  BlockId a{"imagenet", "train/x.jpg", "v", 0, 4096, 10};
  BlockId b{"imagenet", "val/x.jpg", "v", 0, 4096, 10};
  BlockId c{"coco", "x.jpg", "v", 0, 4096, 10};
  EXPECT_TRUE(rules->Pinned(a));
  EXPECT_FALSE(rules->Pinned(b));
  EXPECT_EQ(rules->Ttl(a), absl::Hours(1));
  EXPECT_EQ(rules->Ttl(b), absl::Minutes(5));
  EXPECT_EQ(rules->Ttl(c), absl::InfiniteDuration());
  EXPECT_FALSE(CacheRules::Parse({}, {"x=soon"}).ok());
  EXPECT_FALSE(CacheRules::Parse({}, {"=5m"}).ok());
}

TEST(CacheIndexTest, EntryBoundEvictsLikeCapacity) {
  // Room for 10 bytes but 2 entries: the third small entry evicts the LRU.
  CacheIndex<int> idx(1000, EvictionPolicy::kLru, /*max_entries=*/2);
  std::vector<int> evicted;
  ASSERT_TRUE(
      idx.Admit(K(1), 1, 1, false, absl::InfiniteDuration(), kNow, &evicted));
  ASSERT_TRUE(
      idx.Admit(K(2), 2, 1, false, absl::InfiniteDuration(), kNow, &evicted));
  ASSERT_TRUE(idx.Find(K(1), kNow) != nullptr);  // 2 is now the LRU.
  ASSERT_TRUE(
      idx.Admit(K(3), 3, 1, false, absl::InfiniteDuration(), kNow, &evicted));
  EXPECT_EQ(evicted, std::vector<int>{2});
  EXPECT_EQ(idx.size(), 2u);
  // Policy none: full by count, the new entry is refused.
  CacheIndex<int> none(1000, EvictionPolicy::kNone, 1);
  ASSERT_TRUE(
      none.Admit(K(1), 1, 1, false, absl::InfiniteDuration(), kNow, nullptr));
  EXPECT_FALSE(
      none.Admit(K(2), 2, 1, false, absl::InfiniteDuration(), kNow, nullptr));
  EXPECT_EQ(none.size(), 1u);
}

// Hits per epoch of a dataset of `blocks` equal blocks read in a new
// random order every epoch through a tier of `capacity` blocks: a miss is
// admitted (when the index lets it in), as the block store does.
std::vector<double> EpochHitRates(int blocks, int capacity, int epochs,
                                  absl::Duration protect) {
  CacheIndex<int> idx(static_cast<uint64_t>(capacity) * 100,
                      EvictionPolicy::kLru);
  std::vector<int> order(static_cast<size_t>(blocks));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937 rng(7);
  std::vector<double> rates;
  absl::Time now = kNow;
  for (int e = 0; e < epochs; ++e) {
    std::shuffle(order.begin(), order.end(), rng);
    int hits = 0;
    for (int b : order) {
      now += absl::Milliseconds(1);  // An epoch: blocks x 1 ms.
      if (idx.Find(K(static_cast<uint64_t>(b)), now) != nullptr) {
        ++hits;
      } else {
        idx.Admit(K(static_cast<uint64_t>(b)), b, 100, false,
                  absl::InfiniteDuration(), now, nullptr, protect);
      }
      EXPECT_LE(idx.used(), static_cast<uint64_t>(capacity) * 100);
    }
    rates.push_back(static_cast<double>(hits) / blocks);
  }
  return rates;
}

TEST(CacheIndexTest, ProtectedEntriesKeepADatasetLargerThanTheTierCached) {
  // A dataset 1.2x the tier: LRU keeps evicting what the epoch reads next;
  // protection longer than an epoch keeps 1/1.2 of it every epoch.
  const std::vector<double> lru =
      EpochHitRates(1200, 1000, 5, absl::ZeroDuration());
  const std::vector<double> epoch =
      EpochHitRates(1200, 1000, 5, absl::Seconds(10));
  EXPECT_EQ(epoch[0], 0.0);
  for (int e = 1; e < 5; ++e) {
    EXPECT_GE(epoch[e], 0.80) << "epoch " << e;
    EXPECT_LT(lru[e], 0.70) << "epoch " << e;  // About 0.55 with this seed.
  }
}

TEST(CacheIndexTest, AProtectedEntryIsEvictableOnceItsPeriodPassesUnread) {
  CacheIndex<int> idx(200, EvictionPolicy::kLru);
  std::vector<int> evicted;
  const absl::Duration p = absl::Minutes(10);
  ASSERT_TRUE(idx.Admit(K(1), 1, 100, false, absl::InfiniteDuration(), kNow,
                        &evicted, p));
  ASSERT_TRUE(idx.Admit(K(2), 2, 100, false, absl::InfiniteDuration(), kNow,
                        &evicted, p));
  // Full of protected entries: a new one is refused and nothing goes.
  EXPECT_FALSE(idx.Admit(K(3), 3, 100, false, absl::InfiniteDuration(),
                         kNow + absl::Minutes(5), &evicted, p));
  EXPECT_TRUE(evicted.empty());
  EXPECT_EQ(idx.size(), 2u);
  // Reading 1 protects it again; 2, unread for the period, goes.
  ASSERT_NE(idx.Find(K(1), kNow + absl::Minutes(9)), nullptr);
  EXPECT_TRUE(idx.Admit(K(3), 3, 100, false, absl::InfiniteDuration(),
                        kNow + absl::Minutes(11), &evicted, p));
  EXPECT_EQ(evicted, (std::vector<int>{2}));
  // An unprotected entry (another mount's, LRU) goes before protected ones
  // even when it is more recent.
  CacheIndex<int> mixed(200, EvictionPolicy::kLru);
  ASSERT_TRUE(mixed.Admit(K(1), 1, 100, false, absl::InfiniteDuration(), kNow,
                          nullptr, p));
  ASSERT_TRUE(mixed.Admit(K(2), 2, 100, false, absl::InfiniteDuration(), kNow,
                          nullptr));
  evicted.clear();
  EXPECT_TRUE(mixed.Admit(K(3), 3, 100, false, absl::InfiniteDuration(), kNow,
                          &evicted, p));
  EXPECT_EQ(evicted, (std::vector<int>{2}));
  // Erasing and replacing keep the bookkeeping: the tier empties cleanly.
  EXPECT_TRUE(mixed.Erase(K(1)).has_value());
  EXPECT_TRUE(mixed.Admit(K(3), 33, 100, false, absl::InfiniteDuration(), kNow,
                          nullptr, p));
  EXPECT_TRUE(mixed.Erase(K(3)).has_value());
  EXPECT_EQ(mixed.used(), 0u);
  EXPECT_TRUE(mixed.Admit(K(4), 4, 200, false, absl::InfiniteDuration(), kNow,
                          nullptr));
}

}  // namespace
}  // namespace larder
