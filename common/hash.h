// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: hash.h
// -----------------------------------------------------------------------------
//
// xxh3-based hashing. Every placement decision in Larder (block keys, the
// consistent-hash ring) goes through these functions, so that every process of
// a cluster, whatever its build, maps a block to the same worker. The values
// are therefore part of the wire contract: never change the seed or the
// encoding.
//
// Usage:
//
//   uint64_t h = larder::Hash64("some bytes");
//   larder::Hasher hasher;
//   hasher.Add("mount-id").Add(path).Add(version).Add(block_index);
//   uint64_t key = hasher.Finish64();
#ifndef LARDER_COMMON_HASH_H_
#define LARDER_COMMON_HASH_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace larder {

// xxh3 64-bit hash of `data` with `seed`.
uint64_t Hash64(absl::string_view data, uint64_t seed = 0);

// A 128-bit xxh3 digest.
struct Hash128Value {
  uint64_t low = 0;
  uint64_t high = 0;
  friend bool operator==(const Hash128Value&, const Hash128Value&) = default;
  // 32 lowercase hex digits, high word first.
  std::string ToHex() const;
};
Hash128Value Hash128(absl::string_view data);

// Hashes a sequence of fields unambiguously: each string is length-prefixed,
// so ("ab", "c") and ("a", "bc") differ. Not thread-safe; cheap to create.
class Hasher {
 public:
  Hasher();
  ~Hasher();
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;

  Hasher& Add(absl::string_view field);
  Hasher& Add(uint64_t field);

  uint64_t Finish64() const;
  Hash128Value Finish128() const;

 private:
  struct State;
  State* state_;  // Owned.
};

}  // namespace larder

#endif  // LARDER_COMMON_HASH_H_
