// Copyright 2026 The Larder Authors.
//
// Small helpers shared by the benchmark drivers in bench/.
#ifndef LARDER_BENCH_BENCH_UTIL_H_
#define LARDER_BENCH_BENCH_UTIL_H_

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "tests/testing/process.h"

namespace larder::bench {

// The median of `v` (the mean of the middle two for an even count; 0 when
// empty).
inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t mid = v.size() / 2;
  return v.size() % 2 == 1 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

// CPU time (user + system, all threads) used so far by process `pid`, from
// /proc/PID/stat (clock ticks: 10 ms resolution). 0 if it is gone.
inline double ProcessCpuSeconds(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line) || line.rfind(')') == std::string::npos)
    return 0;
  // Fields after "pid (comm)": state is field 3; utime, stime are 14, 15.
  std::istringstream in(line.substr(line.rfind(')') + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int f = 3; f <= 15 && in >> field; ++f) {
    if (f == 14) utime = std::stod(field);
    if (f == 15) stime = std::stod(field);
  }
  return (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// CPU time and context switches used so far by this process (all its
// threads), its reaped children (a `dd`) and, when `other` > 0, that process
// (a worker this driver started). The other process's CPU time is counted
// in clock ticks (10 ms each).
struct Usage {
  double cpu_s = 0;
  double switches = 0;
};
inline Usage UsageNow(pid_t other = 0) {
  Usage u;
  for (int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
    rusage r{};
    if (::getrusage(who, &r) != 0) continue;
    u.cpu_s += r.ru_utime.tv_sec + r.ru_utime.tv_usec / 1e6 +
               r.ru_stime.tv_sec + r.ru_stime.tv_usec / 1e6;
    u.switches += r.ru_nvcsw + r.ru_nivcsw;
  }
  if (other <= 0) return u;
  u.cpu_s += ProcessCpuSeconds(other);
  const std::string proc = "/proc/" + std::to_string(other);
  std::string line;
  std::ifstream status(proc + "/status");
  while (std::getline(status, line)) {
    if (line.rfind("voluntary_ctxt_switches:", 0) == 0 ||
        line.rfind("nonvoluntary_ctxt_switches:", 0) == 0) {
      u.switches += std::stod(line.substr(line.find(':') + 1));
    }
  }
  return u;
}

// Empties the kernel's page, dentry and inode caches (root only).
// /proc/meminfo's Cached and Shmem, MiB. Cached counts shmem pages (memfds:
// the worker's RAM tier) too; Cached - Shmem is the page cache of files.
struct MemInfo {
  double cached_mib = 0;
  double shmem_mib = 0;
  double file_cache_mib() const { return cached_mib - shmem_mib; }
};
inline MemInfo ReadMemInfo() {
  MemInfo m;
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "Cached:") m.cached_mib = kib / 1024;
    if (key == "Shmem:") m.shmem_mib = kib / 1024;
  }
  return m;
}

inline void DropCaches() {
  if (!testing::DropKernelCaches().ok())
    std::fprintf(stderr, "cannot drop caches (not root?)\n");
}

// Reads every file whole with `readers` threads; files per second.
inline double FilesPerSecond(const std::vector<std::string>& paths, int readers,
                             size_t size) {
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  const absl::Time start = absl::Now();
  std::vector<std::thread> pool;
  for (int t = 0; t < readers; ++t) {
    pool.emplace_back([&] {
      std::vector<char> buf(size + 4096);
      for (size_t i; (i = next++) < paths.size();) {
        int fd = ::open(paths[i].c_str(), O_RDONLY);
        if (fd < 0) {
          failed = true;
          continue;
        }
        size_t got = 0;
        ssize_t n;
        while ((n = ::read(fd, buf.data() + got, buf.size() - got)) > 0)
          got += n;
        ::close(fd);
        if (got != size) failed = true;
      }
    });
  }
  for (auto& t : pool) t.join();
  const double secs = absl::ToDoubleSeconds(absl::Now() - start);
  if (failed) std::fprintf(stderr, "a small-file read failed\n");
  return failed ? 0 : paths.size() / secs;
}

}  // namespace larder::bench

#endif  // LARDER_BENCH_BENCH_UTIL_H_
