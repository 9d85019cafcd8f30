// Copyright 2026 The Larder Authors.
//
// The master under many workers and blocks: a real `larder master`
// process driven by simulated workers and clients over gRPC from this
// process. For each WxB of --sweep:
//
//   1. W workers register B random block keys each, all at once (as after a
//      failover), while clients call Locate (64 keys), Stat and List at
//      --client_rps in all; their latencies are taken from each call's
//      scheduled start, so a stalled master shows in full.
//   2. The workers heartbeat at 1 Hz for --heartbeat_seconds with --changes
//      adds and removes each: the master's CPU.
//   3. The clients call each RPC back to back for --rpc_seconds: the
//      master's CPU per RPC.
//   4. With --failover: the master restarts from its state directory (the
//      ring restored, its workers without blocks); each worker's next
//      heartbeat is answered "re-register" and all report again at once,
//      with the clients calling.
//
// Prints the master's memory per block replica (its RSS, right after the
// registrations and again after the heartbeats, and the index's own tables
// from larder_master_placement_index_bytes), and checks that the index holds
// W x B replicas.
//
//   build/bench/master_scale_bench --sweep=100x1000,1000x1000,10x1000000
//   build/bench/master_scale_bench --sweep=1000x1000,10x1000000 --failover
#include <grpcpp/create_channel.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/bench_util.h"
#include "common/block_proto.h"
#include "proto/master.grpc.pb.h"
#include "tests/testing/process.h"
#include "tests/testing/worker_process.h"

ABSL_FLAG(std::string, sweep, "100x1000,1000x1000,10x100000",
          "WORKERSxBLOCKS configurations, comma-separated.");
ABSL_FLAG(int, changes, 100, "Block adds and removes per heartbeat.");
ABSL_FLAG(int, heartbeat_seconds, 5, "Seconds of 1 Hz heartbeats measured.");
ABSL_FLAG(int, register_threads, 32, "Registrations in flight at once.");
ABSL_FLAG(int, report_keys, 16384,
          "Block keys per request of a report (a worker's "
          "MasterLink::Options::keys_per_request).");
ABSL_FLAG(double, client_rps, 300,
          "Client RPCs a second during the registrations, spread evenly over "
          "Locate, Stat and List.");
ABSL_FLAG(bool, failover, false,
          "Then restart the master from its state and time the workers' "
          "re-registration, as after a failover.");
ABSL_FLAG(double, rpc_seconds, 1,
          "Seconds of back-to-back calls per RPC "
          "kind for the master's CPU per RPC (0: skip).");

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

BlockKey RandomKey(std::mt19937_64& rng) {
  BlockKey k;
  k.low = rng();
  k.high = rng();
  return k;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

enum Kind { kLocate, kStat, kList, kKinds };
constexpr const char* kKindNames[kKinds] = {"Locate", "Stat", "List"};

// Clients calling Locate, Stat and List, one thread each, paced at `rps` in
// all (0: back to back), until Stop(). A block not found counts as an error
// only with `check_locate` (while reports arrive, blocks are missing).
class Clients {
 public:
  struct Result {
    double p50_ms[kKinds] = {}, p99_ms[kKinds] = {};
    size_t calls[kKinds] = {};
    size_t errors = 0;
    std::string first_error;
  };

  Clients(v1::Master::Stub* stub, const std::vector<std::string>* keys,
          double rps, int kinds_mask = 7, bool check_locate = false)
      : stub_(stub), keys_(keys), check_locate_(check_locate) {
    for (int k = 0; k < kKinds; ++k) {
      if ((kinds_mask & (1 << k)) == 0) continue;
      threads_.emplace_back([this, k, rps] { Run(static_cast<Kind>(k), rps); });
    }
  }

  Result Stop() {
    stop_ = true;
    for (auto& t : threads_) t.join();
    Result r;
    absl::MutexLock lock(&mu_);
    for (int k = 0; k < kKinds; ++k) {
      r.calls[k] = ms_[k].size();
      r.p50_ms[k] = Percentile(ms_[k], 0.5);
      r.p99_ms[k] = Percentile(ms_[k], 0.99);
    }
    r.errors = errors_;
    r.first_error = first_error_;
    return r;
  }

 private:
  grpc::Status Call(Kind kind, size_t i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(30));
    ctx.set_wait_for_ready(true);
    switch (kind) {
      case kLocate: {
        v1::LocateRequest req;
        for (int k = 0; k < 64; ++k)
          req.add_block_keys((*keys_)[(i * 64 + k) % keys_->size()]);
        v1::LocateResponse resp;
        grpc::Status st = stub_->Locate(&ctx, req, &resp);
        if (st.ok() && resp.locations(0).worker_ids_size() == 0)
          return grpc::Status(grpc::StatusCode::NOT_FOUND, "a block not found");
        return st;
      }
      case kStat: {
        v1::StatRequest req;
        req.set_path(absl::StrCat("/bench/d/f", i % 100));
        v1::StatResponse resp;
        return stub_->Stat(&ctx, req, &resp);
      }
      default: {
        v1::ListRequest req;
        req.set_path("/bench/d");
        v1::ListResponse resp;
        return stub_->List(&ctx, req, &resp);
      }
    }
  }

  void Run(Kind kind, double rps) {
    const absl::Duration interval =
        rps > 0 ? absl::Seconds(static_cast<double>(kKinds) / rps)
                : absl::ZeroDuration();
    const absl::Time start = absl::Now();
    std::vector<double> ms;
    for (size_t i = 0; !stop_; ++i) {
      absl::Time due = absl::Now();
      if (rps > 0) {
        due = start + interval * static_cast<double>(i);
        const absl::Time now = absl::Now();
        if (due > now) absl::SleepFor(due - now);
        if (stop_) break;
      }
      grpc::Status st = Call(kind, i);
      // The first call on a restarted master's old connection fails; Larder's
      // clients try again (the time counts).
      for (int retry = 0;
           retry < 3 && st.error_code() == grpc::StatusCode::UNAVAILABLE;
           ++retry)
        st = Call(kind, i);
      // Blocks are found once they are registered.
      if (!st.ok() &&
          !(st.error_code() == grpc::StatusCode::NOT_FOUND && !check_locate_)) {
        absl::MutexLock lock(&mu_);
        if (errors_++ == 0)
          first_error_ =
              absl::StrCat(kKindNames[kind], ": ", st.error_message());
        continue;
      }
      ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - due));
    }
    absl::MutexLock lock(&mu_);
    ms_[kind] = std::move(ms);
  }

 private:
  v1::Master::Stub* const stub_;
  const std::vector<std::string>* const keys_;
  const bool check_locate_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
  absl::Mutex mu_;
  std::vector<double> ms_[kKinds] ABSL_GUARDED_BY(mu_);
  size_t errors_ ABSL_GUARDED_BY(mu_) = 0;
  std::string first_error_ ABSL_GUARDED_BY(mu_);
};

struct Row {
  int workers = 0;
  int blocks = 0;
  double register_s = 0;
  double rss_registered = 0, rss_steady = 0, index_bytes = 0;  // Per replica.
  Clients::Result during;
  double heartbeat_cores = 0;
  double cpu_us[kKinds] = {};
  double restart_s = 0, failover_s = 0;
  Clients::Result after_failover;
  std::string error;
};

// A stub on a connection of its own, as every worker and client has: on a
// shared one, a client's call would queue behind the reports on the wire.
std::unique_ptr<v1::Master::Stub> NewStub(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // Reconnect as Larder's own channels do after a master restart.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return v1::Master::NewStub(grpc::CreateCustomChannel(
      address, grpc::InsecureChannelCredentials(), args));
}

// Runs `fn(stub, w)` for w in [0, n) on --register_threads threads, each
// with its own connection in `stubs`.
template <typename Fn>
void ForAllWorkers(int n,
                   const std::vector<std::unique_ptr<v1::Master::Stub>>& stubs,
                   Fn fn) {
  std::atomic<int> next{0};
  std::vector<std::thread> pool;
  for (const auto& stub : stubs) {
    pool.emplace_back([&, s = stub.get()] {
      for (int w = next++; w < n; w = next++) fn(*s, w);
    });
  }
  for (auto& t : pool) t.join();
}

Row RunOne(int workers, int blocks) {
  Row row{workers, blocks};
  testing::TempDir data;
  std::filesystem::create_directories(data.path() + "/d");
  for (int i = 0; i < 100; ++i)
    std::ofstream(absl::StrCat(data.path(), "/d/f", i)) << "sample " << i;
  auto master = testing::MasterProcess::Start(
      {"--heartbeat_timeout=10m",
       absl::StrCat("--allowed_file_roots=", data.path())});
  if (!master.ok()) {
    row.error = std::string(master.status().message());
    return row;
  }
  const pid_t pid = (*master)->pid();
  auto stub = NewStub((*master)->address());
  std::vector<std::unique_ptr<v1::Master::Stub>> worker_stubs;
  for (int t = 0; t < absl::GetFlag(FLAGS_register_threads); ++t)
    worker_stubs.push_back(NewStub((*master)->address()));
  {
    v1::AddMountRequest req;
    req.mutable_mount()->set_path("/bench");
    req.mutable_mount()->set_uri("file://" + data.path());
    v1::MountTable table;
    grpc::ClientContext ctx;
    grpc::Status st = stub->AddMount(&ctx, req, &table);
    if (!st.ok()) {
      row.error = "mount: " + st.error_message();
      return row;
    }
  }
  absl::SleepFor(absl::Milliseconds(300));
  const double rss_before = RssBytes(pid);

  // The block reports, built before the clock starts, in parts of
  // --report_keys as workers send them: the registration, then heartbeats.
  const size_t per = std::max(1, absl::GetFlag(FLAGS_report_keys));
  std::vector<v1::RegisterWorkerRequest> requests(workers);
  std::vector<std::vector<std::string>> rest(workers);
  std::vector<std::string> sample_keys;
  std::mt19937_64 rng(42);
  for (int w = 0; w < workers; ++w) {
    auto* info = requests[w].mutable_worker();
    info->set_id(absl::StrCat("sim-", w));
    info->set_address(absl::StrCat("127.0.0.1:", 20000 + w % 40000));
    info->set_node(absl::StrCat("node-", w));
    info->set_capacity_bytes(64ull << 30);
    std::vector<BlockKey> keys(blocks);
    for (BlockKey& k : keys) k = RandomKey(rng);
    for (int b = 0; b < blocks && sample_keys.size() < 4096; b += 7)
      sample_keys.push_back(KeyToBytes(keys[b]));
    const absl::Span<const BlockKey> all(keys);
    requests[w].set_cached_keys(
        KeysToBytes(all.first(std::min(per, all.size()))));
    for (size_t i = per; i < all.size(); i += per)
      rest[w].push_back(KeysToBytes(all.subspan(i, per)));
  }

  // Every worker sends its whole report (after a heartbeat that must be
  // answered "re-register", when `told` is set, as after a failover), all at
  // once, while clients call. Returns the seconds it took, or sets
  // row.error.
  std::atomic<int> failed{0};
  absl::Mutex mu;
  std::string first_error;
  auto reregister_all = [&](bool told, Clients::Result* during) {
    auto clients = std::make_unique<Clients>(stub.get(), &sample_keys,
                                             absl::GetFlag(FLAGS_client_rps));
    failed = 0;
    const absl::Time start = absl::Now();
    ForAllWorkers(workers, worker_stubs, [&](v1::Master::Stub& ws, int w) {
      auto heartbeat = [&](std::string added, bool expect_reregister) {
        v1::HeartbeatRequest req;
        req.set_worker_id(requests[w].worker().id());
        req.set_added_keys(std::move(added));
        v1::HeartbeatResponse hb;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(300));
        ctx.set_wait_for_ready(true);
        grpc::Status st = ws.Heartbeat(&ctx, req, &hb);
        if (st.ok() && hb.reregister() != expect_reregister) {
          st = grpc::Status(grpc::StatusCode::INTERNAL,
                            expect_reregister ? "not told to re-register"
                                              : "told to re-register");
        }
        return st;
      };
      grpc::Status st;
      // A call already on the restarted master's old connection fails
      // UNAVAILABLE; a worker tries again (at its next heartbeat; here after
      // 100 ms).
      for (int attempt = 0; attempt < 20; ++attempt) {
        if (attempt > 0) absl::SleepFor(absl::Milliseconds(100));
        st = grpc::Status::OK;
        if (told) st = heartbeat("", true);
        if (st.ok()) {
          v1::RegisterWorkerResponse resp;
          grpc::ClientContext ctx;
          ctx.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::seconds(300));
          ctx.set_wait_for_ready(true);
          st = ws.RegisterWorker(&ctx, requests[w], &resp);
        }
        for (size_t i = 0; st.ok() && i < rest[w].size(); ++i)
          st = heartbeat(rest[w][i], false);
        if (st.error_code() != grpc::StatusCode::UNAVAILABLE) break;
      }
      if (!st.ok() && failed++ == 0) {
        absl::MutexLock l(&mu);
        first_error = absl::StrCat(st.error_code(), ": ", st.error_message());
      }
    });
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    *during = clients->Stop();
    const char* phase = told ? "after the failover, " : "";
    if (failed > 0) {
      row.error = absl::StrCat(phase, failed.load(),
                               " registrations failed: ", first_error);
    } else if (during->errors > 0) {
      row.error = absl::StrCat(phase, during->errors,
                               " client RPCs failed: ", during->first_error);
    }
    return seconds;
  };

  // 1. Everyone registers at once, with clients calling meanwhile.
  row.register_s = reregister_all(false, &row.during);
  absl::SleepFor(absl::Milliseconds(500));
  const double replicas = static_cast<double>(workers) * blocks;
  row.rss_registered = (RssBytes(pid) - rss_before) / replicas;
  absl::StatusOr<double> held =
      (*master)->Metric("larder_master_block_replicas");
  if (!held.ok() || *held != replicas) {
    row.error =
        absl::StrCat("the index holds ", held.ok() ? absl::StrCat(*held) : "?",
                     " replicas, not ", replicas);
  }

  // 2. Heartbeats: every worker once a second with `changes` adds and
  // removes.
  const int changes = absl::GetFlag(FLAGS_changes);
  const int seconds = absl::GetFlag(FLAGS_heartbeat_seconds);
  std::vector<std::vector<BlockKey>> added(workers);
  const double cpu0 = ProcessCpuSeconds(pid);
  const absl::Time hb_start = absl::Now();
  for (int s = 0; s < seconds; ++s) {
    const absl::Time tick = absl::Now();
    ForAllWorkers(workers, worker_stubs, [&](v1::Master::Stub& ws, int w) {
      std::mt19937_64 r(1000 + s * 1000003ull + w);
      std::vector<BlockKey> now(changes);
      for (BlockKey& k : now) k = RandomKey(r);
      v1::HeartbeatRequest req;
      req.set_worker_id(absl::StrCat("sim-", w));
      req.set_added_keys(KeysToBytes(now));
      req.set_removed_keys(KeysToBytes(added[w]));
      added[w] = std::move(now);
      v1::HeartbeatResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(30));
      grpc::Status st = ws.Heartbeat(&ctx, req, &resp);
      if ((!st.ok() || resp.reregister()) && failed++ == 0) {
        absl::MutexLock l(&mu);
        first_error = absl::StrCat("heartbeat: ", st.error_message(),
                                   resp.reregister() ? " re-register" : "");
      }
    });
    absl::SleepFor(absl::Seconds(1) - (absl::Now() - tick));
  }
  row.heartbeat_cores = (ProcessCpuSeconds(pid) - cpu0) /
                        absl::ToDoubleSeconds(absl::Now() - hb_start);
  if (failed > 0 && row.error.empty()) row.error = first_error;
  row.rss_steady = (RssBytes(pid) - rss_before) / replicas;
  absl::StatusOr<double> bytes =
      (*master)->Metric("larder_master_placement_index_bytes");
  row.index_bytes = bytes.ok() ? *bytes / replicas : 0;

  // 3. CPU per RPC, one kind at a time, back to back.
  const double rpc_seconds = absl::GetFlag(FLAGS_rpc_seconds);
  for (int k = 0; rpc_seconds > 0 && k < kKinds; ++k) {
    const double c0 = ProcessCpuSeconds(pid);
    Clients one(stub.get(), &sample_keys, 0, 1 << k, /*check_locate=*/true);
    absl::SleepFor(absl::Seconds(rpc_seconds));
    Clients::Result r = one.Stop();
    if (r.calls[k] > 0)
      row.cpu_us[k] = (ProcessCpuSeconds(pid) - c0) * 1e6 / r.calls[k];
    if (r.errors > 0 && row.error.empty()) row.error = r.first_error;
  }

  // 4. Failover: the master restarts from its state (the ring restored,
  // every worker in it without blocks); each worker's next heartbeat is
  // answered "re-register", and all send their reports at once.
  if (absl::GetFlag(FLAGS_failover) && row.error.empty()) {
    const absl::Time down = absl::Now();
    absl::Status st = (*master)->Restart();
    if (!st.ok()) {
      row.error = absl::StrCat("restart: ", st.message());
      return row;
    }
    row.restart_s = absl::ToDoubleSeconds(absl::Now() - down);
    row.failover_s = reregister_all(true, &row.after_failover);
    held = (*master)->Metric("larder_master_block_replicas");
    if (row.error.empty() && (!held.ok() || *held != replicas)) {
      row.error = absl::StrCat("after the failover the index holds ",
                               held.ok() ? absl::StrCat(*held) : "?",
                               " replicas, not ", replicas);
    }
  }
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
    if (!absl::SimpleAtoi(wb.first, &w) || !absl::SimpleAtoi(wb.second, &b) ||
        w <= 0 || b <= 0) {
      std::fprintf(stderr, "bad --sweep entry '%s' (want WxB)\n",
                   std::string(c).c_str());
      return 2;
    }
    rows.push_back(larder::bench::RunOne(w, b));
    std::fprintf(stderr, "done %dx%d\n", w, b);
  }
  std::printf(
      "Re-registration (all workers at once), with %.0f client RPCs/s:\n",
      absl::GetFlag(FLAGS_client_rps));
  std::printf("%8s %9s %10s %9s  %-20s  %-20s  %-20s  %s\n", "WORKERS",
              "BLOCKS", "REPLICAS", "REGISTER", "LOCATE p50/p99 ms",
              "STAT p50/p99 ms", "LIST p50/p99 ms", "CALLS");
  for (const Row& r : rows) {
    std::printf("%8d %9d %10lld %8.2fs ", r.workers, r.blocks,
                static_cast<long long>(r.workers) * r.blocks, r.register_s);
    size_t calls = 0;
    for (int k = 0; k < larder::bench::kKinds; ++k) {
      std::printf(" %9.2f / %-8.2f", r.during.p50_ms[k], r.during.p99_ms[k]);
      calls += r.during.calls[k];
    }
    std::printf("  %5zu%s\n", calls,
                r.error.empty() ? "" : ("  ERROR " + r.error).c_str());
  }
  std::printf(
      "\nMemory per block replica, heartbeats (1 Hz, %d adds + %d removes), "
      "CPU per RPC:\n",
      absl::GetFlag(FLAGS_changes), absl::GetFlag(FLAGS_changes));
  std::printf("%8s %9s %10s %10s %10s %9s %9s %11s %9s %9s\n", "WORKERS",
              "BLOCKS", "RSS B/REP", "STEADY B", "INDEX B", "HB CORES", "us/HB",
              "us/LOCATE64", "us/STAT", "us/LIST");
  for (const Row& r : rows) {
    std::printf("%8d %9d %10.1f %10.1f %10.1f %9.3f %9.1f %11.1f %9.1f %9.1f\n",
                r.workers, r.blocks, r.rss_registered, r.rss_steady,
                r.index_bytes, r.heartbeat_cores,
                r.heartbeat_cores * 1e6 / r.workers, r.cpu_us[0], r.cpu_us[1],
                r.cpu_us[2]);
  }
  if (absl::GetFlag(FLAGS_failover)) {
    std::printf(
        "\nFailover: the master restarted from its state; every worker told "
        "to re-register by its next heartbeat:\n");
    std::printf("%8s %9s %10s %9s %9s  %-20s  %-20s  %-20s\n", "WORKERS",
                "BLOCKS", "REPLICAS", "RESTART", "REREG", "LOCATE p50/p99 ms",
                "STAT p50/p99 ms", "LIST p50/p99 ms");
    for (const Row& r : rows) {
      std::printf("%8d %9d %10lld %8.2fs %8.2fs ", r.workers, r.blocks,
                  static_cast<long long>(r.workers) * r.blocks, r.restart_s,
                  r.failover_s);
      for (int k = 0; k < larder::bench::kKinds; ++k) {
        std::printf(" %9.2f / %-8.2f", r.after_failover.p50_ms[k],
                    r.after_failover.p99_ms[k]);
      }
      std::printf("\n");
    }
  }
  return 0;
}
