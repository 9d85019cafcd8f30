// Copyright 2026 The Larder Authors.
//
// larder::Client: routing of block reads by the consistent-hash ring, with
// short-circuit for local owners, failover along the ring and a final
// under-store fallback.
#include "larder/client.h"

#include <grpcpp/create_channel.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "client/local_leases.h"
#include "client/metadata_cache.h"
#include "client/metadata_view.h"
#include "client/short_circuit_client.h"
#include "client/worker_client.h"
#include "common/block_key.h"
#include "common/block_proto.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/master_connection.h"
#include "common/ring.h"
#include "common/security.h"
#include "common/status_macros.h"
#include "common/thread_pool.h"
#include "proto/master.grpc.pb.h"
#include "understore/mount_store.h"
#include "understore/uri.h"

namespace larder {
namespace {

// The under-store options of the direct-read fallback: see
// ClientOptions::fallback_file_roots.
UnderStoreOptions FallbackStoreOptions(const ClientOptions& o) {
  UnderStoreOptions u;
  u.allowed_file_roots = o.fallback_file_roots;
  return u;
}

}  // namespace

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

class ClientImpl;

class FileImpl final : public File {
 public:
  FileImpl(ClientImpl* client, v1::StatResponse stat)
      : client_(client),
        stat_(std::move(stat)),
        info_(FromProto(stat_.info())) {}
  const FileInfo& info() const override { return info_; }
  absl::StatusOr<size_t> Read(uint64_t offset, absl::Span<char> out) override;
  absl::StatusOr<std::vector<ReadPiece>> ReadPieces(uint64_t offset,
                                                    uint64_t length) override;
  absl::StatusOr<ByteView> ReadView(uint64_t offset, uint64_t length) override;
  absl::StatusOr<LocalSlice> OpenLocalObject() override;

 private:
  // The end of a read of `length` bytes at `offset`: clipped to the file,
  // `offset` when there is nothing to read; OutOfRange beyond the end.
  absl::StatusOr<uint64_t> End(uint64_t offset, uint64_t length) const;
  // Calls `read(i, block, in_block, at, n)` for the i-th block piece of
  // [offset, end): n bytes at `in_block` of `block`, `at` bytes into the
  // read. The first piece is read by this thread, the others in parallel on
  // the client's pool; returns the first error.
  absl::Status ForEachPiece(
      uint64_t offset, uint64_t end,
      absl::FunctionRef<absl::Status(
          size_t i, uint64_t block, uint64_t in_block, uint64_t at, uint64_t n)>
          read);
  // One result per block piece of [offset, end), in order, each from
  // `read(block, offset in the block, length)`; read as ForEachPiece does.
  template <typename T>
  absl::StatusOr<std::vector<T>> EachBlock(
      uint64_t offset, uint64_t end,
      absl::FunctionRef<absl::StatusOr<T>(const BlockId&, uint64_t, uint64_t)>
          read) {
    const uint64_t bs = stat_.block_size();
    std::vector<T> out((end - 1) / bs - offset / bs + 1);
    LARDER_RETURN_IF_ERROR(ForEachPiece(
        offset, end,
        [&](size_t i, uint64_t block, uint64_t in_block, uint64_t,
            uint64_t n) -> absl::Status {
          LARDER_ASSIGN_OR_RETURN(out[i], read(Block(block), in_block, n));
          return absl::OkStatus();
        }));
    return out;
  }
  // Starts readahead for a sequential reader of [offset, end).
  void NoteRead(uint64_t offset, uint64_t end);

 public:
  BlockId Block(uint64_t index) const {
    return BlockId{stat_.mount(), stat_.relative(),   info_.version,
                   index,         stat_.block_size(), info_.size};
  }
  uint64_t blocks() const { return BlockCount(info_.size, stat_.block_size()); }
  ClientImpl* client() const { return client_; }

 private:
  ClientImpl* const client_;
  const v1::StatResponse stat_;
  const FileInfo info_;
  std::atomic<uint64_t> next_sequential_{0};
  std::atomic<uint64_t> readahead_until_{
      0};  // Blocks [.., until) already requested.
};

class ClientImpl final : public Client, private MetadataView::Backend {
 public:
  ClientImpl(ClientOptions options,
             std::shared_ptr<const ChannelFactory> channels)
      : options_(std::move(options)),
        channels_(std::move(channels)),
        view_({.stale_window = options_.metadata_stale_window,
               .master = options_.master},
              options_.warm_start && options_.warm_start->meta
                  ? options_.warm_start->meta
                  : std::make_shared<NodeMetadataCache>(
                        MetadataCacheOptions{options_.metadata_cache_entries,
                                             options_.metadata_cache_bytes}),
              this) {
    if (options_.node.empty()) {
      char host[256] = {0};
      ::gethostname(host, sizeof(host) - 1);
      options_.node = host;
    }

    pool_ = std::make_unique<ThreadPool>(std::max(1, options_.parallel_reads),
                                         "larder-client");
    // Lease-ahead waits while the worker fetches a miss; it has threads of
    // its own so it never delays a reader's parallel block reads.
    lease_ahead_pool_ = std::make_unique<ThreadPool>(2, "larder-leaseahead");
  }

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
      absl::MutexLock lock(&mu_);
      ring_attempted_ = w->ring_at;
    } else {
      LARDER_RETURN_IF_ERROR(RefreshRing(/*force=*/true));
      LARDER_RETURN_IF_ERROR(RefreshMounts());
    }
    // The ring, the mount table and invalidations are also polled while the
    // client is idle: a FUSE daemon whose kernel answers from its own caches
    // must still hear of an invalidation (and pass it on).
    // RefreshRing refreshes at most every ring_refresh; ticking more often
    // keeps the bound at ring_refresh after a foreground refresh.
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

  absl::StatusOr<std::shared_ptr<const std::vector<FileInfo>>> ListDir(
      absl::string_view path) override {
    return view_.ListDir(path);
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
    v1::ListResponse resp;
    LARDER_RETURN_IF_ERROR(MasterError(
        master_->Call(&v1::Master::Stub::List, req, &resp, absl::Seconds(60))));
    NoteRingVersion(resp.ring_version());
    return resp;
  }

  absl::StatusOr<std::unique_ptr<File>> Open(absl::string_view path) override {
    LARDER_ASSIGN_OR_RETURN(v1::StatResponse r, MetaStat(path));
    if (r.info().is_dir())
      return absl::InvalidArgumentError(
          absl::StrCat("'", path, "' is a directory"));
    return std::unique_ptr<File>(new FileImpl(this, std::move(r)));
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
    return std::unique_ptr<File>(new FileImpl(this, std::move(r)));
  }

  std::unique_ptr<FileBatch> ReadBatch(absl::Span<File* const> files) override {
    auto batch = std::make_unique<BatchImpl>(this, files.size());
    for (size_t i = 0; i < files.size(); ++i) {
      auto* f = static_cast<FileImpl*>(files[i]);
      BatchImpl::FileParts& fp = batch->files_[i];
      fp.path = f->info().path;
      fp.size = f->info().size;
      if (f->client() != this) {
        fp.status = absl::InvalidArgumentError(
            absl::StrCat(fp.path, " was opened by another client"));
        continue;
      }
      for (uint64_t b = 0; b < f->blocks(); ++b)
        fp.parts.push_back(BatchImpl::Part{f->Block(b)});
    }
    std::vector<BatchImpl::Part*> parts;
    for (BatchImpl::FileParts& fp : batch->files_)
      for (BatchImpl::Part& p : fp.parts) parts.push_back(&p);
    std::vector<std::vector<v1::WorkerInfo>> owners(parts.size());
    std::vector<const BlockId*> ids(parts.size());
    std::vector<std::string> owner_ids(parts.size());
    for (size_t k = 0; k < parts.size(); ++k) {
      owners[k] = Owners(parts[k]->id, 1);
      ids[k] = &parts[k]->id;
      if (!owners[k].empty()) owner_ids[k] = owners[k][0].id();
    }
    LocateAhead(ids, owner_ids);
    absl::flat_hash_map<std::string, std::vector<BatchImpl::Part*>> local;
    std::vector<BatchImpl::Part*> remote;
    for (size_t k = 0; k < parts.size(); ++k) {
      std::vector<v1::WorkerInfo> where =
          HealthyFirst(WhereCached(parts[k]->id, std::move(owners[k])));
      if (!where.empty() && ShortCircuitTo(where[0])) {
        local[where[0].short_circuit_socket()].push_back(parts[k]);
      } else {
        remote.push_back(parts[k]);
      }
    }
    for (auto& [socket, held] : local) LeaseParts(socket, held, *batch);
    ParallelFor(*pool_, remote.size(), [&](size_t k) {
      BatchImpl::Part& p = *remote[k];
      absl::StatusOr<ByteView> v = ReadBlockView(p.id, 0, p.id.length());
      if (v.ok()) {
        p.view = *std::move(v);
      } else {
        p.status = v.status();
      }
    });
    return batch;
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
    absl::flat_hash_map<std::string, std::vector<BlockId>> by_worker;
    for (const std::string& p : paths) {
      LARDER_ASSIGN_OR_RETURN(v1::StatResponse r, MetaStat(p));
      if (r.info().is_dir()) continue;
      for (uint64_t b = 0; b < BlockCount(r.info().size(), r.block_size());
           ++b) {
        BlockId id{r.mount(), r.relative(),   r.info().version(),
                   b,         r.block_size(), r.info().size()};
        std::vector<v1::WorkerInfo> owners = Owners(id, 1);
        if (!owners.empty())
          by_worker[owners[0].address()].push_back(std::move(id));
      }
    }
    for (auto& [address, ids] : by_worker) {
      LARDER_RETURN_IF_ERROR(
          Worker(address).CacheBlocks(ids, /*wait=*/false, absl::Seconds(10)));
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

  void SetInvalidationHook(
      std::function<void(const std::string&)> hook) override {
    view_.SetInvalidationHook(std::move(hook));
  }

  ClientStats stats() const override {
    ClientStats s;
    s.blocks_short_circuit = sc_blocks_;
    s.blocks_grpc = grpc_blocks_;
    s.blocks_under_store = under_store_blocks_;
    s.failovers = failovers_;
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

  // Reads [offset, offset + out.size()) of block `id` into `out`.
  absl::Status ReadBlock(const BlockId& id, uint64_t offset,
                         absl::Span<char> out) {
    return ReadBlockVia(
        id, out.size(),
        [&](const v1::WorkerInfo& w) {
          return ReadFromWorker(w, id, offset, out);
        },
        [&] { return ReadFromUnderStore(id, offset, out); });
  }

  // Reads [offset, offset + length) of block `id` as a view: lent from
  // gRPC's buffers when it streams from a worker, else read into a buffer
  // the view holds.
  absl::StatusOr<ByteView> ReadBlockView(const BlockId& id, uint64_t offset,
                                         uint64_t length) {
    ByteView view;
    auto into_buffer = [&] {
      std::shared_ptr<char[]> buf(new char[length]);
      view = ByteView{{absl::Span<const char>(buf.get(), length)}, {buf}};
      return absl::Span<char>(buf.get(), length);
    };
    LARDER_RETURN_IF_ERROR(ReadBlockVia(
        id, length,
        [&](const v1::WorkerInfo& w) -> absl::StatusOr<size_t> {
          if (ShortCircuitTo(w))
            return ReadFromWorker(w, id, offset, into_buffer());
          uint64_t ring = 0;
          absl::StatusOr<ByteView> v =
              Worker(w.address())
                  .ReadBlockView(id, offset, length, options_.worker_timeout,
                                 nullptr, &ring);
          NoteRingVersion(ring);
          if (!v.ok()) return v.status();
          ++grpc_blocks_;
          view = *std::move(v);
          return view.size();
        },
        [&] { return ReadFromUnderStore(id, offset, into_buffer()); }));
    return view;
  }

  // The failover order for one block of `want` bytes: `from_worker` on its
  // owners (healthy first; again after a ring refresh if all fail), then
  // `from_under_store` unless that fallback is off.
  absl::Status ReadBlockVia(
      const BlockId& id, uint64_t want,
      absl::FunctionRef<absl::StatusOr<size_t>(const v1::WorkerInfo&)>
          from_worker,
      absl::FunctionRef<absl::Status()> from_under_store) {
    absl::Status last;
    for (int attempt = 0; attempt < 2;
         ++attempt) {  // Second pass: after a ring refresh.
      for (const v1::WorkerInfo& w : HealthyFirst(
               WhereCached(id, Owners(id, options_.max_workers_per_block)))) {
        absl::StatusOr<size_t> n = from_worker(w);
        if (n.ok() && *n == want) return absl::OkStatus();
        if (n.ok()) {
          last = absl::InternalError(absl::StrCat(
              "worker ", w.id(), " returned ", *n, " of ", want, " bytes"));
        } else {
          last = n.status();
          if (!WorkerFailure(last)) return last;
        }
        ++failovers_;
        MarkSuspect(w, last);
      }
      if (attempt == 0 && !RefreshRing(/*force=*/true).ok()) break;
    }
    if (!options_.under_store_fallback) {
      return last.ok() ? absl::UnavailableError("no live worker for the block")
                       : last;
    }
    absl::Status st = from_under_store();
    if (st.ok()) ++under_store_blocks_;
    return st;
  }

  // A worker that just failed is tried after the others for a while (until
  // the master's ring drops it, or it answers again), so a dead owner costs
  // one failed connection, not one per block.
  void MarkSuspect(const v1::WorkerInfo& w, const absl::Status& why) {
    bool first;
    {
      absl::MutexLock lock(&mu_);
      absl::Time& until = suspect_until_[w.id()];
      first = until < absl::Now();
      until = absl::Now() + absl::Seconds(5);
    }
    if (first) {
      LARDER_LOG(WARNING, "client.failover")
          .Field("worker", w.id())
          .Field("address", w.address())
          .Field("status", why)
          .Field("for", absl::Seconds(5));
    }
  }

  // After a ring change (a worker joined, left or came back), blocks may be
  // cached on a worker that no longer owns them. For `kRebalanceWindow`
  // after each change, the master's placement index is asked where a block
  // is, and a live worker that holds it is tried before the new owner, which
  // would refetch it from the under-store.
  static constexpr absl::Duration kRebalanceWindow = absl::Minutes(10);

  std::vector<v1::WorkerInfo> WhereCached(const BlockId& id,
                                          std::vector<v1::WorkerInfo> owners) {
    std::vector<v1::WorkerInfo> live;
    {
      absl::MutexLock lock(&mu_);
      // With one live worker there is nowhere else to look.
      if (absl::Now() - ring_changed_at_ > kRebalanceWindow ||
          ring_workers_.size() <= 1)
        return owners;
      live = ring_workers_;
    }
    const std::string key = KeyToBytes(id.Key());
    std::vector<std::string> holders;
    bool known = false;
    {
      absl::MutexLock lock(&located_mu_);
      auto it = located_.find(key);
      if (it != located_.end() && it->second.expires > absl::Now()) {
        holders = it->second.holders;
        known = true;
      }
    }
    if (!known) {
      v1::LocateRequest req;
      req.add_block_keys(key);
      v1::LocateResponse resp;
      if (!master_
               ->Call(&v1::Master::Stub::Locate, req, &resp, absl::Seconds(2))
               .ok() ||
          resp.locations_size() != 1)
        return owners;
      holders.assign(resp.locations(0).worker_ids().begin(),
                     resp.locations(0).worker_ids().end());
      RememberLocated(key, holders, owners.empty() ? "" : owners[0].id());
    }
    std::vector<v1::WorkerInfo> out;
    for (const std::string& holder : holders) {
      if (!owners.empty() && holder == owners[0].id())
        return owners;  // The owner has it.
      for (const v1::WorkerInfo& w : live) {
        if (w.id() == holder) out.push_back(w);
      }
    }
    for (v1::WorkerInfo& w : owners) {
      if (std::none_of(out.begin(), out.end(), [&](const v1::WorkerInfo& o) {
            return o.id() == w.id();
          })) {
        out.push_back(std::move(w));
      }
    }
    return out;
  }

  // A block is read in pieces and by many readers: one lookup serves them
  // for a while (long when the owner holds it: that stays true).
  void RememberLocated(const std::string& key,
                       const std::vector<std::string>& holders,
                       const std::string& owner) {
    const bool owner_has =
        !owner.empty() &&
        std::find(holders.begin(), holders.end(), owner) != holders.end();
    absl::MutexLock lock(&located_mu_);
    if (located_.size() > 100000) located_.clear();
    located_[key] = {holders, absl::Now() + (owner_has ? absl::Seconds(60)
                                                       : absl::Seconds(3))};
  }

  // What WhereCached would ask the master block by block, asked in one
  // Locate per 1,000 blocks: `owners[i]` is the owner of `ids[i]` ("" for
  // none). Nothing to do outside a rebalance window.
  void LocateAhead(const std::vector<const BlockId*>& ids,
                   const std::vector<std::string>& owners) {
    {
      absl::MutexLock lock(&mu_);
      if (absl::Now() - ring_changed_at_ > kRebalanceWindow ||
          ring_workers_.size() <= 1)
        return;
    }
    std::vector<std::string> keys;
    std::vector<size_t> which;
    {
      absl::MutexLock lock(&located_mu_);
      const absl::Time now = absl::Now();
      for (size_t i = 0; i < ids.size(); ++i) {
        std::string key = KeyToBytes(ids[i]->Key());
        auto it = located_.find(key);
        if (it != located_.end() && it->second.expires > now) continue;
        keys.push_back(std::move(key));
        which.push_back(i);
      }
    }
    constexpr size_t kPerLocate = 1000;
    for (size_t begin = 0; begin < keys.size(); begin += kPerLocate) {
      const size_t end = std::min(keys.size(), begin + kPerLocate);
      v1::LocateRequest req;
      for (size_t k = begin; k < end; ++k) req.add_block_keys(keys[k]);
      v1::LocateResponse resp;
      if (!master_
               ->Call(&v1::Master::Stub::Locate, req, &resp, absl::Seconds(2))
               .ok() ||
          resp.locations_size() != static_cast<int>(end - begin))
        return;  // WhereCached asks again, block by block.
      for (size_t k = begin; k < end; ++k) {
        const v1::LocateResponse::Location& at =
            resp.locations(static_cast<int>(k - begin));
        RememberLocated(keys[k],
                        std::vector<std::string>(at.worker_ids().begin(),
                                                 at.worker_ids().end()),
                        owners[which[k]]);
      }
    }
  }

  std::vector<v1::WorkerInfo> HealthyFirst(
      std::vector<v1::WorkerInfo> workers) {
    std::vector<v1::WorkerInfo> healthy, suspect;
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    for (v1::WorkerInfo& w : workers) {
      auto it = suspect_until_.find(w.id());
      (it == suspect_until_.end() || it->second < now ? healthy : suspect)
          .push_back(std::move(w));
    }
    for (v1::WorkerInfo& w : suspect) healthy.push_back(std::move(w));
    return healthy;
  }

  // Blocks whose owner is on this node are leased ahead over the
  // short-circuit socket (the worker fetches misses first), so the read
  // finds its lease kept and pays no round trip at all; the others are
  // fetched ahead by their owners (CacheBlocks).
  void Readahead(const std::vector<BlockId>& ids) {
    absl::flat_hash_map<std::string, std::vector<BlockId>> by_worker, local;
    for (const BlockId& id : ids) {
      std::vector<v1::WorkerInfo> owners = Owners(id, 1);
      if (owners.empty()) continue;
      const v1::WorkerInfo& w = owners[0];
      if (ShortCircuitTo(w)) {
        if (local_.Find(w.short_circuit_socket(), id) == nullptr)
          local[w.short_circuit_socket()].push_back(id);
      } else {
        by_worker[w.address()].push_back(id);
      }
    }
    for (auto& [socket, blocks] : local) {
      lease_ahead_pool_->Schedule([this, socket = socket, blocks = blocks] {
        local_.LeaseAhead(socket, blocks);
      });
    }
    for (auto& [address, blocks] : by_worker) {
      pool_->Schedule([this, address = address, blocks = blocks] {
        Worker(address)
            .CacheBlocks(blocks, /*wait=*/false, absl::Seconds(5))
            .IgnoreError();
      });
    }
  }

  ThreadPool& pool() { return *pool_; }
  const ClientOptions& options() const { return options_; }

 private:
  static void Deadline(grpc::ClientContext* ctx, absl::Duration d) {
    ctx->set_deadline(std::chrono::system_clock::now() +
                      absl::ToChronoMilliseconds(d));
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
    std::vector<v1::WorkerInfo> workers;
    {
      absl::MutexLock lock(&mu_);
      workers = ring_workers_;
    }
    std::string socket;
    for (const v1::WorkerInfo& w : workers) {
      if (ShortCircuitTo(w)) {
        socket = w.short_circuit_socket();
        break;
      }
    }
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
                   a.status().code() != absl::StatusCode::kInternal)) {
      local_.Give(socket, *std::move(sc));
    }
    if (!a.ok()) {
      if (a.status().code() == absl::StatusCode::kUnimplemented)
        node_stat_unsupported_.store(true, std::memory_order_relaxed);
      return std::nullopt;
    }
    NoteRingVersion(a->response.ring_version());
    return NodeAnswer{{std::move(a->status), std::move(a->response)}, a->ttl};
  }

  // The mount that holds `key` (mount paths do not nest).
  std::optional<v1::MountEntry> MountOf(const std::string& path) override {
    std::string key = path;
    absl::MutexLock lock(&mu_);
    while (true) {
      if (auto it = mounts_.find(key); it != mounts_.end()) return it->second;
      const size_t slash = key.rfind('/');
      if (slash == 0 || slash == std::string::npos) return std::nullopt;
      key.resize(slash);
    }
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
    {
      absl::MutexLock lock(&mu_);
      if (version <= ring_version_) return;
    }
    RefreshRing(/*force=*/true).IgnoreError();
  }

  absl::Status RefreshRing(bool force) {
    {
      absl::MutexLock lock(&mu_);
      const absl::Time now = absl::Now();
      // One caller refreshes; a failed try waits as long as a success.
      if (!force && now - ring_attempted_ < options_.ring_refresh)
        return absl::OkStatus();
      ring_attempted_ = now;
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
    std::vector<RingMember> members;
    for (const auto& w : ring.workers())
      members.push_back({w.id(), static_cast<double>(std::max<uint64_t>(
                                     1, w.capacity_bytes()))});
    HashRing built(std::move(members), static_cast<int>(ring.vnodes()));
    absl::MutexLock lock(&mu_);
    ++ring_refreshes_;
    ring_changed_at_ = absl::FromUnixMillis(ring.changed_unix_ms());
    if (ring.version() != ring_version_ || ring_workers_.empty()) {
      ring_version_ = ring.version();
      ring_ = std::move(built);
      ring_workers_.assign(ring.workers().begin(), ring.workers().end());
      last_ring_ = ring;
    }
    last_ring_at_ = absl::Now();
    return ring.mounts_version() != mounts_version_;
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
    absl::MutexLock lock(&mu_);
    mounts_.clear();
    for (const auto& m : table.mounts()) mounts_[m.path()] = m;
    mounts_version_ = table.version();
    last_mounts_ = table;
  }

 public:
  std::shared_ptr<const ClientWarmState> WarmState() override {
    auto w = std::make_shared<ClientWarmState>();
    w->master = options_.master;
    w->meta = view_.cache();
    std::tie(w->inval_epoch, w->inval_seq) = view_.invalidations();
    absl::MutexLock lock(&mu_);
    w->ring = last_ring_;
    w->ring_at = last_ring_at_;
    w->mounts = last_mounts_;
    return w;
  }

 private:
  std::vector<v1::WorkerInfo> Owners(const BlockId& id, int n) {
    RefreshRing(/*force=*/false)
        .IgnoreError();  // Periodic; failures keep the old ring.
    absl::MutexLock lock(&mu_);
    std::vector<v1::WorkerInfo> out;
    for (int i : ring_.Successors(id.Key().low, n))
      out.push_back(ring_workers_[i]);
    return out;
  }

  WorkerClient& Worker(const std::string& address) {
    absl::MutexLock lock(&mu_);
    auto& c = workers_[address];
    if (!c) c = std::make_unique<WorkerClient>(address, *channels_);
    return *c;
  }

  // Whether blocks of worker `w` are read by short-circuit (it is on this
  // node and has a socket).
  bool ShortCircuitTo(const v1::WorkerInfo& w) const {
    return w.node() == options_.node && !w.short_circuit_socket().empty() &&
           !local_.Refused(w.short_circuit_socket());
  }

  absl::StatusOr<size_t> ReadFromWorker(const v1::WorkerInfo& w,
                                        const BlockId& id, uint64_t offset,
                                        absl::Span<char> out) {
    uint64_t ring = 0;
    if (ShortCircuitTo(w)) {
      LARDER_ASSIGN_OR_RETURN(std::shared_ptr<LocalLeases::Lease> lease,
                              local_.From(w.short_circuit_socket(), id));
      // No lease without an error: the socket cannot be reached; the same
      // worker is read over gRPC.
      if (lease) {
        absl::StatusOr<size_t> n =
            ShortCircuitClient::ReadLease(lease->lease, offset, out);
        if (n.ok()) ++sc_blocks_;
        return n;
      }
    }
    absl::StatusOr<size_t> n =
        Worker(w.address())
            .ReadBlock(id, offset, out, options_.worker_timeout, nullptr,
                       &ring);
    if (n.ok()) ++grpc_blocks_;
    NoteRingVersion(ring);
    return n;
  }

  // A FileBatch: per file, its blocks, each held as a lease of the local
  // worker's memory or as a view of gRPC's buffers (or the error that
  // reading it gave); leases are given back, one message per worker, when
  // the batch is destroyed.
  class BatchImpl final : public FileBatch {
   public:
    struct Part {
      BlockId id;
      const ShortCircuitClient::Lease* lease = nullptr;
      ByteView view;
      absl::Status status;
    };
    struct FileParts {
      std::string path;
      uint64_t size = 0;
      absl::Status status;
      std::vector<Part> parts;
    };
    // The leases taken on one short-circuit connection.
    struct Held {
      std::string socket;
      std::shared_ptr<ShortCircuitClient> conn;
      std::vector<ShortCircuitClient::Lease> leases;
      bool worker_failed = false;
    };

    BatchImpl(ClientImpl* client, size_t n) : client_(client), files_(n) {}
    ~BatchImpl() override {
      for (Held& h : held_) {
        h.conn->ReleaseBatch(h.leases).IgnoreError();
        if (!h.worker_failed) client_->local_.Give(h.socket, std::move(h.conn));
      }
    }
    size_t size() const override { return files_.size(); }

    absl::Status ReadInto(size_t i, absl::Span<char> out) override {
      if (i >= files_.size())
        return absl::OutOfRangeError(
            absl::StrCat("file ", i, " of a batch of ", files_.size()));
      const FileParts& f = files_[i];
      LARDER_RETURN_IF_ERROR(f.status);
      if (out.size() != f.size) {
        return absl::InvalidArgumentError(
            absl::StrCat("a buffer of ", out.size(), " bytes for ", f.path,
                         " of ", f.size, " bytes"));
      }
      for (const Part& p : f.parts) {
        const absl::Span<char> dst = out.subspan(p.id.offset(), p.id.length());
        if (p.lease != nullptr) {
          absl::StatusOr<size_t> n =
              ShortCircuitClient::ReadLease(*p.lease, 0, dst);
          if (n.ok() && *n == dst.size()) {
            ++client_->sc_blocks_;
            continue;
          }
        } else if (!p.status.ok()) {
          return p.status;
        } else if (p.view.size() == dst.size()) {
          char* at = dst.data();
          for (absl::Span<const char> piece : p.view.pieces) {
            std::memcpy(at, piece.data(), piece.size());
            at += piece.size();
          }
          continue;
        }
        // Not leased (refused, or the lease could not be read): read now.
        LARDER_RETURN_IF_ERROR(client_->ReadBlock(p.id, 0, dst));
      }
      return absl::OkStatus();
    }

   private:
    friend class ClientImpl;
    ClientImpl* const client_;
    std::vector<FileParts> files_;
    std::deque<Held> held_;  // A deque: the parts point into its leases.
  };

  // Leases `parts` (blocks of the worker at `socket`) in one exchange per
  // 64 blocks, for `batch`. A part left without a lease is read at copy
  // time, with failover.
  void LeaseParts(const std::string& socket,
                  const std::vector<BatchImpl::Part*>& parts,
                  BatchImpl& batch) {
    std::vector<BlockId> ids;
    ids.reserve(parts.size());
    for (const BatchImpl::Part* p : parts) ids.push_back(p->id);
    std::optional<LocalLeases::Opened> o = local_.OpenOn(socket, ids);
    if (!o) return;
    std::vector<absl::StatusOr<ShortCircuitClient::Lease>>& leases = o->leases;
    BatchImpl::Held& held = batch.held_.emplace_back();
    held.socket = socket;
    held.conn = std::move(o->conn);
    held.leases.reserve(parts.size());
    std::vector<int> index(parts.size(), -1);
    for (size_t k = 0; k < parts.size() && k < leases.size(); ++k) {
      if (leases[k].ok()) {
        index[k] = static_cast<int>(held.leases.size());
        held.leases.push_back(*std::move(leases[k]));
      } else {
        held.worker_failed =
            held.worker_failed || WorkerFailure(leases[k].status());
      }
    }
    for (size_t k = 0; k < parts.size(); ++k)
      if (index[k] >= 0) parts[k]->lease = &held.leases[index[k]];
  }

 public:
  // The object of `first` (block 0) lent whole by the worker on this node,
  // if that worker owns every one of its `blocks` blocks.
  absl::StatusOr<LocalSlice> LocalObject(const BlockId& first,
                                         uint64_t blocks) {
    std::string socket;
    BlockId id = first;
    for (id.index = 0; id.index < blocks; ++id.index) {
      std::vector<v1::WorkerInfo> owners = Owners(id, 1);
      if (owners.empty() || !ShortCircuitTo(owners[0]) ||
          (!socket.empty() && owners[0].short_circuit_socket() != socket))
        return absl::FailedPreconditionError(
            "the file's blocks are not all owned by the worker on this node");
      socket = owners[0].short_circuit_socket();
    }
    LARDER_ASSIGN_OR_RETURN(std::shared_ptr<ShortCircuitClient> sc,
                            local_.Take(socket));
    absl::StatusOr<ShortCircuitClient::Lease> lease = sc->OpenObject(first);
    if (!lease.ok() && sc->refused()) {
      local_.NoteRefused(socket, lease.status());
      return absl::FailedPreconditionError(
          "the worker on this node refused short-circuit to this process");
    }
    if (!lease.ok()) {
      if (!WorkerFailure(lease.status())) local_.Give(socket, sc);
      return lease.status();
    }
    local_.Give(socket, sc);
    auto held = std::make_shared<LocalLeases::Lease>(sc, *lease);
    return LocalSlice{lease->fd, 0, lease->length,
                      std::shared_ptr<const void>(held, held.get())};
  }

  // [offset, offset + length) of block `id` as a read piece: a slice of the
  // lease of the worker on this node when it owns (or, after a ring change,
  // holds) the block; else a view, from the other owners with failover.
  // Decided here, once per block.
  absl::StatusOr<ReadPiece> ReadBlockPiece(const BlockId& id, uint64_t offset,
                                           uint64_t length) {
    auto slice = [&](std::shared_ptr<LocalLeases::Lease> lease)
        -> absl::StatusOr<ReadPiece> {
      if (lease->lease.length < offset + length)
        return absl::InternalError("short block from the local worker");
      ++sc_blocks_;
      ReadPiece piece;
      piece.local =
          LocalSlice{lease->lease.fd, lease->lease.offset + offset, length,
                     std::shared_ptr<const void>(lease, lease.get())};
      return piece;
    };
    std::vector<v1::WorkerInfo> owners = Owners(id, 1);
    if (!owners.empty() && ShortCircuitTo(owners[0])) {
      if (std::shared_ptr<LocalLeases::Lease> kept =
              local_.Find(owners[0].short_circuit_socket(), id))
        return slice(std::move(kept));
    }
    owners = HealthyFirst(WhereCached(id, std::move(owners)));
    if (!owners.empty() && ShortCircuitTo(owners[0])) {
      absl::StatusOr<std::shared_ptr<LocalLeases::Lease>> lease =
          local_.From(owners[0].short_circuit_socket(), id);
      if (lease.ok() && *lease) return slice(*std::move(lease));
      if (!lease.ok()) {
        if (!WorkerFailure(lease.status())) return lease.status();
        MarkSuspect(owners[0], lease.status());  // Then fail over below.
      }
    }
    ReadPiece piece;
    LARDER_ASSIGN_OR_RETURN(piece.view, ReadBlockView(id, offset, length));
    return piece;
  }

 private:
  absl::Status ReadFromUnderStore(const BlockId& id, uint64_t offset,
                                  absl::Span<char> out) {
    std::optional<v1::MountEntry> mount;
    {
      absl::MutexLock lock(&mu_);
      if (auto it = mounts_.find(id.mount); it != mounts_.end())
        mount = it->second;
    }
    if (!mount)
      return absl::NotFoundError(absl::StrCat("unknown mount ", id.mount));
    LARDER_ASSIGN_OR_RETURN(std::shared_ptr<UnderStore> store,
                            fallback_stores_.Get(*mount));
    LARDER_ASSIGN_OR_RETURN(
        size_t n,
        store->ReadRange(id.path, id.offset() + offset, out, id.version));
    if (n != out.size()) {
      return absl::FailedPreconditionError(absl::StrCat(
          id.DebugString(), ": the object is shorter than at Open"));
    }
    return absl::OkStatus();
  }

  ClientOptions options_;
  const std::shared_ptr<const ChannelFactory> channels_;
  std::unique_ptr<MasterConnection> master_;
  // Connections to, and leases from, the workers on this node.
  LocalLeases local_;
  std::unique_ptr<ThreadPool> pool_, lease_ahead_pool_;
  mutable absl::Mutex mu_;
  HashRing ring_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::WorkerInfo> ring_workers_ ABSL_GUARDED_BY(mu_);
  uint64_t ring_version_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time ring_attempted_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time ring_changed_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::map<std::string, v1::MountEntry> mounts_ ABSL_GUARDED_BY(mu_);
  uint64_t mounts_version_ ABSL_GUARDED_BY(mu_) = 0;
  // The answers the ring and the mount table were built from (WarmState).
  v1::Ring last_ring_ ABSL_GUARDED_BY(mu_);
  absl::Time last_ring_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  v1::MountTable last_mounts_ ABSL_GUARDED_BY(mu_);
  // Metadata: the process's cache (shared with the clients that start warm
  // from this one: WarmState) in front of the node's and the master.
  MetadataView view_;
  // The local worker answered a STAT as a worker from before it would.
  std::atomic<bool> node_stat_unsupported_{false};
  absl::Notification stop_polling_;
  std::thread poller_;
  absl::flat_hash_map<std::string, std::unique_ptr<WorkerClient>> workers_
      ABSL_GUARDED_BY(mu_);
  // Mounts opened for the under-store fallback.
  MountStores fallback_stores_{FallbackStoreOptions(options_)};
  absl::flat_hash_map<std::string, absl::Time> suspect_until_
      ABSL_GUARDED_BY(mu_);
  struct Located {
    std::vector<std::string> holders;
    absl::Time expires;
  };
  absl::Mutex located_mu_;
  absl::flat_hash_map<std::string, Located> located_
      ABSL_GUARDED_BY(located_mu_);
  std::atomic<uint64_t> sc_blocks_{0}, grpc_blocks_{0}, under_store_blocks_{0},
      failovers_{0}, ring_refreshes_{0};
};

void FileImpl::NoteRead(uint64_t offset, uint64_t end) {
  const uint64_t bs = stat_.block_size();
  const uint64_t last = (end - 1) / bs;
  // Sequential reader: ask the owners of the next blocks to fetch them now.
  // "Sequential" tolerates reordering within two blocks: the kernel's
  // readahead requests reach a FUSE daemon's threads in any order.
  const int ahead = client_->options().readahead_blocks;
  const uint64_t prev_end = next_sequential_.load();
  if (ahead > 0 && offset + 2 * bs >= prev_end && offset <= prev_end + 2 * bs) {
    const uint64_t total = BlockCount(info_.size, bs);
    // Refilled when half the window is used, so a reader of one block per
    // request asks for blocks in batches, not one at a time.
    uint64_t from = std::max(last + 1, readahead_until_.load());
    const uint64_t to = std::min(total, last + 1 + ahead);
    if (from < to &&
        ((to - from) * 2 >= static_cast<uint64_t>(ahead) || to == total)) {
      std::vector<BlockId> ids;
      for (uint64_t b = from; b < to; ++b) ids.push_back(Block(b));
      readahead_until_ = to;
      client_->Readahead(ids);
    }
  }
  if (offset + 2 * bs < prev_end) {
    readahead_until_ = 0;  // A jump back: a new sequential run.
    next_sequential_ = end;
  } else if (end > prev_end) {
    next_sequential_ = end;
  }
}

absl::StatusOr<uint64_t> FileImpl::End(uint64_t offset, uint64_t length) const {
  if (offset > info_.size)
    return absl::OutOfRangeError(
        absl::StrCat("read at ", offset, " beyond ", info_.size));
  return offset + std::min<uint64_t>(info_.size - offset, length);
}

absl::StatusOr<std::vector<ReadPiece>> FileImpl::ReadPieces(uint64_t offset,
                                                            uint64_t length) {
  LARDER_ASSIGN_OR_RETURN(const uint64_t end, End(offset, length));
  if (end == offset) return std::vector<ReadPiece>{};
  NoteRead(offset, end);
  return EachBlock<ReadPiece>(
      offset, end, [&](const BlockId& id, uint64_t in_block, uint64_t n) {
        return client_->ReadBlockPiece(id, in_block, n);
      });
}

absl::StatusOr<LocalSlice> FileImpl::OpenLocalObject() {
  if (info_.size == 0)
    return absl::FailedPreconditionError("an empty file has no memfd");
  return client_->LocalObject(Block(0),
                              BlockCount(info_.size, stat_.block_size()));
}

absl::Status FileImpl::ForEachPiece(
    uint64_t offset, uint64_t end,
    absl::FunctionRef<absl::Status(size_t, uint64_t, uint64_t, uint64_t,
                                   uint64_t)>
        read) {
  const uint64_t bs = stat_.block_size();
  const uint64_t first = offset / bs, last = (end - 1) / bs;
  auto piece = [&](size_t i) {
    const uint64_t b = first + i;
    const uint64_t lo = std::max(offset, b * bs),
                   hi = std::min(end, (b + 1) * bs);
    return read(i, b, lo - b * bs, lo - offset, hi - lo);
  };
  const size_t pieces = static_cast<size_t>(last - first + 1);
  if (pieces == 1) return piece(0);
  std::vector<absl::Status> results(pieces);
  std::atomic<size_t> left{pieces};
  absl::Notification done;
  for (size_t i = 1; i < pieces; ++i) {
    client_->pool().Schedule([&, i] {
      results[i] = piece(i);
      if (left.fetch_sub(1) == 1) done.Notify();
    });
  }
  results[0] = piece(0);
  if (left.fetch_sub(1) == 1) done.Notify();
  done.WaitForNotification();
  for (const absl::Status& st : results) LARDER_RETURN_IF_ERROR(st);
  return absl::OkStatus();
}

absl::StatusOr<size_t> FileImpl::Read(uint64_t offset, absl::Span<char> out) {
  LARDER_ASSIGN_OR_RETURN(const uint64_t end, End(offset, out.size()));
  if (end == offset) return 0;
  NoteRead(offset, end);
  LARDER_RETURN_IF_ERROR(ForEachPiece(
      offset, end,
      [&](size_t, uint64_t block, uint64_t in_block, uint64_t at, uint64_t n) {
        return client_->ReadBlock(Block(block), in_block, out.subspan(at, n));
      }));
  return static_cast<size_t>(end - offset);
}

absl::StatusOr<ByteView> FileImpl::ReadView(uint64_t offset, uint64_t length) {
  LARDER_ASSIGN_OR_RETURN(const uint64_t end, End(offset, length));
  if (end == offset) return ByteView{};
  NoteRead(offset, end);
  LARDER_ASSIGN_OR_RETURN(
      std::vector<ByteView> views,
      EachBlock<ByteView>(
          offset, end, [&](const BlockId& id, uint64_t in_block, uint64_t n) {
            return client_->ReadBlockView(id, in_block, n);
          }));
  ByteView out = std::move(views[0]);
  for (size_t i = 1; i < views.size(); ++i) out.Append(std::move(views[i]));
  return out;
}

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
