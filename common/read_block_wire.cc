// Copyright 2026 The Larder Authors.
#include "common/read_block_wire.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace larder {
namespace {

// Field tags of ReadBlockResponse: (number << 3) | wire type.
constexpr uint8_t kDataTag = (1 << 3) | 2;         // bytes data = 1
constexpr uint8_t kSourceTag = (2 << 3) | 2;       // string source = 2
constexpr uint8_t kRingVersionTag = (3 << 3) | 0;  // uint64 ring_version = 3

void AppendVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// Reads the bytes of a response's slices in order.
class SliceCursor {
 public:
  explicit SliceCursor(const std::vector<grpc::Slice>& slices)
      : slices_(slices) {}
  bool Byte(uint8_t* b) {
    Skip0();
    if (i_ >= slices_.size()) return false;
    *b = slices_[i_].begin()[off_++];
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
    while (n > 0) {
      Skip0();
      if (i_ >= slices_.size()) return false;
      const size_t k =
          static_cast<size_t>(std::min<uint64_t>(n, slices_[i_].size() - off_));
      if (out != nullptr) {
        std::memcpy(out, slices_[i_].begin() + off_, k);
        out += k;
      }
      off_ += k;
      n -= k;
    }
    return true;
  }
  // Appends `n` bytes to `out` as sub-slices of the buffer's own (no copy).
  bool TakeSlices(uint64_t n, std::vector<grpc::Slice>* out) {
    while (n > 0) {
      Skip0();
      if (i_ >= slices_.size()) return false;
      const size_t k =
          static_cast<size_t>(std::min<uint64_t>(n, slices_[i_].size() - off_));
      out->push_back(slices_[i_].sub(off_, off_ + k));
      off_ += k;
      n -= k;
    }
    return true;
  }
  bool done() {
    Skip0();
    return i_ >= slices_.size();
  }

 private:
  void Skip0() {
    while (i_ < slices_.size() && off_ >= slices_[i_].size()) {
      ++i_;
      off_ = 0;
    }
  }
  const std::vector<grpc::Slice>& slices_;
  size_t i_ = 0;
  size_t off_ = 0;
};

absl::Status Malformed(absl::string_view why) {
  return absl::InternalError(absl::StrCat("ReadBlock: ", why));
}

}  // namespace

std::string ReadBlockResponseHead(bool first, absl::string_view source,
                                  uint64_t ring_version, uint64_t data_len) {
  std::string head;
  if (first) {
    head.push_back(static_cast<char>(kSourceTag));
    AppendVarint(&head, source.size());
    head.append(source.data(), source.size());
    if (ring_version != 0) {
      head.push_back(static_cast<char>(kRingVersionTag));
      AppendVarint(&head, ring_version);
    }
  }
  head.push_back(static_cast<char>(kDataTag));
  AppendVarint(&head, data_len);
  return head;
}

absl::Status ReadBlockResponseParser::Consume(
    const std::vector<grpc::Slice>& slices) {
  SliceCursor c(slices);
  while (!c.done()) {
    uint64_t tag, len;
    if (!c.Varint(&tag)) return Malformed("truncated response");
    if ((tag & 7) == 0) {  // A varint field.
      if (!c.Varint(&len)) return Malformed("truncated varint");
      if (tag == kRingVersionTag && ring_version_ != nullptr)
        *ring_version_ = len;
      continue;
    }
    if ((tag & 7) != 2 || !c.Varint(&len))
      return Malformed("unexpected wire type");
    if (tag == kDataTag) {
      if (len > dst_.size() - got_)
        return Malformed("worker sent more than requested");
      if (pieces_ != nullptr ? !c.TakeSlices(len, pieces_)
                             : !c.Take(len, dst_.data() + got_)) {
        return Malformed("truncated data");
      }
      got_ += static_cast<size_t>(len);
    } else if (tag == kSourceTag && source_ != nullptr) {
      if (len > 64) return Malformed("source longer than 64 bytes");
      source_->resize(static_cast<size_t>(len));
      if (!c.Take(len, source_->data())) return Malformed("truncated source");
    } else if (!c.Take(len, nullptr)) {
      return Malformed("truncated field");
    }
  }
  return absl::OkStatus();
}

}  // namespace larder
