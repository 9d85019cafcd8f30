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
#include "master/load_jobs.h"
#include "master/membership.h"
#include "master/metadata.h"
#include "master/mount_registry.h"
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
};

class Master {
 public:
  // Errors: those of MountRegistry::Open; Unavailable (cannot bind).
  static absl::StatusOr<std::unique_ptr<Master>> Start(MasterOptions options);
  ~Master();

  int port() const { return port_; }
  int ops_port() const { return ops_ ? ops_->port() : 0; }
  Membership& membership() { return *membership_; }
  void Shutdown();

 private:
  explicit Master(MasterOptions options) : options_(std::move(options)) {}
  void ReapLoop();

  const MasterOptions options_;
  std::unique_ptr<Authorizer> auth_;
  std::shared_ptr<const ChannelFactory> channels_;
  std::unique_ptr<MountRegistry> mounts_;
  std::unique_ptr<Membership> membership_;
  std::unique_ptr<MetadataCache> metadata_;
  std::unique_ptr<InvalidationLog> invalidations_;
  std::unique_ptr<LoadJobs> loads_;
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
