// Copyright 2026 The Larder Authors.
//
// Helpers of the tests of the raw wire forms (read_block_wire_test.cc,
// write_part_wire_test.cc).
#ifndef LARDER_COMMON_WIRE_TESTING_H_
#define LARDER_COMMON_WIRE_TESTING_H_

#include <grpcpp/support/slice.h>

#include <algorithm>
#include <string>
#include <vector>

namespace larder::testing {

// `bytes` as gRPC would hand them over: split into slices of `piece` bytes.
inline std::vector<grpc::Slice> Sliced(const std::string& bytes, size_t piece) {
  std::vector<grpc::Slice> out;
  for (size_t at = 0; at < bytes.size(); at += piece)
    out.emplace_back(bytes.data() + at, std::min(piece, bytes.size() - at));
  return out;
}

// `n` bytes of a pattern that no shift of itself matches.
inline std::string Data(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 131 + 7);
  return s;
}

}  // namespace larder::testing

#endif  // LARDER_COMMON_WIRE_TESTING_H_
