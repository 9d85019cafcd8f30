// Copyright 2026 The Larder Authors.
#include "understore/mount_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <functional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/process.h"

namespace larder {
namespace {

using ::testing::HasSubstr;

v1::MountEntry FileMount(const std::string& root) {
  v1::MountEntry m;
  m.set_path("/m");
  m.set_uri("file://" + root);
  return m;
}

TEST(MountStoreTest, FileRootsMustLieInTheAllowedOnes) {
  testing::TempDir allowed, outside;
  ASSERT_EQ(::mkdir((allowed.path() + "/ds").c_str(), 0755), 0);
  ASSERT_EQ(
      ::symlink(outside.path().c_str(), (allowed.path() + "/out").c_str()), 0);
  UnderStoreOptions o;
  // Unset: any directory (tools run as the invoking user).
  EXPECT_TRUE(OpenMountStore(FileMount(outside.path()), o).ok());
  o.allowed_file_roots = std::vector<std::string>{};
  absl::StatusOr<std::unique_ptr<UnderStore>> s =
      OpenMountStore(FileMount(allowed.path()), o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(s.status().message(), HasSubstr("none are allowed"));

  o.allowed_file_roots = std::vector<std::string>{allowed.path()};
  EXPECT_TRUE(OpenMountStore(FileMount(allowed.path()), o).ok());
  EXPECT_TRUE(OpenMountStore(FileMount(allowed.path() + "/ds"), o).ok());
  // A sibling whose name starts with the allowed root's is not inside it.
  const std::string sibling = allowed.path() + "-x";
  ASSERT_EQ(::mkdir(sibling.c_str(), 0755), 0);
  for (const std::string& root :
       {outside.path(), allowed.path() + "/out", sibling}) {
    s = OpenMountStore(FileMount(root), o);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kPermissionDenied) << root;
    EXPECT_THAT(s.status().message(), HasSubstr("--allowed_file_roots"));
  }
  ::rmdir(sibling.c_str());
  // A root that does not exist is a mistake in the mount, refused as such.
  s = OpenMountStore(FileMount(allowed.path() + "/missing"), o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("does not exist"));
  // Other schemes are not file roots.
  v1::MountEntry s3;
  s3.set_path("/s3");
  s3.set_uri("s3://bucket/p?endpoint=http://127.0.0.1:1&anonymous=true");
  EXPECT_TRUE(OpenMountStore(s3, o).ok());
}

TEST(ValidateMountEntryTest, NamesTheFieldThatIsWrong) {
  v1::MountEntry good;
  good.set_path("/datasets/x");
  good.set_uri("s3://bucket/x");
  good.set_block_size(4 << 20);
  EXPECT_TRUE(ValidateMountEntry(good).ok());
  const std::pair<std::function<void(v1::MountEntry&)>, std::string> bad[] = {
      {[](v1::MountEntry& m) { m.set_path("/"); }, "cannot mount on '/'"},
      {[](v1::MountEntry& m) { m.set_path("/a//b/"); }, "not normalized"},
      {[](v1::MountEntry& m) { m.set_path("relative"); }, "relative"},
      {[](v1::MountEntry& m) { m.set_block_size(0); }, "block size"},
      {[](v1::MountEntry& m) { m.set_block_size(uint64_t{2} << 30); },
       "out of range"},
      {[](v1::MountEntry& m) { m.set_mode(010000); }, "permission mode"},
      {[](v1::MountEntry& m) { m.set_uri("nope"); }, "URI"},
  };
  for (const auto& [breakit, want] : bad) {
    v1::MountEntry m = good;
    breakit(m);
    const absl::Status st = ValidateMountEntry(m);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << want << st;
    EXPECT_THAT(std::string(st.message()), ::testing::HasSubstr(want)) << st;
  }
}

}  // namespace
}  // namespace larder
