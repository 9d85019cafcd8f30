// Copyright 2026 The Larder Authors.
#include "fuse/inode_table.h"

#include <thread>
#include <vector>

#include "fuse/passthrough.h"
#include "gtest/gtest.h"

namespace larder {
namespace {

TEST(InodeTableTest, RootIsAlwaysThere) {
  InodeTable t;
  EXPECT_EQ(t.Path(InodeTable::kRoot), "/");
  t.Forget(InodeTable::kRoot, 100);
  EXPECT_EQ(t.Path(InodeTable::kRoot), "/");
}

TEST(InodeTableTest, ChildPaths) {
  EXPECT_EQ(InodeTable::Child("/", "datasets"), "/datasets");
  EXPECT_EQ(InodeTable::Child("/datasets", "x.bin"), "/datasets/x.bin");
}

TEST(InodeTableTest, LookupCountsKeepAnInodeUntilForgotten) {
  InodeTable t;
  const uint64_t a = t.Ref("/d/a");
  EXPECT_NE(a, InodeTable::kRoot);
  EXPECT_EQ(t.Ref("/d/a"), a);  // Same path, same inode; two references.
  const uint64_t b = t.Ref("/d/b");
  EXPECT_NE(a, b);
  t.Forget(a, 1);
  EXPECT_EQ(t.Path(a), "/d/a");
  t.Forget(a, 1);
  EXPECT_FALSE(t.Path(a).has_value());
  EXPECT_EQ(t.Path(b), "/d/b");
  // A path looked up again after being forgotten gets a new number: inode
  // numbers are never reused, so the kernel never confuses two lives.
  const uint64_t a2 = t.Ref("/d/a");
  EXPECT_NE(a2, a);
  EXPECT_EQ(t.size(), 3u);  // Root, b, a2.
  t.Forget(a2, 5);          // More than held: gone, no underflow.
  EXPECT_FALSE(t.Path(a2).has_value());
  t.Forget(12345, 1);  // Unknown inode: ignored.
}

TEST(InodeTableTest, OpenedVersionTellsWhetherCachedPagesAreValid) {
  InodeTable t;
  const uint64_t a = t.Ref("/a");
  // First open: nothing cached.
  EXPECT_FALSE(t.OpenedVersion(a, "v1").same_as_last_open);
  EXPECT_TRUE(t.OpenedVersion(a, "v1").same_as_last_open);
  // Replaced object.
  EXPECT_FALSE(t.OpenedVersion(a, "v2").same_as_last_open);
  EXPECT_TRUE(t.OpenedVersion(a, "v2").same_as_last_open);
  EXPECT_FALSE(t.OpenedVersion(999, "v1").same_as_last_open);
}

TEST(InodeTableTest, AnOpenOfAnotherVersionThanTheKernelHoldsIsFlagged) {
  InodeTable t;
  const uint64_t a = t.Ref("/d/a", "v1");  // The lookup replied v1's size.
  EXPECT_FALSE(t.OpenedVersion(a, "v1").attrs_stale);
  EXPECT_TRUE(t.OpenedVersion(a, "v2").attrs_stale);   // Replaced since.
  EXPECT_FALSE(t.OpenedVersion(a, "v2").attrs_stale);  // Invalidated then.
  t.RepliedVersion(a, "v1");  // A getattr of an older answer.
  EXPECT_TRUE(t.OpenedVersion(a, "v2").attrs_stale);
}

TEST(InodeTableTest, ConcurrentRefAndForgetStayConsistent) {
  InodeTable t;
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&t, i] {
      for (int j = 0; j < 2000; ++j) {
        const uint64_t ino = t.Ref("/f" + std::to_string((i + j) % 50));
        t.Forget(ino, 1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(t.size(), 1u);  // Every reference dropped: only the root.
}

}  // namespace
}  // namespace larder

namespace larder {
namespace {

TEST(InodeTableTest, AnInodeOutlivesItsForgetWhileAnOpenHoldsIt) {
  InodeTable t;
  BackingFiles backing;
  backing.Enable();
  const uint64_t a = t.Ref("/d/a", "v1");
  std::shared_ptr<Inode> held = t.Get(a);  // As an open file does.
  ASSERT_NE(held, nullptr);
  auto no_object = [] {
    return absl::StatusOr<LocalSlice>(absl::NotFoundError("not local"));
  };
  ASSERT_EQ(held->AttachOpen("v1", false, backing, no_object).value_or(-1), 0);
  t.Forget(a, 1);
  EXPECT_EQ(t.Get(a), nullptr);
  EXPECT_EQ(held->path, "/d/a");
  // The release still finds its state: the open reading through the daemon
  // keeps a second open from setting up a backing file.
  bool asked = false;
  auto object = [&] {
    asked = true;
    return no_object();
  };
  EXPECT_EQ(held->AttachOpen("v1", true, backing, object).value_or(-1), 0);
  EXPECT_FALSE(asked);
  held->DetachOpen(false, backing);
  held->DetachOpen(false, backing);
}

TEST(InodeTableTest, ARefusedBackingFileTurnsPassthroughOffAndReadsThrough) {
  InodeTable t;
  BackingFiles backing;  // No /dev/fuse: the kernel refuses every file.
  std::shared_ptr<Inode> inode = t.Get(t.Ref("/d/big", "v1"));
  int asked = 0;
  auto object = [&] {
    ++asked;
    return absl::StatusOr<LocalSlice>(LocalSlice{});
  };
  // Not negotiated at INIT: the local object is never asked for.
  EXPECT_EQ(inode->AttachOpen("v1", true, backing, object).value_or(-1), 0);
  EXPECT_EQ(asked, 0);
  inode->DetachOpen(false, backing);

  backing.Enable();
  EXPECT_EQ(inode->AttachOpen("v1", true, backing, object).value_or(-1), 0);
  EXPECT_EQ(asked, 1);
  EXPECT_FALSE(backing.enabled());  // Refused once: not asked again.
  inode->DetachOpen(false, backing);
  EXPECT_EQ(inode->AttachOpen("v1", true, backing, object).value_or(-1), 0);
  EXPECT_EQ(asked, 1);
  inode->DetachOpen(false, backing);
}

TEST(InodeTableTest, RepliedVersionIsWhatAnOpenComparesWith) {
  InodeTable t;
  const uint64_t a = t.Ref("/d/a");
  t.RepliedVersion(a, "v1");  // A getattr of v1.
  EXPECT_FALSE(t.OpenedVersion(a, "v1").attrs_stale);
  t.RepliedVersion(a, "v2");
  EXPECT_TRUE(t.OpenedVersion(a, "v1").attrs_stale);
  t.RepliedVersion(999, "v1");  // Not a live inode: nothing happens.
  EXPECT_EQ(t.Get(999), nullptr);
}

}  // namespace
}  // namespace larder
