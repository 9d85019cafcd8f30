// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: read_block_wire.h
// -----------------------------------------------------------------------------
//
// The wire form of v1::ReadBlockResponse (proto/worker.proto), written and
// read without protobuf message objects, so that a block's bytes cross gRPC
// without a copy at either end:
//
//   - the worker sends each response as two slices: a head (source and
//     ring_version on the first message, then the data field's tag and
//     length) and the block's own memory (ReadBlockResponseHead);
//   - the client parses each response straight out of gRPC's slices,
//     copying the data field into its buffer or keeping it as sub-slices
//     (ReadBlockResponseParser).
//
// Both ends use this file; read_block_wire_test.cc checks both against
// protobuf's own encoding and parsing of v1::ReadBlockResponse.
#ifndef LARDER_COMMON_READ_BLOCK_WIRE_H_
#define LARDER_COMMON_READ_BLOCK_WIRE_H_

#include <grpcpp/support/slice.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace larder {

// The bytes of one ReadBlockResponse that precede its `data_len` data
// bytes: with `first`, field 2 (source) and field 3 (ring_version, omitted
// when 0) before field 1's tag and length.
std::string ReadBlockResponseHead(bool first, absl::string_view source,
                                  uint64_t ring_version, uint64_t data_len);

// Parses the responses of one ReadBlock stream into a caller's buffer.
class ReadBlockResponseParser {
 public:
  // Data goes into `dst` (at most dst.size() bytes in all), or, with
  // `pieces`, is kept as sub-slices of the responses (dst's size is still
  // the bound; its bytes are not touched). `source` and `ring_version` (may
  // be null) receive those fields.
  ReadBlockResponseParser(absl::Span<char> dst,
                          std::vector<grpc::Slice>* pieces, std::string* source,
                          uint64_t* ring_version)
      : dst_(dst),
        pieces_(pieces),
        source_(source),
        ring_version_(ring_version) {}

  // One response, as gRPC's slices. Errors: Internal (a truncated or
  // malformed message, or more data than the buffer holds).
  absl::Status Consume(const std::vector<grpc::Slice>& slices);
  // Data bytes taken so far.
  size_t got() const { return got_; }

 private:
  const absl::Span<char> dst_;
  std::vector<grpc::Slice>* const pieces_;
  std::string* const source_;
  uint64_t* const ring_version_;
  size_t got_ = 0;
};

}  // namespace larder

#endif  // LARDER_COMMON_READ_BLOCK_WIRE_H_
