// Copyright 2026 The Larder Authors.
#include "common/write_parts.h"

#include "gtest/gtest.h"

namespace larder {
namespace {

constexpr uint64_t kMiB = 1 << 20;

TEST(WritePartsTest, PartsDoubleEveryTierUpToTheBound) {
  const uint64_t first = FirstWritePartBytes(8 * kMiB, 0);
  EXPECT_EQ(first, 8 * kMiB);
  EXPECT_EQ(WritePartBytes(first, 1), 8 * kMiB);
  EXPECT_EQ(WritePartBytes(first, 1000), 8 * kMiB);
  EXPECT_EQ(WritePartBytes(first, 1001), 16 * kMiB);
  EXPECT_EQ(WritePartBytes(first, 8001), 2048 * kMiB);
  // Tier 9 would be 4096 MiB: above Azure's largest block.
  EXPECT_EQ(WritePartBytes(first, 9001), 4000 * kMiB);
  EXPECT_EQ(WritePartBytes(first, kMaxWriteParts), 4000 * kMiB);
  uint64_t total = 0;
  for (uint32_t n = 1; n <= kMaxWriteParts; ++n)
    total += WritePartBytes(first, n);
  EXPECT_GT(total, 5ull << 40);  // S3's largest object.
}

// Blocks of a size that is no power of two (12 MiB): every part is a whole
// number of blocks, the capped ones too, so every part starts on a block.
TEST(WritePartsTest, EveryPartIsWholeBlocksWhateverTheBlockSize) {
  for (uint64_t bs : {uint64_t{4096}, 12 * kMiB, 24 * kMiB, 1000 * kMiB}) {
    for (uint64_t hint : {uint64_t{0}, uint64_t{1} << 40, uint64_t{6} << 40,
                          uint64_t{100} << 40}) {
      SCOPED_TRACE(testing::Message() << bs << " " << hint);
      const uint64_t first = FirstWritePartBytes(bs, hint);
      EXPECT_EQ(first % bs, 0u);
      EXPECT_LE(first, kMaxWritePartBytes);
      EXPECT_GE(first, kMinWritePartBytes);
      for (uint32_t n = 1; n <= kMaxWriteParts; n += 97) {
        const uint64_t p = WritePartBytes(first, n);
        EXPECT_EQ(p % bs, 0u) << "part " << n;
        EXPECT_LE(p, kMaxWritePartBytes) << "part " << n;
      }
    }
  }
  // A hint that fits in the first 1,000 parts makes parts that hold it.
  EXPECT_EQ(FirstWritePartBytes(8 * kMiB, 100ull << 30), 104 * kMiB);
}

}  // namespace
}  // namespace larder
