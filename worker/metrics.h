// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: metrics.h
// -----------------------------------------------------------------------------
//
// The worker's Prometheus metrics. One instance per worker (no globals), owned
// by the Worker; components get a pointer and update it on their hot paths
// (prometheus-cpp counters are atomic). Capacity gauges are refreshed from the
// tiers right before each scrape.
#ifndef LARDER_WORKER_METRICS_H_
#define LARDER_WORKER_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>

namespace larder {

class WorkerMetrics {
 private:
  // Declared first: every metric below registers in it during construction.
  std::shared_ptr<prometheus::Registry> registry_;

 public:
  WorkerMetrics();

  const std::shared_ptr<prometheus::Registry>& registry() const {
    return registry_;
  }

  // Hits by tier and misses (a miss = fetched from the under-store).
  prometheus::Counter& hits_ram;
  prometheus::Counter& hits_nvme;
  prometheus::Counter& misses;
  // Bytes served by tier of origin and by path.
  prometheus::Counter& served_ram;
  prometheus::Counter& served_nvme;
  prometheus::Counter& served_under_store;
  prometheus::Counter& served_grpc;
  prometheus::Counter& served_short_circuit;
  // Under-store traffic.
  prometheus::Counter& under_store_requests;
  prometheus::Counter& under_store_errors;
  prometheus::Counter& under_store_bytes;
  prometheus::Counter& write_bytes;            // Bytes of parts uploaded.
  prometheus::Histogram& under_store_latency;  // Seconds per block fetch.
  prometheus::Counter& single_flight_joins;
  prometheus::Counter& prefetches_dropped;
  prometheus::Counter& evictions_ram;
  prometheus::Counter& evictions_nvme;
  prometheus::Counter& checksum_failures;
  prometheus::Counter& nvme_write_failures;
  // RAM blocks moved into 2 MiB pages, and attempts that failed.
  prometheus::Counter& huge_page_collapses;
  prometheus::Counter& huge_page_collapse_failures;
  prometheus::Gauge& huge_page_queue;  // Blocks waiting for their turn.
  prometheus::Gauge& ram_used;
  prometheus::Gauge& ram_capacity;
  prometheus::Gauge& nvme_used;
  prometheus::Gauge& nvme_capacity;
  prometheus::Gauge& leases;
  // The node metadata cache (short-circuit STAT): answers from the cache,
  // answers that asked the master (once per path however many asked at
  // once), requests left to the master (paths or callers it does not
  // answer for), and failures.
  prometheus::Counter& metadata_hits;
  prometheus::Counter& metadata_misses;
  prometheus::Counter& metadata_deferred;
  prometheus::Counter& metadata_errors;
  prometheus::Gauge& metadata_entries;
};

}  // namespace larder

#endif  // LARDER_WORKER_METRICS_H_
