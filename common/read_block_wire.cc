// Copyright 2026 The Larder Authors.
#include "common/read_block_wire.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/raw_wire.h"

namespace larder {
namespace {

// Field tags of ReadBlockResponse: (number << 3) | wire type.
constexpr uint8_t kDataTag = (1 << 3) | 2;         // bytes data = 1
constexpr uint8_t kSourceTag = (2 << 3) | 2;       // string source = 2
constexpr uint8_t kRingVersionTag = (3 << 3) | 0;  // uint64 ring_version = 3

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
