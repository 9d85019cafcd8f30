// Copyright 2026 The Larder Authors.
#include "worker/block_store.h"

#include <fcntl.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "client/worker_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/process.h"
#include "worker/data_service.h"
#include "worker/testing/memory_store.h"

namespace larder {
namespace {

using testing::MemoryStore;

std::string Pattern(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i)
    s[i] = static_cast<char>((i * 131 + seed * 7) >> 3);
  return s;
}

class BlockStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::make_shared<MemoryStore>();
    ASSERT_TRUE(mounts_.Add("m", store_, kBlock).ok());
  }

  std::unique_ptr<BlockStore> Make(BlockStoreOptions o = {}) {
    auto s = BlockStore::Create(std::move(o), &mounts_, &metrics_);
    EXPECT_TRUE(s.ok()) << s.status();
    return std::move(*s);
  }

  BlockId Id(const std::string& path, uint64_t index) {
    return BlockId{"m",   path,   store_->VersionOf(path),
                   index, kBlock, store_->Stat(path)->size};
  }

  static constexpr uint64_t kBlock = 4 << 20;
  std::shared_ptr<MemoryStore> store_;
  WorkerMounts mounts_;
  WorkerMetrics metrics_;
};

TEST_F(BlockStoreTest, MissThenHitWithExactBytes) {
  const std::string data = Pattern(kBlock + 12345, 1);
  store_->Put("obj", data);
  auto bs = Make();
  auto r = bs->Get(Id("obj", 1));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->source, BlockSource::kUnderStore);
  EXPECT_EQ(r->block->data(), data.substr(kBlock));
  auto again = bs->Get(Id("obj", 1));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->source, BlockSource::kRam);
  EXPECT_EQ(store_->reads(), 1);
  EXPECT_EQ(metrics_.misses.Value(), 1);
  EXPECT_EQ(metrics_.hits_ram.Value(), 1);
}

TEST_F(BlockStoreTest, LargeBlocksAreFetchedAsParallelSubRanges) {
  const std::string data = Pattern(kBlock, 2);
  store_->Put("big", data);
  BlockStoreOptions o;
  o.fetch_subrange_bytes = 1 << 20;
  auto bs = Make(o);
  auto r = bs->Get(Id("big", 0));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->block->data(), data);
  EXPECT_EQ(store_->reads(), 4);
}

TEST_F(BlockStoreTest, HundredConcurrentReadsOfOneMissingBlockFetchOnce) {
  const std::string data = Pattern(100000, 3);
  store_->Put("hot", data);
  auto bs = Make();
  store_->CloseGate();  // Hold the fetch until every reader has joined.
  std::vector<std::thread> readers;
  std::atomic<int> ok{0};
  for (int i = 0; i < 100; ++i) {
    readers.emplace_back([&] {
      auto r = bs->Get(Id("hot", 0));
      if (r.ok() && r->block->data() == data) ++ok;
    });
  }
  ASSERT_TRUE(testing::WaitFor(
      [&] { return metrics_.single_flight_joins.Value() >= 99; },
      absl::Seconds(10)));
  store_->OpenGate();
  for (auto& t : readers) t.join();
  EXPECT_EQ(ok.load(), 100);
  EXPECT_EQ(store_->reads(), 1);
  EXPECT_EQ(metrics_.single_flight_joins.Value(), 99);
}

// With every fetch thread busy, a reader's fetch goes ahead of the queued
// prefetches, and so does a prefetch a reader now waits for; the other
// prefetches follow in their order.
TEST_F(BlockStoreTest, ReadersFetchesGoAheadOfQueuedPrefetches) {
  for (const char* p : {"a", "b", "c", "d", "e"})
    store_->Put(p, Pattern(1000, 7));
  BlockStoreOptions o;
  o.fetch_threads = 1;
  auto bs = Make(o);
  store_->CloseGate();
  bs->Prefetch(Id("a", 0));  // Runs, and waits at the gate.
  ASSERT_TRUE(testing::WaitFor([&] { return store_->waiting() == 1; },
                               absl::Seconds(10)));
  for (const char* p : {"b", "c", "d"}) bs->Prefetch(Id(p, 0));
  std::vector<std::thread> readers;
  readers.emplace_back([&] { EXPECT_TRUE(bs->Get(Id("d", 0)).ok()); });
  ASSERT_TRUE(testing::WaitFor([&] { return bs->QueuedFetches() == 4; },
                               absl::Seconds(10)));
  readers.emplace_back([&] { EXPECT_TRUE(bs->Get(Id("e", 0)).ok()); });
  ASSERT_TRUE(testing::WaitFor([&] { return bs->QueuedFetches() == 5; },
                               absl::Seconds(10)));
  store_->OpenGate();
  for (auto& t : readers) t.join();
  // read_order() gets a read once it passed the gate, after reads() counted
  // it.
  ASSERT_TRUE(testing::WaitFor([&] { return store_->read_order().size() == 5; },
                               absl::Seconds(10)));
  ASSERT_TRUE(testing::WaitFor([&] { return bs->QueuedFetches() == 0; },
                               absl::Seconds(10)));
  EXPECT_THAT(store_->read_order(),
              ::testing::ElementsAre("a", "d", "e", "b", "c"));
  EXPECT_EQ(store_->reads(), 5);  // d's second task found it fetched.
}

// Blocks being fetched are memory beyond the RAM tier's capacity: at most
// fetch_buffer_bytes of them at once, whatever the fetch threads, and a
// block larger than the whole budget is fetched alone.
TEST_F(BlockStoreTest, BlocksBeingFetchedStayWithinTheFetchBuffer) {
  for (int i = 0; i < 6; ++i)
    store_->Put(absl::StrCat("f", i), Pattern(1 << 20, i));
  store_->Put("big", Pattern(3 << 20, 9));
  BlockStoreOptions o;
  o.fetch_threads = 8;
  o.fetch_buffer_bytes = 2 << 20;  // Two of the 1 MiB blocks.
  auto bs = Make(o);
  store_->CloseGate();
  std::vector<std::thread> readers;
  std::atomic<int> ok{0};
  for (int i = 0; i < 6; ++i) {
    readers.emplace_back([&, i] {
      auto r = bs->Get(Id(absl::StrCat("f", i), 0));
      if (r.ok() && r->block->data() == Pattern(1 << 20, i)) ++ok;
    });
  }
  ASSERT_TRUE(testing::WaitFor([&] { return store_->waiting() == 2; },
                               absl::Seconds(10)));
  absl::SleepFor(absl::Milliseconds(200));  // No third one gets through.
  EXPECT_EQ(store_->waiting(), 2);
  store_->OpenGate();
  for (auto& t : readers) t.join();
  EXPECT_EQ(ok.load(), 6);
  EXPECT_EQ(store_->reads(), 6);
  // Larger than the budget: fetched once nothing else is.
  auto r = bs->Get(Id("big", 0));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->block->data(), Pattern(3 << 20, 9));
}

// The buffer is taken in the order fetches ask for it: a block that does not
// fit yet is not passed over by smaller ones that would (a stream of small
// fetches would otherwise keep a large block waiting for ever).
TEST_F(BlockStoreTest, ALargeFetchIsNotPassedOverBySmallerOnes) {
  store_->Put("small0", Pattern(1 << 20, 1));
  store_->Put("large", Pattern(2 << 20, 2));
  store_->Put("small1", Pattern(1 << 20, 3));
  BlockStoreOptions o;
  o.fetch_threads = 8;
  o.fetch_buffer_bytes = 2 << 20;
  auto bs = Make(o);
  store_->CloseGate();
  std::vector<std::thread> readers;
  std::atomic<int> ok{0};
  auto read = [&](std::string path, std::string want) {
    readers.emplace_back([&, path, want] {
      auto r = bs->Get(Id(path, 0));
      if (r.ok() && r->block->data() == want) ++ok;
    });
  };
  read("small0", Pattern(1 << 20, 1));  // Holds half the buffer, at the gate.
  ASSERT_TRUE(testing::WaitFor([&] { return store_->waiting() == 1; },
                               absl::Seconds(10)));
  read("large", Pattern(2 << 20, 2));  // Needs all of it: waits.
  ASSERT_TRUE(testing::WaitFor(
      [&] { return bs->FetchesWaitingForBuffer() == 1; }, absl::Seconds(10)));
  read("small1", Pattern(1 << 20, 3));  // Would fit, but comes after.
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return bs->FetchesWaitingForBuffer() == 2 || store_->waiting() == 2;
      },
      absl::Seconds(10)));
  EXPECT_EQ(store_->waiting(), 1);
  EXPECT_EQ(bs->FetchesWaitingForBuffer(), 2u);
  store_->OpenGate();
  for (auto& t : readers) t.join();
  EXPECT_EQ(ok.load(), 3);
  EXPECT_EQ(store_->read_order(),
            (std::vector<std::string>{"small0", "large", "small1"}));
  EXPECT_EQ(bs->FetchesWaitingForBuffer(), 0u);
}

// A client that asks to prefetch a whole dataset cannot queue unbounded
// work: past max_queued_prefetches the prefetches are dropped (counted);
// a reader's fetch is still queued.
TEST_F(BlockStoreTest, PrefetchesBeyondTheQueueBoundAreDropped) {
  for (int i = 0; i < 50; ++i)
    store_->Put(absl::StrCat("p", i), Pattern(100, i));
  BlockStoreOptions o;
  o.fetch_threads = 1;
  o.max_queued_prefetches = 10;
  auto bs = Make(o);
  store_->CloseGate();
  bs->Prefetch(Id("p0", 0));  // Runs, and waits at the gate.
  ASSERT_TRUE(testing::WaitFor([&] { return store_->waiting() == 1; },
                               absl::Seconds(10)));
  for (int i = 1; i < 50; ++i) bs->Prefetch(Id(absl::StrCat("p", i), 0));
  EXPECT_EQ(bs->QueuedFetches(), 10u);
  std::thread reader([&] { EXPECT_TRUE(bs->Get(Id("p49", 0)).ok()); });
  ASSERT_TRUE(testing::WaitFor([&] { return bs->QueuedFetches() == 11; },
                               absl::Seconds(10)));
  store_->OpenGate();
  reader.join();
  // The queue is empty as the last task is taken, before it reads: wait for
  // its read too. Nothing is queued and the one thread is done after it, so
  // no read can follow.
  ASSERT_TRUE(testing::WaitFor(
      [&] { return bs->QueuedFetches() == 0 && store_->reads() >= 12; },
      absl::Seconds(10)));
  EXPECT_EQ(store_->reads(), 12);  // p0, the 10 queued, and p49.
}

TEST_F(BlockStoreTest, FailedFetchReachesEveryWaiterAndLeavesNothing) {
  store_->Put("obj", Pattern(5000, 4));
  auto bs = Make();
  store_->FailReads(absl::UnavailableError("under-store down"));
  store_->CloseGate();
  std::vector<std::thread> readers;
  std::atomic<int> unavailable{0};
  for (int i = 0; i < 10; ++i) {
    readers.emplace_back([&] {
      if (bs->Get(Id("obj", 0)).status().code() ==
          absl::StatusCode::kUnavailable)
        ++unavailable;
    });
  }
  ASSERT_TRUE(testing::WaitFor(
      [&] { return metrics_.single_flight_joins.Value() >= 9; },
      absl::Seconds(10)));
  store_->OpenGate();
  for (auto& t : readers) t.join();
  EXPECT_EQ(unavailable.load(), 10);
  EXPECT_EQ(bs->GetStats().ram_blocks, 0u);
  // The next read tries again (no negative caching) and succeeds.
  store_->FailReads(absl::OkStatus());
  auto r = bs->Get(Id("obj", 0));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(store_->reads(), 2);
}

TEST_F(BlockStoreTest, ChangedObjectIsFailedPrecondition) {
  store_->Put("obj", Pattern(5000, 5));
  BlockId old = Id("obj", 0);
  store_->Put("obj", Pattern(5000, 6));
  auto bs = Make();
  EXPECT_EQ(bs->Get(old).status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto fresh = bs->Get(Id("obj", 0));
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->block->data(), Pattern(5000, 6));
}

TEST_F(BlockStoreTest, CancelledWaiterLeavesTheFetchRunningForOthers) {
  store_->Put("obj", Pattern(5000, 7));
  auto bs = Make();
  store_->CloseGate();
  std::atomic<bool> cancel{false};
  absl::Status cancelled_status;
  std::thread quitter([&] {
    cancelled_status = bs->Get(Id("obj", 0), absl::InfiniteFuture(), [&] {
                           return cancel.load();
                         }).status();
  });
  absl::StatusOr<BlockRead> patient_result = absl::UnknownError("");
  ASSERT_TRUE(testing::WaitFor([&] { return store_->waiting() == 1; },
                               absl::Seconds(10)));
  std::thread patient([&] { patient_result = bs->Get(Id("obj", 0)); });
  ASSERT_TRUE(testing::WaitFor(
      [&] { return metrics_.single_flight_joins.Value() >= 1; },
      absl::Seconds(10)));
  cancel = true;
  quitter.join();
  EXPECT_EQ(cancelled_status.code(), absl::StatusCode::kCancelled);
  store_->OpenGate();
  patient.join();
  ASSERT_TRUE(patient_result.ok()) << patient_result.status();
  EXPECT_EQ(store_->reads(), 1);
}

TEST_F(BlockStoreTest, DeadlineIsHonoured) {
  store_->Put("obj", Pattern(5000, 8));
  auto bs = Make();
  store_->CloseGate();
  auto r = bs->Get(Id("obj", 0), absl::Now() + absl::Milliseconds(100));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  store_->OpenGate();
}

TEST_F(BlockStoreTest, RamCapacityIsRespected) {
  for (int i = 0; i < 10; ++i)
    store_->Put("f" + std::to_string(i), Pattern(300000, i));
  BlockStoreOptions o;
  o.ram_capacity_bytes = 1000000;
  auto bs = Make(o);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(bs->Get(Id("f" + std::to_string(i), 0)).ok());
    ASSERT_LE(bs->GetStats().ram_used, 1000000u);
  }
  EXPECT_EQ(bs->GetStats().ram_blocks, 3u);
  EXPECT_EQ(metrics_.evictions_ram.Value(), 7);
}

// A block RAM evicts goes to NVMe, so the eviction is not reported to the
// master's placement index; when NVMe does not take it (its writers behind,
// a full or failing disk), the block is gone and the journal says so (it
// said nothing: the master kept sending readers here for it).
TEST_F(BlockStoreTest, ABlockNeitherTierKeepsIsJournaledAsRemoved) {
  testing::TempDir dir;
  store_->Put("a", Pattern(300000, 1));
  store_->Put("b", Pattern(300000, 2));
  BlockStoreOptions o;
  o.ram_capacity_bytes = 400000;  // One of the two.
  o.nvme = NvmeOptions{{{dir.path(), 64 << 20}}, 0};
  o.max_pending_nvme_writes = 0;  // NVMe takes nothing.
  auto bs = Make(o);
  ASSERT_TRUE(bs->Get(Id("a", 0)).ok());
  std::vector<BlockKey> added, removed;
  bs->DrainJournal(&added, &removed);
  EXPECT_EQ(added.size(), 1u);
  EXPECT_TRUE(removed.empty());           // In RAM still.
  ASSERT_TRUE(bs->Get(Id("b", 0)).ok());  // Evicts a.
  bs->DrainJournal(&added, &removed);
  EXPECT_THAT(removed, ::testing::ElementsAre(Id("a", 0).Key()));
  EXPECT_GE(metrics_.nvme_write_failures.Value(), 3);
}

// A block a reader finds past its TTL leaves RAM with the rest of its object
// memfd, and the journal says so (the master's placement index went on
// naming this worker, and the object's other blocks stayed behind).
TEST_F(BlockStoreTest, ABlockPastItsTtlLeavesWithItsObjectAndIsJournaled) {
  store_->Put("obj", Pattern(2 * kBlock + 100, 3));  // One memfd, 3 blocks.
  BlockStoreOptions o;
  o.rules = *CacheRules::Parse({}, {"m/obj=300ms"});
  auto bs = Make(o);
  for (uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(bs->Get(Id("obj", i)).ok());
  std::vector<BlockKey> added, removed;
  bs->DrainJournal(&added, &removed);
  EXPECT_EQ(added.size(), 3u);
  EXPECT_TRUE(removed.empty());
  absl::SleepFor(absl::Milliseconds(400));
  auto r = bs->Get(Id("obj", 0));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->source, BlockSource::kUnderStore);
  EXPECT_EQ(r->block->data(), Pattern(2 * kBlock + 100, 3).substr(0, kBlock));
  bs->DrainJournal(&added, &removed);
  EXPECT_THAT(removed,
              ::testing::UnorderedElementsAre(
                  Id("obj", 0).Key(), Id("obj", 1).Key(), Id("obj", 2).Key()));
  EXPECT_THAT(added, ::testing::ElementsAre(Id("obj", 0).Key()));
  EXPECT_EQ(bs->GetStats().ram_blocks, 1u);
}

TEST_F(BlockStoreTest, NvmeKeepsBlocksAcrossRestartAndCorruptionIsRefetched) {
  testing::TempDir dir;
  const std::string data = Pattern(200000, 9);
  store_->Put("obj", data);
  BlockStoreOptions o;
  o.nvme = NvmeOptions{{{dir.path(), 64 << 20}}, 0};
  {
    auto bs = Make(o);
    ASSERT_TRUE(bs->Get(Id("obj", 0)).ok());
    bs->Shutdown();  // Waits for the background NVMe write.
  }
  {
    auto bs = Make(o);
    auto r = bs->Get(Id("obj", 0));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->source, BlockSource::kNvme);
    EXPECT_EQ(r->block->data(), data);
    EXPECT_EQ(store_->reads(), 1);
  }
  // Corrupt the file; a new store must detect it, refetch, and serve good
  // bytes.
  for (const auto& e :
       std::filesystem::recursive_directory_iterator(dir.path() + "/blocks")) {
    if (!e.is_regular_file()) continue;
    std::string f = e.path().string();
    auto content = testing::ReadFile(f);
    ASSERT_TRUE(content.ok());
    (*content)[5000] ^= 0x5a;
    ASSERT_TRUE(testing::WriteFile(f, *content).ok());
  }
  WorkerMetrics fresh_metrics;
  auto bs = BlockStore::Create(o, &mounts_, &fresh_metrics);
  ASSERT_TRUE(bs.ok());
  auto r = (*bs)->Get(Id("obj", 0));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->source, BlockSource::kUnderStore);
  EXPECT_EQ(r->block->data(), data);
  EXPECT_EQ(fresh_metrics.checksum_failures.Value(), 1);
  EXPECT_EQ(store_->reads(), 2);
}

// A store that hangs holds the fetch threads, never the blocks on NVMe: a
// restarted worker (RAM empty, NVMe warm) serves them, to a reader and to a
// prefetch, while its only fetch thread waits on the store.
TEST_F(BlockStoreTest, NvmeHitsAreNotQueuedBehindAStoreThatHangs) {
  testing::TempDir dir;
  const std::string warm = Pattern(100000, 11), warm2 = Pattern(5000, 13);
  store_->Put("warm", warm);
  store_->Put("warm2", warm2);
  store_->Put("cold", Pattern(100000, 12));
  BlockStoreOptions o;
  o.nvme = NvmeOptions{{{dir.path(), 64 << 20}}, 0};
  o.fetch_threads = 1;
  {
    auto bs = Make(o);
    ASSERT_TRUE(bs->Get(Id("warm", 0)).ok());
    ASSERT_TRUE(bs->Get(Id("warm2", 0)).ok());
    bs->Shutdown();  // Waits for the background NVMe writes.
  }
  auto bs = Make(o);
  store_->CloseGate();
  std::thread cold([&] {
    auto r = bs->Get(Id("cold", 0));
    EXPECT_TRUE(r.ok()) << r.status();
  });
  ASSERT_TRUE(testing::WaitFor([&] { return store_->waiting() == 1; },
                               absl::Seconds(10)));
  auto r = bs->Get(Id("warm", 0), absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->source, BlockSource::kNvme);
  EXPECT_EQ(r->block->data(), warm);
  bs->Prefetch(Id("warm2", 0));
  EXPECT_TRUE(testing::WaitFor(
      [&] { return bs->TryGetCached(Id("warm2", 0)) != nullptr; },
      absl::Seconds(5)));
  EXPECT_EQ(metrics_.hits_nvme.Value(), 2);
  store_->OpenGate();
  cold.join();
  EXPECT_EQ(store_->reads(), 3);  // The two first fetches, and "cold".
}

// The same over gRPC: with every RPC thread waiting on a store that hangs
// (one, here), a remote read of a block on NVMe is still served.
TEST_F(BlockStoreTest, RemoteReadsOfNvmeBlocksAreNotQueuedBehindHungMisses) {
  testing::TempDir dir;
  const std::string warm = Pattern(100000, 21);
  store_->Put("warm", warm);
  store_->Put("cold", Pattern(100000, 22));
  BlockStoreOptions o;
  o.nvme = NvmeOptions{{{dir.path() + "/nvme", 64 << 20}}, 0};
  {
    auto bs = Make(o);
    ASSERT_TRUE(bs->Get(Id("warm", 0)).ok());
    bs->Shutdown();  // Waits for the background NVMe writes.
  }
  auto bs = Make(o);
  const std::string tokens = dir.path() + "/tokens";
  ASSERT_TRUE(
      testing::WriteFile(tokens, "admin admin-token-0123456789\n").ok());
  ASSERT_TRUE(
      testing::WriteFile(dir.path() + "/admin", "admin-token-0123456789\n")
          .ok());
  SecurityOptions so;
  so.auth_tokens_file = tokens;
  auto auth = Authorizer::Create(so);
  ASSERT_TRUE(auth.ok()) << auth.status();
  ThreadPool rpc(1, "bs-test-rpc");
  DataService service(bs.get(), &metrics_, &rpc, auth->get(), &mounts_);
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  SecurityOptions as_admin;
  as_admin.token_file = dir.path() + "/admin";
  auto channels = ChannelFactory::Create(as_admin);
  ASSERT_TRUE(channels.ok()) << channels.status();
  WorkerClient client(absl::StrCat("127.0.0.1:", port), **channels);

  store_->CloseGate();
  std::thread cold([&] {
    std::string buf(100000, '\0');
    auto r = client.ReadBlock(Id("cold", 0), 0, absl::MakeSpan(buf),
                              absl::Seconds(30));
    EXPECT_TRUE(r.ok()) << r.status();
  });
  ASSERT_TRUE(testing::WaitFor([&] { return store_->waiting() == 1; },
                               absl::Seconds(10)));
  std::string buf(warm.size(), '\0');
  auto r =
      client.ReadBlock(Id("warm", 0), 0, absl::MakeSpan(buf), absl::Seconds(5));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, warm.size());
  EXPECT_EQ(buf, warm);
  store_->OpenGate();
  cold.join();
  server->Shutdown();
}

TEST_F(BlockStoreTest, BadRequestsAreRejected) {
  store_->Put("obj", Pattern(5000, 10));
  auto bs = Make();
  BlockId beyond = Id("obj", 5);
  EXPECT_EQ(bs->Get(beyond).status().code(),
            absl::StatusCode::kInvalidArgument);
  BlockId wrong_size = Id("obj", 0);
  wrong_size.block_size = 1 << 20;
  EXPECT_EQ(bs->Get(wrong_size).status().code(),
            absl::StatusCode::kInvalidArgument);
  BlockId unknown = Id("obj", 0);
  unknown.mount = "nope";
  EXPECT_EQ(bs->Get(unknown).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(BlockStoreTest, PinnedBlocksSurvivePressure) {
  for (int i = 0; i < 6; ++i)
    store_->Put("p" + std::to_string(i), Pattern(300000, i));
  BlockStoreOptions o;
  o.ram_capacity_bytes = 1000000;
  o.rules = *CacheRules::Parse({"m/p0"}, {});
  auto bs = Make(o);
  for (int i = 0; i < 6; ++i)
    ASSERT_TRUE(bs->Get(Id("p" + std::to_string(i), 0)).ok());
  const int reads = store_->reads();
  auto r = bs->Get(Id("p0", 0));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->source, BlockSource::kRam);
  EXPECT_EQ(store_->reads(), reads);
}

// An object of one block is lent whole too: its block's own memfd, the
// object at offset 0 (small files read by the kernel from the worker's
// memory).
TEST_F(BlockStoreTest, AnObjectOfOneBlockIsLentAsItsBlocksMemfd) {
  const std::string data = Pattern(100 * 1024 + 7, 4);
  store_->Put("small", data);
  auto bs = Make();
  EXPECT_EQ(
      bs->ExportObject(Id("small", 0), absl::InfiniteFuture()).status().code(),
      absl::StatusCode::kFailedPrecondition);  // Not cached yet.
  ASSERT_TRUE(bs->Get(Id("small", 0)).ok());
  BlockId wrong = Id("small", 0);
  wrong.object_size = data.size() - 1;
  EXPECT_EQ(bs->ExportObject(wrong, absl::InfiniteFuture()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto lent = bs->ExportObject(Id("small", 0), absl::InfiniteFuture());
  ASSERT_TRUE(lent.ok()) << lent.status();
  EXPECT_EQ(lent->size, data.size());
  std::string whole(data.size() + 1, '\0');
  EXPECT_EQ(::pread(lent->fd, whole.data(), whole.size(), 0),
            static_cast<ssize_t>(data.size()));
  EXPECT_EQ(whole.substr(0, data.size()), data);
  EXPECT_EQ(::pwrite(lent->fd, "x", 1, 0), -1);  // Read-only.
  bs->UnexportObject(Id("small", 0), absl::InfiniteFuture());
}

TEST_F(BlockStoreTest, BlocksOfAnObjectShareOneMemfdLentWholeAndReadOnly) {
  const std::string data = Pattern(3 * kBlock - 100, 9);
  store_->Put("shard", data);
  auto bs = Make();
  // Not cached yet, then cached in part: not lent.
  EXPECT_EQ(
      bs->ExportObject(Id("shard", 1), absl::InfiniteFuture()).status().code(),
      absl::StatusCode::kFailedPrecondition);
  std::vector<std::shared_ptr<const Block>> blocks;
  for (uint64_t i = 0; i < 3; ++i) {
    if (i == 2) {
      EXPECT_EQ(bs->ExportObject(Id("shard", 0), absl::InfiniteFuture())
                    .status()
                    .code(),
                absl::StatusCode::kFailedPrecondition);
    }
    auto r = bs->Get(Id("shard", i));
    ASSERT_TRUE(r.ok()) << r.status();
    blocks.push_back(r->block);
    EXPECT_EQ(r->block->offset(), i * kBlock);
    EXPECT_EQ(r->block->fd(), blocks[0]->fd());
    std::string via_fd(r->block->length(), '\0');
    ASSERT_EQ(::pread(r->block->fd(), via_fd.data(), via_fd.size(),
                      static_cast<off_t>(r->block->offset())),
              static_cast<ssize_t>(via_fd.size()));
    EXPECT_EQ(via_fd, data.substr(i * kBlock, r->block->length()));
  }
  auto object = bs->ExportObject(Id("shard", 2), absl::InfiniteFuture());
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_EQ(object->size, data.size());
  std::string whole(data.size() + 1, '\0');
  EXPECT_EQ(::pread(object->fd, whole.data(), whole.size(), 0),
            static_cast<ssize_t>(data.size()));
  EXPECT_EQ(whole.substr(0, data.size()), data);
  // Whoever holds the fd can only read it.
  EXPECT_EQ(::pwrite(object->fd, "x", 1, 0), -1);
  EXPECT_EQ(::ftruncate(object->fd, 1), -1);
  EXPECT_EQ(::fallocate(object->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                        0, 4096),
            -1);
  EXPECT_EQ(bs->GetStats().leases, 3u);
  bs->UnexportObject(Id("shard", 0), absl::InfiniteFuture());
  EXPECT_EQ(bs->GetStats().leases, 0u);

  // Single-block and larger-than-the-limit objects keep a memfd per block.
  store_->Put("small", Pattern(1000, 1));
  auto small = bs->Get(Id("small", 0));
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->block->object(), nullptr);
  EXPECT_EQ(small->block->offset(), 0u);
  BlockStoreOptions o;
  o.object_file_max_bytes = 2 * kBlock;
  auto limited = Make(o);
  auto r = limited->Get(Id("shard", 0));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->block->object(), nullptr);
  EXPECT_EQ(limited->ExportObject(Id("shard", 0), absl::InfiniteFuture())
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(BlockStoreTest, AnObjectLeavesRamWholeAndLentBytesOutliveIt) {
  const std::string a = Pattern(2 * kBlock, 1), b = Pattern(2 * kBlock, 2);
  store_->Put("a", a);
  store_->Put("b", b);
  store_->Put("c", Pattern(kBlock, 3));
  BlockStoreOptions o;
  o.ram_capacity_bytes = 4 * kBlock;
  o.object_file_max_bytes = 2 * kBlock;
  auto bs = Make(o);
  for (const char* name : {"a", "b"}) {
    for (uint64_t i = 0; i < 2; ++i) ASSERT_TRUE(bs->Get(Id(name, i)).ok());
  }
  // Lent while cached: pressure does not evict it.
  auto lent = bs->ExportObject(Id("a", 0), absl::InfiniteFuture());
  ASSERT_TRUE(lent.ok()) << lent.status();
  ASSERT_TRUE(bs->Get(Id("c", 0)).ok());
  EXPECT_EQ(bs->GetStats().ram_blocks, 3u);  // a (2) and c; b left whole.
  EXPECT_EQ(bs->Get(Id("a", 1))->source, BlockSource::kRam);
  EXPECT_EQ(bs->Get(Id("b", 0))->source, BlockSource::kUnderStore);
  // b's block 0 came back alone (c went); a is still lent.
  bs->UnexportObject(Id("a", 0), absl::InfiniteFuture());
  // Now a is the least recently used: b's block 1 pushes both of a's out.
  ASSERT_TRUE(bs->Get(Id("b", 1)).ok());
  ASSERT_TRUE(bs->Get(Id("c", 0)).ok());
  EXPECT_LE(bs->GetStats().ram_used, 4 * kBlock);
  const int reads = store_->reads();
  EXPECT_EQ(bs->Get(Id("a", 0))->source, BlockSource::kUnderStore);
  EXPECT_EQ(store_->reads(), reads + 1);
  // The fd lent before keeps a's bytes, whatever the worker did since.
  std::string whole(a.size(), '\0');
  EXPECT_EQ(::pread(lent->fd, whole.data(), whole.size(), 0),
            static_cast<ssize_t>(a.size()));
  EXPECT_TRUE(whole == a);
  // The refetched block lives in a new memfd, not the lent one.
  EXPECT_NE(bs->Get(Id("a", 0))->block->fd(), lent->fd);
}

// An export is a lease: once it runs out the object's blocks are evictable
// again, even if the reader never releases it (a client that hangs cannot
// pin the worker's RAM), and the fd it holds still reads the bytes.
TEST_F(BlockStoreTest, AnExportThatRunsOutNoLongerPinsTheObject) {
  const std::string a = Pattern(2 * kBlock, 1);
  store_->Put("a", a);
  store_->Put("b", Pattern(2 * kBlock, 2));
  BlockStoreOptions o;
  o.ram_capacity_bytes = 2 * kBlock;
  o.object_file_max_bytes = 2 * kBlock;
  auto bs = Make(o);
  for (uint64_t i = 0; i < 2; ++i) ASSERT_TRUE(bs->Get(Id("a", i)).ok());
  auto lent =
      bs->ExportObject(Id("a", 0), absl::Now() + absl::Milliseconds(50));
  ASSERT_TRUE(lent.ok()) << lent.status();
  absl::SleepFor(absl::Milliseconds(100));
  // Never released, yet b takes a's place.
  for (uint64_t i = 0; i < 2; ++i) ASSERT_TRUE(bs->Get(Id("b", i)).ok());
  EXPECT_EQ(bs->Get(Id("a", 0))->source, BlockSource::kUnderStore);
  std::string whole(a.size(), '\0');
  EXPECT_EQ(::pread(lent->fd, whole.data(), whole.size(), 0),
            static_cast<ssize_t>(a.size()));
  EXPECT_TRUE(whole == a);
}

// A request that misstates the object's size: its fetch is refused (the
// under-store says the real size), nothing is cached, an honest read of the
// same block that joins at the same time is not failed by it, and the
// object's shared memfd is not sized by it.
TEST_F(BlockStoreTest, AMisstatedObjectSizeCachesNothing) {
  const std::string data = Pattern(2 * kBlock + 1000, 7);
  store_->Put("obj", data);
  auto bs = Make();
  for (uint64_t size : {uint64_t{2 * kBlock + 999}, uint64_t{2 * kBlock + 1001},
                        uint64_t{3 * kBlock}, uint64_t{kBlock * 64}}) {
    BlockId wrong = Id("obj", 1);
    wrong.object_size = size;
    EXPECT_EQ(bs->Get(wrong).status().code(),
              absl::StatusCode::kFailedPrecondition)
        << size;
  }
  EXPECT_EQ(bs->GetStats().ram_blocks, 0u);
  // Both at once: the wrong one fails, the honest one is served.
  store_->CloseGate();
  BlockId wrong = Id("obj", 2);
  wrong.object_size = 3 * kBlock;
  absl::StatusOr<BlockRead> bad, good;
  std::thread a([&] { bad = bs->Get(wrong); });
  std::thread b([&] { good = bs->Get(Id("obj", 2)); });
  ASSERT_TRUE(testing::WaitFor([&] { return store_->waiting() == 2; },
                               absl::Seconds(10)));
  store_->OpenGate();
  a.join();
  b.join();
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->block->data(), data.substr(2 * kBlock));
  // Cached now: a wrong size is refused on the hit too, and TryGetCached
  // does not hand the block out under it.
  EXPECT_EQ(bs->Get(wrong).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(bs->TryGetCached(wrong), nullptr);
  // An object memfd is lent only under the object's real size.
  store_->Put("whole", data);
  for (uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(bs->Get(Id("whole", i)).ok());
  BlockId wrong0 = Id("whole", 0);
  wrong0.object_size = 2 * kBlock + 1;
  EXPECT_EQ(bs->ExportObject(wrong0, absl::InfiniteFuture()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto lent = bs->ExportObject(Id("whole", 0), absl::InfiniteFuture());
  ASSERT_TRUE(lent.ok()) << lent.status();
  EXPECT_EQ(lent->size, data.size());
  bs->UnexportObject(Id("whole", 0), absl::InfiniteFuture());
  EXPECT_EQ(bs->ExportObject(wrong0, absl::InfiniteFuture()).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace larder
