// Copyright 2026 The Larder Authors.
#include "common/block_key.h"

#include "gtest/gtest.h"

namespace larder {
namespace {

BlockId Id(uint64_t index, uint64_t size = 10 * kDefaultBlockSize + 5) {
  return BlockId{"m", "train/x.jpg", "etag1", index, kDefaultBlockSize, size};
}

TEST(BlockKeyTest, EveryFieldChangesTheKey) {
  const BlockKey base = Id(3).Key();
  BlockId b = Id(3);
  b.mount = "m2";
  EXPECT_NE(b.Key(), base);
  b = Id(3);
  b.path = "train/y.jpg";
  EXPECT_NE(b.Key(), base);
  b = Id(3);
  b.version = "etag2";
  EXPECT_NE(b.Key(), base);
  b = Id(3);
  b.block_size = 1 << 20;
  EXPECT_NE(b.Key(), base);
  EXPECT_NE(Id(4).Key(), base);
  // The object size is not part of the identity (the version is).
  EXPECT_EQ(Id(3, 11 * kDefaultBlockSize).Key(), base);
}

TEST(BlockKeyTest, Lengths) {
  EXPECT_EQ(Id(0).length(), kDefaultBlockSize);
  EXPECT_EQ(Id(10).length(), 5u);
  EXPECT_EQ(Id(11).length(), 0u);
  EXPECT_EQ(BlockCount(0, 4), 0u);
  EXPECT_EQ(BlockCount(4, 4), 1u);
  EXPECT_EQ(BlockCount(5, 4), 2u);
  BlockId small{"m", "s", "v", 0, kDefaultBlockSize, 100};
  EXPECT_EQ(small.length(), 100u);
  EXPECT_TRUE(small.Validate().ok());
  EXPECT_EQ(Id(11).Validate().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BlockKeyTest, HexRoundTrip) {
  BlockKey k = Id(1).Key(), back;
  ASSERT_TRUE(BlockKey::FromHex(k.ToHex(), &back));
  EXPECT_EQ(k, back);
  EXPECT_FALSE(BlockKey::FromHex("xyz", &back));
  EXPECT_FALSE(BlockKey::FromHex(std::string(32, 'g'), &back));
}

}  // namespace
}  // namespace larder
