// Copyright 2026 The Larder Authors.
//
// Ranged-read throughput of the under-store backends: 4 MiB ranges of one
// large object, read by 1 and by 8 parallel readers, from a real s3rver over
// loopback and from a local directory (page-cached; the local ceiling).
// Prints a table of medians over several rounds.
//
//   build/bench/understore_read_bench [--object_mib=256] [--range_mib=4]
//   [--rounds=5]
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/bench_util.h"
#include "common/log.h"
#include "tests/testing/process.h"
#include "tests/testing/s3rver.h"
#include "understore/factory.h"
#include "understore/s3_store.h"

ABSL_FLAG(int, object_mib, 256, "Size of the object read, MiB.");
ABSL_FLAG(int, range_mib, 4, "Size of each ranged read, MiB.");
ABSL_FLAG(int, rounds, 5,
          "Rounds per configuration; the table shows the median.");

namespace larder {
namespace {

struct Result {
  double mb_per_s;
  double p50_ms;
};

// Reads the whole object once in `range`-byte ranges spread over `threads`
// readers; returns MB/s and the median latency of one range.
Result ReadAll(UnderStore& store, const ObjectInfo& info, size_t range,
               int threads) {
  const size_t ranges = (info.size + range - 1) / range;
  std::atomic<size_t> next{0};
  std::vector<std::vector<double>> lat(threads);
  std::atomic<bool> failed{false};
  const absl::Time start = absl::Now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<char> buf(range);
      for (size_t i = next++; i < ranges; i = next++) {
        const absl::Time s = absl::Now();
        auto n = store.ReadRange(info.path, i * range, absl::MakeSpan(buf),
                                 info.version);
        if (!n.ok()) {
          std::fprintf(stderr, "read failed: %s\n",
                       n.status().ToString().c_str());
          failed = true;
          return;
        }
        lat[t].push_back(absl::ToDoubleMilliseconds(absl::Now() - s));
      }
    });
  }
  for (auto& t : pool) t.join();
  const double secs = absl::ToDoubleSeconds(absl::Now() - start);
  if (failed) std::exit(1);
  std::vector<double> all;
  for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  return {info.size / secs / 1e6, all[all.size() / 2]};
}

using bench::Median;

int Run() {
  SetMinLogLevel(LogLevel::kWarning);
  const size_t object = static_cast<size_t>(absl::GetFlag(FLAGS_object_mib))
                        << 20;
  const size_t range = static_cast<size_t>(absl::GetFlag(FLAGS_range_mib))
                       << 20;
  const int rounds = std::max(1, absl::GetFlag(FLAGS_rounds));

  std::string data(object, '\0');
  for (size_t i = 0; i < object; i += 8) {
    uint64_t v = i * 0x9E3779B97F4A7C15ULL;
    std::memcpy(&data[i], &v, std::min<size_t>(8, object - i));
  }

  testing::TempDir dir;
  if (!testing::WriteFile(dir.path() + "/object.bin", data).ok()) return 1;
  auto file_store = OpenUnderStore("file://" + dir.path());
  auto server = testing::S3rver::Start("bench");
  if (!file_store.ok() || !server.ok()) {
    std::fprintf(stderr, "setup failed: %s %s\n",
                 file_store.status().ToString().c_str(),
                 server.status().ToString().c_str());
    return 1;
  }
  UnderStoreOptions o;
  o.aws_credentials = testing::S3rver::Credentials();
  auto s3 = OpenUnderStore((*server)->Uri(), o);
  if (!s3.ok() ||
      !static_cast<S3Store*>(s3->get())->Put("object.bin", data).ok()) {
    std::fprintf(stderr, "s3 upload failed\n");
    return 1;
  }
  data.clear();
  data.shrink_to_fit();

  std::printf(
      "Ranged reads of a %zu MiB object in %zu MiB ranges; median of %d "
      "rounds.\n",
      object >> 20, range >> 20, rounds);
  std::printf("%-34s %8s %12s %14s\n", "backend", "readers", "MB/s",
              "p50 range ms");
  for (auto* entry : {&*file_store, &*s3}) {
    UnderStore& store = **entry;
    auto info = store.Stat("object.bin");
    if (!info.ok()) return 1;
    for (int threads : {1, 8}) {
      ReadAll(store, *info, range,
              threads);  // Warm-up (connections, page cache).
      std::vector<double> mbps, p50;
      for (int r = 0; r < rounds; ++r) {
        Result res = ReadAll(store, *info, range, threads);
        mbps.push_back(res.mb_per_s);
        p50.push_back(res.p50_ms);
      }
      std::string name = store.scheme() == "s3"
                             ? "s3:// (s3rver 3.7.1, loopback)"
                             : "file:// (page cache)";
      std::printf("%-34s %8d %12.0f %14.1f\n", name.c_str(), threads,
                  Median(mbps), Median(p50));
    }
  }
  return 0;
}

}  // namespace
}  // namespace larder

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return larder::Run();
}
