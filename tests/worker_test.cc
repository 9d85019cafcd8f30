// Copyright 2026 The Larder Authors.
//
// A real `larder worker` process over a real s3rver: reads through gRPC and
// through short-circuit, restart warmth after kill -9, corruption on disk, a
// full NVMe directory, single-flight across RPCs, graceful SIGTERM.
#include <fcntl.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "client/local_leases.h"
#include "client/short_circuit_client.h"
#include "client/worker_client.h"
#include "common/block_proto.h"
#include "common/fd_socket.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/worker.grpc.pb.h"
#include "proto/worker.pb.h"
#include "tests/testing/process.h"
#include "tests/testing/s3rver.h"
#include "tests/testing/worker_process.h"
#include "understore/factory.h"
#include "understore/s3_store.h"

namespace larder {
namespace {

constexpr uint64_t kBlock = 4 << 20;
constexpr uint64_t kObjectSize =
    2 * kBlock + 123457;  // Three blocks, the last one short.

using testing::PatternBytes;

// The block files of an NVMe directory.
std::vector<std::string> BlockFiles(const std::string& nvme) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e :
       std::filesystem::recursive_directory_iterator(nvme + "/blocks", ec)) {
    if (e.is_regular_file()) files.push_back(e.path().string());
  }
  return files;
}

class WorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = testing::S3rver::Start("worker-test");
    ASSERT_TRUE(server.ok()) << server.status();
    s3_ = std::move(*server);
    auto store = s3_->OpenStore("ds");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    data_ = PatternBytes(kObjectSize, 1);
    auto v = store_->Put("shard-0.bin", data_);
    ASSERT_TRUE(v.ok()) << v.status();
    version_ = *v;
    ASSERT_TRUE(store_->Put("small.txt", "tiny object").ok());
  }

  std::unique_ptr<testing::WorkerProcess> StartWorker(
      std::vector<std::string> extra = {}) {
    std::vector<std::string> flags = {
        absl::StrCat("--mount=ds=", s3_->Uri("ds")), "--ram_capacity=64MiB",
        absl::StrCat("--nvme=", nvme_.path(), ":256MiB"), "--nvme_reserve=0",
        "--retry_max_attempts=2",
        // 4 MiB blocks fetched as four parallel ranges (the tests count them).
        "--fetch_subrange=1MiB"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    auto w = testing::WorkerProcess::Start(
        flags, {"AWS_ACCESS_KEY_ID=S3RVER", "AWS_SECRET_ACCESS_KEY=S3RVER"});
    EXPECT_TRUE(w.ok()) << w.status();
    return w.ok() ? std::move(*w) : nullptr;
  }

  BlockId Block(uint64_t index) const {
    return BlockId{"ds", "shard-0.bin", version_, index, kBlock, kObjectSize};
  }

  // Reads the whole object block by block through gRPC; returns the bytes.
  std::string ReadAllGrpc(WorkerClient& client,
                          std::vector<std::string>* sources = nullptr) {
    std::string out;
    for (uint64_t i = 0; i < BlockCount(kObjectSize, kBlock); ++i) {
      std::string buf(Block(i).length(), '\0');
      std::string source;
      auto n = client.ReadBlock(Block(i), 0, absl::MakeSpan(buf),
                                absl::Seconds(60), &source);
      EXPECT_TRUE(n.ok()) << n.status();
      if (!n.ok()) return "";
      out += buf.substr(0, *n);
      if (sources) sources->push_back(source);
    }
    return out;
  }

  std::unique_ptr<testing::S3rver> s3_;
  std::unique_ptr<S3Store> store_;
  testing::TempDir nvme_;
  std::string data_;
  std::string version_;
};

TEST_F(WorkerTest, ReadsThroughGrpcAndShortCircuitAreByteExact) {
  auto worker = StartWorker();
  ASSERT_NE(worker, nullptr);
  WorkerClient client(worker->address());
  std::vector<std::string> sources;
  EXPECT_TRUE(ReadAllGrpc(client, &sources) == data_);
  EXPECT_THAT(sources, ::testing::Each("under_store"));
  sources.clear();
  EXPECT_TRUE(ReadAllGrpc(client, &sources) == data_);
  EXPECT_THAT(sources, ::testing::Each("ram"));

  // Odd ranges inside blocks.
  std::string buf(1000, '\0');
  auto n = client.ReadBlock(Block(1), 4095, absl::MakeSpan(buf));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(buf, data_.substr(kBlock + 4095, 1000));

  // Views lend gRPC's own buffers: a whole block arrives in the slices gRPC
  // read the socket into (1 MiB reads), so in several pieces; a range, and
  // the short last block.
  std::string source;
  auto view =
      client.ReadBlockView(Block(0), 0, kBlock, absl::Seconds(30), &source);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_GE(view->pieces.size(), 2u);
  EXPECT_TRUE(view->ToString() == data_.substr(0, kBlock));
  EXPECT_EQ(source, "ram");
  view = client.ReadBlockView(Block(1), 4095, 1000);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->ToString(), data_.substr(kBlock + 4095, 1000));
  view = client.ReadBlockView(Block(2), 0, kBlock);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_TRUE(view->ToString() == data_.substr(2 * kBlock));
  EXPECT_EQ(client.ReadBlockView(Block(0), kBlock + 1, 10).status().code(),
            absl::StatusCode::kOutOfRange);

  auto sc = ShortCircuitClient::Connect(worker->socket_path());
  ASSERT_TRUE(sc.ok()) << sc.status();
  std::string via_sc;
  for (uint64_t i = 0; i < 3; ++i) {
    std::string b(Block(i).length(), '\0');
    std::string source;
    auto r = (*sc)->Read(Block(i), 0, absl::MakeSpan(b), &source);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(source, "ram");
    via_sc += b;
  }
  EXPECT_TRUE(via_sc == data_);
  // A leased fd can be mmapped and stays readable while held.
  auto lease = (*sc)->Open(Block(2));
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ(lease->length, Block(2).length());
  std::string tail(100, '\0');
  ASSERT_EQ(::pread(lease->fd, tail.data(), 100,
                    static_cast<off_t>(lease->offset + 5)),
            100);
  EXPECT_EQ(tail, data_.substr(2 * kBlock + 5, 100));
  // The fd is the worker's cache: a client can neither write it nor map it
  // writable (the memfd is sealed).
  EXPECT_EQ(::pwrite(lease->fd, "x", 1, static_cast<off_t>(lease->offset)), -1);
  EXPECT_EQ(
      ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, lease->fd, 0),
      MAP_FAILED);
  EXPECT_TRUE((*sc)->Release(*lease).ok());

  auto small_info = store_->Stat("small.txt");
  ASSERT_TRUE(small_info.ok());
  auto small = client.ReadBlock(BlockId{"ds", "small.txt", small_info->version,
                                        0, kBlock, small_info->size},
                                0, absl::MakeSpan(buf));
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(buf.substr(0, *small), "tiny object");

  EXPECT_GE(
      *worker->Metric(
          "larder_worker_served_path_bytes_total{path=\"short_circuit\"}"),
      kObjectSize);
  EXPECT_EQ(*worker->Metric("larder_worker_misses_total"), 4);
}

// ReadBlock on the wire, through a plain generated stub: 1 MiB messages by
// default, the size a request asks for within [64 KiB, 4 MiB], the source
// and the bytes on every path.
TEST_F(WorkerTest, ReadBlockStreamsChunksOfTheRequestedSize) {
  auto worker = StartWorker();
  ASSERT_NE(worker, nullptr);
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(16 << 20);
  auto stub = v1::WorkerData::NewStub(grpc::CreateCustomChannel(
      worker->address(), grpc::InsecureChannelCredentials(), args));
  // Returns the data field of each message of one call.
  auto read = [&](uint64_t index, uint64_t offset, uint64_t length,
                  uint32_t chunk, std::string* source = nullptr) {
    v1::ReadBlockRequest req;
    ToProto(Block(index), req.mutable_block());
    req.set_offset(offset);
    req.set_length(length);
    req.set_max_chunk_bytes(chunk);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(60));
    auto reader = stub->ReadBlock(&ctx, req);
    std::vector<std::string> chunks;
    v1::ReadBlockResponse resp;
    while (reader->Read(&resp)) {
      if (chunks.empty() && source != nullptr) *source = resp.source();
      chunks.push_back(resp.data());
    }
    grpc::Status st = reader->Finish();
    EXPECT_TRUE(st.ok()) << st.error_message();
    return chunks;
  };
  auto sizes = [](const std::vector<std::string>& chunks) {
    std::vector<size_t> v;
    for (const std::string& c : chunks) v.push_back(c.size());
    return v;
  };
  auto joined = [](const std::vector<std::string>& chunks) {
    std::string all;
    for (const std::string& c : chunks) all += c;
    return all;
  };

  std::string source;
  std::vector<std::string> chunks = read(0, 0, 0, 0, &source);  // A miss.
  EXPECT_EQ(source, "under_store");
  EXPECT_THAT(sizes(chunks), ::testing::Each(1u << 20));
  EXPECT_EQ(chunks.size(), 4u);
  EXPECT_TRUE(joined(chunks) == data_.substr(0, kBlock));

  chunks = read(0, 0, 0, 4 << 20, &source);
  EXPECT_EQ(source, "ram");
  EXPECT_THAT(sizes(chunks), ::testing::ElementsAre(4u << 20));
  EXPECT_TRUE(joined(chunks) == data_.substr(0, kBlock));

  // Below the floor: 64 KiB; above the ceiling: 4 MiB; a range that does
  // not start at a chunk boundary ends with a short chunk.
  chunks = read(0, 1000, 200000, 100);
  EXPECT_THAT(sizes(chunks),
              ::testing::ElementsAre(65536, 65536, 65536, 200000 - 3 * 65536));
  EXPECT_TRUE(joined(chunks) == data_.substr(1000, 200000));
  chunks = read(1, 0, 0, 64 << 20);
  EXPECT_THAT(sizes(chunks), ::testing::ElementsAre(4u << 20));
  EXPECT_TRUE(joined(chunks) == data_.substr(kBlock, kBlock));

  // The short last block fits in one chunk.
  chunks = read(2, 0, 0, 1 << 20);
  EXPECT_THAT(sizes(chunks), ::testing::ElementsAre(123457));
  EXPECT_TRUE(joined(chunks) == data_.substr(2 * kBlock));
}

TEST_F(WorkerTest, ConcurrentReadsOfOneBlockFetchItOnce) {
  auto worker = StartWorker();
  ASSERT_NE(worker, nullptr);
  WorkerClient client(worker->address(), *ChannelFactory::Insecure(), 4);
  std::vector<std::thread> readers;
  std::atomic<int> ok{0};
  for (int i = 0; i < 40; ++i) {
    readers.emplace_back([&] {
      std::string buf(kBlock, '\0');
      auto n = client.ReadBlock(Block(0), 0, absl::MakeSpan(buf));
      if (n.ok() && *n == kBlock && buf == data_.substr(0, kBlock)) ++ok;
    });
  }
  for (auto& t : readers) t.join();
  EXPECT_EQ(ok.load(), 40);
  EXPECT_EQ(*worker->Metric("larder_worker_misses_total"), 1);
  // One fetch of a 4 MiB block = four 1 MiB ranged GETs in s3rver's own log.
  EXPECT_EQ(s3_->WaitForRequests("shard-0.bin 206", 4), 4);
}

TEST_F(WorkerTest, KilledWorkerRestartsWarmFromNvme) {
  auto worker = StartWorker();
  ASSERT_NE(worker, nullptr);
  {
    WorkerClient client(worker->address());
    ASSERT_TRUE(ReadAllGrpc(client) == data_);
  }
  // NVMe writes are asynchronous: wait until all three blocks are on disk.
  ASSERT_TRUE(testing::WaitFor(
      [&] { return BlockFiles(nvme_.path()).size() == 3; }, absl::Seconds(10)));
  const int gets_before = s3_->CountRequests("shard-0.bin 206");
  worker->Kill(SIGKILL);
  ASSERT_TRUE(worker->Restart().ok());
  WorkerClient client(worker->address());
  std::vector<std::string> sources;
  EXPECT_TRUE(ReadAllGrpc(client, &sources) == data_);
  EXPECT_THAT(sources, ::testing::Each("nvme"));
  EXPECT_EQ(s3_->CountRequests("shard-0.bin 206"), gets_before);
  EXPECT_EQ(*worker->Metric("larder_worker_hits_total{tier=\"nvme\"}"), 3);
}

TEST_F(WorkerTest, CorruptBlockFileIsNeverServed) {
  auto worker = StartWorker();
  ASSERT_NE(worker, nullptr);
  {
    WorkerClient client(worker->address());
    ASSERT_TRUE(ReadAllGrpc(client) == data_);
  }
  std::vector<std::string> files;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        files = BlockFiles(nvme_.path());
        return files.size() == 3;
      },
      absl::Seconds(10)));
  worker->Kill(SIGKILL);
  for (const std::string& f :
       files) {  // Flip one data byte in every block file.
    auto content = testing::ReadFile(f);
    ASSERT_TRUE(content.ok());
    (*content)[4096 + 777] ^= 0x01;
    ASSERT_TRUE(testing::WriteFile(f, *content).ok());
  }
  ASSERT_TRUE(worker->Restart().ok());
  WorkerClient client(worker->address());
  std::vector<std::string> sources;
  EXPECT_TRUE(ReadAllGrpc(client, &sources) == data_);
  EXPECT_THAT(sources, ::testing::Each("under_store"));
  EXPECT_EQ(*worker->Metric("larder_worker_checksum_failures_total"), 3);
  auto stats = client.GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->checksum_failures(), 3u);
}

TEST_F(WorkerTest, FullNvmeDirectoryDegradesToRamOnly) {
  // A reserve larger than the disk: the NVMe tier can never write.
  auto worker = StartWorker({"--nvme_reserve=1000000GiB"});
  ASSERT_NE(worker, nullptr);
  WorkerClient client(worker->address());
  EXPECT_TRUE(ReadAllGrpc(client) == data_);
  std::vector<std::string> sources;
  EXPECT_TRUE(ReadAllGrpc(client, &sources) == data_);
  EXPECT_THAT(sources, ::testing::Each("ram"));
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return *worker->Metric("larder_worker_nvme_write_failures_total") >= 3;
      },
      absl::Seconds(10)));
  auto stats = client.GetStats();
  ASSERT_TRUE(stats.ok());
  ASSERT_EQ(stats->tiers_size(), 2);
  EXPECT_TRUE(stats->tiers(1).degraded());
  EXPECT_EQ(stats->tiers(1).blocks(), 0u);
}

TEST_F(WorkerTest, RealEnospcOnTheNvmeDirectoryDegradesToRamOnly) {
  // A tmpfs whose inodes another process uses up once the worker has
  // opened it: the block files hit ENOSPC for real, with bytes to spare (a
  // disk short of bytes is met by evicting the tier's own blocks first:
  // NvmeTierTest.ADiskFullerThanTheCapacityEvictsInsteadOfStopping).
  testing::TempDir small;
  if (::mount("tmpfs", small.path().c_str(), "tmpfs", 0,
              "size=64m,nr_inodes=64,mode=0700") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs (needs root): "
                 << std::strerror(errno);
  }
  // Declared before the worker: runs after the worker is gone, even on failure.
  absl::Cleanup unmount = [&] { ::umount2(small.path().c_str(), MNT_DETACH); };
  auto worker = StartWorker({absl::StrCat("--nvme=", small.path(), ":1GiB")});
  ASSERT_NE(worker, nullptr);
  int filled = 0;
  for (; filled < 1000; ++filled) {
    const std::string f = absl::StrCat(small.path(), "/other-", filled);
    const int fd = ::open(f.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
      ASSERT_EQ(errno, ENOSPC) << std::strerror(errno);
      break;
    }
    ::close(fd);
  }
  ASSERT_LT(filled, 1000) << "the tmpfs did not run out of inodes";
  WorkerClient client(worker->address());
  EXPECT_TRUE(ReadAllGrpc(client) == data_);
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return *worker->Metric("larder_worker_nvme_write_failures_total") >= 1;
      },
      absl::Seconds(10)));
  std::vector<std::string> sources;
  EXPECT_TRUE(ReadAllGrpc(client, &sources) ==
              data_);  // Still served, from RAM.
  EXPECT_THAT(sources, ::testing::Each("ram"));
  auto stats = client.GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_TRUE(stats->tiers(1).degraded());
  // No temp file is left behind on the full file system.
  EXPECT_TRUE(std::filesystem::is_empty(small.path() + "/tmp"));
  worker.reset();
}

TEST_F(WorkerTest, ErrorsAreNamed) {
  auto worker = StartWorker();
  ASSERT_NE(worker, nullptr);
  WorkerClient client(worker->address());
  std::string buf(10, '\0');
  BlockId missing{"ds", "no-such-object", "v", 0, kBlock, 100};
  EXPECT_EQ(client.ReadBlock(missing, 0, absl::MakeSpan(buf)).status().code(),
            absl::StatusCode::kNotFound);
  BlockId stale = Block(0);
  stale.version = "0123456789abcdef0123456789abcdef";
  EXPECT_EQ(client.ReadBlock(stale, 0, absl::MakeSpan(buf)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  BlockId unknown_mount = Block(0);
  unknown_mount.mount = "nope";
  EXPECT_EQ(
      client.ReadBlock(unknown_mount, 0, absl::MakeSpan(buf)).status().code(),
      absl::StatusCode::kNotFound);
  BlockId beyond = Block(7);
  EXPECT_EQ(client.ReadBlock(beyond, 0, absl::MakeSpan(buf)).status().code(),
            absl::StatusCode::kInvalidArgument);
  s3_->Kill();
  BlockId fresh = Block(1);
  auto down = client.ReadBlock(fresh, 0, absl::MakeSpan(buf));
  EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable)
      << down.status();
  WorkerClient nobody(absl::StrCat("127.0.0.1:", testing::PickFreePort()));
  EXPECT_EQ(nobody.ReadBlock(Block(0), 0, absl::MakeSpan(buf), absl::Seconds(2))
                .status()
                .code(),
            absl::StatusCode::kUnavailable);
}

TEST_F(WorkerTest, ShortCircuitBatchesMixHitsMissesAndErrors) {
  auto worker = StartWorker();
  ASSERT_NE(worker, nullptr);
  auto sc = ShortCircuitClient::Connect(worker->socket_path());
  ASSERT_TRUE(sc.ok());
  BlockId missing{"ds", "no-such-object", "v", 0, kBlock, 100};
  auto leases = (*sc)->OpenBatch({Block(0), Block(2), missing, Block(1)});
  ASSERT_EQ(leases.size(), 4u);
  EXPECT_EQ(leases[2].status().code(), absl::StatusCode::kNotFound);
  std::vector<ShortCircuitClient::Lease> held;
  for (int i : {0, 1, 3}) {
    ASSERT_TRUE(leases[i].ok()) << leases[i].status();
    const uint64_t index = i == 0 ? 0 : i == 1 ? 2 : 1;
    std::string buf(leases[i]->length, '\0');
    ASSERT_EQ(::pread(leases[i]->fd, buf.data(), buf.size(), leases[i]->offset),
              static_cast<ssize_t>(buf.size()));
    EXPECT_TRUE(buf == data_.substr(index * kBlock, Block(index).length()))
        << index;
    held.push_back(*leases[i]);
  }
  // The batch's misses were fetched in parallel, each block exactly once
  // (four 1 MiB ranged GETs per 4 MiB block, one for the short last block,
  // in s3rver's own log).
  EXPECT_EQ(s3_->WaitForRequests("shard-0.bin 206", 4 + 4 + 1), 4 + 4 + 1);
  EXPECT_EQ(*worker->Metric("larder_worker_short_circuit_leases"), 3);
  EXPECT_TRUE((*sc)->ReleaseBatch(held).ok());
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        return *worker->Metric("larder_worker_short_circuit_leases") == 0;
      },
      absl::Seconds(5)));
  // After release, the same connection keeps working.
  std::string buf(100, '\0');
  auto n = (*sc)->Read(Block(0), 10, absl::MakeSpan(buf));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(buf, data_.substr(10, 100));
}

TEST_F(WorkerTest, MalformedShortCircuitFramesDoNotHurtTheWorker) {
  auto worker = StartWorker();
  ASSERT_NE(worker, nullptr);
  {
    // A frame claiming 2 GiB: the worker drops the connection.
    auto fd = ConnectUnix(worker->socket_path());
    ASSERT_TRUE(fd.ok());
    ASSERT_EQ(::write(*fd, "\xff\xff\xff\x7f", 4), 4);
    char c;
    EXPECT_EQ(::read(*fd, &c, 1), 0);  // Closed by the worker.
    ::close(*fd);
  }
  {
    // A well-framed payload that is not a request: a named error, connection
    // kept.
    auto fd = ConnectUnix(worker->socket_path());
    ASSERT_TRUE(fd.ok());
    ASSERT_TRUE(SendFrame(*fd, std::string("\x0a\xff\xff garbage", 11)).ok());
    std::string frame;
    ASSERT_TRUE(RecvFrame(*fd, &frame, nullptr).ok());
    v1::ShortCircuitResponse resp;
    ASSERT_TRUE(resp.ParseFromString(frame));
    EXPECT_EQ(resp.code(),
              static_cast<int>(absl::StatusCode::kInvalidArgument));
    // An OPEN of 65 blocks is refused, not half-served.
    v1::ShortCircuitRequest req;
    for (int i = 0; i < 65; ++i) *req.add_blocks() = v1::BlockRef();
    ASSERT_TRUE(SendFrame(*fd, req.SerializeAsString()).ok());
    ASSERT_TRUE(RecvFrame(*fd, &frame, nullptr).ok());
    ASSERT_TRUE(resp.ParseFromString(frame));
    EXPECT_EQ(resp.code(),
              static_cast<int>(absl::StatusCode::kInvalidArgument));
    ::close(*fd);
  }
  // The worker still serves.
  auto sc = ShortCircuitClient::Connect(worker->socket_path());
  ASSERT_TRUE(sc.ok());
  std::string buf(1000, '\0');
  auto n = (*sc)->Read(Block(1), 0, absl::MakeSpan(buf));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(buf, data_.substr(kBlock, 1000));
}

// A stopped worker (SIGSTOP: its socket still takes connections and
// requests, which the kernel queues) leaves an exchange unanswered. It used
// to hold the reader for as long as the worker stayed stopped; now it fails
// with DeadlineExceeded after the client's timeout, the connection asks
// nothing more, and LocalLeases does not ask that worker again for a while
// (each new connection would wait the whole timeout), so its blocks are
// read elsewhere. After SIGCONT a new connection reads again.
TEST_F(WorkerTest, AStoppedWorkerFailsShortCircuitExchangesInTime) {
  auto worker = StartWorker();
  ASSERT_NE(worker, nullptr);
  const std::string socket = worker->socket_path();
  LocalLeases local(absl::Seconds(1));
  auto sc = local.Take(socket);
  ASSERT_TRUE(sc.ok()) << sc.status();
  std::string buf(Block(0).length(), '\0');
  ASSERT_TRUE((*sc)->Read(Block(0), 0, absl::MakeSpan(buf)).ok());
  absl::Cleanup resume = [&] { ::kill(worker->pid(), SIGCONT); };
  ASSERT_TRUE(testing::StopProcess(worker->pid()).ok());

  const absl::Time start = absl::Now();
  auto stopped = (*sc)->Read(Block(0), 0, absl::MakeSpan(buf));
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(stopped.status().code(), absl::StatusCode::kDeadlineExceeded)
      << stopped.status();
  EXPECT_GE(took, absl::Milliseconds(900));
  EXPECT_LT(took, absl::Seconds(5));
  EXPECT_TRUE((*sc)->broken());
  const absl::Time again = absl::Now();
  EXPECT_EQ((*sc)->Stat("/ds/shard-0.bin", 0, 0).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_LT(absl::Now() - again, absl::Milliseconds(500));
  local.Give(socket, *std::move(sc));  // Broken: not pooled.
  const absl::Time quiet = absl::Now();
  auto next = local.Take(socket);
  EXPECT_EQ(next.status().code(), absl::StatusCode::kUnavailable)
      << "asked again within the quiet window";
  EXPECT_LT(absl::Now() - quiet, absl::Milliseconds(500));

  ASSERT_EQ(::kill(worker->pid(), SIGCONT), 0);
  std::move(resume).Cancel();
  auto fresh = ShortCircuitClient::Connect(socket, absl::Seconds(30));
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  std::fill(buf.begin(), buf.end(), '\0');
  auto read = (*fresh)->Read(Block(0), 0, absl::MakeSpan(buf));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(buf == data_.substr(0, Block(0).length()));
}

// Connections pooled before the worker restarted are dead (it closed them
// all): a read on one used to fail, and fail the read over to other workers
// or the store; it is now tried once more on a new connection.
TEST_F(WorkerTest, AReadAfterTheWorkerRestartedUsesANewConnection) {
  auto worker = StartWorker();
  ASSERT_NE(worker, nullptr);
  const std::string socket = worker->socket_path();
  LocalLeases local;
  std::vector<std::shared_ptr<ShortCircuitClient>> pooled;
  for (int i = 0; i < 2; ++i) {
    auto sc = local.Take(socket);
    ASSERT_TRUE(sc.ok()) << sc.status();
    std::string buf(100, '\0');
    ASSERT_TRUE((*sc)->Read(Block(0), 0, absl::MakeSpan(buf)).ok());
    pooled.push_back(*std::move(sc));
  }
  for (auto& sc : pooled) local.Give(socket, std::move(sc));
  ASSERT_TRUE(worker->Restart().ok());
  auto lease = local.From(socket, Block(1));
  ASSERT_TRUE(lease.ok()) << lease.status();
  ASSERT_NE(*lease, nullptr) << "read over gRPC instead";
  std::string buf(Block(1).length(), '\0');
  auto n =
      ShortCircuitClient::ReadLease((*lease)->lease, 0, absl::MakeSpan(buf));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_TRUE(buf == data_.substr(kBlock, Block(1).length()));
  // The other connection pooled before the restart went with the first.
  auto again = local.From(socket, Block(2));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_NE(*again, nullptr);
}

TEST_F(WorkerTest, SigtermStopsGracefully) {
  auto worker = StartWorker();
  ASSERT_NE(worker, nullptr);
  const pid_t pid = worker->pid();
  ::kill(pid, SIGTERM);
  int status = 0;
  bool exited =
      testing::WaitFor([&] { return ::waitpid(pid, &status, WNOHANG) == pid; },
                       absl::Seconds(20));
  ASSERT_TRUE(exited);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  auto log = testing::ReadFile(worker->log_path());
  EXPECT_THAT(*log, ::testing::HasSubstr("worker.stopped"));
  EXPECT_FALSE(std::filesystem::exists(worker->socket_path()));
}

// ---------------------------------------------------------------------------
// A reader who speaks the wire protocol directly: the worker serves a block
// only as the under-store describes it and never a byte outside it.

// One raw ReadBlock: the bytes streamed and the final status.
struct RawRead {
  grpc::Status status;
  std::string bytes;
};
RawRead ReadBlockRaw(const std::string& address, const BlockId& id,
                     uint64_t offset, uint64_t length) {
  auto stub = v1::WorkerData::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  v1::ReadBlockRequest req;
  ToProto(id, req.mutable_block());
  req.set_offset(offset);
  req.set_length(length);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  RawRead out;
  auto reader = stub->ReadBlock(&ctx, req);
  v1::ReadBlockResponse resp;
  while (reader->Read(&resp)) out.bytes += resp.data();
  out.status = reader->Finish();
  return out;
}

TEST_F(WorkerTest, NoRangeReadsOutsideTheBlock) {
  auto worker = StartWorker();
  ASSERT_NE(worker, nullptr);
  for (uint64_t index : {0, 2}) {  // A full block and the short last one.
    const BlockId id = Block(index);
    const uint64_t len = id.length();
    const std::string block = data_.substr(index * kBlock, len);
    const uint64_t kMax = ~uint64_t{0};
    for (uint64_t offset :
         {uint64_t{0}, uint64_t{1}, len - 1, len, len + 1, kBlock, kBlock + 1,
          uint64_t{1} << 63, kMax - len, kMax - 1, kMax}) {
      for (uint64_t length :
           {uint64_t{0}, uint64_t{1}, len - 1, len, len + 1, kMax - offset,
            kMax - offset + 1, kMax - 1, kMax}) {
        SCOPED_TRACE(absl::StrCat("block ", index, " offset ", offset,
                                  " length ", length));
        RawRead r = ReadBlockRaw(worker->address(), id, offset, length);
        if (offset > len) {
          EXPECT_EQ(r.status.error_code(), grpc::StatusCode::OUT_OF_RANGE)
              << r.status.error_message();
          EXPECT_EQ(r.bytes, "");
          continue;
        }
        ASSERT_TRUE(r.status.ok()) << r.status.error_message();
        const uint64_t want =
            length == 0 ? len - offset : std::min(length, len - offset);
        EXPECT_EQ(r.bytes.size(), want);
        EXPECT_TRUE(r.bytes == block.substr(offset, want));
      }
    }
  }
  // The worker is alive and exact.
  WorkerClient client(worker->address());
  EXPECT_TRUE(ReadAllGrpc(client) == data_);
}

TEST_F(WorkerTest, AWrongObjectSizeIsRefusedAndChangesNothing) {
  auto worker = StartWorker();
  ASSERT_NE(worker, nullptr);
  BlockId shorter = Block(2);
  shorter.object_size = kObjectSize - 1000;
  BlockId longer = Block(2);
  longer.object_size = kObjectSize + kBlock / 2;
  BlockId longer_full = Block(0);  // Block 0 is full either way.
  longer_full.object_size = kObjectSize + 5;
  auto expect_refused = [&](const BlockId& id, const char* when) {
    SCOPED_TRACE(when);
    RawRead r = ReadBlockRaw(worker->address(), id, 0, 0);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
        << r.status.error_message();
    EXPECT_EQ(r.bytes, "");
  };
  // Cold: the worker's own fetch sees the real size and caches nothing.
  expect_refused(shorter, "cold, shorter");
  expect_refused(longer, "cold, longer");
  expect_refused(longer_full, "cold, full block, longer");
  EXPECT_EQ(*worker->Metric("larder_worker_under_store_bytes_total"), 0);
  WorkerClient client(worker->address());
  std::vector<std::string> sources;
  EXPECT_TRUE(ReadAllGrpc(client, &sources) == data_);
  EXPECT_THAT(sources, ::testing::Each("under_store"));
  ASSERT_TRUE(testing::WaitFor(
      [&] { return BlockFiles(nvme_.path()).size() == 3; }, absl::Seconds(10)));
  // Warm in RAM: refused, the honest read still comes from RAM.
  expect_refused(shorter, "ram, shorter");
  expect_refused(longer, "ram, longer");
  expect_refused(longer_full, "ram, full block, longer");
  auto sc = ShortCircuitClient::Connect(worker->socket_path());
  ASSERT_TRUE(sc.ok());
  EXPECT_EQ((*sc)->Open(longer).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*sc)->OpenObject(longer).status().code(),
            absl::StatusCode::kFailedPrecondition);
  sources.clear();
  EXPECT_TRUE(ReadAllGrpc(client, &sources) == data_);
  EXPECT_THAT(sources, ::testing::Each("ram"));
  // Warm on NVMe only (a restarted worker): refused, and the file stays.
  worker->Kill(SIGKILL);
  ASSERT_TRUE(worker->Restart().ok());
  expect_refused(shorter, "nvme, shorter");
  expect_refused(longer, "nvme, longer");
  EXPECT_EQ(BlockFiles(nvme_.path()).size(), 3u);
  WorkerClient again(worker->address());
  sources.clear();
  EXPECT_TRUE(ReadAllGrpc(again, &sources) == data_);
  EXPECT_THAT(sources, ::testing::Each("nvme"));
  EXPECT_EQ(*worker->Metric("larder_worker_checksum_failures_total"), 0);
}

// EXPORT lends several objects in one exchange (a FUSE daemon leasing the
// files it expects to open): one grant per object named, in order, each
// checked against the object asked for; past 64 the client splits them.
TEST_F(WorkerTest, ObjectsAreExportedInBatches) {
  auto worker = StartWorker();
  ASSERT_NE(worker, nullptr);
  WorkerClient client(worker->address());
  ASSERT_TRUE(ReadAllGrpc(client) == data_);  // In RAM now.
  auto sc = ShortCircuitClient::Connect(worker->socket_path());
  ASSERT_TRUE(sc.ok()) << sc.status();
  BlockId longer = Block(0);
  longer.object_size = kObjectSize + 5;
  BlockId absent = Block(0);
  absent.path = "absent.bin";
  const std::string kLeases = "larder_worker_short_circuit_leases";
  const double idle = worker->Metric(kLeases).value_or(-1);
  std::vector<ShortCircuitClient::Lease> granted;
  {
    std::vector<absl::StatusOr<ShortCircuitClient::Lease>> r =
        (*sc)->OpenObjects({Block(0), longer, Block(2), absent, Block(1)},
                           absl::Seconds(5));
    ASSERT_EQ(r.size(), 5u);
    EXPECT_EQ(r[1].status().code(), absl::StatusCode::kFailedPrecondition)
        << r[1].status();
    EXPECT_EQ(r[3].status().code(), absl::StatusCode::kFailedPrecondition)
        << r[3].status();
    for (int k : {0, 2, 4}) {
      ASSERT_TRUE(r[k].ok()) << k << ": " << r[k].status();
      EXPECT_EQ(r[k]->offset, 0u);
      ASSERT_EQ(r[k]->length, kObjectSize);
      std::string bytes(kObjectSize, '\0');
      ASSERT_EQ(::pread(r[k]->fd, bytes.data(), bytes.size(), 0),
                static_cast<ssize_t>(kObjectSize));
      EXPECT_TRUE(bytes == data_) << k;
      granted.push_back(*r[k]);
    }
  }
  // 70 in two exchanges, all granted.
  std::vector<absl::StatusOr<ShortCircuitClient::Lease>> many =
      (*sc)->OpenObjects(std::vector<BlockId>(70, Block(1)), absl::Seconds(5));
  ASSERT_EQ(many.size(), 70u);
  for (auto& l : many) {
    ASSERT_TRUE(l.ok()) << l.status();
    granted.push_back(*l);
  }
  EXPECT_GT(worker->Metric(kLeases).value_or(-1), idle);
  ASSERT_TRUE((*sc)->ReleaseBatch(granted).ok());
  EXPECT_TRUE(testing::WaitFor(
      [&] { return worker->Metric(kLeases).value_or(-1) == idle; },
      absl::Seconds(5)))
      << worker->Metric(kLeases).value_or(-1) << " leases, " << idle << " idle";
}

// The FUSE daemon (root) lends an exported memfd to the kernel for as long
// as a file stays open: it asks for a lease until released, and the worker
// keeps the object in RAM all that time, evicting other blocks instead.
// Finite leases stay capped (at 60 s).
TEST_F(WorkerTest, ARootExportIsLeasedUntilReleased) {
  const std::string other = PatternBytes(kObjectSize, 2);
  absl::StatusOr<std::string> other_version = store_->Put("shard-1.bin", other);
  ASSERT_TRUE(other_version.ok()) << other_version.status();
  // Room for one object and a half: the other's blocks need A's room.
  auto worker = StartWorker(
      {"--ram_capacity=12MiB", "--nvme=", "--object_file_max_size=16MiB"});
  ASSERT_NE(worker, nullptr);
  WorkerClient client(worker->address());
  ASSERT_TRUE(ReadAllGrpc(client) == data_);
  auto sc = ShortCircuitClient::Connect(worker->socket_path());
  ASSERT_TRUE(sc.ok()) << sc.status();
  std::vector<absl::StatusOr<ShortCircuitClient::Lease>> held =
      (*sc)->OpenObjects({Block(0)}, absl::InfiniteDuration());
  ASSERT_EQ(held.size(), 1u);
  ASSERT_TRUE(held[0].ok()) << held[0].status();
  EXPECT_EQ(held[0]->lease, absl::InfiniteDuration());
  std::vector<absl::StatusOr<ShortCircuitClient::Lease>> capped =
      (*sc)->OpenObjects({Block(0)}, absl::Hours(2));
  ASSERT_TRUE(capped[0].ok()) << capped[0].status();
  EXPECT_EQ(capped[0]->lease, absl::Seconds(60));
  std::vector<ShortCircuitClient::Lease> done = {*capped[0]};
  ASSERT_TRUE((*sc)->ReleaseBatch(done).ok());
  // The other object, read twice over: its blocks find no room A's lease
  // would give up.
  for (int pass = 0; pass < 2; ++pass) {
    for (uint64_t i = 0; i < BlockCount(kObjectSize, kBlock); ++i) {
      BlockId b = Block(i);
      b.path = "shard-1.bin";
      b.version = *other_version;
      std::string buf(b.length(), '\0');
      auto n = client.ReadBlock(b, 0, absl::MakeSpan(buf));
      ASSERT_TRUE(n.ok()) << n.status();
      EXPECT_TRUE(buf == other.substr(i * kBlock, b.length()));
    }
  }
  auto again = (*sc)->OpenObjects({Block(0)}, absl::Seconds(1));
  ASSERT_TRUE(again[0].ok())
      << "the held object left RAM: " << again[0].status();
  std::string bytes(kObjectSize, '\0');
  ASSERT_EQ(::pread(held[0]->fd, bytes.data(), bytes.size(), 0),
            static_cast<ssize_t>(kObjectSize));
  EXPECT_TRUE(bytes == data_);
  done = {*held[0], *again[0]};
  ASSERT_TRUE((*sc)->ReleaseBatch(done).ok());
}

TEST_F(WorkerTest, VersionsAreValidatedAndRequired) {
  auto worker = StartWorker();
  ASSERT_NE(worker, nullptr);
  for (const std::string& version :
       {std::string(""), absl::StrCat(version_, "\r\nX-Injected: 1"),
        absl::StrCat(version_, "\""), std::string(2000, 'a'),
        std::string("a b"), std::string("v\0x", 3)}) {
    BlockId id = Block(0);
    id.version = version;
    RawRead r = ReadBlockRaw(worker->address(), id, 0, 10);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << absl::CEscape(version) << ": " << r.status.error_message();
  }
  // Nothing reached the store.
  EXPECT_EQ(s3_->CountRequests("shard-0.bin 206"), 0);
}

TEST_F(WorkerTest, BlockFilesAreTheWorkersAlone) {
  auto worker = StartWorker();
  ASSERT_NE(worker, nullptr);
  WorkerClient client(worker->address());
  ASSERT_TRUE(ReadAllGrpc(client) == data_);
  ASSERT_TRUE(testing::WaitFor(
      [&] { return BlockFiles(nvme_.path()).size() == 3; }, absl::Seconds(10)));
  for (const auto& e :
       std::filesystem::recursive_directory_iterator(nvme_.path())) {
    struct stat st;
    ASSERT_EQ(::stat(e.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, e.is_directory() ? 0700u : 0600u) << e.path();
  }
  for (const std::string& f : BlockFiles(nvme_.path())) {
    testing::Shell cat = testing::Sh(absl::StrCat(
        "setpriv --reuid=65534 --regid=65534 --clear-groups -- cat ", f,
        " >/dev/null 2>&1"));
    EXPECT_NE(cat.code, 0) << f;
  }
  worker->Kill(SIGTERM);
  // A cache directory that others may write to: the worker refuses to start.
  ASSERT_EQ(::chmod(nvme_.path().c_str(), 0777), 0);
  testing::Shell refused = testing::Sh(absl::StrCat(
      "timeout 30 ", LARDER_CLI_BINARY, " worker --nvme=", nvme_.path(),
      ":256MiB --nvme_reserve=0 --listen=127.0.0.1:0",
      " --metrics_listen=127.0.0.1:0 --short_circuit_socket=", nvme_.path(),
      ".sock 2>&1"));
  EXPECT_NE(refused.code, 0) << refused.out;
  EXPECT_THAT(refused.out, ::testing::HasSubstr("writable by others"));
  ASSERT_EQ(::chmod(nvme_.path().c_str(), 0700), 0);
}

// The kubelet's liveness probe reads /healthz: connections that send
// nothing must not starve it (it would restart the worker, losing its RAM).
TEST_F(WorkerTest, HealthzAnswersUnderIdleConnections) {
  auto worker = StartWorker();
  ASSERT_NE(worker, nullptr);
  std::vector<int> idle;
  absl::Cleanup close_all = [&] {
    for (int fd : idle) ::close(fd);
  };
  for (int i = 0; i < 10; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    idle.push_back(fd);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(worker->metrics_port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)),
              0);
  }
  absl::SleepFor(absl::Milliseconds(200));  // Let the server take them all.
  for (int round = 0; round < 3; ++round) {
    const absl::Time start = absl::Now();
    testing::Shell r = testing::Sh(absl::StrCat(
        "curl -sS -m 1 http://127.0.0.1:", worker->metrics_port(), "/healthz"));
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(r.out, "ok\n");
    EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  }
}

// A socket at the worker's path served by another user (a stale path in a
// shared directory, bound by someone else) is not trusted with this
// process's reads.
TEST(ShortCircuitClientTest, RefusesASocketServedByAnotherUser) {
  testing::TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0777), 0);
  const std::string sock = dir.path() + "/worker.sock";
  testing::Subprocess impostor;
  ASSERT_TRUE(impostor
                  .Start({"setpriv", "--reuid=65534", "--regid=65534",
                          "--clear-groups", "--", "/usr/bin/python3", "-c",
                          // Listening before the path appears: a connect
                          // between bind and listen is refused (flaked in
                          // ctest -j2 as a connection error).
                          absl::StrCat("import os,socket,time\n"
                                       "s=socket.socket(socket.AF_UNIX)\n"
                                       "s.bind('",
                                       sock,
                                       ".tmp')\n"
                                       "s.listen(8)\n"
                                       "os.rename('",
                                       sock, ".tmp', '", sock,
                                       "')\n"
                                       "time.sleep(60)\n")},
                         dir.path() + "/impostor.log", {})
                  .ok());
  ASSERT_TRUE(testing::WaitFor([&] { return std::filesystem::exists(sock); },
                               absl::Seconds(20)));
  auto client = ShortCircuitClient::Connect(sock);
  EXPECT_EQ(client.status().code(), absl::StatusCode::kPermissionDenied)
      << client.status();
  EXPECT_THAT(client.status().message(), ::testing::HasSubstr("uid 65534"));
  impostor.Stop(SIGKILL);
}

// A lease's release is one-way: it goes out at once, never after an open
// that another thread has waiting on the same connection (a cold block the
// worker fetches from the store for tens of milliseconds). Before, it
// waited, and a FUSE read that dropped a lease waited with it.
TEST(ShortCircuitClientTest, AReleaseDoesNotWaitBehindAnOpen) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/worker.sock";
  absl::StatusOr<int> listener = ListenUnix(path, 0600);
  ASSERT_TRUE(listener.ok()) << listener.status();
  absl::Notification released;
  std::atomic<bool> released_before_answer{false};
  // A worker that answers an OPEN only after the RELEASE behind it came.
  std::thread worker([&] {
    const int conn = ::accept(*listener, nullptr, nullptr);
    ASSERT_GE(conn, 0);
    std::string frame;
    ASSERT_TRUE(RecvFrame(conn, &frame, nullptr).ok());  // The OPEN.
    // The RELEASE, sent while the OPEN waits for its answer (give up after
    // 5 s: a release held behind the open never comes).
    pollfd p{conn, POLLIN, 0};
    if (::poll(&p, 1, 5000) == 1 && RecvFrame(conn, &frame, nullptr).ok()) {
      v1::ShortCircuitRequest req;
      released_before_answer = req.ParseFromString(frame) &&
                               req.op() == v1::ShortCircuitRequest::RELEASE;
    }
    released.Notify();
    v1::ShortCircuitResponse resp;
    resp.set_code(static_cast<int>(absl::StatusCode::kUnavailable));
    resp.set_message("no such block here");
    SendFrame(conn, resp.SerializeAsString()).IgnoreError();
    ::close(conn);
  });
  auto sc = ShortCircuitClient::Connect(path);
  ASSERT_TRUE(sc.ok()) << sc.status();
  std::thread opener([&] {
    BlockId id{"m", "f", "v1", 0, kDefaultBlockSize, 100};
    EXPECT_FALSE((*sc)->Open(id).ok());
  });
  absl::SleepFor(absl::Milliseconds(200));  // The OPEN is out, unanswered.
  ShortCircuitClient::Lease lease;
  lease.lease_id = 7;
  EXPECT_TRUE((*sc)->Release(lease).ok());
  EXPECT_TRUE(released.WaitForNotificationWithTimeout(absl::Seconds(10)));
  opener.join();
  worker.join();
  ::close(*listener);
  EXPECT_TRUE(released_before_answer);
}

// A worker serving as many connections as it may refuses one more with
// ResourceExhausted ("read over gRPC") and closes it: the reader reads that
// worker over gRPC (no lease, no error), instead of taking the worker for
// failed and reading others.
TEST(ShortCircuitClientTest, ABusyWorkerIsReadOverGrpc) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/worker.sock";
  absl::StatusOr<int> listener = ListenUnix(path, 0600);
  ASSERT_TRUE(listener.ok()) << listener.status();
  std::thread worker([&] {
    const int conn = ::accept(*listener, nullptr, nullptr);
    ASSERT_GE(conn, 0);
    v1::ShortCircuitResponse resp;
    resp.set_code(static_cast<int>(absl::StatusCode::kResourceExhausted));
    resp.set_message("short-circuit busy: 1024 connections served");
    SendFrame(conn, resp.SerializeAsString()).IgnoreError();
    ::close(conn);
  });
  LocalLeases local;
  BlockId id{"m", "f", "v1", 0, kDefaultBlockSize, 100};
  auto lease = local.From(path, id);
  worker.join();
  ::close(*listener);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(*lease, nullptr);
}

// A worker from before batched EXPORT answers one naming several objects
// with a single INVALID_ARGUMENT: the client then asks for one object per
// exchange on that connection, and every object is still lent.
TEST(ShortCircuitClientTest, AnOldWorkerLendsObjectsOneByOne) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/worker.sock";
  absl::StatusOr<int> listener = ListenUnix(path, 0600);
  ASSERT_TRUE(listener.ok()) << listener.status();
  constexpr uint64_t kSize = 100;
  std::atomic<int> exchanges{0}, batches{0};
  std::thread worker([&] {
    const int conn = ::accept(*listener, nullptr, nullptr);
    ASSERT_GE(conn, 0);
    const int memfd = ::memfd_create("object", MFD_CLOEXEC);
    ASSERT_GE(memfd, 0);
    ASSERT_EQ(::ftruncate(memfd, kSize), 0);
    std::string frame;
    while (RecvFrame(conn, &frame, nullptr).ok()) {
      v1::ShortCircuitRequest req;
      ASSERT_TRUE(req.ParseFromString(frame));
      if (req.op() != v1::ShortCircuitRequest::EXPORT) continue;  // RELEASE.
      ++exchanges;
      v1::ShortCircuitResponse resp;
      v1::ShortCircuitGrant* g = resp.add_grants();
      std::vector<int> fds;
      if (req.blocks_size() != 1) {  // As the worker's code was.
        ++batches;
        g->set_code(static_cast<int>(absl::StatusCode::kInvalidArgument));
        g->set_message("EXPORT names one block");
      } else {
        g->set_lease_id(static_cast<uint64_t>(exchanges.load()));
        g->set_offset(0);
        g->set_length(kSize);
        fds.push_back(memfd);
      }
      ASSERT_TRUE(SendFrame(conn, resp.SerializeAsString(), fds).ok());
    }
    ::close(memfd);
    ::close(conn);
  });
  {
    auto sc = ShortCircuitClient::Connect(path);
    ASSERT_TRUE(sc.ok()) << sc.status();
    std::vector<BlockId> ids;
    for (int i = 0; i < 3; ++i)
      ids.push_back(BlockId{"m", absl::StrCat("f", i), "v1", 0,
                            kDefaultBlockSize, kSize});
    for (int round = 0; round < 2; ++round) {
      std::vector<absl::StatusOr<ShortCircuitClient::Lease>> r =
          (*sc)->OpenObjects(ids, absl::Seconds(5));
      ASSERT_EQ(r.size(), 3u);
      std::vector<ShortCircuitClient::Lease> leases;
      for (auto& l : r) {
        ASSERT_TRUE(l.ok()) << l.status();
        EXPECT_EQ(l->length, kSize);
        leases.push_back(*l);
      }
      EXPECT_TRUE((*sc)->ReleaseBatch(leases).ok());
    }
  }  // Closes the connection: the worker's loop ends.
  worker.join();
  ::close(*listener);
  // One batch tried, then one exchange per object in both rounds.
  EXPECT_EQ(batches.load(), 1);
  EXPECT_EQ(exchanges.load(), 1 + 3 + 3);
}

}  // namespace
}  // namespace larder
