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
    auto master = testing::MasterProcess::Start(
        {"--heartbeat_timeout=2s", "--heartbeat_interval=200ms"});
    ASSERT_TRUE(master.ok()) << master.status();
    master_ = std::move(*master);
    auto worker = testing::WorkerProcess::Start(
        {absl::StrCat("--master=", master_->address()), "--worker_id=w0",
         "--ram_capacity=256MiB"});
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

}  // namespace
}  // namespace larder
