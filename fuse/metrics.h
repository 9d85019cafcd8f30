// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: metrics.h
// -----------------------------------------------------------------------------
//
// The FUSE daemon's metrics (served on /metrics by the ops server): requests,
// errors and latency by operation, bytes read, open files, passthrough opens,
// the inodes the kernel holds, and the client's metadata cache counters
// (moved to their series before each scrape).
//
//   FuseMetrics metrics(*registry);
//   {
//     OpScope scope(metrics, kRead);   // Counts and times one request.
//     if (failed) scope.Failed();
//   }
//
// Thread-safe: the series are prometheus-cpp's; Update serializes itself.
#ifndef LARDER_FUSE_METRICS_H_
#define LARDER_FUSE_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <chrono>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "fuse/lease_ahead.h"
#include "larder/client.h"

namespace larder {

// Operation types, for metrics.
enum FuseOp {
  kLookup,
  kForget,
  kGetattr,
  kOpendir,
  kReaddir,
  kReaddirplus,
  kReleasedir,
  kOpen,
  kRead,
  kRelease,
  kStatfs,
  kGetxattr,
  kListxattr,
  kWrite,  // Every modifying operation: writes of writable mounts, EROFS.
  kOpCount
};

struct FuseMetrics {
  explicit FuseMetrics(prometheus::Registry& r);

  // Moves the client's metadata counters to their series.
  void Update(const ClientStats& now) ABSL_LOCKS_EXCLUDED(mu);
  // Moves the counters of objects leased ahead (LeaseAhead) to theirs.
  void UpdateLeaseAhead(const LeaseAhead::Counters& now, size_t held)
      ABSL_LOCKS_EXCLUDED(mu);

  std::array<prometheus::Counter*, kOpCount> ops{}, errors{};
  std::array<prometheus::Histogram*, kOpCount> latency{};
  prometheus::Counter* read_bytes;
  prometheus::Counter* passthrough_opens;
  prometheus::Gauge* open_files;
  prometheus::Gauge* inodes;
  prometheus::Counter *meta_hits, *meta_misses, *meta_stale, *meta_evictions,
      *meta_invalidated;
  prometheus::Gauge *meta_entries, *meta_bytes;
  prometheus::Counter *ahead_leased, *ahead_used, *ahead_expired,
      *ahead_refused;
  prometheus::Gauge* ahead_held;
  // The slow pool (slow_requests.cc): requests waiting for one of its
  // threads, and how long they waited.
  prometheus::Gauge* slow_queued;
  prometheus::Histogram* slow_wait;
  absl::Mutex mu;
  ClientStats last ABSL_GUARDED_BY(mu);  // At the previous scrape.
  LeaseAhead::Counters last_ahead ABSL_GUARDED_BY(mu);
};

// Counts one request (as it starts: a reader that got its reply sees it
// counted), then times it and counts its failure.
class OpScope {
 public:
  OpScope(FuseMetrics& metrics, FuseOp op);
  ~OpScope();
  // The request goes on elsewhere (a thread of the slow pool): `other`
  // counts nothing more.
  OpScope(OpScope&& other)
      : metrics_(other.metrics_),
        op_(other.op_),
        start_(other.start_),
        failed_(other.failed_) {
    other.moved_ = true;
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

  void Failed() { failed_ = true; }

 private:
  FuseMetrics& metrics_;
  const FuseOp op_;
  const std::chrono::steady_clock::time_point start_;
  bool failed_ = false;
  bool moved_ = false;
};

}  // namespace larder

#endif  // LARDER_FUSE_METRICS_H_
