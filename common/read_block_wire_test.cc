// Copyright 2026 The Larder Authors.
//
// The hand-written ReadBlockResponse wire form against protobuf's: what the
// worker writes parses as v1::ReadBlockResponse, and what protobuf writes
// parses with the client's parser, split across slices anywhere.
#include "common/read_block_wire.h"

#include <string>
#include <vector>

#include "common/wire_testing.h"
#include "gtest/gtest.h"
#include "proto/worker.pb.h"

namespace larder {
namespace {

using ::larder::testing::Data;
using ::larder::testing::Sliced;

TEST(ReadBlockWireTest, WhatTheWorkerWritesIsAReadBlockResponse) {
  for (uint64_t ring : {uint64_t{0}, uint64_t{1}, uint64_t{1} << 40}) {
    for (size_t n :
         {size_t{0}, size_t{1}, size_t{127}, size_t{128}, size_t{300000}}) {
      const std::string data = Data(n);
      v1::ReadBlockResponse first, later;
      ASSERT_TRUE(first.ParseFromString(
          ReadBlockResponseHead(true, "nvme", ring, n) + data));
      EXPECT_EQ(first.data(), data);
      EXPECT_EQ(first.source(), "nvme");
      EXPECT_EQ(first.ring_version(), ring);
      ASSERT_TRUE(later.ParseFromString(
          ReadBlockResponseHead(false, "x", ring, n) + data));
      EXPECT_EQ(later.data(), data);
      EXPECT_EQ(later.source(), "");
      EXPECT_EQ(later.ring_version(), 0u);
    }
  }
}

TEST(ReadBlockWireTest, WhatProtobufWritesParsesAcrossAnySlicing) {
  v1::ReadBlockResponse a, b;
  a.set_source("ram");
  a.set_ring_version(99);
  a.set_data(Data(1000));
  b.set_data(Data(777));
  const std::string wire_a = a.SerializeAsString();
  const std::string wire_b = b.SerializeAsString();
  for (size_t piece : {size_t{1}, size_t{3}, size_t{64}, size_t{100000}}) {
    // Copied into a buffer.
    std::string dst(1777, '\0'), source;
    uint64_t ring = 0;
    ReadBlockResponseParser copy(absl::MakeSpan(dst), nullptr, &source, &ring);
    ASSERT_TRUE(copy.Consume(Sliced(wire_a, piece)).ok());
    ASSERT_TRUE(copy.Consume(Sliced(wire_b, piece)).ok());
    EXPECT_EQ(copy.got(), 1777u);
    EXPECT_EQ(dst, a.data() + b.data());
    EXPECT_EQ(source, "ram");
    EXPECT_EQ(ring, 99u);
    // Kept as sub-slices.
    std::vector<grpc::Slice> pieces;
    ReadBlockResponseParser view(absl::MakeSpan(dst), &pieces, nullptr,
                                 nullptr);
    ASSERT_TRUE(view.Consume(Sliced(wire_a, piece)).ok());
    std::string joined;
    for (const grpc::Slice& s : pieces)
      joined.append(reinterpret_cast<const char*>(s.begin()), s.size());
    EXPECT_EQ(joined, a.data());
  }
}

TEST(ReadBlockWireTest, MalformedResponsesAreRefusedByName) {
  std::string dst(100, '\0'), source;
  auto parse = [&](const std::string& wire) {
    ReadBlockResponseParser p(absl::MakeSpan(dst), nullptr, &source, nullptr);
    return p.Consume(Sliced(wire, 7));
  };
  v1::ReadBlockResponse big;
  big.set_data(Data(101));
  EXPECT_EQ(parse(big.SerializeAsString()).message(),
            "ReadBlock: worker sent more than requested");
  const std::string whole =
      ReadBlockResponseHead(true, "ram", 5, 50) + Data(50);
  // Cut inside a field: refused. Cut between fields (after the source, 5
  // bytes, or the ring version, 7): a shorter message, as protobuf reads it.
  for (size_t cut = 1; cut < whole.size(); ++cut) {
    absl::Status st = parse(whole.substr(0, cut));
    v1::ReadBlockResponse r;
    if (cut == 5 || cut == 7) {
      EXPECT_TRUE(st.ok()) << cut << ": " << st;
      EXPECT_TRUE(r.ParseFromString(whole.substr(0, cut)));
    } else {
      EXPECT_EQ(st.code(), absl::StatusCode::kInternal) << cut;
      EXPECT_FALSE(r.ParseFromString(whole.substr(0, cut))) << cut;
    }
  }
  // A source field claiming an absurd length allocates nothing.
  std::string huge_source = "\x12\xff\xff\xff\xff\x0f";
  EXPECT_EQ(parse(huge_source).message(),
            "ReadBlock: source longer than 64 bytes");
  EXPECT_EQ(parse(std::string("\x0d\x00\x00\x00\x00", 5)).message(),
            "ReadBlock: unexpected wire type");
  EXPECT_TRUE(parse("").ok());
}

}  // namespace
}  // namespace larder
