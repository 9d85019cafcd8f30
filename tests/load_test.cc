// Copyright 2026 The Larder Authors.
//
// `larder load` against real master and worker processes when a worker runs
// short of file descriptors, restarts, or stays away: the load rides out
// what it can (retries with backoff), reports the rest, and a rerun resumes.
#include <grpcpp/client_context.h>
#include <signal.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/master.grpc.pb.h"
#include "tests/testing/pki.h"
#include "tests/testing/process.h"
#include "tests/testing/worker_process.h"

namespace larder {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

struct CliRun {
  int code;
  std::string out;  // stdout: the JSON summary
  std::string err;  // stderr: progress and errors
};

// `larder ARGS --output=json`, stdout and stderr apart.
CliRun Larder(const std::string& args, const testing::TempDir& dir) {
  const std::string err_path = dir.path() + "/stderr";
  testing::Shell sh = testing::Sh(absl::StrCat(LARDER_CLI_BINARY, " ", args,
                                               " --output=json 2>", err_path));
  auto err = testing::ReadFile(err_path);
  return {sh.code, sh.out, err.ok() ? *err : ""};
}

Json Parse(const CliRun& r) {
  Json j = Json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON: " << r.out << r.err;
  return j;
}

class LoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < kFiles; ++i) {
      ASSERT_TRUE(testing::WriteFile(
                      absl::StrCat(data_.path(), "/ds/d", i % 10, "/f", i),
                      std::string(1024 + i, 'a' + i % 26))
                      .ok());
    }
    auto master = testing::MasterProcess::Start(
        {absl::StrCat("--allowed_file_roots=", data_.path())});
    ASSERT_TRUE(master.ok()) << master.status();
    master_ = *std::move(master);
    at_ = absl::StrCat(" --master=", master_->address());
  }

  void StartWorker(std::vector<std::string> flags,
                   std::vector<std::string> wrapper = {}) {
    flags.push_back(absl::StrCat("--master=", master_->address()));
    flags.push_back(absl::StrCat("--allowed_file_roots=", data_.path()));
    auto w = testing::WorkerProcess::Start(flags, {}, wrapper);
    ASSERT_TRUE(w.ok()) << w.status();
    worker_ = *std::move(w);
    ASSERT_TRUE(testing::WaitFor(
        [&] {
          CliRun r = Larder(absl::StrCat("ring", at_), dir_);
          return r.code == 0 && Parse(r)["workers"].size() == 1;
        },
        absl::Seconds(20)));
  }

  void Mount() {
    CliRun r = Larder(
        absl::StrCat("mount /ds file://", data_.path(), "/ds", at_), dir_);
    ASSERT_EQ(r.code, 0) << r.err;
  }

  double Misses() {
    auto m = worker_->Metric("larder_worker_misses_total");
    return m.ok() ? *m : -1;
  }

  static constexpr int kFiles = 1200;
  testing::TempDir data_, dir_;
  std::unique_ptr<testing::MasterProcess> master_;
  std::unique_ptr<testing::WorkerProcess> worker_;
  std::string at_;
};

// Every RAM block is a memfd. A worker whose fd limit is below the number of
// blocks used to fail fetches ("Too many open files") and stop accepting
// connections (accept4: EMFILE) in the middle of a load; it now bounds its
// RAM tier below the limit and evicts instead.
TEST_F(LoadTest, MoreBlocksThanTheFdLimitEvictInsteadOfFailing) {
  // setpriv drops CAP_SYS_RESOURCE, so the worker cannot raise the limit.
  StartWorker({"--ram_capacity=1GiB"},
              {"prlimit", "--nofile=1000:1000", "setpriv",
               "--bounding-set=-sys_resource", "--"});
  Mount();
  CliRun r = Larder(absl::StrCat("load /ds", at_), dir_);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  Json j = Parse(r);
  EXPECT_EQ(j["state"], "done");
  EXPECT_EQ(j["files_done"], kFiles);
  EXPECT_EQ(j["blocks_failed"], 0);
  // The worker still answers, and holds what its limit allows.
  r = Larder(absl::StrCat("stats", at_), dir_);
  ASSERT_EQ(r.code, 0) << r.err;
  j = Parse(r);
  const Json& ram = j["workers"][0]["tiers"][0];
  EXPECT_EQ(ram["name"], "ram");
  // 1000 less the reserve: 256, and two per fetch thread (128).
  EXPECT_LE(ram["blocks"].get<int>(), 488);
  EXPECT_GE(ram["blocks"].get<int>(), 300);
  EXPECT_GT(ram["evictions"].get<int>(), 0);
  auto log = testing::ReadFile(worker_->log_path());
  ASSERT_TRUE(log.ok());
  EXPECT_THAT(*log, HasSubstr("worker.fd_limit limit=1000 ram_max_blocks=488"));
  EXPECT_THAT(*log, ::testing::Not(HasSubstr("Too many open files")));
}

// A worker that is down when the load starts and back two seconds later
// (restarted on the same port, as a pod would be; the master still counts it
// in the ring): the load's batches retry with backoff and the load finishes
// with nothing failed.
TEST_F(LoadTest, ALoadRidesOutAWorkerRestart) {
  StartWorker({});
  Mount();
  worker_->Kill(9);
  const std::string cmd = absl::StrCat(
      LARDER_CLI_BINARY, " load /ds --output=json --progress_interval=1s", at_,
      " >", dir_.path(), "/load.json 2>", dir_.path(), "/load.err; echo $? >",
      dir_.path(), "/load.rc");
  // In the background, holding none of this process's pipes.
  ASSERT_EQ(
      testing::Sh(absl::StrCat("(", cmd, ") </dev/null >/dev/null 2>&1 &"))
          .code,
      0);
  absl::SleepFor(absl::Seconds(2));
  ASSERT_TRUE(worker_->Restart().ok());
  ASSERT_TRUE(testing::WaitFor(
      [&] { return testing::ReadFile(dir_.path() + "/load.rc").ok(); },
      absl::Seconds(90)));
  auto rc = testing::ReadFile(dir_.path() + "/load.rc");
  auto out = testing::ReadFile(dir_.path() + "/load.json");
  auto err = testing::ReadFile(dir_.path() + "/load.err");
  ASSERT_TRUE(out.ok() && err.ok());
  auto wlog = testing::ReadFile(worker_->log_path());
  auto mlog = testing::ReadFile(master_->log_path());
  EXPECT_EQ(*rc, "0\n") << *out << *err << "\nworker log:\n"
                        << (wlog.ok() ? *wlog : "") << "\nmaster log:\n"
                        << (mlog.ok() ? *mlog : "");
  Json j = Json::parse(*out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << *out;
  EXPECT_EQ(j["state"], "done") << *out;
  EXPECT_EQ(j["blocks_failed"], 0) << *out;
  EXPECT_EQ(j["files_done"], kFiles) << *out;
  EXPECT_GT(j["batch_retries"].get<int>(), 0) << *out;
  EXPECT_EQ(Misses(), kFiles);  // Every block, once, by the restarted worker.
  // Progress outside a terminal: lines, never carriage returns.
  EXPECT_EQ(err->find('\r'), std::string::npos) << *err;
  EXPECT_THAT(*err, HasSubstr("load /ds: "));
}

// GetLoad with wait_ms answers when the job ends (the CLI's poll: `larder
// load` returns as the job finishes, not at its next poll), at once for a
// job already ended, and NotFound for an unknown id.
TEST_F(LoadTest, GetLoadWaitsForTheJobToEnd) {
  StartWorker({});
  Mount();
  CliRun r = Larder(absl::StrCat("load /ds --wait=false", at_), dir_);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const std::string job = Parse(r)["job_id"];
  auto stub = v1::Master::NewStub(
      testing::SuiteChannels(Role::kAdmin)->Channel(master_->address()));
  auto get = [&](const std::string& id, int64_t wait_ms, v1::LoadStatus* s) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(60));
    v1::GetLoadRequest req;
    req.set_job_id(id);
    req.set_wait_ms(wait_ms);
    return stub->GetLoad(&ctx, req, s);
  };
  v1::LoadStatus s;
  // Up to 10 s a call; 1,200 small files from a local directory take well
  // under that, so the job is seen ending within a few calls, and the call
  // that waits returns as the job ends, not at the end of its wait.
  const absl::Time start = absl::Now();
  for (int i = 0; i < 6 && s.state() != v1::LoadStatus::DONE; ++i) {
    grpc::Status st = get(job, 10'000, &s);
    ASSERT_TRUE(st.ok()) << st.error_message();
    ASSERT_NE(s.state(), v1::LoadStatus::FAILED) << s.last_error();
  }
  EXPECT_EQ(s.state(), v1::LoadStatus::DONE);
  EXPECT_LT(absl::Now() - start, absl::Seconds(9));
  EXPECT_EQ(s.files_done(), kFiles);
  // Ended: a long wait answers at once.
  const absl::Time t = absl::Now();
  ASSERT_TRUE(get(job, 10'000, &s).ok());
  EXPECT_EQ(s.state(), v1::LoadStatus::DONE);
  EXPECT_LT(absl::Now() - t, absl::Seconds(5));
  EXPECT_EQ(get("load-0-0", 1'000, &s).error_code(), grpc::NOT_FOUND);
}

// One of two workers stays away: the load retries its batches, then
// reports them (exit 5, "run it again to resume") while the other worker's
// share is loaded. Once the worker is back, the rerun fetches only its
// share: the other worker's blocks are not fetched again.
TEST_F(LoadTest, AnIncompleteLoadResumesOnRerun) {
  StartWorker({});
  auto second = testing::WorkerProcess::Start(
      {absl::StrCat("--master=", master_->address()),
       absl::StrCat("--allowed_file_roots=", data_.path())});
  ASSERT_TRUE(second.ok()) << second.status();
  std::unique_ptr<testing::WorkerProcess> away = *std::move(second);
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        CliRun r = Larder(absl::StrCat("ring", at_), dir_);
        return r.code == 0 && Parse(r)["workers"].size() == 2;
      },
      absl::Seconds(20)));
  Mount();
  away->Kill(9);
  CliRun r = Larder(absl::StrCat("load /ds", at_), dir_);
  EXPECT_EQ(r.code, 5) << r.out << r.err;
  Json j = Parse(r);
  EXPECT_EQ(j["state"], "failed");
  const int failed = j["blocks_failed"].get<int>();
  EXPECT_GT(failed, kFiles / 4);  // About half: the absent worker's share.
  EXPECT_LT(failed, kFiles * 3 / 4);
  EXPECT_GT(j["batch_retries"].get<int>(), 0);
  EXPECT_THAT(r.err, HasSubstr("load incomplete (run it again to resume)"));
  const double first_misses = Misses();
  EXPECT_EQ(first_misses, kFiles - failed);

  ASSERT_TRUE(away->Restart().ok());
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        CliRun ring = Larder(absl::StrCat("ring", at_), dir_);
        return ring.code == 0 && Parse(ring)["workers"].size() == 2;
      },
      absl::Seconds(20)));
  r = Larder(absl::StrCat("load /ds", at_), dir_);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  j = Parse(r);
  EXPECT_EQ(j["state"], "done");
  EXPECT_EQ(j["blocks_failed"], 0);
  EXPECT_EQ(j["files_done"], kFiles);
  // The worker that stayed fetched nothing again; the returned one fetched
  // the share that had failed.
  EXPECT_EQ(Misses(), first_misses);
  auto returned = away->Metric("larder_worker_misses_total");
  ASSERT_TRUE(returned.ok());
  EXPECT_EQ(*returned, failed);
}

}  // namespace
}  // namespace larder
