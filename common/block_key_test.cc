// Copyright 2026 The Larder Authors.
#include "common/block_key.h"

#include <vector>

#include "absl/strings/escaping.h"
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

TEST(BlockKeyTest, ThePlacementIsTheKeyLessTheVersion) {
  const uint64_t base = Id(3).Placement();
  BlockId b = Id(3);
  b.version = "etag2";  // A writer places blocks before the version exists.
  EXPECT_EQ(b.Placement(), base);
  b.mount = "m2";
  EXPECT_NE(b.Placement(), base);
  b = Id(3);
  b.path = "train/y.jpg";
  EXPECT_NE(b.Placement(), base);
  b = Id(3);
  b.block_size = 1 << 20;
  EXPECT_NE(b.Placement(), base);
  EXPECT_NE(Id(4).Placement(), base);
  // Part of the wire contract: every process places a block alike.
  EXPECT_EQ(Id(3).Placement(), 0x3c3a6f0aa8c2a526ull);
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

TEST(BlockKeyTest, VersionsMustBeBoundedPrintableTokens) {
  BlockId b{"m", "p", "etag-1", 0, kDefaultBlockSize, 100};
  EXPECT_TRUE(b.Validate().ok());
  for (const std::string& bad :
       {std::string(""), std::string("a\r\nX: y"), std::string("a\"b"),
        std::string("a b"), std::string("a\0b", 3), std::string("\x7f"),
        std::string("\xc3\xa9"), std::string(kMaxVersionBytes + 1, 'a')}) {
    b.version = bad;
    EXPECT_EQ(b.Validate().code(), absl::StatusCode::kInvalidArgument)
        << absl::CEscape(bad);
  }
  b.version = std::string(kMaxVersionBytes, '~');
  EXPECT_TRUE(b.Validate().ok());
}

TEST(BlockKeyTest, HugeSizesDoNotWrap) {
  const uint64_t kMax = ~uint64_t{0};
  EXPECT_EQ(BlockCount(kMax, 4), kMax / 4 + 1);
  EXPECT_EQ(BlockCount(kMax - 3, 4), kMax / 4);
  BlockId last{"m", "p", "v", kMax / kDefaultBlockSize, kDefaultBlockSize,
               kMax};
  EXPECT_TRUE(last.Validate().ok());
  EXPECT_EQ(last.length(), kMax % kDefaultBlockSize);
  ++last.index;
  EXPECT_EQ(last.Validate().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BlockKeyTest, CheckSameBlockRefusesAnyDifference) {
  const BlockId held{
      "m", "p", "v", 1, kDefaultBlockSize, 3 * kDefaultBlockSize};
  EXPECT_TRUE(CheckSameBlock(held, held).ok());
  BlockId asked = held;
  asked.object_size += 1;
  EXPECT_EQ(CheckSameBlock(held, asked).code(),
            absl::StatusCode::kFailedPrecondition);
  asked = held;
  asked.version = "w";
  EXPECT_EQ(CheckSameBlock(held, asked).code(),
            absl::StatusCode::kFailedPrecondition);
  asked = held;
  asked.path = "q";
  EXPECT_EQ(CheckSameBlock(held, asked).code(),
            absl::StatusCode::kFailedPrecondition);
}

// Every combination of offsets and lengths near 0, the held size and 2^64:
// the range never leaves [0, held) and never wraps.
TEST(BlockKeyTest, RangeWithinStaysInsideWhatIsHeld) {
  const uint64_t kMax = ~uint64_t{0};
  for (uint64_t held : {uint64_t{0}, uint64_t{1}, uint64_t{300000},
                        kDefaultBlockSize, kMax - 1, kMax}) {
    std::vector<uint64_t> points = {0, 1, 2, kMax - 1, kMax};
    for (uint64_t d : {uint64_t{0}, uint64_t{1}, uint64_t{2}}) {
      if (held >= d) points.push_back(held - d);
      if (held <= kMax - d) points.push_back(held + d);
    }
    for (uint64_t offset : points) {
      for (uint64_t length : points) {
        absl::StatusOr<ByteRange> r = RangeWithin(held, offset, length);
        if (offset > held) {
          EXPECT_EQ(r.status().code(), absl::StatusCode::kOutOfRange);
          continue;
        }
        ASSERT_TRUE(r.ok()) << held << " " << offset << " " << length;
        EXPECT_EQ(r->begin, offset);
        EXPECT_LE(r->begin, r->end);
        EXPECT_LE(r->end, held);
        EXPECT_EQ(r->size(), std::min(length, held - offset));
      }
    }
  }
}

}  // namespace
}  // namespace larder
