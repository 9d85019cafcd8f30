// Copyright 2026 The Larder Authors.
//
// The cluster subcommands of `larder` that manage the cluster: mount, unmount,
// load, invalidate, stats, ring; and what every command that calls the master
// shares (its address, the connection, errors). The master itself:
// master_command.cc; reading: read_commands.cc.
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "client/worker_client.h"
#include "common/block_key.h"
#include "common/block_proto.h"
#include "common/config.h"
#include "common/flags.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/master_connection.h"
#include "common/ring.h"
#include "common/security.h"
#include "common/status_macros.h"
#include "common/units.h"
#include "larder/client.h"
#include "proto/master.grpc.pb.h"

ABSL_FLAG(std::string, master, "",
          "Master address host:port, or the masters of an HA cluster "
          "a:7060,b:7060,c:7060 (default: $LARDER_MASTER, else "
          "127.0.0.1:7060).");
ABSL_FLAG(std::string, mount_block_size, "",
          "mount: block size of the new mount (default: 4MiB, 8MiB with "
          "--writable: a write's 8 MiB upload parts are then one block "
          "each).");
ABSL_FLAG(absl::Duration, metadata_ttl, larder::kDefaultMetadataTtl,
          "mount: how long stat/list results are cached.");
ABSL_FLAG(bool, writable, false,
          "mount: writers (the writer role) may create objects in the mount "
          "(checkpoints); off: read-only.");
ABSL_FLAG(std::string, eviction, "lru",
          "mount: how workers evict its blocks: lru, or epoch (a block read "
          "within --epoch_window stays; for a dataset larger than the cache "
          "read in epochs, where LRU thrashes).");
ABSL_FLAG(absl::Duration, epoch_window, larder::kDefaultEpochWindow,
          "mount --eviction=epoch: how long a read keeps a block cached; "
          "more than one epoch takes.");
ABSL_FLAG(std::string, credentials, "",
          "mount: credentials reference, e.g. profile:prod (never a secret).");
ABSL_FLAG(std::string, owner_uid, "",
          "mount: owner (user name or uid) its files show in FUSE mounts "
          "(default: the FUSE daemon's).");
ABSL_FLAG(std::string, owner_gid, "",
          "mount: group (name or gid) its files show in FUSE mounts.");
ABSL_FLAG(std::string, file_mode, "",
          "mount: permission bits its files show in FUSE mounts, octal, e.g. "
          "0440 (default 0444; directories add x where r is set).");
ABSL_FLAG(bool, wait, true,
          "load: wait and show progress (false: print the job id and return).");
ABSL_FLAG(absl::Duration, progress_interval, absl::Seconds(5),
          "load: how often a progress line is printed when stderr is not a "
          "terminal (a log file, a pipe, kubectl logs).");

namespace larder::cli {

absl::StatusOr<uint32_t> ParseAccountId(absl::string_view flag,
                                        const std::string& name, bool group) {
  uint32_t id;
  if (absl::SimpleAtoi(name, &id)) return id;
  if (group) {
    if (const struct group* g = ::getgrnam(name.c_str())) return g->gr_gid;
  } else if (const struct passwd* p = ::getpwnam(name.c_str())) {
    return p->pw_uid;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--", flag, ": no ", group ? "group" : "user", " '", name, "'"));
}

std::string MasterAddress() {
  std::string m = absl::GetFlag(FLAGS_master);
  if (m.empty()) {
    const char* env = std::getenv("LARDER_MASTER");
    m = env != nullptr && *env ? env : "";
  }
  return m;
}

std::string DescribeSecurity(const SecurityOptions& s) {
  return absl::StrCat(
      s.tls_cert_file.empty() ? "plaintext" : "TLS",
      s.tls_ca_file.empty() || s.tls_cert_file.empty()
          ? ""
          : (s.tls_require_client_cert ? ", client certificates required"
                                       : ", client certificates checked"),
      s.auth_tokens_file.empty() ? "" : ", bearer tokens",
      s.auth_tokens_file.empty() && s.tls_ca_file.empty()
          ? ", no authentication"
          : "");
}

std::string MasterOrDefault() {
  std::string m = MasterAddress();
  return m.empty() ? "127.0.0.1:7060" : m;
}

// The connection to the master (or the leader of several), with the TLS and
// token flags applied. Errors: a bad --master, a token or PEM file that
// cannot be read.
absl::StatusOr<std::unique_ptr<MasterConnection>> Stub() {
  LARDER_ASSIGN_OR_RETURN(std::shared_ptr<const ChannelFactory> channels,
                          ChannelFactory::Create(SecurityOptionsFromFlags()));
  return MasterConnection::Create(MasterOrDefault(), std::move(channels));
}

absl::Status Rpc(const grpc::Status& s) {
  absl::Status st = FromGrpcStatus(s);
  if (!FromLarderServer(s) && IsTlsFailure(st)) {
    return absl::UnavailableError(absl::StrCat(
        "the Larder master at ", MasterOrDefault(),
        " closed the connection during set-up (", st.message(),
        "): if it serves TLS, set --tls_ca_file to the cluster's CA, and "
        "--tls_cert_file/--tls_key_file if it wants a client certificate; "
        "check --tls_server_name"));
  }
  // An UNAVAILABLE from a master itself (no leader now, an under-store or
  // etcd down) says why in its message.
  if (!FromLarderServer(s) &&
      (st.code() == absl::StatusCode::kUnavailable ||
       st.code() == absl::StatusCode::kDeadlineExceeded)) {
    const std::string m = MasterOrDefault();
    return absl::UnavailableError(absl::StrCat(
        absl::StrContains(m, ',') ? "cannot reach any Larder master of "
                                  : "cannot reach the Larder master at ",
        m, " (is `larder master` running? set --master or LARDER_MASTER)"));
  }
  return st;
}

absl::StatusOr<v1::StatResponse> StatPath(MasterConnection& master,
                                          const std::string& path) {
  v1::StatRequest req;
  req.set_path(path);
  v1::StatResponse r;
  LARDER_RETURN_IF_ERROR(
      Rpc(master.Call(&v1::Master::Stub::Stat, req, &r, absl::Seconds(30))));
  return r;
}

absl::Status WantArgs(const std::vector<std::string>& args, size_t n,
                      absl::string_view usage) {
  if (args.size() != n)
    return absl::InvalidArgumentError(absl::StrCat("usage: ", usage));
  return absl::OkStatus();
}

std::string FormatTime(int64_t unix_ns) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::FromUnixNanos(unix_ns),
                          absl::LocalTimeZone());
}

namespace {

// --- mount / unmount ------------------------------------------------------

// The mount table as a table, or (--output=json) as
// {"version": N, "mounts": [{"path", "uri", "block_size", "metadata_ttl_ms",
//  "writable", "credentials", "uid", "gid", "mode", "eviction",
//  "epoch_window_ms"}]} (uid/gid null when unset; mode 0 = the default
//  0444; eviction "lru" or "epoch").
absl::Status PrintMounts(const v1::MountTable& t) {
  LARDER_ASSIGN_OR_RETURN(bool json, JsonOutput());
  if (json) {
    Json doc;
    doc["version"] = t.version();
    doc["mounts"] = Json::array();
    for (const auto& m : t.mounts()) {
      Json e;
      e["path"] = m.path();
      e["uri"] = m.uri();
      e["block_size"] = m.block_size();
      e["metadata_ttl_ms"] = m.metadata_ttl_ms();
      e["writable"] = m.writable();
      e["credentials"] = m.credentials();
      e["uid"] = m.has_uid() ? Json(m.uid()) : Json(nullptr);
      e["gid"] = m.has_gid() ? Json(m.gid()) : Json(nullptr);
      e["mode"] = m.mode();
      e["eviction"] = m.eviction().empty() ? "lru" : m.eviction();
      e["epoch_window_ms"] = m.epoch_window_ms();
      doc["mounts"].push_back(std::move(e));
    }
    PrintJson(doc);
    return absl::OkStatus();
  }
  std::printf("%-32s %-10s %-8s %s\n", "PATH", "BLOCK", "TTL", "URI");
  for (const auto& m : t.mounts()) {
    std::printf(
        "%-32s %-10s %-8s %s%s\n", m.path().c_str(),
        FormatBytes(m.block_size()).c_str(),
        absl::FormatDuration(absl::Milliseconds(m.metadata_ttl_ms())).c_str(),
        m.uri().c_str(),
        absl::StrCat(
            m.credentials().empty()
                ? ""
                : absl::StrCat("  (credentials ", m.credentials(), ")"),
            m.has_uid() || m.has_gid() || m.mode() != 0
                ? absl::StrFormat("  (files %s:%s %04o)",
                                  m.has_uid() ? absl::StrCat(m.uid()) : "-",
                                  m.has_gid() ? absl::StrCat(m.gid()) : "-",
                                  m.mode() == 0 ? 0444 : m.mode())
                : "",
            m.eviction() == "epoch"
                ? absl::StrCat("  (eviction epoch, window ",
                               absl::FormatDuration(
                                   absl::Milliseconds(m.epoch_window_ms())),
                               ")")
                : "")
            .c_str());
  }
  return absl::OkStatus();
}

// --owner_uid, --owner_gid and --file_mode onto `m`.
absl::Status SetPresentation(v1::MountEntry* m) {
  if (const std::string u = absl::GetFlag(FLAGS_owner_uid); !u.empty()) {
    LARDER_ASSIGN_OR_RETURN(uint32_t uid,
                            ParseAccountId("owner_uid", u, false));
    m->set_uid(uid);
  }
  if (const std::string g = absl::GetFlag(FLAGS_owner_gid); !g.empty()) {
    LARDER_ASSIGN_OR_RETURN(uint32_t gid, ParseAccountId("owner_gid", g, true));
    m->set_gid(gid);
  }
  if (const std::string mode = absl::GetFlag(FLAGS_file_mode); !mode.empty()) {
    char* end = nullptr;
    const unsigned long v = std::strtoul(mode.c_str(), &end, 8);
    if (end == mode.c_str() || *end != '\0' || v > 07777) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--file_mode: '", mode, "' is not an octal mode such as 0440"));
    }
    m->set_mode(static_cast<uint32_t>(v));
  }
  return absl::OkStatus();
}

absl::Status RunMount(const std::vector<std::string>& args) {
  LARDER_ASSIGN_OR_RETURN(auto stub, Stub());
  if (args.empty()) {  // List.
    v1::MountTable t;
    LARDER_RETURN_IF_ERROR(
        Rpc(stub->Call(&v1::Master::Stub::GetMounts, v1::GetMountsRequest(), &t,
                       absl::Seconds(10))));
    return PrintMounts(t);
  }
  LARDER_RETURN_IF_ERROR(WantArgs(args, 2, "larder mount [PATH URI]"));
  v1::AddMountRequest req;
  req.mutable_mount()->set_path(args[0]);
  req.mutable_mount()->set_uri(args[1]);
  // Left out: 0, the master's default for the mount (DefaultBlockSize).
  if (const std::string text = absl::GetFlag(FLAGS_mount_block_size);
      !text.empty()) {
    LARDER_ASSIGN_OR_RETURN(uint64_t bs, ParseBytes(text));
    // The master checks the range; 0 would be its default, which is not
    // what `--mount_block_size=0` asks for.
    if (bs == 0) {
      return absl::InvalidArgumentError(
          "--mount_block_size: 0 is not a block size (4KiB to 1GiB; leave "
          "the flag out for 4MiB, 8MiB on a --writable mount)");
    }
    req.mutable_mount()->set_block_size(bs);
  }
  req.mutable_mount()->set_metadata_ttl_ms(static_cast<uint64_t>(
      absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_metadata_ttl))));
  req.mutable_mount()->set_writable(absl::GetFlag(FLAGS_writable));
  req.mutable_mount()->set_read_only(!absl::GetFlag(FLAGS_writable));
  req.mutable_mount()->set_credentials(absl::GetFlag(FLAGS_credentials));
  const std::string eviction = absl::GetFlag(FLAGS_eviction);
  if (eviction != "lru" && eviction != "epoch") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--eviction: '", eviction, "' is not a policy (lru or epoch)"));
  }
  if (eviction == "epoch") {
    const absl::Duration window = absl::GetFlag(FLAGS_epoch_window);
    if (window <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(
          "--epoch_window: must be positive (more than one epoch takes)");
    }
    req.mutable_mount()->set_eviction("epoch");
    req.mutable_mount()->set_epoch_window_ms(
        static_cast<uint64_t>(absl::ToInt64Milliseconds(window)));
  }
  LARDER_RETURN_IF_ERROR(SetPresentation(req.mutable_mount()));
  v1::MountTable t;
  LARDER_RETURN_IF_ERROR(
      Rpc(stub->Call(&v1::Master::Stub::AddMount, req, &t, absl::Seconds(30))));
  return PrintMounts(t);
}

absl::Status RunUnmount(const std::vector<std::string>& args) {
  LARDER_RETURN_IF_ERROR(WantArgs(args, 1, "larder unmount PATH"));
  v1::RemoveMountRequest req;
  req.set_path(args[0]);
  v1::MountTable t;
  LARDER_ASSIGN_OR_RETURN(auto stub, Stub());
  LARDER_RETURN_IF_ERROR(Rpc(
      stub->Call(&v1::Master::Stub::RemoveMount, req, &t, absl::Seconds(10))));
  return PrintMounts(t);
}

// --- load / invalidate ------------------------------------------------------

const char* StateName(v1::LoadStatus::State s) {
  switch (s) {
    case v1::LoadStatus::RUNNING:
      return "running";
    case v1::LoadStatus::DONE:
      return "done";
    default:
      return "failed";
  }
}

// Progress on stderr: on a terminal a bar redrawn in place (`\r`); anywhere
// else (a file, a pipe, `kubectl logs`) one plain line at a time, so a log
// never holds one endless line.
class LoadProgress {
 public:
  LoadProgress()
      : tty_(::isatty(STDERR_FILENO) == 1),
        interval_(absl::GetFlag(FLAGS_progress_interval)) {}

  void Update(const v1::LoadStatus& s, bool final) {
    const absl::Time now = absl::Now();
    // Outside a terminal: a line per interval, and one as soon as the
    // listing is done (the totals are known).
    const bool listed_now = s.listing_done() && !listed_;
    listed_ = s.listing_done();
    if (!tty_ && !final && !listed_now && now - last_line_ < interval_) return;
    last_line_ = now;
    const char* end = tty_ ? (final ? "\n" : "   ") : "\n";
    const char* start = tty_ ? "\r" : "";
    if (!s.listing_done()) {
      // Loading starts with the first page: what is listed so far.
      std::fprintf(stderr, "%slisting %s ... %llu files, %s loaded%s", start,
                   s.path().c_str(),
                   static_cast<unsigned long long>(s.files_total()),
                   FormatBytes(s.bytes_done()).c_str(), tty_ ? "" : "\n");
      return;
    }
    const double total =
        static_cast<double>(std::max<uint64_t>(1, s.bytes_total()));
    const double frac = s.bytes_done() / total;
    const int64_t end_ms = s.finished_unix_ms()
                               ? s.finished_unix_ms()
                               : absl::ToUnixMillis(absl::Now());
    const double secs =
        std::max(0.001, (end_ms - s.started_unix_ms()) / 1000.0);
    const double rate = s.bytes_done() / secs;
    const double eta = rate > 0 ? (s.bytes_total() - s.bytes_done()) / rate : 0;
    std::string bar;
    if (tty_) {
      const int width = 30;
      bar = std::string(static_cast<size_t>(frac * width), '#');
      bar.resize(width, '.');
      bar = absl::StrCat("[", bar, "] ");
    } else {
      bar = absl::StrCat("load ", s.path(), ": ");
    }
    std::fprintf(
        stderr, "%s%s%5.1f%%  %s / %s  files %llu/%llu  %s/s  ETA %s%s%s",
        start, bar.c_str(), 100 * frac, FormatBytes(s.bytes_done()).c_str(),
        FormatBytes(s.bytes_total()).c_str(),
        static_cast<unsigned long long>(s.files_done()),
        static_cast<unsigned long long>(s.files_total()),
        FormatBytes(static_cast<uint64_t>(rate)).c_str(),
        final ? "0s"
              : absl::FormatDuration(absl::Seconds(static_cast<int64_t>(eta)))
                    .c_str(),
        s.batch_retries() > 0
            ? absl::StrCat("  retries ", s.batch_retries()).c_str()
            : "",
        end);
  }

 private:
  const bool tty_;
  const absl::Duration interval_;
  absl::Time last_line_ = absl::InfinitePast();
  bool listed_ = false;
};

// --output=json: {"job_id", "path", "state" ("running" with --wait=false,
// "done" or "failed"), "files_total", "files_done", "bytes_total",
// "bytes_done", "blocks_total", "blocks_failed", "batch_retries",
// "started_unix_ms", "finished_unix_ms", "seconds", "last_error"}
void PrintLoadJson(const v1::LoadStatus& s) {
  Json doc;
  doc["job_id"] = s.job_id();
  doc["path"] = s.path();
  doc["state"] = StateName(s.state());
  doc["files_total"] = s.files_total();
  doc["files_done"] = s.files_done();
  doc["bytes_total"] = s.bytes_total();
  doc["bytes_done"] = s.bytes_done();
  doc["blocks_total"] = s.blocks_total();
  doc["blocks_failed"] = s.blocks_failed();
  doc["batch_retries"] = s.batch_retries();
  doc["started_unix_ms"] = s.started_unix_ms();
  doc["finished_unix_ms"] = s.finished_unix_ms();
  doc["seconds"] = s.finished_unix_ms()
                       ? (s.finished_unix_ms() - s.started_unix_ms()) / 1000.0
                       : 0.0;
  doc["last_error"] = s.last_error();
  PrintJson(doc);
}

absl::Status RunLoad(const std::vector<std::string>& args) {
  LARDER_RETURN_IF_ERROR(WantArgs(args, 1, "larder load PATH [--wait=true]"));
  LARDER_ASSIGN_OR_RETURN(bool json, JsonOutput());
  LARDER_ASSIGN_OR_RETURN(auto stub, Stub());
  v1::LoadRequest req;
  req.set_path(args[0]);
  v1::LoadStatus s;
  LARDER_RETURN_IF_ERROR(Rpc(
      stub->Call(&v1::Master::Stub::StartLoad, req, &s, absl::Seconds(30))));
  if (!absl::GetFlag(FLAGS_wait)) {
    if (json) {
      PrintLoadJson(s);
    } else {
      std::printf("%s\n", s.job_id().c_str());
    }
    return absl::OkStatus();
  }
  LoadProgress progress;
  while (s.state() == v1::LoadStatus::RUNNING) {
    progress.Update(s, false);
    // The master answers when the job ends or after wait_ms, whichever is
    // first: progress four times a second, and no wait after the end.
    v1::GetLoadRequest g;
    g.set_job_id(s.job_id());
    g.set_wait_ms(250);
    const absl::Time asked = absl::Now();
    LARDER_RETURN_IF_ERROR(
        Rpc(stub->Call(&v1::Master::Stub::GetLoad, g, &s, absl::Seconds(10))));
    // A master older than wait_ms answers at once.
    if (s.state() == v1::LoadStatus::RUNNING)
      absl::SleepFor(absl::Milliseconds(250) - (absl::Now() - asked));
  }
  progress.Update(s, true);
  if (json) {
    PrintLoadJson(s);
  } else {
    std::printf(
        "loaded %s: %llu files, %s in %.1f s, %llu blocks failed%s\n",
        s.path().c_str(), static_cast<unsigned long long>(s.files_done()),
        FormatBytes(s.bytes_done()).c_str(),
        (s.finished_unix_ms() - s.started_unix_ms()) / 1000.0,
        static_cast<unsigned long long>(s.blocks_failed()),
        s.batch_retries() > 0
            ? absl::StrCat(" (", s.batch_retries(),
                           " batches retried after a slow or unreachable "
                           "worker)")
                  .c_str()
            : "");
  }
  if (s.state() == v1::LoadStatus::FAILED) {
    return absl::UnavailableError(absl::StrCat(
        "load incomplete (run it again to resume): ", s.last_error()));
  }
  return absl::OkStatus();
}

absl::Status RunInvalidate(const std::vector<std::string>& args) {
  LARDER_RETURN_IF_ERROR(WantArgs(args, 1, "larder invalidate PATH"));
  v1::InvalidateRequest req;
  req.set_path(args[0]);
  v1::InvalidateResponse r;
  LARDER_ASSIGN_OR_RETURN(auto stub, Stub());
  LARDER_RETURN_IF_ERROR(Rpc(
      stub->Call(&v1::Master::Stub::Invalidate, req, &r, absl::Seconds(10))));
  std::printf("dropped %llu cached metadata entries under %s\n",
              static_cast<unsigned long long>(r.dropped()), args[0].c_str());
  return absl::OkStatus();
}

// --- evict ---------------------------------------------------------------

}  // namespace

absl::StatusOr<uint64_t> EvictOnEveryWorker(MasterConnection& master,
                                            const v1::EvictBlocksRequest& req,
                                            v1::Ring* ring_out) {
  v1::Ring ring;
  LARDER_RETURN_IF_ERROR(
      Rpc(master.Call(&v1::Master::Stub::GetRing, v1::GetRingRequest(), &ring,
                      absl::Seconds(10))));
  LARDER_ASSIGN_OR_RETURN(std::shared_ptr<const ChannelFactory> channels,
                          ChannelFactory::Create(SecurityOptionsFromFlags()));
  uint64_t evicted = 0;
  for (const v1::WorkerInfo& w : ring.workers()) {
    absl::StatusOr<uint64_t> n =
        WorkerClient(w.address(), *channels).EvictBlocks(req);
    if (!n.ok()) {
      return absl::Status(n.status().code(),
                          absl::StrCat("worker ", w.id(), " at ", w.address(),
                                       ": ", n.status().message()));
    }
    evicted += *n;
  }
  if (ring_out != nullptr) *ring_out = std::move(ring);
  return evicted;
}

namespace {

// --output=json: {"path", "evicted" (blocks), "workers" (asked)}.
absl::Status RunEvict(const std::vector<std::string>& args) {
  LARDER_RETURN_IF_ERROR(WantArgs(args, 1, "larder evict PATH"));
  LARDER_ASSIGN_OR_RETURN(bool json, JsonOutput());
  LARDER_ASSIGN_OR_RETURN(auto stub, Stub());
  LARDER_ASSIGN_OR_RETURN(const v1::StatResponse st, StatPath(*stub, args[0]));
  // A file: its blocks (of the version the master knows); a directory:
  // every block under it, whatever its version.
  v1::EvictBlocksRequest req;
  const std::string under =
      st.relative().empty() ? st.mount() : st.mount() + "/" + st.relative();
  if (st.info().is_dir()) {
    req.set_path_prefix(under + "/");
  } else if (st.block_size() == 0) {
    return absl::InternalError(
        absl::StrCat("the master gave no block size for ", args[0]));
  } else {
    const uint64_t blocks = BlockCount(st.info().size(), st.block_size());
    for (uint64_t b = 0; b < blocks; ++b) {
      ToProto(BlockId{st.mount(), st.relative(), st.info().version(), b,
                      st.block_size(), st.info().size()},
              req.add_blocks());
    }
  }
  v1::Ring ring;
  LARDER_ASSIGN_OR_RETURN(const uint64_t evicted,
                          EvictOnEveryWorker(*stub, req, &ring));
  if (json) {
    Json doc;
    doc["path"] = args[0];
    doc["evicted"] = evicted;
    doc["workers"] = ring.workers_size();
    PrintJson(doc);
  } else {
    std::printf("evicted %llu cached blocks of %s from %d workers\n",
                static_cast<unsigned long long>(evicted), args[0].c_str(),
                ring.workers_size());
  }
  return absl::OkStatus();
}

// --- stats / ring -----------------------------------------------------------

// {"ring_version", "workers": [{"id", "address", "node", "alive", "error",
//  "misses", "under_store_bytes", "served_grpc_bytes",
//  "served_short_circuit_bytes", "checksum_failures", "tiers": [{"name",
//  "capacity_bytes", "used_bytes", "blocks", "hits", "evictions",
//  "degraded"}]}], "cluster": {"hits", "misses", "hit_ratio"}}
absl::Status PrintStatsJson(const v1::ClusterStatsResponse& r) {
  Json doc;
  doc["ring_version"] = r.ring_version();
  doc["workers"] = Json::array();
  uint64_t hits = 0, misses = 0;
  for (const auto& w : r.workers()) {
    const auto& s = w.stats();
    Json j;
    j["id"] = w.info().id();
    j["address"] = w.info().address();
    j["node"] = w.info().node();
    j["alive"] = w.alive();
    j["error"] = w.error();
    j["misses"] = s.misses();
    j["under_store_bytes"] = s.under_store_bytes();
    j["served_grpc_bytes"] = s.bytes_served_grpc();
    j["served_short_circuit_bytes"] = s.bytes_served_short_circuit();
    j["checksum_failures"] = s.checksum_failures();
    j["tiers"] = Json::array();
    for (const auto& t : s.tiers()) {
      Json tier;
      tier["name"] = t.name();
      tier["capacity_bytes"] = t.capacity_bytes();
      tier["used_bytes"] = t.used_bytes();
      tier["blocks"] = t.blocks();
      tier["hits"] = t.hits();
      tier["evictions"] = t.evictions();
      tier["degraded"] = t.degraded();
      j["tiers"].push_back(std::move(tier));
      hits += t.hits();
    }
    misses += s.misses();
    doc["workers"].push_back(std::move(j));
  }
  doc["cluster"] = {
      {"hits", hits},
      {"misses", misses},
      {"hit_ratio", hits + misses ? static_cast<double>(hits) /
                                        static_cast<double>(hits + misses)
                                  : 0.0}};
  PrintJson(doc);
  return absl::OkStatus();
}

absl::Status RunStats(const std::vector<std::string>& args) {
  LARDER_RETURN_IF_ERROR(WantArgs(args, 0, "larder stats"));
  v1::ClusterStatsResponse r;
  LARDER_ASSIGN_OR_RETURN(auto stub, Stub());
  LARDER_RETURN_IF_ERROR(
      Rpc(stub->Call(&v1::Master::Stub::GetClusterStats,
                     v1::ClusterStatsRequest(), &r, absl::Seconds(30))));
  LARDER_ASSIGN_OR_RETURN(bool json, JsonOutput());
  if (json) return PrintStatsJson(r);
  std::printf("ring version %llu\n",
              static_cast<unsigned long long>(r.ring_version()));
  std::printf("%-24s %-6s %10s %10s %9s %12s %12s %12s %10s\n", "WORKER",
              "ALIVE", "RAM HITS", "NVME HITS", "MISSES", "UNDERSTORE",
              "SERVED GRPC", "SERVED SC", "RAM USED");
  uint64_t hits = 0, misses = 0;
  for (const auto& w : r.workers()) {
    const auto& s = w.stats();
    uint64_t ram_hits = 0, nvme_hits = 0, ram_used = 0;
    for (const auto& t : s.tiers()) {
      if (t.name() == "ram") {
        ram_hits = t.hits();
        ram_used = t.used_bytes();
      } else {
        nvme_hits += t.hits();
      }
    }
    hits += ram_hits + nvme_hits;
    misses += s.misses();
    std::printf(
        "%-24s %-6s %10llu %10llu %9llu %12s %12s %12s %10s%s\n",
        w.info().id().c_str(), w.alive() ? "yes" : "no",
        static_cast<unsigned long long>(ram_hits),
        static_cast<unsigned long long>(nvme_hits),
        static_cast<unsigned long long>(s.misses()),
        FormatBytes(s.under_store_bytes()).c_str(),
        FormatBytes(s.bytes_served_grpc()).c_str(),
        FormatBytes(s.bytes_served_short_circuit()).c_str(),
        FormatBytes(ram_used).c_str(),
        w.error().empty() ? "" : absl::StrCat("  (", w.error(), ")").c_str());
  }
  std::printf("cluster: %llu hits, %llu misses, hit ratio %.1f%%\n",
              static_cast<unsigned long long>(hits),
              static_cast<unsigned long long>(misses),
              hits + misses ? 100.0 * hits / (hits + misses) : 0.0);
  return absl::OkStatus();
}

absl::Status RunRing(const std::vector<std::string>& args) {
  LARDER_RETURN_IF_ERROR(WantArgs(args, 0, "larder ring"));
  v1::Ring ring;
  LARDER_ASSIGN_OR_RETURN(auto stub, Stub());
  LARDER_RETURN_IF_ERROR(
      Rpc(stub->Call(&v1::Master::Stub::GetRing, v1::GetRingRequest(), &ring,
                     absl::Seconds(10))));
  std::vector<RingMember> members;
  for (const auto& w : ring.workers())
    members.push_back({w.id(), static_cast<double>(
                                   std::max<uint64_t>(1, w.capacity_bytes()))});
  HashRing built(members, static_cast<int>(ring.vnodes()));
  std::vector<double> shares = built.Shares();
  LARDER_ASSIGN_OR_RETURN(bool json, JsonOutput());
  if (json) {
    // {"version", "vnodes", "workers": [{"id", "address", "node",
    //  "capacity_bytes", "vnodes", "share"}]} (share: 0 to 1).
    Json doc;
    doc["version"] = ring.version();
    doc["vnodes"] = ring.vnodes();
    doc["workers"] = Json::array();
    for (int i = 0; i < ring.workers_size(); ++i) {
      const auto& w = ring.workers(i);
      doc["workers"].push_back({{"id", w.id()},
                                {"address", w.address()},
                                {"node", w.node()},
                                {"capacity_bytes", w.capacity_bytes()},
                                {"vnodes", built.Vnodes(i)},
                                {"share", shares[i]}});
    }
    PrintJson(doc);
    return absl::OkStatus();
  }
  std::printf("ring version %llu, %d workers\n",
              static_cast<unsigned long long>(ring.version()),
              ring.workers_size());
  std::printf("%-24s %-22s %-10s %8s %8s  %s\n", "WORKER", "ADDRESS",
              "CAPACITY", "VNODES", "SHARE", "NODE");
  for (int i = 0; i < ring.workers_size(); ++i) {
    const auto& w = ring.workers(i);
    std::printf("%-24s %-22s %-10s %8d %7.2f%%  %s\n", w.id().c_str(),
                w.address().c_str(), FormatBytes(w.capacity_bytes()).c_str(),
                built.Vnodes(i), 100 * shares[i], w.node().c_str());
  }
  return absl::OkStatus();
}

}  // namespace

const Command kMountCommand = {
    "mount", "add a mount (or list them without arguments)",
    "larder mount [PATH URI] [--mount_block_size=4MiB] [--metadata_ttl=60s]\n"
    "  [--writable] [--eviction=lru|epoch [--epoch_window=1h]]\n"
    "  e.g. larder mount /datasets/imagenet "
    "'s3://bucket/imagenet?region=us-east-1'\n"
    "The same mount again succeeds (nothing changes); PATH mounted from "
    "another URI or\nwith other options is refused (exit 2): unmount it "
    "first.\n",
    &RunMount,
    FlagList({kLogFlags,
              kClientFlags,
              {"output", "mount_block_size", "metadata_ttl", "writable",
               "eviction", "epoch_window", "credentials", "owner_uid",
               "owner_gid", "file_mode"}})};
const Command kUnmountCommand = {
    "unmount", "remove a mount", "larder unmount PATH\n", &RunUnmount,
    FlagList({kLogFlags, kClientFlags, {"output"}})};
const Command kLoadCommand = {
    "load", "warm a path across the cluster, with progress",
    "larder load PATH [--wait=true]\n"
    "Progress goes to stderr: a bar on a terminal, else a line every "
    "--progress_interval.\nRun it again to resume an incomplete load: "
    "blocks already cached are skipped.\n",
    &RunLoad,
    FlagList(
        {kLogFlags, kClientFlags, {"output", "wait", "progress_interval"}})};
const Command kInvalidateCommand = {"invalidate",
                                    "drop cached metadata under a path",
                                    "larder invalidate PATH\n", &RunInvalidate,
                                    FlagList({kLogFlags, kClientFlags})};
const Command kEvictCommand = {
    "evict", "drop a path's cached blocks from every worker",
    "larder evict PATH\n"
    "A file's blocks, or every block under a directory, leave the RAM and "
    "NVMe tiers\nof every worker (the next read fetches them again). Needs "
    "the admin role.\n",
    &RunEvict, FlagList({kLogFlags, kClientFlags, {"output"}})};
const Command kStatsCommand = {
    "stats", "cluster hits, misses and bytes per worker", "larder stats\n",
    &RunStats, FlagList({kLogFlags, kClientFlags, {"output"}})};
const Command kRingCommand = {
    "ring", "workers, virtual nodes and ownership share", "larder ring\n",
    &RunRing, FlagList({kLogFlags, kClientFlags, {"output"}})};

}  // namespace larder::cli
