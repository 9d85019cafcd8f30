// Copyright 2026 The Larder Authors.
//
// A real cluster: a master and three worker processes over a real s3rver, read
// by larder::Client instances in this process. ctest runs it twice: plain,
// and with TLS and authentication on everywhere ($LARDER_TEST_SECURE, see
// tests/testing/pki.h: "secure/" test names).
#include <grpcpp/create_channel.h>
#include <signal.h>
#include <stdlib.h>

#include <atomic>
#include <cstring>
#include <map>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/worker_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "larder/client.h"
#include "master/membership.h"
#include "proto/master.grpc.pb.h"
#include "tests/testing/pki.h"
#include "tests/testing/process.h"
#include "tests/testing/s3rver.h"
#include "tests/testing/worker_process.h"
#include "understore/factory.h"
#include "understore/s3_store.h"

namespace larder {
namespace {

constexpr uint64_t kBlock =
    1 << 20;  // Below 2 MiB: one ranged GET per block fetch.

using testing::PatternBytes;

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Every process, this one included (under-store fallback), uses s3rver's
    // keys.
    ::setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1);
    ::setenv("AWS_SECRET_ACCESS_KEY", "S3RVER", 1);
    auto server = testing::S3rver::Start("cluster");
    ASSERT_TRUE(server.ok()) << server.status();
    s3_ = std::move(*server);
    auto store = s3_->OpenStore("ds");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    for (int i = 0; i < 12; ++i) {
      const std::string path =
          absl::StrCat("train/c", i % 3, "/sample-", i, ".bin");
      files_[path] =
          PatternBytes(300000 + i * 250000, i);  // 0.3 to 3 MiB: 1 to 3 blocks.
      ASSERT_TRUE(store_->Put(path, files_[path]).ok());
    }
    auto master = testing::MasterProcess::Start(
        {"--heartbeat_timeout=2s", "--heartbeat_interval=200ms"},
        {"AWS_ACCESS_KEY_ID=S3RVER", "AWS_SECRET_ACCESS_KEY=S3RVER"});
    ASSERT_TRUE(master.ok()) << master.status();
    master_ = std::move(*master);
    for (int w = 0; w < 3; ++w) {
      auto worker = testing::WorkerProcess::Start(
          {absl::StrCat("--master=", master_->address()),
           absl::StrCat("--worker_id=w", w), "--ram_capacity=256MiB",
           "--retry_max_attempts=2"},
          {"AWS_ACCESS_KEY_ID=S3RVER", "AWS_SECRET_ACCESS_KEY=S3RVER"});
      ASSERT_TRUE(worker.ok()) << worker.status();
      workers_.push_back(std::move(*worker));
    }
    stub_ = v1::Master::NewStub(
        testing::SuiteChannels(Role::kAdmin)->Channel(master_->address()));
    ASSERT_TRUE(WaitForWorkers(3));
    if (testing::SuitePki() != nullptr) {
      // The secure run is secured: plain gRPC without credentials is refused.
      auto plain = v1::Master::NewStub(grpc::CreateChannel(
          master_->address(), grpc::InsecureChannelCredentials()));
      v1::Ring ring;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
      ASSERT_FALSE(plain->GetRing(&ctx, v1::GetRingRequest(), &ring).ok());
    }
    ASSERT_TRUE(AddMount("/datasets/ds", s3_->Uri("ds"), 1000));
  }

  bool AddMount(const std::string& path, const std::string& uri, int ttl_ms) {
    v1::AddMountRequest req;
    req.mutable_mount()->set_path(path);
    req.mutable_mount()->set_uri(uri);
    req.mutable_mount()->set_block_size(kBlock);
    req.mutable_mount()->set_metadata_ttl_ms(ttl_ms);
    v1::MountTable table;
    grpc::ClientContext ctx;
    return stub_->AddMount(&ctx, req, &table).ok();
  }

  v1::Ring Ring() {
    v1::Ring ring;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(5));
    stub_->GetRing(&ctx, v1::GetRingRequest(), &ring).ok();
    return ring;
  }

  bool WaitForWorkers(int n) {
    return testing::WaitFor([&] { return Ring().workers_size() == n; },
                            absl::Seconds(20));
  }

  std::unique_ptr<Client> Connect(const std::string& node) {
    ClientOptions o;
    o.master = master_->address();
    o.security = testing::SuiteSecurity(Role::kReader);
    o.node =
        node;  // "elsewhere": read over gRPC; the host name: short-circuit.
    o.ring_refresh = absl::Milliseconds(200);
    o.worker_timeout = absl::Seconds(10);
    auto c = Client::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }

  // Reads every file whole (with File::Read, or File::ReadView) and checks
  // it; returns the number of mismatches.
  int ReadAndCheck(Client& client, bool view = false) {
    int bad = 0;
    for (const auto& [path, data] : files_) {
      auto f = client.Open("/datasets/ds/" + path);
      if (!f.ok()) {
        ADD_FAILURE() << path << ": " << f.status();
        ++bad;
        continue;
      }
      std::string buf(data.size(), '\0');
      absl::StatusOr<size_t> n;
      if (view) {
        absl::StatusOr<ByteView> v = (*f)->ReadView(0, data.size());
        n = v.ok() ? absl::StatusOr<size_t>(v->size()) : v.status();
        if (v.ok()) buf = v->ToString();
      } else {
        n = (*f)->Read(0, absl::MakeSpan(buf));
      }
      if (!n.ok() || *n != data.size() || buf != data) {
        ADD_FAILURE() << path << ": "
                      << (n.ok() ? "wrong bytes" : n.status().ToString());
        ++bad;
      }
    }
    return bad;
  }

  std::unique_ptr<testing::S3rver> s3_;
  std::unique_ptr<S3Store> store_;
  std::map<std::string, std::string> files_;
  std::unique_ptr<testing::MasterProcess> master_;
  std::vector<std::unique_ptr<testing::WorkerProcess>> workers_;
  std::unique_ptr<v1::Master::Stub> stub_;
};

TEST_F(ClusterTest, TwoClientsReadingConcurrentlyFetchEachBlockOnce) {
  auto remote = Connect("elsewhere");
  auto local = Connect("");  // This host: short-circuit to the owners.
  ASSERT_TRUE(remote && local);
  std::atomic<int> bad{0};
  std::thread a([&] { bad += ReadAndCheck(*remote); });
  std::thread b([&] { bad += ReadAndCheck(*local); });
  a.join();
  b.join();
  EXPECT_EQ(bad.load(), 0);
  // s3rver's own log: exactly one ranged GET per block of every file.
  for (const auto& [path, data] : files_) {
    const std::string name = path.substr(path.rfind('/') + 1);
    EXPECT_EQ(s3_->WaitForRequests(name + " 206", static_cast<int>(BlockCount(
                                                      data.size(), kBlock))),
              static_cast<int>(BlockCount(data.size(), kBlock)))
        << path;
  }
  EXPECT_GT(remote->stats().blocks_grpc, 0u);
  EXPECT_EQ(remote->stats().blocks_short_circuit, 0u);
  EXPECT_GT(local->stats().blocks_short_circuit, 0u);
  EXPECT_EQ(
      remote->stats().blocks_under_store + local->stats().blocks_under_store,
      0u);
}

TEST_F(ClusterTest, ShortCircuitLeasesAreKeptBoundedAndGivenBack) {
  // 40 one-block files more: more blocks than the client keeps leases on.
  for (int i = 0; i < 40; ++i) {
    const std::string path = absl::StrCat("extra/f", i);
    files_[path] = PatternBytes(70000 + i, 500 + i);
    ASSERT_TRUE(store_->Put(path, files_[path]).ok());
  }
  auto local = Connect("");  // This host: short-circuit.
  ASSERT_TRUE(local);
  EXPECT_EQ(ReadAndCheck(*local), 0);
  EXPECT_EQ(ReadAndCheck(*local), 0);  // Second pass: kept leases, same bytes.
  auto held = [&] {
    double n = 0;
    for (auto& w : workers_)
      n += w->Metric("larder_worker_short_circuit_leases").value_or(0);
    return n;
  };
  // The client keeps at most 32 leases and gives the others back (a one-way
  // message, hence the wait); it keeps some rather than none.
  EXPECT_TRUE(testing::WaitFor([&] { return held() <= 32; }, absl::Seconds(5)))
      << held();
  EXPECT_GT(held(), 0);
  EXPECT_GT(local->stats().blocks_short_circuit, 0u);
}

TEST_F(ClusterTest, FileBatchesCopyEveryFileExactlyOnEveryPath) {
  // A rebalance window: blocks are cached (and placed) when a worker joins.
  {
    auto first = Connect("elsewhere");
    ASSERT_TRUE(first);
    auto f = first->Open("/datasets/ds/" + files_.begin()->first);
    ASSERT_TRUE(f.ok()) << f.status();
    std::string buf(files_.begin()->second.size(), '\0');
    ASSERT_TRUE((*f)->Read(0, absl::MakeSpan(buf)).ok());
    ASSERT_TRUE(testing::WaitFor(
        [&] {
          return master_->Metric("larder_master_block_replicas").value_or(0) >
                 0;
        },
        absl::Seconds(10)));
  }
  auto joined = testing::WorkerProcess::Start(
      {absl::StrCat("--master=", master_->address()), "--worker_id=w3",
       "--ram_capacity=256MiB"},
      {"AWS_ACCESS_KEY_ID=S3RVER", "AWS_SECRET_ACCESS_KEY=S3RVER"});
  ASSERT_TRUE(joined.ok()) << joined.status();
  workers_.push_back(std::move(*joined));
  ASSERT_TRUE(WaitForWorkers(4));
  auto local = Connect("");  // This host: short-circuit.
  auto remote = Connect("elsewhere");
  ASSERT_TRUE(local && remote);
  std::vector<std::string> paths;
  std::vector<std::unique_ptr<File>> opened;
  std::vector<File*> files;
  for (const auto& [path, data] : files_) {
    auto f = local->Open("/datasets/ds/" + path);
    ASSERT_TRUE(f.ok()) << f.status();
    paths.push_back(path);
    files.push_back(f->get());
    opened.push_back(*std::move(f));
  }
  auto read_all = [&](Client& client, std::vector<File*> batch_files) {
    std::vector<std::string> bufs;
    std::vector<absl::Span<char>> spans;
    for (const std::string& p : paths)
      bufs.emplace_back(files_[p].size(), '\0');
    for (std::string& b : bufs) spans.push_back(absl::MakeSpan(b));
    std::vector<absl::Status> st = client.ReadFiles(batch_files, spans);
    int bad = 0;
    for (size_t i = 0; i < paths.size(); ++i) {
      if (!st[i].ok() || bufs[i] != files_[paths[i]]) {
        ADD_FAILURE() << paths[i] << ": "
                      << (st[i].ok() ? "wrong bytes" : st[i].ToString());
        ++bad;
      }
    }
    return bad;
  };
  // Files of 1 to 3 blocks, mostly cold, then warm, by short-circuit. The
  // ring has just changed while blocks were cached: where a block is cached
  // is asked of the master in one Locate for the whole batch, not one per
  // block.
  auto locates = [&] {
    return master_->Metric("larder_master_rpcs_total{method=\"Locate\"}")
        .value_or(-1);
  };
  const double locates_before = locates();
  EXPECT_EQ(read_all(*local, files), 0);
  EXPECT_EQ(locates() - locates_before, 1);
  EXPECT_EQ(read_all(*local, files), 0);
  EXPECT_GT(local->stats().blocks_short_circuit, 0u);
  // The leases are given back when the batch goes (a one-way message).
  auto leases = [&] {
    double n = 0;
    for (auto& w : workers_)
      n += w->Metric("larder_worker_short_circuit_leases").value_or(0);
    return n;
  };
  EXPECT_TRUE(testing::WaitFor([&] { return leases() == 0; }, absl::Seconds(5)))
      << leases();

  // Over gRPC (another node's client opens its own files).
  std::vector<std::unique_ptr<File>> remote_opened;
  std::vector<File*> remote_files;
  for (const std::string& p : paths) {
    auto f = remote->Open("/datasets/ds/" + p);
    ASSERT_TRUE(f.ok()) << f.status();
    remote_files.push_back(f->get());
    remote_opened.push_back(*std::move(f));
  }
  EXPECT_EQ(read_all(*remote, remote_files), 0);
  EXPECT_GT(remote->stats().blocks_grpc, 0u);
  EXPECT_EQ(remote->stats().blocks_short_circuit, 0u);

  // Files copied out one at a time, in any order; named errors.
  std::unique_ptr<FileBatch> batch = local->ReadBatch(files);
  ASSERT_EQ(batch->size(), files.size());
  for (size_t i = files.size(); i-- > 0;) {
    std::string buf(files_[paths[i]].size(), '\0');
    ASSERT_TRUE(batch->ReadInto(i, absl::MakeSpan(buf)).ok()) << paths[i];
    EXPECT_TRUE(buf == files_[paths[i]]) << paths[i];
  }
  std::string small(10, '\0');
  EXPECT_EQ(batch->ReadInto(0, absl::MakeSpan(small)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(batch->ReadInto(files.size(), absl::MakeSpan(small)).code(),
            absl::StatusCode::kOutOfRange);
  batch.reset();
  // A file opened by another client is refused, by name.
  std::vector<absl::Status> foreign =
      local->ReadFiles({remote_files[0]}, {absl::MakeSpan(small)});
  EXPECT_EQ(foreign[0].code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(foreign[0].message(), "another client"));

  // A worker killed: its blocks are read again with failover, still exact.
  workers_[1]->Kill(SIGKILL);
  EXPECT_EQ(read_all(*local, files), 0);
  EXPECT_EQ(read_all(*remote, remote_files), 0);
}

TEST_F(ClusterTest, ReadViewsLendTheRightBytesOnEveryPath) {
  auto remote = Connect("elsewhere");
  auto local = Connect("");
  ASSERT_TRUE(remote && local);
  // Whole files: over gRPC (lent from its buffers) and by short-circuit.
  EXPECT_EQ(ReadAndCheck(*remote, /*view=*/true), 0);
  EXPECT_EQ(ReadAndCheck(*local, /*view=*/true), 0);
  EXPECT_GT(remote->stats().blocks_grpc, 0u);
  EXPECT_EQ(remote->stats().blocks_short_circuit, 0u);
  EXPECT_GT(local->stats().blocks_short_circuit, 0u);

  // Ranges across a block boundary, at and beyond the end.
  const std::string path = "train/c2/sample-11.bin";  // 3 blocks.
  const std::string& data = files_[path];
  ASSERT_GT(data.size(), 2 * kBlock);
  auto f = remote->Open("/datasets/ds/" + path);
  ASSERT_TRUE(f.ok()) << f.status();
  for (auto [offset, length] : std::vector<std::pair<uint64_t, uint64_t>>{
           {kBlock - 10, 20}, {1, 2 * kBlock + 5}, {data.size() - 5, 100}}) {
    auto v = (*f)->ReadView(offset, length);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_TRUE(v->ToString() == data.substr(offset, length))
        << offset << "+" << length;
  }
  auto at_end = (*f)->ReadView(data.size(), 10);
  ASSERT_TRUE(at_end.ok());
  EXPECT_EQ(at_end->size(), 0u);
  EXPECT_EQ((*f)->ReadView(data.size() + 1, 1).status().code(),
            absl::StatusCode::kOutOfRange);
  // A view holds its bytes: it outlives the file and later reads.
  auto kept = (*f)->ReadView(0, data.size());
  ASSERT_TRUE(kept.ok());
  f->reset();
  EXPECT_EQ(ReadAndCheck(*remote), 0);
  EXPECT_TRUE(kept->ToString() == data);

  // Every worker gone: views come from the under-store, still exact.
  for (auto& w : workers_) w->Kill(SIGKILL);
  const uint64_t before = remote->stats().blocks_under_store;
  EXPECT_EQ(ReadAndCheck(*remote, /*view=*/true), 0);
  EXPECT_GT(remote->stats().blocks_under_store, before);
}

TEST_F(ClusterTest, KilledWorkerDuringReadsNeverFailsARead) {
  auto client = Connect("elsewhere");
  ASSERT_NE(client, nullptr);
  ASSERT_EQ(ReadAndCheck(*client), 0);  // Warm.
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0}, rounds{0};
  std::thread reader([&] {
    while (!stop) {
      bad += ReadAndCheck(*client, /*view=*/rounds % 2 == 1);
      ++rounds;
    }
  });
  ASSERT_TRUE(testing::WaitFor([&] { return rounds >= 1; }, absl::Seconds(30)));
  workers_[1]->Kill(SIGKILL);
  const int at_kill = rounds;
  ASSERT_TRUE(WaitForWorkers(2)) << "the ring must drop the dead worker";
  ASSERT_TRUE(testing::WaitFor([&] { return rounds >= at_kill + 3; },
                               absl::Seconds(60)));
  stop = true;
  reader.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(client->stats().failovers, 0u);
  const v1::Ring ring = Ring();  // Not a temporary: the loop refers into it.
  for (const auto& w : ring.workers()) EXPECT_NE(w.id(), "w1");
}

TEST_F(ClusterTest, MasterRestartKeepsMountsAndRebuildsPlacement) {
  auto client = Connect("elsewhere");
  ASSERT_NE(client, nullptr);
  ASSERT_EQ(ReadAndCheck(*client), 0);
  // Where is the first block of a file cached, by the master's index?
  auto info = client->Stat("/datasets/ds/train/c0/sample-0.bin");
  ASSERT_TRUE(info.ok());
  BlockId id{"/datasets/ds", "train/c0/sample-0.bin", info->version, 0, kBlock,
             info->size};
  auto locate = [&]() -> std::vector<std::string> {
    v1::LocateRequest req;
    req.add_block_keys(KeyToBytes(id.Key()));
    v1::LocateResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(5));
    if (!stub_->Locate(&ctx, req, &resp).ok() || resp.locations_size() != 1)
      return {};
    return {resp.locations(0).worker_ids().begin(),
            resp.locations(0).worker_ids().end()};
  };
  ASSERT_TRUE(testing::WaitFor([&] { return locate().size() == 1; },
                               absl::Seconds(10)));
  const std::vector<std::string> before = locate();
  // Blocks the index holds, per worker.
  auto placed = [&] {
    std::map<std::string, uint64_t> out;
    v1::ClusterStatsResponse stats;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(10));
    if (stub_->GetClusterStats(&ctx, v1::ClusterStatsRequest(), &stats).ok()) {
      for (const auto& w : stats.workers())
        out[w.info().id()] = w.placement_blocks();
    }
    return out;
  };
  uint64_t blocks = 0;
  for (const auto& [path, data] : files_)
    blocks += BlockCount(data.size(), kBlock);
  std::map<std::string, uint64_t> placed_before;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        placed_before = placed();
        uint64_t total = 0;
        for (const auto& [id, n] : placed_before) total += n;
        return total == blocks;
      },
      absl::Seconds(10)))
      << "the heartbeats place every block read";

  ASSERT_TRUE(master_->Restart().ok());
  stub_ = v1::Master::NewStub(
      testing::SuiteChannels(Role::kAdmin)->Channel(master_->address()));
  ASSERT_TRUE(WaitForWorkers(3))
      << "workers re-register with the restarted master";
  v1::MountTable table;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->GetMounts(&ctx, v1::GetMountsRequest(), &table).ok());
  ASSERT_EQ(table.mounts_size(), 1);
  EXPECT_EQ(table.mounts(0).path(), "/datasets/ds");
  ASSERT_TRUE(
      testing::WaitFor([&] { return locate() == before; }, absl::Seconds(10)))
      << "placement rebuilt from the workers' full reports";
  ASSERT_TRUE(testing::WaitFor([&] { return placed() == placed_before; },
                               absl::Seconds(10)))
      << "every worker's whole report is placed again";
  // Reads go on, all from the caches.
  const int gets = s3_->CountRequests(" 206");
  EXPECT_EQ(ReadAndCheck(*client), 0);
  EXPECT_EQ(s3_->CountRequests(" 206"), gets);
}

TEST_F(ClusterTest, ReplacedObjectIsSeenAfterTheTtlAndNeverMixed) {
  auto client = Connect("elsewhere");
  ASSERT_NE(client, nullptr);
  const std::string path = "train/c1/sample-4.bin";
  auto old_file = client->Open("/datasets/ds/" + path);
  ASSERT_TRUE(old_file.ok());
  std::string buf(files_[path].size(), '\0');
  ASSERT_TRUE((*old_file)->Read(0, absl::MakeSpan(buf)).ok());
  ASSERT_TRUE(buf == files_[path]);

  const std::string fresh =
      PatternBytes(files_[path].size(), 99);  // Same size, new bytes.
  ASSERT_TRUE(store_->Put(path, fresh).ok());
  // The open file is pinned to the old version: it may still serve cached old
  // blocks, or fail with FailedPrecondition; it never returns new bytes.
  auto again = (*old_file)->Read(0, absl::MakeSpan(buf));
  if (again.ok()) {
    EXPECT_TRUE(buf == files_[path]);
  } else {
    EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition)
        << again.status();
  }
  // After the metadata TTL (1 s), a new Open sees the new version, whole.
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto f = client->Open("/datasets/ds/" + path);
        return f.ok() && (*f)->info().version != (*old_file)->info().version;
      },
      absl::Seconds(10)));
  auto f = client->Open("/datasets/ds/" + path);
  ASSERT_TRUE(f.ok());
  std::string now(fresh.size(), '\0');
  auto n = (*f)->Read(0, absl::MakeSpan(now));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_TRUE(now == fresh);
}

TEST_F(ClusterTest, AJoiningWorkerDoesNotCauseRefetches) {
  auto client = Connect("elsewhere");
  ASSERT_NE(client, nullptr);
  ASSERT_EQ(ReadAndCheck(*client), 0);
  const int gets = s3_->CountRequests(" 206");
  // Workers report new blocks with their next heartbeat: wait until the
  // master's placement index knows every block.
  v1::LocateRequest all;
  for (const auto& [path, data] : files_) {
    auto info = client->Stat("/datasets/ds/" + path);
    ASSERT_TRUE(info.ok());
    for (uint64_t b = 0; b < BlockCount(data.size(), kBlock); ++b) {
      all.add_block_keys(KeyToBytes(
          BlockId{"/datasets/ds", path, info->version, b, kBlock, data.size()}
              .Key()));
    }
  }
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        v1::LocateResponse resp;
        grpc::ClientContext ctx;
        if (!stub_->Locate(&ctx, all, &resp).ok()) return false;
        for (const auto& l : resp.locations()) {
          if (l.worker_ids_size() == 0) return false;
        }
        return true;
      },
      absl::Seconds(10)));
  // A fourth worker joins: it now owns about a quarter of the blocks, which
  // are still cached where they were. The placement index sends reads there.
  auto joiner = testing::WorkerProcess::Start(
      {absl::StrCat("--master=", master_->address()), "--worker_id=w3",
       "--ram_capacity=256MiB"},
      {"AWS_ACCESS_KEY_ID=S3RVER", "AWS_SECRET_ACCESS_KEY=S3RVER"});
  ASSERT_TRUE(joiner.ok()) << joiner.status();
  ASSERT_TRUE(WaitForWorkers(4));
  auto fresh = Connect("elsewhere");  // Sees the new ring from its start.
  ASSERT_NE(fresh, nullptr);
  EXPECT_EQ(ReadAndCheck(*fresh), 0);
  EXPECT_EQ(s3_->CountRequests(" 206"), gets)
      << "blocks were refetched instead of read where they are cached";
}

TEST_F(ClusterTest, ResponsesWithANewerRingVersionRefreshTheRing) {
  ClientOptions o;
  o.master = master_->address();
  o.security = testing::SuiteSecurity(Role::kReader);
  o.node = "elsewhere";
  o.ring_refresh = absl::Hours(1);  // Only responses can make it refresh.
  auto client = Client::Connect(o);
  ASSERT_TRUE(client.ok());
  ASSERT_EQ(ReadAndCheck(**client), 0);
  const uint64_t refreshes = (*client)->stats().ring_refreshes;
  // Workers pass on the ring version they heard from the master.
  WorkerClient direct(workers_[0]->address(),
                      *testing::SuiteChannels(Role::kReader));
  auto info = (*client)->Stat("/datasets/ds/train/c0/sample-0.bin");
  ASSERT_TRUE(info.ok());
  std::string buf(100, '\0');
  uint64_t worker_ring = 0;
  ASSERT_TRUE(direct
                  .ReadBlock(BlockId{"/datasets/ds", "train/c0/sample-0.bin",
                                     info->version, 0, kBlock, info->size},
                             0, absl::MakeSpan(buf), absl::Seconds(10), nullptr,
                             &worker_ring)
                  .ok());
  EXPECT_EQ(worker_ring, Ring().version());
  // A worker joins: the next master response carries a newer version.
  auto joiner = testing::WorkerProcess::Start(
      {absl::StrCat("--master=", master_->address()), "--worker_id=w3",
       "--ram_capacity=256MiB"},
      {"AWS_ACCESS_KEY_ID=S3RVER", "AWS_SECRET_ACCESS_KEY=S3RVER"});
  ASSERT_TRUE(joiner.ok());
  ASSERT_TRUE(WaitForWorkers(4));
  // (Stat is answered from the node's metadata cache now; a List page
  // always asks the master.)
  ASSERT_TRUE((*client)->List("/datasets/ds/train/c0", "", 10).ok());
  EXPECT_EQ((*client)->stats().ring_refreshes, refreshes + 1);
}

// Stat misses in one directory are answered from one listing of it, not
// one under-store request (S3 HEAD) per file; files the listing does not
// show (added since) and missing files are still looked up one by one.
TEST_F(ClusterTest, StatMissesInADirectoryShareOneListing) {
  auto store = s3_->OpenStore("many");
  ASSERT_TRUE(store.ok()) << store.status();
  constexpr int kFiles = 300;
  for (int i = 0; i < kFiles; ++i)
    ASSERT_TRUE(
        (*store)->Put(absl::StrCat("d/f", i), PatternBytes(100 + i, i)).ok());
  ASSERT_TRUE(AddMount("/datasets/many", s3_->Uri("many"), 60000));
  auto client = Connect("elsewhere");
  ASSERT_NE(client, nullptr);
  auto requests = [&](const std::string& op) {
    return master_
        ->Metric(absl::StrCat(
            "larder_master_under_store_metadata_requests{op=\"", op, "\"}"))
        .value_or(-1);
  };
  const double stats0 = requests("stat"), lists0 = requests("list");

  std::atomic<int> next{0}, bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i; (i = next++) < kFiles;) {
        const std::string rel = absl::StrCat("d/f", i);
        auto got = client->Stat(absl::StrCat("/datasets/many/", rel));
        auto want = (*store)->Stat(rel);
        if (!got.ok() || !want.ok() || got->size != want->size ||
            got->version != want->version || got->is_dir) {
          ++bad;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  // The first misses before the listing took over: at most one per thread.
  EXPECT_LE(requests("stat") - stats0, 8);
  EXPECT_LE(requests("list") - lists0, 2);

  // Added after the listing: found by its own Stat. Missing: NotFound.
  ASSERT_TRUE((*store)->Put("d/late", "late").ok());
  auto late = client->Stat("/datasets/many/d/late");
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(late->size, 4u);
  EXPECT_EQ(client->Stat("/datasets/many/d/none").status().code(),
            absl::StatusCode::kNotFound);
  // Opening and reading a file whose metadata came from the listing.
  auto f = client->Open("/datasets/many/d/f7");
  ASSERT_TRUE(f.ok()) << f.status();
  std::string buf(200, '\0');
  auto n = (*f)->Read(0, absl::MakeSpan(buf));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(buf.substr(0, *n), PatternBytes(107, 7));
}

// One metadata cache per node: processes on a node (here: clients, each
// with a cache of its own) that stat the same files cost the master one
// Stat per file in all, not one per file per process; the others are
// answered by the node's worker. An invalidation reaches every one of them,
// and a process that has heard of it never gets the dropped answer back
// from the worker, even before the worker's own heartbeat tells it.
TEST_F(ClusterTest, ProcessesOnANodeShareOneMetadataCache) {
  ASSERT_TRUE(AddMount("/datasets/node", s3_->Uri("ds"), 60000));
  auto stats = [&] {
    return master_->Metric("larder_master_rpcs_total{method=\"Stat\"}")
        .value_or(0);
  };
  std::vector<std::string> paths;
  for (const auto& [path, data] : files_)
    paths.push_back("/datasets/node/" + path);
  paths.push_back("/datasets/node/train/none.bin");  // NotFound: kept too.
  const double before = stats();
  constexpr int kProcesses = 4;
  std::vector<std::unique_ptr<Client>> clients;
  for (int p = 0; p < kProcesses; ++p) {
    clients.push_back(Connect(""));  // This host: the node's workers.
    ASSERT_TRUE(clients.back());
  }
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int p = 0; p < kProcesses; ++p) {
    threads.emplace_back([&, p] {
      for (const std::string& path : paths) {
        absl::StatusOr<FileInfo> s = clients[p]->Stat(path);
        const std::string rel = path.substr(strlen("/datasets/node/"));
        if (files_.count(rel)
                ? !s.ok() || s->size != files_[rel].size()
                : s.status().code() != absl::StatusCode::kNotFound)
          ++bad;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(stats() - before, paths.size())
      << "one master Stat per path, whatever the number of processes";
  // Every answer came from the node's worker; it asked the master once per
  // path and answered the rest from its cache.
  uint64_t node_answers = 0;
  for (auto& c : clients) node_answers += c->stats().metadata_node_hits;
  EXPECT_EQ(node_answers, kProcesses * paths.size());
  auto worker_count = [&](const std::string& result) {
    double sum = 0;
    for (const auto& w : workers_) {
      sum += w->Metric(absl::StrCat(
                           "larder_worker_metadata_requests_total{result=\"",
                           result, "\"}"))
                 .value_or(0);
    }
    return sum;
  };
  EXPECT_EQ(worker_count("miss"), paths.size());
  EXPECT_EQ(worker_count("hit"), (kProcesses - 1) * paths.size());
  const double per_file = stats();
  for (int i = 0; i < 4; ++i) {  // Another "epoch" of fresh processes.
    auto fresh = Connect("");
    ASSERT_TRUE(fresh);
    for (const std::string& path : paths) (void)fresh->Stat(path);
  }
  EXPECT_EQ(stats(), per_file);
  EXPECT_EQ(worker_count("hit"), (kProcesses + 3) * paths.size());

  // Replaced and invalidated: a process that starts after the invalidation
  // sees the new version at once; the processes that held the old answer
  // see it once they hear of the invalidation (ring_refresh, 200 ms).
  const std::string rel = "train/c0/sample-0.bin";
  const std::string path = "/datasets/node/" + rel;
  const std::string old_version = clients[0]->Stat(path)->version;
  const std::string fresh_bytes = PatternBytes(files_[rel].size() + 7, 77);
  ASSERT_TRUE(store_->Put(rel, fresh_bytes).ok());
  {
    v1::InvalidateRequest req;
    req.set_path(path);
    v1::InvalidateResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->Invalidate(&ctx, req, &resp).ok());
  }
  auto late = Connect("");
  ASSERT_TRUE(late);
  absl::StatusOr<FileInfo> seen = late->Stat(path);
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_NE(seen->version, old_version);
  EXPECT_EQ(seen->size, fresh_bytes.size());
  for (auto& c : clients) {
    EXPECT_TRUE(testing::WaitFor(
        [&] {
          absl::StatusOr<FileInfo> s = c->Stat(path);
          return s.ok() && s->version == seen->version;
        },
        absl::Seconds(10)));
  }
  auto f = late->Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  std::string buf(fresh_bytes.size(), '\0');
  auto n = (*f)->Read(0, absl::MakeSpan(buf));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_TRUE(buf == fresh_bytes);
}

// A cache keeps an answer for what is left of its TTL where it came from,
// not a whole TTL again: an object replaced on the under-store is seen by
// every client within one TTL of the master's first look at it, whether the
// answer went master -> client or master -> node cache -> client.
TEST_F(ClusterTest, AReplacedObjectIsSeenWithinOneTtlNotTwo) {
  constexpr int kTtlMs = 4000;
  ASSERT_TRUE(AddMount("/datasets/age", s3_->Uri("ds"), kTtlMs));
  const std::string rel = "train/c2/sample-5.bin";
  const std::string path = "/datasets/age/" + rel;
  auto first = Connect("elsewhere");  // Fills the master's cache only.
  ASSERT_TRUE(first);
  const absl::Time t0 = absl::Now();
  absl::StatusOr<FileInfo> old_info = first->Stat(path);
  ASSERT_TRUE(old_info.ok()) << old_info.status();
  absl::SleepFor(absl::Milliseconds(kTtlMs * 3 / 4));
  // Three quarters of the TTL later: a remote client, and a local one whose
  // miss goes through the node's worker, each look for the first time.
  auto remote = Connect("elsewhere");
  auto local = Connect("");
  ASSERT_TRUE(remote && local);
  ASSERT_EQ(remote->Stat(path)->version, old_info->version);
  ASSERT_EQ(local->Stat(path)->version, old_info->version);
  EXPECT_EQ(local->stats().metadata_node_hits, 1u);
  const std::string fresh = PatternBytes(files_[rel].size() + 3, 55);
  ASSERT_TRUE(store_->Put(rel, fresh).ok());
  for (Client* c : {remote.get(), local.get()}) {
    ASSERT_TRUE(testing::WaitFor(
        [&] {
          absl::StatusOr<FileInfo> s = c->Stat(path);
          return s.ok() && s->size == fresh.size();
        },
        absl::Seconds(15)));
    // Kept for a whole TTL from its own look, it would be seen only after
    // t0 + 1.75 TTL (7 s).
    EXPECT_LT(absl::Now() - t0, absl::Milliseconds(kTtlMs + 1500));
  }
}

// `larder mount` of a mount that is there already (a start-up Job on every
// upgrade) changes nothing: not the table's version, and no invalidation
// that would drop every client's metadata cache; a new mount does both.
TEST_F(ClusterTest, TheSameMountAgainChangesNothing) {
  const v1::Ring before = Ring();
  ASSERT_TRUE(AddMount("/datasets/ds", s3_->Uri("ds"), 1000));
  const v1::Ring again = Ring();
  EXPECT_EQ(again.mounts_version(), before.mounts_version());
  EXPECT_EQ(again.invalidation_seq(), before.invalidation_seq());
  ASSERT_TRUE(AddMount("/datasets/other", s3_->Uri("ds"), 1000));
  const v1::Ring after = Ring();
  EXPECT_GT(after.mounts_version(), before.mounts_version());
  EXPECT_GT(after.invalidation_seq(), before.invalidation_seq());
}

// A worker holding 400,000 blocks (1.6 TB at 4 MiB) re-registers with its
// whole block report, one 7 MB RegisterWorker: gRPC's default 4 MiB limit had
// refused it ("Received message larger than max") after every master restart.
// A worker from before packed reports sends its whole report in one
// request of ~18 bytes a block. A master reads requests of at most 4 MiB by
// default (they are read whole before the caller is authenticated); with
// --master_max_request_size=64MiB, for the time of an upgrade, it takes it.
TEST_F(ClusterTest, AWorkerWithALargeBlockReportRegisters) {
  v1::RegisterWorkerRequest req;
  req.mutable_worker()->set_id("big");
  req.mutable_worker()->set_address("127.0.0.1:1");
  req.mutable_worker()->set_node("big-node");
  req.mutable_worker()->set_capacity_bytes(2ull << 40);
  std::string key(16, '\0');
  for (uint32_t i = 0; i < 400000; ++i) {
    std::memcpy(key.data(), &i, sizeof(i));
    key[15] = 'L';
    req.add_cached_blocks(key);
  }
  ASSERT_GT(req.ByteSizeLong(), 4u << 20);
  v1::RegisterWorkerResponse resp;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(60));
    grpc::Status st = stub_->RegisterWorker(&ctx, req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << st.error_message();
  }
  auto upgrading = testing::MasterProcess::Start(
      {"--master_max_request_size=64MiB"},
      {"AWS_ACCESS_KEY_ID=S3RVER", "AWS_SECRET_ACCESS_KEY=S3RVER"});
  ASSERT_TRUE(upgrading.ok()) << upgrading.status();
  stub_ = v1::Master::NewStub(
      testing::SuiteChannels(Role::kAdmin)->Channel((*upgrading)->address()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  grpc::Status st = stub_->RegisterWorker(&ctx, req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  // Its blocks are placed: the last key of the report is located on it.
  v1::LocateRequest loc;
  loc.add_block_keys(key);
  v1::LocateResponse where;
  grpc::ClientContext ctx2;
  ASSERT_TRUE(stub_->Locate(&ctx2, loc, &where).ok());
  ASSERT_EQ(where.locations_size(), 1);
  EXPECT_THAT(where.locations(0).worker_ids(), ::testing::Contains("big"));
}

// Stats ask every worker at once under one deadline: three workers that do
// not answer (stopped) cost the caller one timeout, not one each.
TEST_F(ClusterTest, ClusterStatsAskWorkersInParallel) {
  for (auto& w : workers_) ::kill(w->pid(), SIGSTOP);
  absl::Cleanup resume = [&] {
    for (auto& w : workers_) ::kill(w->pid(), SIGCONT);
  };
  v1::ClusterStatsResponse stats;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  const absl::Time start = absl::Now();
  ASSERT_TRUE(
      stub_->GetClusterStats(&ctx, v1::ClusterStatsRequest(), &stats).ok());
  const absl::Duration took = absl::Now() - start;
  EXPECT_LT(took, absl::Seconds(6)) << "three 3 s timeouts one after another";
  int unanswered = 0;
  for (const auto& w : stats.workers()) {
    unanswered += !w.error().empty();
    EXPECT_TRUE(!w.alive() || !w.error().empty())
        << w.info().id() << " answered while stopped";
  }
  EXPECT_GE(unanswered, 2);  // Else the time above proves nothing.
}

TEST_F(ClusterTest, ClearErrors) {
  auto client = Connect("elsewhere");
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->Open("/datasets/ds/no/such/file").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(client->Open("/not-mounted/x").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(client->Open("/datasets/ds/train").status().code(),
            absl::StatusCode::kInvalidArgument);
  // A URI the under-store cannot use is refused at mount time.
  EXPECT_FALSE(AddMount("/datasets/bad",
                        "s3://bk?endpoint=http://127.0.0.1:1&region=us-east-1",
                        1000));
  EXPECT_EQ(client->Stat("/datasets/bad/x").status().code(),
            absl::StatusCode::kNotFound);
  // The master is up but the under-store is not: the error names the
  // under-store, not the master.
  {
    const int dead = testing::PickFreePort();
    ASSERT_TRUE(
        AddMount("/datasets/gone",
                 absl::StrCat("s3://bucket?endpoint=http://127.0.0.1:", dead,
                              "&region=us-east-1&path_style=true"),
                 1000));
    const absl::Status st = client->Stat("/datasets/gone/x").status();
    EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
    EXPECT_THAT(std::string(st.message()),
                ::testing::HasSubstr(absl::StrCat("127.0.0.1:", dead)));
    EXPECT_THAT(
        std::string(st.message()),
        ::testing::Not(::testing::HasSubstr("cannot reach the Larder master")));
  }
  ClientOptions o;
  o.master = absl::StrCat("127.0.0.1:", testing::PickFreePort());
  o.security = testing::SuiteSecurity(Role::kReader);
  auto nobody = Client::Connect(o);
  EXPECT_EQ(nobody.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(nobody.status().message()),
              ::testing::HasSubstr("cannot reach the Larder master"));
}

}  // namespace
}  // namespace larder
