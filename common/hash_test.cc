// Copyright 2026 The Larder Authors.
#include "common/hash.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace larder {
namespace {

TEST(HashTest, KnownXxh3Values) {
  // Reference values of XXH3_64bits (seed 0) from the xxHash sanity tests: the
  // hash is part of the placement contract, so it must never silently change.
  EXPECT_EQ(Hash64(""), 0x2D06800538D394C2ULL);
}

TEST(HashTest, SeedChangesValue) {
  EXPECT_NE(Hash64("abc", 0), Hash64("abc", 1));
}

TEST(HashTest, HasherIsUnambiguous) {
  Hasher a, b;
  a.Add("ab").Add("c");
  b.Add("a").Add("bc");
  EXPECT_NE(a.Finish64(), b.Finish64());
  EXPECT_NE(a.Finish128(), b.Finish128());
}

TEST(HashTest, HasherIsDeterministic) {
  Hasher a, b;
  a.Add("mount").Add("path/x.jpg").Add("etag").Add(uint64_t{7});
  b.Add("mount").Add("path/x.jpg").Add("etag").Add(uint64_t{7});
  EXPECT_EQ(a.Finish64(), b.Finish64());
  EXPECT_EQ(a.Finish128(), b.Finish128());
  EXPECT_EQ(a.Finish128().ToHex().size(), 32u);
}

TEST(HashTest, DistinctBlockIndexesDistinctKeys) {
  std::set<uint64_t> seen;
  for (uint64_t i = 0; i < 10000; ++i) {
    Hasher h;
    h.Add("m").Add("p").Add("v").Add(i);
    seen.insert(h.Finish64());
  }
  EXPECT_EQ(seen.size(), 10000u);
}

}  // namespace
}  // namespace larder
