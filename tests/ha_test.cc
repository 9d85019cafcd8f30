// Copyright 2026 The Larder Authors.
//
// Master high availability with real processes on loopback: a real etcd
// (Debian's), three `larder master --etcd` electing a leader, two workers
// and two FUSE mounts given all three master addresses, over a file:// mount.
// Readers loop over files through both mounts, dropping each file's pages
// first so every read reaches the FUSE daemon and the workers.
//
// What is proven: a killed leader costs no read and no byte, a new leader
// serves mounts, listings and new names within 5 s, and a `larder load`
// running across the kill finishes; a paused leader that wakes up steps down
// and writes nothing to etcd; an etcd restart is ridden out, with a named
// error for a mount change while etcd is down; losing the leader ten times
// in a row under reads fails no read; a write begun under one leader
// commits under the next.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/master_connection.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "larder/client.h"
#include "master/etcd_client.h"
#include "tests/testing/etcd.h"
#include "tests/testing/process.h"
#include "tests/testing/worker_process.h"

namespace larder {
namespace {

using ::testing::HasSubstr;
using testing::Sh;
using testing::Shell;

constexpr int kSmallFiles = 40;
constexpr size_t kSmallSize = 64 << 10;

// Threads reading every small file in a loop through each FUSE mount.
class Readers {
 public:
  Readers(const std::vector<std::string>& mountpoints,
          const std::vector<std::string>& want) {
    for (const std::string& mnt : mountpoints) {
      threads_.emplace_back([this, mnt, &want] {
        for (int i = 0; !stop_; i = (i + 1) % kSmallFiles) {
          const std::string path =
              absl::StrFormat("%s/data/small/f%02d", mnt, i);
          absl::StatusOr<std::string> got = testing::ReadUncached(path);
          ++reads_;
          if (!got.ok()) {
            ++failed_;
            Note(got.status().ToString());
          } else if (*got != want[i]) {
            ++wrong_;
            Note(absl::StrCat(path, ": wrong bytes"));
          }
        }
      });
    }
  }
  ~Readers() { Stop(); }
  void Stop() {
    stop_ = true;
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  int reads() const { return reads_; }
  int failed() const { return failed_; }
  int wrong() const { return wrong_; }
  std::string first_error() {
    absl::MutexLock lock(&mu_);
    return first_error_;
  }

 private:
  void Note(const std::string& e) {
    absl::MutexLock lock(&mu_);
    if (first_error_.empty()) first_error_ = e;
  }
  std::atomic<bool> stop_{false};
  std::atomic<int> reads_{0}, failed_{0}, wrong_{0};
  absl::Mutex mu_;
  std::string first_error_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

class HaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto etcd = testing::EtcdProcess::Start();
    ASSERT_TRUE(etcd.ok()) << etcd.status();
    etcd_ = std::move(*etcd);
    roots_ = absl::StrCat("--allowed_file_roots=", src_.path());
    std::vector<std::string> addresses;
    for (int i = 0; i < 3; ++i) {
      auto m = testing::MasterProcess::Start(
          {absl::StrCat("--etcd=", etcd_->endpoint()), "--heartbeat_timeout=3s",
           "--heartbeat_interval=200ms", roots_});
      ASSERT_TRUE(m.ok()) << m.status();
      addresses.push_back((*m)->address());
      masters_.push_back(std::move(*m));
    }
    master_list_ = absl::StrJoin(addresses, ",");
    ASSERT_GE(WaitLeader(absl::Seconds(20)), 0) << "no master was elected";
    for (int i = 0; i < 2; ++i) {
      auto w = testing::WorkerProcess::Start(
          {absl::StrCat("--master=", master_list_),
           absl::StrCat("--worker_id=w", i), "--ram_capacity=512MiB", roots_});
      ASSERT_TRUE(w.ok()) << w.status();
      workers_.push_back(std::move(*w));
    }
    ASSERT_TRUE(testing::WaitFor(
        [&] {
          return Larder("ring").out.find("2 worker") != std::string::npos;
        },
        absl::Seconds(20)))
        << Larder("ring").out;
    for (int i = 0; i < kSmallFiles; ++i) {
      small_.push_back(testing::PatternBytes(kSmallSize, 100 + i));
      ASSERT_TRUE(
          testing::WriteFile(absl::StrFormat("%s/small/f%02d", src_.path(), i),
                             small_.back())
              .ok());
    }
    Shell r = Larder(absl::StrCat("mount /data file://", src_.path()));
    ASSERT_EQ(r.code, 0) << r.out;
    for (int i = 0; i < 2; ++i) {
      // While no worker can serve (a mount being re-read during an
      // election), the daemon reads the directory itself: it may, here.
      auto f = testing::FuseProcess::Start(
          master_list_, {absl::StrCat("--allowed_file_roots=", src_.path())});
      ASSERT_TRUE(f.ok()) << f.status();
      mountpoints_.push_back((*f)->mountpoint());
      fuses_.push_back(std::move(*f));
    }
    // Warm: every small file read once through each mount.
    for (const std::string& mnt : mountpoints_) {
      for (int i = 0; i < kSmallFiles; ++i) {
        auto got = testing::ReadUncached(
            absl::StrFormat("%s/data/small/f%02d", mnt, i));
        ASSERT_TRUE(got.ok()) << got.status();
        ASSERT_EQ(*got, small_[i]);
      }
    }
  }

  Shell Larder(const std::string& args) {
    return Sh(absl::StrCat(LARDER_CLI_BINARY, " ", args,
                           " --master=", master_list_, " 2>&1"));
  }

  // The master that leads and serves now, or -1. `skip` is not asked (a
  // paused process would not answer).
  int Leader(int skip = -1) {
    for (size_t i = 0; i < masters_.size(); ++i) {
      if (static_cast<int>(i) == skip) continue;
      absl::StatusOr<double> v = masters_[i]->Metric("larder_master_leader");
      if (v.ok() && *v == 1) return static_cast<int>(i);
    }
    return -1;
  }
  int WaitLeader(absl::Duration timeout, int other_than = -1) {
    int leader = -1;
    testing::WaitFor(
        [&] {
          leader = Leader(other_than);
          return leader >= 0;
        },
        timeout);
    return leader;
  }

  // The warnings and errors the FUSE daemons logged (the first 30): what a
  // failed read met.
  std::string FuseProblems() {
    std::string out;
    int n = 0;
    for (const auto& f : fuses_) {
      auto log = testing::ReadFile(f->log_path());
      if (!log.ok()) continue;
      for (absl::string_view line : absl::StrSplit(*log, '\n')) {
        if ((absl::StrContains(line, " WARN ") ||
             absl::StrContains(line, " ERROR ")) &&
            n++ < 30)
          absl::StrAppend(&out, "\n", line);
      }
    }
    return out.empty() ? "" : absl::StrCat("\nFUSE daemons logged:", out);
  }

  std::unique_ptr<Readers> StartReaders() {
    return std::make_unique<Readers>(mountpoints_, small_);
  }

  // Every key under /larder/ with its mod revision and value.
  std::map<std::string, std::pair<int64_t, std::string>> EtcdKeys() {
    EtcdOptions o;
    o.endpoints = {etcd_->endpoint()};
    auto etcd = EtcdClient::Create(o);
    EXPECT_TRUE(etcd.ok()) << etcd.status();
    std::map<std::string, std::pair<int64_t, std::string>> out;
    if (!etcd.ok()) return out;
    auto r = (*etcd)->Range("/larder/", /*prefix=*/true);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return out;
    for (const auto& kv : r->kvs())
      out[kv.key()] = {kv.mod_revision(), kv.value()};
    return out;
  }

  testing::TempDir src_, work_;
  std::string roots_, master_list_;
  std::unique_ptr<testing::EtcdProcess> etcd_;
  std::vector<std::unique_ptr<testing::MasterProcess>> masters_;
  std::vector<std::unique_ptr<testing::WorkerProcess>> workers_;
  std::vector<std::unique_ptr<testing::FuseProcess>> fuses_;
  std::vector<std::string> mountpoints_;
  std::vector<std::string> small_;
};

// kill -9 of the leader while two mounts read and `larder load` runs.
TEST_F(HaTest, KilledLeaderCostsNoReadAndANewOneServesWithinFiveSeconds) {
  // Many small files: a load that takes long enough to be killed under.
  constexpr int kLoadFiles = 20000;
  for (int i = 0; i < kLoadFiles; ++i) {
    ASSERT_TRUE(
        testing::WriteFile(absl::StrFormat("%s/many/f%05d", src_.path(), i),
                           testing::PatternBytes(1024, 500 + i))
            .ok());
  }
  const std::string mounts_before = Larder("mount").out;
  auto readers = StartReaders();
  const std::string load_out = work_.path() + "/load.out";
  Shell load{-1, ""};
  std::thread loader([&] {
    load = Sh(absl::StrCat(LARDER_CLI_BINARY, " load /data/many --master=",
                           master_list_, " >", load_out, " 2>&1"));
  });
  // Kill once the load is under way (its first progress line).
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto t = testing::ReadFile(load_out);
        return t.ok() && absl::StrContains(*t, "files");
      },
      absl::Seconds(30)));
  const int leader = Leader();
  ASSERT_GE(leader, 0);
  masters_[leader]->Kill(9);
  const absl::Time killed = absl::Now();
  ASSERT_TRUE(
      testing::WriteFile(src_.path() + "/new/fresh.txt", "a new name").ok());

  // A mount, a listing and a new name, each timed from the kill.
  struct Timed {
    const char* what;
    std::string args;
    Shell result{-1, ""};
    absl::Duration took;
  };
  std::vector<Timed> ops = {
      {"mount", absl::StrCat("mount /more file://", src_.path(), "/small")},
      {"ls", "ls /data/small"},
      {"new name", "stat /data/new/fresh.txt"}};
  {
    std::vector<std::thread> threads;
    for (Timed& op : ops) {
      threads.emplace_back([&, &op = op] {
        op.result = Larder(op.args);
        op.took = absl::Now() - killed;
      });
    }
    for (auto& t : threads) t.join();
  }
  for (const Timed& op : ops) {
    EXPECT_EQ(op.result.code, 0) << op.what << ": " << op.result.out;
    EXPECT_LT(op.took, absl::Seconds(5)) << op.what;
    std::printf("[ha] %-8s served %.2f s after the leader was killed\n",
                op.what, absl::ToDoubleSeconds(op.took));
  }
  EXPECT_THAT(ops[2].result.out, HasSubstr("fresh.txt"));
  const int next = WaitLeader(absl::Seconds(10), leader);
  ASSERT_GE(next, 0);

  loader.join();
  auto out = testing::ReadFile(load_out);
  EXPECT_EQ(load.code, 0) << out.value_or("");
  EXPECT_THAT(
      out.value_or(""),
      HasSubstr(absl::StrCat("loaded /data/many: ", kLoadFiles, " files")));
  // The load ran across the kill: the new leader resumed it.
  auto log = testing::ReadFile(masters_[next]->log_path());
  EXPECT_THAT(log.value_or(""), HasSubstr("load.resumed"))
      << testing::ReadFile(masters_[leader]->log_path()).value_or("");

  absl::SleepFor(absl::Seconds(1));  // Reads under the new leader too.
  readers->Stop();
  EXPECT_GT(readers->reads(), 200);
  EXPECT_EQ(readers->failed(), 0) << readers->first_error() << FuseProblems();
  EXPECT_EQ(readers->wrong(), 0) << readers->first_error();
  std::printf(
      "[ha] %d reads through 2 FUSE mounts across the kill: %d failed, "
      "%d wrong\n",
      readers->reads(), readers->failed(), readers->wrong());

  // The mount table is the old one plus the new mount.
  const std::string mounts_after = Larder("mount").out;
  EXPECT_THAT(mounts_after,
              HasSubstr(mounts_before.substr(mounts_before.find('\n') + 1)));
  EXPECT_THAT(mounts_after, HasSubstr("/more"));
}

// SIGSTOP past the lease, a successor, then SIGCONT: the old leader steps
// down and no write of its reaches etcd (its reaper finds every worker
// silent for seconds on waking: were it still leading, it would store an
// empty ring).
TEST_F(HaTest, PausedLeaderWakesUpAsAFollowerAndWritesNothing) {
  const int old = Leader();
  ASSERT_GE(old, 0);
  ASSERT_EQ(::kill(masters_[old]->pid(), SIGSTOP), 0);
  const absl::Time paused = absl::Now();
  const int next = WaitLeader(absl::Seconds(15), old);
  ASSERT_GE(next, 0);
  std::printf("[ha] a new leader serves %.2f s after the leader was paused\n",
              absl::ToDoubleSeconds(absl::Now() - paused));
  Shell r = Larder(absl::StrCat("mount /later file://", src_.path(), "/small"));
  ASSERT_EQ(r.code, 0) << r.out;
  absl::SleepFor(absl::Seconds(1));
  const auto before = EtcdKeys();
  ASSERT_TRUE(before.count("/larder/state/mounts.textproto"));

  ASSERT_EQ(::kill(masters_[old]->pid(), SIGCONT), 0);
  // It finds its lease gone and steps down (on a loaded machine this takes
  // longer than the lease: wait for it, not for a fixed time), having
  // written nothing meanwhile.
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        auto log = testing::ReadFile(masters_[old]->log_path());
        return absl::StrContains(log.value_or(""), "master.stepped_down") &&
               masters_[old]->Metric("larder_master_leader").value_or(-1) == 0;
      },
      absl::Seconds(20)));
  absl::SleepFor(absl::Seconds(1));
  EXPECT_EQ(EtcdKeys(), before);
  EXPECT_EQ(Leader(), next);
  ASSERT_TRUE(masters_[old]->Metric("larder_master_leader").ok());

  // Asked directly, the old leader names the new one; a caller that was
  // given only the old one's address is told so and calls no other address
  // (a hint is never followed beyond the addresses given).
  auto conn = MasterConnection::Create(masters_[old]->address(), nullptr);
  ASSERT_TRUE(conn.ok());
  v1::Ring ring;
  grpc::Status alone =
      (*conn)->Call(&v1::Master::Stub::GetRing, v1::GetRingRequest(), &ring,
                    absl::Seconds(5));
  EXPECT_EQ(alone.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(
      alone.error_message(),
      HasSubstr(absl::StrCat("the leader is ", masters_[next]->address(),
                             ", which is not one of the masters")));
  EXPECT_EQ((*conn)->current(), masters_[old]->address());
  // Given the old one first and the new one after it, the call follows.
  auto both = MasterConnection::Create(
      absl::StrCat(masters_[old]->address(), ",", masters_[next]->address()),
      nullptr);
  ASSERT_TRUE(both.ok());
  EXPECT_TRUE((*both)
                  ->Call(&v1::Master::Stub::GetRing, v1::GetRingRequest(),
                         &ring, absl::Seconds(5))
                  .ok());
  EXPECT_EQ((*both)->current(), masters_[next]->address());
  EXPECT_EQ(ring.workers_size(), 2);
}

// etcd stopped and started again: reads go on throughout; a mount change
// while it is down fails with an error that names etcd, and works again
// once it is back.
TEST_F(HaTest, EtcdRestartIsRiddenOut) {
  auto readers = StartReaders();
  etcd_->Stop(SIGTERM);
  const std::string mount =
      absl::StrCat("mount /during file://", src_.path(), "/small");
  Shell r = Larder(mount);
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("etcd")) << r.out;
  absl::SleepFor(absl::Seconds(4));  // Past the leader's lease.
  r = Larder(mount);
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("cannot reach etcd")) << r.out;
  std::printf("[ha] mount while etcd is down: %s", r.out.c_str());
  ASSERT_TRUE(etcd_->Restart().ok());
  const absl::Time back = absl::Now();
  EXPECT_TRUE(testing::WaitFor([&] { return Larder(mount).code == 0; },
                               absl::Seconds(20)));
  std::printf("[ha] mounts work again %.2f s after etcd is back\n",
              absl::ToDoubleSeconds(absl::Now() - back));
  readers->Stop();
  EXPECT_GT(readers->reads(), 100);
  EXPECT_EQ(readers->failed(), 0) << readers->first_error() << FuseProblems();
  EXPECT_EQ(readers->wrong(), 0) << readers->first_error();
  EXPECT_THAT(Larder("ls /data/small").out, HasSubstr("f39"));
}

// The leader killed and restarted ten times in a row under reads.
TEST_F(HaTest, LosingTheLeaderTenTimesFailsNoRead) {
  auto readers = StartReaders();
  for (int round = 0; round < 10; ++round) {
    const int leader = WaitLeader(absl::Seconds(15));
    ASSERT_GE(leader, 0) << "round " << round;
    masters_[leader]->Kill(9);
    ASSERT_TRUE(masters_[leader]->Restart().ok()) << "round " << round;
    Shell r = Larder(absl::StrFormat("stat /data/small/f%02d", round));
    EXPECT_EQ(r.code, 0) << "round " << round << ": " << r.out;
  }
  readers->Stop();
  EXPECT_GT(readers->reads(), 500);
  EXPECT_EQ(readers->failed(), 0) << readers->first_error() << FuseProblems();
  EXPECT_EQ(readers->wrong(), 0) << readers->first_error();
  std::printf("[ha] %d reads while the leader was lost 10 times: %d failed\n",
              readers->reads(), readers->failed());
  // Both workers are in the last leader's ring, with their blocks.
  EXPECT_THAT(Larder("ring").out, HasSubstr("2 worker"));
}

// A checkpoint write across a failover: the upload was recorded in etcd by
// the leader that began it, and the next leader commits it.
TEST_F(HaTest, AWriteBegunUnderOneLeaderCommitsUnderTheNext) {
  ASSERT_EQ(
      Larder(absl::StrCat("mount /ckpt file://", src_.path(), " --writable"))
          .code,
      0);
  ClientOptions o;
  o.master = master_list_;
  o.node = "trainer";
  auto client = Client::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  const std::string data = testing::PatternBytes((20 << 20) + 3, 7);
  auto w = (*client)->Create("/ckpt/step100.pt");
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE((*w)->Write(absl::string_view(data).substr(0, 10 << 20)).ok());
  const int leader = WaitLeader(absl::Seconds(15));
  ASSERT_GE(leader, 0);
  masters_[leader]->Kill(9);
  ASSERT_GE(WaitLeader(absl::Seconds(15), leader), 0);
  ASSERT_TRUE((*w)->Write(absl::string_view(data).substr(10 << 20)).ok());
  absl::StatusOr<FileInfo> info = (*w)->Close();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->size, data.size());
  auto back = testing::ReadFile(src_.path() + "/step100.pt");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == data);
  // Nothing is left recorded in etcd.
  for (const auto& [key, value] : EtcdKeys())
    EXPECT_FALSE(absl::StrContains(key, "/writes/")) << key;
}

}  // namespace
}  // namespace larder
