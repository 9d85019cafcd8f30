// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: block_key.h
// -----------------------------------------------------------------------------
//
// The block model. A block is a fixed-size range of one object version:
// block `index` of an object covers bytes [index * block_size,
// min(object_size, (index + 1) * block_size)). Its key hashes the mount, the
// object path, the object version, the block size and the index, so a changed
// object or a re-configured mount can never hit old bytes. Its place on the
// ring hashes the same but the version: a writer knows which workers will
// own the blocks of an object before the store names its version, and sends
// each part to them. Both are part of the cluster's wire contract (every
// client and worker must compute them alike): never change how either is
// computed.
#ifndef LARDER_COMMON_BLOCK_KEY_H_
#define LARDER_COMMON_BLOCK_KEY_H_

#include <cstdint>
#include <string>

#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/hash.h"

namespace larder {

// Default block size of a mount: 4 MiB.
inline constexpr uint64_t kDefaultBlockSize = 4ull << 20;
// Default block size of a writable mount: 8 MiB, the size of a write's
// upload parts (write_parts.h), so that each part is one block and the
// worker that uploads a part owns all of it. With 4 MiB blocks the second
// block of a part mostly belongs to another worker and goes there over the
// network during the save (20% more worker CPU per GB saved, measured).
inline constexpr uint64_t kDefaultWritableBlockSize = 8ull << 20;
inline constexpr uint64_t DefaultBlockSize(bool writable) {
  return writable ? kDefaultWritableBlockSize : kDefaultBlockSize;
}
// The block sizes a mount may have: 4 KiB to 1 GiB.
inline constexpr uint64_t kMinBlockSize = 4096;
inline constexpr uint64_t kMaxBlockSize = 1ull << 30;
// OK, or InvalidArgument naming `block_size` and the range (the master
// checks a mount it adds, the worker one from its flags).
absl::Status CheckBlockSize(uint64_t block_size);

// 128-bit block key.
struct BlockKey {
  uint64_t low = 0;
  uint64_t high = 0;
  friend bool operator==(const BlockKey&, const BlockKey&) = default;
  friend bool operator<(const BlockKey& a, const BlockKey& b) {
    return a.high != b.high ? a.high < b.high : a.low < b.low;
  }
  template <typename H>
  friend H AbslHashValue(H h, const BlockKey& k) {
    return H::combine(std::move(h), k.low, k.high);
  }
  std::string ToHex() const;  // 32 hex digits.
  // Parses ToHex's output. Returns false on malformed input.
  static bool FromHex(absl::string_view hex, BlockKey* key);
};

// Identity of one block, as carried in requests.
struct BlockId {
  std::string mount;
  std::string path;
  std::string version;
  uint64_t index = 0;
  uint64_t block_size = kDefaultBlockSize;
  uint64_t object_size = 0;

  BlockKey Key() const;
  // The block's position on the ring (common/ring.h): its owner. Hashes
  // the mount, path, block size and index, not the version.
  uint64_t Placement() const;
  // First byte of the block within the object.
  uint64_t offset() const { return index * block_size; }
  // Bytes in this block (the last one is shorter).
  uint64_t length() const;
  // "mount/path#index" for logs and errors.
  std::string DebugString() const;
  // InvalidArgument if the block lies beyond the object, the mount or the
  // version is empty, or the version is not a bounded printable token
  // (kMaxVersionBytes of '!'..'~' without '"': it travels in If-Match
  // headers). The path is the under-store's to check ("" is a mount that is
  // one file).
  absl::Status Validate() const;
};

// Longest object version a block may name.
inline constexpr size_t kMaxVersionBytes = 1024;

// FailedPrecondition unless `held` (a block the worker cached, whose object
// size and version its own fetch saw) is the block that `asked` names: the
// same object, version, block size, index and object size. A request that
// describes a cached block wrongly is refused; it never reads, replaces or
// deletes what is held.
absl::Status CheckSameBlock(const BlockId& held, const BlockId& asked);

// A byte range [begin, end) within a block.
struct ByteRange {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t size() const { return end - begin; }
};

// The part [offset, offset + length) of a block that holds `held` bytes,
// clipped to its end (pass UINT64_MAX for "to the end"). The one place where a
// requested range meets the bytes actually held: every read path (gRPC,
// short-circuit, batch, NVMe) bounds its request with it, so no sum wraps
// and no range leaves the block. Errors: OutOfRange (offset > held).
absl::StatusOr<ByteRange> RangeWithin(uint64_t held, uint64_t offset,
                                      uint64_t length);

// Number of blocks of an object (0 for an empty object).
inline uint64_t BlockCount(uint64_t object_size, uint64_t block_size) {
  // Not (size + block_size - 1) / block_size: that wraps near 2^64.
  return object_size / block_size + (object_size % block_size != 0);
}

}  // namespace larder

#endif  // LARDER_COMMON_BLOCK_KEY_H_
