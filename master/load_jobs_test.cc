// Copyright 2026 The Larder Authors.
//
// Load jobs against a worker that never answers: stopping them (a master
// that is deposed, on its election thread) cancels the batches in flight
// instead of waiting out their two-minute timeout.
#include "master/load_jobs.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <filesystem>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "master/mount_registry.h"
#include "proto/worker.grpc.pb.h"
#include "tests/testing/process.h"

namespace larder {
namespace {

// A worker whose CacheBlocks waits until its caller gives up.
class HungWorker final : public v1::WorkerData::Service {
 public:
  grpc::Status CacheBlocks(grpc::ServerContext* ctx,
                           const v1::CacheBlocksRequest*,
                           v1::CacheBlocksResponse*) override {
    ++calls_;
    while (!ctx->IsCancelled()) absl::SleepFor(absl::Milliseconds(5));
    ++cancelled_;
    return grpc::Status(grpc::StatusCode::CANCELLED, "given up");
  }
  std::atomic<int> calls_{0};
  std::atomic<int> cancelled_{0};
};

TEST(LoadJobsTest, StoppingCancelsBatchesAWorkerNeverAnswers) {
  testing::TempDir dir;
  const std::string data = dir.path() + "/data";
  ASSERT_TRUE(testing::WriteFile(data + "/a.bin", std::string(1000, 'a')).ok());
  auto opened = LocalStateStore::Open(dir.path() + "/state");
  ASSERT_TRUE(opened.ok()) << opened.status();
  LocalStateStore& state = **opened;
  auto mounts = MountRegistry::Open(&state);
  ASSERT_TRUE(mounts.ok()) << mounts.status();
  v1::MountEntry m;
  m.set_path("/ds");
  m.set_uri("file://" + data);
  ASSERT_TRUE((*mounts)->Add(m).ok());
  UnderStoreMetadata metadata(mounts->get(), UnderStoreOptions{});

  HungWorker worker;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&worker);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  Membership membership(absl::Minutes(1));
  v1::WorkerInfo info;
  info.set_id("hung");
  info.set_address(absl::StrCat("127.0.0.1:", port));
  info.set_capacity_bytes(1 << 30);
  membership.Register(info, {}, absl::Now());

  LoadJobs jobs(&metadata, &membership, ChannelFactory::Insecure(), &state);
  auto started = jobs.Start("/ds");
  ASSERT_TRUE(started.ok()) << started.status();
  ASSERT_TRUE(testing::WaitFor([&] { return worker.calls_.load() > 0; },
                               absl::Seconds(10)));
  const absl::Time stop = absl::Now();
  jobs.StopAll();
  const absl::Duration took = absl::Now() - stop;
  EXPECT_LT(took, absl::Seconds(5)) << "StopAll waited for the batch";
  EXPECT_TRUE(testing::WaitFor([&] { return worker.cancelled_.load() > 0; },
                               absl::Seconds(5)));
  // The job stays running in the store (RUNNING, the default state, is
  // left out of the text), for the next leader; no failure is recorded.
  auto text =
      state.Get(absl::StrCat("loads/", started->job_id(), ".textproto"));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->find("state:"), std::string::npos) << *text;
  EXPECT_EQ(text->find("blocks_failed"), std::string::npos) << *text;
  server->Shutdown();
}

}  // namespace
}  // namespace larder
