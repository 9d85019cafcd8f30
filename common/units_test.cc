// Copyright 2026 The Larder Authors.
#include "common/units.h"

#include "gtest/gtest.h"

namespace larder {
namespace {

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
