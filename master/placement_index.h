// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: placement_index.h
// -----------------------------------------------------------------------------
//
// The master's placement index: which workers hold each block. Sized for a
// cluster of 1,000 workers and 100 million block replicas (issue 22):
//
//   * Workers are small integers (`Membership` hands them out), not id
//     strings, and a block's holders sit inline in its slot: one or two of
//     them (nearly every block has exactly one, its ring owner); a block held
//     by three or more moves its list to a side table.
//   * A slot is the 16-byte key and 8 bytes of holders in an open-addressing
//     (absl "Swiss") table: about 32 bytes a replica at the table's usual
//     fill, against about 170 with a vector of id strings per key.
//   * The table is split in 256 shards by the key's top byte, each with its
//     own mutex. A report of a million blocks is inserted shard by shard, so
//     a lookup waits for at most one shard's share of it (and one shard's
//     rehash, 1/256 of the index) instead of the whole report, and reports
//     from several workers go on in parallel on different shards.
//
// Thread-safe.
#ifndef LARDER_MASTER_PLACEMENT_INDEX_H_
#define LARDER_MASTER_PLACEMENT_INDEX_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/block_key.h"

namespace larder {

class PlacementIndex {
 public:
  // A worker's number in the index; never 0.
  using Holder = uint32_t;

  PlacementIndex();

  // Records that `holder` holds each of `keys` (a key twice counts once).
  // Returns how many of them were new for it.
  size_t Add(Holder holder, absl::Span<const BlockKey> keys);
  // Records that `holder` no longer holds `keys`; returns how many it held.
  size_t Remove(Holder holder, absl::Span<const BlockKey> keys);
  // Appends the holders of `key` to `out`.
  void Find(const BlockKey& key, std::vector<Holder>* out) const;
  bool Holds(Holder holder, const BlockKey& key) const;
  // Forgets everything.
  void Clear();

  // Block replicas held (a block on two workers counts twice).
  uint64_t replicas() const;
  // Bytes the index's tables take, allocated capacity included.
  uint64_t MemoryBytes() const;

  static constexpr int kShardBits = 8;
  static constexpr size_t kShards = size_t{1} << kShardBits;

 private:
  // Holders inline: {a}, {a, b}, or, with b == kMany, the list in `many`.
  struct Holders {
    Holder a = 0;
    Holder b = 0;
  };
  static constexpr Holder kMany = ~Holder{0};

  struct alignas(64) Shard {
    mutable absl::Mutex mu;
    absl::flat_hash_map<BlockKey, Holders> keys ABSL_GUARDED_BY(mu);
    // The holders of blocks held by three or more workers.
    absl::flat_hash_map<BlockKey, std::vector<Holder>> many ABSL_GUARDED_BY(mu);
    uint64_t replicas ABSL_GUARDED_BY(mu) = 0;
  };

  static size_t ShardOf(const BlockKey& key) {
    return static_cast<size_t>(key.high >> (64 - kShardBits));
  }
  // Calls fn(shard, keys of that shard) for every shard `keys` touch, each
  // once, starting at shard `first` (so that concurrent reports do not all
  // queue on the same shard).
  template <typename Fn>
  static void ByShard(absl::Span<const BlockKey> keys, size_t first, Fn fn);

  // Runs `op` (AddTo or RemoveFrom) on each of `keys` for `holder`;
  // returns how many it changed.
  size_t Apply(Holder holder, absl::Span<const BlockKey> keys, bool adding,
               bool (*op)(Shard&, Holder, const BlockKey&));
  static bool AddTo(Shard& s, Holder holder, const BlockKey& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  static bool RemoveFrom(Shard& s, Holder holder, const BlockKey& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);

  std::unique_ptr<std::array<Shard, kShards>> shards_;
};

}  // namespace larder

#endif  // LARDER_MASTER_PLACEMENT_INDEX_H_
