// Copyright 2026 The Larder Authors.
//
// Writes through a real FUSE mount: new files and O_TRUNC replacements in a
// --writable mount are written sequentially and appear whole on close;
// new directories live in the mount until a file below them is written;
// anything else is refused with a named errno and a log line.
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/process.h"
#include "tests/testing/s3rver.h"
#include "tests/testing/worker_process.h"

namespace larder {
namespace {

using ::testing::HasSubstr;
using testing::PatternBytes;
using testing::Sh;
using testing::Shell;

class FuseWriteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1);
    ::setenv("AWS_SECRET_ACCESS_KEY", "S3RVER", 1);
    const std::vector<std::string> env = {"AWS_ACCESS_KEY_ID=S3RVER",
                                          "AWS_SECRET_ACCESS_KEY=S3RVER"};
    auto server = testing::S3rver::Start("fusewrite");
    ASSERT_TRUE(server.ok()) << server.status();
    s3_ = std::move(*server);
    root_ = dir_.path() + "/local";
    std::filesystem::create_directories(root_);
    const std::string roots = "--allowed_file_roots=" + dir_.path();
    auto master = testing::MasterProcess::Start(
        {"--heartbeat_timeout=2s", "--heartbeat_interval=200ms", roots}, env);
    ASSERT_TRUE(master.ok()) << master.status();
    master_ = std::move(*master);
    for (int w = 0; w < 2; ++w) {
      auto worker = testing::WorkerProcess::Start(
          {absl::StrCat("--master=", master_->address()),
           absl::StrCat("--worker_id=w", w), "--ram_capacity=256MiB", roots},
          env);
      ASSERT_TRUE(worker.ok()) << worker.status();
      workers_.push_back(std::move(*worker));
    }
    ASSERT_TRUE(testing::WaitFor(
        [&] {
          return Larder("ring").out.find("2 workers") != std::string::npos;
        },
        absl::Seconds(20)));
    for (const std::string& m :
         {absl::StrCat("mount /ckpt/s3 '", s3_->Uri("ckpt"),
                       "' --writable --mount_block_size=1MiB --file_mode=0664"),
          absl::StrCat("mount /ckpt/local file://", root_,
                       " --writable --mount_block_size=1MiB"),
          absl::StrCat("mount /ro '", s3_->Uri("ro"), "'")}) {
      Shell r = Larder(m);
      ASSERT_EQ(r.code, 0) << m << ": " << r.out;
    }
    auto fuse = testing::FuseProcess::Start(
        master_->address(),
        {"--attr_timeout=1s", "--entry_timeout=1s", "--negative_timeout=0s"});
    ASSERT_TRUE(fuse.ok()) << fuse.status();
    fuse_ = std::move(*fuse);
    mnt_ = fuse_->mountpoint();
  }

  Shell Larder(const std::string& args) {
    return Sh(absl::StrCat(LARDER_CLI_BINARY, " ", args,
                           " --master=", master_->address(), " 2>&1"));
  }

  static std::string ReadAll(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), {});
  }

  // Writes `data` with write(2) in pieces of `piece` bytes; the status of
  // close(2) (where the upload is committed).
  static int WriteFile(const std::string& path, const std::string& data,
                       int flags, size_t piece = 128 << 10) {
    const int fd = ::open(path.c_str(), flags, 0644);
    if (fd < 0) return errno;
    for (size_t at = 0; at < data.size();) {
      const ssize_t n =
          ::write(fd, data.data() + at, std::min(piece, data.size() - at));
      if (n <= 0) {
        const int err = errno;
        ::close(fd);
        return err;
      }
      at += static_cast<size_t>(n);
    }
    return ::close(fd) == 0 ? 0 : errno;
  }

  testing::TempDir dir_;
  std::string root_;
  std::unique_ptr<testing::S3rver> s3_;
  std::unique_ptr<testing::MasterProcess> master_;
  std::vector<std::unique_ptr<testing::WorkerProcess>> workers_;
  std::unique_ptr<testing::FuseProcess> fuse_;
  std::string mnt_;
};

TEST_F(FuseWriteTest, NewFilesAppearWholeOnCloseOnEveryBackend) {
  for (const std::string m : {"/ckpt/s3", "/ckpt/local"}) {
    for (size_t size : {size_t{0}, size_t{4321}, size_t{(6 << 20) + 7}}) {
      SCOPED_TRACE(absl::StrCat(m, " ", size));
      const std::string path = absl::StrCat(mnt_, m, "/f-", size, ".bin");
      const std::string data = PatternBytes(size, static_cast<int>(size % 13));
      ASSERT_EQ(WriteFile(path, data, O_WRONLY | O_CREAT | O_TRUNC), 0);
      struct stat st {};
      EXPECT_EQ(::stat(path.c_str(), &st), 0)
          << testing::ReadFile(fuse_->log_path()).value_or("");
      EXPECT_EQ(static_cast<size_t>(st.st_size), size);
      EXPECT_TRUE(ReadAll(path) == data);
      // And through the cluster from outside the mount.
      Shell r =
          Larder(absl::StrCat("stat ", m, "/f-", size, ".bin --output=json"));
      EXPECT_THAT(r.out, HasSubstr(absl::StrCat("\"size\": ", size))) << r.out;
    }
  }
  EXPECT_EQ(ReadAll(root_ + "/f-4321.bin"), PatternBytes(4321, 4321 % 13));
  // A writable mount with mode 0664 shows the write bits.
  struct stat st {};
  ASSERT_EQ(::stat((mnt_ + "/ckpt/s3/f-4321.bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0664u);
}

TEST_F(FuseWriteTest, TorchSaveAndLoadThroughTheMount) {
  // Into new directories (os.makedirs), as training scripts do.
  const std::string path = mnt_ + "/ckpt/s3/run1/step-100/model.pt";
  Shell r = Sh(absl::StrCat(
      "/usr/bin/python3 -c '\n"
      "import os, torch\n"
      "os.makedirs(\"",
      mnt_,
      "/ckpt/s3/run1/step-100\", exist_ok=True)\n"
      "m = torch.nn.Sequential(torch.nn.Linear(64, 512), torch.nn.ReLU(), "
      "torch.nn.Linear(512, 10))\n"
      "torch.save(m.state_dict(), \"",
      path,
      "\")\n"
      "back = torch.load(\"",
      path,
      "\")\n"
      "assert all(torch.equal(back[k], v) for k, v in m.state_dict().items())\n"
      "print(\"ok\")' 2>&1"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("ok"));
}

TEST_F(FuseWriteTest, OnlySequentialWholeWritesOfWritableMounts) {
  const std::string dir = mnt_ + "/ckpt/s3";
  // A write that skips ahead: EINVAL, the log says why, nothing appears.
  const std::string sparse = dir + "/sparse.bin";
  int fd = ::open(sparse.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_EQ(::write(fd, "abc", 3), 3);
  EXPECT_EQ(::pwrite(fd, "x", 1, 100), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(::close(fd), -1);  // The upload is abandoned.
  struct stat st {};
  EXPECT_EQ(::stat(sparse.c_str(), &st), -1);
  EXPECT_EQ(errno, ENOENT);
  auto log = testing::ReadFile(fuse_->log_path());
  EXPECT_THAT(log.value_or(""), HasSubstr("written sequentially"));
  // Replacing: O_TRUNC only; O_EXCL refuses an existing file.
  const std::string file = dir + "/kept.bin";
  ASSERT_EQ(WriteFile(file, "version 1", O_WRONLY | O_CREAT | O_TRUNC), 0);
  EXPECT_EQ(WriteFile(file, "x", O_WRONLY | O_CREAT | O_EXCL), EEXIST);
  EXPECT_EQ(WriteFile(file, "x", O_WRONLY), EPERM);
  EXPECT_EQ(WriteFile(file, "x", O_RDWR | O_TRUNC), EPERM);
  ASSERT_EQ(WriteFile(file, "version 22", O_WRONLY | O_TRUNC), 0);
  EXPECT_TRUE(testing::WaitFor([&] { return ReadAll(file) == "version 22"; },
                               absl::Seconds(5)));
  // A mount that is not writable: EROFS, as before.
  EXPECT_EQ(WriteFile(mnt_ + "/ro/new.bin", "x", O_WRONLY | O_CREAT), EROFS);
  EXPECT_EQ(::mkdir((mnt_ + "/ro/newdir").c_str(), 0755), -1);
  EXPECT_EQ(errno, EROFS);
  EXPECT_FALSE(fuse_->Exited());
}

// A writer killed mid-file (kill -9: the kernel closes its files as it
// dies, and the close flushes) leaves nothing: the file it replaced keeps
// its old bytes, a new one does not appear, and the daemon says why. A
// writer that exits normally without closing commits what it wrote.
TEST_F(FuseWriteTest, AKilledWriterLeavesNothingAnExitingOneCommits) {
  const std::string dir = mnt_ + "/ckpt/s3";
  const std::string old_file = dir + "/step.pt";
  ASSERT_EQ(WriteFile(old_file, "the good checkpoint", O_WRONLY | O_CREAT), 0);
  for (const std::string& path : {old_file, dir + "/new.pt"}) {
    SCOPED_TRACE(path);
    const std::string ready = dir_.path() + "/ready";
    std::filesystem::remove(ready);
    // 3 MiB in 1 MiB blocks: parts are uploading when it dies.
    testing::Subprocess writer;
    ASSERT_TRUE(writer
                    .Start({"/usr/bin/python3", "-c",
                            "import os, sys, time\n"
                            "fd = os.open(sys.argv[1], os.O_WRONLY | "
                            "os.O_CREAT | os.O_TRUNC)\n"
                            "os.write(fd, b'x' * (3 << 20))\n"
                            "open(sys.argv[2], 'w').close()\n"
                            "time.sleep(60)\n",
                            path, ready},
                           dir_.path() + "/writer.log")
                    .ok());
    ASSERT_TRUE(testing::WaitFor([&] { return std::filesystem::exists(ready); },
                                 absl::Seconds(30)));
    writer.Stop(SIGKILL);
    struct stat st {};
    if (path == old_file) {
      EXPECT_TRUE(testing::WaitFor(
          [&] { return ReadAll(old_file) == "the good checkpoint"; },
          absl::Seconds(5)));
      EXPECT_EQ(ReadAll(old_file), "the good checkpoint");
    } else {
      EXPECT_EQ(::stat(path.c_str(), &st), -1);
      EXPECT_EQ(errno, ENOENT);
    }
    auto log = testing::ReadFile(fuse_->log_path());
    EXPECT_THAT(log.value_or(""), HasSubstr("fuse.write_abandoned"));
    EXPECT_THAT(log.value_or(""), HasSubstr("killed by signal 9"));
  }
  // Exits (status 3) with the file still open: committed whole.
  const std::string exited = dir + "/exited.pt";
  Shell r = Sh(absl::StrCat(
      "/usr/bin/python3 -c 'import os; fd = os.open(\"", exited,
      "\", os.O_WRONLY | os.O_CREAT); os.write(fd, b\"y\" * 5000); "
      "os._exit(3)'"));
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_TRUE(testing::WaitFor(
      [&] { return ReadAll(exited) == std::string(5000, 'y'); },
      absl::Seconds(5)));
  EXPECT_FALSE(fuse_->Exited());
}

// The kernel's read-only flag of the mount follows the table (--writes=auto,
// the default): read-only while no mount is writable, where a read does not
// mark the file's access time stale, so the fstat(2) after it (Python's
// open() makes one) costs no GETATTR; read-write within a ring refresh of a
// mount becoming writable. --writes=off keeps it read-only.
TEST_F(FuseWriteTest, TheMountIsReadOnlyWhileNoMountIsWritable) {
  // The kernel's view: the superblock's flag, which every copy of the mount
  // checks (statvfs reports it).
  auto read_only = [](const std::string& path) {
    struct statvfs st {};
    return ::statvfs(path.c_str(), &st) == 0 && (st.f_flag & ST_RDONLY) != 0;
  };
  ASSERT_FALSE(read_only(mnt_));
  ASSERT_EQ(
      WriteFile(mnt_ + "/ckpt/local/seen.bin", "seen", O_WRONLY | O_CREAT), 0);
  // A copy of the mount, as mount propagation makes one for the host and
  // the pods.
  testing::TempDir copy_dir;
  const std::string copy = copy_dir.path() + "/copy";
  ASSERT_EQ(::mkdir(copy.c_str(), 0755), 0);
  ASSERT_EQ(::mount(mnt_.c_str(), copy.c_str(), nullptr, MS_BIND, nullptr), 0)
      << std::strerror(errno);
  absl::Cleanup unbind = [&] { ::umount2(copy.c_str(), MNT_DETACH); };

  for (const std::string m : {"/ckpt/s3", "/ckpt/local"})
    ASSERT_EQ(Larder("unmount " + m).code, 0);
  ASSERT_TRUE(
      testing::WaitFor([&] { return read_only(mnt_); }, absl::Seconds(20)))
      << testing::ReadFile(fuse_->log_path()).value_or("");
  EXPECT_TRUE(read_only(copy));
  EXPECT_THAT(testing::ReadFile(fuse_->log_path()).value_or(""),
              HasSubstr("fuse.remounted"));
  EXPECT_EQ(WriteFile(mnt_ + "/ro/new.bin", "x", O_WRONLY | O_CREAT), EROFS);
  EXPECT_EQ(WriteFile(copy + "/ro/new.bin", "x", O_WRONLY | O_CREAT), EROFS);

  // Read, then fstat: on a read-only mount no GETATTR; on a read-write one
  // (--writes=on) the read marked the attributes stale and each fstat asks.
  // Daemons of their own, with timeouts that do not expire meanwhile.
  ASSERT_EQ(Larder(absl::StrCat("mount /data file://", root_)).code, 0);
  const std::string getattr = "larder_fuse_operations_total{op=\"getattr\"}";
  for (const bool writes_on : {false, true}) {
    SCOPED_TRACE(writes_on ? "--writes=on" : "--writes=auto");
    std::vector<std::string> flags = {"--attr_timeout=1h",
                                      "--entry_timeout=1h"};
    if (writes_on) flags.push_back("--writes=on");
    auto f = testing::FuseProcess::Start(master_->address(), flags);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(read_only((*f)->mountpoint()), !writes_on);
    const std::string file = (*f)->mountpoint() + "/data/seen.bin";
    ASSERT_TRUE(testing::WaitFor([&] { return ReadAll(file) == "seen"; },
                                 absl::Seconds(10)));
    const double before = (*f)->Metric(getattr).value_or(-1);
    for (int i = 0; i < 5; ++i) {
      const int fd = ::open(file.c_str(), O_RDONLY);
      ASSERT_GE(fd, 0);
      char buf[16];
      EXPECT_EQ(::read(fd, buf, sizeof(buf)), 4);
      struct stat st {};
      EXPECT_EQ(::fstat(fd, &st), 0);
      EXPECT_EQ(st.st_size, 4);
      ::close(fd);
    }
    const double after = (*f)->Metric(getattr).value_or(-1);
    if (writes_on) {
      EXPECT_GE(after - before, 4);
    } else {
      EXPECT_EQ(after, before);
    }
  }

  // A writable mount again: read-write, on the copy too, and a write
  // through the copy goes through.
  ASSERT_EQ(Larder(absl::StrCat("mount /ckpt/again file://", root_,
                                " --writable --mount_block_size=1MiB"))
                .code,
            0);
  ASSERT_TRUE(
      testing::WaitFor([&] { return !read_only(mnt_); }, absl::Seconds(20)))
      << testing::ReadFile(fuse_->log_path()).value_or("");
  EXPECT_FALSE(read_only(copy));
  EXPECT_EQ(
      WriteFile(copy + "/ckpt/again/after.bin", "after", O_WRONLY | O_CREAT),
      0);
  EXPECT_TRUE(
      testing::WaitFor([&] { return ReadAll(root_ + "/after.bin") == "after"; },
                       absl::Seconds(5)));

  // --writes=off: read-only whatever the table says.
  auto off = testing::FuseProcess::Start(master_->address(), {"--writes=off"});
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_TRUE(read_only((*off)->mountpoint()));
  EXPECT_EQ(WriteFile((*off)->mountpoint() + "/ckpt/again/no.bin", "x",
                      O_WRONLY | O_CREAT),
            EROFS);
  EXPECT_FALSE(fuse_->Exited());
}

// mkdir in a writable mount: the directory lives in this mount until a file
// below it is committed, then it is the store's (on every node).
TEST_F(FuseWriteTest, NewDirectoriesAreTheStoresOnceAFileBelowIsWritten) {
  for (const std::string mount : {"/ckpt/s3", "/ckpt/local"}) {
    SCOPED_TRACE(mount);
    const std::string dir = mnt_ + mount;
    ASSERT_EQ(::mkdir((dir + "/run1").c_str(), 0755), 0)
        << std::strerror(errno);
    EXPECT_EQ(::mkdir((dir + "/run1").c_str(), 0755), -1);
    EXPECT_EQ(errno, EEXIST);
    ASSERT_EQ(::mkdir((dir + "/run1/step1").c_str(), 0755), 0);
    ASSERT_EQ(::mkdir((dir + "/run1/empty").c_str(), 0755), 0);
    struct stat st {};
    ASSERT_EQ(::stat((dir + "/run1/step1").c_str(), &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    Shell ls = Sh(absl::StrCat("ls ", dir, " ", dir, "/run1 2>&1"));
    EXPECT_EQ(ls.code, 0) << ls.out;
    EXPECT_THAT(ls.out, HasSubstr("run1"));
    EXPECT_THAT(ls.out, HasSubstr("step1"));
    EXPECT_EQ(Sh(absl::StrCat("ls -A ", dir, "/run1/step1")).out, "");
    // Only this mount has them so far.
    EXPECT_NE(Larder(absl::StrCat("stat ", mount, "/run1")).code, 0);
    EXPECT_EQ(::rmdir((dir + "/run1").c_str()), -1);
    EXPECT_EQ(errno, ENOTEMPTY);
    EXPECT_EQ(::rmdir((dir + "/run1/empty").c_str()), 0);
    EXPECT_EQ(::stat((dir + "/run1/empty").c_str(), &st), -1);
    // A file written below: the directories are the store's.
    const std::string data = PatternBytes((3 << 20) + 5, 8);
    ASSERT_EQ(WriteFile(dir + "/run1/step1/model.pt", data,
                        O_WRONLY | O_CREAT | O_TRUNC),
              0);
    EXPECT_TRUE(ReadAll(dir + "/run1/step1/model.pt") == data);
    Shell other = Larder(absl::StrCat("ls ", mount, "/run1/step1"));
    EXPECT_EQ(other.code, 0) << other.out;
    EXPECT_THAT(other.out, HasSubstr("model.pt"));
    ls = Sh(absl::StrCat("ls ", dir, "/run1 2>&1"));
    EXPECT_EQ(ls.out, "step1\n");  // Listed once, from the store.
    EXPECT_EQ(::rmdir((dir + "/run1/step1").c_str()), -1);
    EXPECT_EQ(errno, EROFS);  // The store's directories stay.
  }
  EXPECT_TRUE(std::filesystem::exists(root_ + "/run1/step1/model.pt"));
  // Above the mounts, nothing is made.
  EXPECT_EQ(::mkdir((mnt_ + "/ckpt/new").c_str(), 0755), -1);
  EXPECT_EQ(errno, EROFS);
  EXPECT_FALSE(fuse_->Exited());
}

}  // namespace
}  // namespace larder
