// Copyright 2026 The Larder Authors.
//
// Reads through a Larder FUSE mount next to the machine's page-cache ceiling
// and next to s3fs (Debian's, with `use_cache`) over the same s3rver data, in
// one run:
//
//   - one shard (1 GiB by default) read sequentially with 4 MiB reads;
//   - 2,000 files of 100 KiB read whole by 8 parallel readers.
//
// "cold" is the first read of the data through each mount (Larder's workers
// and s3fs's cache empty: both fetch from s3rver); each cold round reads a
// data set of its own (set0/, set1/, ...), the two mounts in alternating
// order, after drop_caches. "warm" is a later read
// after `echo 3 > /proc/sys/vm/drop_caches`, so the kernel page cache serves
// nothing: Larder serves from its workers' RAM, s3fs from its local cache
// files. Warm rounds are interleaved (ceiling, Larder, s3fs) and the table
// shows medians; ratios are medians of per-round ratios.
//
//   build/bench/fuse_read_bench [--shard_mib=1024] [--files=2000]
//                               [--file_kib=100] [--rounds=5]
//                               [--cold_rounds=3]
//
// Needs root (FUSE mounts, drop_caches), s3fs and s3rver
// (scripts/install-deps.sh).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/bench_util.h"
#include "tests/testing/process.h"
#include "tests/testing/s3rver.h"
#include "tests/testing/worker_process.h"

ABSL_FLAG(int, shard_mib, 1024, "Size of the sequentially read shard, MiB.");
ABSL_FLAG(int, files, 2000, "Number of small files.");
ABSL_FLAG(int, file_kib, 100, "Size of each small file, KiB.");
ABSL_FLAG(int, readers, 8, "Parallel readers of the small files.");
ABSL_FLAG(int, rounds, 5, "Warm rounds; the table shows medians.");
ABSL_FLAG(int, cold_rounds, 3,
          "Cold rounds, each over a data set of its own that neither mount "
          "has seen; the table shows medians.");

namespace larder {
namespace {

constexpr size_t kReadSize = 4 << 20;

using bench::DropCaches;
using bench::FilesPerSecond;
using bench::Median;

// Reads `path` sequentially with 4 MiB reads into an aligned buffer; GB/s.
double SequentialGbps(const std::string& path, uint64_t expect) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    std::fprintf(stderr, "cannot open %s\n", path.c_str());
    return 0;
  }
  std::unique_ptr<char, decltype(&std::free)> buf(
      static_cast<char*>(std::aligned_alloc(4096, kReadSize)), &std::free);
  uint64_t total = 0;
  const absl::Time start = absl::Now();
  ssize_t n;
  while ((n = ::read(fd, buf.get(), kReadSize)) > 0) total += n;
  const double secs = absl::ToDoubleSeconds(absl::Now() - start);
  ::close(fd);
  if (total != expect) {
    std::fprintf(stderr, "%s: read %lu of %lu bytes\n", path.c_str(),
                 static_cast<unsigned long>(total),
                 static_cast<unsigned long>(expect));
    return 0;
  }
  return total / secs / 1e9;
}

int Run() {
  const uint64_t shard_bytes =
      static_cast<uint64_t>(absl::GetFlag(FLAGS_shard_mib)) << 20;
  const int nfiles = absl::GetFlag(FLAGS_files);
  const size_t file_size = static_cast<size_t>(absl::GetFlag(FLAGS_file_kib))
                           << 10;
  const int readers = absl::GetFlag(FLAGS_readers);
  const int rounds = absl::GetFlag(FLAGS_rounds);
  ::setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "S3RVER", 1);

  std::fprintf(stderr, "starting s3rver and writing the data set...\n");
  auto s3 = testing::S3rver::Start("bench");
  if (!s3.ok()) {
    std::fprintf(stderr, "%s\n", s3.status().ToString().c_str());
    return 1;
  }
  auto store = (*s3)->OpenStore("ds");
  if (!store.ok()) return 1;
  const int cold_rounds = std::max(1, absl::GetFlag(FLAGS_cold_rounds));
  testing::TempDir local;
  const std::string local_shard = local.path() + "/shard-000.bin";
  for (int set = 0; set < cold_rounds; ++set) {
    const std::string prefix = absl::StrCat("set", set, "/");
    {
      const std::string shard_data =
          testing::PatternBytes(shard_bytes, 7 + set);
      if (!(*store)->Put(prefix + "shard-000.bin", shard_data).ok()) return 1;
      if (set == 0 && !testing::WriteFile(local_shard, shard_data).ok())
        return 1;
    }
    std::vector<std::thread> writers;
    std::atomic<bool> failed{false};
    for (int t = 0; t < 8; ++t) {
      writers.emplace_back([&, t] {
        for (int i = t; i < nfiles; i += 8) {
          if (!(*store)
                   ->Put(absl::StrCat(prefix, "small/f", i),
                         testing::PatternBytes(file_size, 100 + i + set))
                   .ok())
            failed = true;
        }
      });
    }
    for (auto& w : writers) w.join();
    if (failed) return 1;
  }

  // Larder: a master and one worker on this node (short-circuit), 4 GiB RAM.
  const std::vector<std::string> env = {"AWS_ACCESS_KEY_ID=S3RVER",
                                        "AWS_SECRET_ACCESS_KEY=S3RVER"};
  auto master = testing::MasterProcess::Start({}, env);
  if (!master.ok()) return 1;
  auto worker = testing::WorkerProcess::Start(
      {absl::StrCat("--master=", (*master)->address()), "--ram_capacity=4GiB",
       "--log_level=warning"},
      env);
  if (!worker.ok()) return 1;
  auto r = testing::RunCommand(
      {LARDER_CLI_BINARY, "mount", "/datasets/ds", (*s3)->Uri("ds"),
       absl::StrCat("--master=", (*master)->address())});
  if (!r.ok()) {
    std::fprintf(stderr, "mount: %s\n", r.status().ToString().c_str());
    return 1;
  }
  testing::WaitFor(
      [&] {
        auto out = testing::RunCommand(
            {LARDER_CLI_BINARY, "ring",
             absl::StrCat("--master=", (*master)->address())});
        return out.ok() && out->find("1 workers") != std::string::npos;
      },
      absl::Seconds(20));
  auto fuse = testing::FuseProcess::Start((*master)->address(),
                                          {"--log_level=warning"});
  if (!fuse.ok()) {
    std::fprintf(stderr, "%s\n", fuse.status().ToString().c_str());
    return 1;
  }
  const std::string larder_root = (*fuse)->mountpoint() + "/datasets/ds";

  // s3fs over the same bucket, with its local disk cache.
  testing::TempDir s3fs_dir;
  const std::string s3fs_mnt = s3fs_dir.path() + "/mnt";
  const std::string s3fs_cache = s3fs_dir.path() + "/cache";
  const std::string passwd = s3fs_dir.path() + "/passwd";
  ::mkdir(s3fs_mnt.c_str(), 0755);
  ::mkdir(s3fs_cache.c_str(), 0755);
  testing::WriteFile(passwd, "S3RVER:S3RVER").IgnoreError();
  ::chmod(passwd.c_str(), 0600);
  testing::Subprocess s3fs;
  if (!s3fs.Start({"/usr/bin/s3fs", "bench", s3fs_mnt, "-f", "-o",
                   absl::StrCat("url=", (*s3)->endpoint(),
                                ",use_path_request_style,passwd_file=", passwd,
                                ",use_cache=", s3fs_cache,
                                ",parallel_count=8,multireq_max=8")},
                  s3fs_dir.path() + "/s3fs.log")
           .ok() ||
      !testing::WaitFor([&] { return testing::IsMounted(s3fs_mnt); },
                        absl::Seconds(20))) {
    std::fprintf(stderr, "s3fs did not mount\n");
    return 1;
  }
  const std::string s3fs_root = s3fs_mnt + "/ds";

  auto files_of = [&](const std::string& root, int set) {
    std::vector<std::string> paths;
    for (int i = 0; i < nfiles; ++i)
      paths.push_back(absl::StrCat(root, "/set", set, "/small/f", i));
    return paths;
  };
  auto shard_of = [](const std::string& root, int set) {
    return absl::StrCat(root, "/set", set, "/shard-000.bin");
  };

  // Cold: the first read of each data set through each mount.
  std::vector<double> larder_cold_seq, s3fs_cold_seq, larder_cold_files,
      s3fs_cold_files, r_cold_seq, r_cold_files;
  int larder_cold_requests = 0, s3fs_cold_requests = 0;
  for (int set = 0; set < cold_rounds; ++set) {
    std::fprintf(stderr, "cold round %d...\n", set + 1);
    double seq[2], files[2];
    int requests[2];
    const std::string roots[2] = {larder_root, s3fs_root};
    for (int k = 0; k < 2; ++k) {
      const int m = set % 2 == 0 ? k : 1 - k;  // Alternating order.
      DropCaches();
      seq[m] = SequentialGbps(shard_of(roots[m], set), shard_bytes);
      DropCaches();
      // s3rver logs one line per request, ending "<status> <N>ms <size>".
      const int before = (*s3)->CountRequests("ms ");
      files[m] = FilesPerSecond(files_of(roots[m], set), readers, file_size);
      requests[m] = (*s3)->CountRequests("ms ") - before;
    }
    larder_cold_seq.push_back(seq[0]);
    s3fs_cold_seq.push_back(seq[1]);
    larder_cold_files.push_back(files[0]);
    s3fs_cold_files.push_back(files[1]);
    r_cold_seq.push_back(seq[0] / seq[1]);
    r_cold_files.push_back(files[0] / files[1]);
    larder_cold_requests += requests[0];
    s3fs_cold_requests += requests[1];
  }
  const std::vector<std::string> larder_files = files_of(larder_root, 0),
                                 s3fs_files = files_of(s3fs_root, 0);

  // Warm rounds, interleaved.
  std::vector<double> dd, larder_seq, s3fs_seq, larder_files_s, s3fs_files_s;
  std::vector<double> r_ceiling, r_s3fs_seq, r_files;
  for (int round = 0; round < rounds; ++round) {
    std::fprintf(stderr, "warm round %d...\n", round + 1);
    SequentialGbps(local_shard, shard_bytes);  // Into the page cache.
    dd.push_back(SequentialGbps(local_shard, shard_bytes));
    DropCaches();
    larder_seq.push_back(SequentialGbps(shard_of(larder_root, 0), shard_bytes));
    DropCaches();
    s3fs_seq.push_back(SequentialGbps(shard_of(s3fs_root, 0), shard_bytes));
    DropCaches();
    larder_files_s.push_back(FilesPerSecond(larder_files, readers, file_size));
    DropCaches();
    s3fs_files_s.push_back(FilesPerSecond(s3fs_files, readers, file_size));
    r_ceiling.push_back(larder_seq.back() / dd.back());
    r_s3fs_seq.push_back(larder_seq.back() / s3fs_seq.back());
    r_files.push_back(larder_files_s.back() / s3fs_files_s.back());
    std::fprintf(stderr,
                 "  ceiling %.2f GB/s, larder %.2f GB/s %.0f files/s, s3fs "
                 "%.2f GB/s %.0f files/s\n",
                 dd.back(), larder_seq.back(), larder_files_s.back(),
                 s3fs_seq.back(), s3fs_files_s.back());
  }

  std::printf(
      "fuse_read_bench: shard %d MiB read with 4 MiB reads; %d files of "
      "%d KiB by %d readers; %d cold and %d warm rounds (medians)\n",
      absl::GetFlag(FLAGS_shard_mib), nfiles, absl::GetFlag(FLAGS_file_kib),
      readers, cold_rounds, rounds);
  std::printf("%-40s %12s %12s\n", "", "seq GB/s", "files/s");
  std::printf("%-40s %12.2f %12s\n", "page cache ceiling (4 MiB reads)",
              Median(dd), "-");
  std::printf("%-40s %12.3f %12.0f\n", "larder fuse, cold (first read)",
              Median(larder_cold_seq), Median(larder_cold_files));
  std::printf("%-40s %12.3f %12.0f\n", "s3fs use_cache, cold (first read)",
              Median(s3fs_cold_seq), Median(s3fs_cold_files));
  std::printf("%-40s %12.2f %12.0f\n", "larder fuse, warm (worker RAM)",
              Median(larder_seq), Median(larder_files_s));
  std::printf("%-40s %12.2f %12.0f\n", "s3fs use_cache, warm (local cache)",
              Median(s3fs_seq), Median(s3fs_files_s));
  std::printf("%-40s %12s %12.1f\n", "  s3rver requests per cold file, larder",
              "",
              static_cast<double>(larder_cold_requests) / nfiles / cold_rounds);
  std::printf("%-40s %12s %12.1f\n", "  s3rver requests per cold file, s3fs",
              "",
              static_cast<double>(s3fs_cold_requests) / nfiles / cold_rounds);
  // Blocks read again move into 2 MiB pages when the worker is quiet: the
  // first warm round reads 4 KiB pages, later ones mostly 2 MiB pages.
  std::printf(
      "  worker blocks moved into 2 MiB pages during the warm rounds: %.0f\n",
      (*worker)
          ->Metric("larder_worker_huge_page_collapses_total{result=\"ok\"}")
          .value_or(0));
  std::printf("\nratios:\n");
  std::printf(
      "  larder warm seq / page cache ceiling   = %6.0f%%  (target >= 40%%)\n",
      100 * Median(r_ceiling));
  std::printf(
      "  larder warm seq / s3fs warm seq        = %6.1fx   (target >= 3x)\n",
      Median(r_s3fs_seq));
  std::printf(
      "  larder warm files/s / s3fs warm        = %6.1fx   (target >= 3x)\n",
      Median(r_files));
  std::printf(
      "  larder cold seq / s3fs cold seq        = %6.2fx   (target >= 1x)\n",
      Median(r_cold_seq));
  std::printf(
      "  larder cold files/s / s3fs cold        = %6.2fx   (target >= 1x)\n",
      Median(r_cold_files));

  s3fs.Stop(15);
  testing::WaitFor([&] { return !testing::IsMounted(s3fs_mnt); },
                   absl::Seconds(5));
  testing::ForceUnmount(s3fs_mnt);
  return 0;
}

}  // namespace
}  // namespace larder

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return larder::Run();
}
