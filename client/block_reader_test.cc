// Copyright 2026 The Larder Authors.
//
// The block reader's failover without processes: three fake workers, each a
// gRPC WorkerData service in this process on a loopback port, that answer
// as told (the block's bytes, an error, a short block) or are stopped; the
// under-store fallback reads a file:// mount in a temporary directory.
#include "client/block_reader.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/block_proto.h"
#include "common/grpc_status.h"
#include "gtest/gtest.h"
#include "proto/worker.grpc.pb.h"
#include "understore/factory.h"

namespace larder {
namespace {

constexpr uint64_t kBlock = 1 << 20;
constexpr uint64_t kObject = 3 * kBlock + 12345;

char ByteAt(uint64_t object_offset) {
  return static_cast<char>((object_offset * 131 + 7) & 0xff);
}

std::string Expected(const BlockId& id, uint64_t offset, uint64_t n) {
  std::string out(n, '\0');
  for (uint64_t i = 0; i < n; ++i) out[i] = ByteAt(id.offset() + offset + i);
  return out;
}

// One fake worker: answers ReadBlock with the block's bytes, or as told.
class FakeWorker final : public v1::WorkerData::Service {
 public:
  enum class Mode { kServe, kUnavailable, kNotFound, kShort, kStoreInternal };

  FakeWorker() {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                       &port_);
    b.RegisterService(this);
    server_ = b.BuildAndStart();
  }
  ~FakeWorker() override { Stop(); }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  void Stop() {
    if (server_) server_->Shutdown();
  }
  std::atomic<Mode> mode{Mode::kServe};
  std::atomic<uint64_t> ring_version{0};
  std::atomic<int> calls{0};

  grpc::Status ReadBlock(
      grpc::ServerContext*, const v1::ReadBlockRequest* req,
      grpc::ServerWriter<v1::ReadBlockResponse>* out) override {
    ++calls;
    switch (mode.load()) {
      case Mode::kUnavailable:
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fetch failed");
      case Mode::kNotFound:
        return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such object");
      case Mode::kStoreInternal:  // As a worker sends the store's failure.
        return ToGrpcStatus(
            MarkStoreError(absl::InternalError("the store answered 500")));
      default:
        break;
    }
    const BlockId id = FromProto(req->block());
    uint64_t n =
        req->length() == 0 ? id.length() - req->offset() : req->length();
    if (mode.load() == Mode::kShort) n /= 2;
    const std::string data = Expected(id, req->offset(), n);
    constexpr size_t kChunk = 256 << 10;
    for (size_t at = 0; at < data.size() || at == 0; at += kChunk) {
      v1::ReadBlockResponse r;
      r.set_data(data.substr(at, kChunk));
      r.set_source("ram");
      r.set_ring_version(ring_version.load());
      out->Write(r);
      if (data.empty()) break;
    }
    return grpc::Status::OK;
  }

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

class BlockReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           absl::StrCat("block_reader_test.", ::getpid());
    std::filesystem::create_directories(dir_);
    std::string object(kObject, '\0');
    for (uint64_t i = 0; i < kObject; ++i) object[i] = ByteAt(i);
    std::ofstream(dir_ / "f", std::ios::binary) << object;
    absl::StatusOr<std::unique_ptr<UnderStore>> store =
        OpenUnderStore("file://" + dir_.string(), UnderStoreOptions());
    ASSERT_TRUE(store.ok()) << store.status();
    absl::StatusOr<ObjectInfo> info = (*store)->Stat("f");
    ASSERT_TRUE(info.ok()) << info.status();
    version_ = info->version;

    v1::Ring ring;
    ring.set_version(1);
    ring.set_vnodes(64);
    ring.set_changed_unix_ms(absl::ToUnixMillis(absl::Now() - absl::Hours(1)));
    for (int i = 0; i < 3; ++i) {
      workers_.push_back(std::make_unique<FakeWorker>());
      v1::WorkerInfo* w = ring.add_workers();
      w->set_id(absl::StrCat("w", i));
      w->set_address(workers_.back()->address());
      w->set_node("elsewhere");
      w->set_capacity_bytes(1 << 30);
    }
    router_.Install(ring);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  BlockId Block(uint64_t index) const {
    return BlockId{"/data", "f", version_, index, kBlock, kObject};
  }
  // The fake worker that is candidate `i` of block `id` (ring order).
  FakeWorker& Owner(const BlockId& id, size_t i) {
    const Router::Route r = router_.Owners(id, 3);
    return *workers_[r.candidates[i].worker->id()[1] - '0'];
  }
  std::unique_ptr<BlockReader> Reader(bool fallback = true) {
    BlockReader::Options o;
    o.under_store_fallback = fallback;
    o.worker_timeout = absl::Seconds(5);
    return std::make_unique<BlockReader>(
        o, router_, local_,
        BlockReader::Hooks{
            .refresh_ring =
                [this] {
                  ++ring_refreshes_;
                  return absl::OkStatus();
                },
            .note_ring_version = [this](uint64_t v) { noted_ring_ = v; },
            .mount = [this](const std::string& path)
                -> std::optional<v1::MountEntry> {
              if (path != "/data") return std::nullopt;
              v1::MountEntry m;
              m.set_path("/data");
              m.set_uri("file://" + dir_.string());
              m.set_block_size(kBlock);
              return m;
            }});
  }

  std::filesystem::path dir_;
  std::string version_;
  std::vector<std::unique_ptr<FakeWorker>> workers_;
  LocalLeases local_;
  Router router_{
      {.node = "here", .suspect_for = absl::Seconds(30)},
      [](const v1::LocateRequest&) -> absl::StatusOr<v1::LocateResponse> {
        return absl::UnavailableError("no placement index here");
      },
      [](const std::string&) { return false; },
      [](const std::string& address) {
        return std::make_shared<WorkerClient>(address);
      }};
  std::atomic<int> ring_refreshes_{0};
  std::atomic<uint64_t> noted_ring_{0};
};

TEST_F(BlockReaderTest, ReadsFromTheOwnerOnly) {
  auto reader = Reader();
  for (uint64_t b = 0; b < 4; ++b) {
    const BlockId id = Block(b);
    std::string out(id.length() - 100, '\0');
    ASSERT_TRUE(reader->Read(id, 100, absl::MakeSpan(out)).ok());
    EXPECT_EQ(out, Expected(id, 100, out.size()));
  }
  int calls = 0;
  for (const auto& w : workers_) calls += w->calls;
  EXPECT_EQ(calls, 4);
  EXPECT_EQ(reader->counters().grpc, 4u);
  EXPECT_EQ(reader->counters().failovers, 0u);
  EXPECT_EQ(ring_refreshes_, 0);
}

TEST_F(BlockReaderTest, AFailingOwnerIsSkippedAndThenTriedLast) {
  auto reader = Reader();
  const BlockId id = Block(1);
  FakeWorker& owner = Owner(id, 0);
  owner.mode = FakeWorker::Mode::kUnavailable;
  std::string out(id.length(), '\0');
  ASSERT_TRUE(reader->Read(id, 0, absl::MakeSpan(out)).ok());
  EXPECT_EQ(out, Expected(id, 0, out.size()));
  EXPECT_EQ(owner.calls, 1);
  EXPECT_EQ(Owner(id, 1).calls, 1);
  EXPECT_EQ(reader->counters().failovers, 1u);
  // The suspect is not asked again while it is one.
  ASSERT_TRUE(reader->Read(id, 0, absl::MakeSpan(out)).ok());
  EXPECT_EQ(owner.calls, 1);
  EXPECT_EQ(reader->counters().failovers, 1u);
}

// A suspect that serves a read again (tried last, when the others failed)
// is no longer one: its blocks go to it first again instead of to workers
// that do not cache them, for the rest of suspect_for (30 s here).
TEST_F(BlockReaderTest, ASuspectThatAnswersIsTriedFirstAgain) {
  auto reader = Reader(/*fallback=*/false);
  const BlockId id = Block(1);
  FakeWorker& owner = Owner(id, 0);
  std::string out(id.length(), '\0');
  owner.mode = FakeWorker::Mode::kUnavailable;
  ASSERT_TRUE(reader->Read(id, 0, absl::MakeSpan(out)).ok());  // Suspect.
  owner.mode = FakeWorker::Mode::kServe;
  Owner(id, 1).mode = Owner(id, 2).mode = FakeWorker::Mode::kUnavailable;
  ASSERT_TRUE(reader->Read(id, 0, absl::MakeSpan(out)).ok());  // Owner last.
  EXPECT_EQ(out, Expected(id, 0, out.size()));
  // The other two are suspects now, the owner not: for a block whose first
  // owner is another worker, the owner comes first (with every worker still
  // a suspect, the ring's order would put that other worker first).
  const std::string owner_id = router_.Owners(id, 1).candidates[0].worker->id();
  bool checked = false;
  for (uint64_t b = 0; b < 4 && !checked; ++b) {
    const Router::Route ring = router_.Owners(Block(b), 3);
    if (ring.candidates[0].worker->id() == owner_id) continue;
    const Router::Route order = router_.Candidates(Block(b), 3);
    EXPECT_EQ(order.candidates[0].worker->id(), owner_id) << b;
    checked = true;
  }
  EXPECT_TRUE(checked) << "every block has the same first owner";
}

TEST_F(BlockReaderTest, AStoppedOwnerIsFailedOverToo) {
  auto reader = Reader();
  const BlockId id = Block(2);
  Owner(id, 0).Stop();
  absl::StatusOr<ByteView> v = reader->View(id, 0, id.length());
  ASSERT_TRUE(v.ok()) << v.status();
  std::string got;
  for (absl::Span<const char> p : v->pieces) got.append(p.data(), p.size());
  EXPECT_EQ(got, Expected(id, 0, id.length()));
  EXPECT_EQ(reader->counters().failovers, 1u);
}

TEST_F(BlockReaderTest, AnObjectErrorIsNotFailedOver) {
  auto reader = Reader();
  const BlockId id = Block(0);
  Owner(id, 0).mode = FakeWorker::Mode::kNotFound;
  std::string out(id.length(), '\0');
  absl::Status st = reader->Read(id, 0, absl::MakeSpan(out));
  EXPECT_TRUE(absl::IsNotFound(st)) << st;
  EXPECT_EQ(Owner(id, 1).calls, 0);
  EXPECT_EQ(reader->counters().under_store, 0u);
}

// The store's failure behind a worker is the store's whatever its code: an
// Internal one lost its mark in WorkerClient and was failed over to every
// worker, twice, and then to the store.
TEST_F(BlockReaderTest, AStoresInternalErrorIsNotFailedOver) {
  auto reader = Reader(/*fallback=*/false);
  const BlockId id = Block(0);
  Owner(id, 0).mode = FakeWorker::Mode::kStoreInternal;
  std::string out(id.length(), '\0');
  absl::Status st = reader->Read(id, 0, absl::MakeSpan(out));
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal) << st;
  EXPECT_TRUE(IsStoreError(st)) << st;
  EXPECT_EQ(Owner(id, 1).calls, 0);
  EXPECT_EQ(reader->counters().failovers, 0u);
}

// An infinite worker_timeout is no deadline (now + milliseconds::max()
// overflowed into the past: every read failed at once).
TEST_F(BlockReaderTest, AnInfiniteTimeoutIsNoDeadline) {
  const BlockId id = Block(1);
  WorkerClient client(Owner(id, 0).address());
  std::string out(id.length(), '\0');
  absl::StatusOr<size_t> n =
      client.ReadBlock(id, 0, absl::MakeSpan(out), absl::InfiniteDuration());
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(out, Expected(id, 0, out.size()));
}

TEST_F(BlockReaderTest, AShortAnswerIsAFailure) {
  auto reader = Reader(/*fallback=*/false);
  const BlockId id = Block(3);  // The last, short block.
  for (auto& w : workers_) w->mode = FakeWorker::Mode::kShort;
  std::string out(id.length(), '\0');
  absl::Status st = reader->Read(id, 0, absl::MakeSpan(out));
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "returned")) << st;
  // Every candidate, twice (the second time after a ring refresh).
  EXPECT_EQ(ring_refreshes_, 1);
  EXPECT_EQ(reader->counters().failovers, 6u);
}

TEST_F(BlockReaderTest, WhenEveryWorkerFailsTheUnderStoreIsRead) {
  auto reader = Reader();
  for (auto& w : workers_) w->Stop();
  const BlockId id = Block(3);
  std::string out(id.length(), '\0');
  ASSERT_TRUE(reader->Read(id, 0, absl::MakeSpan(out)).ok());
  EXPECT_EQ(out, Expected(id, 0, out.size()));
  EXPECT_EQ(reader->counters().under_store, 1u);
  EXPECT_EQ(ring_refreshes_, 1);
}

TEST_F(BlockReaderTest, WithoutTheFallbackTheWorkersErrorIsReturned) {
  auto reader = Reader(/*fallback=*/false);
  for (auto& w : workers_) w->mode = FakeWorker::Mode::kUnavailable;
  const BlockId id = Block(0);
  std::string out(id.length(), '\0');
  absl::Status st = reader->Read(id, 0, absl::MakeSpan(out));
  EXPECT_TRUE(absl::IsUnavailable(st)) << st;
  EXPECT_EQ(reader->counters().under_store, 0u);
}

TEST_F(BlockReaderTest, AnUnknownMountIsNamed) {
  auto reader = Reader();
  for (auto& w : workers_) w->Stop();
  BlockId id = Block(0);
  id.mount = "/gone";
  std::string out(id.length(), '\0');
  absl::Status st = reader->Read(id, 0, absl::MakeSpan(out));
  EXPECT_TRUE(absl::IsNotFound(st)) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "/gone")) << st;
}

TEST_F(BlockReaderTest, AWorkersNewerRingIsPassedOn) {
  auto reader = Reader();
  const BlockId id = Block(1);
  Owner(id, 0).ring_version = 7;
  std::string out(10, '\0');
  ASSERT_TRUE(reader->Read(id, 5, absl::MakeSpan(out)).ok());
  EXPECT_EQ(out, Expected(id, 5, 10));
  EXPECT_EQ(noted_ring_, 7u);
}

TEST_F(BlockReaderTest, APieceFromARemoteWorkerIsAView) {
  auto reader = Reader();
  const BlockId id = Block(0);
  absl::StatusOr<ReadPiece> p = reader->Piece(id, 10, 1000);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->local.fd, -1);
  std::string got;
  for (absl::Span<const char> s : p->view.pieces)
    got.append(s.data(), s.size());
  EXPECT_EQ(got, Expected(id, 10, 1000));
  // No worker on this node: no whole object to lend.
  EXPECT_EQ(reader->LocalObject(Block(0), 4).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace larder
