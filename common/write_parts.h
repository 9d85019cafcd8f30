// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: write_parts.h
// -----------------------------------------------------------------------------
//
// How a written object is cut into upload parts. Every part but the last is
// a whole number of blocks, so the worker that owns a part's first block
// can keep the part's blocks for the cache; and parts grow with the object,
// so that no upload needs more than kMaxWriteParts (S3's limit):
//
//   parts 1..1000      `first` bytes each
//   parts 1001..2000   2 * first
//   ...                doubling every 1000 parts, up to the largest
//                      multiple of `first` within kMaxWritePartBytes
//
// With 8 MiB first parts, 10,000 parts hold 7.7 TiB (S3's largest object
// is 5 TiB).
#ifndef LARDER_COMMON_WRITE_PARTS_H_
#define LARDER_COMMON_WRITE_PARTS_H_

#include <algorithm>
#include <cstdint>

namespace larder {

// S3's rules: every part but the last at least 5 MiB, at most 10,000 parts,
// at most 5 GiB a part; Azure's largest block is 4000 MiB, the bound of
// every store's parts here.
inline constexpr uint64_t kMinWritePartBytes = 5ull << 20;
inline constexpr uint32_t kMaxWriteParts = 10000;
inline constexpr uint64_t kMaxWritePartBytes = 4000ull << 20;
// Parts per doubling of the part size.
inline constexpr uint32_t kWritePartsPerTier = 1000;

// The first parts' size for an object of about `size_hint` bytes (0: not
// known) in a mount of `block_size` blocks: the smallest multiple of the
// block size that is at least kMinWritePartBytes and `floor_bytes`, and
// big enough that `size_hint` bytes fit in the first kWritePartsPerTier
// parts.
inline uint64_t FirstWritePartBytes(uint64_t block_size, uint64_t size_hint,
                                    uint64_t floor_bytes = 0) {
  uint64_t want = std::max(kMinWritePartBytes, floor_bytes);
  if (size_hint > 0)
    want = std::max(want,
                    (size_hint + kWritePartsPerTier - 1) / kWritePartsPerTier);
  // Never above a part's bound (an object too large for every store's
  // parts then fails at its last part, named by the writer).
  want = std::min(want, kMaxWritePartBytes);
  if (block_size == 0) return want;
  uint64_t blocks = (want + block_size - 1) / block_size;
  if (blocks * block_size > kMaxWritePartBytes)
    blocks = kMaxWritePartBytes / block_size;
  return std::max<uint64_t>(blocks, 1) * block_size;
}

// The size of part `number` (from 1) of an upload whose first parts have
// `first` bytes (the last part of an object is shorter).
inline uint64_t WritePartBytes(uint64_t first, uint32_t number) {
  const uint32_t tier = number == 0 ? 0 : (number - 1) / kWritePartsPerTier;
  // A multiple of `first` (so of the block size, whatever it is: part
  // offsets stay on block boundaries), at most kMaxWritePartBytes.
  const uint64_t bound =
      first == 0 ? kMaxWritePartBytes
                 : std::max(first, kMaxWritePartBytes / first * first);
  return std::min(first << std::min<uint32_t>(tier, 9), bound);
}

// Where part `number` (from 1) of such an upload starts: the bytes of the
// parts before it. `first` at most kMaxWritePartBytes (no overflow).
inline uint64_t WritePartOffset(uint64_t first, uint32_t number) {
  uint64_t offset = 0;
  for (uint32_t tier = 1; tier < number; tier += kWritePartsPerTier) {
    const uint32_t n = std::min(number - tier, kWritePartsPerTier);
    offset += uint64_t{n} * WritePartBytes(first, tier);
  }
  return offset;
}

}  // namespace larder

#endif  // LARDER_COMMON_WRITE_PARTS_H_
