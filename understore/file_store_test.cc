// Copyright 2026 The Larder Authors.
#include "understore/file_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/process.h"
#include "understore/factory.h"

namespace larder {
namespace {

using ::testing::HasSubstr;

class FileStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = outer_.path() + "/root";
    ASSERT_TRUE(testing::WriteFile(root_ + "/a.txt", "hello world").ok());
    ASSERT_TRUE(
        testing::WriteFile(root_ + "/dir/b.bin", std::string(1000, 'b')).ok());
    ASSERT_TRUE(testing::WriteFile(root_ + "/dir/sub/c", "c").ok());
    ASSERT_TRUE(
        testing::WriteFile(outer_.path() + "/secret.txt", "outside").ok());
    ASSERT_EQ(::mkdir((outer_.path() + "/outside_dir").c_str(), 0755), 0);
    ASSERT_EQ(::symlink("../a.txt", (root_ + "/dir/link_in").c_str()), 0);
    ASSERT_EQ(::symlink((outer_.path() + "/secret.txt").c_str(),
                        (root_ + "/link_out").c_str()),
              0);
    ASSERT_EQ(::symlink("../secret.txt", (root_ + "/link_rel_out").c_str()), 0);
    ASSERT_EQ(::symlink((outer_.path() + "/outside_dir").c_str(),
                        (root_ + "/dirlink_out").c_str()),
              0);
    auto s = OpenUnderStore("file://" + root_);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
  }

  testing::TempDir outer_;
  std::string root_;
  std::unique_ptr<UnderStore> store_;
};

TEST_F(FileStoreTest, StatFileAndDir) {
  auto f = store_->Stat("a.txt");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_FALSE(f->is_dir);
  EXPECT_EQ(f->size, 11u);
  EXPECT_THAT(f->version, ::testing::EndsWith("-11"));
  auto d = store_->Stat("/dir/");
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->is_dir);
  EXPECT_EQ(d->path, "dir");
  EXPECT_TRUE(store_->Stat("")->is_dir);
  EXPECT_EQ(store_->Stat("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Stat("a.txt/x").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(FileStoreTest, SymlinkInsideRootWorks) {
  auto f = store_->Stat("dir/link_in");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->size, 11u);
}

TEST_F(FileStoreTest, EscapesAreRejected) {
  for (const char* p :
       {"link_out", "link_rel_out", "dirlink_out", "dirlink_out/x"}) {
    auto st = store_->Stat(p);
    EXPECT_EQ(st.status().code(), absl::StatusCode::kPermissionDenied)
        << p << ": " << st.status();
    EXPECT_THAT(st.status().message(),
                HasSubstr("escapes the under-store root"))
        << p;
  }
  char buf[16];
  EXPECT_EQ(
      store_->ReadRange("link_out", 0, absl::MakeSpan(buf), "").status().code(),
      absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(store_->List("dirlink_out", {}).status().code(),
            absl::StatusCode::kPermissionDenied);
  for (const char* p : {"../secret.txt", "dir/../../secret.txt", "dir/.."}) {
    EXPECT_EQ(store_->Stat(p).status().code(),
              absl::StatusCode::kInvalidArgument)
        << p;
    EXPECT_EQ(store_->ReadRange(p, 0, absl::MakeSpan(buf), "").status().code(),
              absl::StatusCode::kInvalidArgument)
        << p;
  }
}

TEST_F(FileStoreTest, ListingHidesEscapingSymlinks) {
  auto page = store_->List("", {});
  ASSERT_TRUE(page.ok()) << page.status();
  std::vector<std::string> names;
  for (const auto& e : page->entries)
    names.push_back(e.path + (e.is_dir ? "/" : ""));
  EXPECT_THAT(names, ::testing::ElementsAre("a.txt", "dir/"));
  EXPECT_TRUE(page->next_page_token.empty());
}

TEST_F(FileStoreTest, RecursiveListing) {
  std::vector<std::string> names;
  ASSERT_TRUE(ListAll(*store_, "", true, [&](const ObjectInfo& e) {
                names.push_back(e.path);
                return absl::OkStatus();
              }).ok());
  EXPECT_THAT(names, ::testing::ElementsAre("a.txt", "dir/b.bin", "dir/link_in",
                                            "dir/sub/c"));
}

TEST_F(FileStoreTest, PaginationVisitsEverythingOnce) {
  for (int i = 0; i < 57; ++i) {
    ASSERT_TRUE(
        testing::WriteFile(absl::StrCat(root_, "/many/d", i % 5, "/f", i), "x")
            .ok());
  }
  for (bool recursive : {false, true}) {
    for (size_t page_size : {1, 3, 7, 1000}) {
      std::vector<std::string> seen;
      ListOptions o;
      o.recursive = recursive;
      o.page_size = page_size;
      int pages = 0;
      do {
        auto page = store_->List("many", o);
        ASSERT_TRUE(page.ok()) << page.status();
        ASSERT_LE(page->entries.size(), page_size);
        for (const auto& e : page->entries) seen.push_back(e.path);
        o.page_token = page->next_page_token;
        ++pages;
      } while (!o.page_token.empty());
      std::set<std::string> unique(seen.begin(), seen.end());
      EXPECT_EQ(unique.size(), seen.size());
      EXPECT_EQ(seen.size(), recursive ? 57u : 5u) << page_size;
      EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
    }
  }
}

TEST_F(FileStoreTest, ReadRangeAtOddOffsets) {
  std::string data;
  for (int i = 0; i < 100000; ++i) data.push_back(static_cast<char>(i * 7 + 3));
  ASSERT_TRUE(testing::WriteFile(root_ + "/data.bin", data).ok());
  auto info = store_->Stat("data.bin");
  ASSERT_TRUE(info.ok());
  for (auto [off, len] : std::vector<std::pair<size_t, size_t>>{{0, 1},
                                                                {1, 4095},
                                                                {4097, 65537},
                                                                {99999, 1},
                                                                {99990, 100},
                                                                {100000, 10}}) {
    std::string buf(len, '\0');
    auto n =
        store_->ReadRange("data.bin", off, absl::MakeSpan(buf), info->version);
    ASSERT_TRUE(n.ok()) << n.status();
    size_t expect = std::min(len, data.size() - off);
    ASSERT_EQ(*n, expect);
    EXPECT_EQ(buf.substr(0, *n), data.substr(off, expect));
  }
  std::string buf(10, '\0');
  EXPECT_EQ(store_->ReadRange("data.bin", 100001, absl::MakeSpan(buf), "")
                .status()
                .code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(
      store_->ReadRange("nope", 0, absl::MakeSpan(buf), "").status().code(),
      absl::StatusCode::kNotFound);
  EXPECT_EQ(
      store_->ReadRange("dir", 0, absl::MakeSpan(buf), "").status().code(),
      absl::StatusCode::kInvalidArgument);
}

TEST_F(FileStoreTest, ChangedFileIsDetected) {
  auto before = store_->Stat("a.txt");
  ASSERT_TRUE(before.ok());
  ASSERT_TRUE(testing::WriteFile(root_ + "/a.txt", "hello WORLD, longer").ok());
  char buf[8];
  auto r = store_->ReadRange("a.txt", 0, absl::MakeSpan(buf), before->version);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("changed"));
}

TEST(FileStoreOpenTest, BadRoots) {
  testing::TempDir dir;
  EXPECT_EQ(OpenUnderStore("file://" + dir.path() + "/missing").status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(testing::WriteFile(dir.path() + "/f", "x").ok());
  EXPECT_EQ(OpenUnderStore("file://" + dir.path() + "/f").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenUnderStore("file://relative/path").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace larder
