// Copyright 2026 The Larder Authors.
//
// The paths the CSI plugin takes from the kubelet's requests (run under the
// sanitizers with the unit tests; the mount table's parser is tested in
// common/mount_table_test.cc). Publishing against real mounts is in
// tests/csi_test.cc.
#include "csi/node_server.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace larder {
namespace {

TEST(CsiPathTest, CleanAbsolutePath) {
  EXPECT_EQ(*CleanAbsolutePath("/a//b/", "p"), "/a/b");
  EXPECT_EQ(*CleanAbsolutePath("/", "p"), "/");
  EXPECT_EQ(*CleanAbsolutePath("//", "p"), "/");
  EXPECT_EQ(*CleanAbsolutePath("/a/.b/..c", "p"), "/a/.b/..c");  // Names.
  EXPECT_FALSE(CleanAbsolutePath("", "p").ok());
  EXPECT_FALSE(CleanAbsolutePath("a/b", "p").ok());
  EXPECT_FALSE(CleanAbsolutePath("/a/../b", "p").ok());
  EXPECT_FALSE(CleanAbsolutePath("/a/./b", "p").ok());
  EXPECT_FALSE(CleanAbsolutePath("/..", "p").ok());
  EXPECT_FALSE(CleanAbsolutePath(std::string("/a\0b", 4), "p").ok());
  EXPECT_FALSE(CleanAbsolutePath("/" + std::string(5000, 'a'), "p").ok());
  EXPECT_THAT(
      std::string(CleanAbsolutePath("x", "target_path").status().message()),
      ::testing::HasSubstr("target_path"));
}

}  // namespace
}  // namespace larder
