// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: block_store.h
// -----------------------------------------------------------------------------
//
// The worker's block store: a RAM tier of sealed memfd blocks in front of an
// optional NVMe tier, filled from the under-stores on a miss.
//
// A read (Get) looks in RAM, then on NVMe (a hit there is verified, then
// promoted to RAM), then fetches from the mount's under-store. A miss is
// fetched once: concurrent Gets of the same block, from any RPC or the
// short-circuit socket, wait on the same fetch (single-flight). Blocks the
// NVMe tier holds are read on a pool of their own, so a store that hangs
// (every fetch thread waiting on it) never holds up what the worker has on
// disk; fetches from the store run on a bounded pool; a block of at least two
// sub-ranges is fetched as parallel ranged reads into the block's memory,
// pinned to the object version. A failed fetch hands the under-store's error to
// every waiter and leaves no partial block. A waiter that gives up (deadline,
// cancellation) leaves the fetch running for the others.
//
// Every fetched block is also written to NVMe in the background (inclusive
// tiers), so a restarted worker is warm; a RAM eviction then costs nothing.
// Blocks that the NVMe tier could not take are written when RAM evicts them.
//
// Thread-safe. Owns its thread pools; Shutdown() (or the destructor) waits
// for fetches and NVMe writes in progress.
#ifndef LARDER_WORKER_BLOCK_STORE_H_
#define LARDER_WORKER_BLOCK_STORE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/thread_pool.h"
#include "worker/block.h"
#include "worker/cache_index.h"
#include "worker/huge_pages.h"
#include "worker/metrics.h"
#include "worker/nvme_tier.h"
#include "worker/worker_mounts.h"

namespace larder {

struct BlockStoreOptions {
  // RAM tier capacity. Default 1 GiB.
  uint64_t ram_capacity_bytes = 1ull << 30;
  EvictionPolicy ram_policy = EvictionPolicy::kLru;
  // Most blocks in the RAM tier (0 = no bound). Each holds a file
  // descriptor (its memfd), so the worker sets this below its fd limit:
  // past the limit it could neither cache a block nor accept a connection.
  size_t ram_max_blocks = 0;
  // NVMe tier; none when empty.
  std::optional<NvmeOptions> nvme;
  CacheRules rules;
  // Blocks fetched from under-stores at once. Default 128: a fetch mostly
  // waits for the store (tens of ms to the first byte, more across
  // regions), and a cold epoch or a load needs many in flight to reach what
  // the store gives (at most HttpOptions::max_connections of them talk to
  // one store at a time).
  int fetch_threads = 128;
  // Most bytes of blocks being fetched at once: a block is filled outside
  // the RAM tier's capacity until it is admitted, so this bounds the memory
  // a worker uses beyond --ram_capacity for its fetches. A fetch whose block
  // does not fit waits for others to end (one larger than the whole budget
  // runs alone), and fetches take the buffer in the order they asked, so a
  // large block is not passed over by smaller ones that keep fitting. Default
  // 256 MiB: 64 blocks of 4 MiB, or all 128 fetch threads with blocks of 2 MiB
  // or less (small files). 0: no bound but the threads.
  uint64_t fetch_buffer_bytes = 256ull << 20;
  // Ranged reads in flight for sub-range fetches. Default 32.
  int range_threads = 32;
  // Fetches queued at once beyond which a prefetch is dropped (counted in
  // larder_worker_prefetches_dropped_total): a client that asks to
  // prefetch a whole dataset cannot queue unbounded work and memory.
  // Readers' fetches are never dropped. Default 65,536.
  size_t max_queued_prefetches = 65536;
  // Sub-range size for parallel fetches of large blocks. Default 4 MiB: a
  // default block is one GET (S3 advises 8-16 MB ranges; per-request costs
  // dominate smaller ones, and sequential readers already have several
  // blocks in flight); larger blocks are split.
  uint64_t fetch_subrange_bytes = 4ull << 20;
  // Background NVMe writers and the most blocks queued for them (beyond it,
  // new blocks are not written: RAM-only for them). Defaults 2 and 256.
  int nvme_write_threads = 2;
  size_t max_pending_nvme_writes = 256;
  // Reads of blocks the NVMe tier holds, at once. Default 16 (a device
  // serves many reads in parallel; each is a block's read and checksum).
  int nvme_read_threads = 16;
  // Objects of two blocks or more and at most this size keep their RAM
  // blocks in one memfd per object (block.h), which a local FUSE daemon can
  // hand to the kernel whole (ExportObject); such an object leaves RAM as a
  // whole. 0: a quarter of the RAM capacity.
  uint64_t object_file_max_bytes = 0;
  // Move RAM blocks that are read again into 2 MiB pages in the
  // background, on idle CPU (see huge_pages.h). Default true.
  bool collapse_huge_pages = true;
  // A RAM hit on a block filled at least this long ago is a re-read that
  // queues it. Default 5 s.
  absl::Duration collapse_min_age = absl::Seconds(5);
  // Collapses wait until no block was served or fetched for this long.
  // Default 250 ms.
  absl::Duration collapse_quiet = absl::Milliseconds(250);
};

enum class BlockSource { kRam, kNvme, kUnderStore };
absl::string_view BlockSourceName(BlockSource source);

// Counts `bytes` served to a client: by the tier they came from and by the
// path they took.
enum class ServePath { kGrpc, kShortCircuit };
void CountServed(WorkerMetrics* metrics, BlockSource source, uint64_t bytes,
                 ServePath path);

struct BlockRead {
  std::shared_ptr<const Block> block;
  BlockSource source;
};

class BlockStore {
 public:
  struct Stats {
    uint64_t ram_capacity = 0, ram_used = 0, ram_blocks = 0, ram_evictions = 0,
             ram_max_blocks = 0;
    NvmeTier::Stats nvme;
    bool has_nvme = false;
    uint64_t leases = 0;
  };

  // `mounts` and `metrics` must outlive the store.
  // Errors: those of NvmeTier::Open.
  static absl::StatusOr<std::unique_ptr<BlockStore>> Create(
      BlockStoreOptions options, const WorkerMounts* mounts,
      WorkerMetrics* metrics);
  ~BlockStore();

  // Returns the block, fetching it on a miss. Waits until `deadline`;
  // `cancelled` (may be empty) is polled while waiting.
  // The block is served only as the under-store describes it: a request
  // whose object size or version differs from what the worker's own fetch
  // saw (or from the block it holds) fails and changes nothing.
  // Errors: InvalidArgument (bad block id, block size differs from the
  // mount's), NotFound (unknown mount, object gone), FailedPrecondition (the
  // object changed: its version is not the requested one; or the request
  // misstates the object's size), DeadlineExceeded,
  // Cancelled, and the under-store's errors (Unavailable, PermissionDenied...).
  // `count_hit` = false for prefetch waits, which serve no reader.
  absl::StatusOr<BlockRead> Get(
      const BlockId& id, absl::Time deadline = absl::InfiniteFuture(),
      const std::function<bool()>& cancelled = nullptr, bool count_hit = true);

  // The block if it is in RAM right now and is the block `id` describes
  // (counted as a hit), else nullptr.
  // Never blocks on I/O: RPC threads use it before handing a miss to Get.
  std::shared_ptr<const Block> TryGetCached(const BlockId& id);

  // Whether the NVMe tier holds block `id`: a Get of it waits on a disk
  // read (the NVMe pool), not on the under-store. Never blocks on I/O.
  bool OnNvme(const BlockId& id);
  bool has_nvme() const { return nvme_read_pool_ != nullptr; }

  // Fetch tasks queued, not yet running, from the store and from NVMe (a
  // flight moved ahead of the prefetches counts twice until one of its
  // tasks runs).
  size_t QueuedFetches() const;
  // Fetches waiting for room in the fetch buffer right now.
  size_t FetchesWaitingForBuffer();

  // Starts fetching a block if it is not cached; returns at once. Fetches
  // for readers that wait (Get, StartFetch) go ahead of queued prefetches,
  // and a reader that waits for a block still queued as a prefetch moves it
  // ahead too: prefetching never makes a reader wait longer.
  void Prefetch(const BlockId& id);

  // A fetch in flight, which holds its block once done.
  struct Flight {
    absl::Notification done;
    absl::StatusOr<BlockRead> result = absl::UnknownError("not finished");
    // Set by the task that runs the fetch (a flight may be queued twice:
    // as a prefetch, then ahead of the prefetches for a reader).
    std::atomic<bool> claimed{false};
    std::atomic<bool> urgent{false};  // Queued ahead of the prefetches.
    // Set once the NVMe tier was asked and did not serve the block: the
    // flight's tasks go to the store (and `nvme_differs`: the NVMe file
    // describes the block otherwise than the request; see Load).
    std::atomic<bool> nvme_tried{false};
    std::atomic<bool> nvme_differs{false};
  };
  // Starts fetching a block that is not in RAM (or joins the fetch in
  // flight) and returns it; nullptr when RAM holds the block (or `id` is
  // bad): ask Get. Unlike Prefetch then Get, Await gives the fetched block
  // even when RAM did not keep it (an eviction=epoch mount's full tier,
  // policy none), with no second fetch.
  std::shared_ptr<Flight> StartFetch(const BlockId& id);
  // Waits for a fetch StartFetch returned: as Get.
  absl::StatusOr<BlockRead> Await(
      const std::shared_ptr<Flight>& flight, const BlockId& id,
      absl::Time deadline,
      const std::function<bool()>& cancelled = nullptr) const;

  // Caches `bytes` as block `id` (a written object's block, whose version
  // the caller has checked with the under-store): into RAM, and to NVMe.
  // Errors: InvalidArgument (a bad id, a length other than the block's, a
  // block size other than the mount's), NotFound (unknown mount),
  // ResourceExhausted.
  absl::Status Put(const BlockId& id, absl::string_view bytes);

  // Keeps a RAM block from eviction until `until` or Unlease. False if the
  // block is not in RAM.
  bool Lease(const BlockKey& key, absl::Time until);
  void Unlease(const BlockKey& key);

  // A whole object lent as one read-only memfd, the object at offset 0: its
  // object file, or the memfd of its only block.
  struct Export {
    int fd = -1;  // Valid while `hold` lives; dup it to pass it on.
    uint64_t size = 0;
    std::shared_ptr<const void> hold;
  };
  // Lends a whole cached object as one read-only memfd (FUSE passthrough:
  // the kernel reads it without asking anyone): `id` names any block of it.
  // Every block of the object is leased until `until` (InfiniteFuture: until
  // UnexportObject, whatever else leases it) or UnexportObject, so
  // the worker keeps counting the memory the reader uses while the lease
  // lasts; the bytes stay valid for as long as anyone holds the fd, whatever
  // the worker does (an expired export only makes the blocks evictable). Counts
  // one RAM hit per block. Errors: FailedPrecondition (not every block is in
  // RAM, or an object of several blocks is not kept as one memfd: see
  // object_file_max_bytes), InvalidArgument.
  absl::StatusOr<Export> ExportObject(const BlockId& id, absl::Time until);
  // Ends an export; `until` as it was exported with.
  void UnexportObject(const BlockId& id, absl::Time until);

  // Drops blocks from every tier; returns how many entries were removed.
  size_t Evict(const std::vector<BlockId>& ids);
  size_t EvictPrefix(absl::string_view mount_path_prefix);

  Stats GetStats();

  // Every block held in RAM or on NVMe (a full report for the master).
  std::vector<BlockKey> CachedKeys();
  // Blocks that entered / left the store since the last call (either may be
  // null: those events are dropped). For the master's placement index.
  void DrainJournal(std::vector<BlockKey>* added,
                    std::vector<BlockKey>* removed);

  // Refreshes the capacity gauges of the metrics.
  void UpdateGauges();

  // The background mover of blocks into 2 MiB pages; null when turned off.
  HugePagePromoter* huge_pages() { return huge_pages_.get(); }

  // Waits for in-flight fetches and queued NVMe writes. Idempotent.
  void Shutdown();

 private:
  BlockStore(BlockStoreOptions options, const WorkerMounts* mounts,
             WorkerMetrics* metrics);

  // Looks in RAM; nullptr on a miss. A block found past its TTL leaves RAM
  // (with its object memfd's other blocks) and is journaled as removed.
  std::shared_ptr<const Block> LookupRam(const BlockKey& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records that a block was asked for now (for the promoter); returns now.
  absl::Time Touch();
  // A reader found `block` in RAM at `now`: queue it for 2 MiB pages (once).
  void NoteReread(const std::shared_ptr<const Block>& block, absl::Time now);
  // Finds or starts the flight of `id`.
  std::shared_ptr<Flight> Join(const BlockId& id, bool* started);
  // Queues the fetch of a flight this caller started (`started`), ahead of
  // the prefetches when a reader waits for it (`urgent`); a reader that
  // joined a flight still queued as a prefetch queues it again, ahead.
  void QueueFetch(const BlockId& id, const std::shared_ptr<Flight>& flight,
                  bool started, bool urgent);
  std::shared_ptr<Flight> StartFetch(const BlockId& id, bool urgent);
  // Queues a task that runs the flight (once, whoever claims it first) on
  // the NVMe read pool or the fetch pool, ahead of prefetches if `urgent`.
  void Enqueue(const BlockId& id, const std::shared_ptr<Flight>& flight,
               bool from_nvme, bool urgent);
  // Runs on the NVMe read pool: serves the flight from NVMe, or hands it to
  // the fetch pool (ahead of the prefetches if a reader waits for it).
  void RunNvmeRead(const BlockId& id, const std::shared_ptr<Flight>& flight);
  // Runs on the fetch pool: the store's fetch (after NVMe, if it was not
  // asked yet).
  void RunFetch(const BlockId& id, const std::shared_ptr<Flight>& flight);
  // Ends a flight with `result`.
  void Finish(const BlockId& id, const std::shared_ptr<Flight>& flight,
              absl::StatusOr<BlockRead> result);
  // The mount of `id` exists with id's block size. Errors: NotFound,
  // InvalidArgument (a stale mount table).
  absl::Status CheckMount(const BlockId& id) const;
  // The block from NVMe, verified and promoted to RAM; nullptr when the
  // tier does not serve it (not there, corrupt: the store must), with
  // `*differs` set when its file describes the block otherwise.
  std::shared_ptr<const Block> LoadFromNvme(const BlockId& id, bool* differs);
  // The block from the store, into RAM and queued for NVMe (replacing a
  // file that `nvme_differs`).
  absl::StatusOr<BlockRead> LoadFromStore(const BlockId& id, bool nvme_differs);
  // An object's memfd is found by the key of its block 0.
  static BlockKey ObjectKey(const BlockId& id);
  // The memfd the blocks of id's object live in (created on first use);
  // null for objects that keep a memfd per block.
  std::shared_ptr<const ObjectFile> ObjectFor(const BlockId& id);
  // Blocks of an object memfd leave RAM together: for every block of
  // `removed` that lived in one, removes its siblings from RAM too
  // (appending them to `removed`) and forgets the memfd, so that it is
  // freed once the last reader lets go and a refetch starts a new one.
  void RetireObjects(std::vector<std::shared_ptr<const Block>>* removed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::shared_ptr<const Block>> FetchFromUnderStore(
      const BlockId& id);
  void AdmitRam(const std::shared_ptr<const Block>& block);
  // How long a read keeps the block from eviction: its mount's epoch window
  // (eviction=epoch), else zero (LRU).
  absl::Duration ProtectAfterRead(const BlockId& id) const;
  void QueueNvmeWrite(std::shared_ptr<const Block> block);
  // A block NVMe did not take: journaled as removed if RAM no longer holds
  // it either (the master's placement index must not send readers here).
  void JournalGoneLocked(const BlockKey& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const BlockStoreOptions options_;
  const WorkerMounts* const mounts_;
  WorkerMetrics* const metrics_;
  std::unique_ptr<NvmeTier> nvme_;

  absl::Mutex mu_;
  CacheIndex<std::shared_ptr<const Block>> ram_ ABSL_GUARDED_BY(mu_);
  // Flights by block key and the object size their request gave: a request
  // that misstates the size fails its own flight, not an honest one.
  using FlightKey = std::pair<BlockKey, uint64_t>;
  absl::flat_hash_map<FlightKey, std::shared_ptr<Flight>> flights_
      ABSL_GUARDED_BY(mu_);
  // Fetches the store left unanswered for --store_timeout (StalledError),
  // answered again for a moment without asking the store: the kernel
  // retries a failed read at once, and each retry would wait the whole
  // timeout again.
  struct Stalled {
    absl::Status status;
    absl::Time until;
  };
  static constexpr absl::Duration kStalledMemory = absl::Seconds(2);
  absl::flat_hash_map<FlightKey, Stalled> stalled_ ABSL_GUARDED_BY(mu_);
  // Object memfds by the key of the object's block 0.
  absl::flat_hash_map<BlockKey, std::weak_ptr<const ObjectFile>> objects_
      ABSL_GUARDED_BY(mu_);
  size_t objects_swept_ ABSL_GUARDED_BY(mu_) = 0;  // Size after last sweep.
  size_t pending_nvme_writes_ ABSL_GUARDED_BY(mu_) = 0;
  int leases_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t nvme_evictions_reported_ ABSL_GUARDED_BY(mu_) =
      0;  // Already in the counter.
  // Placement journal, drained by the master link; bounded (beyond the bound
  // the oldest events are dropped: the next full report corrects the index).
  std::vector<BlockKey> journal_added_ ABSL_GUARDED_BY(mu_);
  std::vector<BlockKey> journal_removed_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;

  // Takes `bytes` of fetch_buffer_bytes (waiting, behind the fetches that
  // asked before it, until they fit or no other fetch holds any); returns
  // what it took, for ReleaseFetchBytes.
  uint64_t AcquireFetchBytes(uint64_t bytes);
  void ReleaseFetchBytes(uint64_t bytes);
  absl::Mutex fetch_bytes_mu_;
  uint64_t fetch_bytes_ ABSL_GUARDED_BY(fetch_bytes_mu_) = 0;
  // Tickets: the next to hand out, and the one whose turn it is.
  uint64_t fetch_ticket_next_ ABSL_GUARDED_BY(fetch_bytes_mu_) = 0;
  uint64_t fetch_ticket_turn_ ABSL_GUARDED_BY(fetch_bytes_mu_) = 0;

  // When a block was last asked for (Unix ns), for the promoter.
  std::atomic<int64_t> last_use_{0};
  std::unique_ptr<HugePagePromoter> huge_pages_;

  // Declared last: destroyed first, so no task outlives the state above.
  std::unique_ptr<ThreadPool> range_pool_;
  std::unique_ptr<ThreadPool> nvme_pool_;
  std::unique_ptr<ThreadPool> fetch_pool_;
  // Reads of blocks on NVMe; null without an NVMe tier. Destroyed before the
  // fetch pool it hands misses to.
  std::unique_ptr<ThreadPool> nvme_read_pool_;
};

}  // namespace larder

#endif  // LARDER_WORKER_BLOCK_STORE_H_
