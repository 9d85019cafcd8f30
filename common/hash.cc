// Copyright 2026 The Larder Authors.
#include "common/hash.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstring>

#include "absl/strings/str_format.h"

namespace larder {

uint64_t Hash64(absl::string_view data, uint64_t seed) {
  return XXH3_64bits_withSeed(data.data(), data.size(), seed);
}

std::string Hash128Value::ToHex() const {
  return absl::StrFormat("%016x%016x", high, low);
}

Hash128Value Hash128(absl::string_view data) {
  XXH128_hash_t h = XXH3_128bits(data.data(), data.size());
  return Hash128Value{h.low64, h.high64};
}

// Two streaming states fed the same bytes: the 64- and 128-bit variants of
// xxh3 are different functions, and callers may want either.
struct Hasher::State {
  XXH3_state_t h64;
  XXH3_state_t h128;
};

Hasher::Hasher() : state_(new State) {
  XXH3_64bits_reset(&state_->h64);
  XXH3_128bits_reset(&state_->h128);
}

Hasher::~Hasher() { delete state_; }

Hasher& Hasher::Add(uint64_t field) {
  unsigned char le[8];
  for (int i = 0; i < 8; ++i)
    le[i] = static_cast<unsigned char>(field >> (8 * i));
  XXH3_64bits_update(&state_->h64, le, sizeof(le));
  XXH3_128bits_update(&state_->h128, le, sizeof(le));
  return *this;
}

Hasher& Hasher::Add(absl::string_view field) {
  Add(static_cast<uint64_t>(field.size()));
  XXH3_64bits_update(&state_->h64, field.data(), field.size());
  XXH3_128bits_update(&state_->h128, field.data(), field.size());
  return *this;
}

uint64_t Hasher::Finish64() const { return XXH3_64bits_digest(&state_->h64); }

Hash128Value Hasher::Finish128() const {
  XXH128_hash_t h = XXH3_128bits_digest(&state_->h128);
  return Hash128Value{h.low64, h.high64};
}

}  // namespace larder
