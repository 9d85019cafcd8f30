// Copyright 2026 The Larder Authors.
#include "common/ring.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/block_key.h"
#include "gtest/gtest.h"

namespace larder {
namespace {

std::vector<RingMember> Members(int n, int first = 0) {
  std::vector<RingMember> m;
  for (int i = first; i < first + n; ++i)
    m.push_back({absl::StrCat("worker-", i), 1.0});
  return m;
}

// Positions of real blocks: the ring is fed BlockId::Placement().
std::vector<uint64_t> Keys(int n) {
  std::vector<uint64_t> keys;
  for (int i = 0; i < n; ++i) {
    BlockId id{"imagenet",
               absl::StrCat("train/n", i / 7, "/img_", i, ".jpg"),
               "etag",
               static_cast<uint64_t>(i % 7),
               kDefaultBlockSize,
               1 << 30};
    keys.push_back(id.Placement());
  }
  return keys;
}

double MaxOverMean(const HashRing& ring, const std::vector<uint64_t>& keys) {
  std::vector<int> owned(ring.members().size(), 0);
  for (uint64_t k : keys) ++owned[ring.Owner(k)];
  const double mean = static_cast<double>(keys.size()) / owned.size();
  return *std::max_element(owned.begin(), owned.end()) / mean;
}

TEST(RingTest, BalanceWithinFivePercentFrom3To100Workers) {
  const std::vector<uint64_t> keys = Keys(2000000);
  for (int n : {3, 5, 10, 30, 100}) {
    HashRing ring(Members(n));
    const double keys_ratio = MaxOverMean(ring, keys);
    std::vector<double> shares = ring.Shares();
    const double share_ratio =
        *std::max_element(shares.begin(), shares.end()) * n;
    std::printf(
        "workers=%3d vnodes=%d  max/mean owned keys=%.4f  max/mean ring "
        "share=%.4f\n",
        n, HashRing::kDefaultVnodes, keys_ratio, share_ratio);
    EXPECT_LE(share_ratio, 1.05) << n << " workers";
    EXPECT_LE(keys_ratio, 1.06)
        << n << " workers (includes key-sampling noise)";
    EXPECT_NEAR(std::accumulate(shares.begin(), shares.end(), 0.0), 1.0, 1e-9);
  }
}

TEST(RingTest, WeightsScaleOwnership) {
  HashRing ring({{"small", 1.0}, {"big", 3.0}});
  std::vector<double> s = ring.Shares();
  EXPECT_NEAR(s[1] / s[0], 3.0, 0.3);
  EXPECT_EQ(ring.Vnodes(1), 3 * ring.Vnodes(0));
}

TEST(RingTest, AddingOneWorkerMovesAboutOneNthOnlyToIt) {
  const std::vector<uint64_t> keys = Keys(300000);
  for (int n : {3, 10, 50}) {
    HashRing before(Members(n));
    HashRing after(Members(n + 1));  // worker-n joins.
    int moved = 0;
    for (uint64_t k : keys) {
      const std::string& a = before.members()[before.Owner(k)].id;
      const std::string& b = after.members()[after.Owner(k)].id;
      if (a != b) {
        ++moved;
        ASSERT_EQ(b, absl::StrCat("worker-", n))
            << "a key moved between two old workers";
      }
    }
    const double fraction = static_cast<double>(moved) / keys.size();
    EXPECT_NEAR(fraction, 1.0 / (n + 1), 0.2 / (n + 1)) << n;
  }
}

TEST(RingTest, RemovingOneWorkerMovesOnlyItsKeys) {
  const std::vector<uint64_t> keys = Keys(300000);
  const int n = 10;
  HashRing before(Members(n));
  std::vector<RingMember> rest = Members(n);
  rest.erase(rest.begin() + 4);  // worker-4 leaves.
  HashRing after(rest);
  int moved = 0;
  for (uint64_t k : keys) {
    const std::string& a = before.members()[before.Owner(k)].id;
    const std::string& b = after.members()[after.Owner(k)].id;
    if (a != b) {
      ++moved;
      ASSERT_EQ(a, "worker-4");
      // It lands on the next distinct worker the old ring named.
      std::vector<int> succ = before.Successors(k, 2);
      ASSERT_EQ(b, before.members()[succ[1]].id);
    }
  }
  EXPECT_NEAR(static_cast<double>(moved) / keys.size(), 1.0 / n, 0.2 / n);
}

TEST(RingTest, SuccessorsAreDistinctAndStartWithTheOwner) {
  HashRing ring(Members(5));
  for (uint64_t k : Keys(1000)) {
    std::vector<int> s = ring.Successors(k, 3);
    ASSERT_EQ(s.size(), 3u);
    EXPECT_EQ(s[0], ring.Owner(k));
    EXPECT_NE(s[0], s[1]);
    EXPECT_NE(s[1], s[2]);
    EXPECT_NE(s[0], s[2]);
  }
  EXPECT_EQ(ring.Successors(1, 9).size(), 5u);
  EXPECT_EQ(HashRing().Owner(1), -1);
}

}  // namespace
}  // namespace larder
