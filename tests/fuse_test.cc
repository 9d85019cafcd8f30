// Copyright 2026 The Larder Authors.
//
// Real FUSE mounts (`larder fuse`) over a real cluster: a master and two
// worker processes over a real s3rver. The tests use the mount the way
// training code does: through the kernel, with shell tools, threads and a
// PyTorch DataLoader.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "client/worker_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/azurite.h"
#include "tests/testing/process.h"
#include "tests/testing/s3rver.h"
#include "tests/testing/webhdfs.h"
#include "tests/testing/worker_process.h"
#include "understore/azure_store.h"
#include "understore/factory.h"
#include "understore/s3_store.h"

namespace larder {
namespace {

using ::testing::HasSubstr;
using testing::PatternBytes;

constexpr uint64_t kBlock = 1 << 20;

using testing::ReadAll;
using testing::Sh;
using testing::Shell;

// The first `size` bytes of `path` as one read(2) returns them (a shorter
// read is an error: the caller retries rather than joining two calls).
absl::StatusOr<std::string> ReadInOneCall(const std::string& path,
                                          size_t size) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return absl::ErrnoToStatus(errno, path);
  std::string out(size + 1, '\0');
  const ssize_t n = ::read(fd, out.data(), out.size());
  const int err = errno;
  ::close(fd);
  if (n < 0) return absl::ErrnoToStatus(err, path);
  if (static_cast<size_t>(n) < size)
    return absl::UnavailableError(absl::StrCat(path, ": short read of ", n));
  out.resize(static_cast<size_t>(n));
  return out;
}

class FuseTest : public ::testing::Test {
 protected:
  static constexpr const char* kEnv[] = {"AWS_ACCESS_KEY_ID=S3RVER",
                                         "AWS_SECRET_ACCESS_KEY=S3RVER"};

  void SetUp() override {
    ::setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1);
    ::setenv("AWS_SECRET_ACCESS_KEY", "S3RVER", 1);
    auto server = testing::S3rver::Start("fuse");
    ASSERT_TRUE(server.ok()) << server.status();
    s3_ = std::move(*server);
    auto store = s3_->OpenStore("ds");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    // A small tree: empty, tiny, sub-block, multi-block and odd sizes. (Each
    // directory holds a file of its own: s3rver 3.7.1 leaves a prefix out of
    // a delimited listing when no key sits directly below it, unlike S3.)
    const std::vector<std::pair<std::string, size_t>> files = {
        {"empty.bin", 0},           {"one.txt", 1},
        {"train/labels.txt", 4321}, {"val/deep/notes.txt", 10},
        {"train/c0/a.jpg", 120000}, {"train/c0/b.jpg", 5 * kBlock + 12345},
        {"train/c1/c.jpg", kBlock}, {"train/c1/d.jpg", kBlock + 1},
        {"val/e.jpg", 777777},      {"val/deep/er/f.bin", 2 * kBlock - 3}};
    uint64_t seed = 1;
    for (const auto& [path, size] : files) {
      files_[path] = PatternBytes(size, seed++);
      ASSERT_TRUE(store_->Put(path, files_[path]).ok()) << path;
      ASSERT_TRUE(testing::WriteFile(Local(path), files_[path]).ok());
    }
    ASSERT_TRUE(testing::WriteFile(creds_.path() + "/credentials",
                                   "[bad]\naws_access_key_id = WRONG\n"
                                   "aws_secret_access_key = WRONG\n")
                    .ok());
    const std::string creds_env = absl::StrCat(
        "AWS_SHARED_CREDENTIALS_FILE=", creds_.path(), "/credentials");
    // Azure mounts (azurite's development account) in the same cluster.
    const std::string az_env =
        absl::StrCat("AZURE_STORAGE_KEY=", testing::Azurite::kKey);
    auto master = testing::MasterProcess::Start(
        {"--heartbeat_timeout=2s", "--heartbeat_interval=200ms"},
        {kEnv[0], kEnv[1], creds_env, az_env});
    ASSERT_TRUE(master.ok()) << master.status();
    master_ = std::move(*master);
    for (int w = 0; w < 2; ++w) {
      auto worker = testing::WorkerProcess::Start(
          {absl::StrCat("--master=", master_->address()),
           absl::StrCat("--worker_id=w", w), "--ram_capacity=256MiB",
           "--retry_max_attempts=2"},
          {kEnv[0], kEnv[1], creds_env, az_env});
      ASSERT_TRUE(worker.ok()) << worker.status();
      workers_.push_back(std::move(*worker));
    }
    Shell r = Larder(absl::StrCat("mount /datasets/ds '", s3_->Uri("ds"),
                                  "' --mount_block_size=1MiB "
                                  "--metadata_ttl=1s"));
    ASSERT_EQ(r.code, 0) << r.out;
    ASSERT_TRUE(testing::WaitFor(
        [&] {
          return Larder("ring").out.find("2 workers") != std::string::npos;
        },
        absl::Seconds(20)));
  }

  Shell Larder(const std::string& args) {
    return Sh(absl::StrCat(LARDER_CLI_BINARY, " ", args,
                           " --master=", master_->address()));
  }

  std::unique_ptr<testing::FuseProcess> Mount(
      std::vector<std::string> flags = {}) {
    flags.insert(flags.begin(), {"--attr_timeout=1s", "--entry_timeout=1s",
                                 "--negative_timeout=0s"});
    auto f = testing::FuseProcess::Start(master_->address(), flags);
    EXPECT_TRUE(f.ok()) << f.status();
    return f.ok() ? std::move(*f) : nullptr;
  }

  // Replaces val/e.jpg in the store with pattern `seed` and expects `path`
  // (its file in a mount) to read the new bytes within the attribute timeout
  // (1 s) and the master's metadata TTL (1 s), never a mix of the two.
  // `one_call`: each read of the file is a single read(2) of it all. Where
  // the kernel opens files itself (--opens=kernel) no open pins a version:
  // the kernel takes new attributes at the start of a read(2) (and drops the
  // old pages then), so successive read(2)s of one open file may return old
  // bytes and then new ones, and only a single call is of one version.
  void ExpectReplacedWhole(const std::string& path, int seed,
                           size_t size = 500001, bool one_call = false) {
    const std::string replaced = PatternBytes(size, seed);
    ASSERT_TRUE(store_->Put("val/e.jpg", replaced).ok());
    EXPECT_TRUE(testing::WaitFor(
        [&] {
          auto now = one_call ? ReadInOneCall(path, size) : ReadAll(path);
          if (now.ok() && *now != replaced && *now != files_["val/e.jpg"])
            ADD_FAILURE() << "mixed bytes of two versions";
          return now.ok() && *now == replaced;
        },
        absl::Seconds(15)));
  }

  std::string Local(const std::string& rel) const {
    return absl::StrCat(src_.path(), "/", rel);
  }

  double WorkerSum(const std::string& series) {
    double sum = 0;
    for (auto& w : workers_) sum += w->Metric(series).value_or(0);
    return sum;
  }

  std::unique_ptr<testing::S3rver> s3_;
  std::unique_ptr<S3Store> store_;
  std::map<std::string, std::string> files_;
  testing::TempDir src_;  // The same tree on local disk, to compare with.
  testing::TempDir creds_;
  std::unique_ptr<testing::MasterProcess> master_;
  std::vector<std::unique_ptr<testing::WorkerProcess>> workers_;
};

TEST_F(FuseTest, ShellToolsSeeTheTreeAndEveryByte) {
  auto fuse = Mount();
  ASSERT_NE(fuse, nullptr);
  const std::string root = fuse->mountpoint();
  const std::string ds = root + "/datasets/ds";

  // Mount paths appear as a directory tree.
  Shell r = Sh(absl::StrCat("ls ", root, " ", root, "/datasets"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("datasets"));
  EXPECT_THAT(r.out, HasSubstr("ds"));

  // statfs: a fixed 1 PiB view, all of it free (no disk-full alerts), so df
  // lists the mount (it hides file systems of zero blocks).
  struct statvfs vfs {};
  ASSERT_EQ(::statvfs(root.c_str(), &vfs), 0) << std::strerror(errno);
  EXPECT_EQ(vfs.f_bsize, 4u << 20);  // --max_read's default.
  EXPECT_EQ(vfs.f_frsize, 4096u);
  EXPECT_EQ(static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize, 1ull << 50);
  EXPECT_EQ(vfs.f_bfree, vfs.f_blocks);
  EXPECT_EQ(vfs.f_bavail, vfs.f_blocks);
  EXPECT_EQ(vfs.f_namemax, 255u);
  r = Sh("df -P");
  EXPECT_THAT(r.out, HasSubstr(root));

  // find and ls -R list the same tree as the source.
  Shell here = Sh(absl::StrCat("cd ", src_.path(), " && find . | sort"));
  Shell there = Sh(absl::StrCat("cd ", ds, " && find . | sort"));
  EXPECT_EQ(there.code, 0) << there.out;
  EXPECT_EQ(there.out, here.out);
  r = Sh(absl::StrCat("ls -R ", ds));
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("f.bin"));

  // stat: sizes and types.
  for (const auto& [path, data] : files_) {
    struct stat st {};
    ASSERT_EQ(::stat((ds + "/" + path).c_str(), &st), 0) << path;
    EXPECT_EQ(static_cast<size_t>(st.st_size), data.size()) << path;
    EXPECT_TRUE(S_ISREG(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0444u);
  }
  struct stat st {};
  ASSERT_EQ(::stat((ds + "/train/c0").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));

  // md5sum of every file equals the source's.
  here = Sh(absl::StrCat("cd ", src_.path(),
                         " && find . -type f | sort | xargs md5sum"));
  there =
      Sh(absl::StrCat("cd ", ds, " && find . -type f | sort | xargs md5sum"));
  EXPECT_EQ(there.code, 0) << there.out;
  EXPECT_EQ(there.out, here.out);
  // tar streams every file whole (same byte count as the source's archive).
  here = Sh(absl::StrCat("tar cf - -C ", src_.path(), " . | wc -c"));
  there = Sh(absl::StrCat("tar cf - -C ", ds, " . | wc -c"));
  EXPECT_EQ(there.code, 0) << there.out;
  EXPECT_EQ(there.out, here.out);

  // Extended attributes.
  char value[256];
  ssize_t n = ::getxattr((ds + "/val/e.jpg").c_str(), "user.larder.version",
                         value, sizeof(value));
  ASSERT_GT(n, 0);
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        ssize_t m =
            ::getxattr((ds + "/val/e.jpg").c_str(), "user.larder.cached_bytes",
                       value, sizeof(value) - 1);
        return m > 0 && std::string(value, m) == "777777";
      },
      absl::Seconds(5)))
      << "the file was read whole, so the placement index holds it whole";
  EXPECT_LT(::getxattr((ds + "/val/e.jpg").c_str(), "user.other", value,
                       sizeof(value)),
            0);
  EXPECT_EQ(errno, ENODATA);

  // Operation metrics.
  EXPECT_GT(
      fuse->Metric("larder_fuse_operations_total{op=\"read\"}").value_or(0), 0);
  EXPECT_GE(fuse->Metric("larder_fuse_read_bytes_total").value_or(0),
            static_cast<double>(5 * kBlock));
  EXPECT_EQ(fuse->Metric("larder_fuse_open_files").value_or(-1), 0);
}

TEST_F(FuseTest, ConcurrentRandomReadersGetTheRightBytes) {
  auto fuse = Mount();
  ASSERT_NE(fuse, nullptr);
  const std::string ds = fuse->mountpoint() + "/datasets/ds/";
  std::vector<std::string> paths;
  for (const auto& [path, data] : files_)
    if (!data.empty()) paths.push_back(path);
  std::atomic<int> bad{0}, reads{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (int i = 0; i < 150; ++i) {
        const std::string& path = paths[rng() % paths.size()];
        const std::string& data = files_[path];
        const size_t off = rng() % data.size();
        const size_t len =
            1 + rng() % std::min<size_t>(3 * kBlock, 2 * data.size());
        int fd = ::open((ds + path).c_str(), O_RDONLY);
        if (fd < 0) {
          ++bad;
          continue;
        }
        std::string buf(len, '\0');
        ssize_t n = ::pread(fd, buf.data(), len, static_cast<off_t>(off));
        ::close(fd);
        const size_t want = std::min(len, data.size() - off);
        if (n != static_cast<ssize_t>(want) ||
            buf.compare(0, want, data, off, want) != 0) {
          ++bad;
        }
        ++reads;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(reads.load(), 8 * 150);
}

// Files of at least --direct_io_min_size bypass the page cache: every read
// reaches the daemon, in requests of up to 4 MiB where the kernel allows
// (fs.fuse.max_pages_limit), and a shared mmap of them still works (the
// INIT reply asks for FUSE_DIRECT_IO_ALLOW_MMAP). Smaller files keep using
// the page cache.
TEST_F(FuseTest, LargeFilesUseDirectIoWithLargeRequestsAndSharedMmap) {
  // The daemon's own read path (passthrough has a test of its own).
  auto fuse = Mount(
      {"--direct_io_min_size=1MiB", "--max_read=4MiB", "--passthrough=false"});
  ASSERT_NE(fuse, nullptr);
  const std::string ds = fuse->mountpoint() + "/datasets/ds/";
  const std::string big = "train/c0/b.jpg";  // 5 MiB + 12345: 6 blocks.
  const std::string& data = files_[big];
  auto reads = [&] {
    return fuse->Metric("larder_fuse_operations_total{op=\"read\"}")
        .value_or(-1);
  };
  auto read_4m = [&](const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY);
    std::string out;
    if (fd < 0) return out;
    // Page-aligned, as a loader's buffers are: a direct_io request covers
    // at most max_pages pages of the reader's buffer.
    std::unique_ptr<char, decltype(&std::free)> buf(
        static_cast<char*>(std::aligned_alloc(4096, 4 << 20)), &std::free);
    ssize_t n;
    while ((n = ::read(fd, buf.get(), 4 << 20)) > 0) out.append(buf.get(), n);
    ::close(fd);
    return out;
  };
  const bool large_requests =
      ::access("/proc/sys/fs/fuse/max_pages_limit", F_OK) == 0;

  for (int pass = 0; pass < 2; ++pass) {
    const double before = reads();
    EXPECT_EQ(read_4m(ds + big), data) << "pass " << pass;
    const double requests = reads() - before;
    // Direct I/O: every pass is served by the daemon: 4 MiB, the short
    // rest, and the read at the end of the file (1 MiB requests: 7).
    EXPECT_GE(requests, 3) << "pass " << pass;
    if (large_requests) {
      EXPECT_LE(requests, 3) << "pass " << pass;
    }
  }
  if (large_requests) {
    EXPECT_THAT(testing::ReadFile(fuse->log_path()).value_or(""),
                HasSubstr("max_pages=1024"));
  }

  // Unaligned reads that cross blocks and the end of the file.
  int fd = ::open((ds + big).c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  std::mt19937_64 rng(5);
  for (int i = 0; i < 50; ++i) {
    const size_t off = rng() % data.size();
    const size_t len = 1 + rng() % (3 * kBlock);
    std::string buf(len, '\0');
    const ssize_t n = ::pread(fd, buf.data(), len, static_cast<off_t>(off));
    const size_t want = std::min(len, data.size() - off);
    ASSERT_EQ(n, static_cast<ssize_t>(want)) << off << "+" << len;
    ASSERT_EQ(buf.compare(0, want, data, off, want), 0) << off << "+" << len;
  }
  // A shared, read-only mapping (numpy.memmap, LMDB) sees the same bytes.
  void* map = ::mmap(nullptr, data.size(), PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(map, MAP_FAILED) << std::strerror(errno);
  EXPECT_EQ(std::memcmp(map, data.data(), data.size()), 0);
  ::munmap(map, data.size());
  ::close(fd);

  // Through a daemon on another node the blocks come over gRPC, into the
  // same 4 MiB direct_io requests.
  auto remote = Mount(
      {"--direct_io_min_size=1MiB", "--node=elsewhere", "--passthrough=false"});
  ASSERT_NE(remote, nullptr);
  const std::string grpc_bytes =
      "larder_worker_served_path_bytes_total{path=\"grpc\"}";
  const double grpc_before = WorkerSum(grpc_bytes);
  EXPECT_EQ(read_4m(remote->mountpoint() + "/datasets/ds/" + big), data);
  EXPECT_GE(WorkerSum(grpc_bytes) - grpc_before,
            static_cast<double>(data.size()));
  EXPECT_EQ(read_4m(remote->mountpoint() + "/datasets/ds/val/deep/er/f.bin"),
            files_["val/deep/er/f.bin"]);

  // A small file goes through the page cache: a second read within the
  // attribute timeout costs no request.
  const std::string small = ds + "val/e.jpg";
  EXPECT_EQ(ReadAll(small).value_or(""), files_["val/e.jpg"]);
  const double before = reads();
  EXPECT_EQ(ReadAll(small).value_or(""), files_["val/e.jpg"]);
  EXPECT_EQ(reads() - before, 0);
}

// A small file the local worker holds is read by passthrough too, and its
// memfd is kept after the last close for --passthrough_keep: the next open
// (the next epoch) uses it without asking the worker, and once the time is
// up the worker's lease goes back.
TEST_F(FuseTest, APassthroughFileIsKeptForTheNextOpen) {
  workers_[1]->Kill(SIGKILL);
  ASSERT_TRUE(testing::WaitFor(
      [&] { return Larder("ring").out.find("1 workers") != std::string::npos; },
      absl::Seconds(20)));
  auto fuse = Mount({"--passthrough_keep=2s"});
  ASSERT_NE(fuse, nullptr);
  const std::string ds = fuse->mountpoint() + "/datasets/ds/";
  auto metric = [&](const std::string& series) {
    return fuse->Metric(series).value_or(-1);
  };
  const std::string kPassthrough = "larder_fuse_passthrough_opens_total";
  const std::string kReads = "larder_fuse_operations_total{op=\"read\"}";
  const std::string kLeases = "larder_worker_short_circuit_leases";
  auto leases = [&] { return workers_[0]->Metric(kLeases).value_or(-1); };
  // Cold, then cached: the worker holds it.
  ASSERT_EQ(ReadAll(ds + "train/c0/a.jpg").value_or(""),
            files_["train/c0/a.jpg"]);
  ASSERT_EQ(ReadAll(ds + "train/c1/c.jpg").value_or(""),
            files_["train/c1/c.jpg"]);
  const double reads = metric(kReads);
  const double before = leases();
  EXPECT_EQ(ReadAll(ds + "train/c0/a.jpg").value_or(""),
            files_["train/c0/a.jpg"]);
  EXPECT_EQ(metric(kPassthrough), 1);
  EXPECT_EQ(leases(), before + 1);  // Kept after the close.
  for (int i = 0; i < 3; ++i) {     // Opened again: the same memfd, no export.
    EXPECT_EQ(ReadAll(ds + "train/c0/a.jpg").value_or(""),
              files_["train/c0/a.jpg"]);
  }
  EXPECT_EQ(metric(kPassthrough), 4);
  EXPECT_EQ(leases(), before + 1);
  EXPECT_EQ(metric(kReads), reads);  // The kernel read it, not the daemon.
  // Past the keep, the next open or close sweeps it: its lease goes back.
  absl::SleepFor(absl::Milliseconds(2500));
  EXPECT_EQ(ReadAll(ds + "train/c1/c.jpg").value_or(""),
            files_["train/c1/c.jpg"]);
  EXPECT_TRUE(testing::WaitFor([&] { return leases() == before + 1; },
                               absl::Seconds(5)))
      << leases() << " leases, " << before << " before";
  // And with no open or close at all (an idle mount), the daemon's sweeper
  // lets go of the last one when its keep is up.
  EXPECT_TRUE(
      testing::WaitFor([&] { return leases() <= before; }, absl::Seconds(6)))
      << leases() << " leases, " << before << " before";
}

// Files are leased from the worker ahead of their opens, in batches: after
// a listing, a walk of the directory opens every file without an exchange
// with the worker. A file replaced meanwhile is not served from its old
// lease, an object not opened in time goes back, and the bounds hold.
TEST_F(FuseTest, FilesAreLeasedAheadOfTheirOpens) {
  workers_[1]->Kill(SIGKILL);
  ASSERT_TRUE(testing::WaitFor(
      [&] { return Larder("ring").out.find("1 workers") != std::string::npos; },
      absl::Seconds(20)));
  constexpr int kFiles = 12;
  std::map<std::string, std::string> many;
  for (int i = 0; i < kFiles; ++i) {
    const std::string rel = absl::StrCat("many/f", 10 + i, ".bin");
    many[rel] = PatternBytes(20000 + 1000 * i, 100 + i);
    ASSERT_TRUE(store_->Put(rel, many[rel]).ok());
  }
  ASSERT_EQ(Larder("load /datasets/ds/many").code, 0);
  auto fuse = Mount({"--passthrough_keep=0s", "--lease_ahead_keep=8s"});
  ASSERT_NE(fuse, nullptr);
  std::string dir = fuse->mountpoint() + "/datasets/ds/many";
  auto metric = [&](const std::string& series) {
    return fuse->Metric(series).value_or(-1);
  };
  auto ahead = [&](const char* result) {
    return metric(
        absl::StrCat("larder_fuse_lease_ahead_total{result=\"", result, "\"}"));
  };
  const std::string kHeld = "larder_fuse_lease_ahead_held";
  const std::string kPassthrough = "larder_fuse_passthrough_opens_total";
  const std::string kLeases = "larder_worker_short_circuit_leases";
  auto leases = [&] { return workers_[0]->Metric(kLeases).value_or(-1); };
  const double idle_leases = leases();

  // An open that finds nothing leased has the other files of its directory
  // leased (in its own exchange when the directory's listing is cached,
  // else once the background thread has listed it).
  EXPECT_EQ(ReadAll(dir + "/f15.bin").value_or(""), many["many/f15.bin"]);
  EXPECT_TRUE(testing::WaitFor([&] { return metric(kHeld) == kFiles - 1; },
                               absl::Seconds(10)))
      << metric(kHeld) << " held";
  EXPECT_EQ(ahead("leased"), kFiles - 1);
  EXPECT_EQ(ahead("used"), 0);

  // A listing leases the directory's files; the walk that follows takes
  // every one of them.
  ASSERT_EQ(Sh("ls " + dir).code, 0);
  ASSERT_TRUE(testing::WaitFor([&] { return metric(kHeld) == kFiles; },
                               absl::Seconds(10)))
      << metric(kHeld) << " held";
  // The worker lent each once (the first open's own lease of f15 goes back
  // when the kernel's asynchronous release of that open reaches the daemon,
  // and the worker reads the one-way RELEASE in its own time).
  EXPECT_TRUE(testing::WaitFor([&] { return leases() == idle_leases + kFiles; },
                               absl::Seconds(5)))
      << leases() << " leases, " << idle_leases << " idle";
  const double used = ahead("used");
  for (const auto& [rel, bytes] : many)
    EXPECT_EQ(ReadAll(fuse->mountpoint() + "/datasets/ds/" + rel).value_or(""),
              bytes)
        << rel;
  EXPECT_EQ(ahead("used"), used + kFiles);
  EXPECT_EQ(metric(kPassthrough), kFiles + 1);
  // Closed (passthrough_keep 0): every open's lease went back to the
  // worker; what the worker still lends is what is held ahead (a batch
  // asked for as the walk went may hold files it has passed, until their
  // time is up).
  EXPECT_TRUE(
      testing::WaitFor([&] { return leases() == idle_leases + metric(kHeld); },
                       absl::Seconds(5)))
      << leases() << " leases, " << idle_leases << " idle, " << metric(kHeld)
      << " held";

  // Leased, then replaced in the store: once the mount sees the new
  // version (its size), the open reads the new bytes, and the old
  // version's lease goes back unused.
  ASSERT_EQ(Sh("ls " + dir).code, 0);
  ASSERT_TRUE(testing::WaitFor([&] { return metric(kHeld) == kFiles; },
                               absl::Seconds(10)));
  const double expired = ahead("expired");
  const std::string replaced = PatternBytes(31111, 7);
  ASSERT_TRUE(store_->Put("many/f10.bin", replaced).ok());
  ASSERT_TRUE(testing::WaitFor(
      [&] { return Sh("stat -c %s " + dir + "/f10.bin").out == "31111\n"; },
      absl::Seconds(10)));
  EXPECT_EQ(ReadAll(dir + "/f10.bin").value_or(""), replaced);
  // The old lease goes back unused (at the open, or by time on a slow
  // machine).
  EXPECT_GE(ahead("expired"), expired + 1);
  // Not opened within --lease_ahead_keep: given back (the lease of the new
  // version's read, if any, is the daemon's own, kept a few seconds).
  EXPECT_TRUE(
      testing::WaitFor([&] { return metric(kHeld) == 0; }, absl::Seconds(15)))
      << metric(kHeld) << " held";
  EXPECT_EQ(ahead("expired"), expired + kFiles);
  fuse.reset();

  // At most --lease_ahead objects held; 0 turns it off.
  fuse = Mount({"--passthrough_keep=0s", "--lease_ahead=5"});
  ASSERT_NE(fuse, nullptr);
  dir = fuse->mountpoint() + "/datasets/ds/many";
  ASSERT_EQ(Sh("ls " + dir).code, 0);
  ASSERT_TRUE(
      testing::WaitFor([&] { return metric(kHeld) == 5; }, absl::Seconds(10)));
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(metric(kHeld), 5);
  fuse.reset();
  // The daemon gone, every lease it held went back.
  EXPECT_TRUE(testing::WaitFor([&] { return leases() == idle_leases; },
                               absl::Seconds(15)))
      << leases() << " leases, " << idle_leases << " idle";
  fuse = Mount({"--lease_ahead=0"});
  ASSERT_NE(fuse, nullptr);
  dir = fuse->mountpoint() + "/datasets/ds/many";
  ASSERT_EQ(Sh("ls " + dir).code, 0);
  EXPECT_EQ(ReadAll(dir + "/f11.bin").value_or(""), many["many/f11.bin"]);
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(metric(kHeld), 0);
  EXPECT_EQ(ahead("leased"), 0);
}

TEST_F(FuseTest, PassthroughReadsALargeFileFromTheWorkersMemfd) {
  // One worker, so that it owns every block of the file.
  workers_[1]->Kill(SIGKILL);
  ASSERT_TRUE(testing::WaitFor(
      [&] { return Larder("ring").out.find("1 workers") != std::string::npos; },
      absl::Seconds(20)));
  // Closed at the last close (the next test keeps them).
  auto fuse = Mount({"--direct_io_min_size=1MiB", "--passthrough_keep=0s"});
  ASSERT_NE(fuse, nullptr);
  const std::string path =
      fuse->mountpoint() + "/datasets/ds/train/c0/b.jpg";  // 6 blocks.
  const std::string& data = files_["train/c0/b.jpg"];
  auto metric = [&](const std::string& series) {
    return fuse->Metric(series).value_or(-1);
  };
  const std::string kPassthrough = "larder_fuse_passthrough_opens_total";
  const std::string kReads = "larder_fuse_operations_total{op=\"read\"}";
  const std::string kLeases = "larder_worker_short_circuit_leases";

  // Cold: the blocks are not cached yet, so the daemon reads them.
  EXPECT_EQ(ReadAll(path).value_or(""), data);
  EXPECT_EQ(metric(kPassthrough), 0);
  EXPECT_GT(metric(kReads), 0);

  // Cached whole in the worker's RAM: the kernel reads its memfd; the
  // daemon sees the open and no read.
  const double reads = metric(kReads);
  const double leases = workers_[0]->Metric(kLeases).value_or(-1);
  int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  EXPECT_EQ(metric(kPassthrough), 1);
  // The worker keeps every block of the file while it is open.
  const double open_leases = workers_[0]->Metric(kLeases).value_or(-1);
  EXPECT_GE(open_leases, leases + 6);
  std::string got(data.size() + 10, '\0');
  EXPECT_EQ(::pread(fd, got.data(), got.size(), 0),
            static_cast<ssize_t>(data.size()));
  EXPECT_EQ(got.substr(0, data.size()), data);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 50; ++i) {
    const size_t off = rng() % data.size();
    const size_t len = 1 + rng() % (3 * kBlock);
    std::string buf(len, '\0');
    const size_t want = std::min(len, data.size() - off);
    ASSERT_EQ(::pread(fd, buf.data(), len, static_cast<off_t>(off)),
              static_cast<ssize_t>(want));
    ASSERT_EQ(buf.compare(0, want, data, off, want), 0) << off << "+" << len;
  }
  void* map = ::mmap(nullptr, data.size(), PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(map, MAP_FAILED) << std::strerror(errno);
  EXPECT_EQ(std::memcmp(map, data.data(), data.size()), 0);
  // A second open of the same file shares the backing memfd.
  EXPECT_EQ(ReadAll(path).value_or(""), data);
  EXPECT_EQ(metric(kPassthrough), 2);
  EXPECT_EQ(metric(kReads), reads);

  // Evicted from the worker while open: the open file keeps reading the
  // same bytes (the memfd lives on), and a new open reads them again
  // through the daemon.
  // As root, with the local admin token (evicting is an admin's).
  auto admin = ChannelFactory::Create(SecurityOptions());
  ASSERT_TRUE(admin.ok()) << admin.status();
  WorkerClient worker(workers_[0]->address(), **admin);
  auto evicted = worker.EvictPrefix("/datasets/ds/train/c0/b.jpg");
  ASSERT_TRUE(evicted.ok()) << evicted.status();
  EXPECT_GT(*evicted, 0u);
  std::fill(got.begin(), got.end(), '\0');
  EXPECT_EQ(::pread(fd, got.data(), data.size(), 0),
            static_cast<ssize_t>(data.size()));
  EXPECT_EQ(got.substr(0, data.size()), data);
  EXPECT_EQ(std::memcmp(map, data.data(), data.size()), 0);
  ::munmap(map, data.size());
  ::close(fd);
  // Closed: the worker's leases on the blocks go back.
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        return workers_[0]->Metric(kLeases).value_or(-1) <= open_leases - 6;
      },
      absl::Seconds(10)))
      << workers_[0]->Metric(kLeases).value_or(-1) << " leases";
  EXPECT_EQ(ReadAll(path).value_or(""), data);
  EXPECT_EQ(metric(kPassthrough), 2);
  EXPECT_GT(metric(kReads), reads);

  // A daemon with no leases kept from before the eviction has the worker
  // fetch the blocks again, then reads them by passthrough again.
  auto fresh = Mount({"--direct_io_min_size=1MiB"});
  ASSERT_NE(fresh, nullptr);
  const std::string again = fresh->mountpoint() + "/datasets/ds/train/c0/b.jpg";
  EXPECT_EQ(ReadAll(again).value_or(""), data);
  EXPECT_EQ(fresh->Metric(kPassthrough).value_or(-1), 0);
  EXPECT_EQ(ReadAll(again).value_or(""), data);
  EXPECT_EQ(fresh->Metric(kPassthrough).value_or(-1), 1);
}

TEST_F(FuseTest, ErrorsAreErrnosAndWritesAreReadOnly) {
  // No mount of the table is writable: by default (--writes=auto) the
  // kernel refuses every write (EROFS) and the mount's log line says why.
  {
    auto ro = Mount();
    ASSERT_NE(ro, nullptr);
    const std::string file = ro->mountpoint() + "/datasets/ds/one.txt";
    EXPECT_EQ(::open(file.c_str(), O_WRONLY), -1);
    EXPECT_EQ(errno, EROFS);
    EXPECT_THAT(testing::ReadFile(ro->log_path()).value_or(""),
                HasSubstr("read_only=true writes=auto why="));
  }
  // A mount that takes writes (--writes=on) refuses them itself, naming why.
  auto fuse = Mount({"--writes=on"});
  ASSERT_NE(fuse, nullptr);
  const std::string ds = fuse->mountpoint() + "/datasets/ds";
  EXPECT_EQ(::open((ds + "/no-such-file").c_str(), O_RDONLY), -1);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(::open((fuse->mountpoint() + "/nothing/here").c_str(), O_RDONLY),
            -1);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(::open((ds + "/one.txt").c_str(), O_WRONLY), -1);
  EXPECT_EQ(errno, EROFS);
  EXPECT_EQ(::open((ds + "/one.txt").c_str(), O_RDWR | O_TRUNC), -1);
  EXPECT_EQ(errno, EROFS);
  EXPECT_EQ(::open((ds + "/new.txt").c_str(), O_WRONLY | O_CREAT, 0644), -1);
  EXPECT_EQ(errno, EROFS);
  EXPECT_EQ(::mkdir((ds + "/newdir").c_str(), 0755), -1);
  EXPECT_EQ(errno, EROFS);
  EXPECT_EQ(::unlink((ds + "/one.txt").c_str()), -1);
  EXPECT_EQ(errno, EROFS);
  EXPECT_EQ(::rename((ds + "/one.txt").c_str(), (ds + "/two.txt").c_str()), -1);
  EXPECT_EQ(errno, EROFS);
  EXPECT_EQ(::truncate((ds + "/one.txt").c_str(), 0), -1);
  EXPECT_EQ(errno, EROFS);
  // Nothing was changed, the daemon lives on, and the log says why.
  EXPECT_EQ(ReadAll(ds + "/one.txt").value_or("<error>"), files_["one.txt"]);
  EXPECT_FALSE(fuse->Exited());
  auto log = testing::ReadFile(fuse->log_path());
  EXPECT_THAT(log.value_or(""), HasSubstr("read-only (EROFS)"));
  EXPECT_THAT(log.value_or(""), HasSubstr("mkdir"));

  // The under-store forbids: EACCES. The "bad" profile's key is one s3rver
  // does not know.
  Shell r = Larder(absl::StrCat("mount /datasets/denied '", s3_->Uri("ds"),
                                "' --credentials=profile:bad"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(::open((fuse->mountpoint() + "/datasets/denied/one.txt").c_str(),
                   O_RDONLY),
            -1);
  EXPECT_EQ(errno, EACCES);
  EXPECT_FALSE(fuse->Exited());
}

TEST_F(FuseTest, ReplacedFileIsVisibleAfterTheTtl) {
  auto fuse = Mount();
  ASSERT_NE(fuse, nullptr);
  const std::string path = fuse->mountpoint() + "/datasets/ds/val/e.jpg";
  ASSERT_EQ(ReadAll(path).value_or("<error>"), files_["val/e.jpg"]);
  ExpectReplacedWhole(path, 99);
}

// --opens=kernel: the daemon declines OPEN, so the kernel opens and closes
// files itself (no OPEN, RELEASE or FLUSH) and serves warm files from its
// page cache; a replaced object is read whole at its new version once the
// kernel asks for its attributes again, never mixed with the old one.
TEST_F(FuseTest, KernelOpensReadWarmFilesWithNoRequest) {
  testing::TempDir scratch;
  Shell refused = Sh(absl::StrCat(LARDER_CLI_BINARY, " fuse ", scratch.path(),
                                  " --opens=kernel 2>&1"));
  EXPECT_EQ(refused.code, 2);
  EXPECT_THAT(refused.out, HasSubstr("--opens=kernel needs --writes=off"));
  auto fuse = Mount({"--opens=kernel", "--writes=off"});
  ASSERT_NE(fuse, nullptr);
  const std::string path = fuse->mountpoint() + "/datasets/ds/val/e.jpg";
  ASSERT_EQ(ReadAll(path).value_or("<error>"), files_["val/e.jpg"]);
  auto requests = [&] {
    double n = 0;
    for (const char* op : {"open", "read", "release"}) {
      n += fuse->Metric(absl::StrCat("larder_fuse_operations_total{op=\"", op,
                                     "\"}"))
               .value_or(-1000);
    }
    return n;
  };
  const double before = requests();
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(ReadAll(path).value_or("<error>"), files_["val/e.jpg"]);
  EXPECT_EQ(requests(), before);
  EXPECT_THAT(testing::ReadFile(fuse->log_path()).value_or(""),
              HasSubstr("opens=kernel"));

  // Replaced at the same size (within the store's mtime second, too): the
  // kernel still sees it changed.
  ExpectReplacedWhole(path, 98, files_["val/e.jpg"].size(), /*one_call=*/true);
  EXPECT_FALSE(fuse->Exited());
}

TEST_F(FuseTest, LargeDirectoriesAreListedPageByPage) {
  // 1,500 entries listed 100 at a time: the daemon holds one page per open
  // directory, and readdir offsets carry across pages.
  std::vector<std::thread> threads;
  std::atomic<int> failed{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < 1500; i += 8) {
        if (!store_->Put(absl::StrCat("big/f", i), "x").ok()) ++failed;
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(failed.load(), 0);
  auto fuse = Mount({"--list_page_size=100"});
  ASSERT_NE(fuse, nullptr);
  Shell r = Sh(absl::StrCat("ls -f ", fuse->mountpoint(),
                            "/datasets/ds/big | grep -c ^f"));
  EXPECT_EQ(r.out, "1500\n");
  r = Sh(absl::StrCat("ls ", fuse->mountpoint(),
                      "/datasets/ds/big | sort -u | wc -l"));
  EXPECT_EQ(r.out, "1500\n");
}

// The under-store stopped: every file read before stays readable past the
// mount's TTL (1 s) and the kernel's (1 s), with the kernel's caches
// dropped, from the node's metadata cache (stale-if-error) and the workers'
// blocks; a file never read fails with EIO; both work once it is back.
TEST_F(FuseTest, CachedFilesStayReadableWhileTheUnderStoreIsDown) {
  const std::string cold = PatternBytes(3000, 77);
  ASSERT_TRUE(store_->Put("train/cold.bin", cold).ok());
  auto fuse = Mount();
  ASSERT_NE(fuse, nullptr);
  const std::string ds = fuse->mountpoint() + "/datasets/ds/";
  Shell r = Sh(absl::StrCat("ls -R ", ds, " > /dev/null"));
  ASSERT_EQ(r.code, 0) << r.out;
  for (const auto& [path, data] : files_)
    ASSERT_EQ(ReadAll(ds + path).value_or("<error>"), data) << path;

  s3_->Kill();
  absl::SleepFor(absl::Milliseconds(2500));
  ASSERT_TRUE(testing::DropKernelCaches().ok());
  int failed = 0;
  const absl::Time cached_start = absl::Now();
  for (const auto& [path, data] : files_) {
    absl::StatusOr<std::string> got = ReadAll(ds + path);
    if (!got.ok() || *got != data) {
      ++failed;
      ADD_FAILURE() << path << ": " << got.status();
    }
  }
  EXPECT_EQ(failed, 0);
  // Promptly: once the master has said the store does not answer, expired
  // entries are served without asking it for every file (each ask costs the
  // store's retries; before, these reads took 54 s).
  const absl::Duration cached_took = absl::Now() - cached_start;
  EXPECT_LT(cached_took, absl::Seconds(10));
  std::fprintf(stderr, "%zu cached files read in %s with the store down\n",
               files_.size(), absl::FormatDuration(cached_took).c_str());
  EXPECT_GT(fuse->Metric("larder_fuse_metadata_lookups_total{result=\"stale\"}")
                .value_or(0),
            0);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> got = ReadAll(ds + "train/cold.bin");
  EXPECT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::ErrnoToStatusCode(EIO)) << got.status();
  const absl::Duration took = absl::Now() - start;
  EXPECT_LT(took, absl::Seconds(10));
  std::fprintf(stderr, "an uncached read failed after %s\n",
               absl::FormatDuration(took).c_str());
  EXPECT_FALSE(fuse->Exited());

  ASSERT_TRUE(s3_->Restart().ok());
  EXPECT_TRUE(testing::WaitFor(
      [&] { return ReadAll(ds + "train/cold.bin").value_or("") == cold; },
      absl::Seconds(30)));
}

// --fuse_channel=uring: requests come through the daemon's io_uring rings
// where the kernel allows it; where it does not (enable_uring off), the
// daemon says so in one line and serves through /dev/fuse.
TEST_F(FuseTest, TheIoUringChannelServesRequestsOrFallsBack) {
  const char* knob = "/sys/module/fuse/parameters/enable_uring";
  absl::StatusOr<std::string> was = testing::ReadFile(knob);
  if (!was.ok()) GTEST_SKIP() << "this kernel has no FUSE over io_uring";
  testing::SuiteFuseChannel();  // Sets the knob of a uring/ suite first.
  auto set = [&](const char* v) { std::ofstream(knob) << v; };
  absl::Cleanup restore = [&] { set(was->substr(0, 1).c_str()); };
  auto log_of = [](testing::FuseProcess& f) {
    return testing::ReadFile(f.log_path()).value_or("");
  };
  const std::string& data = files_["train/c0/b.jpg"];
  set("N");
  auto classic = Mount({"--fuse_channel=uring"});
  ASSERT_NE(classic, nullptr);
  EXPECT_EQ(ReadAll(classic->mountpoint() + "/datasets/ds/train/c0/b.jpg")
                .value_or(""),
            data);
  classic->Kill(SIGTERM);
  EXPECT_THAT(log_of(*classic), HasSubstr("channel=/dev/fuse"));
  EXPECT_THAT(log_of(*classic), HasSubstr("enable_uring"));
  set("Y");
  auto uring = Mount({"--fuse_channel=uring"});
  ASSERT_NE(uring, nullptr);
  const std::string ds = uring->mountpoint() + "/datasets/ds/";
  for (const auto& [path, bytes] : files_)
    EXPECT_EQ(ReadAll(ds + path).value_or("<error>"), bytes) << path;
  EXPECT_EQ(Sh(absl::StrCat("ls ", ds, "train/c0")).out, "a.jpg\nb.jpg\n");
  uring->Kill(SIGTERM);
  const std::string log = log_of(*uring);
  EXPECT_THAT(log, HasSubstr("channel=io_uring"));
  EXPECT_THAT(log, ::testing::ContainsRegex("channel_stopped channel=io_uring "
                                            "requests=[1-9]"));
}

TEST_F(FuseTest, KilledDaemonLeavesNoHungMountAndMountsAgain) {
  auto fuse = Mount();
  ASSERT_NE(fuse, nullptr);
  const std::string mp = fuse->mountpoint();
  ASSERT_EQ(ReadAll(mp + "/datasets/ds/one.txt").value_or("<error>"),
            files_["one.txt"]);

  // A second daemon on a busy mount point, and one on a missing one.
  Shell r = Larder(absl::StrCat("fuse ", mp, " --fuse_metrics_listen="));
  EXPECT_EQ(r.code, 6) << r.out;
  EXPECT_THAT(r.out, HasSubstr("busy"));
  r = Larder(absl::StrCat("fuse ", mp, "-missing --fuse_metrics_listen="));
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_THAT(r.out, HasSubstr("does not exist"));

  fuse->Kill(SIGKILL);
  // auto_unmount: fusermount3 unmounts once the daemon is gone; no
  // "Transport endpoint is not connected" is left behind. Over io_uring,
  // where fusermount3 leaves it, the daemon's watchdog does.
  EXPECT_TRUE(testing::WaitFor([&] { return !testing::IsMounted(mp); },
                               absl::Seconds(10)));
  const char* channel = std::getenv("LARDER_TEST_FUSE_CHANNEL");
  if (channel != nullptr && std::string(channel) == "uring") {
    // The watchdog logs once its umount2 has returned: the mount can be
    // gone a moment before the line is written.
    testing::WaitFor(
        [&] {
          return absl::StrContains(
              testing::ReadFile(fuse->log_path()).value_or(""),
              "fuse.watchdog_unmounted");
        },
        absl::Seconds(5));
    EXPECT_THAT(testing::ReadFile(fuse->log_path()).value_or(""),
                HasSubstr("fuse.watchdog_unmounted"));
  }
  struct stat st {};
  EXPECT_EQ(::stat(mp.c_str(), &st), 0) << std::strerror(errno);
  ASSERT_TRUE(fuse->Restart().ok());
  EXPECT_EQ(ReadAll(mp + "/datasets/ds/train/c1/d.jpg").value_or("<error>"),
            files_["train/c1/d.jpg"]);

  // SIGTERM: a clean unmount and exit.
  fuse->Kill(SIGTERM);
  EXPECT_FALSE(testing::IsMounted(mp));
  auto log = testing::ReadFile(fuse->log_path());
  EXPECT_THAT(log.value_or(""), HasSubstr("fuse.unmounted"));
}

// --daemon detaches as daemons do: `$(...)` and pipes return as soon as the
// mount is ready (the daemon keeps none of the caller's stdio), the exit
// code says whether it mounted, and the log goes to --log_file.
TEST_F(FuseTest, DaemonReturnsOnceMountedAndKeepsNoStdio) {
  testing::TempDir dir;
  const std::string mp = dir.path() + "/mnt";
  ASSERT_EQ(::mkdir(mp.c_str(), 0755), 0);
  const std::string log = dir.path() + "/fuse.log";
  // Whatever fails below, no daemon or mount is left behind.
  absl::Cleanup unmount = [&] {
    Sh(absl::StrCat("pkill -f 'fuse ", mp, " '"));
    if (testing::IsMounted(mp)) testing::ForceUnmount(mp);
  };
  // The command substitution would wait for the daemon to exit if it held
  // a write end of its pipe: as stdout or stderr, or as any other inherited
  // descriptor (9 here). The outer `timeout` turns a hang into a failure.
  Shell r = Sh(absl::StrCat(
      "timeout 40 sh -c 'out=$(", LARDER_CLI_BINARY, " fuse ", mp,
      " --daemon --fuse_metrics_listen= --log_file=", log,
      " --master=", master_->address(), " 2>&1 9>&1); echo \"rc=$? $out\"'"));
  EXPECT_THAT(r.out, HasSubstr("rc=0 larder fuse: mounted ")) << r.out;
  ASSERT_TRUE(testing::IsMounted(mp)) << r.out;
  EXPECT_EQ(ReadAll(mp + "/datasets/ds/one.txt").value_or("<error>"),
            files_["one.txt"]);
  auto text = testing::ReadFile(log);
  EXPECT_THAT(text.value_or(""), HasSubstr("fuse.mounted")) << log;
  // The daemon's own stdio: /dev/null and the log file, nothing else.
  // The oldest: over io_uring the daemon has a watchdog child of the same
  // command line.
  const std::string pid = Sh(absl::StrCat("pgrep -o -f 'fuse ", mp, " '")).out;
  ASSERT_FALSE(pid.empty());
  for (int fd = 0; fd <= 2; ++fd) {
    char target[4096] = {0};
    const std::string link = absl::StrCat("/proc/", std::stoi(pid), "/fd/", fd);
    ASSERT_GT(::readlink(link.c_str(), target, sizeof(target) - 1), 0) << link;
    EXPECT_THAT(std::string(target),
                ::testing::AnyOf(std::string("/dev/null"), log))
        << link;
  }
  // A second daemon on the busy mount point fails with its exit code, even
  // through a pipe.
  r = Sh(absl::StrCat("timeout 30 ", LARDER_CLI_BINARY, " fuse ", mp,
                      " --daemon --fuse_metrics_listen= --master=",
                      master_->address(), " 2>&1 | cat"));
  EXPECT_THAT(r.out, HasSubstr("busy")) << r.out;
  r = Sh(absl::StrCat(
      LARDER_CLI_BINARY, " fuse ", mp,
      " --daemon --fuse_metrics_listen= --master=", master_->address()));
  EXPECT_EQ(r.code, 6) << r.out;
  // A log file that cannot be opened is a usage error, said by the caller.
  r = Sh(absl::StrCat(LARDER_CLI_BINARY, " fuse ", dir.path(),
                      " --daemon --log_file=/nonexistent/dir/x.log --master=",
                      master_->address()));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--log_file: cannot open"));
  // SIGTERM stops the detached daemon as it would one in the foreground.
  ASSERT_EQ(::kill(std::stoi(pid), SIGTERM), 0);
  EXPECT_TRUE(testing::WaitFor([&] { return !testing::IsMounted(mp); },
                               absl::Seconds(10)));
}

TEST_F(FuseTest, ReadsGoOnWhenAWorkerIsKilled) {
  auto fuse = Mount();
  ASSERT_NE(fuse, nullptr);
  const std::string ds = fuse->mountpoint() + "/datasets/ds/";
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0}, rounds{0};
  std::thread reader([&] {
    while (!stop) {
      for (const auto& [path, data] : files_) {
        auto got = ReadAll(ds + path);
        if (!got.ok() || *got != data) {
          ADD_FAILURE() << path << ": "
                        << (got.ok() ? "wrong bytes" : got.status().ToString());
          ++bad;
        }
      }
      ++rounds;
    }
  });
  ASSERT_TRUE(testing::WaitFor([&] { return rounds >= 1; }, absl::Seconds(30)));
  workers_[0]->Kill(SIGKILL);
  const int at_kill = rounds;
  EXPECT_TRUE(testing::WaitFor([&] { return rounds >= at_kill + 3; },
                               absl::Seconds(60)));
  stop = true;
  reader.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST_F(FuseTest, AzureAndHdfsMountsReadEndToEnd) {
  // The same files in an azurite container and on the WebHDFS stand-in,
  // mounted next to the S3 one and read through FUSE.
  auto azurite = testing::Azurite::Start();
  ASSERT_TRUE(azurite.ok()) << azurite.status();
  UnderStoreOptions ao;
  ao.azure_credentials = AzureCredentials{testing::Azurite::kKey, ""};
  auto az = OpenUnderStore((*azurite)->Uri("fuse", "ds"), ao);
  ASSERT_TRUE(az.ok()) << az.status();
  auto* az_store = static_cast<AzureStore*>(az->get());
  ASSERT_TRUE(az_store->CreateContainer().ok());
  auto hdfs = testing::WebHdfs::Start();
  ASSERT_TRUE(hdfs.ok()) << hdfs.status();
  for (const auto& [path, data] : files_) {
    ASSERT_TRUE(az_store->Put(path, data).ok()) << path;
    ASSERT_TRUE((*hdfs)->Put("user/larder/ds/" + path, data).ok()) << path;
  }
  Shell r =
      Larder(absl::StrCat("mount /datasets/az '", (*azurite)->Uri("fuse", "ds"),
                          "' --mount_block_size=1MiB"));
  ASSERT_EQ(r.code, 0) << r.out;
  r = Larder(absl::StrCat("mount /datasets/hdfs '",
                          (*hdfs)->Uri("user/larder/ds"),
                          "' --mount_block_size=1MiB"));
  ASSERT_EQ(r.code, 0) << r.out;
  auto fuse = Mount();
  ASSERT_NE(fuse, nullptr);
  const double misses_before = WorkerSum("larder_worker_misses_total");
  Shell here = Sh(absl::StrCat("cd ", src_.path(),
                               " && find . -type f | sort | xargs md5sum"));
  for (const char* mount : {"az", "hdfs"}) {
    const std::string root =
        absl::StrCat(fuse->mountpoint(), "/datasets/", mount);
    Shell there = Sh(
        absl::StrCat("cd ", root, " && find . -type f | sort | xargs md5sum"));
    EXPECT_EQ(there.code, 0) << mount << ": " << there.out;
    EXPECT_EQ(there.out, here.out) << mount;
    for (const auto& [path, data] : files_) {
      EXPECT_EQ(ReadAll(root + "/" + path).value_or("<error>"), data)
          << mount << "/" << path;
    }
  }
  // The bytes came through the workers' caches.
  EXPECT_GT(WorkerSum("larder_worker_misses_total"), misses_before);
}

TEST_F(FuseTest, PyTorchDataLoaderTwoEpochs) {
  // 2,000 image-like files in 10 class folders; each starts with its index so
  // the loader can check every sample's bytes.
  std::vector<std::thread> threads;
  std::atomic<int> failed{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < 2000; i += 8) {
        std::string body = absl::StrCat("sample ", i, "\n");
        body += PatternBytes(1000 + (i * 7919) % 15000, 1000 + i);
        if (!store_
                 ->Put(absl::StrCat("images/class", i % 10, "/", i, ".jpg"),
                       body)
                 .ok())
          ++failed;
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE(store_->Put("images/README", "2,000 samples").ok());  // s3rver.
  ASSERT_EQ(failed.load(), 0);
  // No kernel page cache across opens: the second epoch must be served by
  // the daemon, from the workers' caches.
  auto fuse = Mount({"--keep_cache=false"});
  ASSERT_NE(fuse, nullptr);
  std::vector<std::string> metrics;
  for (auto& w : workers_)
    metrics.push_back(absl::StrCat("http://127.0.0.1:", w->metrics_port()));
  Shell r =
      Sh(absl::StrCat("/usr/bin/python3 ", testing::SourceDir(),
                      "/tests/fuse_dataloader_test.py ", fuse->mountpoint(),
                      "/datasets/ds/images 2000 ", absl::StrJoin(metrics, ","),
                      " http://127.0.0.1:", fuse->metrics_port()));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("epoch 2: 2000 samples verified"));
  EXPECT_THAT(r.out, HasSubstr("epoch 2 misses: 0"));
}

}  // namespace
}  // namespace larder
