// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: master_service.h
// -----------------------------------------------------------------------------
//
// The master's gRPC service (v1::Master). Control-plane traffic is small, so
// it uses the synchronous API (a gRPC-managed thread pool). Every RPC first
// checks the caller's role (admin for what changes what the cluster serves
// or holds, reader for the rest) and, on a master that is not the leader,
// answers UNAVAILABLE naming the leader.
#ifndef LARDER_MASTER_MASTER_SERVICE_H_
#define LARDER_MASTER_MASTER_SERVICE_H_

#include <grpcpp/impl/service_type.h>
#include <prometheus/registry.h>

#include <memory>

#include "common/security.h"
#include "master/invalidation_log.h"
#include "master/load_jobs.h"
#include "master/membership.h"
#include "master/metadata.h"
#include "master/mount_registry.h"
#include "master/writes.h"

namespace larder {

class Master;
struct MasterOptions;

// The service over the master's parts, which outlive it; its RPC counters
// (larder_master_rpcs_total) are registered in `registry`.
std::unique_ptr<grpc::Service> NewMasterService(
    const Master* master, const MasterOptions* options, MountRegistry* mounts,
    Membership* membership, UnderStoreMetadata* metadata,
    InvalidationLog* invalidations, LoadJobs* loads, Writes* writes,
    const Authorizer* auth, const ChannelFactory* channels,
    prometheus::Registry& registry);

}  // namespace larder

#endif  // LARDER_MASTER_MASTER_SERVICE_H_
