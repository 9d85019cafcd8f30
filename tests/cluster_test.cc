// Copyright 2026 The Larder Authors.
//
// A real cluster: a master and three worker processes over a real s3rver, read
// by larder::Client instances in this process (tests/cluster_fixture.h): block
// reads, failover, placement. The metadata tests are in
// cluster_metadata_test.cc. ctest runs it twice: plain,
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
#include "absl/synchronization/notification.h"
#include "client/worker_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "larder/client.h"
#include "master/membership.h"
#include "proto/master.grpc.pb.h"
#include "tests/cluster_fixture.h"
#include "tests/testing/pki.h"
#include "tests/testing/process.h"
#include "tests/testing/s3rver.h"
#include "tests/testing/worker_process.h"
#include "understore/factory.h"
#include "understore/s3_store.h"

namespace larder {
namespace {

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

// A worker on this node that is stopped (SIGSTOP: its sockets still take
// connections and requests, which the kernel queues) answers nothing. A
// reader's short-circuit exchange with it used to wait until the worker
// resumed; now it gives up after worker_timeout (10 s here) and the read goes
// to the next worker, so every file reads, and in bounded time.
TEST_F(ClusterTest, AStoppedLocalWorkerCostsATimeoutNotAHang) {
  {
    auto warm = Connect("");  // This host: short-circuit to every worker.
    ASSERT_NE(warm, nullptr);
    ASSERT_EQ(ReadAndCheck(*warm), 0);
  }
  // A client of its own, which keeps no leases yet: every block is an
  // exchange with its owner.
  auto local = Connect("");
  ASSERT_NE(local, nullptr);
  absl::Cleanup resume = [&] { ::kill(workers_[1]->pid(), SIGCONT); };
  ASSERT_TRUE(testing::StopProcess(workers_[1]->pid()).ok());
  absl::Notification done;
  std::atomic<int> bad{-1};
  const absl::Time start = absl::Now();
  std::thread reader([&] {
    bad = ReadAndCheck(*local);
    done.Notify();
  });
  const bool in_time = done.WaitForNotificationWithTimeout(absl::Seconds(60));
  const absl::Duration took = absl::Now() - start;
  ::kill(workers_[1]->pid(), SIGCONT);  // Lets a reader that hung finish.
  reader.join();
  EXPECT_TRUE(in_time) << "the reads waited for the stopped worker";
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(local->stats().failovers, 0u);
  std::printf("[stopped] every file read in %.1f s with w1 stopped\n",
              absl::ToDoubleSeconds(took));
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

TEST_F(ClusterTest, AJoiningWorkerDoesNotCauseRefetches) {
  auto client = Connect("elsewhere");
  ASSERT_NE(client, nullptr);
  ASSERT_EQ(ReadAndCheck(*client), 0);
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
  // Counted once every block is placed: a readahead fetch the reads above
  // started in the background is then over (counted before, one finishing
  // late made this test fail on a loaded machine).
  const int gets = s3_->CountRequests(" 206");
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
