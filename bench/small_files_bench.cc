// Copyright 2026 The Larder Authors.
//
// The small-file path: many files of about 100 KiB (the commonest training
// data: JPEGs, audio clips, token shards) read whole by parallel readers
// through a Larder FUSE mount, next to the same files on the local disk and
// in the page cache, in one run.
//
//   build/bench/small_files_bench [--files=5000] [--dirs=5] [--file_kib=100]
//                                 [--readers=8] [--rounds=5] [--python_readers]
//                                 [--metadata_ttl=60s] [--fuse_flags=...]
//
// A real master, one worker and `larder fuse` on loopback over a `file://`
// mount of a local directory. Before the rounds the data is loaded into the
// worker's RAM (`larder load`) and read once through the mount. Each round
// then reads every file once, in a shuffled order, with --readers threads
// (open, read to the end, close) or, with --python_readers, --readers Python
// processes as a DataLoader's workers (bench/scripts/read_files.py), in this
// order:
//
//   larder      after drop_caches: the kernel holds no page, dentry or inode
//               of the mount, so every file costs a lookup, an open and its
//               reads in the daemon; the worker serves the bytes from RAM.
//   local disk  the same files in the source directory after drop_caches.
//   page cache  the same files again, now in the page cache: the ceiling.
//
// The table shows the median files/s over the rounds, the median of the
// per-round ratios to the page cache, and CPU per file of the master, the
// FUSE daemon and the worker during the Larder passes (from /proc, summed
// over every round) and of the readers themselves (this process), with the
// master's Stat and List RPCs and the FUSE requests per pass (from /metrics),
// and what each pass adds to memory (/proc/meminfo: the page cache of files,
// Cached - Shmem, and Shmem): with passthrough a Larder pass reads the worker's
// memfds and adds no page cache; the local disk's adds the data set.
// Needs root (FUSE, drop_caches).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "tests/testing/process.h"
#include "tests/testing/worker_process.h"

ABSL_FLAG(int, files, 5000, "Number of files.");
ABSL_FLAG(int, dirs, 5, "Directories the files are spread over.");
ABSL_FLAG(int, file_kib, 100, "Size of each file, KiB.");
ABSL_FLAG(int, readers, 8, "Parallel readers.");
ABSL_FLAG(int, rounds, 5, "Rounds; the table shows medians.");
ABSL_FLAG(std::string, metadata_ttl, "60s", "The mount's metadata TTL.");
ABSL_FLAG(bool, python_readers, false,
          "Read with --readers Python processes (bench/scripts/read_files.py, "
          "as a PyTorch DataLoader's workers read) instead of threads of "
          "this process.");
ABSL_FLAG(std::string, fuse_flags, "",
          "Extra flags for `larder fuse`, comma-separated.");

namespace larder {
namespace {

using bench::DropCaches;
using bench::FilesPerSecond;
using bench::Median;
using bench::ProcessCpuSeconds;

int Run() {
  const int files = absl::GetFlag(FLAGS_files);
  const int dirs = std::max(1, absl::GetFlag(FLAGS_dirs));
  const size_t size = static_cast<size_t>(absl::GetFlag(FLAGS_file_kib)) << 10;
  const int readers = absl::GetFlag(FLAGS_readers);
  const int rounds = std::max(1, absl::GetFlag(FLAGS_rounds));

  testing::TempDir src;
  std::vector<std::string> rel;
  for (int d = 0; d < dirs; ++d)
    ::mkdir(absl::StrCat(src.path(), "/d", d).c_str(), 0755);
  for (int i = 0; i < files; ++i) {
    rel.push_back(absl::StrCat("d", i % dirs, "/f", i, ".jpg"));
    if (!testing::WriteFile(absl::StrCat(src.path(), "/", rel.back()),
                            testing::PatternBytes(size, i))
             .ok()) {
      std::fprintf(stderr, "cannot write the data set\n");
      return 1;
    }
  }

  const std::string roots = absl::StrCat("--allowed_file_roots=", src.path());
  auto master = testing::MasterProcess::Start({roots});
  if (!master.ok()) {
    std::fprintf(stderr, "master: %s\n", master.status().ToString().c_str());
    return 1;
  }
  auto worker = testing::WorkerProcess::Start(
      {absl::StrCat("--master=", (*master)->address()), roots,
       absl::StrCat("--ram_capacity=",
                    std::max<uint64_t>(1, (files * size * 2) >> 30) + 1,
                    "GiB")});
  if (!worker.ok()) {
    std::fprintf(stderr, "worker: %s\n", worker.status().ToString().c_str());
    return 1;
  }
  auto larder = [&](const std::string& args) {
    return testing::Sh(absl::StrCat(LARDER_CLI_BINARY, " ", args,
                                    " --master=", (*master)->address()));
  };
  testing::Shell r = larder(
      absl::StrCat("mount /bench file://", src.path(),
                   " --metadata_ttl=", absl::GetFlag(FLAGS_metadata_ttl)));
  if (r.code != 0) {
    std::fprintf(stderr, "mount: %s\n", r.out.c_str());
    return 1;
  }
  testing::WaitFor(
      [&] { return larder("ring").out.find("1 worker") != std::string::npos; },
      absl::Seconds(20));
  r = larder("load /bench");
  if (r.code != 0) {
    std::fprintf(stderr, "load: %s\n", r.out.c_str());
    return 1;
  }
  std::vector<std::string> fuse_flags;
  for (absl::string_view f :
       absl::StrSplit(absl::GetFlag(FLAGS_fuse_flags), ',', absl::SkipEmpty()))
    fuse_flags.emplace_back(f);
  auto fuse = testing::FuseProcess::Start((*master)->address(), fuse_flags);
  if (!fuse.ok()) {
    std::fprintf(stderr, "fuse: %s\n", fuse.status().ToString().c_str());
    return 1;
  }

  std::vector<std::string> via_larder, via_disk;
  for (const std::string& p : rel) {
    via_larder.push_back(absl::StrCat((*fuse)->mountpoint(), "/bench/", p));
    via_disk.push_back(absl::StrCat(src.path(), "/", p));
  }
  std::mt19937_64 rng(42);
  auto shuffled = [&](std::vector<std::string> v) {
    std::shuffle(v.begin(), v.end(), rng);
    return v;
  };
  // One pass over `paths`: threads of this process, or Python processes.
  const bool python = absl::GetFlag(FLAGS_python_readers);
  testing::TempDir list_dir;
  auto read_pass = [&](const std::vector<std::string>& paths) -> double {
    if (!python) return FilesPerSecond(paths, readers, size);
    const std::string list = list_dir.path() + "/paths";
    std::string text;
    for (const std::string& p : paths) absl::StrAppend(&text, p, "\n");
    if (!testing::WriteFile(list, text).ok()) return 0;
    testing::Shell r = testing::Sh(absl::StrCat(
        "/usr/bin/python3 ", testing::SourceDir(),
        "/bench/scripts/read_files.py ", list, " ", readers, " ", size));
    double fps = 0;
    if (r.code != 0 || std::sscanf(r.out.c_str(), "files/s %lf", &fps) != 1) {
      std::fprintf(stderr, "python readers: %s\n", r.out.c_str());
      return 0;
    }
    return fps;
  };
  // Warm-up: every file once through the mount (and the worker's RAM).
  if (read_pass(via_larder) == 0) return 1;

  auto rpcs = [&](const char* method) {
    return (*master)
        ->Metric(
            absl::StrCat("larder_master_rpcs_total{method=\"", method, "\"}"))
        .value_or(-1);
  };
  // FUSE requests per file, by operation (the daemon's /metrics).
  const std::vector<std::string> ops = {
      "lookup", "getattr", "open", "read", "release", "readdir", "readdirplus"};
  auto fuse_ops = [&] {
    std::vector<double> v;
    for (const std::string& op : ops)
      v.push_back((*fuse)
                      ->Metric(absl::StrCat(
                          "larder_fuse_operations_total{op=\"", op, "\"}"))
                      .value_or(0));
    return v;
  };
  // Passthrough opens, and objects leased ahead by what became of them.
  const std::vector<std::string> ahead = {"leased", "used", "expired",
                                          "refused"};
  auto ahead_counts = [&] {
    std::vector<double> v;
    v.push_back(
        (*fuse)->Metric("larder_fuse_passthrough_opens_total").value_or(0));
    for (const std::string& r : ahead)
      v.push_back((*fuse)
                      ->Metric(absl::StrCat(
                          "larder_fuse_lease_ahead_total{result=\"", r, "\"}"))
                      .value_or(0));
    return v;
  };
  std::vector<double> ahead_total(ahead.size() + 1, 0);
  std::vector<double> op_counts(ops.size(), 0);
  std::vector<double> larder_fps, disk_fps, cache_fps, ratio, disk_ratio;
  double master_cpu = 0, fuse_cpu = 0, worker_cpu = 0, reader_cpu = 0;
  double stats = 0, lists = 0;
  std::vector<double> larder_cache, larder_shmem, disk_cache;
  for (int round = 0; round < rounds; ++round) {
    DropCaches();
    const bench::MemInfo mem0 = bench::ReadMemInfo();
    const double r0 = bench::UsageNow().cpu_s;
    const double m0 = ProcessCpuSeconds((*master)->pid()),
                 f0 = ProcessCpuSeconds((*fuse)->pid()),
                 w0 = ProcessCpuSeconds((*worker)->pid());
    const double s0 = rpcs("Stat"), l0 = rpcs("List");
    const std::vector<double> ops0 = fuse_ops();
    const std::vector<double> ahead0 = ahead_counts();
    larder_fps.push_back(read_pass(shuffled(via_larder)));
    const bench::MemInfo mem1 = bench::ReadMemInfo();
    larder_cache.push_back(mem1.file_cache_mib() - mem0.file_cache_mib());
    larder_shmem.push_back(mem1.shmem_mib - mem0.shmem_mib);
    reader_cpu += bench::UsageNow().cpu_s - r0;
    master_cpu += ProcessCpuSeconds((*master)->pid()) - m0;
    fuse_cpu += ProcessCpuSeconds((*fuse)->pid()) - f0;
    worker_cpu += ProcessCpuSeconds((*worker)->pid()) - w0;
    const std::vector<double> ops1 = fuse_ops();
    for (size_t i = 0; i < ops.size(); ++i) op_counts[i] += ops1[i] - ops0[i];
    const std::vector<double> ahead1 = ahead_counts();
    for (size_t i = 0; i < ahead1.size(); ++i)
      ahead_total[i] += ahead1[i] - ahead0[i];
    stats += rpcs("Stat") - s0;
    lists += rpcs("List") - l0;
    DropCaches();
    const bench::MemInfo mem2 = bench::ReadMemInfo();
    disk_fps.push_back(read_pass(shuffled(via_disk)));
    disk_cache.push_back(bench::ReadMemInfo().file_cache_mib() -
                         mem2.file_cache_mib());
    cache_fps.push_back(read_pass(shuffled(via_disk)));
    ratio.push_back(larder_fps.back() / cache_fps.back());
    disk_ratio.push_back(larder_fps.back() / disk_fps.back());
    std::fprintf(
        stderr, "round %d: larder %.0f, disk %.0f, page cache %.0f files/s\n",
        round + 1, larder_fps.back(), disk_fps.back(), cache_fps.back());
  }

  const double total = static_cast<double>(files) * rounds;
  std::printf(
      "\nsmall files: %d x %d KiB in %d directories, %d %s, %d rounds "
      "(medians); Larder warm (worker RAM), page cache dropped before its "
      "pass\n\n",
      files, absl::GetFlag(FLAGS_file_kib), dirs, readers,
      python ? "Python reader processes" : "reader threads", rounds);
  std::printf("%-12s %10s %12s %12s\n", "source", "files/s", "vs page cache",
              "vs disk");
  std::printf("%-12s %10.0f %12.1f%% %11.2fx\n", "larder", Median(larder_fps),
              100 * Median(ratio), Median(disk_ratio));
  std::printf("%-12s %10.0f %12.1f%% %12s\n", "local disk", Median(disk_fps),
              100 * Median(disk_fps) / Median(cache_fps), "1.00x");
  std::printf("%-12s %10.0f %12s %12s\n", "page cache", Median(cache_fps),
              "100.0%", "");
  std::printf(
      "\nper file opened through Larder (all rounds): master %.1f us CPU, "
      "FUSE daemon %.1f us, worker %.1f us; per pass: %.0f Stat and %.0f "
      "List RPCs to the master\n",
      1e6 * master_cpu / total, 1e6 * fuse_cpu / total,
      1e6 * worker_cpu / total, stats / rounds, lists / rounds);
  std::printf(
      "readers (this process and its children: their system calls and the "
      "kernel's FUSE side) %.1f us CPU per file\n",
      1e6 * reader_cpu / total);
  std::printf(
      "memory a pass adds (medians, /proc/meminfo): Larder: page cache of "
      "files %+.0f MiB, Shmem %+.0f MiB; local disk: page cache %+.0f MiB; the "
      "data set is %.0f MiB\n",
      Median(larder_cache), Median(larder_shmem), Median(disk_cache),
      static_cast<double>(files) * size / (1 << 20));
  std::printf("FUSE requests per file:");
  for (size_t i = 0; i < ops.size(); ++i) {
    if (op_counts[i] > 0)
      std::printf(" %s %.2f", ops[i].c_str(), op_counts[i] / total);
  }
  std::printf("\n");
  std::printf("per file: passthrough opens %.2f; objects leased ahead:",
              ahead_total[0] / total);
  for (size_t i = 0; i < ahead.size(); ++i)
    std::printf(" %s %.2f", ahead[i].c_str(), ahead_total[i + 1] / total);
  std::printf(" (the daemon's /metrics, during the Larder passes)\n");
  return 0;
}

}  // namespace
}  // namespace larder

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return larder::Run();
}
