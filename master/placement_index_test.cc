// Copyright 2026 The Larder Authors.
#include "master/placement_index.h"

#include <random>
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
  // holders at once, checked against a plain map.
  PlacementIndex index;
  std::mt19937_64 rng(1);
  std::vector<BlockKey> shared(5000);
  for (BlockKey& k : shared) k = {rng(), rng()};
  std::vector<std::vector<BlockKey>> own(4, std::vector<BlockKey>(20000));
  for (auto& keys : own)
    for (BlockKey& k : keys) k = {rng(), rng()};
  std::vector<std::thread> threads;
  for (PlacementIndex::Holder h = 1; h <= 4; ++h) {
    threads.emplace_back([&, h] {
      EXPECT_EQ(index.Add(h, own[h - 1]), 20000u);
      EXPECT_EQ(index.Add(h, shared), 5000u);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(index.replicas(), 4u * 25000);
  EXPECT_THAT(HoldersOf(index, shared[17]),
              UnorderedElementsAre(1u, 2u, 3u, 4u));
  EXPECT_THAT(HoldersOf(index, own[2][5]), ElementsAre(3u));
  // Holder 2 drops everything it reported, some of it twice.
  EXPECT_EQ(index.Remove(2, own[1]), 20000u);
  EXPECT_EQ(index.Remove(2, shared), 5000u);
  EXPECT_EQ(index.Remove(2, shared), 0u);
  EXPECT_THAT(HoldersOf(index, shared[17]), UnorderedElementsAre(1u, 3u, 4u));
  EXPECT_THAT(HoldersOf(index, own[1][5]), IsEmpty());
  EXPECT_EQ(index.replicas(), 3u * 25000);
  const uint64_t bytes = index.MemoryBytes();
  EXPECT_GT(bytes, 80000u * 24);
  index.Clear();
  EXPECT_EQ(index.replicas(), 0u);
  EXPECT_LT(index.MemoryBytes(), bytes);
}

}  // namespace
}  // namespace larder
