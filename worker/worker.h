// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: worker.h
// -----------------------------------------------------------------------------
//
// A Larder worker: the block store, its gRPC data service, the short-circuit
// socket and the /metrics + /healthz endpoint, started together. `larder
// worker` is a thin main around this class; tests start it in-process too.
//
// Shutdown: stops accepting, lets in-flight RPCs finish (up to
// `shutdown_grace`), closes the short-circuit socket, then drains fetches and
// NVMe writes so the on-disk index stays consistent.
#ifndef LARDER_WORKER_WORKER_H_
#define LARDER_WORKER_WORKER_H_

#include <grpcpp/server.h>

#include <atomic>
#include <memory>
#include <string>

#include "common/ops_server.h"
#include "common/security.h"
#include "common/thread_pool.h"
#include "worker/block_store.h"
#include "worker/data_service.h"
#include "worker/master_link.h"
#include "worker/metadata_service.h"
#include "worker/metrics.h"
#include "worker/peers.h"
#include "worker/short_circuit.h"
#include "worker/worker_mounts.h"
#include "worker/writes.h"

namespace larder {

struct WorkerOptions {
  // gRPC data service address. Default 127.0.0.1:7070 (port 0 = any free).
  std::string listen = "127.0.0.1:7070";
  // Short-circuit Unix socket; empty = disabled. Created mode 0660, group
  // the first allowed gid; peers are checked with SO_PEERCRED: root, this
  // process's uid, `short_circuit_allowed_uids`, and members of
  // `short_circuit_allowed_gids` (default: this process's group).
  std::string short_circuit_socket;
  std::vector<uint32_t> short_circuit_allowed_uids;
  std::vector<uint32_t> short_circuit_allowed_gids;
  // /metrics and /healthz; empty = disabled. Default 127.0.0.1:7071.
  std::string ops_listen = "127.0.0.1:7071";
  BlockStoreOptions store;
  // Threads that wait on misses for RPCs. Default 64.
  int rpc_threads = 64;
  // Writes: parts uploaded at once, and the bytes held for them.
  int upload_threads = 16;
  // How much lower than the worker's own the CPU priority of the work of
  // writes is (nice steps: receiving parts, uploading, publishing), so that a
  // checkpoint's save yields the CPU to the dataset's reads. 0 = the same.
  int write_nice = 10;
  WriteStagingOptions writes;
  // How long in-flight RPCs may run on after a shutdown request. Default 30 s.
  absl::Duration shutdown_grace = absl::Seconds(30);
  // The master (host:port); empty = standalone (mounts from flags only).
  std::string master;
  // Identity in the cluster. Defaults: id = "<node>:<grpc port>", node = host
  // name, advertise = the listen address with the bound port.
  std::string id;
  std::string node;
  std::string advertise;
  // The node metadata cache (with a master): served to local clients on
  // the short-circuit socket.
  MetadataCacheOptions metadata_cache;
  // Options for under-stores of mounts received from the master.
  UnderStoreOptions store_options;
  // TLS and authentication of the gRPC port and of the link to the master.
  // See common/security.h.
  SecurityOptions security;
};

class Worker {
 public:
  // Errors: Unavailable (an address cannot be bound), and those of
  // BlockStore::Create.
  static absl::StatusOr<std::unique_ptr<Worker>> Start(
      WorkerOptions options, std::unique_ptr<WorkerMounts> mounts);
  ~Worker();

  int grpc_port() const { return grpc_port_; }
  int ops_port() const { return ops_ ? ops_->port() : 0; }
  WorkerMounts& mounts() { return *mounts_; }
  BlockStore& store() { return *store_; }
  WorkerMetrics& metrics() { return metrics_; }
  // Null when standalone.
  const MasterLink* master_link() const { return master_link_.get(); }

  // Graceful; idempotent.
  void Shutdown();

 private:
  Worker(WorkerOptions options, std::unique_ptr<WorkerMounts> mounts)
      : options_(std::move(options)), mounts_(std::move(mounts)) {}

  const WorkerOptions options_;
  std::unique_ptr<WorkerMounts> mounts_;
  WorkerMetrics metrics_;
  std::unique_ptr<BlockStore> store_;
  std::atomic<uint64_t> ring_version_{0};  // Last heard from the master.
  std::unique_ptr<ThreadPool> rpc_executor_;
  std::unique_ptr<Authorizer> auth_;
  std::unique_ptr<DataService> service_;
  std::unique_ptr<WriteStaging> staging_;
  std::unique_ptr<PeerSet> peers_;  // With a master.
  std::unique_ptr<ThreadPool> upload_executor_;
  std::unique_ptr<ThreadPool> intake_executor_;  // WritePart's messages.
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetadataService> metadata_;  // With a master.
  std::unique_ptr<ShortCircuitServer> short_circuit_;
  std::unique_ptr<OpsServer> ops_;
  std::unique_ptr<MasterLink> master_link_;
  int grpc_port_ = 0;
  bool shut_down_ = false;
};

}  // namespace larder

#endif  // LARDER_WORKER_WORKER_H_
