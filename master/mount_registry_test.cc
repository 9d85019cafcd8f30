// Copyright 2026 The Larder Authors.
#include "master/mount_registry.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/process.h"

namespace larder {
namespace {

v1::MountEntry Entry(const std::string& path, const std::string& uri) {
  v1::MountEntry e;
  e.set_path(path);
  e.set_uri(uri);
  return e;
}

TEST(MountRegistryTest, AddResolveRemoveAndSurviveRestart) {
  testing::TempDir dir;
  {
    auto r = MountRegistry::Open(dir.path());
    ASSERT_TRUE(r.ok()) << r.status();
    auto t = (*r)->Add(
        Entry("/datasets//imagenet/", "s3://bucket/imagenet?region=us-east-1"));
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->version(), 1u);
    EXPECT_EQ(t->mounts(0).path(), "/datasets/imagenet");
    EXPECT_EQ(t->mounts(0).block_size(), 4u << 20);  // Default.
    ASSERT_TRUE((*r)->Add(Entry("/datasets/coco", "file:///tmp")).ok());
  }
  auto r = MountRegistry::Open(dir.path());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->Get().version(), 2u);
  EXPECT_EQ((*r)->Get().mounts_size(), 2);
  auto res = (*r)->Resolve("/datasets/imagenet/train/x.jpg");
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->first.path(), "/datasets/imagenet");
  EXPECT_EQ(res->second, "train/x.jpg");
  EXPECT_EQ((*r)->Resolve("/datasets/imagenette/x").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ((*r)->Resolve("/datasets/coco")->second, "");
  ASSERT_TRUE((*r)->Remove("/datasets/coco").ok());
  EXPECT_EQ((*r)->Remove("/datasets/coco").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ((*r)->Get().version(), 3u);
}

TEST(MountRegistryTest, AWritableMountHasBlocksOfItsUploadParts) {
  testing::TempDir dir;
  auto r = MountRegistry::Open(dir.path());
  ASSERT_TRUE(r.ok()) << r.status();
  v1::MountEntry ckpt = Entry("/ckpt", "file:///tmp");
  ckpt.set_writable(true);
  auto t = (*r)->Add(ckpt);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->mounts(0).block_size(), 8u << 20);
  // Named, it is what was asked.
  v1::MountEntry small = Entry("/small", "file:///tmp");
  small.set_writable(true);
  small.set_block_size(1 << 20);
  t = (*r)->Add(small);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->mounts(1).block_size(), 1u << 20);
  // The same mount again without a block size is the mount that is there
  // (as a mount made under an older default is), not a conflict; with
  // another block size it is one.
  EXPECT_TRUE((*r)->Add(small).ok());
  small.set_block_size(0);
  t = (*r)->Add(small);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->version(), 2u);
  small.set_block_size(2 << 20);
  EXPECT_EQ((*r)->Add(small).status().code(), absl::StatusCode::kAlreadyExists);
}

TEST(MountRegistryTest, PrefixesOfMountPathsAreVirtualDirectories) {
  testing::TempDir dir;
  auto r = MountRegistry::Open(dir.path());
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE((*r)->Add(Entry("/datasets/imagenet", "file:///tmp")).ok());
  ASSERT_TRUE((*r)->Add(Entry("/datasets/coco", "file:///tmp")).ok());
  ASSERT_TRUE((*r)->Add(Entry("/models/bert/v1", "file:///tmp")).ok());
  using V = std::vector<std::string>;
  EXPECT_EQ((*r)->VirtualChildren("/"), (V{"/datasets", "/models"}));
  EXPECT_EQ((*r)->VirtualChildren("/datasets/"),
            (V{"/datasets/coco", "/datasets/imagenet"}));
  EXPECT_EQ((*r)->VirtualChildren("/models"), (V{"/models/bert"}));
  EXPECT_EQ((*r)->VirtualChildren("/models/bert"), (V{"/models/bert/v1"}));
  // A mount path itself, a path inside one, a sibling prefix, a bad path.
  EXPECT_TRUE((*r)->VirtualChildren("/datasets/coco").empty());
  EXPECT_TRUE((*r)->VirtualChildren("/datasets/coco/x").empty());
  EXPECT_TRUE((*r)->VirtualChildren("/data").empty());
  EXPECT_TRUE((*r)->VirtualChildren("relative").empty());
}

TEST(MountRegistryTest, RejectsBadMounts) {
  testing::TempDir dir;
  auto r = MountRegistry::Open(dir.path());
  ASSERT_TRUE(r.ok());
  auto first = (*r)->Add(Entry("/a/b", "file:///tmp"));
  ASSERT_TRUE(first.ok());
  // The same mount again: done already, the table unchanged.
  auto again = (*r)->Add(Entry("/a/b", "file:///tmp"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->version(), first->version());
  EXPECT_EQ(again->mounts_size(), 1);
  // Another URI, or another option, on its path: a conflict that says what.
  auto other = (*r)->Add(Entry("/a/b", "file:///var"));
  EXPECT_EQ(other.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(other.status().message()),
              ::testing::HasSubstr("'/a/b' is already mounted from "
                                   "'file:///tmp' (asked: 'file:///var')"));
  v1::MountEntry bigger = Entry("/a/b", "file:///tmp");
  bigger.set_block_size(8 << 20);
  EXPECT_THAT(std::string((*r)->Add(bigger).status().message()),
              ::testing::HasSubstr("block size 4194304 (asked: 8388608)"));
  EXPECT_EQ((*r)->Add(Entry("/a", "file:///tmp")).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ((*r)->Add(Entry("/a/b/c", "file:///tmp")).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ((*r)->Add(Entry("relative", "file:///tmp")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*r)->Add(Entry("/x/../y", "file:///tmp")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*r)->Add(Entry("/", "file:///tmp")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*r)->Add(Entry("/s", "s3://user:secret@bucket/x")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*r)->Add(Entry("/s", "nonsense")).status().code(),
            absl::StatusCode::kInvalidArgument);
  v1::MountEntry tiny = Entry("/t", "file:///tmp");
  tiny.set_block_size(100);
  EXPECT_EQ((*r)->Add(tiny).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*r)->Get().version(), 1u);
}

TEST(MountRegistryTest, EvictionPolicyIsCheckedAndGetsItsDefaultWindow) {
  testing::TempDir dir;
  auto r = MountRegistry::Open(dir.path());
  ASSERT_TRUE(r.ok());
  v1::MountEntry lru = Entry("/a", "file:///tmp");
  lru.set_eviction("lru");
  lru.set_epoch_window_ms(5);  // Meaningless without epoch: dropped.
  auto t = (*r)->Add(lru);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->mounts(0).eviction(), "");
  EXPECT_EQ(t->mounts(0).epoch_window_ms(), 0u);
  v1::MountEntry epoch = Entry("/b", "file:///tmp");
  epoch.set_eviction("epoch");
  t = (*r)->Add(epoch);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->mounts(1).epoch_window_ms(), 3600u * 1000);  // One hour.
  // The same mount again is fine; another window is a conflict that says so.
  EXPECT_TRUE((*r)->Add(epoch).ok());
  epoch.set_epoch_window_ms(60000);
  EXPECT_THAT((*r)->Add(epoch).status().message(),
              ::testing::HasSubstr("eviction 'epoch' (window 3600000 ms)"));
  v1::MountEntry bad = Entry("/c", "file:///tmp");
  bad.set_eviction("mru");
  EXPECT_EQ((*r)->Add(bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad.set_eviction("epoch");
  bad.set_epoch_window_ms(uint64_t{400} * 24 * 3600 * 1000);
  EXPECT_EQ((*r)->Add(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(MountRegistryTest, CorruptStateFileIsANamedError) {
  testing::TempDir dir;
  ASSERT_TRUE(testing::WriteFile(dir.path() + "/mounts.textproto",
                                 "mounts { this is not { text format")
                  .ok());
  EXPECT_EQ(MountRegistry::Open(dir.path()).status().code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace larder
