// Copyright 2026 The Larder Authors.
#include "common/block_key.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace larder {

absl::Status CheckBlockSize(uint64_t block_size) {
  if (block_size >= kMinBlockSize && block_size <= kMaxBlockSize)
    return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "block size ", block_size, " out of range (4 KiB to 1 GiB)"));
}

std::string BlockKey::ToHex() const {
  return absl::StrFormat("%016x%016x", high, low);
}

bool BlockKey::FromHex(absl::string_view hex, BlockKey* key) {
  if (hex.size() != 32) return false;
  for (char c : hex) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return absl::SimpleHexAtoi(hex.substr(0, 16), &key->high) &&
         absl::SimpleHexAtoi(hex.substr(16), &key->low);
}

BlockKey BlockId::Key() const {
  Hasher h;
  h.Add("larder-block-v1")
      .Add(mount)
      .Add(path)
      .Add(version)
      .Add(block_size)
      .Add(index);
  Hash128Value v = h.Finish128();
  return BlockKey{v.low, v.high};
}

uint64_t BlockId::Placement() const {
  Hasher h;
  h.Add("larder-place-v1").Add(mount).Add(path).Add(block_size).Add(index);
  return h.Finish128().low;
}

uint64_t BlockId::length() const {
  if (offset() >= object_size) return 0;
  return std::min(block_size, object_size - offset());
}

std::string BlockId::DebugString() const {
  return absl::StrCat(mount, "/", path, "#", index);
}

absl::Status BlockId::Validate() const {
  if (mount.empty()) return absl::InvalidArgumentError("block has no mount");
  if (version.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "block ", DebugString(), " has no version (a version is required)"));
  }
  if (version.size() > kMaxVersionBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("block ", DebugString(), ": version of ", version.size(),
                     " bytes (at most ", kMaxVersionBytes, ")"));
  }
  for (char c : version) {
    if (c < '!' || c > '~' || c == '"') {
      return absl::InvalidArgumentError(absl::StrCat(
          "block ", DebugString(),
          ": version has a byte that is not a printable token character"));
    }
  }
  if (block_size == 0 || block_size > (1ull << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad block size ", block_size, " (1 B to 1 GiB)"));
  }
  if (object_size == 0 || index >= BlockCount(object_size, block_size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("block ", DebugString(), " lies beyond the object (size ",
                     object_size, ", block size ", block_size, ")"));
  }
  return absl::OkStatus();
}

}  // namespace larder

namespace larder {

absl::Status CheckSameBlock(const BlockId& held, const BlockId& asked) {
  if (held.object_size == asked.object_size && held.version == asked.version &&
      held.index == asked.index && held.block_size == asked.block_size &&
      held.path == asked.path && held.mount == asked.mount)
    return absl::OkStatus();
  if (held.object_size != asked.object_size) {
    return absl::FailedPreconditionError(absl::StrCat(
        "block ", asked.DebugString(), ": the object is ", held.object_size,
        " bytes, not ", asked.object_size, " as the request says"));
  }
  return absl::FailedPreconditionError(
      absl::StrCat("block ", asked.DebugString(),
                   ": the request does not describe the cached block (",
                   held.DebugString(), " version ", held.version, ")"));
}

absl::StatusOr<ByteRange> RangeWithin(uint64_t held, uint64_t offset,
                                      uint64_t length) {
  if (offset > held) {
    return absl::OutOfRangeError(
        absl::StrCat("offset ", offset, " beyond a block of ", held, " bytes"));
  }
  const uint64_t left = held - offset;
  return ByteRange{offset, offset + std::min(length, left)};
}

}  // namespace larder
