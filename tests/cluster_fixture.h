// Copyright 2026 The Larder Authors.
//
// The cluster the cluster tests run on: s3rver with 12 files of 0.3 to 3 MiB
// under ds/train, a master and three worker processes, the mount
// /datasets/ds (1 MiB blocks, a 1 s metadata TTL), and clients in the test
// process. ctest runs those tests twice: plain, and with TLS and
// authentication on everywhere ($LARDER_TEST_SECURE, see tests/testing/pki.h:
// "secure/" test names).
#ifndef LARDER_TESTS_CLUSTER_FIXTURE_H_
#define LARDER_TESTS_CLUSTER_FIXTURE_H_

#include <grpcpp/create_channel.h>
#include <stdlib.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "larder/client.h"
#include "proto/master.grpc.pb.h"
#include "tests/testing/pki.h"
#include "tests/testing/process.h"
#include "tests/testing/s3rver.h"
#include "tests/testing/worker_process.h"
#include "understore/s3_store.h"

namespace larder {

inline constexpr uint64_t kBlock =
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
    std::vector<std::string> master_flags = {"--heartbeat_timeout=2s",
                                             "--heartbeat_interval=200ms"};
    for (std::string& f : ExtraMasterFlags()) master_flags.push_back(f);
    auto master = testing::MasterProcess::Start(
        master_flags,
        {"AWS_ACCESS_KEY_ID=S3RVER", "AWS_SECRET_ACCESS_KEY=S3RVER"});
    ASSERT_TRUE(master.ok()) << master.status();
    master_ = std::move(*master);
    for (int w = 0; w < 3; ++w) {
      std::vector<std::string> flags = {
          absl::StrCat("--master=", master_->address()),
          absl::StrCat("--worker_id=w", w), "--ram_capacity=256MiB",
          "--retry_max_attempts=2"};
      for (std::string& f : ExtraWorkerFlags()) flags.push_back(f);
      auto worker = testing::WorkerProcess::Start(
          flags, {"AWS_ACCESS_KEY_ID=S3RVER", "AWS_SECRET_ACCESS_KEY=S3RVER"});
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

  // Flags a suite adds to the master's and the workers'.
  virtual std::vector<std::string> ExtraMasterFlags() { return {}; }
  virtual std::vector<std::string> ExtraWorkerFlags() { return {}; }

  bool AddMount(const std::string& path, const std::string& uri, int ttl_ms,
                bool writable = false) {
    v1::AddMountRequest req;
    req.mutable_mount()->set_path(path);
    req.mutable_mount()->set_uri(uri);
    req.mutable_mount()->set_block_size(kBlock);
    req.mutable_mount()->set_metadata_ttl_ms(ttl_ms);
    req.mutable_mount()->set_writable(writable);
    v1::MountTable table;
    grpc::ClientContext ctx;
    grpc::Status st = stub_->AddMount(&ctx, req, &table);
    if (!st.ok())
      std::fprintf(stderr, "AddMount %s: %s\n", path.c_str(),
                   st.error_message().c_str());
    return st.ok();
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

  std::unique_ptr<Client> Connect(const std::string& node,
                                  Role role = Role::kReader) {
    ClientOptions o;
    o.master = master_->address();
    o.security = testing::SuiteSecurity(role);
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

}  // namespace larder

#endif  // LARDER_TESTS_CLUSTER_FIXTURE_H_
