// Copyright 2026 The Larder Authors.
//
// `larder csi`: the CSI node plugin (csi/node_server.h) on a unix socket.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cli/commands.h"
#include "cli/version_info.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "csi/node_server.h"

ABSL_FLAG(std::string, csi_endpoint, "unix:///csi/csi.sock",
          "where the CSI services listen: unix://PATH (the kubelet's plugin "
          "directory, shared with the node-driver-registrar)");
ABSL_FLAG(std::string, csi_driver_name, "csi.larder.io",
          "the driver name (the CSIDriver object's and the volumes' `driver`)");
ABSL_FLAG(std::string, csi_node_id, "",
          "this node's id for NodeGetInfo (default: the host name; the chart "
          "gives the Kubernetes node name)");
ABSL_FLAG(std::string, fuse_mountpoint, "/mnt/larder",
          "where this node's `larder fuse` serves the cluster namespace");
ABSL_FLAG(std::vector<std::string>, csi_allowed_paths, {"/"},
          "cluster paths (prefixes, comma-separated) it may publish; a volume "
          "of another path fails with PermissionDenied");
ABSL_FLAG(bool, csi_ephemeral, false,
          "publish inline (ephemeral) CSI volumes too: any pod's author names "
          "their path, so they are off unless asked for");
ABSL_FLAG(absl::Duration, csi_fuse_timeout, absl::Seconds(10),
          "the longest a call into the FUSE mount may take before a publish "
          "fails (a hung daemon)");

namespace larder::cli {
namespace {

constexpr char kUsage[] =
    "larder csi [--csi_endpoint=unix:///csi/csi.sock] "
    "[--fuse_mountpoint=/mnt/larder] [--csi_node_id=NODE]\n"
    "Serves the CSI Identity and Node services: a pod's volume with "
    "`volumeAttributes: {path: /datasets/imagenet}` (a static "
    "PersistentVolume or an inline CSI volume) is that cluster path of the "
    "node's FUSE mount, bind-mounted read-only into the pod. Runs as root "
    "beside `larder fuse` (the chart's DaemonSet); SIGTERM or SIGINT stops "
    "it.\n";

absl::Status RunCsi(const std::vector<std::string>& args) {
  if (!args.empty()) return absl::InvalidArgumentError(kUsage);
  LARDER_RETURN_IF_ERROR(RedirectStderrToLogFile(/*or_dev_null=*/false));
  const std::string endpoint = absl::GetFlag(FLAGS_csi_endpoint);
  if (!absl::StartsWith(endpoint, "unix://") || endpoint.size() <= 7) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--csi_endpoint must be unix://PATH (the kubelet speaks CSI over a "
        "unix socket), not '",
        endpoint, "'"));
  }
  const std::string socket_path = endpoint.substr(7);
  CsiOptions o;
  o.driver_name = absl::GetFlag(FLAGS_csi_driver_name);
  o.version = kVersion;
  o.node_id = absl::GetFlag(FLAGS_csi_node_id);
  if (o.node_id.empty()) {
    char host[256] = {};
    if (::gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') {
      return absl::InvalidArgumentError(
          "--csi_node_id is empty and the host name cannot be read");
    }
    o.node_id = host;
  }
  o.allow_ephemeral = absl::GetFlag(FLAGS_csi_ephemeral);
  o.fuse_timeout = absl::GetFlag(FLAGS_csi_fuse_timeout);
  if (o.fuse_timeout <= absl::ZeroDuration())
    return absl::InvalidArgumentError("--csi_fuse_timeout must be positive");
  o.allowed_paths.clear();
  for (const std::string& p : absl::GetFlag(FLAGS_csi_allowed_paths)) {
    LARDER_ASSIGN_OR_RETURN(std::string clean,
                            CleanAbsolutePath(p, "--csi_allowed_paths"));
    o.allowed_paths.push_back(std::move(clean));
  }
  if (o.allowed_paths.empty())
    return absl::InvalidArgumentError("--csi_allowed_paths is empty");
  LARDER_ASSIGN_OR_RETURN(
      o.fuse_mountpoint, CleanAbsolutePath(absl::GetFlag(FLAGS_fuse_mountpoint),
                                           "--fuse_mountpoint"));
  const std::string fuse_mountpoint = o.fuse_mountpoint;
  CsiNodeServer server(std::move(o));

  // A socket left by an earlier run would make the bind fail.
  struct stat st;
  if (::lstat(socket_path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode))
    ::unlink(socket_path.c_str());
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(endpoint, grpc::InsecureServerCredentials());
  builder.RegisterService(static_cast<csi::v1::Identity::Service*>(&server));
  builder.RegisterService(static_cast<csi::v1::Node::Service*>(&server));
  const mode_t old = ::umask(0077);  // The socket: root's only.
  std::unique_ptr<grpc::Server> grpc_server = builder.BuildAndStart();
  ::umask(old);
  if (!grpc_server) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", endpoint,
        " (does its directory exist and can this user write it?)"));
  }
  const absl::Status fuse = server.FuseUp();
  LARDER_LOG(INFO, "csi.started")
      .Field("endpoint", endpoint)
      .Field("fuse_mountpoint", fuse_mountpoint)
      .Field("fuse", fuse.ok() ? "up" : std::string(fuse.message()));
  std::printf("larder csi: listening on %s; FUSE mount %s: %s\n",
              endpoint.c_str(), fuse_mountpoint.c_str(),
              fuse.ok() ? "up" : std::string(fuse.message()).c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  // Calls in flight get a moment (one stuck in a hung FUSE mount is
  // bounded by --csi_fuse_timeout).
  grpc_server->Shutdown(std::chrono::system_clock::now() +
                        std::chrono::seconds(5));
  ::unlink(socket_path.c_str());
  return absl::OkStatus();
}

}  // namespace

const Command kCsiCommand = {
    "csi", "serve the CSI node plugin (pod volumes of cluster paths)", kUsage,
    &RunCsi,
    FlagList({kLogFlags,
              {"log_file", "csi_endpoint", "csi_driver_name", "csi_node_id",
               "fuse_mountpoint", "csi_allowed_paths", "csi_ephemeral",
               "csi_fuse_timeout"}})};

}  // namespace larder::cli
