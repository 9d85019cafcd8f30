// Copyright 2026 The Larder Authors.
//
// A store that hangs (s3rver stopped with SIGSTOP: it accepts connections
// and never answers) on a cluster of two workers and two FUSE mounts (two
// nodes), all with --store_timeout=3s. Reads of files the cache does not
// hold fail with EIO within the timeout on both nodes, not after minutes of
// retries and fail-overs; cached files keep reading meanwhile; after
// SIGCONT the uncached files read again.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/process.h"
#include "tests/testing/s3rver.h"
#include "tests/testing/worker_process.h"

namespace larder {
namespace {

using testing::PatternBytes;
using testing::Sh;
using testing::Shell;

constexpr int kFiles = 12;
constexpr int kCached = 6;  // f00..f05 are read before the store hangs.
constexpr size_t kSize = 256 << 10;
constexpr absl::Duration kStoreTimeout = absl::Seconds(3);

class FrozenStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1);
    ::setenv("AWS_SECRET_ACCESS_KEY", "S3RVER", 1);
    const std::vector<std::string> env = {"AWS_ACCESS_KEY_ID=S3RVER",
                                          "AWS_SECRET_ACCESS_KEY=S3RVER"};
    auto server = testing::S3rver::Start("frozen");
    ASSERT_TRUE(server.ok()) << server.status();
    s3_ = std::move(*server);
    auto store = s3_->OpenStore("data");
    ASSERT_TRUE(store.ok()) << store.status();
    for (int i = 0; i < kFiles; ++i) {
      data_.push_back(PatternBytes(kSize, 40 + i));
      ASSERT_TRUE(
          (*store)->Put(absl::StrFormat("f%02d", i), data_.back()).ok());
    }
    const std::string timeout =
        absl::StrCat("--store_timeout=", absl::FormatDuration(kStoreTimeout));
    auto master = testing::MasterProcess::Start(
        {"--heartbeat_timeout=2s", "--heartbeat_interval=200ms", timeout}, env);
    ASSERT_TRUE(master.ok()) << master.status();
    master_ = std::move(*master);
    for (int w = 0; w < 2; ++w) {
      auto worker = testing::WorkerProcess::Start(
          {absl::StrCat("--master=", master_->address()),
           absl::StrCat("--worker_id=w", w), "--ram_capacity=128MiB", timeout},
          env);
      ASSERT_TRUE(worker.ok()) << worker.status();
      workers_.push_back(std::move(*worker));
    }
    ASSERT_TRUE(testing::WaitFor(
        [&] {
          return Larder("ring").out.find("2 workers") != std::string::npos;
        },
        absl::Seconds(20)));
    Shell r = Larder(absl::StrCat("mount /data '", s3_->Uri("data"), "'"));
    ASSERT_EQ(r.code, 0) << r.out;
    for (int n = 0; n < 2; ++n) {
      // Node 0 takes requests on one channel thread: the uncached read
      // that waits on the store must not hold it (slow_requests.cc).
      auto fuse = testing::FuseProcess::Start(
          master_->address(),
          {absl::StrCat("--node=node-", n), timeout,
           absl::StrCat("--fuse_channel_threads=", n == 0 ? 1 : 4)});
      ASSERT_TRUE(fuse.ok()) << fuse.status();
      fuses_.push_back(std::move(*fuse));
    }
  }

  void TearDown() override {
    if (s3_) ::kill(s3_->pid(), SIGCONT);  // Whatever happened.
  }

  Shell Larder(const std::string& args) {
    return Sh(absl::StrCat(LARDER_CLI_BINARY, " ", args,
                           " --master=", master_->address(), " 2>&1"));
  }
  std::string File(int node, int i) {
    return absl::StrFormat("%s/data/f%02d", fuses_[node]->mountpoint(), i);
  }

  std::unique_ptr<testing::S3rver> s3_;
  std::unique_ptr<testing::MasterProcess> master_;
  std::vector<std::unique_ptr<testing::WorkerProcess>> workers_;
  std::vector<std::unique_ptr<testing::FuseProcess>> fuses_;
  std::vector<std::string> data_;
};

TEST_F(FrozenStoreTest, UncachedReadsFailFastAndCachedOnesGoOn) {
  // Both nodes know every name, and hold f00..f05.
  for (int node = 0; node < 2; ++node) {
    Shell ls = Sh(absl::StrCat("ls ", fuses_[node]->mountpoint(), "/data"));
    ASSERT_EQ(ls.code, 0) << ls.out;
    for (int i = 0; i < kCached; ++i) {
      absl::StatusOr<std::string> got = testing::ReadUncached(File(node, i));
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_TRUE(*got == data_[i]);
    }
  }
  ASSERT_EQ(::kill(s3_->pid(), SIGSTOP), 0);

  // Each node reads an uncached file; meanwhile the cached ones are read
  // in a loop on both nodes.
  std::atomic<bool> done{false};
  std::atomic<int> cached_reads{0}, cached_failures{0};
  std::thread cached([&] {
    for (int k = 0; !done; ++k) {
      const int node = k % 2, i = (k / 2) % kCached;
      absl::StatusOr<std::string> got = testing::ReadUncached(File(node, i));
      if (got.ok() && *got == data_[i]) {
        ++cached_reads;
      } else {
        ++cached_failures;
      }
    }
  });
  std::vector<absl::Duration> took(2);
  std::vector<int> failed(2);
  std::vector<std::thread> uncached;
  for (int node = 0; node < 2; ++node) {
    uncached.emplace_back([&, node] {
      const absl::Time start = absl::Now();
      (void)testing::ReadUncached(File(node, kCached + node), &failed[node]);
      took[node] = absl::Now() - start;
    });
  }
  for (auto& t : uncached) t.join();
  const int during = cached_reads.load();
  done = true;
  cached.join();
  for (int node = 0; node < 2; ++node) {
    SCOPED_TRACE(absl::StrCat("node ", node));
    EXPECT_EQ(failed[node], EIO) << std::strerror(failed[node]);
    // The timeout, and a second for libcurl's progress checks: not
    // minutes of retries and fail-overs.
    EXPECT_LT(took[node], kStoreTimeout + absl::Milliseconds(2500))
        << took[node];
    std::printf("[frozen] node %d: uncached read failed after %.2f s: %s\n",
                node, absl::ToDoubleSeconds(took[node]),
                std::strerror(failed[node]));
  }
  EXPECT_GT(during, 10) << "cached files read while the store hung";
  // Node 0's uncached read went through the pool, and its metrics say so.
  EXPECT_GE(
      fuses_[0]->Metric("larder_fuse_slow_wait_seconds_count").value_or(0), 1);
  EXPECT_EQ(cached_failures.load(), 0);
  std::printf("[frozen] %d cached reads while the uncached ones waited\n",
              during);

  // The store answers again: so do the uncached files, once the workers'
  // memory of the stalled fetch (2 s) has passed.
  ASSERT_EQ(::kill(s3_->pid(), SIGCONT), 0);
  for (int node = 0; node < 2; ++node) {
    absl::StatusOr<std::string> got;
    EXPECT_TRUE(testing::WaitFor(
        [&] {
          got = testing::ReadUncached(File(node, kCached + node));
          return got.ok();
        },
        absl::Seconds(10)))
        << got.status();
    EXPECT_TRUE(got.ok() && *got == data_[kCached + node]);
  }
}

TEST_F(FrozenStoreTest, AStoppingDaemonAnswersQueuedReadsAtOnce) {
  // A daemon whose pool serves one request at a time: reads of four
  // uncached files queue behind the first, which waits on the store.
  auto fuse = testing::FuseProcess::Start(
      master_->address(),
      {"--node=node-0",
       absl::StrCat("--store_timeout=", absl::FormatDuration(kStoreTimeout)),
       "--fuse_threads=1"});
  ASSERT_TRUE(fuse.ok()) << fuse.status();
  const std::string dir = (*fuse)->mountpoint() + "/data";
  Shell ls = Sh(absl::StrCat("ls ", dir));
  ASSERT_EQ(ls.code, 0) << ls.out;
  ASSERT_EQ(::kill(s3_->pid(), SIGSTOP), 0);
  std::vector<std::thread> readers;
  for (int i = kCached; i < kCached + 4; ++i) {
    readers.emplace_back([&, i] {
      int err = 0;
      (void)testing::ReadUncached(absl::StrFormat("%s/f%02d", dir, i), &err);
    });
  }
  absl::SleepFor(absl::Milliseconds(500));  // All four asked.
  const absl::Time start = absl::Now();
  ASSERT_EQ(::kill((*fuse)->pid(), SIGTERM), 0);
  ASSERT_TRUE(
      testing::WaitFor([&] { return (*fuse)->Exited(); }, absl::Seconds(30)));
  const absl::Duration took = absl::Now() - start;
  for (auto& t : readers) t.join();
  // The read in progress finishes (its fetch deadline); the queued ones
  // are answered EIO at once, not one deadline each.
  EXPECT_LT(took, kStoreTimeout + absl::Milliseconds(2500)) << took;
  std::printf("[frozen] a daemon with 3 reads queued stopped in %.2f s\n",
              absl::ToDoubleSeconds(took));
}

}  // namespace
}  // namespace larder
