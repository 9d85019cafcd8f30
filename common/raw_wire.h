// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: raw_wire.h
// -----------------------------------------------------------------------------
//
// Protobuf's wire format by hand, for the messages that carry block data
// (read_block_wire.h, write_part_wire.h): they are written and parsed
// without protobuf's copies of their data fields.
//
// SliceCursor reads the bytes of one gRPC message, held as the slices gRPC
// read the socket into, in order: varints and fields that may span slices,
// copied out, skipped, or lent as views or sub-slices. Not thread-safe; the
// slices must outlive the cursor and its views.
#ifndef LARDER_COMMON_RAW_WIRE_H_
#define LARDER_COMMON_RAW_WIRE_H_

#include <grpcpp/support/slice.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace larder {

// Protobuf's base-128 varint.
inline void AppendVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

class SliceCursor {
 public:
  explicit SliceCursor(const std::vector<grpc::Slice>& slices)
      : slices_(slices) {
    for (const grpc::Slice& s : slices_) left_ += s.size();
  }

  bool Byte(uint8_t* b) {
    Skip0();
    if (i_ >= slices_.size()) return false;
    *b = slices_[i_].begin()[off_++];
    --left_;
    return true;
  }
  bool Varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t b;
      if (!Byte(&b)) return false;
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  }
  // Copies `n` bytes to `out` (or skips them when out is null).
  bool Take(uint64_t n, char* out) {
    return Walk(n, [&](const uint8_t* p, size_t k) {
      if (out != nullptr) {
        std::memcpy(out, p, k);
        out += k;
      }
    });
  }
  // Appends `n` bytes to `out` as sub-slices of the message's own (no copy).
  bool TakeSlices(uint64_t n, std::vector<grpc::Slice>* out) {
    return Walk(n, [&](const uint8_t* p, size_t k) {
      const size_t at = static_cast<size_t>(p - slices_[i_].begin());
      out->push_back(slices_[i_].sub(at, at + k));
    });
  }
  // Appends `n` bytes to `out` as views of the slices (no copy).
  bool TakeViews(uint64_t n, std::vector<absl::string_view>* out) {
    return Walk(n, [&](const uint8_t* p, size_t k) {
      out->emplace_back(reinterpret_cast<const char*>(p), k);
    });
  }
  // Bytes not yet read.
  uint64_t left() const { return left_; }
  bool done() const { return left_ == 0; }

 private:
  // Calls fn(bytes, count) for the next `n` bytes, a slice's run at a time;
  // false (nothing taken) when fewer are left.
  template <typename Fn>
  bool Walk(uint64_t n, Fn fn) {
    if (n > left_) return false;
    left_ -= n;
    while (n > 0) {
      Skip0();
      const size_t k =
          static_cast<size_t>(std::min<uint64_t>(n, slices_[i_].size() - off_));
      fn(slices_[i_].begin() + off_, k);
      off_ += k;
      n -= k;
    }
    return true;
  }
  void Skip0() {
    while (i_ < slices_.size() && off_ >= slices_[i_].size()) {
      ++i_;
      off_ = 0;
    }
  }

  const std::vector<grpc::Slice>& slices_;
  size_t i_ = 0;
  size_t off_ = 0;
  uint64_t left_ = 0;
};

}  // namespace larder

#endif  // LARDER_COMMON_RAW_WIRE_H_
