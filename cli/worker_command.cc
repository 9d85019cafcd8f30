// Copyright 2026 The Larder Authors.
#include <signal.h>

#include <cstdio>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/commands.h"
#include "common/block_key.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/units.h"
#include "worker/worker.h"

// A flag with a struct's field behind it takes its default from that field:
// one home per default (flag_defaults_test checks).

// Defined with the FUSE daemon's flags: both keep a metadata cache.
ABSL_DECLARE_FLAG(int64_t, metadata_cache_entries);
ABSL_DECLARE_FLAG(std::string, metadata_cache_bytes);

ABSL_FLAG(std::vector<std::string>, allowed_file_roots, {},
          "master, worker: directories that file:// mounts of the cluster's "
          "mount table may serve (their roots must lie in one, symlinks "
          "resolved); empty: none. The daemons run as root and serve a mount "
          "to every reader: allow only data meant to be shared.");
ABSL_FLAG(std::string, listen, larder::WorkerOptions().listen,
          "worker: gRPC data service address (host:port).");
ABSL_FLAG(
    std::string, short_circuit_socket, "",
    "worker: Unix socket for short-circuit local reads (empty = disabled).");
ABSL_FLAG(std::vector<std::string>, short_circuit_allowed_uids, {},
          "Users (names or uids) besides root and the worker's own that may "
          "use the short-circuit socket.");
ABSL_FLAG(std::vector<std::string>, short_circuit_allowed_gids, {},
          "Groups (names or gids) whose members may use the short-circuit "
          "socket; the first owns it (default: the worker's own group).");
ABSL_FLAG(std::string, metrics_listen, larder::WorkerOptions().ops_listen,
          "worker: address of /metrics and /healthz (empty = disabled).");
ABSL_FLAG(std::string, ram_capacity,
          larder::BytesFlagText(larder::BlockStoreOptions().ram_capacity_bytes),
          "worker: RAM tier capacity (e.g. 8GiB).");
ABSL_FLAG(std::string, ram_max_blocks, "auto",
          "worker: most blocks in the RAM tier; each holds a file descriptor. "
          "auto: the fd limit (raised to fs.nr_open where allowed) less a "
          "reserve for connections and files.");
ABSL_FLAG(std::string, ram_eviction, "lru",
          "worker: RAM tier eviction policy: lru or none.");
ABSL_FLAG(
    std::vector<std::string>, nvme, {},
    "worker: NVMe tier directories with capacities, DIR:SIZE[,DIR:SIZE...] "
    "(e.g. /mnt/nvme0/larder:500GiB).");
ABSL_FLAG(std::string, nvme_reserve,
          larder::BytesFlagText(larder::NvmeOptions().reserve_bytes),
          "worker: free space always left on each NVMe file system.");
ABSL_FLAG(std::string, nvme_eviction, "lru",
          "worker: NVMe tier eviction policy: lru or none.");
ABSL_FLAG(bool, nvme_sync, larder::NvmeOptions().sync_writes,
          "worker: fdatasync every block file before it becomes visible.");
ABSL_FLAG(std::vector<std::string>, pin, {},
          "worker: mount/path prefixes whose blocks are never evicted.");
ABSL_FLAG(std::vector<std::string>, ttl, {},
          "worker: PREFIX=DURATION entries: blocks expire after DURATION.");
ABSL_FLAG(
    std::vector<std::string>, mount, {},
    "worker: NAME=URI entries (until the master serves the mount table).");
ABSL_FLAG(std::string, block_size,
          larder::BytesFlagText(larder::kDefaultBlockSize),
          "worker: block size of the --mount mounts.");
ABSL_FLAG(bool, collapse_huge_pages,
          larder::BlockStoreOptions().collapse_huge_pages,
          "worker: move RAM blocks into 2 MiB pages on idle CPU "
          "(MADV_COLLAPSE, Linux 6.1+); warm reads of them are faster.");
ABSL_FLAG(std::string, object_file_max_size, "auto",
          "worker: objects of two blocks or more up to this size keep their "
          "RAM blocks in one memfd per object, which a FUSE daemon on this "
          "node hands to the kernel whole (passthrough reads); they leave "
          "RAM as a whole. auto: a quarter of --ram_capacity; 0: none.");
ABSL_FLAG(
    std::string, fetch_subrange,
    larder::BytesFlagText(larder::BlockStoreOptions().fetch_subrange_bytes),
    "worker: a miss of a larger block is fetched as parallel ranged "
    "reads of this size.");
ABSL_FLAG(int, fetch_threads, larder::BlockStoreOptions().fetch_threads,
          "worker: blocks fetched from under-stores at once.");
ABSL_FLAG(std::string, fetch_buffer,
          larder::BytesFlagText(larder::BlockStoreOptions().fetch_buffer_bytes),
          "worker: most bytes of blocks being fetched at once (memory beyond "
          "--ram_capacity); a fetch that does not fit waits. 0: no bound but "
          "--fetch_threads.");
ABSL_FLAG(int, nvme_read_threads, larder::BlockStoreOptions().nvme_read_threads,
          "worker: blocks read back from the NVMe tier at once (apart from "
          "the fetches, so a store that hangs never delays them).");
ABSL_FLAG(std::string, write_buffer,
          larder::BytesFlagText(larder::WriteStagingOptions().max_bytes),
          "worker: most bytes of written objects held at once (parts being "
          "uploaded, blocks kept for the cache until the commit).");
ABSL_FLAG(int, upload_threads, larder::WorkerOptions().upload_threads,
          "worker: parts of written objects uploaded to under-stores at "
          "once.");
ABSL_FLAG(int, write_nice, larder::WorkerOptions().write_nice,
          "worker: how many nice steps below the worker's own priority the "
          "work of writes runs (receiving, uploading, publishing parts), so "
          "that a checkpoint's save yields the CPU to reads; 0 to 19.");

ABSL_FLAG(std::string, worker_id, "",
          "worker: id in the cluster (default: <node>:<grpc port>).");
ABSL_FLAG(std::string, node, "",
          "worker: node name; clients on the same node use short-circuit "
          "(default: host name).");
ABSL_FLAG(std::string, advertise, "",
          "worker, master: the address others reach it at (worker default: "
          "--listen with the bound port; master, with --etcd: "
          "--master_listen, with the host name for 0.0.0.0).");

namespace larder::cli {
namespace {

constexpr absl::string_view kUsage = R"(larder worker: run a cache worker.

  larder worker [--master=HOST:PORT] [--mount=NAME=URI,...] [--listen=127.0.0.1:7070]
                [--short_circuit_socket=/run/larder/worker.sock] [--ram_capacity=1GiB]
                [--nvme=DIR:SIZE,...] [--flags below]

Serves cached blocks over gRPC (WorkerData) and, with --short_circuit_socket, to local
clients by file descriptor. With --master (or LARDER_MASTER), it joins the cluster: registers,
heartbeats, reports its blocks and takes its mount table from the master; without, it runs
standalone and serves only its --mount mounts. Under-store credentials come from the environment
(AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, ~/.aws/credentials). SIGTERM or SIGINT stops it
gracefully: in-flight reads finish and the NVMe index stays consistent.
)";

absl::StatusOr<std::vector<uint32_t>> ParseIds(
    const std::vector<std::string>& names, bool groups) {
  std::vector<uint32_t> out;
  for (const std::string& n : names) {
    LARDER_ASSIGN_OR_RETURN(
        uint32_t id, ParseAccountId(groups ? "short_circuit_allowed_gids"
                                           : "short_circuit_allowed_uids",
                                    n, groups));
    out.push_back(id);
  }
  return out;
}

absl::StatusOr<WorkerOptions> OptionsFromFlags() {
  WorkerOptions o;
  o.listen = absl::GetFlag(FLAGS_listen);
  o.short_circuit_socket = absl::GetFlag(FLAGS_short_circuit_socket);
  LARDER_ASSIGN_OR_RETURN(
      o.short_circuit_allowed_uids,
      ParseIds(absl::GetFlag(FLAGS_short_circuit_allowed_uids), false));
  LARDER_ASSIGN_OR_RETURN(
      o.short_circuit_allowed_gids,
      ParseIds(absl::GetFlag(FLAGS_short_circuit_allowed_gids), true));
  o.ops_listen = absl::GetFlag(FLAGS_metrics_listen);
  LARDER_ASSIGN_OR_RETURN(o.store.ram_capacity_bytes,
                          ParseBytes(absl::GetFlag(FLAGS_ram_capacity)));
  if (const std::string max = absl::GetFlag(FLAGS_ram_max_blocks);
      max != "auto") {
    uint64_t n = 0;
    if (!absl::SimpleAtoi(max, &n) || n == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--ram_max_blocks: '", max, "' is not a positive count or auto"));
    }
    o.store.ram_max_blocks = static_cast<size_t>(n);
  }
  LARDER_ASSIGN_OR_RETURN(
      o.store.ram_policy,
      ParseEvictionPolicy(absl::GetFlag(FLAGS_ram_eviction)));
  LARDER_ASSIGN_OR_RETURN(
      o.store.rules,
      CacheRules::Parse(absl::GetFlag(FLAGS_pin), absl::GetFlag(FLAGS_ttl)));
  o.store.fetch_threads = absl::GetFlag(FLAGS_fetch_threads);
  o.store.nvme_read_threads =
      std::max(1, absl::GetFlag(FLAGS_nvme_read_threads));
  LARDER_ASSIGN_OR_RETURN(o.writes.max_bytes,
                          ParseBytes(absl::GetFlag(FLAGS_write_buffer)));
  o.upload_threads = std::max(1, absl::GetFlag(FLAGS_upload_threads));
  o.write_nice = absl::GetFlag(FLAGS_write_nice);
  if (o.write_nice < 0 || o.write_nice > 19) {
    return absl::InvalidArgumentError(
        absl::StrCat("--write_nice=", o.write_nice, ": must be 0 to 19"));
  }
  LARDER_ASSIGN_OR_RETURN(o.store.fetch_subrange_bytes,
                          ParseBytes(absl::GetFlag(FLAGS_fetch_subrange)));
  LARDER_ASSIGN_OR_RETURN(o.store.fetch_buffer_bytes,
                          ParseBytes(absl::GetFlag(FLAGS_fetch_buffer)));
  o.store.collapse_huge_pages = absl::GetFlag(FLAGS_collapse_huge_pages);
  if (const std::string max = absl::GetFlag(FLAGS_object_file_max_size);
      max != "auto") {
    LARDER_ASSIGN_OR_RETURN(uint64_t bytes, ParseBytes(max));
    // 1 byte: no object has two blocks and fits, so none gets a memfd.
    o.store.object_file_max_bytes = bytes == 0 ? 1 : bytes;
  }
  o.master = MasterAddress();
  o.metadata_cache.max_entries = static_cast<size_t>(
      std::max<int64_t>(1, absl::GetFlag(FLAGS_metadata_cache_entries)));
  LARDER_ASSIGN_OR_RETURN(
      const uint64_t metadata_bytes,
      ParseBytes(absl::GetFlag(FLAGS_metadata_cache_bytes)));
  o.metadata_cache.max_bytes = static_cast<size_t>(metadata_bytes);
  o.id = absl::GetFlag(FLAGS_worker_id);
  o.node = absl::GetFlag(FLAGS_node);
  o.advertise = absl::GetFlag(FLAGS_advertise);
  o.store_options.http = HttpOptionsFromFlags();
  o.store_options.allowed_file_roots = absl::GetFlag(FLAGS_allowed_file_roots);
  o.security = SecurityOptionsFromFlags();
  const std::vector<std::string> nvme = absl::GetFlag(FLAGS_nvme);
  if (!nvme.empty()) {
    NvmeOptions n;
    for (const std::string& entry : nvme) {
      size_t colon = entry.rfind(':');
      if (colon == std::string::npos || colon == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("bad --nvme entry '", entry, "': want DIR:SIZE"));
      }
      LARDER_ASSIGN_OR_RETURN(uint64_t cap,
                              ParseBytes(entry.substr(colon + 1)));
      n.dirs.push_back({entry.substr(0, colon), cap});
    }
    LARDER_ASSIGN_OR_RETURN(n.reserve_bytes,
                            ParseBytes(absl::GetFlag(FLAGS_nvme_reserve)));
    LARDER_ASSIGN_OR_RETURN(
        n.policy, ParseEvictionPolicy(absl::GetFlag(FLAGS_nvme_eviction)));
    n.sync_writes = absl::GetFlag(FLAGS_nvme_sync);
    o.store.nvme = std::move(n);
  }
  return o;
}

// What the worker serves, after its first line (which tests and scripts
// wait for).
void PrintStartup(const WorkerOptions& o, Worker& worker) {
  const std::string host = o.listen.substr(0, o.listen.rfind(':'));
  std::printf(
      "  serving      gRPC %s:%d (%s)%s%s\n", host.c_str(), worker.grpc_port(),
      DescribeSecurity(o.security).c_str(),
      o.short_circuit_socket.empty()
          ? ", no short-circuit socket"
          : absl::StrCat(", short-circuit ", o.short_circuit_socket).c_str(),
      o.ops_listen.empty()
          ? ", no metrics"
          : absl::StrCat(", /metrics on port ", worker.ops_port()).c_str());
  const BlockStore::Stats stats = worker.store().GetStats();
  std::printf(
      "  RAM tier     %s, %s eviction, at most %llu blocks (one file "
      "descriptor each)\n",
      FormatBytes(o.store.ram_capacity_bytes).c_str(),
      o.store.ram_policy == EvictionPolicy::kLru ? "LRU" : "no",
      static_cast<unsigned long long>(stats.ram_max_blocks));
  if (o.store.nvme) {
    for (const auto& d : o.store.nvme->dirs)
      std::printf("  NVMe tier    %s, %s\n", d.path.c_str(),
                  FormatBytes(d.capacity_bytes).c_str());
  } else {
    std::printf("  NVMe tier    none (--nvme=DIR:SIZE)\n");
  }
  if (o.master.empty()) {
    std::printf(
        "  cluster      standalone: no --master or LARDER_MASTER, so it joins "
        "no cluster and serves only its --mount mounts\n");
  } else {
    std::printf("  cluster      master %s (mount table from the master)\n",
                o.master.c_str());
  }
  const std::vector<Mount> mounts = worker.mounts().List();
  std::printf("  mounts       %zu now\n", mounts.size());
  for (const Mount& m : mounts)
    std::printf("               %s -> %s\n", m.name.c_str(), m.uri.c_str());
}

absl::Status RunWorker(const std::vector<std::string>& args) {
  LARDER_RETURN_IF_ERROR(RedirectStderrToLogFile(/*or_dev_null=*/false));
  if (!args.empty())
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", args[0], "'"));
  LARDER_ASSIGN_OR_RETURN(WorkerOptions options, OptionsFromFlags());
  auto mounts = std::make_unique<WorkerMounts>();
  LARDER_ASSIGN_OR_RETURN(uint64_t block_size,
                          ParseBytes(absl::GetFlag(FLAGS_block_size)));
  UnderStoreOptions store_options;
  store_options.http = HttpOptionsFromFlags();
  store_options.allowed_file_roots = absl::GetFlag(FLAGS_allowed_file_roots);
  LARDER_RETURN_IF_ERROR(mounts->AddFromFlags(absl::GetFlag(FLAGS_mount),
                                              block_size, store_options));

  // Signals are taken synchronously by this thread; every other thread
  // inherits the blocked mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const WorkerOptions shown = options;
  LARDER_ASSIGN_OR_RETURN(std::unique_ptr<Worker> worker,
                          Worker::Start(std::move(options), std::move(mounts)));
  std::printf("larder worker: gRPC port %d, metrics port %d\n",
              worker->grpc_port(), worker->ops_port());
  PrintStartup(shown, *worker);
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  LARDER_LOG(INFO, "worker.signal").Field("signal", sig);
  worker->Shutdown();
  return absl::OkStatus();
}

}  // namespace

const Command kWorkerCommand = {
    "worker", "run a cache worker (RAM + NVMe block cache)", kUsage, &RunWorker,
    FlagList({kLogFlags,
              kHttpFlags,
              kServerFlags,
              {"log_file",
               "master",
               "mount",
               "block_size",
               "listen",
               "advertise",
               "worker_id",
               "node",
               "short_circuit_socket",
               "short_circuit_allowed_uids",
               "short_circuit_allowed_gids",
               "metrics_listen",
               "ram_capacity",
               "ram_max_blocks",
               "metadata_cache_entries",
               "metadata_cache_bytes",
               "ram_eviction",
               "collapse_huge_pages",
               "object_file_max_size",
               "nvme",
               "nvme_reserve",
               "nvme_eviction",
               "nvme_sync",
               "pin",
               "ttl",
               "fetch_subrange",
               "fetch_threads",
               "fetch_buffer",
               "nvme_read_threads",
               "write_buffer",
               "upload_threads",
               "write_nice",
               "allowed_file_roots"}})};

}  // namespace larder::cli
