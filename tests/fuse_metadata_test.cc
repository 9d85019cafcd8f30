// Copyright 2026 The Larder Authors.
//
// The metadata path through real FUSE mounts: directories listed whole,
// opens answered from the node's metadata cache, reads that survive a master
// outage, invalidation that reaches every node, and replaced objects. A real
// master, a real worker and `larder fuse` daemons over a `file://` mount (a
// local directory the test can fill with 100,000 names in a second).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/process.h"
#include "tests/testing/worker_process.h"

namespace larder {
namespace {

using ::testing::HasSubstr;
using testing::ReadAll;
using testing::Sh;
using testing::Shell;

class FuseMetadataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string roots =
        absl::StrCat("--allowed_file_roots=", src_.path());
    auto master = testing::MasterProcess::Start(
        {"--heartbeat_timeout=2s", "--heartbeat_interval=200ms", roots});
    ASSERT_TRUE(master.ok()) << master.status();
    master_ = std::move(*master);
    auto worker = testing::WorkerProcess::Start(
        {absl::StrCat("--master=", master_->address()), "--worker_id=w0",
         "--ram_capacity=256MiB", roots});
    ASSERT_TRUE(worker.ok()) << worker.status();
    worker_ = std::move(*worker);
    ASSERT_TRUE(testing::WaitFor(
        [&] {
          return Larder("ring").out.find("1 worker") != std::string::npos;
        },
        absl::Seconds(20)));
  }

  // Mounts the source directory at /data with `ttl` as its metadata TTL.
  void MountData(const std::string& ttl = "60s") {
    Shell r = Larder(absl::StrCat("mount /data file://", src_.path(),
                                  " --metadata_ttl=", ttl));
    ASSERT_EQ(r.code, 0) << r.out;
  }

  Shell Larder(const std::string& args) {
    return Sh(absl::StrCat(LARDER_CLI_BINARY, " ", args,
                           " --master=", master_->address()));
  }

  std::unique_ptr<testing::FuseProcess> Fuse(
      std::vector<std::string> flags = {}) {
    auto f = testing::FuseProcess::Start(master_->address(), flags);
    EXPECT_TRUE(f.ok()) << f.status();
    return f.ok() ? std::move(*f) : nullptr;
  }

  // Creates `n` empty files f000000 ... in `dir` of the source.
  void MakeFiles(const std::string& dir, int n) {
    const std::string full = absl::StrCat(src_.path(), "/", dir);
    ASSERT_EQ(::mkdir(full.c_str(), 0755), 0) << full;
    for (int i = 0; i < n; ++i) {
      const int fd = ::open(absl::StrFormat("%s/f%06d", full, i).c_str(),
                            O_CREAT | O_WRONLY, 0644);
      ASSERT_GE(fd, 0);
      ::close(fd);
    }
  }

  testing::TempDir src_;
  std::unique_ptr<testing::MasterProcess> master_;
  std::unique_ptr<testing::WorkerProcess> worker_;
};

// A directory lists whole through the mount with every tool that reads one,
// on a fresh daemon (cold: nothing cached in the kernel or the daemon) and
// again (warm). Plain readdir entries once carried inode number 0, which
// readdir(3) skips: every listing then stopped where the first readdirplus
// reply (1 MiB, 6,239 names) ended.
TEST_F(FuseMetadataTest, HugeDirectoriesListWhole) {
  MakeFiles("d20k", 20000);
  MakeFiles("d100k", 100000);
  MountData();
  const std::vector<std::pair<std::string, std::string>> tools = {
      {"ls -f", "ls -f DIR | grep -c ^f"},
      {"find", "find DIR -type f | wc -l"},
      {"os.scandir",
       "/usr/bin/python3 -c \"import os; "
       "print(sum(1 for e in os.scandir('DIR') if e.is_file() and "
       "e.inode() != 0))\""},
  };
  for (const auto& [tool, script] : tools) {
    auto fuse = Fuse();  // Cold: a new daemon and a new kernel mount.
    ASSERT_NE(fuse, nullptr);
    for (const char* pass : {"cold", "warm"}) {
      for (const auto& [dir, n] :
           {std::make_pair("d20k", 20000), std::make_pair("d100k", 100000)}) {
        const std::string path =
            absl::StrCat(fuse->mountpoint(), "/data/", dir);
        std::string cmd = script;
        cmd.replace(cmd.find("DIR"), 3, path);
        Shell r = Sh(cmd);
        EXPECT_EQ(r.out, absl::StrCat(n, "\n"))
            << tool << " " << pass << " " << dir << " (exit " << r.code << ")";
      }
    }
  }
  // Every name once, in order, with the inode number stat gives.
  auto fuse = Fuse();
  ASSERT_NE(fuse, nullptr);
  Shell r = Sh(absl::StrCat("ls -f ", fuse->mountpoint(),
                            "/data/d20k | grep ^f | sort -u | head -1; ls -f ",
                            fuse->mountpoint(),
                            "/data/d20k | grep ^f | sort -u | tail -1"));
  EXPECT_EQ(r.out, "f000000\nf019999\n");
  // d_ino (from readdir) is the st_ino that stat gives.
  r = Sh(absl::StrCat(
      "/usr/bin/python3 -c \"import os; d='", fuse->mountpoint(),
      "/data/d20k'; print(sum(1 for e in os.scandir(d) if e.inode() != "
      "os.stat(e.path).st_ino))\""));
  EXPECT_EQ(r.out, "0\n");
}

// Reads every file of `paths` whole; how many failed or differ from `want`.
int ReadAndCompare(const std::vector<std::string>& paths,
                   const std::vector<std::string>& want) {
  int bad = 0;
  for (size_t i = 0; i < paths.size(); ++i) {
    absl::StatusOr<std::string> got = ReadAll(paths[i]);
    if (!got.ok() || *got != want[i]) ++bad;
  }
  return bad;
}

// Once a directory is listed and its files read, a second pass (with the
// kernel's dentries, inodes and pages dropped, so every file is looked up
// and opened in the daemon again) sends the master no Stat and no List.
TEST_F(FuseMetadataTest, AWarmPassSendsTheMasterNoStat) {
  std::vector<std::string> rel, want;
  ASSERT_EQ(::mkdir((src_.path() + "/imgs").c_str(), 0755), 0);
  for (int i = 0; i < 2000; ++i) {
    rel.push_back(absl::StrCat("imgs/", i, ".jpg"));
    want.push_back(testing::PatternBytes(100 + i % 3000, i));
    ASSERT_TRUE(
        testing::WriteFile(src_.path() + "/" + rel.back(), want.back()).ok());
  }
  MountData();
  auto fuse = Fuse();
  ASSERT_NE(fuse, nullptr);
  std::vector<std::string> paths;
  for (const std::string& r : rel)
    paths.push_back(absl::StrCat(fuse->mountpoint(), "/data/", r));
  Shell r = Sh(absl::StrCat("ls ", fuse->mountpoint(), "/data/imgs | wc -l"));
  ASSERT_EQ(r.out, "2000\n");
  ASSERT_EQ(ReadAndCompare(paths, want), 0);
  auto rpcs = [&](const char* method) {
    return master_
        ->Metric(
            absl::StrCat("larder_master_rpcs_total{method=\"", method, "\"}"))
        .value_or(-1);
  };
  const double stats = rpcs("Stat"), lists = rpcs("List");
  ASSERT_GE(stats, 0);
  ASSERT_TRUE(testing::DropKernelCaches().ok());
  EXPECT_EQ(ReadAndCompare(paths, want), 0);
  EXPECT_EQ(rpcs("Stat") - stats, 0);
  EXPECT_EQ(rpcs("List") - lists, 0);
  EXPECT_GE(fuse->Metric("larder_fuse_metadata_lookups_total{result=\"hit\"}")
                .value_or(0),
            2000);
}

// The master killed under a reading mount: files listed or opened before
// stay readable past their TTL (stale-if-error), a new name fails with a
// clear error, and everything works again once the master is back.
TEST_F(FuseMetadataTest, ReadsGoOnWhileTheMasterIsDown) {
  std::vector<std::string> rel, want;
  ASSERT_EQ(::mkdir((src_.path() + "/a").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((src_.path() + "/b").c_str(), 0755), 0);
  for (int i = 0; i < 300; ++i) {
    rel.push_back(absl::StrCat(i % 2 ? "a/" : "b/", i, ".bin"));
    want.push_back(testing::PatternBytes(5000 + i, i));
    ASSERT_TRUE(
        testing::WriteFile(src_.path() + "/" + rel.back(), want.back()).ok());
  }
  ASSERT_TRUE(testing::WriteFile(src_.path() + "/new/x.bin", "fresh").ok());
  MountData("1s");
  auto fuse = Fuse(
      {"--attr_timeout=1s", "--entry_timeout=1s", "--negative_timeout=0s"});
  ASSERT_NE(fuse, nullptr);
  std::vector<std::string> paths;
  for (const std::string& r : rel)
    paths.push_back(absl::StrCat(fuse->mountpoint(), "/data/", r));
  Sh(absl::StrCat("ls ", fuse->mountpoint(), "/data/a > /dev/null"));
  ASSERT_EQ(ReadAndCompare(paths, want), 0);  // b/ by Stat, a/ by listing.

  master_->Kill();
  absl::SleepFor(absl::Seconds(2));  // Past the TTL (1 s).
  for (int pass = 0; pass < 2; ++pass) {
    ASSERT_TRUE(testing::DropKernelCaches().ok());
    EXPECT_EQ(ReadAndCompare(paths, want), 0) << "pass " << pass;
  }
  EXPECT_GT(fuse->Metric("larder_fuse_metadata_lookups_total{result=\"stale\"}")
                .value_or(0),
            0);
  // A name never seen: a clear error, at once, and the daemon stays up.
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> fresh =
      ReadAll(fuse->mountpoint() + "/data/new/x.bin");
  EXPECT_FALSE(fresh.ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_FALSE(fuse->Exited());

  ASSERT_TRUE(master_->Restart().ok());
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        return ReadAll(fuse->mountpoint() + "/data/new/x.bin").value_or("") ==
               "fresh";
      },
      absl::Seconds(20)));
  EXPECT_EQ(ReadAndCompare(paths, want), 0);
}

// `larder invalidate` run anywhere reaches every node within a ring refresh
// (5 s), although the mount's TTL is an hour and the kernel trusts
// attributes and names for a minute: each daemon's metadata cache drops the
// path and passes the invalidation on to its kernel.
TEST_F(FuseMetadataTest, InvalidateReachesEveryNode) {
  const std::string file = src_.path() + "/cfg/labels.txt";
  ASSERT_TRUE(testing::WriteFile(file, "version one").ok());
  MountData("1h");
  auto node1 = Fuse({"--attr_timeout=60s", "--entry_timeout=60s", "--node=n1"});
  auto node2 = Fuse({"--attr_timeout=60s", "--entry_timeout=60s", "--node=n2"});
  ASSERT_NE(node1, nullptr);
  ASSERT_NE(node2, nullptr);
  const std::string p1 = node1->mountpoint() + "/data/cfg/labels.txt";
  const std::string p2 = node2->mountpoint() + "/data/cfg/labels.txt";
  ASSERT_EQ(ReadAll(p1).value_or(""), "version one");
  ASSERT_EQ(ReadAll(p2).value_or(""), "version one");
  // Replaced atomically, as a job would.
  ASSERT_TRUE(testing::WriteFile(file + ".tmp", "version two, longer").ok());
  ASSERT_EQ(::rename((file + ".tmp").c_str(), file.c_str()), 0);
  absl::SleepFor(absl::Seconds(2));
  EXPECT_EQ(ReadAll(p1).value_or(""), "version one");  // Cached for 1 h.

  struct stat before {};
  ASSERT_EQ(::stat(p2.c_str(), &before), 0);
  EXPECT_EQ(before.st_size, 11);  // "version one", from the kernel's cache.
  Shell r = Larder("invalidate /data/cfg/labels.txt");
  ASSERT_EQ(r.code, 0) << r.out;
  const absl::Time start = absl::Now();
  const std::string v2 = "version two, longer";
  for (const std::string& p : {p1, p2}) {
    EXPECT_TRUE(testing::WaitFor(
        [&] {
          // stat(2) first: the kernel's attributes (trusted for a minute)
          // must have been dropped, not only the daemon's cache (an open
          // would refresh them itself).
          struct stat st {};
          if (::stat(p.c_str(), &st) != 0 ||
              static_cast<size_t>(st.st_size) != v2.size())
            return false;
          absl::StatusOr<std::string> now = ReadAll(p);
          if (now.ok() && *now != "version one" && *now != v2)
            ADD_FAILURE() << "mixed or cut bytes: '" << *now << "'";
          return now.value_or("") == v2;
        },
        absl::Seconds(15)))
        << p;
  }
  const absl::Duration took = absl::Now() - start;
  EXPECT_LT(took, absl::Seconds(8));
  std::fprintf(stderr, "both nodes read the new version after %s\n",
               absl::FormatDuration(took).c_str());
  EXPECT_GE(node2->Metric("larder_fuse_metadata_invalidated_total").value_or(0),
            1);
  // A whole directory, and a name that did not exist a moment ago (the
  // kernels remember it as missing for a minute).
  const std::string added = src_.path() + "/cfg/added.txt";
  EXPECT_FALSE(ReadAll(node1->mountpoint() + "/data/cfg/added.txt").ok());
  ASSERT_TRUE(testing::WriteFile(added, "new name").ok());
  r = Larder("invalidate /data/cfg");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        return ReadAll(node1->mountpoint() + "/data/cfg/added.txt")
                   .value_or("") == "new name";
      },
      absl::Seconds(8)));
}

// An object replaced by a larger and then a smaller version, read in a
// loop meanwhile with the kernel trusting attributes for 10 s: an open
// reads one version whole, never the new bytes cut at the old length.
TEST_F(FuseMetadataTest, AReplacedObjectIsReadWholeAtItsNewSize) {
  const std::string file = src_.path() + "/shard.bin";
  const std::vector<std::string> versions = {testing::PatternBytes(10 << 20, 1),
                                             testing::PatternBytes(14 << 20, 2),
                                             testing::PatternBytes(6 << 20, 3)};
  ASSERT_TRUE(testing::WriteFile(file, versions[0]).ok());
  MountData("1s");
  auto fuse = Fuse({"--attr_timeout=10s", "--entry_timeout=10s"});
  ASSERT_NE(fuse, nullptr);
  const std::string path = fuse->mountpoint() + "/data/shard.bin";
  ASSERT_EQ(ReadAll(path).value_or(""), versions[0]);
  for (size_t v = 1; v < versions.size(); ++v) {
    ASSERT_TRUE(testing::WriteFile(file + ".tmp", versions[v]).ok());
    ASSERT_EQ(::rename((file + ".tmp").c_str(), file.c_str()), 0);
    bool seen = false;
    for (int i = 0; i < 100 && !seen; ++i) {
      absl::StatusOr<std::string> got = ReadAll(path);
      ASSERT_TRUE(got.ok()) << got.status();
      if (*got == versions[v]) {
        seen = true;
      } else {
        ASSERT_EQ(got->size(), versions[v - 1].size())
            << "version " << v << ": an open read " << got->size()
            << " bytes, neither version's length";
        ASSERT_TRUE(*got == versions[v - 1]) << "mixed bytes";
        absl::SleepFor(absl::Milliseconds(100));
      }
    }
    EXPECT_TRUE(seen) << "version " << v << " never read";
  }
}

// A listing of 25,000 names through a daemon whose metadata cache holds
// 1 MiB: the directory is paged (too large to cache), stats of all its
// files are looked up, and the cache never holds more than its bound.
TEST_F(FuseMetadataTest, TheCacheStaysWithinItsBound) {
  // 25,000 entries, several times what 1 MiB holds.
  MakeFiles("d25k", 25000);
  MountData();
  auto fuse = Fuse({"--metadata_cache_bytes=1MiB"});
  ASSERT_NE(fuse, nullptr);
  const std::string dir = fuse->mountpoint() + "/data/d25k";
  Shell r = Sh(absl::StrCat(
      "/usr/bin/python3 -c \"import os; d='", dir,
      "'; n=sorted(os.listdir(d)); print(len(n), len(set(n))); "
      "print(sum(os.stat(os.path.join(d, x)).st_size for x in n))\""));
  EXPECT_EQ(r.out, "25000 25000\n0\n");
  EXPECT_LE(fuse->Metric("larder_fuse_metadata_cache_bytes").value_or(1e12),
            1 << 20);
  EXPECT_GT(fuse->Metric("larder_fuse_metadata_evictions_total").value_or(0),
            0);
}

}  // namespace
}  // namespace larder
