// Copyright 2026 The Larder Authors.
//
// larder::Client: the glue of the client library's parts. The metadata view
// (metadata_view.h) answers Stat and List; the router (router.h) orders a
// block's workers by the consistent-hash ring; the block reader
// (block_reader.h) reads a block with failover, by short-circuit for the
// worker on this node (local_leases.h) and gRPC for the others, then from
// the under-store; open files (open_file.h) and batches (batch.h) read
// through it. This file keeps the ring, the mount table and invalidations
// current, and answers what needs the master.
#include "larder/client.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "client/batch.h"
#include "client/block_reader.h"
#include "client/local_leases.h"
#include "client/metadata_cache.h"
#include "client/metadata_view.h"
#include "client/open_file.h"
#include "client/router.h"
#include "client/short_circuit_client.h"
#include "client/worker_client.h"
#include "client/writer.h"
#include "common/block_key.h"
#include "common/block_proto.h"
#include "common/grpc_status.h"
#include "common/master_connection.h"
#include "common/mount_set.h"
#include "common/security.h"
#include "common/status_macros.h"
#include "common/thread_pool.h"
#include "proto/master.grpc.pb.h"
#include "understore/uri.h"

namespace larder {

// What a client knew, for a client that starts warm from it.
struct ClientWarmState {
  std::string master;  // Only a client of the same masters starts from it.
  v1::Ring ring;
  absl::Time ring_at = absl::InfinitePast();
  v1::MountTable mounts;
  uint64_t inval_epoch = 0;
  uint64_t inval_seq = 0;
  std::shared_ptr<NodeMetadataCache> meta;
};

namespace {

// `options` with its node filled in (the host name when unset).
ClientOptions WithNode(ClientOptions options) {
  if (options.node.empty()) {
    char host[256] = {0};
    ::gethostname(host, sizeof(host) - 1);
    options.node = host;
  }
  return options;
}

BlockReader::Options ReaderOptions(const ClientOptions& o) {
  BlockReader::Options r;
  r.max_workers_per_block = o.max_workers_per_block;
  r.worker_timeout = o.worker_timeout;
  r.under_store_fallback = o.under_store_fallback;
  r.fallback.http = o.fallback_http;
  r.fallback.allowed_file_roots = o.fallback_file_roots;
  return r;
}

class ClientImpl final : public Client, private MetadataView::Backend {
 public:
  ClientImpl(ClientOptions options,
             std::shared_ptr<const ChannelFactory> channels)
      : options_(WithNode(std::move(options))),
        channels_(std::move(channels)),
        local_(options_.worker_timeout),
        router_(
            {.node = options_.node},
            [this](const v1::LocateRequest& req)
                -> absl::StatusOr<v1::LocateResponse> {
              v1::LocateResponse resp;
              LARDER_RETURN_IF_ERROR(FromGrpcStatus(master_->Call(
                  &v1::Master::Stub::Locate, req, &resp, absl::Seconds(2))));
              return resp;
            },
            [this](const std::string& socket) {
              return local_.Refused(socket);
            },
            [this](const std::string& address) {
              return std::make_shared<WorkerClient>(address, *channels_);
            }),
        reader_(ReaderOptions(options_), router_, local_,
                {.refresh_ring = [this] { return RefreshRing(/*force=*/true); },
                 .note_ring_version =
                     [this](uint64_t version) { NoteRingVersion(version); },
                 .mount = [this](const std::string& path)
                     -> std::optional<v1::MountEntry> {
                   const v1::MountEntry* m = mounts()->Find(path);
                   if (m == nullptr) return std::nullopt;
                   return *m;
                 }}),
        view_({.stale_window = options_.metadata_stale_window,
               .master = options_.master},
              options_.warm_start && options_.warm_start->meta
                  ? options_.warm_start->meta
                  : std::make_shared<NodeMetadataCache>(
                        MetadataCacheOptions{options_.metadata_cache_entries,
                                             options_.metadata_cache_bytes}),
              this),
        pool_(std::make_unique<ThreadPool>(std::max(1, options_.parallel_reads),
                                           "larder-client")),
        // Lease-ahead waits while the worker fetches a miss; it has threads
        // of its own so it never delays a reader's parallel block reads.
        lease_ahead_pool_(std::make_unique<ThreadPool>(2, "larder-leaseahead")),
        files_{this, &reader_, pool_.get(), options_.readahead_blocks,
               [this](const std::vector<BlockId>& ids) { Readahead(ids); }} {}

  // Background tasks use the members below: their threads stop first.
  ~ClientImpl() override {
    if (poller_.joinable()) {
      stop_polling_.Notify();
      poller_.join();
    }
    lease_ahead_pool_.reset();
    pool_.reset();
  }

  absl::Status Init() {
    LARDER_ASSIGN_OR_RETURN(
        master_, MasterConnection::Create(options_.master, channels_));
    if (const std::shared_ptr<const ClientWarmState>& w = options_.warm_start;
        w != nullptr && w->master == options_.master) {
      // What the client this one follows knew, as of when it learnt it: the
      // ring is refreshed when ring_refresh has passed since then.
      InstallRing(w->ring);
      InstallMounts(w->mounts);
      view_.StartFrom(w->inval_epoch, w->inval_seq);
      ring_attempted_ns_ = w->ring_at == absl::InfinitePast()
                               ? 0
                               : absl::ToUnixNanos(w->ring_at);
    } else {
      LARDER_RETURN_IF_ERROR(RefreshRing(/*force=*/true));
      LARDER_RETURN_IF_ERROR(RefreshMounts());
    }
    // The ring, the mount table and invalidations are polled, also while the
    // client is idle: a FUSE daemon whose kernel answers from its own caches
    // must still hear of an invalidation (and pass it on). RefreshRing
    // refreshes at most every ring_refresh; ticking more often keeps the
    // bound near ring_refresh after a refresh a failover forced.
    poller_ = std::thread([this] {
      const absl::Duration tick =
          std::min(absl::Seconds(1), options_.ring_refresh);
      while (!stop_polling_.WaitForNotificationWithTimeout(tick)) {
        RefreshRing(/*force=*/false).IgnoreError();
      }
    });
    return absl::OkStatus();
  }

  absl::StatusOr<FileInfo> Stat(absl::string_view path) override {
    LARDER_ASSIGN_OR_RETURN(v1::StatResponse r, MetaStat(path));
    return FromProto(r.info());
  }

  std::optional<absl::StatusOr<FileInfo>> CachedStat(
      absl::string_view path) override {
    std::optional<absl::StatusOr<v1::StatResponse>> r = view_.CachedStat(path);
    if (!r) return std::nullopt;
    if (!r->ok()) return r->status();
    return FromProto((*r)->info());
  }

  absl::StatusOr<std::shared_ptr<const std::vector<FileInfo>>> ListDir(
      absl::string_view path) override {
    return view_.ListDir(path);
  }

  std::shared_ptr<const std::vector<FileInfo>> CachedListDir(
      absl::string_view path) override {
    return view_.CachedListDir(path);
  }

  bool AnyWritableMount() const override {
    const std::shared_ptr<const MountSet> set = mounts();
    for (const v1::MountEntry& m : set->table().mounts()) {
      if (m.writable()) return true;
    }
    return false;
  }

  absl::StatusOr<ListResult> List(absl::string_view path,
                                  absl::string_view page_token, int page_size,
                                  bool recursive) override {
    LARDER_ASSIGN_OR_RETURN(v1::ListResponse resp,
                            ListRpc(path, page_token, page_size, recursive));
    ListResult out;
    for (const auto& e : resp.entries()) out.entries.push_back(FromProto(e));
    out.next_page_token = resp.next_page_token();
    return out;
  }

  absl::StatusOr<v1::ListResponse> ListRpc(absl::string_view path,
                                           absl::string_view page_token,
                                           int page_size, bool recursive) {
    v1::ListRequest req;
    req.set_path(std::string(path));
    req.set_page_token(std::string(page_token));
    req.set_page_size(static_cast<uint32_t>(std::max(1, page_size)));
    req.set_recursive(recursive);
    // The master holds a caller without credentials to a mount's "other"
    // bits; the local worker knows this process's uid and groups, and
    // answers such a process by them (what it would read through the
    // worker). A credential's holder is held to its role and mounts.
    if (Anonymous()) {
      if (std::optional<v1::ListResponse> page = NodeList(req)) {
        NoteRingVersion(page->ring_version());
        return *std::move(page);
      }
    }
    v1::ListResponse resp;
    LARDER_RETURN_IF_ERROR(MasterError(
        master_->Call(&v1::Master::Stub::List, req, &resp, absl::Seconds(60))));
    NoteRingVersion(resp.ring_version());
    return resp;
  }

  // Whether this process calls the master without credentials.
  bool Anonymous() const {
    return !channels_->has_token() && !channels_->has_local_admin_token() &&
           options_.security.tls_cert_file.empty();
  }

  // The local worker's LIST (see ShortCircuitRequest.LIST); none when there
  // is no local worker or it does not answer.
  std::optional<v1::ListResponse> NodeList(const v1::ListRequest& req) {
    const std::string socket = router_.LocalSocket();
    if (socket.empty()) return std::nullopt;
    absl::StatusOr<std::shared_ptr<ShortCircuitClient>> sc =
        local_.Take(socket);
    if (!sc.ok()) return std::nullopt;
    absl::StatusOr<v1::ListResponse> page = (*sc)->List(req);
    if ((*sc)->refused()) {
      local_.NoteRefused(socket, page.status());
      return std::nullopt;
    }
    if (page.ok() || !(*sc)->broken()) local_.Give(socket, *std::move(sc));
    if (!page.ok()) return std::nullopt;
    return *std::move(page);
  }

  absl::StatusOr<std::unique_ptr<File>> Open(absl::string_view path) override {
    LARDER_ASSIGN_OR_RETURN(v1::StatResponse r, MetaStat(path));
    if (r.info().is_dir())
      return absl::InvalidArgumentError(
          absl::StrCat("'", path, "' is a directory"));
    return std::unique_ptr<File>(new OpenFile(&files_, std::move(r)));
  }

  absl::StatusOr<std::unique_ptr<File>> OpenKnown(
      const FileInfo& info) override {
    if (info.is_dir) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", info.path, "' is a directory"));
    }
    if (info.version.empty()) return Open(info.path);
    absl::StatusOr<std::string> key = NormalizeClusterPath(info.path);
    if (!key.ok()) return key.status();
    std::optional<v1::MountEntry> m = MountOf(*key);
    if (!m) {  // A mount added since this client learnt the table.
      RefreshMounts().IgnoreError();
      m = MountOf(*key);
    }
    if (!m || key->size() <= m->path().size()) {
      // The master says what the file is; still only the version listed.
      LARDER_ASSIGN_OR_RETURN(std::unique_ptr<File> f, Open(info.path));
      if (f->info().version != info.version) {
        return absl::FailedPreconditionError(
            absl::StrCat(*key, " changed since it was listed (version ",
                         info.version, ", now ", f->info().version, ")"));
      }
      return f;
    }
    v1::StatResponse r;
    ToProto(info, r.mutable_info());
    r.mutable_info()->set_path(*key);
    r.set_mount(m->path());
    r.set_relative(key->substr(m->path().size() + 1));
    r.set_block_size(m->block_size());
    return std::unique_ptr<File>(new OpenFile(&files_, std::move(r)));
  }

  std::unique_ptr<FileBatch> ReadBatch(absl::Span<File* const> files) override {
    std::vector<BatchFile> batch(files.size());
    for (size_t i = 0; i < files.size(); ++i) {
      auto* f = static_cast<OpenFile*>(files[i]);
      BatchFile& b = batch[i];
      b.path = f->info().path;
      b.size = f->info().size;
      if (f->client() != this) {
        b.status = absl::InvalidArgumentError(
            absl::StrCat(b.path, " was opened by another client"));
        continue;
      }
      for (uint64_t k = 0; k < f->blocks(); ++k)
        b.blocks.push_back(f->Block(k));
    }
    return larder::ReadBatch(std::move(batch), router_, local_, reader_,
                             *pool_);
  }

  std::vector<absl::StatusOr<LocalSlice>> OpenLocalObjects(
      absl::Span<File* const> files, absl::Duration lease) override {
    std::vector<absl::StatusOr<LocalSlice>> out(files.size());
    std::vector<BlockId> firsts;
    std::vector<size_t> at;
    for (size_t i = 0; i < files.size(); ++i) {
      auto* f = static_cast<OpenFile*>(files[i]);
      if (f->client() != this) {
        out[i] = absl::InvalidArgumentError(
            absl::StrCat(f->info().path, " was opened by another client"));
      } else if (f->info().size == 0) {
        out[i] = absl::FailedPreconditionError("an empty file has no memfd");
      } else {
        firsts.push_back(f->Block(0));
        at.push_back(i);
      }
    }
    std::vector<absl::StatusOr<LocalSlice>> slices =
        reader_.LocalObjects(firsts, lease);
    for (size_t k = 0; k < slices.size(); ++k)
      out[at[k]] = std::move(slices[k]);
    return out;
  }

  std::vector<absl::Status> ReadFiles(
      absl::Span<File* const> files,
      absl::Span<const absl::Span<char>> out) override {
    std::unique_ptr<FileBatch> batch = ReadBatch(files);
    std::vector<absl::Status> results(files.size());
    for (size_t i = 0; i < files.size(); ++i) {
      results[i] = i < out.size()
                       ? batch->ReadInto(i, out[i])
                       : absl::InvalidArgumentError("no buffer for the file");
    }
    return results;
  }

  absl::Status Prefetch(const std::vector<std::string>& paths) override {
    absl::flat_hash_map<WorkerClient*, std::vector<BlockId>> by_worker;
    const std::shared_ptr<const RingSnapshot> ring = router_.snapshot();
    for (const std::string& p : paths) {
      LARDER_ASSIGN_OR_RETURN(v1::StatResponse r, view_.Stat(p));
      if (r.info().is_dir()) continue;
      for (uint64_t b = 0; b < BlockCount(r.info().size(), r.block_size());
           ++b) {
        BlockId id{r.mount(), r.relative(),   r.info().version(),
                   b,         r.block_size(), r.info().size()};
        const Router::Route owners = router_.Owners(ring, id, 1);
        if (!owners.empty())
          by_worker[owners.front().client].push_back(std::move(id));
      }
    }
    // `ring` keeps the workers' clients alive.
    for (auto& [worker, ids] : by_worker) {
      LARDER_RETURN_IF_ERROR(
          worker->CacheBlocks(ids, /*wait=*/false, absl::Seconds(10)));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<uint64_t> CachedBytes(absl::string_view path) override {
    LARDER_ASSIGN_OR_RETURN(v1::StatResponse r, MetaStat(path));
    if (r.info().is_dir())
      return absl::InvalidArgumentError(
          absl::StrCat("'", path, "' is a directory"));
    v1::LocateRequest req;
    std::vector<uint64_t> lengths;
    for (uint64_t b = 0; b < BlockCount(r.info().size(), r.block_size()); ++b) {
      BlockId id{r.mount(), r.relative(),   r.info().version(),
                 b,         r.block_size(), r.info().size()};
      req.add_block_keys(KeyToBytes(id.Key()));
      lengths.push_back(id.length());
    }
    v1::LocateResponse resp;
    LARDER_RETURN_IF_ERROR(MasterError(master_->Call(
        &v1::Master::Stub::Locate, req, &resp, absl::Seconds(10))));
    uint64_t cached = 0;
    for (int i = 0;
         i < resp.locations_size() && i < static_cast<int>(lengths.size());
         ++i) {
      if (resp.locations(i).worker_ids_size() > 0) cached += lengths[i];
    }
    return cached;
  }

  absl::StatusOr<std::unique_ptr<Writer>> Create(
      absl::string_view path, const WriteOptions& options) override {
    WriterDeps deps;
    deps.master = master_.get();
    deps.router = &router_;
    deps.refresh_ring = [this] { return RefreshRing(/*force=*/true); };
    deps.master_error = [this](const grpc::Status& s) {
      return MasterError(s);
    };
    deps.parallel_writes = options_.parallel_writes;
    return CreateWriter(deps, path, options);
  }

  void SetInvalidationHook(
      std::function<void(const std::string&)> hook) override {
    view_.SetInvalidationHook(std::move(hook));
  }

  ClientStats stats() const override {
    ClientStats s;
    const BlockReader::Counters b = reader_.counters();
    s.blocks_short_circuit = b.short_circuit;
    s.blocks_grpc = b.grpc;
    s.blocks_under_store = b.under_store;
    s.failovers = b.failovers;
    s.ring_refreshes = ring_refreshes_;
    const MetadataView::Counters m = view_.counters();
    s.metadata_hits = m.hits;
    s.metadata_misses = m.misses;
    s.metadata_node_hits = m.node_hits;
    s.metadata_stale_served = m.stale;
    const NodeMetadataCache::Counters c = view_.cache()->counters();
    s.metadata_entries = c.entries;
    s.metadata_bytes = c.bytes;
    s.metadata_evictions = c.evictions;
    s.metadata_invalidated = c.invalidations;
    return s;
  }

  std::shared_ptr<const ClientWarmState> WarmState() override {
    auto w = std::make_shared<ClientWarmState>();
    w->master = options_.master;
    w->meta = view_.cache();
    std::tie(w->inval_epoch, w->inval_seq) = view_.invalidations();
    w->mounts = mounts()->table();
    absl::MutexLock lock(&warm_mu_);
    w->ring = last_ring_;
    w->ring_at = last_ring_at_;
    return w;
  }

 private:
  // Blocks whose owner is on this node are leased ahead over the
  // short-circuit socket (the worker fetches misses first), so the read
  // finds its lease kept and pays no round trip at all; the others are
  // fetched ahead by their owners (CacheBlocks).
  void Readahead(const std::vector<BlockId>& ids) {
    absl::flat_hash_map<WorkerClient*, std::vector<BlockId>> by_worker;
    absl::flat_hash_map<std::string, std::vector<BlockId>> local;
    const std::shared_ptr<const RingSnapshot> ring = router_.snapshot();
    for (const BlockId& id : ids) {
      const Router::Route owners = router_.Owners(ring, id, 1);
      if (owners.empty()) continue;
      const Router::Candidate& c = owners.front();
      if (c.local) {
        const std::string& socket = c.worker->short_circuit_socket();
        if (local_.Find(socket, id) == nullptr) local[socket].push_back(id);
      } else {
        by_worker[c.client].push_back(id);
      }
    }
    for (auto& [socket, blocks] : local) {
      lease_ahead_pool_->Schedule([this, socket = socket, blocks = blocks] {
        local_.LeaseAhead(socket, blocks);
      });
    }
    for (auto& [worker, blocks] : by_worker) {
      // The snapshot keeps the worker's client alive.
      pool_->Schedule([ring, worker = worker, blocks = blocks] {
        worker->CacheBlocks(blocks, /*wait=*/false, absl::Seconds(5))
            .IgnoreError();
      });
    }
  }

  absl::Status MasterError(const grpc::Status& s) const {
    absl::Status st = FromGrpcStatus(s);
    // An UNAVAILABLE the master itself returned (its under-store is down) is
    // passed on as it is.
    if (!FromLarderServer(s) &&
        (st.code() == absl::StatusCode::kUnavailable ||
         st.code() == absl::StatusCode::kDeadlineExceeded)) {
      return absl::UnavailableError(
          absl::StrCat("cannot reach ",
                       master_->several() ? "any Larder master of "
                                          : "the Larder master at ",
                       options_.master, " (", st.message(),
                       "); is `larder master` running?"));
    }
    return st;
  }

  // --- the metadata view's backend ----------------------------------------

  absl::StatusOr<v1::StatResponse> MetaStat(absl::string_view path) {
    return view_.Stat(path);
  }

  absl::StatusOr<v1::StatResponse> MasterStat(
      const std::string& path) override {
    return StatRpc(path);
  }

  absl::StatusOr<v1::ListResponse> MasterList(
      const std::string& path, const std::string& page_token) override {
    return ListRpc(path, page_token, 1000, false);
  }

  absl::StatusOr<v1::GetInvalidationsResponse> MasterInvalidations(
      uint64_t epoch, uint64_t after_seq) override {
    v1::GetInvalidationsRequest req;
    req.set_epoch(epoch);
    req.set_after_seq(after_seq);
    v1::GetInvalidationsResponse resp;
    LARDER_RETURN_IF_ERROR(MasterError(master_->Call(
        &v1::Master::Stub::GetInvalidations, req, &resp, absl::Seconds(10))));
    return resp;
  }

  // The local worker's node metadata cache (STAT on its short-circuit
  // socket); none when there is no local worker, when it does not answer
  // for `key` or this process, or when it fails.
  std::optional<NodeAnswer> NodeStat(const std::string& key, uint64_t epoch,
                                     uint64_t seq) override {
    if (node_stat_unsupported_.load(std::memory_order_relaxed))
      return std::nullopt;
    const std::string socket = router_.LocalSocket();
    if (socket.empty()) return std::nullopt;
    absl::StatusOr<std::shared_ptr<ShortCircuitClient>> sc =
        local_.Take(socket);
    if (!sc.ok()) return std::nullopt;
    absl::StatusOr<ShortCircuitClient::StatAnswer> a =
        (*sc)->Stat(key, epoch, seq);
    if ((*sc)->refused()) {
      local_.NoteRefused(socket, a.status());
      return std::nullopt;
    }
    // A connection that failed to carry the exchange is not reused.
    if (a.ok() || (a.status().code() != absl::StatusCode::kUnavailable &&
                   a.status().code() != absl::StatusCode::kInternal &&
                   a.status().code() != absl::StatusCode::kDeadlineExceeded)) {
      local_.Give(socket, *std::move(sc));
    }
    if (!a.ok()) {
      if (a.status().code() == absl::StatusCode::kUnimplemented)
        node_stat_unsupported_.store(true, std::memory_order_relaxed);
      if (IsStoreError(a.status()))
        return NodeAnswer{{a.status(), {}}, absl::ZeroDuration()};
      return std::nullopt;
    }
    NoteRingVersion(a->response.ring_version());
    return NodeAnswer{{std::move(a->status), std::move(a->response)}, a->ttl};
  }

  // The mount that holds `path`.
  std::optional<v1::MountEntry> MountOf(const std::string& path) override {
    const std::shared_ptr<const MountSet> m = mounts();
    std::optional<MountSet::Resolved> r = m->Resolve(path);
    if (!r) return std::nullopt;
    return *r->entry;
  }

  absl::StatusOr<v1::StatResponse> StatRpc(absl::string_view path) {
    v1::StatRequest req;
    req.set_path(std::string(path));
    v1::StatResponse resp;
    LARDER_RETURN_IF_ERROR(MasterError(
        master_->Call(&v1::Master::Stub::Stat, req, &resp, absl::Seconds(30))));
    NoteRingVersion(resp.ring_version());
    return resp;
  }

  // A response from the master or a worker carried `version`: refresh the
  // ring if ours is older.
  void NoteRingVersion(uint64_t version) {
    if (version <= router_.version()) return;
    RefreshRing(/*force=*/true).IgnoreError();
  }

  absl::Status RefreshRing(bool force) {
    // One caller refreshes; a failed try waits as long as a success.
    const int64_t now = absl::GetCurrentTimeNanos();
    if (force) {
      ring_attempted_ns_.store(now);
    } else {
      int64_t last = ring_attempted_ns_.load();
      if (now - last < absl::ToInt64Nanoseconds(options_.ring_refresh) ||
          !ring_attempted_ns_.compare_exchange_strong(last, now)) {
        return absl::OkStatus();
      }
    }
    v1::Ring ring;
    LARDER_RETURN_IF_ERROR(MasterError(
        master_->Call(&v1::Master::Stub::GetRing, v1::GetRingRequest(), &ring,
                      absl::Seconds(10))));
    const bool mounts_changed = InstallRing(ring);
    if (mounts_changed) RefreshMounts().IgnoreError();
    view_.SyncInvalidations(ring.metadata_epoch(), ring.invalidation_seq());
    return absl::OkStatus();
  }

  // Uses `ring`; true when it names a mount table other than ours.
  bool InstallRing(const v1::Ring& ring) {
    ++ring_refreshes_;
    const bool changed = router_.Install(ring);
    {
      absl::MutexLock lock(&warm_mu_);
      if (changed) last_ring_ = ring;
      last_ring_at_ = absl::Now();
    }
    return ring.mounts_version() != mounts()->version();
  }

  absl::Status RefreshMounts() {
    v1::MountTable table;
    LARDER_RETURN_IF_ERROR(MasterError(
        master_->Call(&v1::Master::Stub::GetMounts, v1::GetMountsRequest(),
                      &table, absl::Seconds(10))));
    InstallMounts(table);
    return absl::OkStatus();
  }

  void InstallMounts(const v1::MountTable& table) {
    mounts_.store(std::make_shared<const MountSet>(table),
                  std::memory_order_release);
  }
  std::shared_ptr<const MountSet> mounts() const {
    return mounts_.load(std::memory_order_acquire);
  }

  const ClientOptions options_;
  const std::shared_ptr<const ChannelFactory> channels_;
  std::unique_ptr<MasterConnection> master_;
  // Connections to, and leases from, the workers on this node.
  LocalLeases local_;
  Router router_;
  BlockReader reader_;
  // Metadata: the process's cache (shared with the clients that start warm
  // from this one: WarmState) in front of the node's and the master.
  MetadataView view_;
  std::unique_ptr<ThreadPool> pool_, lease_ahead_pool_;
  const FileContext files_;
  std::atomic<std::shared_ptr<const MountSet>> mounts_{
      std::make_shared<const MountSet>()};
  // When the ring was last asked for (Unix ns; 0: never).
  std::atomic<int64_t> ring_attempted_ns_{0};
  std::atomic<uint64_t> ring_refreshes_{0};
  // The ring answer the router was built from, and when (WarmState).
  absl::Mutex warm_mu_;
  v1::Ring last_ring_ ABSL_GUARDED_BY(warm_mu_);
  absl::Time last_ring_at_ ABSL_GUARDED_BY(warm_mu_) = absl::InfinitePast();
  // The local worker answered a STAT as a worker from before it would.
  std::atomic<bool> node_stat_unsupported_{false};
  absl::Notification stop_polling_;
  std::thread poller_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(ClientOptions options) {
  if (options.master.empty())
    return absl::InvalidArgumentError("ClientOptions.master is empty");
  LARDER_ASSIGN_OR_RETURN(std::shared_ptr<const ChannelFactory> channels,
                          ChannelFactory::Create(options.security));
  auto c =
      std::make_unique<ClientImpl>(std::move(options), std::move(channels));
  LARDER_RETURN_IF_ERROR(c->Init());
  return std::unique_ptr<Client>(std::move(c));
}

}  // namespace larder
