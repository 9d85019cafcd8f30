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
#include "absl/time/clock.h"
#include "cli/commands.h"
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
ABSL_FLAG(absl::Duration, heartbeat_timeout, absl::Seconds(10),
          "master: a silent worker leaves the ring after this.");
ABSL_FLAG(absl::Duration, heartbeat_interval, absl::Seconds(1),
          "master: how often workers heartbeat.");
ABSL_FLAG(std::string, mount_block_size, "4MiB",
          "mount: block size of the new mount.");
ABSL_FLAG(absl::Duration, metadata_ttl, absl::Seconds(60),
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

absl::Status RunMaster(const std::vector<std::string>& args) {
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
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  LARDER_ASSIGN_OR_RETURN(std::unique_ptr<Master> master,
                          Master::Start(std::move(o)));
  std::printf("larder master: gRPC port %d, metrics port %d\n", master->port(),
              master->ops_port());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  master->Shutdown();
  return absl::OkStatus();
}

// --- mount / unmount ------------------------------------------------------

void PrintMounts(const v1::MountTable& t) {
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
    PrintMounts(t);
    return absl::OkStatus();
  }
  LARDER_RETURN_IF_ERROR(WantArgs(args, 2, "larder mount [PATH URI]"));
  v1::AddMountRequest req;
  req.mutable_mount()->set_path(args[0]);
  req.mutable_mount()->set_uri(args[1]);
  LARDER_ASSIGN_OR_RETURN(uint64_t bs,
                          ParseBytes(absl::GetFlag(FLAGS_mount_block_size)));
  req.mutable_mount()->set_block_size(bs);
  req.mutable_mount()->set_metadata_ttl_ms(static_cast<uint64_t>(
      absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_metadata_ttl))));
  req.mutable_mount()->set_read_only(absl::GetFlag(FLAGS_read_only));
  req.mutable_mount()->set_credentials(absl::GetFlag(FLAGS_credentials));
  LARDER_RETURN_IF_ERROR(SetPresentation(req.mutable_mount()));
  v1::MountTable t;
  LARDER_RETURN_IF_ERROR(
      Rpc(stub->Call(&v1::Master::Stub::AddMount, req, &t, absl::Seconds(30))));
  PrintMounts(t);
  return absl::OkStatus();
}

absl::Status RunUnmount(const std::vector<std::string>& args) {
  LARDER_RETURN_IF_ERROR(WantArgs(args, 1, "larder unmount PATH"));
  v1::RemoveMountRequest req;
  req.set_path(args[0]);
  v1::MountTable t;
  LARDER_ASSIGN_OR_RETURN(auto stub, Stub());
  LARDER_RETURN_IF_ERROR(Rpc(
      stub->Call(&v1::Master::Stub::RemoveMount, req, &t, absl::Seconds(10))));
  PrintMounts(t);
  return absl::OkStatus();
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

absl::Status RunLs(const std::vector<std::string>& args) {
  if (args.size() > 1)
    return absl::InvalidArgumentError("usage: larder ls [PATH] [--recursive]");
  LARDER_ASSIGN_OR_RETURN(auto client, ConnectClient());
  const std::string path = args.empty() ? "/" : args[0];
  std::string token;
  do {
    LARDER_ASSIGN_OR_RETURN(
        ListResult page,
        client->List(path, token, 1000, absl::GetFlag(FLAGS_recursive)));
    for (const FileInfo& e : page.entries) {
      if (e.is_dir) {
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
  std::printf(
      "path:       %s\ntype:       %s\nsize:       %llu\nversion:    "
      "%s\nmtime:      %s\nmount:      %s\n"
      "block size: %s\nblocks:     %llu\n",
      r.info().path().c_str(), r.info().is_dir() ? "directory" : "file",
      static_cast<unsigned long long>(r.info().size()),
      r.info().version().c_str(), FormatTime(r.info().mtime_ns()).c_str(),
      r.mount().c_str(), FormatBytes(r.block_size()).c_str(),
      static_cast<unsigned long long>(
          BlockCount(r.info().size(), std::max<uint64_t>(1, r.block_size()))));
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

void PrintProgress(const v1::LoadStatus& s, bool final) {
  if (!s.listing_done()) {
    std::fprintf(stderr, "\rlisting %s ...", s.path().c_str());
    return;
  }
  const double total =
      static_cast<double>(std::max<uint64_t>(1, s.bytes_total()));
  const double frac = s.listing_done() ? s.bytes_done() / total : 0;
  const int width = 30;
  std::string bar(static_cast<size_t>(frac * width), '#');
  bar.resize(width, '.');
  const int64_t end_ms = s.finished_unix_ms() ? s.finished_unix_ms()
                                              : absl::ToUnixMillis(absl::Now());
  const double secs = std::max(0.001, (end_ms - s.started_unix_ms()) / 1000.0);
  const double rate = s.bytes_done() / secs;
  const double eta = rate > 0 ? (s.bytes_total() - s.bytes_done()) / rate : 0;
  std::fprintf(
      stderr, "\r[%s] %5.1f%%  %s / %s  files %llu/%llu  %s/s  ETA %s%s",
      bar.c_str(), 100 * frac, FormatBytes(s.bytes_done()).c_str(),
      FormatBytes(s.bytes_total()).c_str(),
      static_cast<unsigned long long>(s.files_done()),
      static_cast<unsigned long long>(s.files_total()),
      FormatBytes(static_cast<uint64_t>(rate)).c_str(),
      final ? "0s"
            : absl::FormatDuration(absl::Seconds(static_cast<int64_t>(eta)))
                  .c_str(),
      final ? "\n" : "   ");
}

absl::Status RunLoad(const std::vector<std::string>& args) {
  LARDER_RETURN_IF_ERROR(WantArgs(args, 1, "larder load PATH [--wait=true]"));
  LARDER_ASSIGN_OR_RETURN(auto stub, Stub());
  v1::LoadRequest req;
  req.set_path(args[0]);
  v1::LoadStatus s;
  {
    LARDER_RETURN_IF_ERROR(Rpc(
        stub->Call(&v1::Master::Stub::StartLoad, req, &s, absl::Seconds(30))));
  }
  if (!absl::GetFlag(FLAGS_wait)) {
    std::printf("%s\n", s.job_id().c_str());
    return absl::OkStatus();
  }
  while (s.state() == v1::LoadStatus::RUNNING) {
    PrintProgress(s, false);
    absl::SleepFor(absl::Milliseconds(250));
    v1::GetLoadRequest g;
    g.set_job_id(s.job_id());
    LARDER_RETURN_IF_ERROR(
        Rpc(stub->Call(&v1::Master::Stub::GetLoad, g, &s, absl::Seconds(10))));
  }
  PrintProgress(s, true);
  std::printf("loaded %s: %llu files, %s in %.1f s, %llu blocks failed\n",
              s.path().c_str(), static_cast<unsigned long long>(s.files_done()),
              FormatBytes(s.bytes_done()).c_str(),
              (s.finished_unix_ms() - s.started_unix_ms()) / 1000.0,
              static_cast<unsigned long long>(s.blocks_failed()));
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

absl::Status RunStats(const std::vector<std::string>& args) {
  LARDER_RETURN_IF_ERROR(WantArgs(args, 0, "larder stats"));
  v1::ClusterStatsResponse r;
  LARDER_ASSIGN_OR_RETURN(auto stub, Stub());
  LARDER_RETURN_IF_ERROR(
      Rpc(stub->Call(&v1::Master::Stub::GetClusterStats,
                     v1::ClusterStatsRequest(), &r, absl::Seconds(30))));
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
    "              [--master_metrics_listen=127.0.0.1:7061] "
    "[--heartbeat_timeout=10s]\n"
    "              [--allowed_file_roots=DIR,...]   (file:// mounts: only "
    "under these; none by default)\n",
    &RunMaster};
const Command kMountCommand = {
    "mount", "add a mount (or list them without arguments)",
    "larder mount [PATH URI] [--mount_block_size=4MiB] [--metadata_ttl=60s]\n"
    "             [--credentials=profile:NAME] [--master=HOST:PORT]\n"
    "  e.g. larder mount /datasets/imagenet "
    "'s3://bucket/imagenet?region=us-east-1'\n",
    &RunMount};
const Command kUnmountCommand = {"unmount", "remove a mount",
                                 "larder unmount PATH\n", &RunUnmount};
const Command kLsCommand = {"ls", "list a cluster directory",
                            "larder ls [PATH] [--recursive]\n", &RunLs};
const Command kStatCommand = {"stat",
                              "size, version and blocks of a cluster path",
                              "larder stat PATH\n", &RunStat};
const Command kCatCommand = {"cat", "read a file through the cache to stdout",
                             "larder cat PATH\n", &RunCat};
const Command kCpCommand = {
    "cp", "copy a cluster path to a local directory through the cache",
    "larder cp PATH DEST_DIR [--parallel=8]\n", &RunCp};
const Command kLoadCommand = {"load",
                              "warm a path across the cluster, with progress",
                              "larder load PATH [--wait=true]\n", &RunLoad};
const Command kInvalidateCommand = {"invalidate",
                                    "drop cached metadata under a path",
                                    "larder invalidate PATH\n", &RunInvalidate};
const Command kStatsCommand = {"stats",
                               "cluster hits, misses and bytes per worker",
                               "larder stats\n", &RunStats};
const Command kRingCommand = {"ring",
                              "workers, virtual nodes and ownership share",
                              "larder ring\n", &RunRing};

}  // namespace larder::cli
