// Copyright 2026 The Larder Authors.
#include "fuse/metrics.h"

#include <prometheus/family.h>

namespace larder {
namespace {

constexpr std::array<const char*, kOpCount> kOpNames = {
    "lookup",      "forget",     "getattr",   "opendir", "readdir",
    "readdirplus", "releasedir", "open",      "read",    "release",
    "statfs",      "getxattr",   "listxattr", "write"};

}  // namespace

FuseMetrics::FuseMetrics(prometheus::Registry& r) {
  auto& ops_family = prometheus::BuildCounter()
                         .Name("larder_fuse_operations_total")
                         .Help("FUSE requests served, by operation")
                         .Register(r);
  auto& errors_family =
      prometheus::BuildCounter()
          .Name("larder_fuse_errors_total")
          .Help("FUSE requests answered with an error, by operation")
          .Register(r);
  auto& latency_family = prometheus::BuildHistogram()
                             .Name("larder_fuse_operation_seconds")
                             .Help("FUSE request latency, by operation")
                             .Register(r);
  for (int i = 0; i < kOpCount; ++i) {
    ops[i] = &ops_family.Add({{"op", kOpNames[i]}});
    errors[i] = &errors_family.Add({{"op", kOpNames[i]}});
    latency[i] = &latency_family.Add(
        {{"op", kOpNames[i]}},
        prometheus::Histogram::BucketBoundaries{
            0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
            0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10});
  }
  read_bytes = &prometheus::BuildCounter()
                    .Name("larder_fuse_read_bytes_total")
                    .Help("Bytes returned by FUSE reads")
                    .Register(r)
                    .Add({});
  open_files = &prometheus::BuildGauge()
                    .Name("larder_fuse_open_files")
                    .Help("Files open through the mount")
                    .Register(r)
                    .Add({});
  passthrough_opens =
      &prometheus::BuildCounter()
           .Name("larder_fuse_passthrough_opens_total")
           .Help(
               "Opens handed to the kernel as the local worker's memfd "
               "(their reads bypass the daemon)")
           .Register(r)
           .Add({});
  auto& ahead =
      prometheus::BuildCounter()
          .Name("larder_fuse_lease_ahead_total")
          .Help(
              "Objects leased from the local worker ahead of their opens, by "
              "what became of them: leased (granted), used (an open took "
              "it), expired (given back unopened), refused (not granted: "
              "not whole in the worker's RAM)")
          .Register(r);
  ahead_leased = &ahead.Add({{"result", "leased"}});
  ahead_used = &ahead.Add({{"result", "used"}});
  ahead_expired = &ahead.Add({{"result", "expired"}});
  ahead_refused = &ahead.Add({{"result", "refused"}});
  ahead_held = &prometheus::BuildGauge()
                    .Name("larder_fuse_lease_ahead_held")
                    .Help("Objects leased ahead and not yet opened")
                    .Register(r)
                    .Add({});
  slow_queued = &prometheus::BuildGauge()
                     .Name("larder_fuse_slow_queued")
                     .Help(
                         "Requests that may wait on the network (cold reads, "
                         "metadata misses, writes) waiting for a thread of "
                         "the pool (--fuse_threads)")
                     .Register(r)
                     .Add({});
  slow_wait = &prometheus::BuildHistogram()
                   .Name("larder_fuse_slow_wait_seconds")
                   .Help(
                       "How long requests waited for a thread of the pool "
                       "(--fuse_threads): a pool too small shows here")
                   .Register(r)
                   .Add({}, prometheus::Histogram::BucketBoundaries{
                                0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005,
                                0.01, 0.05, 0.1, 0.5, 1, 5});
  inodes = &prometheus::BuildGauge()
                .Name("larder_fuse_inodes")
                .Help("Inodes the kernel holds references to")
                .Register(r)
                .Add({});
  auto& lookups =
      prometheus::BuildCounter()
          .Name("larder_fuse_metadata_lookups_total")
          .Help(
              "Metadata lookups (stat, open, list) by where the answer came "
              "from: hit (the node's metadata cache), miss (the master), "
              "stale (an expired entry, the master or under-store being "
              "unreachable)")
          .Register(r);
  meta_hits = &lookups.Add({{"result", "hit"}});
  meta_misses = &lookups.Add({{"result", "miss"}});
  meta_stale = &lookups.Add({{"result", "stale"}});
  meta_evictions = &prometheus::BuildCounter()
                        .Name("larder_fuse_metadata_evictions_total")
                        .Help(
                            "Metadata cache entries dropped to stay "
                            "within its entry and byte bounds")
                        .Register(r)
                        .Add({});
  meta_invalidated =
      &prometheus::BuildCounter()
           .Name("larder_fuse_metadata_invalidated_total")
           .Help("Metadata cache entries dropped by invalidations")
           .Register(r)
           .Add({});
  meta_entries = &prometheus::BuildGauge()
                      .Name("larder_fuse_metadata_cache_entries")
                      .Help("Stats and listings in the metadata cache")
                      .Register(r)
                      .Add({});
  meta_bytes = &prometheus::BuildGauge()
                    .Name("larder_fuse_metadata_cache_bytes")
                    .Help("Estimated bytes held by the metadata cache")
                    .Register(r)
                    .Add({});
}

namespace {

// Adds to `c` what counter `now` gained since `last`, and notes it.
void AddSince(prometheus::Counter* c, uint64_t now, uint64_t& last) {
  if (now > last) c->Increment(static_cast<double>(now - last));
  last = now;
}

}  // namespace

void FuseMetrics::Update(const ClientStats& now) {
  absl::MutexLock lock(&mu);
  AddSince(meta_hits, now.metadata_hits, last.metadata_hits);
  AddSince(meta_misses, now.metadata_misses, last.metadata_misses);
  AddSince(meta_stale, now.metadata_stale_served, last.metadata_stale_served);
  AddSince(meta_evictions, now.metadata_evictions, last.metadata_evictions);
  AddSince(meta_invalidated, now.metadata_invalidated,
           last.metadata_invalidated);
  meta_entries->Set(static_cast<double>(now.metadata_entries));
  meta_bytes->Set(static_cast<double>(now.metadata_bytes));
}

void FuseMetrics::UpdateLeaseAhead(const LeaseAhead::Counters& now,
                                   size_t held) {
  absl::MutexLock lock(&mu);
  AddSince(ahead_leased, now.leased, last_ahead.leased);
  AddSince(ahead_used, now.used, last_ahead.used);
  AddSince(ahead_expired, now.expired, last_ahead.expired);
  AddSince(ahead_refused, now.refused, last_ahead.refused);
  ahead_held->Set(static_cast<double>(held));
}

OpScope::OpScope(FuseMetrics& metrics, FuseOp op)
    : metrics_(metrics), op_(op), start_(std::chrono::steady_clock::now()) {
  metrics_.ops[op_]->Increment();
}

OpScope::~OpScope() {
  if (moved_) return;
  if (failed_) metrics_.errors[op_]->Increment();
  metrics_.latency[op_]->Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_)
          .count());
}

}  // namespace larder
