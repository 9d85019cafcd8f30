// Copyright 2026 The Larder Authors.
#include "common/write_part_wire.h"

#include "absl/strings/str_cat.h"
#include "common/raw_wire.h"

namespace larder {
namespace {

// Field numbers of WritePartRequest.
constexpr uint64_t kHeaderField = 1;  // WritePartHeader header = 1
constexpr uint64_t kDataField = 2;    // bytes data = 2
constexpr uint64_t kLengthDelimited = 2;

absl::Status Malformed(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("WritePart: ", why));
}

}  // namespace

std::string WritePartRequestHead(const v1::WritePartHeader* header,
                                 uint64_t data_len) {
  std::string head;
  if (header != nullptr) {
    const std::string bytes = header->SerializeAsString();
    head.push_back(static_cast<char>(kHeaderField << 3 | kLengthDelimited));
    AppendVarint(&head, bytes.size());
    head.append(bytes);
  }
  head.push_back(static_cast<char>(kDataField << 3 | kLengthDelimited));
  AppendVarint(&head, data_len);
  return head;
}

absl::Status ParseWritePartRequest(const std::vector<grpc::Slice>& slices,
                                   WritePartMessage* out) {
  SliceCursor c(slices);
  bool has_data = false;
  while (!c.done()) {
    uint64_t tag, len;
    if (!c.Varint(&tag)) return Malformed("a truncated field tag");
    const uint64_t field = tag >> 3;
    switch (tag & 7) {
      case 0:  // varint
        if (!c.Varint(&len)) return Malformed("a truncated varint");
        continue;
      case 1:  // fixed64
        if (!c.Take(8, nullptr)) return Malformed("a truncated fixed64");
        continue;
      case 5:  // fixed32
        if (!c.Take(4, nullptr)) return Malformed("a truncated fixed32");
        continue;
      case kLengthDelimited:
        break;
      default:
        return Malformed(absl::StrCat("wire type ", tag & 7, " of field ",
                                      field, " is not one protobuf writes"));
    }
    if (!c.Varint(&len) || len > c.left()) {
      return Malformed(absl::StrCat("field ", field, " runs past the message"));
    }
    if (field == kHeaderField) {
      if (out->has_header) return Malformed("two headers in one message");
      std::string bytes(static_cast<size_t>(len), '\0');
      c.Take(len, bytes.data());
      if (!out->header.ParseFromString(bytes)) {
        return Malformed("a header that does not parse");
      }
      out->has_header = true;
    } else if (field == kDataField) {
      if (has_data) return Malformed("two data fields in one message");
      has_data = true;
      c.TakeViews(len, &out->data);
      out->data_size = len;
    } else {
      c.Take(len, nullptr);
    }
  }
  return absl::OkStatus();
}

}  // namespace larder
