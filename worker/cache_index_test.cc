// Copyright 2026 The Larder Authors.
#include "worker/cache_index.h"

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

}  // namespace
}  // namespace larder
