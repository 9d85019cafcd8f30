// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: writes.h
// -----------------------------------------------------------------------------
//
// The worker's half of a write (see Master.BeginWrite in proto/master.proto).
// A writer sends each part of the object to the worker that owns the part's
// first block (WorkerData.WritePart, upload = true), which uploads the part
// to the under-store, keeps the blocks it owns here, in WriteStaging, under
// the write's id, and sends the others to the workers that own them
// (upload = false), which keep them likewise. After the master committed
// the object, the writer tells those workers its version (PublishWrite):
// each asks the master what the write committed (Master.GetCommittedWrite:
// the writer's word is not taken) and checks with the under-store that the
// object has that version and size now, then moves the kept blocks into its
// block store as cached blocks of that version. So the first read after a
// commit is a hit on every node, and a write's upload is spread over the
// workers instead of one process.
//
// Nothing a writer keeps here is served before the commit, nothing is served
// as a version the under-store does not hold with that size, and nothing is
// served as a write the master did not commit: a part's blocks are kept
// only once its upload succeeded (or, sent by a peer that uploads it, only
// from a worker: the admin role), and only under the handle the write's
// first blocks came with. Kept
// blocks are bounded (max_bytes; a part beyond it is uploaded but not kept,
// and its blocks are read from the store on first use) and dropped after
// max_age (by a thread of its own: a writer that died sends nothing more
// that could trigger it), or when the writer aborts (PublishWrite with
// discard).
//
// Thread-safe.
#ifndef LARDER_WORKER_WRITES_H_
#define LARDER_WORKER_WRITES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "proto/larder.pb.h"
#include "proto/master.pb.h"
#include "understore/under_store.h"
#include "worker/block_store.h"

namespace larder {

struct WriteStagingOptions {
  // Most bytes of kept blocks (and parts being received) at once. Default
  // 1 GiB.
  uint64_t max_bytes = 1ull << 30;
  // Kept blocks of a write not published this long after its first part
  // are dropped. Default 6 h (the master's write_max_age).
  absl::Duration max_age = absl::Hours(6);
};

class WriteStaging {
 public:
  // Starts the thread that drops writes older than max_age, every
  // max_age / 4 (at least every minute, at most every 10 ms).
  WriteStaging(BlockStore* store, WriteStagingOptions options);
  ~WriteStaging();
  WriteStaging(const WriteStaging&) = delete;
  WriteStaging& operator=(const WriteStaging&) = delete;

  // Reserves `bytes` of the budget for a part being received; give it
  // back with Release. Kept blocks are dropped to make room (those of the
  // write kept first, first): they are a cache, read from the store on
  // first use when dropped, and an upload must not wait for its writer's
  // close to free them. Errors: ResourceExhausted (parts being received
  // hold the budget: retry), FailedPrecondition (more than the whole
  // budget: never fits).
  absl::Status Reserve(uint64_t bytes);
  void Release(uint64_t bytes);

  // A kept block: a slice of the part it came in, which its blocks share
  // (keeping them copies nothing; the part is freed with its last block).
  struct Block {
    std::shared_ptr<const std::string> part;
    size_t offset = 0;
    size_t size = 0;
    absl::string_view bytes() const {
      return absl::string_view(*part).substr(offset, size);
    }
  };

  // Keeps blocks `indexes` of the write out of `part`, the bytes of a part
  // that starts at byte `part_offset` of the object (block i is the slice
  // at i * block_size - part_offset), in the budget until published or
  // dropped; a block kept again (a part sent again) replaces the earlier.
  // All or none: returns how many were kept, 0 when the budget has no room
  // for them all, an index is not in the part, or the write's blocks kept
  // so far came with another handle (mount, path, upload or block size). With
  // `reservation` (the part's, from Reserve), the kept bytes move out of it (it
  // shrinks by them): keeping a part's blocks never needs more budget than the
  // part.
  uint32_t Keep(const v1::WriteHandle& handle,
                std::shared_ptr<const std::string> part, uint64_t part_offset,
                absl::Span<const uint64_t> indexes,
                uint64_t* reservation = nullptr);

  // Moves the write's kept blocks into the block store as blocks of
  // `version` (object of `object_size` bytes), after checking that
  // `committed` (the master's record of the write, Master.GetCommittedWrite)
  // is that write, with that version and size, and with `store` that the
  // object has them now; blocks whose index `forward` names are not cached
  // here but handed back in `forwarded` (address -> index -> bytes) for the
  // caller to send to their owners. Returns how many were cached. Either
  // way the write's kept blocks are gone from here. Errors:
  // InvalidArgument (`handle` is not the one the blocks came with),
  // FailedPrecondition (the master committed another upload, version or
  // size, or the store holds another: nothing is published), the store's
  // Stat errors.
  using Forwarded =
      std::map<std::string, std::vector<std::pair<uint64_t, Block>>>;
  absl::StatusOr<uint32_t> Publish(
      const v1::WriteHandle& handle, const std::string& version,
      uint64_t object_size, const v1::CommittedWrite& committed,
      UnderStore& store, const std::map<uint64_t, std::string>& forward,
      Forwarded* forwarded);
  // Whether blocks of write `write_id` are kept here.
  bool Has(const std::string& write_id) const;
  void Discard(const std::string& write_id);
  // Drops writes whose first block was kept before now - max_age.
  void Expire(absl::Time now);

  // Bytes kept and reserved; of them, reserved for parts being received.
  uint64_t bytes() const;
  uint64_t receiving() const;
  size_t writes() const;
  // Kept blocks dropped to make room for parts being received, so far.
  uint64_t dropped_blocks() const;

 private:
  struct Kept {
    v1::WriteHandle handle;
    absl::Time first;
    std::map<uint64_t, Block> blocks;  // By block index.
  };
  using WriteMap = absl::flat_hash_map<std::string, Kept>;
  // Removes a write, giving its kept blocks' bytes back; returns them.
  Kept Take(WriteMap::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  BlockStore* const store_;
  const WriteStagingOptions options_;
  // Drops kept blocks, of the write kept first first, until `needed`
  // more bytes fit.
  void DropKeptFor(uint64_t needed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The expiry thread's loop.
  void ExpireEvery(absl::Duration period);

  mutable absl::Mutex mu_;
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;      // Kept and receiving.
  uint64_t receiving_ ABSL_GUARDED_BY(mu_) = 0;  // Reserved by parts.
  uint64_t dropped_blocks_ ABSL_GUARDED_BY(mu_) = 0;
  WriteMap writes_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread expiry_;  // Last: started after the state above.
};

}  // namespace larder

#endif  // LARDER_WORKER_WRITES_H_
