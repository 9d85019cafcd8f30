// Copyright 2026 The Larder Authors.
#include "master/membership.h"

#include "gtest/gtest.h"

namespace larder {
namespace {

v1::WorkerInfo Info(const std::string& id) {
  v1::WorkerInfo w;
  w.set_id(id);
  w.set_address(id + ":7070");
  w.set_capacity_bytes(1 << 30);
  return w;
}

const absl::Time t0 = absl::FromUnixSeconds(1000);

TEST(MembershipTest, JoinHeartbeatExpireRejoin) {
  Membership m(absl::Seconds(10));
  EXPECT_EQ(m.Register(Info("a"), {}, t0), 1u);
  EXPECT_EQ(m.Register(Info("b"), {}, t0), 2u);
  EXPECT_EQ(m.Ring().workers_size(), 2);
  EXPECT_TRUE(m.Heartbeat("a", {}, {}, t0 + absl::Seconds(8)));
  EXPECT_TRUE(m.Expire(t0 + absl::Seconds(9)).empty());
  // b misses its heartbeats.
  EXPECT_EQ(m.Expire(t0 + absl::Seconds(11)), std::vector<std::string>{"b"});
  EXPECT_EQ(m.version(), 3u);
  EXPECT_EQ(m.Ring().workers_size(), 1);
  EXPECT_FALSE(m.Heartbeat("b", {}, {},
                           t0 + absl::Seconds(12)));  // Told to re-register.
  EXPECT_EQ(m.Register(Info("b"), {}, t0 + absl::Seconds(12)), 4u);
  EXPECT_EQ(m.Ring().workers_size(), 2);
  // Re-registering while alive with the same info does not churn the ring.
  EXPECT_EQ(m.Register(Info("b"), {}, t0 + absl::Seconds(13)), 4u);
}

TEST(MembershipTest, PlacementFollowsReports) {
  Membership m(absl::Seconds(10));
  BlockKey k1{1, 1}, k2{2, 2}, k3{3, 3};
  m.Register(Info("a"), {k1, k2}, t0);
  m.Register(Info("b"), {k2}, t0);
  EXPECT_EQ(m.Locate(k1), std::vector<std::string>{"a"});
  EXPECT_EQ(m.Locate(k2).size(), 2u);
  m.Heartbeat("a", {k3}, {k1}, t0 + absl::Seconds(1));
  EXPECT_TRUE(m.Locate(k1).empty());
  EXPECT_EQ(m.Locate(k3), std::vector<std::string>{"a"});
  EXPECT_EQ(m.BlocksOf("a"), 2u);
  // A full report on re-registration replaces what was known.
  m.Register(Info("a"), {k1}, t0 + absl::Seconds(2));
  EXPECT_EQ(m.Locate(k1), std::vector<std::string>{"a"});
  EXPECT_TRUE(m.Locate(k3).empty());
  // A dead worker's blocks leave the index.
  m.Expire(t0 + absl::Seconds(30));
  EXPECT_TRUE(m.Locate(k2).empty());
}

TEST(MembershipTest, KeyBytesRoundTrip) {
  BlockKey k{0x0123456789abcdefULL, 0xfedcba9876543210ULL}, back;
  ASSERT_TRUE(KeyFromBytes(KeyToBytes(k), &back));
  EXPECT_EQ(k, back);
  EXPECT_FALSE(KeyFromBytes("short", &back));
}

}  // namespace
}  // namespace larder
