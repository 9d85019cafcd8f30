// Copyright 2026 The Larder Authors.
//
// The mount table's parser on what the kernel writes: optional fields,
// escapes, and lines that do not parse (run under the sanitizers with the
// unit tests).
#include "common/mount_table.h"

#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace larder {
namespace {

class MountInfoFile {
 public:
  explicit MountInfoFile(const std::string& text) {
    char tmpl[] = "/tmp/larder-mountinfo-XXXXXX";
    const int fd = ::mkstemp(tmpl);
    path_ = tmpl;
    ::close(fd);
    std::ofstream(path_) << text;
  }
  ~MountInfoFile() { ::unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(MountTableTest, MountInfoParsesOptionalFieldsAndEscapes) {
  MountInfoFile f(
      "36 35 0:52 /datasets/img /var/lib/kubelet/pods/a\\040b/mnt "
      "ro,nosuid,nodev shared:1 master:2 - fuse.larder larder rw,user_id=0\n"
      "37 35 8:1 / / rw - ext4 /dev/sda1 rw\n"
      "38 35 0:5 /a\\134b /x\\011y rw - tmpfs tmp\\040fs rw\n");
  auto m = ReadMountInfo(f.path());
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->size(), 3u);
  EXPECT_EQ((*m)[0].device, "0:52");
  EXPECT_EQ((*m)[0].root, "/datasets/img");
  EXPECT_EQ((*m)[0].mount_point, "/var/lib/kubelet/pods/a b/mnt");
  EXPECT_EQ((*m)[0].options, "ro,nosuid,nodev");
  EXPECT_EQ((*m)[0].type, "fuse.larder");
  EXPECT_EQ((*m)[0].source, "larder");
  EXPECT_EQ((*m)[1].type, "ext4");
  EXPECT_EQ((*m)[2].root, "/a\\b");
  EXPECT_EQ((*m)[2].mount_point, "/x\ty");
  EXPECT_EQ((*m)[2].source, "tmp fs");
}

TEST(MountTableTest, MalformedMountInfoIsDataLossNotACrash) {
  for (const char* text : {"garbage line\n", "1 2 3 4 5 6 -\n",
                           "1 2 3 4 5 6 7 8 9\n", "1 2 0:1 / /m rw - \n"}) {
    MountInfoFile f(text);
    EXPECT_EQ(ReadMountInfo(f.path()).status().code(),
              absl::StatusCode::kDataLoss)
        << text;
    EXPECT_FALSE(FindMountIn(text, "/m").has_value()) << text;
  }
  // An escape cut short stays as written.
  MountInfoFile f("1 2 0:1 \\ /m\\1 rw - t s o\n");
  auto m = ReadMountInfo(f.path());
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->size(), 1u);
  EXPECT_EQ((*m)[0].root, "\\");
  EXPECT_EQ((*m)[0].mount_point, "/m\\1");
  EXPECT_EQ(ReadMountInfo("/nonexistent/mountinfo").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(MountTableTest, TopMountAtIsTheLastListed) {
  std::vector<MountInfo> mounts = {
      {"0:1", "/", "/m", "rw", "ext4", "a"},
      {"0:2", "/", "/other", "rw", "ext4", "b"},
      {"0:3", "/x", "/m", "ro", "fuse.larder", "c"}};
  const MountInfo* top = TopMountAt(mounts, "/m");
  ASSERT_NE(top, nullptr);
  EXPECT_EQ(top->device, "0:3");
  EXPECT_EQ(TopMountAt(mounts, "/nowhere"), nullptr);
}

}  // namespace
}  // namespace larder
