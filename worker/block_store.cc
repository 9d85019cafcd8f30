// Copyright 2026 The Larder Authors.
#include "worker/block_store.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/retry.h"
#include "common/status_macros.h"

namespace larder {
namespace {
constexpr size_t kMaxJournal = 1 << 20;
}  // namespace

absl::string_view BlockSourceName(BlockSource source) {
  switch (source) {
    case BlockSource::kRam:
      return "ram";
    case BlockSource::kNvme:
      return "nvme";
    case BlockSource::kUnderStore:
      return "under_store";
  }
  return "?";
}

void CountServed(WorkerMetrics* m, BlockSource source, uint64_t bytes,
                 ServePath path) {
  const double b = static_cast<double>(bytes);
  switch (source) {
    case BlockSource::kRam:
      m->served_ram.Increment(b);
      break;
    case BlockSource::kNvme:
      m->served_nvme.Increment(b);
      break;
    case BlockSource::kUnderStore:
      m->served_under_store.Increment(b);
      break;
  }
  (path == ServePath::kGrpc ? m->served_grpc : m->served_short_circuit)
      .Increment(b);
}

BlockKey BlockStore::ObjectKey(const BlockId& id) {
  BlockId first = id;
  first.index = 0;
  return first.Key();
}

absl::StatusOr<std::unique_ptr<BlockStore>> BlockStore::Create(
    BlockStoreOptions options, const WorkerMounts* mounts,
    WorkerMetrics* metrics) {
  std::unique_ptr<BlockStore> s(
      new BlockStore(std::move(options), mounts, metrics));
  if (s->options_.nvme) {
    LARDER_ASSIGN_OR_RETURN(
        s->nvme_, NvmeTier::Open(*s->options_.nvme, &s->options_.rules));
  }
  return s;
}

BlockStore::BlockStore(BlockStoreOptions options, const WorkerMounts* mounts,
                       WorkerMetrics* metrics)
    : options_(std::move(options)),
      mounts_(mounts),
      metrics_(metrics),
      ram_(options_.ram_capacity_bytes, options_.ram_policy,
           options_.ram_max_blocks),
      range_pool_(
          std::make_unique<ThreadPool>(options_.range_threads, "larder-range")),
      nvme_pool_(std::make_unique<ThreadPool>(options_.nvme_write_threads,
                                              "larder-nvmew")),
      fetch_pool_(
          std::make_unique<ThreadPool>(options_.fetch_threads, "larder-fetch")),
      nvme_read_pool_(options_.nvme
                          ? std::make_unique<ThreadPool>(
                                options_.nvme_read_threads, "larder-nvmer")
                          : nullptr) {
  metrics_->ram_capacity.Set(static_cast<double>(options_.ram_capacity_bytes));
  if (options_.collapse_huge_pages) {
    huge_pages_ = std::make_unique<HugePagePromoter>(
        metrics_,
        [this] {
          return absl::FromUnixNanos(last_use_.load(std::memory_order_relaxed));
        },
        options_.collapse_quiet);
  }
}

BlockStore::~BlockStore() { Shutdown(); }

void BlockStore::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  // Pool destructors drain their queues: NVMe reads first (they hand
  // misses to the fetches), then fetches (they queue writes).
  nvme_read_pool_.reset();
  fetch_pool_.reset();
  nvme_pool_.reset();
  range_pool_.reset();
}

std::shared_ptr<const Block> BlockStore::LookupRam(const BlockKey& key) {
  std::vector<std::shared_ptr<const Block>> expired;
  if (auto* e = ram_.Find(key, absl::Now(), &expired)) return e->value;
  if (!expired.empty()) {
    // Past its TTL: out of RAM, with the rest of its object memfd (as an
    // eviction), and out of the master's placement index (the NVMe copy,
    // if any, is past the same TTL).
    RetireObjects(&expired);
    for (const auto& b : expired) {
      if (journal_removed_.size() < kMaxJournal)
        journal_removed_.push_back(b->key());
    }
  }
  return nullptr;
}

absl::Time BlockStore::Touch() {
  const int64_t now = absl::GetCurrentTimeNanos();
  last_use_.store(now, std::memory_order_relaxed);
  return absl::FromUnixNanos(now);
}

void BlockStore::NoteReread(const std::shared_ptr<const Block>& block,
                            absl::Time now) {
  // Only blocks read again are worth 2 MiB pages; a block read once (a
  // one-pass scan, the first epoch) never pays for the collapse, which
  // competes with the fetches of a cold read for CPU and memory (measured on
  // the 2-core VM, 512 MiB read cold through FUSE: 181-239 MB/s with every
  // block collapsed, 215-332 MB/s without). The pass that fetched a block
  // may look it up again at once (a reader and its lease-ahead racing), so
  // a hit counts as a re-read only once the block is old enough.
  if (huge_pages_ && now - block->filled_at() >= options_.collapse_min_age &&
      block->MarkForCollapse())
    huge_pages_->Add(block);
}

std::shared_ptr<BlockStore::Flight> BlockStore::Join(const BlockId& id,
                                                     bool* started) {
  const FlightKey key{id.Key(), id.object_size};
  *started = false;
  absl::MutexLock lock(&mu_);
  if (auto it = flights_.find(key); it != flights_.end()) {
    metrics_->single_flight_joins.Increment();
    return it->second;
  }
  auto flight = std::make_shared<Flight>();
  if (auto it = stalled_.find(key); it != stalled_.end()) {
    if (absl::Now() < it->second.until) {
      flight->result = it->second.status;
      flight->done.Notify();
      return flight;
    }
    stalled_.erase(it);
  }
  if (std::shared_ptr<const Block> b = LookupRam(key.first)) {
    // Filled between the caller's lookup and now.
    if (absl::Status same = CheckSameBlock(b->id(), id); !same.ok()) {
      flight->result = same;
    } else {
      flight->result = BlockRead{std::move(b), BlockSource::kRam};
    }
    flight->done.Notify();
    return flight;
  }
  if (shut_down_) {
    flight->result = absl::UnavailableError("worker is shutting down");
    flight->done.Notify();
    return flight;
  }
  flights_.emplace(key, flight);
  *started = true;
  return flight;
}

absl::StatusOr<BlockRead> BlockStore::Get(
    const BlockId& id, absl::Time deadline,
    const std::function<bool()>& cancelled, bool count_hit) {
  LARDER_RETURN_IF_ERROR(id.Validate());
  const absl::Time now = Touch();
  {
    absl::MutexLock lock(&mu_);
    if (std::shared_ptr<const Block> b = LookupRam(id.Key())) {
      LARDER_RETURN_IF_ERROR(CheckSameBlock(b->id(), id));
      if (count_hit) metrics_->hits_ram.Increment();
      NoteReread(b, now);
      return BlockRead{std::move(b), BlockSource::kRam};
    }
  }
  bool started = false;
  std::shared_ptr<Flight> flight = Join(id, &started);
  // A prefetch's wait (count_hit false: a load) serves no reader.
  QueueFetch(id, flight, started, /*urgent=*/count_hit);
  return Await(flight, id, deadline, cancelled);
}

void BlockStore::QueueFetch(const BlockId& id,
                            const std::shared_ptr<Flight>& flight, bool started,
                            bool urgent) {
  if (!started) {
    // Joined: a flight done at once (a stalled or shut-down answer, a block
    // RAM got meanwhile) or in flights_, queued or running. Queued only as a
    // prefetch: queue it once more, ahead.
    if (!urgent || flight->done.HasBeenNotified() || flight->claimed ||
        flight->urgent.exchange(true))
      return;
  } else if (urgent) {
    flight->urgent = true;
  }
  // A block on NVMe is read on the NVMe pool: a store that hangs holds the
  // fetch threads, never what the worker has on disk.
  Enqueue(id, flight,
          /*from_nvme=*/nvme_read_pool_ != nullptr && !flight->nvme_tried &&
              nvme_->Contains(id.Key()),
          urgent);
}

void BlockStore::Enqueue(const BlockId& id,
                         const std::shared_ptr<Flight>& flight, bool from_nvme,
                         bool urgent) {
  ThreadPool& pool = from_nvme ? *nvme_read_pool_ : *fetch_pool_;
  auto task = [this, id, flight, from_nvme] {
    if (flight->claimed.exchange(true)) return;
    if (from_nvme) {
      RunNvmeRead(id, flight);
    } else {
      RunFetch(id, flight);
    }
  };
  if (urgent) {
    pool.ScheduleUrgent(std::move(task));
  } else {
    pool.Schedule(std::move(task));
  }
}

bool BlockStore::OnNvme(const BlockId& id) {
  return nvme_read_pool_ != nullptr && nvme_->Contains(id.Key());
}

size_t BlockStore::QueuedFetches() const {
  return fetch_pool_->queued() +
         (nvme_read_pool_ ? nvme_read_pool_->queued() : 0);
}

std::shared_ptr<BlockStore::Flight> BlockStore::StartFetch(const BlockId& id) {
  return StartFetch(id, /*urgent=*/true);
}

std::shared_ptr<BlockStore::Flight> BlockStore::StartFetch(const BlockId& id,
                                                           bool urgent) {
  if (!id.Validate().ok()) return nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (ram_.Contains(id.Key())) return nullptr;
  }
  bool started = false;
  std::shared_ptr<Flight> flight = Join(id, &started);
  QueueFetch(id, flight, started, urgent);
  return flight;
}

absl::StatusOr<BlockRead> BlockStore::Await(
    const std::shared_ptr<Flight>& flight, const BlockId& id,
    absl::Time deadline, const std::function<bool()>& cancelled) const {
  // Wait in slices so cancellation is noticed; the fetch goes on regardless.
  while (!flight->done.WaitForNotificationWithDeadline(
      std::min(deadline, absl::Now() + absl::Milliseconds(50)))) {
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("waiting for block ", id.DebugString()));
    }
    if (cancelled && cancelled()) return absl::CancelledError("read cancelled");
  }
  return flight->result;
}

std::shared_ptr<const Block> BlockStore::TryGetCached(const BlockId& id) {
  if (!id.Validate().ok()) return nullptr;
  const absl::Time now = Touch();
  absl::MutexLock lock(&mu_);
  std::shared_ptr<const Block> b = LookupRam(id.Key());
  if (b == nullptr || !CheckSameBlock(b->id(), id).ok()) return nullptr;
  metrics_->hits_ram.Increment();
  NoteReread(b, now);
  return b;
}

void BlockStore::Prefetch(const BlockId& id) {
  if (QueuedFetches() >= options_.max_queued_prefetches) {
    metrics_->prefetches_dropped.Increment();
    return;
  }
  StartFetch(id, /*urgent=*/false);
}

void BlockStore::RunNvmeRead(const BlockId& id,
                             const std::shared_ptr<Flight>& flight) {
  Touch();
  bool differs = false;
  if (absl::Status mount = CheckMount(id); !mount.ok()) {
    Finish(id, flight, mount);
    return;
  }
  if (std::shared_ptr<const Block> b = LoadFromNvme(id, &differs)) {
    Finish(id, flight, BlockRead{std::move(b), BlockSource::kNvme});
    return;
  }
  // To the store, on the fetch pool. Unclaimed again, so that a reader who
  // joins while it is queued as a prefetch moves it ahead (QueueFetch).
  flight->nvme_differs = differs;
  flight->nvme_tried = true;
  flight->claimed = false;
  Enqueue(id, flight, /*from_nvme=*/false, flight->urgent);
}

void BlockStore::RunFetch(const BlockId& id,
                          const std::shared_ptr<Flight>& flight) {
  Touch();
  absl::StatusOr<BlockRead> result = [&]() -> absl::StatusOr<BlockRead> {
    LARDER_RETURN_IF_ERROR(CheckMount(id));
    bool differs = flight->nvme_differs;
    // Not yet asked: the block reached NVMe after the fetch was queued, or
    // it was queued before the tier had it.
    if (nvme_ && !flight->nvme_tried) {
      if (std::shared_ptr<const Block> b = LoadFromNvme(id, &differs))
        return BlockRead{std::move(b), BlockSource::kNvme};
    }
    return LoadFromStore(id, differs);
  }();
  Finish(id, flight, std::move(result));
}

void BlockStore::Finish(const BlockId& id,
                        const std::shared_ptr<Flight>& flight,
                        absl::StatusOr<BlockRead> result) {
  Touch();
  {
    absl::MutexLock lock(&mu_);
    const FlightKey key{id.Key(), id.object_size};
    flights_.erase(key);
    if (!result.ok() && IsStalled(result.status())) {
      const absl::Time now = absl::Now();
      if (stalled_.size() >= 4096) {
        for (auto it = stalled_.begin(); it != stalled_.end();) {
          auto next = std::next(it);
          if (it->second.until <= now) stalled_.erase(it);
          it = next;
        }
      }
      if (stalled_.size() < 4096)
        stalled_[key] = Stalled{result.status(), now + kStalledMemory};
    }
    flight->result = std::move(result);
  }
  flight->done.Notify();
}

absl::Status BlockStore::CheckMount(const BlockId& id) const {
  LARDER_ASSIGN_OR_RETURN(Mount mount, mounts_->Get(id.mount));
  if (mount.block_size != id.block_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("block size ", id.block_size, " of ", id.DebugString(),
                     " differs from mount '", id.mount, "' (", mount.block_size,
                     "): stale mount table"));
  }
  return absl::OkStatus();
}

std::shared_ptr<const Block> BlockStore::LoadFromNvme(const BlockId& id,
                                                      bool* differs) {
  // An NVMe file that describes the block otherwise than the request (a file
  // from before the worker checked object sizes) is replaced only once the
  // under-store has proved the request right.
  if (!nvme_->Contains(id.Key())) return nullptr;
  absl::StatusOr<std::shared_ptr<const Block>> b =
      nvme_->Read(id, ObjectFor(id));
  if (b.ok()) {
    metrics_->hits_nvme.Increment();
    AdmitRam(*b);
    return *std::move(b);
  }
  if (b.status().code() == absl::StatusCode::kFailedPrecondition) {
    *differs = true;
  } else if (b.status().code() == absl::StatusCode::kDataLoss) {
    metrics_->checksum_failures.Increment();  // Dropped; refetched.
  } else if (b.status().code() != absl::StatusCode::kNotFound) {
    LARDER_LOG(WARNING, "nvme.read")
        .Field("block", id.DebugString())
        .Field("status", b.status());
  }
  return nullptr;
}

absl::StatusOr<BlockRead> BlockStore::LoadFromStore(const BlockId& id,
                                                    bool nvme_differs) {
  metrics_->misses.Increment();
  absl::StatusOr<std::shared_ptr<const Block>> b;
  absl::Time start;
  {
    const uint64_t held = AcquireFetchBytes(id.length());
    absl::Cleanup release = [this, held] { ReleaseFetchBytes(held); };
    start = absl::Now();
    b = FetchFromUnderStore(id);
  }
  metrics_->under_store_latency.Observe(
      absl::ToDoubleSeconds(absl::Now() - start));
  if (!b.ok()) {
    metrics_->under_store_errors.Increment();
    LARDER_LOG(WARNING, "fetch.failed")
        .Field("block", id.DebugString())
        .Field("status", b.status());
    return b.status();
  }
  metrics_->under_store_bytes.Increment(static_cast<double>((*b)->length()));
  {
    absl::MutexLock lock(&mu_);
    if (journal_added_.size() < kMaxJournal) journal_added_.push_back(id.Key());
  }
  AdmitRam(*b);
  if (nvme_) {
    if (nvme_differs) nvme_->Erase({id.Key()});
    QueueNvmeWrite(*b);
  }
  return BlockRead{*std::move(b), BlockSource::kUnderStore};
}

absl::Status BlockStore::Put(const BlockId& id, absl::string_view bytes) {
  LARDER_RETURN_IF_ERROR(id.Validate());
  if (bytes.size() != id.length()) {
    return absl::InvalidArgumentError(
        absl::StrCat(id.DebugString(), ": ", bytes.size(),
                     " bytes given for a block of ", id.length()));
  }
  LARDER_ASSIGN_OR_RETURN(Mount mount, mounts_->Get(id.mount));
  if (mount.block_size != id.block_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "block size ", id.block_size, " of ", id.DebugString(),
        " differs from mount '", id.mount, "' (", mount.block_size, ")"));
  }
  LARDER_ASSIGN_OR_RETURN(BlockWriter writer,
                          BlockWriter::Create(id, ObjectFor(id)));
  std::memcpy(writer.buffer().data(), bytes.data(), bytes.size());
  LARDER_ASSIGN_OR_RETURN(std::shared_ptr<const Block> b,
                          std::move(writer).Finish());
  {
    absl::MutexLock lock(&mu_);
    if (journal_added_.size() < kMaxJournal) journal_added_.push_back(id.Key());
  }
  AdmitRam(b);
  if (nvme_) QueueNvmeWrite(b);
  return absl::OkStatus();
}

uint64_t BlockStore::AcquireFetchBytes(uint64_t bytes) {
  const uint64_t budget = options_.fetch_buffer_bytes;
  if (budget == 0) return 0;
  absl::MutexLock lock(&fetch_bytes_mu_);
  const uint64_t ticket = fetch_ticket_next_++;
  auto fits = [this, budget, bytes, ticket]()
                  ABSL_EXCLUSIVE_LOCKS_REQUIRED(fetch_bytes_mu_) {
                    return ticket == fetch_ticket_turn_ &&
                           (fetch_bytes_ == 0 ||
                            bytes <= budget - std::min(budget, fetch_bytes_));
                  };
  fetch_bytes_mu_.Await(absl::Condition(&fits));
  ++fetch_ticket_turn_;  // The next in line is checked as the lock is let go.
  fetch_bytes_ += bytes;
  return bytes;
}

size_t BlockStore::FetchesWaitingForBuffer() {
  absl::MutexLock lock(&fetch_bytes_mu_);
  return static_cast<size_t>(fetch_ticket_next_ - fetch_ticket_turn_);
}

void BlockStore::ReleaseFetchBytes(uint64_t bytes) {
  if (bytes == 0) return;
  absl::MutexLock lock(&fetch_bytes_mu_);
  fetch_bytes_ -= std::min(fetch_bytes_, bytes);
}

absl::StatusOr<std::shared_ptr<const Block>> BlockStore::FetchFromUnderStore(
    const BlockId& id) {
  LARDER_ASSIGN_OR_RETURN(Mount mount, mounts_->Get(id.mount));
  LARDER_ASSIGN_OR_RETURN(BlockWriter writer,
                          BlockWriter::Create(id, ObjectFor(id)));
  absl::Span<char> buf = writer.buffer();
  const uint64_t sub =
      std::max<uint64_t>(options_.fetch_subrange_bytes, 64 << 10);
  const size_t parts = buf.size() >= 2 * sub ? (buf.size() + sub - 1) / sub : 1;

  struct Part {
    absl::Status status;
    size_t got = 0;
  };
  // The object's size as the under-store reported it with each part: the
  // request's object_size is believed only when they agree.
  std::vector<Part> results(parts);
  auto read_part = [&, store = mount.store](size_t i) {
    const size_t off = i * sub;
    const size_t len =
        parts == 1 ? buf.size() : std::min<size_t>(sub, buf.size() - off);
    metrics_->under_store_requests.Increment();
    uint64_t object_size = 0;
    absl::StatusOr<size_t> n =
        store->ReadRange(id.path, id.offset() + off, buf.subspan(off, len),
                         id.version, &object_size);
    if (!n.ok()) {
      // The store's, not this worker's: a client reports it, not failing
      // over to another worker that would wait on the same store.
      results[i].status = MarkStoreError(n.status());
    } else if (object_size != id.object_size) {
      results[i].status = absl::FailedPreconditionError(absl::StrCat(
          id.DebugString(), ": the under-store says the object is ",
          object_size, " bytes, not ", id.object_size,
          " as the request says; nothing cached"));
    } else {
      results[i].got = *n;
      if (*n != len) {
        results[i].status = absl::FailedPreconditionError(absl::StrCat(
            id.DebugString(), ": the object is shorter than its stated size (",
            id.object_size, "); it changed"));
      }
    }
  };
  if (parts == 1) {
    read_part(0);
  } else {
    std::atomic<size_t> remaining{parts};
    absl::Notification all_done;
    for (size_t i = 0; i < parts; ++i) {
      range_pool_->Schedule([&, i] {
        read_part(i);
        if (remaining.fetch_sub(1) == 1) all_done.Notify();
      });
    }
    all_done.WaitForNotification();
  }
  for (const Part& p : results) LARDER_RETURN_IF_ERROR(p.status);
  return std::move(writer).Finish();
}

absl::Duration BlockStore::ProtectAfterRead(const BlockId& id) const {
  absl::StatusOr<Mount> mount = mounts_->Get(id.mount);
  return mount.ok() ? mount->protect_after_read : absl::ZeroDuration();
}

void BlockStore::AdmitRam(const std::shared_ptr<const Block>& block) {
  std::vector<std::shared_ptr<const Block>> evicted;
  bool admitted = false;
  const absl::Duration protect = ProtectAfterRead(block->id());
  {
    absl::MutexLock lock(&mu_);
    // A block of an object memfd retired while it was filled is not kept:
    // it would hold the whole retired memfd in memory.
    bool current = true;
    if (const auto& object = block->object()) {
      auto it = objects_.find(ObjectKey(block->id()));
      current = it != objects_.end() && it->second.lock() == object;
    }
    const uint64_t before = ram_.evictions();
    if (current) {
      admitted = ram_.Admit(block->key(), block, block->length(),
                            options_.rules.Pinned(block->id()),
                            options_.rules.Ttl(block->id()), absl::Now(),
                            &evicted, protect);
    }
    const size_t direct = evicted.size();
    RetireObjects(&evicted);
    metrics_->evictions_ram.Increment(static_cast<double>(
        ram_.evictions() - before + (evicted.size() - direct)));
  }
  if (!admitted) {
    LARDER_LOG(DEBUG, "ram.not_admitted")
        .Field("block", block->id().DebugString());
  }
  // A block leaving RAM that NVMe does not hold yet is written there now;
  // without NVMe it is gone.
  if (nvme_) {
    for (auto& b : evicted) {
      if (!nvme_->Contains(b->key())) QueueNvmeWrite(std::move(b));
    }
  } else if (!evicted.empty()) {
    absl::MutexLock lock(&mu_);
    for (const auto& b : evicted) {
      if (journal_removed_.size() < kMaxJournal)
        journal_removed_.push_back(b->key());
    }
  }
}

void BlockStore::QueueNvmeWrite(std::shared_ptr<const Block> block) {
  {
    absl::MutexLock lock(&mu_);
    if (pending_nvme_writes_ >= options_.max_pending_nvme_writes) {
      metrics_->nvme_write_failures.Increment();
      // NVMe cannot keep up: this block stays RAM-only, or, evicted from
      // RAM, is gone (a RAM eviction is journaled only when NVMe keeps it).
      JournalGoneLocked(block->key());
      return;
    }
    ++pending_nvme_writes_;
  }
  nvme_pool_->Schedule([this, block = std::move(block)] {
    absl::Status st = nvme_->Write(*block, ProtectAfterRead(block->id()));
    if (!st.ok()) {
      metrics_->nvme_write_failures.Increment();
      LARDER_LOG(DEBUG, "nvme.write")
          .Field("block", block->id().DebugString())
          .Field("status", st);
    }
    absl::MutexLock lock(&mu_);
    if (!st.ok()) JournalGoneLocked(block->key());
    --pending_nvme_writes_;
  });
}

void BlockStore::JournalGoneLocked(const BlockKey& key) {
  if (!ram_.Contains(key) && journal_removed_.size() < kMaxJournal)
    journal_removed_.push_back(key);
}

bool BlockStore::Lease(const BlockKey& key, absl::Time until) {
  absl::MutexLock lock(&mu_);
  if (!ram_.Lease(key, until)) return false;
  ++leases_;
  metrics_->leases.Set(leases_);
  return true;
}

void BlockStore::Unlease(const BlockKey& key) {
  absl::MutexLock lock(&mu_);
  ram_.Unlease(key);
  if (leases_ > 0) --leases_;
  metrics_->leases.Set(leases_);
}

size_t BlockStore::Evict(const std::vector<BlockId>& ids) {
  size_t n = 0;
  std::vector<BlockKey> keys;
  {
    absl::MutexLock lock(&mu_);
    std::vector<std::shared_ptr<const Block>> gone;
    for (const BlockId& id : ids) {
      keys.push_back(id.Key());
      if (auto b = ram_.Erase(keys.back())) gone.push_back(*std::move(b));
    }
    RetireObjects(&gone);
    n = gone.size();
    for (const auto& b : gone) {
      if (journal_removed_.size() < kMaxJournal)
        journal_removed_.push_back(b->key());
    }
  }
  if (nvme_) n += nvme_->Erase(keys);
  return n;
}

size_t BlockStore::EvictPrefix(absl::string_view prefix) {
  size_t n;
  {
    absl::MutexLock lock(&mu_);
    std::vector<std::shared_ptr<const Block>> gone = ram_.EraseIf(
        [&](const BlockKey&, const std::shared_ptr<const Block>& b) {
          return absl::StartsWith(
              absl::StrCat(b->id().mount, "/", b->id().path), prefix);
        });
    RetireObjects(&gone);
    n = gone.size();
    for (const auto& b : gone) {
      if (journal_removed_.size() < kMaxJournal)
        journal_removed_.push_back(b->key());
    }
  }
  if (nvme_) n += nvme_->ErasePrefix(prefix);
  return n;
}

BlockStore::Stats BlockStore::GetStats() {
  Stats s;
  {
    absl::MutexLock lock(&mu_);
    s.ram_capacity = ram_.capacity();
    s.ram_used = ram_.used();
    s.ram_blocks = ram_.size();
    s.ram_evictions = ram_.evictions();
    s.ram_max_blocks = ram_.max_entries() == SIZE_MAX ? 0 : ram_.max_entries();
    s.leases = static_cast<uint64_t>(leases_);
  }
  if (nvme_) {
    s.has_nvme = true;
    s.nvme = nvme_->GetStats();
  }
  return s;
}

std::vector<BlockKey> BlockStore::CachedKeys() {
  std::vector<BlockKey> keys;
  {
    absl::MutexLock lock(&mu_);
    ram_.ForEach([&](const BlockKey& k, const auto&) { keys.push_back(k); });
  }
  if (nvme_) {
    std::vector<BlockKey> more = nvme_->Keys();
    keys.insert(keys.end(), more.begin(), more.end());
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  }
  return keys;
}

void BlockStore::DrainJournal(std::vector<BlockKey>* added,
                              std::vector<BlockKey>* removed) {
  std::vector<BlockKey> nvme_removed =
      nvme_ ? nvme_->TakeRemoved() : std::vector<BlockKey>();
  absl::MutexLock lock(&mu_);
  // A block that left NVMe but is still in RAM is still held here.
  for (const BlockKey& k : nvme_removed) {
    if (!ram_.Contains(k) && journal_removed_.size() < kMaxJournal)
      journal_removed_.push_back(k);
  }
  if (added != nullptr) added->swap(journal_added_);
  if (removed != nullptr) removed->swap(journal_removed_);
  journal_added_.clear();
  journal_removed_.clear();
}

void BlockStore::UpdateGauges() {
  Stats s = GetStats();
  metrics_->ram_used.Set(static_cast<double>(s.ram_used));
  if (huge_pages_)
    metrics_->huge_page_queue.Set(static_cast<double>(huge_pages_->queued()));
  uint64_t used = 0, cap = 0, evictions = 0;
  for (const auto& d : s.nvme.dirs) {
    used += d.used;
    cap += d.capacity;
    evictions += d.evictions;
  }
  {
    absl::MutexLock lock(&mu_);
    if (evictions > nvme_evictions_reported_) {
      metrics_->evictions_nvme.Increment(
          static_cast<double>(evictions - nvme_evictions_reported_));
      nvme_evictions_reported_ = evictions;
    }
  }
  metrics_->nvme_used.Set(static_cast<double>(used));
  metrics_->nvme_capacity.Set(static_cast<double>(cap));
}

}  // namespace larder
