// Copyright 2026 The Larder Authors.
//
// Conversion between BlockId (common/block_key.h) and its wire form,
// v1::BlockRef (proto/worker.proto). Shared by the worker, the client and the
// master, so every process names a block the same way.
#ifndef LARDER_COMMON_BLOCK_PROTO_H_
#define LARDER_COMMON_BLOCK_PROTO_H_

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/block_key.h"
#include "proto/worker.pb.h"

namespace larder {

// ShortCircuitRequest.lease_ms of an EXPORT whose lease lasts until RELEASE
// or the connection closes (granted to a peer running as root only).
inline constexpr uint32_t kLeaseUntilReleased = 0xFFFFFFFFu;

inline BlockId FromProto(const v1::BlockRef& ref) {
  return BlockId{ref.mount(), ref.path(),       ref.version(),
                 ref.index(), ref.block_size(), ref.object_size()};
}

inline void ToProto(const BlockId& id, v1::BlockRef* ref) {
  ref->set_mount(id.mount);
  ref->set_path(id.path);
  ref->set_version(id.version);
  ref->set_index(id.index);
  ref->set_block_size(id.block_size);
  ref->set_object_size(id.object_size);
}

// A block key on the wire (Locate): 16 bytes, low then high word.
inline std::string KeyToBytes(const BlockKey& key) {
  std::string out(16, '\0');
  std::memcpy(out.data(), &key.low, 8);
  std::memcpy(out.data() + 8, &key.high, 8);
  return out;
}

inline bool KeyFromBytes(absl::string_view bytes, BlockKey* key) {
  if (bytes.size() != 16) return false;
  std::memcpy(&key->low, bytes.data(), 8);
  std::memcpy(&key->high, bytes.data() + 8, 8);
  return true;
}

// Many keys on the wire (block reports): 16 bytes each, back to back.
inline std::string KeysToBytes(absl::Span<const BlockKey> keys) {
  std::string out(keys.size() * 16, '\0');
  for (size_t i = 0; i < keys.size(); ++i) {
    std::memcpy(out.data() + 16 * i, &keys[i].low, 8);
    std::memcpy(out.data() + 16 * i + 8, &keys[i].high, 8);
  }
  return out;
}

// Appends the keys of KeysToBytes's output to `out`. Returns false if
// `bytes` is not a whole number of keys.
inline bool KeysFromBytes(absl::string_view bytes, std::vector<BlockKey>* out) {
  if (bytes.size() % 16 != 0) return false;
  const size_t n = bytes.size() / 16;
  out->reserve(out->size() + n);
  for (size_t i = 0; i < n; ++i) {
    BlockKey k;
    std::memcpy(&k.low, bytes.data() + 16 * i, 8);
    std::memcpy(&k.high, bytes.data() + 16 * i + 8, 8);
    out->push_back(k);
  }
  return true;
}

}  // namespace larder

#endif  // LARDER_COMMON_BLOCK_PROTO_H_
