// Copyright 2026 The Larder Authors.
//
// Warm read throughput of a worker: a 1 GiB object, fully cached in the
// worker's RAM tier, read through gRPC over loopback and through the
// short-circuit socket, next to the machine's ceilings measured in the same
// run: `dd bs=4M` of a page-cached local file, and a plain TCP loopback
// transfer. Prints a table of medians over several rounds, with the CPU time
// and context switches each path costs per byte (this driver and the worker
// together). The gRPC reads are measured twice: plain, and over TLS with a
// bearer token (a second worker with real certificates made by openssl),
// which is what remote reads cost in a secured cluster.
//
//   build/bench/worker_read_bench [--object_mib=1024] [--rounds=5]
//       [--only=grpc-view1,tcp1]
//
// --only measures just the named rows (keys in the table's first column),
// e.g. to attach `perf` to one path over many rounds; each measurement is
// also logged to stderr as it is taken.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/bench_util.h"
#include "client/short_circuit_client.h"
#include "client/worker_client.h"
#include "common/log.h"
#include "common/security.h"
#include "tests/testing/pki.h"
#include "tests/testing/process.h"
#include "tests/testing/worker_process.h"
#include "understore/factory.h"

ABSL_FLAG(int, object_mib, 1024, "Size of the cached object, MiB.");
ABSL_FLAG(int, rounds, 5,
          "Rounds per configuration; the table shows the median.");
ABSL_FLAG(std::vector<std::string>, only, {},
          "Measure only these rows (comma-separated keys, as in the table's "
          "first column); default: all.");

namespace larder {
namespace {

constexpr uint64_t kBlock = 4 << 20;

using bench::Median;

// `dd if=FILE of=/dev/null bs=4M` of a page-cached file; GB/s from dd's own
// byte count and a wall clock around it.
double DdGbps(const std::string& file, uint64_t bytes) {
  const std::string cmd =
      absl::StrCat("dd if=", file, " of=/dev/null bs=4M 2>/dev/null");
  const absl::Time start = absl::Now();
  if (std::system(cmd.c_str()) != 0) return 0;
  return bytes / absl::ToDoubleSeconds(absl::Now() - start) / 1e9;
}

// A plain TCP transfer of `bytes` over loopback on `streams` connections:
// the sender writes from memory, the receiver reads into a 4 MiB buffer.
double TcpGbps(uint64_t bytes, int streams) {
  int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::listen(lfd, streams);
  const uint64_t per = bytes / streams;
  std::vector<std::thread> senders;
  for (int s = 0; s < streams; ++s) {
    senders.emplace_back([&] {
      int c = ::accept(lfd, nullptr, nullptr);
      std::vector<char> buf(kBlock, 'x');
      uint64_t sent = 0;
      while (sent < per) {
        ssize_t n = ::send(c, buf.data(),
                           std::min<uint64_t>(buf.size(), per - sent), 0);
        if (n <= 0) break;
        sent += static_cast<uint64_t>(n);
      }
      ::close(c);
    });
  }
  const absl::Time start = absl::Now();
  std::vector<std::thread> receivers;
  for (int s = 0; s < streams; ++s) {
    receivers.emplace_back([&] {
      int c = ::socket(AF_INET, SOCK_STREAM, 0);
      ::connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
      std::unique_ptr<char, decltype(&std::free)> buf(
          static_cast<char*>(std::aligned_alloc(4096, kBlock)), &std::free);
      while (::recv(c, buf.get(), kBlock, 0) > 0) {
      }
      ::close(c);
    });
  }
  for (auto& t : receivers) t.join();
  const double secs = absl::ToDoubleSeconds(absl::Now() - start);
  for (auto& t : senders) t.join();
  ::close(lfd);
  return per * streams / secs / 1e9;
}

// Reads every block of the object with `threads` readers; `read` fills one
// block into a buffer. Returns GB/s.
template <typename ReadFn>
double ReadAll(uint64_t size, int threads, ReadFn read) {
  const uint64_t blocks = BlockCount(size, kBlock);
  std::atomic<uint64_t> next{0};
  std::atomic<bool> failed{false};
  const absl::Time start = absl::Now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      // Page-aligned, as a loader's (pinned) buffers are: the kernel copies
      // into misaligned buffers several times slower.
      std::unique_ptr<char, decltype(&std::free)> buf(
          static_cast<char*>(std::aligned_alloc(4096, kBlock)), &std::free);
      for (uint64_t i = next++; i < blocks; i = next++) {
        if (!read(t, i, absl::MakeSpan(buf.get(), kBlock))) failed = true;
      }
    });
  }
  for (auto& t : pool) t.join();
  if (failed) {
    std::fprintf(stderr, "a read failed\n");
    std::exit(1);
  }
  return size / absl::ToDoubleSeconds(absl::Now() - start) / 1e9;
}

int Run() {
  SetMinLogLevel(LogLevel::kWarning);
  const uint64_t size = static_cast<uint64_t>(absl::GetFlag(FLAGS_object_mib))
                        << 20;
  const int rounds = std::max(1, absl::GetFlag(FLAGS_rounds));

  testing::TempDir dir;
  const std::string file = dir.path() + "/data/object.bin";
  {
    std::string chunk(kBlock, '\0');
    for (size_t i = 0; i < chunk.size(); ++i)
      chunk[i] = static_cast<char>(i * 7 + 1);
    std::string data;
    data.reserve(size);
    while (data.size() < size)
      data.append(chunk, 0,
                  std::min<uint64_t>(chunk.size(), size - data.size()));
    if (!testing::WriteFile(file, data).ok()) return 1;
  }
  auto store = OpenUnderStore("file://" + dir.path() + "/data");
  const std::string version = (*store)->Stat("object.bin")->version;

  auto worker = testing::WorkerProcess::Start(
      {absl::StrCat("--mount=bench=file://", dir.path(), "/data"),
       absl::StrCat("--ram_capacity=", size + (256 << 20)),
       "--log_level=warning"});
  if (!worker.ok()) {
    std::fprintf(stderr, "%s\n", worker.status().ToString().c_str());
    return 1;
  }
  auto id = [&](uint64_t i) {
    return BlockId{"bench", "object.bin", version, i, kBlock, size};
  };
  std::shared_ptr<const ChannelFactory> channels = ChannelFactory::Insecure();
  WorkerClient warm((*worker)->address());
  std::vector<BlockId> all;
  for (uint64_t i = 0; i < BlockCount(size, kBlock); ++i) all.push_back(id(i));
  if (absl::Status st = warm.CacheBlocks(all, /*wait=*/true); !st.ok()) {
    std::fprintf(stderr, "warm-up failed: %s\n", st.ToString().c_str());
    return 1;
  }

  // Each round measures every configuration once, in turn, so that ratios
  // compare figures taken under the same conditions (this VM's speed moves
  // 2-3x over minutes); the table shows medians, the ratios are medians of
  // per-round ratios.
  struct Config {
    std::string key;
    std::string what;
    int streams;
    std::function<double()> run;
    std::vector<double> gbps;
    std::vector<double> cpu_per_gb;        // Both processes, CPU-s per GB.
    std::vector<double> switches_per_mib;  // Context switches, both.
    pid_t pid = 0;  // The worker serving it; 0 = the plain one.
  };
  std::vector<Config> configs;
  configs.push_back({"dd", "ceiling: dd bs=4M, page-cached file", 1,
                     [&] { return DdGbps(file, size); }});
  configs.push_back({"tcp1", "ceiling: plain TCP loopback", 1,
                     [&] { return TcpGbps(size, 1); }});
  configs.push_back({"tcp4", "ceiling: plain TCP loopback", 4,
                     [&] { return TcpGbps(size, 4); }});
  std::vector<std::unique_ptr<WorkerClient>> grpc_clients;
  for (int streams : {1, 4}) {
    grpc_clients.push_back(std::make_unique<WorkerClient>((*worker)->address(),
                                                          *channels, streams));
  }
  for (int k = 0; k < 2; ++k) {
    const int streams = k == 0 ? 1 : 4;
    WorkerClient* client = grpc_clients[k].get();
    configs.push_back(
        {absl::StrCat("grpc-buf", streams),
         "larder gRPC ReadBlock into a buffer", streams, [&, client, streams] {
           return ReadAll(size, streams,
                          [&, client](int, uint64_t i, absl::Span<char> buf) {
                            auto n = client->ReadBlock(
                                id(i), 0, buf.subspan(0, id(i).length()));
                            return n.ok() && *n == id(i).length();
                          });
         }});
  }
  // The bytes left where the socket was read into, lent as a view (what the
  // FUSE daemon writes to the kernel for blocks from other nodes).
  for (int k = 0; k < 2; ++k) {
    const int streams = k == 0 ? 1 : 4;
    WorkerClient* client = grpc_clients[k].get();
    configs.push_back(
        {absl::StrCat("grpc-view", streams),
         "larder gRPC ReadBlockView (zero-copy)", streams,
         [&, client, streams] {
           return ReadAll(
               size, streams, [&, client](int, uint64_t i, absl::Span<char>) {
                 auto v = client->ReadBlockView(id(i), 0, id(i).length());
                 return v.ok() && v->size() == id(i).length();
               });
         }});
  }
  // The same reads over TLS with a token, from a worker serving TLS.
  auto pki = testing::Pki::Create();
  if (!pki.ok()) {
    std::fprintf(stderr, "%s\n", pki.status().ToString().c_str());
    return 1;
  }
  std::vector<std::string> tls_flags = {
      absl::StrCat("--mount=bench=file://", dir.path(), "/data"),
      absl::StrCat("--ram_capacity=", size + (256 << 20)),
      "--log_level=warning"};
  for (std::string& f : (*pki)->NodeFlags()) tls_flags.push_back(f);
  auto tls_worker = testing::WorkerProcess::Start(tls_flags);
  auto tls_channels = ChannelFactory::Create((*pki)->Client(Role::kReader));
  if (!tls_worker.ok() || !tls_channels.ok()) {
    std::fprintf(stderr, "TLS worker: %s %s\n",
                 tls_worker.status().ToString().c_str(),
                 tls_channels.status().ToString().c_str());
    return 1;
  }
  if (absl::Status st = WorkerClient((*tls_worker)->address(), **tls_channels)
                            .CacheBlocks(all, /*wait=*/true);
      !st.ok()) {
    std::fprintf(stderr, "TLS warm-up failed: %s\n", st.ToString().c_str());
    return 1;
  }
  for (int streams : {1, 4}) {
    grpc_clients.push_back(std::make_unique<WorkerClient>(
        (*tls_worker)->address(), **tls_channels, streams));
    WorkerClient* client = grpc_clients.back().get();
    configs.push_back(
        {absl::StrCat("tls-buf", streams),
         "larder gRPC ReadBlock into a buffer, TLS", streams,
         [&, client, streams] {
           return ReadAll(size, streams,
                          [&, client](int, uint64_t i, absl::Span<char> buf) {
                            auto n = client->ReadBlock(
                                id(i), 0, buf.subspan(0, id(i).length()));
                            return n.ok() && *n == id(i).length();
                          });
         }});
    configs.back().pid = (*tls_worker)->pid();
  }
  std::vector<std::unique_ptr<ShortCircuitClient>> sc;
  for (int t = 0; t < 4; ++t)
    sc.push_back(*ShortCircuitClient::Connect((*worker)->socket_path()));
  configs.push_back(
      {"sc-open1", "larder short-circuit, open per block", 1, [&] {
         return ReadAll(size, 1, [&](int t, uint64_t i, absl::Span<char> buf) {
           auto n = sc[t]->Read(id(i), 0, buf.subspan(0, id(i).length()));
           return n.ok() && *n == id(i).length();
         });
       }});
  // A sequential reader with readahead: opens 8 blocks per exchange.
  configs.push_back(
      {"sc-batch8", "larder short-circuit, 8 blocks per open", 1, [&] {
         std::unique_ptr<char, decltype(&std::free)> buf(
             static_cast<char*>(std::aligned_alloc(4096, kBlock)), &std::free);
         const uint64_t blocks = BlockCount(size, kBlock);
         const absl::Time start = absl::Now();
         for (uint64_t i = 0; i < blocks; i += 8) {
           std::vector<BlockId> batch;
           for (uint64_t j = i; j < std::min(blocks, i + 8); ++j)
             batch.push_back(id(j));
           std::vector<ShortCircuitClient::Lease> leases;
           for (auto& lease : sc[0]->OpenBatch(batch)) {
             if (!lease.ok() ||
                 ::pread(lease->fd, buf.get(), lease->length, lease->offset) !=
                     static_cast<ssize_t>(lease->length)) {
               std::fprintf(stderr, "short-circuit read failed\n");
               std::exit(1);
             }
             leases.push_back(*lease);
           }
           sc[0]->ReleaseBatch(leases).IgnoreError();
         }
         return size / absl::ToDoubleSeconds(absl::Now() - start) / 1e9;
       }});
  configs.push_back(
      {"sc-open4", "larder short-circuit, open per block", 4, [&] {
         return ReadAll(size, 4, [&](int t, uint64_t i, absl::Span<char> buf) {
           auto n = sc[t]->Read(id(i), 0, buf.subspan(0, id(i).length()));
           return n.ok() && *n == id(i).length();
         });
       }});

  if (const std::vector<std::string> only = absl::GetFlag(FLAGS_only);
      !only.empty()) {
    std::vector<std::string> keys;
    for (const Config& c : configs) keys.push_back(c.key);
    for (const std::string& key : only) {
      if (!absl::c_linear_search(keys, key)) {
        std::fprintf(stderr, "--only: no row %s (rows: %s)\n", key.c_str(),
                     absl::StrJoin(keys, ",").c_str());
        return 2;
      }
    }
    std::erase_if(configs, [&](const Config& c) {
      return !absl::c_linear_search(only, c.key);
    });
  }

  // Warm-up round, read as a second epoch would: blocks read again once
  // they are 5 s old are moved into 2 MiB pages by the worker while it is
  // quiet (--collapse_huge_pages); wait for that, so the rounds measure the
  // steady state.
  absl::SleepFor(absl::Seconds(5));
  for (Config& c : configs) c.run();
  const absl::Time settle = absl::Now();
  testing::WaitFor(
      [&] {
        auto q = (*worker)->Metric("larder_worker_huge_page_queue");
        return !q.ok() || *q == 0;
      },
      absl::Seconds(60));
  const double settle_s = absl::ToDoubleSeconds(absl::Now() - settle);
  for (int r = 0; r < rounds; ++r) {
    for (Config& c : configs) {
      const pid_t pid = c.pid != 0 ? c.pid : (*worker)->pid();
      const bench::Usage before = bench::UsageNow(pid);
      c.gbps.push_back(c.run());
      const bench::Usage after = bench::UsageNow(pid);
      c.cpu_per_gb.push_back((after.cpu_s - before.cpu_s) / (size / 1e9));
      c.switches_per_mib.push_back((after.switches - before.switches) /
                                   (size >> 20));
      std::fprintf(stderr,
                   "round %d/%d %-10s %6.2f GB/s %5.2f CPU-s/GB %5.1f "
                   "switches/MiB\n",
                   r + 1, rounds, c.key.c_str(), c.gbps.back(),
                   c.cpu_per_gb.back(), c.switches_per_mib.back());
    }
  }

  std::string shmem = "?";
  if (auto s = testing::ReadFile(
          "/sys/kernel/mm/transparent_hugepage/shmem_enabled");
      s.ok()) {
    shmem = std::string(absl::StripAsciiWhitespace(*s));
  }
  std::printf(
      "Warm reads of a %llu MiB object cached in a worker's RAM tier; %d "
      "interleaved rounds, GB/s.\n",
      static_cast<unsigned long long>(size >> 20), rounds);
  std::printf(
      "shmem_enabled: %s; blocks moved into 2 MiB pages by the worker: %.0f "
      "of %llu (%.1f s after the warm-up round)\n",
      shmem.c_str(),
      (*worker)
          ->Metric("larder_worker_huge_page_collapses_total{result=\"ok\"}")
          .value_or(0),
      static_cast<unsigned long long>(BlockCount(size, kBlock)), settle_s);
  // CPU-s/GB: CPU time of this driver (client threads, TCP ends, dd) and
  // the worker together per GB moved; switches/MiB: their context switches.
  std::printf("%-10s %-40s %7s %7s %6s %6s %9s %12s\n", "row", "path",
              "streams", "median", "min", "max", "CPU-s/GB", "switches/MiB");
  for (const Config& c : configs) {
    std::printf("%-10s %-40s %7d %7.2f %6.2f %6.2f %9.2f %12.1f\n",
                c.key.c_str(), c.what.c_str(), c.streams, Median(c.gbps),
                *std::min_element(c.gbps.begin(), c.gbps.end()),
                *std::max_element(c.gbps.begin(), c.gbps.end()),
                Median(c.cpu_per_gb), Median(c.switches_per_mib));
  }
  // Ratios of rows measured in the same round; those with a row left out by
  // --only are skipped.
  struct Ratio {
    const char* what;
    const char* num;
    const char* den;
    const char* target;
  };
  const Ratio ratios[] = {
      {"gRPC view, 1 stream / TCP, 1 stream", "grpc-view1", "tcp1",
       "target >= 60%"},
      {"gRPC view, 4 streams / TCP, 4 streams", "grpc-view4", "tcp4", ""},
      {"gRPC into a buffer, 1 stream / TCP", "grpc-buf1", "tcp1", ""},
      {"gRPC into a buffer, 4 streams / TCP", "grpc-buf4", "tcp4", ""},
      {"TLS + token / plain gRPC, 1 stream", "tls-buf1", "grpc-buf1", ""},
      {"TLS + token / plain gRPC, 4 streams", "tls-buf4", "grpc-buf4", ""},
      {"short-circuit, open per block / dd", "sc-open1", "dd", ""},
      {"short-circuit, 8 blocks per open / dd", "sc-batch8", "dd",
       "target >= 70%"},
      {"short-circuit, 4 threads / dd", "sc-open4", "dd", ""},
  };
  auto row = [&](const char* key) -> const Config* {
    for (const Config& c : configs)
      if (c.key == key) return &c;
    return nullptr;
  };
  std::printf(
      "\nratios: median of per-round ratios (lowest and highest round):\n");
  for (const Ratio& q : ratios) {
    const Config* a = row(q.num);
    const Config* b = row(q.den);
    if (a == nullptr || b == nullptr) continue;
    std::vector<double> v;
    for (int r = 0; r < rounds; ++r) v.push_back(100 * a->gbps[r] / b->gbps[r]);
    std::printf("  %-40s = %4.0f%%  (%3.0f-%3.0f%%)  %s\n", q.what, Median(v),
                *std::min_element(v.begin(), v.end()),
                *std::max_element(v.begin(), v.end()), q.target);
  }
  return 0;
}

}  // namespace
}  // namespace larder

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return larder::Run();
}
