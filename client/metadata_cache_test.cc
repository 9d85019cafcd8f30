// Copyright 2026 The Larder Authors.
#include "client/metadata_cache.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace larder {
namespace {

NodeMetadataCache::Stat Found(const std::string& path, uint64_t size) {
  NodeMetadataCache::Stat s;
  s.response.mutable_info()->set_path(path);
  s.response.mutable_info()->set_size(size);
  return s;
}

std::shared_ptr<const NodeMetadataCache::Listing> Names(const std::string& dir,
                                                        int n) {
  auto l = std::make_shared<NodeMetadataCache::Listing>();
  for (int i = 0; i < n; ++i) {
    FileInfo f;
    f.path = absl::StrCat(dir, "/f", 100000 + i);
    f.version = "v1";
    l->push_back(f);
  }
  return l;
}

TEST(NodeMetadataCacheTest, KeepsPositiveAndNegativeStatsWithTheirExpiry) {
  NodeMetadataCache c;
  const absl::Time t = absl::Now() + absl::Seconds(5);
  c.PutStat("/d/a", Found("/d/a", 7), t);
  c.PutStat("/d/missing", {absl::NotFoundError("no"), {}}, t);
  auto a = c.GetStat("/d/a");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->value->response.info().size(), 7u);
  EXPECT_EQ(a->expires, t);
  auto m = c.GetStat("/d/missing");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->value->status.code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(c.GetStat("/d/b").has_value());
}

TEST(NodeMetadataCacheTest,
     InvalidateDropsThePathItsSubtreeAndTheListingsAndMissesAboveIt) {
  NodeMetadataCache c;
  const absl::Time t = absl::Now() + absl::Seconds(5);
  c.PutStat("/d", Found("/d", 0), t);
  c.PutStat("/d/x", Found("/d/x", 1), t);
  c.PutStat("/d/x/y", Found("/d/x/y", 1), t);
  c.PutStat("/d/x-b", Found("/d/x-b", 1), t);  // Sorts between; stays.
  c.PutListing("/d", Names("/d", 3), t);
  c.PutListing("/d/x", Names("/d/x", 3), t);
  EXPECT_EQ(c.Invalidate("/d/x"), 4u);
  // A path created below directories that did not exist: their NotFound
  // goes (they exist now), with every listing above it.
  c.PutStat("/d/new", {absl::NotFoundError("no"), {}}, t);
  c.PutStat("/d/new/run", {absl::NotFoundError("no"), {}}, t);
  c.PutListing("/", Names("/", 1), t);
  EXPECT_EQ(c.Invalidate("/d/new/run/model.pt"), 3u);
  EXPECT_FALSE(c.GetStat("/d/new").has_value());
  EXPECT_FALSE(c.GetStat("/d/new/run").has_value());
  EXPECT_FALSE(c.GetListing("/").has_value());
  EXPECT_FALSE(c.GetStat("/d/x").has_value());
  EXPECT_FALSE(c.GetStat("/d/x/y").has_value());
  EXPECT_FALSE(c.GetListing("/d/x").has_value());
  EXPECT_FALSE(c.GetListing("/d").has_value());  // It listed /d/x.
  EXPECT_TRUE(c.GetStat("/d/x-b").has_value());
  EXPECT_TRUE(c.GetStat("/d").has_value());
  c.Clear();
  EXPECT_EQ(c.counters().entries, 0u);
  EXPECT_EQ(c.counters().bytes, 0u);
  EXPECT_EQ(c.counters().invalidations, 9u);
}

TEST(NodeMetadataCacheTest, StaysWithinItsBoundsDroppingTheLeastRecentlyUsed) {
  NodeMetadataCache c({.max_entries = 100, .max_bytes = 1 << 20});
  const absl::Time t = absl::Now() + absl::Seconds(5);
  c.PutStat("/keep", Found("/keep", 1), t);
  for (int i = 0; i < 1000; ++i) {
    c.PutStat(absl::StrCat("/d/", i), Found(absl::StrCat("/d/", i), 1), t);
    ASSERT_TRUE(c.GetStat("/keep").has_value()) << i;  // Used: stays.
    ASSERT_LE(c.counters().entries, 100u);
    ASSERT_LE(c.counters().bytes, size_t{1} << 20);
  }
  EXPECT_EQ(c.counters().evictions, 901u);
  EXPECT_FALSE(c.GetStat("/d/0").has_value());
  EXPECT_TRUE(c.GetStat("/d/999").has_value());

  // A listing larger than a quarter of the bytes is refused; smaller ones
  // push stats out by bytes.
  EXPECT_FALSE(c.PutListing("/big", Names("/big", 10000), t));
  EXPECT_FALSE(c.GetListing("/big").has_value());
  EXPECT_TRUE(c.PutListing("/mid", Names("/mid", 1500), t));
  EXPECT_LE(c.counters().bytes, size_t{1} << 20);
  EXPECT_TRUE(c.GetListing("/mid").has_value());
}

}  // namespace
}  // namespace larder
