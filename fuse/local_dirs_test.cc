// Copyright 2026 The Larder Authors.
#include "fuse/local_dirs.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace larder {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

FileInfo Dir(const std::string& path) {
  FileInfo f;
  f.path = path;
  f.is_dir = true;
  f.writable = true;
  return f;
}

TEST(LocalDirsTest, AddGetAndChildren) {
  LocalDirs dirs;
  EXPECT_EQ(dirs.size(), 0);
  EXPECT_FALSE(dirs.Get("/ckpt/run1").has_value());
  EXPECT_TRUE(dirs.Add(Dir("/ckpt/run1")));
  EXPECT_FALSE(dirs.Add(Dir("/ckpt/run1")));
  EXPECT_TRUE(dirs.Add(Dir("/ckpt/run1/step100")));
  EXPECT_TRUE(dirs.Add(Dir("/ckpt/run10")));
  EXPECT_TRUE(dirs.Add(Dir("/ckpt/run1-b")));
  ASSERT_TRUE(dirs.Get("/ckpt/run1").has_value());
  EXPECT_TRUE(dirs.Get("/ckpt/run1")->is_dir);
  EXPECT_THAT(dirs.Children("/ckpt"), ElementsAre("run1", "run1-b", "run10"));
  EXPECT_THAT(dirs.Children("/ckpt/run1"), ElementsAre("step100"));
  EXPECT_THAT(dirs.Children("/ckpt/run1/step100"), IsEmpty());
}

TEST(LocalDirsTest, AFileCommittedBelowMakesItsDirectoriesReal) {
  LocalDirs dirs;
  dirs.Add(Dir("/ckpt/run1"));
  dirs.Add(Dir("/ckpt/run1/step100"));
  dirs.Add(Dir("/ckpt/run1/step200"));
  dirs.Exists("/ckpt/run1/step100/model.pt");
  EXPECT_FALSE(dirs.Get("/ckpt/run1/step100").has_value());
  EXPECT_FALSE(dirs.Get("/ckpt/run1").has_value());
  EXPECT_TRUE(dirs.Get("/ckpt/run1/step200").has_value());
  EXPECT_EQ(dirs.size(), 1);
}

TEST(LocalDirsTest, RemoveIfEmpty) {
  LocalDirs dirs;
  EXPECT_TRUE(absl::IsNotFound(dirs.RemoveIfEmpty("/ckpt/x")));
  dirs.Add(Dir("/ckpt/x"));
  dirs.Add(Dir("/ckpt/x/y"));
  dirs.Add(Dir("/ckpt/x-b"));
  EXPECT_TRUE(absl::IsFailedPrecondition(dirs.RemoveIfEmpty("/ckpt/x")));
  EXPECT_TRUE(dirs.RemoveIfEmpty("/ckpt/x/y").ok());
  EXPECT_TRUE(dirs.RemoveIfEmpty("/ckpt/x").ok());
  EXPECT_TRUE(dirs.Get("/ckpt/x-b").has_value());
  EXPECT_EQ(dirs.size(), 1);
}

}  // namespace
}  // namespace larder
