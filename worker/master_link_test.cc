// Copyright 2026 The Larder Authors.
//
// A worker's link to a real (in-process) master: block reports and
// heartbeats larger than one request go in parts, and the master's index
// ends up with every block; a mount the worker does not know is NotFound
// when the master says so, and Unavailable while it cannot be asked.
#include "worker/master_link.h"

#include <grpcpp/create_channel.h>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "master/master.h"
#include "tests/testing/process.h"
#include "tests/testing/worker_process.h"
#include "worker/testing/memory_store.h"

namespace larder {
namespace {

class MasterLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MasterOptions o;
    o.listen = "127.0.0.1:0";
    o.state_dir = dir_.path();
    o.ops_listen = "127.0.0.1:0";
    // Long, so that the requests counted below are the parts of one report
    // or one heartbeat, not periodic heartbeats.
    o.heartbeat_interval = absl::Seconds(3);
    auto master = Master::Start(o);
    ASSERT_TRUE(master.ok()) << master.status();
    master_ = std::move(*master);
    // As root, with the local admin token (registering is an admin's).
    auto channels = ChannelFactory::Create(SecurityOptions());
    ASSERT_TRUE(channels.ok()) << channels.status();
    stub_ = v1::Master::NewStub(
        (*channels)->Channel(absl::StrCat("127.0.0.1:", master_->port())));
    objects_ = std::make_shared<testing::MemoryStore>();
    ASSERT_TRUE(store_mounts_.Add("m", objects_, kBlock).ok());
    auto store = BlockStore::Create({}, &store_mounts_, &metrics_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }

  // Caches `n` more one-block objects; returns their keys.
  std::vector<BlockKey> Cache(int n) {
    std::vector<BlockKey> keys;
    for (int i = 0; i < n; ++i) {
      const std::string path = absl::StrCat("obj", next_++);
      objects_->Put(path, std::string(1000, 'x'));
      BlockId id{"m", path, objects_->VersionOf(path), 0, kBlock, 1000};
      EXPECT_TRUE(store_->Get(id).ok());
      keys.push_back(id.Key());
    }
    return keys;
  }

  // How many of `keys` the master places on worker "w".
  int Located(const std::vector<BlockKey>& keys) {
    v1::LocateRequest req;
    for (const BlockKey& k : keys) req.add_block_keys(KeyToBytes(k));
    v1::LocateResponse resp;
    grpc::ClientContext ctx;
    if (!stub_->Locate(&ctx, req, &resp).ok()) return -1;
    int n = 0;
    for (const auto& loc : resp.locations())
      n += loc.worker_ids_size() == 1 && loc.worker_ids(0) == "w";
    return n;
  }

  // RegisterWorker or Heartbeat requests the master has answered.
  double Requests(const std::string& method) {
    absl::StatusOr<double> n = testing::ScrapeMetric(
        master_->ops_port(),
        absl::StrCat("larder_master_rpcs_total{method=\"", method, "\"}"));
    return n.ok() ? *n : -1;
  }

  std::unique_ptr<MasterLink> Link(size_t keys_per_request) {
    MasterLink::Options o;
    o.master = absl::StrCat("127.0.0.1:", master_->port());
    o.self.set_id("w");
    o.self.set_address("127.0.0.1:1");
    o.self.set_capacity_bytes(1 << 30);
    o.keys_per_request = keys_per_request;
    // The default channels: this root process presents the local admin
    // token, which registering needs.
    auto channels = ChannelFactory::Create(SecurityOptions());
    EXPECT_TRUE(channels.ok()) << channels.status();
    if (channels.ok()) o.channels = *channels;
    auto link = MasterLink::Start(std::move(o), store_.get(), &link_mounts_);
    EXPECT_TRUE(link.ok()) << link.status();
    return link.ok() ? std::move(*link) : nullptr;
  }

  static constexpr uint64_t kBlock = 1 << 20;
  testing::TempDir dir_;
  std::unique_ptr<Master> master_;
  std::unique_ptr<v1::Master::Stub> stub_;
  std::shared_ptr<testing::MemoryStore> objects_;
  WorkerMounts store_mounts_, link_mounts_;
  WorkerMetrics metrics_;
  std::unique_ptr<BlockStore> store_;
  int next_ = 0;
};

TEST_F(MasterLinkTest, ReportsAndHeartbeatsLargerThanARequestGoInParts) {
  std::vector<BlockKey> keys = Cache(10);
  auto link = Link(3);  // The report: a registration and three heartbeats.
  ASSERT_NE(link, nullptr);
  ASSERT_TRUE(
      testing::WaitFor([&] { return Located(keys) == 10; }, absl::Seconds(10)))
      << Located(keys) << " of 10 blocks placed";
  EXPECT_EQ(Requests("RegisterWorker"), 1);
  EXPECT_EQ(Requests("Heartbeat"), 3);
  // Seven more: the next heartbeat's changes, in three requests.
  const std::vector<BlockKey> more = Cache(7);
  keys.insert(keys.end(), more.begin(), more.end());
  ASSERT_TRUE(
      testing::WaitFor([&] { return Located(keys) == 17; }, absl::Seconds(10)))
      << Located(keys) << " of 17 blocks placed";
  EXPECT_EQ(Requests("RegisterWorker"), 1);
  EXPECT_EQ(Requests("Heartbeat"), 6);
}

TEST_F(MasterLinkTest, MalformedKeysAreRefusedByName) {
  v1::RegisterWorkerRequest req;
  req.mutable_worker()->set_id("bad");
  req.mutable_worker()->set_address("127.0.0.1:1");
  req.set_cached_keys(std::string(33, 'k'));
  v1::RegisterWorkerResponse resp;
  grpc::ClientContext ctx;
  grpc::Status st = stub_->RegisterWorker(&ctx, req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("cached_keys: 33 bytes"), std::string::npos)
      << st.error_message();
  v1::LocateRequest loc;
  loc.add_block_keys("short");
  v1::LocateResponse where;
  grpc::ClientContext ctx2;
  st = stub_->Locate(&ctx2, loc, &where);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("a block key of 5 bytes"),
            std::string::npos)
      << st.error_message();
}

TEST_F(MasterLinkTest, AnUnknownMountIsUnavailableWhileTheMasterCannotBeAsked) {
  auto link = Link(100);
  ASSERT_NE(link, nullptr);
  // The master answers: a mount it does not have is NotFound.
  absl::StatusOr<Mount> m = link_mounts_.Get("/nowhere");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound) << m.status();
  // The master is gone: the mount may exist, and the worker cannot know.
  master_.reset();
  absl::SleepFor(absl::Milliseconds(250));  // Past the pulls' rate limit.
  m = link_mounts_.Get("/nowhere");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kUnavailable) << m.status();
  EXPECT_NE(m.status().message().find("could not be asked"), std::string::npos)
      << m.status();
}

}  // namespace
}  // namespace larder
