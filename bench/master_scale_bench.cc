// Copyright 2026 The Larder Authors.
//
// The master under many workers and blocks (issue 22, first cut): a real
// `larder master` process driven by simulated workers over gRPC from this
// process. For each W x B of --sweep: W workers register B random block keys
// each, all at once (as after a failover), while a client calls Locate
// (batches of 64 keys) without pause; then the workers heartbeat at 1 Hz with
// --changes adds and removes each. Prints the master's RSS per block replica,
// the re-registration time, Locate latency percentiles during it, and the
// master's CPU per heartbeat second.
//
//   build/bench/master_scale_bench --sweep=100x1000,1000x1000,10x100000
#include <grpcpp/create_channel.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/bench_util.h"
#include "proto/master.grpc.pb.h"
#include "tests/testing/worker_process.h"

ABSL_FLAG(std::string, sweep, "100x1000,1000x1000,10x100000",
          "WORKERSxBLOCKS configurations, comma-separated.");
ABSL_FLAG(int, changes, 100, "Block adds and removes per heartbeat.");
ABSL_FLAG(int, heartbeat_seconds, 5, "Seconds of 1 Hz heartbeats measured.");
ABSL_FLAG(int, register_threads, 32, "Registrations in flight at once.");

namespace larder::bench {
namespace {

double RssBytes(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      double kb = 0;
      std::sscanf(line.c_str(), "VmRSS: %lf", &kb);
      return kb * 1024;
    }
  }
  return 0;
}

std::string RandomKey(std::mt19937_64& rng) {
  std::string k(16, '\0');
  const uint64_t a = rng(), b = rng();
  std::memcpy(k.data(), &a, 8);
  std::memcpy(k.data() + 8, &b, 8);
  return k;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

struct Row {
  int workers = 0;
  int blocks = 0;
  double register_s = 0;
  double rss_per_replica = 0;
  double locate_p50_ms = 0, locate_p99_ms = 0;
  size_t locates = 0;
  double heartbeat_cores = 0;
  std::string error;
};

Row RunOne(int workers, int blocks) {
  Row row{workers, blocks};
  auto master = testing::MasterProcess::Start(
      {"--heartbeat_timeout=10m", "--master_metrics_listen="});
  if (!master.ok()) {
    row.error = std::string(master.status().message());
    return row;
  }
  const pid_t pid = (*master)->pid();
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  auto channel = grpc::CreateCustomChannel(
      (*master)->address(), grpc::InsecureChannelCredentials(), args);
  auto stub = v1::Master::NewStub(channel);
  absl::SleepFor(absl::Milliseconds(300));
  const double rss_before = RssBytes(pid);

  // The block lists, built before the clock starts.
  std::vector<v1::RegisterWorkerRequest> requests(workers);
  std::vector<std::string> sample_keys;
  std::mt19937_64 rng(42);
  for (int w = 0; w < workers; ++w) {
    auto* info = requests[w].mutable_worker();
    info->set_id(absl::StrCat("sim-", w));
    info->set_address(absl::StrCat("127.0.0.1:", 20000 + w % 40000));
    info->set_node(absl::StrCat("node-", w));
    info->set_capacity_bytes(64ull << 30);
    for (int b = 0; b < blocks; ++b) {
      std::string k = RandomKey(rng);
      if (sample_keys.size() < 4096) sample_keys.push_back(k);
      requests[w].add_cached_blocks(std::move(k));
    }
  }

  // A client calling Locate all through the registrations.
  std::atomic<bool> done{false};
  std::vector<double> latencies_ms;
  std::thread client([&] {
    size_t i = 0;
    while (!done) {
      v1::LocateRequest req;
      for (int k = 0; k < 64; ++k)
        req.add_block_keys(sample_keys[(i++) % sample_keys.size()]);
      v1::LocateResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(30));
      const absl::Time t0 = absl::Now();
      grpc::Status st = stub->Locate(&ctx, req, &resp);
      if (st.ok())
        latencies_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
    }
  });

  const absl::Time start = absl::Now();
  std::atomic<int> next{0};
  std::atomic<int> failed{0};
  std::string first_error;
  absl::Mutex mu;
  std::vector<std::thread> pool;
  for (int t = 0; t < absl::GetFlag(FLAGS_register_threads); ++t) {
    pool.emplace_back([&] {
      for (int w = next++; w < workers; w = next++) {
        v1::RegisterWorkerResponse resp;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(300));
        grpc::Status st = stub->RegisterWorker(&ctx, requests[w], &resp);
        if (!st.ok()) {
          ++failed;
          absl::MutexLock l(&mu);
          if (first_error.empty())
            first_error =
                absl::StrCat(st.error_code(), ": ", st.error_message());
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  row.register_s = absl::ToDoubleSeconds(absl::Now() - start);
  done = true;
  client.join();
  if (failed > 0) {
    row.error =
        absl::StrCat(failed.load(), " registrations failed: ", first_error);
  }
  row.locates = latencies_ms.size();
  row.locate_p50_ms = Percentile(latencies_ms, 0.5);
  row.locate_p99_ms = Percentile(latencies_ms, 0.99);
  absl::SleepFor(absl::Milliseconds(500));
  const double replicas = static_cast<double>(workers) * blocks;
  row.rss_per_replica = (RssBytes(pid) - rss_before) / replicas;
  requests.clear();

  // Heartbeats: every worker once a second with `changes` adds and removes.
  const int changes = absl::GetFlag(FLAGS_changes);
  const int seconds = absl::GetFlag(FLAGS_heartbeat_seconds);
  std::vector<std::vector<std::string>> added(workers);
  const double cpu0 = ProcessCpuSeconds(pid);
  const absl::Time hb_start = absl::Now();
  for (int s = 0; s < seconds; ++s) {
    const absl::Time tick = absl::Now();
    next = 0;
    pool.clear();
    for (int t = 0; t < absl::GetFlag(FLAGS_register_threads); ++t) {
      pool.emplace_back([&, s] {
        std::mt19937_64 r(1000 + s * 100000 + next.load());
        for (int w = next++; w < workers; w = next++) {
          v1::HeartbeatRequest req;
          req.set_worker_id(absl::StrCat("sim-", w));
          std::vector<std::string> now;
          for (int c = 0; c < changes; ++c) {
            now.push_back(RandomKey(r));
            req.add_added_blocks(now.back());
          }
          for (const std::string& k : added[w]) req.add_removed_blocks(k);
          added[w] = std::move(now);
          v1::HeartbeatResponse resp;
          grpc::ClientContext ctx;
          ctx.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::seconds(30));
          (void)stub->Heartbeat(&ctx, req, &resp);
        }
      });
    }
    for (auto& t : pool) t.join();
    absl::SleepFor(absl::Seconds(1) - (absl::Now() - tick));
  }
  row.heartbeat_cores = (ProcessCpuSeconds(pid) - cpu0) /
                        absl::ToDoubleSeconds(absl::Now() - hb_start);
  return row;
}

}  // namespace
}  // namespace larder::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  using larder::bench::Row;
  std::vector<Row> rows;
  for (absl::string_view c :
       absl::StrSplit(absl::GetFlag(FLAGS_sweep), ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> wb = absl::StrSplit(c, 'x');
    int w = 0, b = 0;
    if (!absl::SimpleAtoi(wb.first, &w) || !absl::SimpleAtoi(wb.second, &b)) {
      std::fprintf(stderr, "bad --sweep entry '%s' (want WxB)\n",
                   std::string(c).c_str());
      return 2;
    }
    rows.push_back(larder::bench::RunOne(w, b));
    std::fprintf(stderr, "done %dx%d\n", w, b);
  }
  std::printf("%8s %10s %12s %12s %10s %12s %12s %10s %14s\n", "WORKERS",
              "BLOCKS", "REPLICAS", "REGISTER s", "B/REPLICA", "LOCATE p50",
              "LOCATE p99", "LOCATES", "HB CPU cores");
  for (const Row& r : rows) {
    std::printf(
        "%8d %10d %12lld %12.2f %10.1f %10.2fms %10.2fms %10zu %14.3f%s\n",
        r.workers, r.blocks, static_cast<long long>(r.workers) * r.blocks,
        r.register_s, r.rss_per_replica, r.locate_p50_ms, r.locate_p99_ms,
        r.locates, r.heartbeat_cores,
        r.error.empty() ? "" : ("  ERROR " + r.error).c_str());
  }
  return 0;
}
