// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: nvme_tier.h
// -----------------------------------------------------------------------------
//
// The NVMe tier: blocks as files in one or more directories (one per device),
// each with its own capacity.
//
// On-disk format of one block, `DIR/blocks/HH/<key hex>.blk`:
//
//   header (a multiple of 4096 bytes, so the data is page-aligned):
//     "LRDRBLK1" magic, format version, header size, block key, data length,
//     xxh3-64 of the data, creation time, the block's identity (mount, path,
//     version, index, block size, object size), xxh3-64 of the header itself
//   data (length bytes)
//
// Files are written to DIR/tmp/ and renamed into place, so a crash never
// leaves a half-written block under blocks/ (leftover temp files are deleted
// at start). Every read from disk verifies the data checksum: a mismatch
// deletes the file, counts a checksum failure and reports DataLoss, and the
// caller refetches — corrupt bytes are never served.
//
// On start the index is rebuilt from the headers (not the data, which is
// verified on read), oldest modification first in LRU order, so a restarted
// worker is still warm. Files with a bad header are deleted.
//
// Free space: a directory is never filled past `reserve_bytes` of free space
// (statvfs). A directory that is full or failing (ENOSPC, EIO) is marked
// degraded and skipped; writes then fail with ResourceExhausted and the
// worker carries on RAM-only. A degraded directory is retried after 30 s.
//
// Thread-safe. Reads and writes of different blocks run in parallel; the
// index lock is never held during I/O.
#ifndef LARDER_WORKER_NVME_TIER_H_
#define LARDER_WORKER_NVME_TIER_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "worker/block.h"
#include "worker/cache_index.h"

namespace larder {

struct NvmeDirOptions {
  std::string path;
  uint64_t capacity_bytes = 0;
};

struct NvmeOptions {
  std::vector<NvmeDirOptions> dirs;
  // Free space kept on each file system, whatever the capacity says.
  // Default 1 GiB.
  uint64_t reserve_bytes = 1ull << 30;
  EvictionPolicy policy = EvictionPolicy::kLru;
  // fdatasync each block file before the rename. Default false: a block is
  // reproducible from the under-store and the checksum catches a torn file.
  bool sync_writes = false;
};

class NvmeTier {
 public:
  struct DirStats {
    std::string path;
    uint64_t capacity = 0;
    uint64_t used = 0;
    uint64_t blocks = 0;
    uint64_t evictions = 0;
    uint64_t hits = 0;  // Blocks read back from this directory.
    bool degraded = false;
  };
  struct Stats {
    std::vector<DirStats> dirs;
    uint64_t checksum_failures = 0;
    uint64_t rebuilt_blocks = 0;
    uint64_t dropped_at_rebuild = 0;
    uint64_t write_failures = 0;
  };

  // Creates the directories if needed and rebuilds the index from them.
  // Errors: InvalidArgument (no directories, zero capacity), PermissionDenied
  // or Internal (a directory cannot be created or scanned).
  static absl::StatusOr<std::unique_ptr<NvmeTier>> Open(
      NvmeOptions options, const CacheRules* rules);

  bool Contains(const BlockKey& key);

  // Reads and verifies a block. Errors: NotFound (not in the tier), DataLoss
  // (checksum or header mismatch; the file was removed), Unavailable (I/O
  // error), ResourceExhausted (no memory for the block). The block is read
  // into `object` when given (see BlockWriter::Create).
  absl::StatusOr<std::shared_ptr<const Block>> Read(
      const BlockId& id, std::shared_ptr<const ObjectFile> object = nullptr);

  // Writes a block (replacing an older copy). Errors: ResourceExhausted (no
  // directory can take it: capacity under policy none, reserve, degraded),
  // Internal (I/O error; the directory is marked degraded). `protect`: its
  // mount's eviction=epoch window (CacheIndex::Admit).
  absl::Status Write(const Block& block,
                     absl::Duration protect = absl::ZeroDuration());

  // Removes blocks; returns how many.
  size_t Erase(const std::vector<BlockKey>& keys);
  size_t ErasePrefix(absl::string_view mount_path_prefix);

  Stats GetStats();

  // Every key in the tier.
  std::vector<BlockKey> Keys();
  // Keys that left the tier (evicted, erased, dropped as corrupt) since the
  // last call, for the master's placement index.
  std::vector<BlockKey> TakeRemoved();

 private:
  struct FileInfo {
    int dir = 0;
    BlockId id;
  };
  struct Dir {
    std::string path;
    CacheIndex<FileInfo> index;
    absl::Time degraded_until = absl::InfinitePast();
    std::atomic<uint64_t> hits{0};
    Dir(std::string p, uint64_t capacity, EvictionPolicy policy)
        : path(std::move(p)), index(capacity, policy) {}
  };

  NvmeTier(NvmeOptions options, const CacheRules* rules)
      : options_(std::move(options)), rules_(rules) {}
  absl::Status Rebuild(int dir);
  std::string BlockPath(int dir, const BlockKey& key) const;
  // Deletes files of evicted entries (outside the lock).
  void DeleteFiles(const std::vector<FileInfo>& victims);
  void Degrade(int dir, absl::string_view why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const NvmeOptions options_;
  const CacheRules* const rules_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<Dir>> dirs_ ABSL_GUARDED_BY(mu_);
  // Which directory holds a key (a key lives in at most one).
  absl::flat_hash_map<BlockKey, int> where_ ABSL_GUARDED_BY(mu_);
  // Keys of where_ whose file is still being written, by the token of the
  // Write that writes it: not Contained, not Read (there is no file yet to
  // find), and when one leaves the tier meanwhile (erased, evicted) its
  // writer deletes the file it renames into place instead of leaving a file
  // no index entry names.
  absl::flat_hash_map<BlockKey, uint64_t> writing_ ABSL_GUARDED_BY(mu_);
  uint64_t next_write_ ABSL_GUARDED_BY(mu_) = 0;
  int next_dir_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<BlockKey> removed_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> checksum_failures_{0};
  std::atomic<uint64_t> write_failures_{0};
  uint64_t rebuilt_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace larder

#endif  // LARDER_WORKER_NVME_TIER_H_
