// Copyright 2026 The Larder Authors.
//
// The parts of the CSI plugin that read outside input: paths from the
// kubelet's requests and the kernel's mount table (run under the
// sanitizers with the unit tests). Publishing against real mounts is in
// tests/csi_test.cc.
#include "csi/node_server.h"

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

TEST(CsiPathTest, MountInfoParsesOptionalFieldsAndEscapes) {
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
  EXPECT_EQ((*m)[0].fstype, "fuse.larder");
  EXPECT_EQ((*m)[0].source, "larder");
  EXPECT_EQ((*m)[1].fstype, "ext4");
  EXPECT_EQ((*m)[2].root, "/a\\b");
  EXPECT_EQ((*m)[2].mount_point, "/x\ty");
  EXPECT_EQ((*m)[2].source, "tmp fs");
}

TEST(CsiPathTest, MalformedMountInfoIsDataLossNotACrash) {
  for (const char* text :
       {"garbage line\n", "1 2 3 4 5 6 -\n", "1 2 3 4 5 6 7 8 9\n",
        "1 2 0:1 / /m rw - \n", "1 2 0:1 \\ /m\\1 rw - t s o\n"}) {
    MountInfoFile f(text);
    auto m = ReadMountInfo(f.path());
    if (m.ok()) {
      // Only the last one parses (an escape cut short stays as written).
      EXPECT_EQ(m->size(), 1u) << text;
    } else {
      EXPECT_EQ(m.status().code(), absl::StatusCode::kDataLoss) << text;
    }
  }
  EXPECT_EQ(ReadMountInfo("/nonexistent/mountinfo").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace larder
