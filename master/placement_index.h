// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: placement_index.h
// -----------------------------------------------------------------------------
//
// The master's placement index: which workers hold each block. Sized for a
// cluster of 1,000 workers and 100 million block replicas:
//
//   * Workers are small integers (`Membership` hands them out), not id
//     strings, and a block's holder sits inline in its slot (nearly every
//     block has exactly one, its ring owner); a block held by two or more
//     moves its list to a side table.
//   * A slot is the 16-byte key, stored 4-byte aligned, and the 4-byte holder:
//     20 bytes and a control byte in an open-addressing (absl "Swiss") table,
//     which keeps between 7/16 and 7/8 of its slots full: 24 to 48 bytes a
//     replica, against about 170 with a vector of id strings per key.
//   * The table is split in 1,024 shards by the key's top bits, each with
//     its own mutex. A report is inserted shard by shard, so a lookup waits
//     for at most one shard's share of it (and one shard's rehash, 1/1,024
//     of the index) instead of the whole report, and reports from several
//     workers go on in parallel on different shards.
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

  // Block replicas held (a block on two workers counts twice).
  uint64_t replicas() const;
  // Bytes the index's tables take, allocated capacity included.
  uint64_t MemoryBytes() const;

  static constexpr int kShardBits = 10;
  static constexpr size_t kShards = size_t{1} << kShardBits;

 private:
  // A block key as stored: 4-byte aligned, so that a slot is 20 bytes.
  struct Key {
    explicit Key(const BlockKey& k);
    uint32_t w[4];
    friend bool operator==(const Key&, const Key&) = default;
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine_contiguous(std::move(h), k.w, 4);
    }
  };
  // The slot's holder when the block has two or more: see `many`.
  static constexpr Holder kMany = ~Holder{0};

  struct alignas(64) Shard {
    mutable absl::Mutex mu;
    absl::flat_hash_map<Key, Holder> keys ABSL_GUARDED_BY(mu);
    // The holders of blocks held by two or more workers.
    absl::flat_hash_map<Key, std::vector<Holder>> many ABSL_GUARDED_BY(mu);
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
