// Copyright 2026 The Larder Authors.
#include "common/units.h"

#include "gtest/gtest.h"

namespace larder {
namespace {

TEST(UnitsTest, BytesFlagTextReadsBackExactly) {
  EXPECT_EQ(BytesFlagText(4u << 20), "4MiB");
  EXPECT_EQ(BytesFlagText(256u << 20), "256MiB");
  EXPECT_EQ(BytesFlagText(1ull << 30), "1GiB");
  EXPECT_EQ(BytesFlagText(1536), "1536");  // 1.5 KiB: no whole unit.
  EXPECT_EQ(BytesFlagText(4097), "4097");
  EXPECT_EQ(BytesFlagText(0), "0");
  for (uint64_t v :
       {uint64_t{0}, uint64_t{1}, uint64_t{4097}, uint64_t{3} << 10,
        uint64_t{64} << 20, uint64_t{5} << 40, uint64_t{7} << 50})
    EXPECT_EQ(*ParseBytes(BytesFlagText(v)), v) << v;
}

TEST(UnitsTest, ParseBytes) {
  EXPECT_EQ(*ParseBytes("4194304"), 4194304u);
  EXPECT_EQ(*ParseBytes("4MiB"), 4u << 20);
  EXPECT_EQ(*ParseBytes("512 KiB"), 512u << 10);
  EXPECT_EQ(*ParseBytes("10GiB"), 10ull << 30);
  EXPECT_EQ(*ParseBytes("8Gi"), 8ull << 30);  // As Kubernetes writes sizes.
  EXPECT_EQ(*ParseBytes("512Mi"), 512ull << 20);
  EXPECT_EQ(*ParseBytes("1.5GB"), 3ull << 29);
  EXPECT_EQ(*ParseBytes("2t"), 2ull << 40);
  for (const char* bad : {"", "MiB", "4 parsecs", "-1", "1e400"}) {
    EXPECT_EQ(ParseBytes(bad).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST(UnitsTest, FormatBytes) {
  EXPECT_EQ(FormatBytes(100), "100 B");
  EXPECT_EQ(FormatBytes(4 << 20), "4.0 MiB");
  EXPECT_EQ(FormatBytes(3ull << 29), "1.5 GiB");
}

}  // namespace
}  // namespace larder
