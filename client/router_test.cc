// Copyright 2026 The Larder Authors.
//
// The router without processes: a ring of three workers that exist only as
// entries, a fake placement index.
#include "client/router.h"

#include <atomic>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace larder {
namespace {

v1::Ring ThreeWorkers(absl::Time changed_at) {
  v1::Ring ring;
  ring.set_version(1);
  ring.set_vnodes(64);
  ring.set_changed_unix_ms(absl::ToUnixMillis(changed_at));
  for (int i = 1; i <= 3; ++i) {
    v1::WorkerInfo* w = ring.add_workers();
    w->set_id("w" + std::to_string(i));
    w->set_address("127.0.0.1:" + std::to_string(9000 + i));
    w->set_node("node" + std::to_string(i));
    w->set_short_circuit_socket("/run/w" + std::to_string(i) + ".sock");
    w->set_capacity_bytes(1 << 30);
  }
  return ring;
}

BlockId Block(uint64_t index) {
  return BlockId{"/data", "f", "v1", index, 1 << 20, uint64_t{64} << 20};
}

std::vector<std::string> Ids(const Router::Route& r) {
  std::vector<std::string> out;
  for (const Router::Candidate& c : r.candidates) out.push_back(c.worker->id());
  return out;
}

// A router with a fake placement index: `holders` answers every Locate.
struct Fixture {
  explicit Fixture(Router::Options options = {.node = "node1"})
      : router(
            std::move(options),
            [this](const v1::LocateRequest& req)
                -> absl::StatusOr<v1::LocateResponse> {
              ++locate_calls;
              keys_asked += req.block_keys_size();
              if (!master_up) return absl::UnavailableError("master down");
              v1::LocateResponse resp;
              for (int i = 0; i < req.block_keys_size(); ++i) {
                auto* at = resp.add_locations();
                for (const std::string& h : holders) at->add_worker_ids(h);
              }
              return resp;
            },
            [this](const std::string& socket) {
              absl::MutexLock lock(&mu);
              return refused.contains(socket);
            },
            [](const std::string& address) {
              return std::make_shared<WorkerClient>(address);
            }) {}

  absl::Mutex mu;
  absl::flat_hash_set<std::string> refused ABSL_GUARDED_BY(mu);
  std::vector<std::string> holders;
  bool master_up = true;
  std::atomic<int> locate_calls{0}, keys_asked{0};
  Router router;
};

TEST(RouterTest, EmptyRingRoutesNowhere) {
  Fixture f;
  EXPECT_TRUE(f.router.Candidates(Block(0), 3).empty());
  EXPECT_EQ(f.router.LocalSocket(), "");
  EXPECT_EQ(f.router.version(), 0u);
}

TEST(RouterTest, OwnersFollowTheRingAndMarkTheLocalWorker) {
  Fixture f;
  EXPECT_TRUE(f.router.Install(ThreeWorkers(absl::Now() - absl::Hours(1))));
  const std::shared_ptr<const RingSnapshot> ring = f.router.snapshot();
  absl::flat_hash_set<std::string> owners_seen;
  for (uint64_t b = 0; b < 64; ++b) {
    const Router::Route r = f.router.Owners(Block(b), 3);
    ASSERT_EQ(r.candidates.size(), 3u);
    const std::vector<int> expect =
        ring->ring.Successors(Block(b).Placement(), 3);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(r.candidates[i].worker, &ring->workers[expect[i]]);
      EXPECT_EQ(r.candidates[i].client, ring->clients[expect[i]].get());
      EXPECT_EQ(r.candidates[i].local, r.candidates[i].worker->id() == "w1");
    }
    owners_seen.insert(r.front().worker->id());
    // Outside a rebalance window, with no suspects: the same order.
    EXPECT_EQ(Ids(f.router.Candidates(Block(b), 3)), Ids(r));
  }
  EXPECT_EQ(owners_seen.size(), 3u);  // Every worker owns some blocks.
  EXPECT_EQ(f.router.LocalSocket(), "/run/w1.sock");
  EXPECT_EQ(f.locate_calls, 0);
}

TEST(RouterTest, ARefusedSocketIsNotLocal) {
  Fixture f;
  f.router.Install(ThreeWorkers(absl::Now() - absl::Hours(1)));
  {
    absl::MutexLock lock(&f.mu);
    f.refused.insert("/run/w1.sock");
  }
  EXPECT_EQ(f.router.LocalSocket(), "");
  for (uint64_t b = 0; b < 16; ++b) {
    for (const Router::Candidate& c : f.router.Owners(Block(b), 3).candidates)
      EXPECT_FALSE(c.local);
  }
}

TEST(RouterTest, ReinstallingKeepsWorkerClientsAndOldRoutesStayValid) {
  Fixture f;
  v1::Ring ring = ThreeWorkers(absl::Now() - absl::Hours(1));
  f.router.Install(ring);
  const Router::Route before = f.router.Owners(Block(7), 3);
  const WorkerClient* w2 = nullptr;
  for (const auto& c : before.candidates)
    if (c.worker->id() == "w2") w2 = c.client;
  ASSERT_NE(w2, nullptr);

  // The same version again: nothing new.
  EXPECT_FALSE(f.router.Install(ring));
  // w3 leaves: a new ring, w2's client carried over.
  const v1::Ring three = ring;
  ring.set_version(2);
  ring.mutable_workers()->RemoveLast();
  EXPECT_TRUE(f.router.Install(ring));
  EXPECT_EQ(f.router.version(), 2u);
  // A slow reply with the older ring of the same master run is not taken;
  // another run's (a new leader's) is, whatever its version.
  EXPECT_FALSE(f.router.Install(three));
  EXPECT_EQ(f.router.version(), 2u);
  v1::Ring next_run = three;
  next_run.set_metadata_epoch(three.metadata_epoch() + 1);
  EXPECT_TRUE(f.router.Install(next_run));
  EXPECT_EQ(f.router.version(), 1u);
  EXPECT_TRUE(f.router.Install(ring));
  EXPECT_EQ(f.router.version(), 2u);
  // Another run's ring with the same version is news too (its workers).
  v1::Ring same_version = three;
  same_version.set_version(2);
  same_version.set_metadata_epoch(three.metadata_epoch() + 2);
  EXPECT_TRUE(f.router.Install(same_version));
  EXPECT_EQ(f.router.Owners(Block(7), 3).candidates.size(), 3u);
  EXPECT_TRUE(f.router.Install(ring));
  const Router::Route after = f.router.Owners(Block(7), 3);
  ASSERT_EQ(after.candidates.size(), 2u);
  for (const auto& c : after.candidates) {
    EXPECT_NE(c.worker->id(), "w3");
    if (c.worker->id() == "w2") {
      EXPECT_EQ(c.client, w2);
    }
  }
  // The route taken before still points into the ring it was taken from.
  ASSERT_EQ(before.candidates.size(), 3u);
  EXPECT_EQ(before.ring->version, 1u);
  EXPECT_FALSE(before.candidates[0].worker->id().empty());
}

TEST(RouterTest, ASuspectIsTriedLastUntilItsTimeRunsOut) {
  Fixture f({.node = "node1", .suspect_for = absl::Milliseconds(200)});
  f.router.Install(ThreeWorkers(absl::Now() - absl::Hours(1)));
  const Router::Route owners = f.router.Owners(Block(3), 3);
  const std::vector<std::string> order = Ids(owners);
  f.router.MarkSuspect(owners.front(), absl::UnavailableError("down"));
  std::vector<std::string> expect(order.begin() + 1, order.end());
  expect.push_back(order[0]);
  EXPECT_EQ(Ids(f.router.Candidates(Block(3), 3)), expect);
  // Other blocks it owns are reordered as well; blocks it does not own,
  // read with one candidate, are not affected.
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(Ids(f.router.Candidates(Block(3), 3)), order);
}

TEST(RouterTest, InARebalanceWindowAHolderComesBeforeTheOwner) {
  Fixture f;
  f.router.Install(ThreeWorkers(absl::Now()));  // Changed just now.
  const std::vector<std::string> order = Ids(f.router.Owners(Block(5), 3));
  // The block is cached on the worker that owns it last.
  f.holders = {order[2]};
  const std::vector<std::string> expect = {order[2], order[0], order[1]};
  EXPECT_EQ(Ids(f.router.Candidates(Block(5), 3)), expect);
  EXPECT_EQ(f.locate_calls, 1);
  // One lookup serves the reads that follow.
  EXPECT_EQ(Ids(f.router.Candidates(Block(5), 3)), expect);
  EXPECT_EQ(f.locate_calls, 1);
}

TEST(RouterTest, InARebalanceWindowAnOwnerThatHoldsTheBlockStaysFirst) {
  Fixture f;
  f.router.Install(ThreeWorkers(absl::Now()));
  const std::vector<std::string> order = Ids(f.router.Owners(Block(9), 3));
  f.holders = {order[1], order[0]};
  EXPECT_EQ(Ids(f.router.Candidates(Block(9), 3)), order);
}

TEST(RouterTest, AMasterThatCannotSayLeavesTheOwnersOrder) {
  Fixture f;
  f.master_up = false;
  f.router.Install(ThreeWorkers(absl::Now()));
  const std::vector<std::string> order = Ids(f.router.Owners(Block(2), 3));
  EXPECT_EQ(Ids(f.router.Candidates(Block(2), 3)), order);
  EXPECT_EQ(f.locate_calls, 1);
}

TEST(RouterTest, OutsideTheWindowOrWithOneWorkerTheMasterIsNotAsked) {
  Fixture f;
  f.holders = {"w3"};
  f.router.Install(ThreeWorkers(absl::Now() - absl::Minutes(11)));
  for (uint64_t b = 0; b < 8; ++b) f.router.Candidates(Block(b), 3);
  v1::Ring one = ThreeWorkers(absl::Now());
  one.set_version(2);
  one.mutable_workers()->DeleteSubrange(1, 2);
  f.router.Install(one);
  for (uint64_t b = 0; b < 8; ++b) f.router.Candidates(Block(b), 3);
  EXPECT_EQ(f.locate_calls, 0);
}

TEST(RouterTest, LocateAheadAsksOncePerThousandBlocks) {
  Fixture f;
  f.router.Install(ThreeWorkers(absl::Now()));
  f.holders = {"w2"};
  std::vector<BlockId> blocks;
  for (uint64_t b = 0; b < 2500; ++b) blocks.push_back(Block(b));
  std::vector<const BlockId*> ids;
  for (const BlockId& b : blocks) ids.push_back(&b);
  f.router.LocateAhead(ids);
  EXPECT_EQ(f.locate_calls, 3);
  EXPECT_EQ(f.keys_asked, 2500);
  // The reads find every answer already there.
  for (const BlockId& b : blocks)
    EXPECT_EQ(f.router.Candidates(b, 1).front().worker->id(), "w2");
  EXPECT_EQ(f.locate_calls, 3);
  // Asked again, nothing is sent.
  f.router.LocateAhead(ids);
  EXPECT_EQ(f.locate_calls, 3);
}

}  // namespace
}  // namespace larder
