// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: write_part_wire.h
// -----------------------------------------------------------------------------
//
// The wire form of v1::WritePartRequest (proto/worker.proto) without
// protobuf message objects, so that a part's bytes cross gRPC without a
// copy at either end:
//
//   - the sender (a writer, or a worker forwarding blocks to their owners)
//     sends each message as a head (the header field on the first message,
//     then the data field's tag and length) and a slice of the part's own
//     memory (WritePartRequestHead);
//   - the worker parses each message straight out of gRPC's slices and
//     copies the data field once, into the part it assembles
//     (ParseWritePartRequest).
//
// write_part_wire_test.cc checks both against protobuf's own encoding and
// parsing of v1::WritePartRequest.
#ifndef LARDER_COMMON_WRITE_PART_WIRE_H_
#define LARDER_COMMON_WRITE_PART_WIRE_H_

#include <grpcpp/support/slice.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/worker.pb.h"

namespace larder {

// The bytes of one WritePartRequest that precede its `data_len` data bytes:
// `header` (may be null: not the first message) as field 1, then field 2's
// tag and length.
std::string WritePartRequestHead(const v1::WritePartHeader* header,
                                 uint64_t data_len);

// One WritePartRequest, parsed out of its slices: the header when it has
// one, and its data as views of the slices, which must outlive them and
// stay where they are (a short slice holds its bytes inside itself).
struct WritePartMessage {
  bool has_header = false;
  v1::WritePartHeader header;
  std::vector<absl::string_view> data;
  uint64_t data_size = 0;
};

// Errors: InvalidArgument naming what is wrong (a truncated message, a
// header that does not parse, two data or header fields, a wire type that
// protobuf does not write). Unknown fields are skipped, as protobuf would.
absl::Status ParseWritePartRequest(const std::vector<grpc::Slice>& slices,
                                   WritePartMessage* out);

}  // namespace larder

#endif  // LARDER_COMMON_WRITE_PART_WIRE_H_
