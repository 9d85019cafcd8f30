// Copyright 2026 The Larder Authors.
#include "worker/metrics.h"

namespace larder {
namespace {

prometheus::Family<prometheus::Counter>& Counter(prometheus::Registry& r,
                                                 const std::string& name,
                                                 const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r);
}
prometheus::Family<prometheus::Gauge>& Gauge(prometheus::Registry& r,
                                             const std::string& name,
                                             const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r);
}

}  // namespace

WorkerMetrics::WorkerMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      hits_ram(Counter(*registry_, "larder_worker_hits_total",
                       "Block reads served from a cache tier.")
                   .Add({{"tier", "ram"}})),
      hits_nvme(Counter(*registry_, "larder_worker_hits_total", "")
                    .Add({{"tier", "nvme"}})),
      misses(Counter(*registry_, "larder_worker_misses_total",
                     "Block reads that fetched from the under-store.")
                 .Add({})),
      served_ram(Counter(*registry_, "larder_worker_served_bytes_total",
                         "Bytes served, by tier of origin.")
                     .Add({{"tier", "ram"}})),
      served_nvme(Counter(*registry_, "larder_worker_served_bytes_total", "")
                      .Add({{"tier", "nvme"}})),
      served_under_store(
          Counter(*registry_, "larder_worker_served_bytes_total", "")
              .Add({{"tier", "under_store"}})),
      served_grpc(Counter(*registry_, "larder_worker_served_path_bytes_total",
                          "Bytes served, by path to the client.")
                      .Add({{"path", "grpc"}})),
      served_short_circuit(
          Counter(*registry_, "larder_worker_served_path_bytes_total", "")
              .Add({{"path", "short_circuit"}})),
      under_store_requests(Counter(*registry_,
                                   "larder_worker_under_store_requests_total",
                                   "Ranged reads sent to under-stores.")
                               .Add({})),
      under_store_errors(Counter(*registry_,
                                 "larder_worker_under_store_errors_total",
                                 "Block fetches that failed.")
                             .Add({})),
      under_store_bytes(Counter(*registry_,
                                "larder_worker_under_store_bytes_total",
                                "Bytes read from under-stores.")
                            .Add({})),
      write_bytes(Counter(*registry_, "larder_worker_write_bytes_total",
                          "Bytes of written objects' parts uploaded to "
                          "under-stores.")
                      .Add({})),
      under_store_latency(
          prometheus::BuildHistogram()
              .Name("larder_worker_under_store_fetch_seconds")
              .Help("Latency of one block fetch from the under-store.")
              .Register(*registry_)
              .Add({},
                   prometheus::Histogram::BucketBoundaries{
                       0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
                       5, 10})),
      single_flight_joins(
          Counter(*registry_, "larder_worker_single_flight_joins_total",
                  "Reads that joined a fetch already in flight.")
              .Add({})),
      prefetches_dropped(Counter(*registry_,
                                 "larder_worker_prefetches_dropped_total",
                                 "Prefetches dropped: the fetch queue held "
                                 "max_queued_prefetches already.")
                             .Add({})),
      evictions_ram(Counter(*registry_, "larder_worker_evictions_total",
                            "Blocks evicted, by tier.")
                        .Add({{"tier", "ram"}})),
      evictions_nvme(Counter(*registry_, "larder_worker_evictions_total", "")
                         .Add({{"tier", "nvme"}})),
      checksum_failures(Counter(*registry_,
                                "larder_worker_checksum_failures_total",
                                "NVMe blocks dropped for a checksum mismatch.")
                            .Add({})),
      nvme_write_failures(Counter(*registry_,
                                  "larder_worker_nvme_write_failures_total",
                                  "Blocks that could not be written to NVMe.")
                              .Add({})),
      huge_page_collapses(
          Counter(*registry_, "larder_worker_huge_page_collapses_total",
                  "RAM blocks moved into 2 MiB pages, by result.")
              .Add({{"result", "ok"}})),
      huge_page_collapse_failures(
          Counter(*registry_, "larder_worker_huge_page_collapses_total", "")
              .Add({{"result", "failed"}})),
      huge_page_queue(Gauge(*registry_, "larder_worker_huge_page_queue",
                            "RAM blocks waiting to move into 2 MiB pages.")
                          .Add({})),
      ram_used(Gauge(*registry_, "larder_worker_capacity_used_bytes",
                     "Bytes used, by tier.")
                   .Add({{"tier", "ram"}})),
      ram_capacity(Gauge(*registry_, "larder_worker_capacity_bytes",
                         "Capacity, by tier.")
                       .Add({{"tier", "ram"}})),
      nvme_used(Gauge(*registry_, "larder_worker_capacity_used_bytes", "")
                    .Add({{"tier", "nvme"}})),
      nvme_capacity(Gauge(*registry_, "larder_worker_capacity_bytes", "")
                        .Add({{"tier", "nvme"}})),
      leases(Gauge(*registry_, "larder_worker_short_circuit_leases",
                   "Short-circuit leases held.")
                 .Add({})),
      metadata_hits(Counter(*registry_, "larder_worker_metadata_requests_total",
                            "Stat requests of local clients, by result: "
                            "hit, miss (asked the master), deferred (left "
                            "to the master), error.")
                        .Add({{"result", "hit"}})),
      metadata_misses(
          Counter(*registry_, "larder_worker_metadata_requests_total", "")
              .Add({{"result", "miss"}})),
      metadata_deferred(
          Counter(*registry_, "larder_worker_metadata_requests_total", "")
              .Add({{"result", "deferred"}})),
      metadata_errors(
          Counter(*registry_, "larder_worker_metadata_requests_total", "")
              .Add({{"result", "error"}})),
      metadata_entries(Gauge(*registry_, "larder_worker_metadata_entries",
                             "Entries in the node metadata cache.")
                           .Add({})) {}

}  // namespace larder
