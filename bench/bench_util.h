// Copyright 2026 The Larder Authors.
//
// Small helpers shared by the benchmark drivers in bench/.
#ifndef LARDER_BENCH_BENCH_UTIL_H_
#define LARDER_BENCH_BENCH_UTIL_H_

#include <algorithm>
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

}  // namespace larder::bench

#endif  // LARDER_BENCH_BENCH_UTIL_H_
