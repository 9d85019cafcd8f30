// Copyright 2026 The Larder Authors.
//
// `larder master`: the master daemon (membership, ring, mount table,
// metadata, loads), alone or as one of an HA group on etcd.
#include <signal.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "common/flags.h"
#include "common/status_macros.h"
#include "common/units.h"
#include "master/master.h"

ABSL_DECLARE_FLAG(std::vector<std::string>, allowed_file_roots);
ABSL_DECLARE_FLAG(std::string, advertise);

ABSL_FLAG(std::string, state_dir, "/var/lib/larder/master",
          "master: directory of the persisted state (mount table, ring, load "
          "jobs); not used with --etcd.");
ABSL_FLAG(std::string, etcd, "",
          "master: high availability: etcd endpoints host:port,... holding "
          "the state and electing the leader (empty: one master, state in "
          "--state_dir).");
ABSL_FLAG(std::string, etcd_prefix, "/larder/",
          "master: prefix of Larder's keys in etcd.");
ABSL_FLAG(std::string, etcd_ca_file, "",
          "master: PEM CA bundle to verify etcd's certificate (TLS to etcd).");
ABSL_FLAG(std::string, etcd_cert_file, "",
          "master: PEM client certificate for etcd (--client-cert-auth).");
ABSL_FLAG(std::string, etcd_key_file, "",
          "master: PEM key of --etcd_cert_file.");
ABSL_FLAG(absl::Duration, leader_lease, absl::Seconds(3),
          "master: the leader's lease in etcd: a dead leader is replaced "
          "within about this long (at least 2s).");

ABSL_FLAG(std::string, master_listen, "127.0.0.1:7060",
          "master: gRPC address.");
ABSL_FLAG(std::string, master_metrics_listen, "127.0.0.1:7061",
          "master: /metrics and /healthz (empty = off).");
ABSL_FLAG(std::string, master_max_request_size, "4MiB",
          "master: the largest request read (every request is read whole "
          "before its caller is authenticated). Workers send block reports "
          "in 256 KiB parts; 64MiB only while workers older than packed "
          "reports still run.");
ABSL_FLAG(absl::Duration, heartbeat_timeout, absl::Seconds(10),
          "master: a silent worker leaves the ring after this.");
ABSL_FLAG(absl::Duration, heartbeat_interval, absl::Seconds(1),
          "master: how often workers heartbeat.");
ABSL_FLAG(absl::Duration, write_max_age, larder::MasterOptions{}.write_max_age,
          "master: an upload neither committed nor aborted this long after "
          "it began is aborted in the under-store (a writer that died).");
namespace larder::cli {
namespace {

// --- master ---------------------------------------------------------------

// What the master serves, after its first line (which tests and scripts
// wait for).
void PrintMasterStartup(const MasterOptions& o, const Master& master) {
  const std::string host = o.listen.substr(0, o.listen.rfind(':'));
  std::printf(
      "  serving      gRPC %s:%d (%s)%s\n", host.c_str(), master.port(),
      DescribeSecurity(o.security).c_str(),
      o.ops_listen.empty()
          ? ", no metrics"
          : absl::StrCat(", /metrics and /healthz on port ", master.ops_port())
                .c_str());
  if (o.etcd.empty()) {
    std::printf("  state        %s (one master; no etcd)\n",
                o.state_dir.c_str());
  } else {
    std::printf(
        "  state        etcd %s, keys under %s; leader lease %s; this master "
        "is advertised as %s\n",
        o.etcd.c_str(), o.etcd_prefix.c_str(),
        absl::FormatDuration(o.leader_lease).c_str(),
        o.advertise.empty() ? "its --master_listen" : o.advertise.c_str());
  }
  const v1::MountTable mounts = master.Mounts();
  if (!o.etcd.empty() && mounts.mounts().empty()) {
    std::printf("  mounts       the leader's, from etcd\n");
  } else {
    std::printf("  mounts       %d%s\n", mounts.mounts_size(),
                mounts.mounts().empty() ? " (add one with `larder mount PATH "
                                          "URI`)"
                                        : "");
    for (const auto& m : mounts.mounts())
      std::printf("               %s -> %s\n", m.path().c_str(),
                  m.uri().c_str());
  }
  std::printf("  file roots   %s\n",
              !o.store.allowed_file_roots || o.store.allowed_file_roots->empty()
                  ? "none (file:// mounts refused; see --allowed_file_roots)"
                  : absl::StrJoin(*o.store.allowed_file_roots, ", ").c_str());
}

absl::Status RunMaster(const std::vector<std::string>& args) {
  LARDER_RETURN_IF_ERROR(RedirectStderrToLogFile(/*or_dev_null=*/false));
  LARDER_RETURN_IF_ERROR(
      WantArgs(args, 0,
               "larder master [--master_listen=...] [--state_dir=...] "
               "[--etcd=HOST:PORT,...]"));
  MasterOptions o;
  o.listen = absl::GetFlag(FLAGS_master_listen);
  o.state_dir = absl::GetFlag(FLAGS_state_dir);
  o.ops_listen = absl::GetFlag(FLAGS_master_metrics_listen);
  o.heartbeat_timeout = absl::GetFlag(FLAGS_heartbeat_timeout);
  o.heartbeat_interval = absl::GetFlag(FLAGS_heartbeat_interval);
  o.write_max_age = absl::GetFlag(FLAGS_write_max_age);
  o.store.http = HttpOptionsFromFlags();
  o.store.allowed_file_roots = absl::GetFlag(FLAGS_allowed_file_roots);
  o.security = SecurityOptionsFromFlags();
  o.etcd = absl::GetFlag(FLAGS_etcd);
  o.etcd_prefix = absl::GetFlag(FLAGS_etcd_prefix);
  o.etcd_ca_file = absl::GetFlag(FLAGS_etcd_ca_file);
  o.etcd_cert_file = absl::GetFlag(FLAGS_etcd_cert_file);
  o.etcd_key_file = absl::GetFlag(FLAGS_etcd_key_file);
  o.leader_lease = absl::GetFlag(FLAGS_leader_lease);
  o.advertise = absl::GetFlag(FLAGS_advertise);
  LARDER_ASSIGN_OR_RETURN(
      const uint64_t max_request,
      ParseBytes(absl::GetFlag(FLAGS_master_max_request_size)));
  if (max_request < (64 << 10) || max_request > (1u << 30)) {
    return absl::InvalidArgumentError(
        "--master_max_request_size: 64KiB to 1GiB");
  }
  o.max_request_bytes = static_cast<int>(max_request);
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  const MasterOptions shown = o;
  LARDER_ASSIGN_OR_RETURN(std::unique_ptr<Master> master,
                          Master::Start(std::move(o)));
  std::printf("larder master: gRPC port %d, metrics port %d\n", master->port(),
              master->ops_port());
  PrintMasterStartup(shown, *master);
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  master->Shutdown();
  return absl::OkStatus();
}
}  // namespace

const Command kMasterCommand = {
    "master", "run the master (membership, ring, mount table, metadata, loads)",
    "larder master [--master_listen=127.0.0.1:7060] "
    "[--state_dir=/var/lib/larder/master]\n"
    "  HA: larder master --etcd=HOST:2379,... [--advertise=HOST:7060] "
    "[--leader_lease=3s]\n"
    "file:// mounts are served only under --allowed_file_roots (none by "
    "default).\n",
    &RunMaster,
    FlagList({kLogFlags,
              kHttpFlags,
              kServerFlags,
              {"log_file", "master_listen", "master_metrics_listen",
               "master_max_request_size", "state_dir", "etcd", "etcd_prefix",
               "etcd_ca_file", "etcd_cert_file", "etcd_key_file",
               "leader_lease", "advertise", "heartbeat_timeout",
               "heartbeat_interval", "write_max_age", "allowed_file_roots"}})};

}  // namespace larder::cli
