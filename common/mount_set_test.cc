// Copyright 2026 The Larder Authors.
#include "common/mount_set.h"

#include "gtest/gtest.h"

namespace larder {
namespace {

MountSet Table() {
  v1::MountTable t;
  t.set_version(7);
  for (const char* p : {"/datasets/imagenet", "/a", "/datasets/coco"}) {
    t.add_mounts()->set_path(p);
  }
  return MountSet(std::move(t));
}

TEST(MountSetTest, SortedAndVersioned) {
  const MountSet m = Table();
  EXPECT_EQ(m.version(), 7u);
  ASSERT_EQ(m.table().mounts_size(), 3);
  EXPECT_EQ(m.table().mounts(0).path(), "/a");
  EXPECT_EQ(m.table().mounts(1).path(), "/datasets/coco");
  EXPECT_EQ(m.table().mounts(2).path(), "/datasets/imagenet");
  EXPECT_FALSE(m.empty());
  EXPECT_TRUE(MountSet().empty());
}

TEST(MountSetTest, ResolvesAPathToItsMount) {
  const MountSet m = Table();
  auto r = m.Resolve("/datasets/imagenet/train/x.jpg");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->entry->path(), "/datasets/imagenet");
  EXPECT_EQ(r->relative, "train/x.jpg");
  r = m.Resolve("/datasets/coco");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->entry->path(), "/datasets/coco");
  EXPECT_EQ(r->relative, "");
  r = m.Resolve("/a/b");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->relative, "b");
}

TEST(MountSetTest, NoMountHoldsPrefixesSiblingsOrBadPaths) {
  const MountSet m = Table();
  for (const char* p : {"/", "/datasets", "/datasets/imagenet2/x", "/ab", "",
                        "relative/path", "/b/a"}) {
    EXPECT_FALSE(m.Resolve(p)) << p;
  }
  EXPECT_EQ(m.Find("/a")->path(), "/a");
  EXPECT_EQ(m.Find("/a/b"), nullptr);
}

}  // namespace
}  // namespace larder
