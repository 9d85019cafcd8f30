// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: master.h
// -----------------------------------------------------------------------------
//
// The Larder master: membership and the ring, the persisted mount table,
// metadata (cached Stat/List), placement and load jobs, served over gRPC
// (proto/master.proto). `larder master` is a thin main around this class.
//
// Embedded default: one master with its state in a local directory.
// High availability (`etcd` set): several masters, one leader elected in
// etcd, the state in etcd (master/leadership.h). Only the leader serves; the
// others answer every RPC with UNAVAILABLE and the leader's address in the
// trailing metadata `larder-leader` (common/master_connection.h follows it).
// A master that becomes the leader reads the mount table, the last ring and
// the running load jobs from the store: the ring's workers count as alive
// until they re-register with their block reports (or time out), so clients
// keep routing as before.
#ifndef LARDER_MASTER_MASTER_H_
#define LARDER_MASTER_MASTER_H_

#include <grpcpp/server.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "common/ops_server.h"
#include "common/security.h"
#include "master/invalidation_log.h"
#include "master/leadership.h"
#include "master/load_jobs.h"
#include "master/membership.h"
#include "master/metadata.h"
#include "master/mount_registry.h"
#include "master/writes.h"
#include "understore/options.h"

namespace larder {

struct MasterOptions {
  // gRPC address. Default 127.0.0.1:7060 (port 0 = any free).
  std::string listen = "127.0.0.1:7060";
  // Where the mount table is persisted. Default /var/lib/larder/master.
  std::string state_dir = "/var/lib/larder/master";
  // /metrics and /healthz; empty = disabled. Default 127.0.0.1:7061.
  std::string ops_listen = "127.0.0.1:7061";
  // A worker silent for this long leaves the ring. Default 10 s.
  absl::Duration heartbeat_timeout = absl::Seconds(10);
  // How often workers are told to heartbeat. Default 1 s.
  absl::Duration heartbeat_interval = absl::Seconds(1);
  int vnodes = HashRing::kDefaultVnodes;
  // Transport settings and credentials for the master's own metadata reads.
  UnderStoreOptions store;
  // TLS and authentication of the gRPC port, and of the master's own calls
  // to workers (load jobs, stats). See common/security.h.
  SecurityOptions security;

  // High availability: etcd's endpoints ("10.0.0.1:2379,10.0.0.2:2379");
  // empty = the embedded default (state_dir, no election). With etcd,
  // state_dir is not used.
  std::string etcd;
  // TLS to etcd: its CA, and this master's client certificate and key.
  std::string etcd_ca_file, etcd_cert_file, etcd_key_file;
  // Keys in etcd start with this (several clusters can share one etcd).
  std::string etcd_prefix = "/larder/";
  // How long a dead leader holds on: its lease in etcd. Default 3 s.
  absl::Duration leader_lease = absl::Seconds(3);
  // The address clients and workers reach this master at, given to them by
  // the other masters. Default: the listen address, with this host's name
  // for a wildcard host and the bound port.
  std::string advertise;
  // The largest request the master reads. gRPC reads a request whole before
  // any handler (and so the role check) runs: this bounds what a caller
  // with no credential makes the master hold. Workers send block reports in
  // parts of 256 KiB; workers from before packed reports sent one request
  // of ~18 bytes a block and need up to 64 MiB. Default 4 MiB.
  int max_request_bytes = 4 << 20;
  // An upload (a write) neither committed nor aborted this long after it
  // began is aborted: a writer that died leaves nothing in the store.
  // Default 6 h.
  absl::Duration write_max_age = absl::Hours(6);
};

class Master {
 public:
  // Errors: those of MountRegistry::Open; Unavailable (cannot bind).
  static absl::StatusOr<std::unique_ptr<Master>> Start(MasterOptions options);
  ~Master();

  int port() const { return port_; }
  int ops_port() const { return ops_ ? ops_->port() : 0; }
  Membership& membership() { return *membership_; }
  // The mount table this master holds now (empty on a follower).
  v1::MountTable Mounts() const;
  void Shutdown();

  // Whether this master leads and has taken over the state (it serves).
  bool Serving() const;
  // The error a master that does not serve answers with (the leader's
  // address in the trailing metadata `larder-leader`).
  grpc::Status NotLeader(grpc::ServerContext& ctx) const;

 private:
  explicit Master(MasterOptions options) : options_(std::move(options)) {}
  void ReapLoop();
  // Takes over as the leader of `term`: reads the state from the store.
  absl::Status OnElected(int64_t term);
  void OnDeposed();

  MasterOptions options_;
  std::unique_ptr<EtcdClient> etcd_;
  std::unique_ptr<StateStore> store_;
  EtcdStateStore* etcd_store_ = nullptr;  // store_, with etcd.
  std::unique_ptr<Leadership> leadership_;
  EtcdLeadership* election_ = nullptr;  // leadership_, with etcd.
  std::atomic<int64_t> serving_term_{0};
  int64_t last_term_ = 0;             // Election thread only.
  uint64_t stored_ring_version_ = 0;  // Reaper thread only.
  std::unique_ptr<Authorizer> auth_;
  std::shared_ptr<const ChannelFactory> channels_;
  std::unique_ptr<MountRegistry> mounts_;
  std::unique_ptr<Membership> membership_;
  std::unique_ptr<UnderStoreMetadata> metadata_;
  std::unique_ptr<InvalidationLog> invalidations_;
  std::unique_ptr<LoadJobs> loads_;
  std::unique_ptr<Writes> writes_;
  std::unique_ptr<grpc::Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<OpsServer> ops_;
  std::thread reaper_;
  std::atomic<bool> stopping_{false};
  int port_ = 0;
};

}  // namespace larder

#endif  // LARDER_MASTER_MASTER_H_
