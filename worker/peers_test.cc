// Copyright 2026 The Larder Authors.
#include "worker/peers.h"

#include <atomic>

#include "gtest/gtest.h"

namespace larder {
namespace {

TEST(PeerSetTest, AsksTheMasterAtMostOnceASecondAndWhenTheRingMoves) {
  std::atomic<uint64_t> heard{1};
  int fetches = 0;
  std::vector<std::string> members = {"10.0.0.1:7070"};
  bool master_up = true;
  PeerSet peers(
      [&]() -> absl::StatusOr<v1::Ring> {
        ++fetches;
        if (!master_up) return absl::UnavailableError("master down");
        v1::Ring ring;
        ring.set_version(heard.load());
        for (const std::string& m : members) ring.add_workers()->set_address(m);
        return ring;
      },
      &heard);
  EXPECT_TRUE(peers.Contains("10.0.0.1:7070"));
  EXPECT_EQ(fetches, 1);
  EXPECT_TRUE(peers.Contains("10.0.0.1:7070"));  // Known, ring unchanged.
  // Unknown addresses: one ask a second, however many are tried.
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(peers.Contains("10.6.6.6:1"));
  EXPECT_EQ(fetches, 1);
  // A worker joins: the ring's version moves, and the set follows it after
  // the pause.
  members.push_back("10.0.0.2:7070");
  heard = 2;
  absl::SleepFor(PeerSet::kRetry);
  EXPECT_TRUE(peers.Contains("10.0.0.2:7070"));
  EXPECT_EQ(fetches, 2);
  // A master that cannot be reached leaves the set as it was.
  master_up = false;
  heard = 3;
  absl::SleepFor(PeerSet::kRetry);
  EXPECT_TRUE(peers.Contains("10.0.0.1:7070"));
  EXPECT_EQ(fetches, 3);
  EXPECT_TRUE(peers.Contains("10.0.0.2:7070"));
  EXPECT_EQ(fetches, 3);
}

}  // namespace
}  // namespace larder
