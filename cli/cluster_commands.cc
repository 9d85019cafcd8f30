// Copyright 2026 The Larder Authors.
//
// The cluster subcommands of `larder`: master, mount, unmount, ls, stat, cat,
// load, invalidate, stats, ring.
#include <grp.h>
#include <grpcpp/create_channel.h>
#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

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
#include "common/block_key.h"
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
#include "master/master.h"
#include "proto/master.grpc.pb.h"

ABSL_DECLARE_FLAG(int,
                  parallel);  // store_command.cc: also used by `larder cp`.
ABSL_DECLARE_FLAG(bool,
                  recursive);  // store_command.cc: also used by `larder ls`.

ABSL_DECLARE_FLAG(std::vector<std::string>, allowed_file_roots);
ABSL_DECLARE_FLAG(std::string, advertise);

ABSL_FLAG(std::string, master, "",
          "Master address host:port, or the masters of an HA cluster "
          "a:7060,b:7060,c:7060 (default: $LARDER_MASTER, else "
          "127.0.0.1:7060).");
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
ABSL_FLAG(std::string, mount_block_size,
          larder::BytesFlagText(larder::kDefaultBlockSize),
          "mount: block size of the new mount.");
ABSL_FLAG(absl::Duration, metadata_ttl, larder::kDefaultMetadataTtl,
          "mount: how long stat/list results are cached.");
ABSL_FLAG(bool, read_only, true,
          "mount: the mount is read-only (writes arrive later).");
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

namespace {

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

// --- mount / unmount ------------------------------------------------------

// The mount table as a table, or (--output=json) as
// {"version": N, "mounts": [{"path", "uri", "block_size", "metadata_ttl_ms",
//  "read_only", "credentials", "uid", "gid", "mode"}]} (uid/gid null when
// unset; mode 0 = the default 0444).
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
      e["read_only"] = m.read_only();
      e["credentials"] = m.credentials();
      e["uid"] = m.has_uid() ? Json(m.uid()) : Json(nullptr);
      e["gid"] = m.has_gid() ? Json(m.gid()) : Json(nullptr);
      e["mode"] = m.mode();
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
  LARDER_ASSIGN_OR_RETURN(uint64_t bs,
                          ParseBytes(absl::GetFlag(FLAGS_mount_block_size)));
  // The master checks the range; 0 would be its "default" (4 MiB), which
  // is not what `--mount_block_size=0` asks for.
  if (bs == 0) {
    return absl::InvalidArgumentError(
        "--mount_block_size: 0 is not a block size (4KiB to 1GiB; leave the "
        "flag out for 4MiB)");
  }
  req.mutable_mount()->set_block_size(bs);
  req.mutable_mount()->set_metadata_ttl_ms(static_cast<uint64_t>(
      absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_metadata_ttl))));
  req.mutable_mount()->set_read_only(absl::GetFlag(FLAGS_read_only));
  req.mutable_mount()->set_credentials(absl::GetFlag(FLAGS_credentials));
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

// --- ls / stat / cat --------------------------------------------------------

absl::StatusOr<std::unique_ptr<Client>> ConnectClient() {
  ClientOptions o;
  o.master = MasterOrDefault();
  o.security = SecurityOptionsFromFlags();
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(o);
  if (!c.ok() && c.status().code() == absl::StatusCode::kUnavailable) {
    return Rpc(
        grpc::Status(grpc::UNAVAILABLE, std::string(c.status().message())));
  }
  return c;
}

// --output=json: {"path": P, "entries": [{"path", "type" ("file" or
// "directory"), "size", "version", "mtime" (RFC 3339), "mtime_unix_ms"}]},
// written entry by entry (a listing can be long).
absl::Status RunLs(const std::vector<std::string>& args) {
  if (args.size() > 1)
    return absl::InvalidArgumentError("usage: larder ls [PATH] [--recursive]");
  LARDER_ASSIGN_OR_RETURN(bool json, JsonOutput());
  LARDER_ASSIGN_OR_RETURN(auto client, ConnectClient());
  const std::string path = args.empty() ? "/" : args[0];
  if (json)
    std::printf("{\"path\": %s, \"entries\": [", DumpJson(Json(path)).c_str());
  std::string token;
  const char* separator = "\n  ";
  do {
    LARDER_ASSIGN_OR_RETURN(
        ListResult page,
        client->List(path, token, 1000, absl::GetFlag(FLAGS_recursive)));
    for (const FileInfo& e : page.entries) {
      if (json) {
        std::printf("%s%s", separator,
                    DumpJson(FileJson(e.path, e.is_dir, e.size, e.version,
                                      absl::ToUnixNanos(e.mtime)))
                        .c_str());
        separator = ",\n  ";
      } else if (e.is_dir) {
        std::printf("%12s  %-19s  %s/\n", "DIR", "", e.path.c_str());
      } else {
        std::printf("%12llu  %s  %s\n", static_cast<unsigned long long>(e.size),
                    absl::FormatTime("%Y-%m-%d %H:%M:%S", e.mtime,
                                     absl::LocalTimeZone())
                        .c_str(),
                    e.path.c_str());
      }
    }
    token = page.next_page_token;
  } while (!token.empty());
  if (json) std::printf("\n]}\n");
  return absl::OkStatus();
}

absl::Status RunStat(const std::vector<std::string>& args) {
  LARDER_RETURN_IF_ERROR(WantArgs(args, 1, "larder stat PATH"));
  v1::StatRequest req;
  req.set_path(args[0]);
  v1::StatResponse r;
  LARDER_ASSIGN_OR_RETURN(auto stub, Stub());
  LARDER_RETURN_IF_ERROR(
      Rpc(stub->Call(&v1::Master::Stub::Stat, req, &r, absl::Seconds(30))));
  const uint64_t blocks =
      BlockCount(r.info().size(), std::max<uint64_t>(1, r.block_size()));
  LARDER_ASSIGN_OR_RETURN(bool json, JsonOutput());
  if (json) {
    Json doc = FileJson(r.info().path(), r.info().is_dir(), r.info().size(),
                        r.info().version(), r.info().mtime_ns());
    doc["mount"] = r.mount();
    doc["block_size"] = r.block_size();
    doc["blocks"] = blocks;
    PrintJson(doc);
    return absl::OkStatus();
  }
  std::printf(
      "path:       %s\ntype:       %s\nsize:       %llu\nversion:    "
      "%s\nmtime:      %s\nmount:      %s\n"
      "block size: %s\nblocks:     %llu\n",
      r.info().path().c_str(), r.info().is_dir() ? "directory" : "file",
      static_cast<unsigned long long>(r.info().size()),
      r.info().version().c_str(), FormatTime(r.info().mtime_ns()).c_str(),
      r.mount().c_str(), FormatBytes(r.block_size()).c_str(),
      static_cast<unsigned long long>(blocks));
  return absl::OkStatus();
}

absl::Status RunCat(const std::vector<std::string>& args) {
  LARDER_RETURN_IF_ERROR(WantArgs(args, 1, "larder cat PATH"));
  LARDER_ASSIGN_OR_RETURN(auto client, ConnectClient());
  LARDER_ASSIGN_OR_RETURN(auto file, client->Open(args[0]));
  std::vector<char> buf(8 << 20);
  for (uint64_t off = 0; off < file->info().size;) {
    LARDER_ASSIGN_OR_RETURN(size_t n, file->Read(off, absl::MakeSpan(buf)));
    if (n == 0) break;
    for (size_t done = 0; done < n;) {
      ssize_t w = ::write(STDOUT_FILENO, buf.data() + done, n - done);
      if (w <= 0) return absl::InternalError("write to stdout failed");
      done += static_cast<size_t>(w);
    }
    off += n;
  }
  return absl::OkStatus();
}

// --- cp -------------------------------------------------------------------

absl::Status RunCp(const std::vector<std::string>& args) {
  LARDER_RETURN_IF_ERROR(
      WantArgs(args, 2, "larder cp PATH DEST_DIR [--parallel=8]"));
  LARDER_ASSIGN_OR_RETURN(auto client, ConnectClient());
  const absl::Time start = absl::Now();
  std::vector<FileInfo> files;
  LARDER_ASSIGN_OR_RETURN(FileInfo root, client->Stat(args[0]));
  std::string base = root.path;
  if (root.is_dir) {
    std::string token;
    do {
      LARDER_ASSIGN_OR_RETURN(
          ListResult page,
          client->List(root.path, token, 1000, /*recursive=*/true));
      for (FileInfo& f : page.entries) {
        if (!f.is_dir) files.push_back(std::move(f));
      }
      token = page.next_page_token;
    } while (!token.empty());
  } else {
    base = root.path.substr(0, root.path.rfind('/'));
    files.push_back(root);
  }
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> bytes{0};
  absl::Mutex mu;
  absl::Status first;
  std::vector<std::thread> pool;
  for (int t = 0; t < std::max(1, absl::GetFlag(FLAGS_parallel)); ++t) {
    pool.emplace_back([&] {
      std::vector<char> buf(8 << 20);
      for (size_t i = next++; i < files.size(); i = next++) {
        const FileInfo& f = files[i];
        std::string target =
            absl::StrCat(args[1], "/", f.path.substr(base.size() + 1));
        absl::Status st = [&]() -> absl::Status {
          std::error_code ec;
          std::filesystem::create_directories(
              std::filesystem::path(target).parent_path(), ec);
          LARDER_ASSIGN_OR_RETURN(auto file, client->Open(f.path));
          const std::string tmp = target + ".larder-tmp";
          std::FILE* out = std::fopen(tmp.c_str(), "wb");
          if (out == nullptr)
            return absl::InternalError(absl::StrCat("cannot create ", tmp));
          absl::Status rs;
          for (uint64_t off = 0; off < file->info().size && rs.ok();) {
            absl::StatusOr<size_t> n = file->Read(off, absl::MakeSpan(buf));
            if (!n.ok()) {
              rs = n.status();
            } else if (std::fwrite(buf.data(), 1, *n, out) != *n) {
              rs = absl::InternalError(
                  absl::StrCat("write to ", tmp, " failed"));
            } else {
              off += *n;
            }
          }
          if (std::fclose(out) != 0 && rs.ok())
            rs = absl::InternalError("close failed");
          if (rs.ok() && std::rename(tmp.c_str(), target.c_str()) != 0)
            rs = absl::InternalError("rename failed");
          if (!rs.ok()) std::remove(tmp.c_str());
          bytes += rs.ok() ? file->info().size : 0;
          return rs;
        }();
        if (!st.ok()) {
          absl::MutexLock l(&mu);
          if (first.ok())
            first = absl::Status(st.code(),
                                 absl::StrCat(f.path, ": ", st.message()));
          next = files.size();
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  LARDER_RETURN_IF_ERROR(first);
  const double secs = absl::ToDoubleSeconds(absl::Now() - start);
  ClientStats cs = client->stats();
  std::printf(
      "copied %zu files, %s in %.2f s (%.1f MB/s); blocks: %llu short-circuit, "
      "%llu gRPC, %llu under-store\n",
      files.size(), FormatBytes(bytes.load()).c_str(), secs,
      bytes.load() / secs / 1e6,
      static_cast<unsigned long long>(cs.blocks_short_circuit),
      static_cast<unsigned long long>(cs.blocks_grpc),
      static_cast<unsigned long long>(cs.blocks_under_store));
  return absl::OkStatus();
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
      std::fprintf(stderr, "%slisting %s ...%s", start, s.path().c_str(),
                   tty_ ? "" : "\n");
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
    absl::SleepFor(absl::Milliseconds(250));
    v1::GetLoadRequest g;
    g.set_job_id(s.job_id());
    LARDER_RETURN_IF_ERROR(
        Rpc(stub->Call(&v1::Master::Stub::GetLoad, g, &s, absl::Seconds(10))));
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
               "heartbeat_interval", "allowed_file_roots"}})};
const Command kMountCommand = {
    "mount", "add a mount (or list them without arguments)",
    "larder mount [PATH URI] [--mount_block_size=4MiB] [--metadata_ttl=60s]\n"
    "  e.g. larder mount /datasets/imagenet "
    "'s3://bucket/imagenet?region=us-east-1'\n"
    "The same mount again succeeds (nothing changes); PATH mounted from "
    "another URI or\nwith other options is refused (exit 2): unmount it "
    "first.\n",
    &RunMount,
    FlagList({kLogFlags,
              kClientFlags,
              {"output", "mount_block_size", "metadata_ttl", "read_only",
               "credentials", "owner_uid", "owner_gid", "file_mode"}})};
const Command kUnmountCommand = {
    "unmount", "remove a mount", "larder unmount PATH\n", &RunUnmount,
    FlagList({kLogFlags, kClientFlags, {"output"}})};
const Command kLsCommand = {
    "ls", "list a cluster directory", "larder ls [PATH] [--recursive]\n",
    &RunLs, FlagList({kLogFlags, kClientFlags, {"output", "recursive"}})};
const Command kStatCommand = {
    "stat", "size, version and blocks of a cluster path", "larder stat PATH\n",
    &RunStat, FlagList({kLogFlags, kClientFlags, {"output"}})};
const Command kCatCommand = {"cat", "read a file through the cache to stdout",
                             "larder cat PATH\n", &RunCat,
                             FlagList({kLogFlags, kClientFlags})};
const Command kCpCommand = {
    "cp", "copy a cluster path to a local directory through the cache",
    "larder cp PATH DEST_DIR [--parallel=8]\n", &RunCp,
    FlagList({kLogFlags, kClientFlags, {"parallel"}})};
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
const Command kStatsCommand = {
    "stats", "cluster hits, misses and bytes per worker", "larder stats\n",
    &RunStats, FlagList({kLogFlags, kClientFlags, {"output"}})};
const Command kRingCommand = {
    "ring", "workers, virtual nodes and ownership share", "larder ring\n",
    &RunRing, FlagList({kLogFlags, kClientFlags, {"output"}})};

}  // namespace larder::cli
