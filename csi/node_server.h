// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: node_server.h
// -----------------------------------------------------------------------------
//
// `larder csi`: a CSI node plugin (the Identity and Node services of the
// Container Storage Interface v1, proto/csi.proto) that gives Kubernetes pods
// a path of the cluster namespace as a volume, read-only, through the node's
// `larder fuse` mount: a static PersistentVolume or an inline (ephemeral) CSI
// volume with `volumeAttributes: {path: /datasets/imagenet}`.
//
// NodePublishVolume mounts FUSE_MOUNTPOINT/PATH onto the pod's target path,
// read-only, nosuid, nodev (flags set before the mount is attached, so that
// the copies propagation makes are read-only too); NodeUnpublishVolume
// unmounts it and removes the directory. Both are idempotent, as the spec
// asks: a second publish of the same path to the same target is OK, of
// another path AlreadyExists; an unpublish of a target that holds nothing is
// OK. Errors the spec names: InvalidArgument (a field missing or malformed,
// a block volume, a path with `..`, a file), NotFound (no such path in the
// namespace), FailedPrecondition (the FUSE mount is not there, or its daemon
// is down: ENOTCONN). No controller: volumes are paths that already exist,
// so there is nothing to provision or attach.
//
// Calls into the FUSE mount are bounded (CsiOptions::fuse_timeout): a hung
// daemon fails a publish with FailedPrecondition and holds nothing up.
// PermissionDenied: a path outside CsiOptions::allowed_paths, an inline
// volume where they are off.
//
// Thread-safe: the mount table is read and changed by one call at a time.
#ifndef LARDER_CSI_NODE_SERVER_H_
#define LARDER_CSI_NODE_SERVER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/mount_table.h"
#include "proto/csi.grpc.pb.h"

namespace larder {

struct CsiOptions {
  // GetPluginInfo's name: the CSIDriver object's and the PVs' `driver`.
  std::string driver_name = "csi.larder.io";
  std::string version;
  // NodeGetInfo's node id (the chart passes the Kubernetes node name).
  std::string node_id;
  // Where this node's `larder fuse` serves the cluster namespace, as this
  // process sees it (with the kubelet's pods directory in the same mount
  // namespace, mount propagation bidirectional).
  std::string fuse_mountpoint;
  // The mount table to read (tests may point at a copy).
  std::string mountinfo = "/proc/self/mountinfo";
  // Cluster paths it may publish (prefixes; "/" is every path).
  std::vector<std::string> allowed_paths = {"/"};
  // Inline (ephemeral) volumes: any pod's author names the path, so they
  // are off unless asked for.
  bool allow_ephemeral = false;
  // The longest a call into the FUSE mount (statfs, stat) may take.
  absl::Duration fuse_timeout = absl::Seconds(10);
};

// "/a//b/" -> "/a/b". Errors: InvalidArgument (relative, "." or ".."
// components, NUL bytes, over 4096 bytes).
absl::StatusOr<std::string> CleanAbsolutePath(absl::string_view path,
                                              absl::string_view what);

class CsiNodeServer final : public csi::v1::Identity::Service,
                            public csi::v1::Node::Service {
 public:
  explicit CsiNodeServer(CsiOptions options) : options_(std::move(options)) {}

  // The FUSE mount at options.fuse_mountpoint and its daemon answering.
  // Errors: FailedPrecondition (saying which).
  absl::Status FuseUp() const;
  absl::Status Publish(const csi::v1::NodePublishVolumeRequest& req);
  absl::Status Unpublish(const csi::v1::NodeUnpublishVolumeRequest& req);

  // Identity.
  grpc::Status GetPluginInfo(grpc::ServerContext*,
                             const csi::v1::GetPluginInfoRequest*,
                             csi::v1::GetPluginInfoResponse* resp) override;
  grpc::Status GetPluginCapabilities(
      grpc::ServerContext*, const csi::v1::GetPluginCapabilitiesRequest*,
      csi::v1::GetPluginCapabilitiesResponse* resp) override;
  grpc::Status Probe(grpc::ServerContext*, const csi::v1::ProbeRequest*,
                     csi::v1::ProbeResponse* resp) override;
  // Node.
  grpc::Status NodeStageVolume(grpc::ServerContext*,
                               const csi::v1::NodeStageVolumeRequest*,
                               csi::v1::NodeStageVolumeResponse*) override;
  grpc::Status NodeUnstageVolume(grpc::ServerContext*,
                                 const csi::v1::NodeUnstageVolumeRequest*,
                                 csi::v1::NodeUnstageVolumeResponse*) override;
  grpc::Status NodePublishVolume(grpc::ServerContext*,
                                 const csi::v1::NodePublishVolumeRequest* req,
                                 csi::v1::NodePublishVolumeResponse*) override;
  grpc::Status NodeUnpublishVolume(
      grpc::ServerContext*, const csi::v1::NodeUnpublishVolumeRequest* req,
      csi::v1::NodeUnpublishVolumeResponse*) override;
  grpc::Status NodeGetVolumeStats(
      grpc::ServerContext*, const csi::v1::NodeGetVolumeStatsRequest*,
      csi::v1::NodeGetVolumeStatsResponse*) override;
  grpc::Status NodeGetCapabilities(
      grpc::ServerContext*, const csi::v1::NodeGetCapabilitiesRequest*,
      csi::v1::NodeGetCapabilitiesResponse* resp) override;
  grpc::Status NodeGetInfo(grpc::ServerContext*,
                           const csi::v1::NodeGetInfoRequest*,
                           csi::v1::NodeGetInfoResponse* resp) override;

 private:
  // The FUSE mount's entry. Errors: FailedPrecondition.
  absl::StatusOr<MountInfo> FuseMount() const;
  // `target` with its directory's symlinks resolved (as the mount table
  // names it). Errors: NotFound (the directory is gone), Internal.
  absl::StatusOr<std::string> CanonicalTarget(const std::string& target) const;

  const CsiOptions options_;
  absl::Mutex mu_;  // One publish or unpublish at a time.
};

}  // namespace larder

#endif  // LARDER_CSI_NODE_SERVER_H_
