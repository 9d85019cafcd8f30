// Copyright 2026 The Larder Authors.
//
// Small helpers shared by the benchmark drivers in bench/.
#ifndef LARDER_BENCH_BENCH_UTIL_H_
#define LARDER_BENCH_BENCH_UTIL_H_

#include <sys/resource.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace larder::bench {

// The median of `v` (the mean of the middle two for an even count; 0 when
// empty).
inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t mid = v.size() / 2;
  return v.size() % 2 == 1 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
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
  const std::string proc = "/proc/" + std::to_string(other);
  std::ifstream stat(proc + "/stat");
  std::string line;
  if (std::getline(stat, line) && line.rfind(')') != std::string::npos) {
    // Fields after "pid (comm)": state is field 3; utime, stime are 14, 15.
    std::istringstream in(line.substr(line.rfind(')') + 2));
    std::string field;
    double utime = 0, stime = 0;
    for (int f = 3; f <= 15 && in >> field; ++f) {
      if (f == 14) utime = std::stod(field);
      if (f == 15) stime = std::stod(field);
    }
    u.cpu_s += (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  }
  std::ifstream status(proc + "/status");
  while (std::getline(status, line)) {
    if (line.rfind("voluntary_ctxt_switches:", 0) == 0 ||
        line.rfind("nonvoluntary_ctxt_switches:", 0) == 0) {
      u.switches += std::stod(line.substr(line.find(':') + 1));
    }
  }
  return u;
}

}  // namespace larder::bench

#endif  // LARDER_BENCH_BENCH_UTIL_H_
