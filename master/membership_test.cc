// Copyright 2026 The Larder Authors.
#include "master/membership.h"

#include <atomic>
#include <thread>

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

// The rebalance window (Ring.changed_unix_ms) opens only when a change can
// strand cached blocks: joins while nothing is cached (a starting cluster)
// leave it shut, a join or a loss once blocks are cached opens it.
// A master that leads again in the same term gives its workers a whole
// timeout from then (their heartbeats were refused while it was deposed).
TEST(MembershipTest, GraceGivesLiveWorkersAWholeTimeout) {
  Membership m(absl::Seconds(10));
  m.Register(Info("a"), {}, t0);
  m.Register(Info("b"), {}, t0);
  m.Grace(t0 + absl::Seconds(15));
  EXPECT_TRUE(m.Expire(t0 + absl::Seconds(16)).empty());
  EXPECT_TRUE(m.Heartbeat("a", {}, {}, t0 + absl::Seconds(20)));
  EXPECT_EQ(m.Expire(t0 + absl::Seconds(26)), std::vector<std::string>{"b"});
}

TEST(MembershipTest, ChangesWhileNothingIsCachedOpenNoRebalanceWindow) {
  Membership m(absl::Seconds(10));
  m.Register(Info("a"), {}, t0);
  m.Register(Info("b"), {}, t0);
  EXPECT_EQ(m.Ring().changed_unix_ms(), 0);
  EXPECT_EQ(m.Ring().version(), 2u);
  m.Heartbeat("a", {BlockKey{1, 1}}, {}, t0 + absl::Seconds(1));
  const absl::Time before = absl::Now();
  m.Register(Info("c"), {}, t0 + absl::Seconds(1));
  EXPECT_GE(m.Ring().changed_unix_ms(), absl::ToUnixMillis(before));
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

TEST(MembershipTest, HeartbeatChurnKeepsTheReportedListsBounded) {
  // A worker evicting and caching 100 blocks a second for an hour: its list
  // of reported keys is compacted, and expiry still forgets every block.
  Membership m(absl::Seconds(10));
  uint64_t next = 1;
  std::vector<BlockKey> held;
  for (int i = 0; i < 1000; ++i) held.push_back({next, next++});
  m.Register(Info("a"), held, t0);
  m.Register(Info("b"), {held[0]}, t0);
  for (int s = 1; s <= 3600; ++s) {
    std::vector<BlockKey> added, removed;
    for (int i = 0; i < 100; ++i) added.push_back({next, next++});
    removed.assign(held.begin(), held.begin() + 100);
    held.erase(held.begin(), held.begin() + 100);
    held.insert(held.end(), added.begin(), added.end());
    // A key added twice and a key removed that was never there.
    added.push_back(added.front());
    removed.push_back({0, next + 1000});
    ASSERT_TRUE(m.Heartbeat("a", added, removed, t0 + absl::Seconds(s)));
    ASSERT_TRUE(m.Heartbeat("b", {}, {}, t0 + absl::Seconds(s)));
  }
  EXPECT_EQ(m.BlocksOf("a"), 1000u);
  EXPECT_EQ(m.replicas(), 1001u);
  EXPECT_EQ(m.Locate(held.back()), std::vector<std::string>{"a"});
  EXPECT_EQ(m.Locate(held.front()), std::vector<std::string>{"a"});
  // a evicted {1, 1} long ago; b still holds it.
  EXPECT_EQ(m.Locate({1, 1}), std::vector<std::string>{"b"});
  // 360,000 keys went by; the lists hold about what the index does.
  EXPECT_LT(m.IndexBytes(), 2u << 20);
  ASSERT_TRUE(m.Heartbeat("b", {}, {}, t0 + absl::Seconds(3610)));
  EXPECT_EQ(m.Expire(t0 + absl::Seconds(3612)), std::vector<std::string>{"a"});
  EXPECT_EQ(m.replicas(), 1u);  // b's block.
  EXPECT_TRUE(m.Locate(held[0]).empty());
  EXPECT_EQ(m.Locate({1, 1}), std::vector<std::string>{"b"});
}

TEST(MembershipTest, RestoreForgetsBlocksAndAwaitsReports) {
  Membership m(absl::Seconds(10));
  const BlockKey k1{1, 1}, k2{2, 2};
  m.Register(Info("a"), {k1}, t0);
  m.Register(Info("gone"), {k2}, t0);
  v1::Ring stored;
  stored.set_version(7);
  *stored.add_workers() = Info("a");
  *stored.add_workers() = Info("c");
  m.Restore(stored, t0 + absl::Seconds(1));
  EXPECT_EQ(m.version(), 8u);
  EXPECT_EQ(m.replicas(), 0u);
  EXPECT_TRUE(m.Locate(k1).empty());
  std::vector<std::string> ids;
  for (const auto& [info, alive] : m.Workers()) {
    ids.push_back(info.id());
    EXPECT_TRUE(alive);
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"a", "c"}));
  // Heartbeats are answered "re-register" until the full report comes.
  EXPECT_FALSE(m.Heartbeat("a", {k2}, {}, t0 + absl::Seconds(2)));
  EXPECT_EQ(m.Register(Info("a"), {k1}, t0 + absl::Seconds(2)), 8u);
  EXPECT_TRUE(m.Heartbeat("a", {k2}, {}, t0 + absl::Seconds(3)));
  EXPECT_EQ(m.Locate(k2), std::vector<std::string>{"a"});
  EXPECT_EQ(m.BlocksOf("a"), 2u);
  EXPECT_EQ(m.BlocksOf("gone"), 0u);
}

TEST(MembershipTest, ConcurrentReportsExpiryAndLookupsAgree) {
  // Workers re-register and heartbeat from many threads while the reaper
  // expires some and a client looks blocks up; afterwards the index holds
  // exactly what the live workers reported.
  Membership m(absl::Seconds(10));
  constexpr int kWorkers = 8;
  std::vector<std::vector<BlockKey>> reports(kWorkers);
  for (int w = 0; w < kWorkers; ++w)
    for (uint64_t i = 0; i < 5000; ++i)
      reports[w].push_back({i * 131 + w, (i << 40) ^ (w * 977)});
  std::atomic<bool> stop{false};
  std::thread client([&] {
    while (!stop)
      for (int w = 0; w < kWorkers; ++w) (void)m.Locate(reports[w][17]);
  });
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      const std::string id = "w" + std::to_string(w);
      for (int round = 0; round < 20; ++round) {
        m.Register(Info(id), reports[w], t0);
        m.Heartbeat(id, {{99, static_cast<uint64_t>(w)}}, {reports[w][0]}, t0);
      }
    });
  }
  // Every report and heartbeat is stamped t0: at t0 + 15 s the reaper
  // expires whoever is alive, while they report again.
  std::atomic<bool> reported{false};
  std::thread reaper([&] {
    while (!reported) m.Expire(t0 + absl::Seconds(15));
  });
  for (auto& t : threads) t.join();
  reported = true;
  reaper.join();
  // Whoever the race left alive holds its last report (and maybe the
  // heartbeat after it: one key in, one out); whoever it left dead, nothing.
  uint64_t total = 0;
  for (const auto& [info, alive] : m.Workers()) {
    const uint64_t held = m.BlocksOf(info.id());
    total += held;
    const int w = info.id()[1] - '0';
    if (alive) {
      EXPECT_EQ(held, 5000u) << info.id();
      EXPECT_EQ(m.Locate(reports[w][3]), std::vector<std::string>{info.id()});
    } else {
      EXPECT_EQ(held, 0u) << info.id();
      EXPECT_TRUE(m.Locate(reports[w][3]).empty()) << info.id();
    }
  }
  EXPECT_EQ(m.replicas(), total);
  // Odd workers die; even ones report once more.
  for (int w = 0; w < kWorkers; w += 2)
    m.Register(Info("w" + std::to_string(w)), reports[w],
               t0 + absl::Seconds(20));
  m.Expire(t0 + absl::Seconds(25));
  stop = true;
  client.join();
  EXPECT_EQ(m.replicas(), kWorkers / 2 * 5000u);
  for (int w = 0; w < kWorkers; ++w) {
    EXPECT_EQ(m.BlocksOf("w" + std::to_string(w)), w % 2 == 0 ? 5000u : 0u);
    EXPECT_EQ(m.Locate(reports[w][3]).size(), w % 2 == 0 ? 1u : 0u);
  }
}

TEST(MembershipTest, KeyBytesRoundTrip) {
  BlockKey k{0x0123456789abcdefULL, 0xfedcba9876543210ULL}, back;
  ASSERT_TRUE(KeyFromBytes(KeyToBytes(k), &back));
  EXPECT_EQ(k, back);
  EXPECT_FALSE(KeyFromBytes("short", &back));
}

}  // namespace
}  // namespace larder
