// Copyright 2026 The Larder Authors.
//
// The hand-written WritePartRequest wire form against protobuf's: what a
// sender writes parses as v1::WritePartRequest, what protobuf writes parses
// with the worker's parser split across slices anywhere, and what is not a
// WritePartRequest is refused by name.
#include "common/write_part_wire.h"

#include <string>
#include <vector>

#include "common/wire_testing.h"
#include "gtest/gtest.h"

namespace larder {
namespace {

using ::larder::testing::Data;
using ::larder::testing::Sliced;

v1::WritePartHeader Header() {
  v1::WritePartHeader h;
  h.mutable_handle()->set_mount("/ckpt");
  h.mutable_handle()->set_relative("step-100/shard-3");
  h.mutable_handle()->set_write_id("w-1");
  h.mutable_handle()->set_block_size(4 << 20);
  h.set_number(7);
  h.set_offset(uint64_t{24} << 20);
  h.set_size(8 << 20);
  h.add_keep_blocks(6);
  (*h.mutable_forward())[7] = "127.0.0.1:7001";
  return h;
}

std::string Joined(const WritePartMessage& m) {
  std::string s;
  for (absl::string_view v : m.data) s.append(v.data(), v.size());
  return s;
}

TEST(WritePartWireTest, WhatTheSenderWritesIsAWritePartRequest) {
  const v1::WritePartHeader h = Header();
  for (size_t n : {size_t{0}, size_t{1}, size_t{128}, size_t{300000}}) {
    const std::string data = Data(n);
    v1::WritePartRequest first, later;
    ASSERT_TRUE(first.ParseFromString(WritePartRequestHead(&h, n) + data));
    EXPECT_EQ(first.header().SerializeAsString(), h.SerializeAsString());
    EXPECT_EQ(first.data(), data);
    ASSERT_TRUE(later.ParseFromString(WritePartRequestHead(nullptr, n) + data));
    EXPECT_FALSE(later.has_header());
    EXPECT_EQ(later.data(), data);
  }
}

TEST(WritePartWireTest, WhatProtobufWritesParsesAcrossAnySlicing) {
  v1::WritePartRequest a, b;
  *a.mutable_header() = Header();
  a.set_data(Data(1000));
  b.set_data(Data(777));
  const std::string wire_a = a.SerializeAsString();
  const std::string wire_b = b.SerializeAsString();
  for (size_t piece : {size_t{1}, size_t{3}, size_t{64}, size_t{100000}}) {
    const std::vector<grpc::Slice> sa = Sliced(wire_a, piece);
    WritePartMessage ma;
    ASSERT_TRUE(ParseWritePartRequest(sa, &ma).ok());
    EXPECT_TRUE(ma.has_header);
    EXPECT_EQ(ma.header.SerializeAsString(), a.header().SerializeAsString());
    EXPECT_EQ(ma.data_size, 1000u);
    EXPECT_EQ(Joined(ma), a.data());
    const std::vector<grpc::Slice> sb = Sliced(wire_b, piece);
    WritePartMessage mb;
    ASSERT_TRUE(ParseWritePartRequest(sb, &mb).ok());
    EXPECT_FALSE(mb.has_header);
    EXPECT_EQ(Joined(mb), b.data());
  }
  // An empty message (no header, no data) is a valid one.
  WritePartMessage empty;
  EXPECT_TRUE(ParseWritePartRequest({}, &empty).ok());
  EXPECT_EQ(empty.data_size, 0u);
}

TEST(WritePartWireTest, UnknownFieldsAreSkipped) {
  // Field 9 of each wire type protobuf writes, around the data.
  std::string wire = "\x48\x96\x01";                     // varint
  wire += std::string("\x49", 1) + std::string(8, 'x');  // fixed64
  wire += std::string("\x4d", 1) + std::string(4, 'y');  // fixed32
  wire += std::string("\x4a\x03zzz", 5);                 // bytes
  wire += WritePartRequestHead(nullptr, 5) + "hello";
  // The views point into the slices (a short one holds its bytes inline).
  const std::vector<grpc::Slice> slices = Sliced(wire, 2);
  WritePartMessage m;
  ASSERT_TRUE(ParseWritePartRequest(slices, &m).ok());
  EXPECT_EQ(Joined(m), "hello");
}

TEST(WritePartWireTest, MalformedMessagesAreRefusedByName) {
  const v1::WritePartHeader h = Header();
  auto error = [](const std::string& wire) {
    WritePartMessage m;
    absl::Status st = ParseWritePartRequest(Sliced(wire, 5), &m);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    return std::string(st.message());
  };
  // Data shorter than its length says.
  EXPECT_NE(error(WritePartRequestHead(nullptr, 100) + Data(99))
                .find("runs past the message"),
            std::string::npos);
  // A length of 2^63 (no overflow into a small one).
  EXPECT_NE(
      error(std::string("\x12\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", 11))
          .find("runs past"),
      std::string::npos);
  // A varint of more than ten bytes.
  EXPECT_NE(error(std::string(11, '\xff')).find("truncated"),
            std::string::npos);
  EXPECT_NE(error(WritePartRequestHead(nullptr, 1) + "a" +
                  WritePartRequestHead(nullptr, 1) + "b")
                .find("two data fields"),
            std::string::npos);
  const std::string head = WritePartRequestHead(&h, 0);
  EXPECT_NE(error(head.substr(0, head.size() - 2) + head).find("two headers"),
            std::string::npos);
  // A header field whose bytes are not a WritePartHeader.
  EXPECT_NE(error(std::string("\x0a\x02\xff\xff", 4)).find("does not parse"),
            std::string::npos);
  // Groups (wire types 3 and 4) and the unused types 6 and 7.
  for (char tag : {'\x13', '\x14', '\x16', '\x17'}) {
    EXPECT_NE(error(std::string(1, tag)).find("wire type"), std::string::npos);
  }
}

}  // namespace
}  // namespace larder
