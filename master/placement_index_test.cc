// Copyright 2026 The Larder Authors.
#include "master/placement_index.h"

#include <map>
#include <random>
#include <set>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace larder {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

std::vector<PlacementIndex::Holder> HoldersOf(const PlacementIndex& index,
                                              const BlockKey& key) {
  std::vector<PlacementIndex::Holder> out;
  index.Find(key, &out);
  return out;
}

TEST(PlacementIndexTest, OneTwoAndManyHolders) {
  PlacementIndex index;
  const BlockKey k{7, 7};
  EXPECT_EQ(index.Add(1, {k}), 1u);
  EXPECT_EQ(index.Add(1, {k}), 0u);  // Already held.
  EXPECT_THAT(HoldersOf(index, k), ElementsAre(1u));
  // A second holder moves the list aside; it comes back inline at one.
  EXPECT_EQ(index.Add(2, {k}), 1u);
  EXPECT_EQ(index.Add(2, {k}), 0u);
  EXPECT_THAT(HoldersOf(index, k), UnorderedElementsAre(1u, 2u));
  EXPECT_EQ(index.Add(3, {k}), 1u);
  EXPECT_EQ(index.Add(4, {k}), 1u);
  EXPECT_EQ(index.Add(3, {k}), 0u);
  EXPECT_THAT(HoldersOf(index, k), UnorderedElementsAre(1u, 2u, 3u, 4u));
  EXPECT_EQ(index.replicas(), 4u);
  EXPECT_EQ(index.Remove(2, {k}), 1u);
  EXPECT_EQ(index.Remove(2, {k}), 0u);
  EXPECT_EQ(index.Remove(1, {k}), 1u);
  EXPECT_THAT(HoldersOf(index, k), UnorderedElementsAre(3u, 4u));
  EXPECT_TRUE(index.Holds(4, k));
  EXPECT_FALSE(index.Holds(1, k));
  EXPECT_EQ(index.Remove(4, {k}), 1u);
  EXPECT_THAT(HoldersOf(index, k), ElementsAre(3u));
  EXPECT_EQ(index.Remove(4, {k}), 0u);
  EXPECT_EQ(index.Add(5, {k}), 1u);  // Aside again, and back.
  EXPECT_EQ(index.Remove(3, {k}), 1u);
  EXPECT_THAT(HoldersOf(index, k), ElementsAre(5u));
  EXPECT_EQ(index.Remove(5, {k}), 1u);
  EXPECT_THAT(HoldersOf(index, k), IsEmpty());
  EXPECT_EQ(index.replicas(), 0u);
  EXPECT_EQ(index.Remove(9, {BlockKey{1, 2}}), 0u);  // Never held.
}

TEST(PlacementIndexTest, LargeReportsAgreeWithAPlainMap) {
  // Reports big enough to take the sorted (per-shard) path, from several
  // holders at once, checked key by key against a plain map.
  PlacementIndex index;
  std::mt19937_64 rng(1);
  std::vector<BlockKey> shared(5000);
  for (BlockKey& k : shared) k = {rng(), rng()};
  std::vector<std::vector<BlockKey>> own(4, std::vector<BlockKey>(20000));
  for (auto& keys : own)
    for (BlockKey& k : keys) k = {rng(), rng()};
  std::map<BlockKey, std::set<PlacementIndex::Holder>> expected;
  auto agree = [&] {
    int wrong = 0;
    for (const auto& [key, holders] : expected) {
      std::vector<PlacementIndex::Holder> got = HoldersOf(index, key);
      wrong +=
          std::set<PlacementIndex::Holder>(got.begin(), got.end()) != holders ||
          got.size() != holders.size();
      for (PlacementIndex::Holder h = 1; h <= 4; ++h)
        wrong += index.Holds(h, key) != holders.contains(h);
    }
    return wrong;
  };
  std::vector<std::thread> threads;
  for (PlacementIndex::Holder h = 1; h <= 4; ++h) {
    threads.emplace_back([&, h] {
      EXPECT_EQ(index.Add(h, own[h - 1]), 20000u);
      EXPECT_EQ(index.Add(h, shared), 5000u);
    });
    for (const BlockKey& k : own[h - 1]) expected[k].insert(h);
    for (const BlockKey& k : shared) expected[k].insert(h);
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(index.replicas(), 4u * 25000);
  EXPECT_EQ(agree(), 0);
  // Holder 2 drops everything it reported, some of it twice.
  EXPECT_EQ(index.Remove(2, own[1]), 20000u);
  EXPECT_EQ(index.Remove(2, shared), 5000u);
  EXPECT_EQ(index.Remove(2, shared), 0u);
  for (auto& [key, holders] : expected) holders.erase(2);
  EXPECT_EQ(agree(), 0);
  EXPECT_THAT(HoldersOf(index, own[1][5]), IsEmpty());
  EXPECT_EQ(index.replicas(), 3u * 25000);
  // 100,000 keys were in the tables at most: 20-byte slots at 7/16 to 7/8
  // full, plus control bytes.
  EXPECT_GT(index.MemoryBytes(), 100000u * 21);
  EXPECT_LT(index.MemoryBytes(), 100000u * 21 * 16 / 7 * 2);
}

}  // namespace
}  // namespace larder
