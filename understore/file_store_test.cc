// Copyright 2026 The Larder Authors.
#include "understore/file_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <set>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
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

// Each file's own owner, group and mode, and who may read it: search on
// the root and every directory on the way, read on the file, as the kernel
// decides.
TEST_F(FileStoreTest, OwnersModesAndWhoMayReadAFile) {
  ASSERT_EQ(::chmod(root_.c_str(), 0755), 0);
  ASSERT_EQ(::chmod((root_ + "/dir").c_str(), 0750), 0);
  ASSERT_EQ(::chown((root_ + "/dir").c_str(), 0, 4242), 0);
  ASSERT_EQ(::chmod((root_ + "/dir/b.bin").c_str(), 0644), 0);
  ASSERT_EQ(::chmod((root_ + "/a.txt").c_str(), 0600), 0);
  ASSERT_EQ(::chown((root_ + "/a.txt").c_str(), 1000, 1000), 0);
  auto a = store_->Stat("a.txt");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->uid, 1000u);
  EXPECT_EQ(a->gid, 1000u);
  EXPECT_EQ(a->mode, 0600u);
  EXPECT_EQ(store_->Stat("dir")->mode, 0750u);

  PeerCredentials owner{1000, 1000, {}, 0};
  PeerCredentials stranger{65534, 65534, {}, 0};
  PeerCredentials member{65534, 65534, {4242}, 0};
  PeerCredentials root{0, 0, {}, 0};
  EXPECT_TRUE(store_->MayRead("a.txt", owner).ok());
  EXPECT_TRUE(store_->MayRead("a.txt", root).ok());
  absl::Status s = store_->MayRead("a.txt", stranger);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("uid 65534 may not read 'a.txt'"));
  // The directory on the way decides for the file inside it.
  s = store_->MayRead("dir/b.bin", stranger);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("directory 'dir' denies search"));
  EXPECT_TRUE(store_->MayRead("dir/b.bin", member).ok());
  EXPECT_FALSE(store_->MayRead("dir/b.bin", AnonymousPeer()).ok());
  EXPECT_EQ(store_->MayRead("nope", owner).code(), absl::StatusCode::kNotFound);
  // A link beside the directory leads into it: the directory still decides
  // (the link's own path has no directory to deny; the kernel searches the
  // directories of where it leads).
  ASSERT_EQ(::symlink("dir/b.bin", (root_ + "/pub_link").c_str()), 0);
  s = store_->MayRead("pub_link", stranger);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_THAT(s.message(),
              HasSubstr("directory 'dir', where 'pub_link' leads, denies "
                        "search"));
  EXPECT_TRUE(store_->MayRead("pub_link", member).ok());
  // The root itself counts too (directories are looked at again after a
  // second at most).
  ASSERT_EQ(::chmod(root_.c_str(), 0700), 0);
  absl::SleepFor(absl::Milliseconds(1100));
  EXPECT_FALSE(store_->MayRead("dir/b.bin", member).ok());
  EXPECT_FALSE(store_->MayRead("../secret.txt", root).ok());
}

// Seeing a path (stat) needs search permission on the way; listing a
// directory read and search permission on it too, as the kernel decides.
TEST_F(FileStoreTest, WhoMaySeeAndWhoMayListAPath) {
  ASSERT_EQ(::chmod(root_.c_str(), 0755), 0);
  ASSERT_EQ(::chmod((root_ + "/dir").c_str(), 0750), 0);
  ASSERT_EQ(::chown((root_ + "/dir").c_str(), 0, 4242), 0);
  ASSERT_EQ(::chmod((root_ + "/a.txt").c_str(), 0600), 0);
  ASSERT_EQ(::chown((root_ + "/a.txt").c_str(), 1000, 1000), 0);
  PeerCredentials owner{1000, 1000, {}, 0};
  PeerCredentials stranger{65534, 65534, {}, 0};
  PeerCredentials member{65534, 65534, {4242}, 0};
  // A file another user may not read is still seen where the way is open.
  EXPECT_TRUE(store_->MayLookup("a.txt", stranger).ok());
  EXPECT_FALSE(store_->MayRead("a.txt", stranger).ok());
  absl::Status s = store_->MayLookup("dir/b.bin", stranger);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("uid 65534 may not see 'dir/b.bin'"));
  EXPECT_TRUE(store_->MayLookup("dir/b.bin", member).ok());
  EXPECT_TRUE(store_->MayLookup("dir", stranger).ok());  // The way is open.
  s = store_->MayList("dir", stranger);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("uid 65534 may not list 'dir'"));
  EXPECT_TRUE(store_->MayList("dir", member).ok());
  EXPECT_TRUE(store_->MayList("", stranger).ok());
  EXPECT_TRUE(store_->MayList("dir", AnonymousPeer()).code() ==
              absl::StatusCode::kPermissionDenied);
  // Read without search lists names, not what they are: not enough.
  ASSERT_EQ(::chmod((root_ + "/dir").c_str(), 0740), 0);
  absl::SleepFor(absl::Milliseconds(1100));  // The directory cache's second.
  EXPECT_FALSE(store_->MayList("dir", member).ok());
  EXPECT_EQ(store_->MayLookup("nope", owner).code(),
            absl::StatusCode::kNotFound);
  // The root's own bits, for its listing.
  ASSERT_EQ(::chmod(root_.c_str(), 0711), 0);
  absl::SleepFor(absl::Milliseconds(1100));
  s = store_->MayList("", stranger);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("the mount's root denies reading"));
  EXPECT_TRUE(store_->MayLookup("a.txt", stranger).ok());
  ASSERT_EQ(::chmod(root_.c_str(), 0755), 0);
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

// A FIFO under the root (made there, or swapped in for a file) is no
// object: a read fails at once, named, instead of waiting for a writer.
TEST_F(FileStoreTest, AFifoIsNotReadAndDoesNotHang) {
  const std::string fifo = root_ + "/pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  auto read = std::async(std::launch::async, [&] {
    std::string buf(10, '\0');
    return store_->ReadRange("pipe", 0, absl::MakeSpan(buf), "").status();
  });
  if (read.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    // Unblock the open so the test ends, then fail.
    int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
    FAIL() << "the read of a FIFO hung";
  }
  absl::Status st = read.get();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("not a regular file"));
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

// Makes a chain of `levels` directories "d/d/d/..." in directory `top`, with
// file "bottom.txt" in the last one. Walks down with mkdirat/openat: the
// whole path soon exceeds PATH_MAX, so no single path names the bottom.
void MakeChain(const std::string& top, int levels) {
  int fd = ::open(top.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << top;
  for (int i = 0; i < levels; ++i) {
    ASSERT_EQ(::mkdirat(fd, "d", 0755), 0) << "level " << i << ": " << errno;
    const int child = ::openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ::close(fd);
    ASSERT_GE(child, 0) << "level " << i << ": " << errno;
    fd = child;
  }
  const int f =
      ::openat(fd, "bottom.txt", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(f, 0);
  ASSERT_EQ(::write(f, "x", 1), 1);
  ::close(f);
  ::close(fd);
}

// Removes a chain made by MakeChain without recursion or long paths: the
// second level is renamed up beside the first, the emptied first removed,
// and so on down (two directories open at a time).
void RemoveChain(const std::string& top) {
  const int top_fd = ::open(top.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(top_fd, 0) << top;
  for (;;) {
    const int d =
        ::openat(top_fd, "d", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d < 0) break;
    ::unlinkat(d, "bottom.txt", 0);
    const bool deeper = ::renameat(d, "d", top_fd, "d.next") == 0;
    ::close(d);
    ASSERT_EQ(::unlinkat(top_fd, "d", AT_REMOVEDIR), 0) << errno;
    if (!deeper) break;
    ASSERT_EQ(::renameat(top_fd, "d.next", top_fd, "d"), 0) << errno;
  }
  ::close(top_fd);
}

// Runs `fn` in a forked child and returns the status it returned, or
// Internal saying how the child died (a stack overflow kills the child, not
// the test binary, so the test reports it and still removes its chain).
absl::Status InChild(const std::function<absl::Status()>& fn) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe2");
  const pid_t pid = ::fork();
  if (pid < 0) return absl::InternalError("fork");
  if (pid == 0) {
    ::close(fds[0]);
    const absl::Status st = fn();
    const std::string out =
        absl::StrCat(static_cast<int>(st.code()), " ", st.message());
    if (::write(fds[1], out.data(), out.size()) < 0) ::_exit(2);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int wstatus = 0;
  ::waitpid(pid, &wstatus, 0);
  if (WIFSIGNALED(wstatus)) {
    return absl::InternalError(
        absl::StrCat("the listing crashed: signal ", WTERMSIG(wstatus), " (",
                     ::strsignal(WTERMSIG(wstatus)), ")"));
  }
  const size_t space = out.find(' ');
  int code = 0;
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0 ||
      space == std::string::npos ||
      !absl::SimpleAtoi(out.substr(0, space), &code)) {
    return absl::InternalError("the listing's child ended without a status");
  }
  return absl::Status(static_cast<absl::StatusCode>(code),
                      out.substr(space + 1));
}

std::string ChainPath(int levels) {
  std::string p;
  for (int i = 0; i < levels; ++i) absl::StrAppend(&p, i ? "/" : "", "d");
  return p;
}

// A directory chain far deeper than any real dataset (30,000 levels; before
// the walk was iterative, each level was a stack frame holding a descriptor:
// the walk overflowed the stack, or with fewer descriptors than levels
// silently skipped everything below the limit): the recursive listing fails
// cleanly with InvalidArgument naming the first directory too deep, quickly.
// The listings run in a forked child, so that a crash is reported as one.
// An upload is one 0600 file beside its target (its directory made when
// missing) until Complete renames it, 0644, into place.
TEST_F(FileStoreTest, UploadMakesItsDirectoryAndTheFinalMode) {
  auto id = store_->CreateUpload("new/deep/x.bin");
  ASSERT_TRUE(id.ok()) << id.status();
  const std::string temp =
      absl::StrCat(root_, "/new/deep/", kUploadTempPrefix, *id);
  struct stat st;
  ASSERT_EQ(::stat(temp.c_str(), &st), 0) << std::strerror(errno);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  auto part = store_->UploadPart("new/deep/x.bin", *id, 1, 0, "abc");
  ASSERT_TRUE(part.ok()) << part.status();
  EXPECT_EQ(part->token, "");
  auto info = store_->CompleteUpload("new/deep/x.bin", *id, {*part});
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->mode, 0644u);
  ASSERT_EQ(::stat((root_ + "/new/deep/x.bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  EXPECT_EQ(testing::ReadFile(root_ + "/new/deep/x.bin").value_or(""), "abc");
  EXPECT_NE(::access(temp.c_str(), F_OK), 0);
  // A part that was never sent at the end: the file is shorter than the
  // parts say.
  auto short_id = store_->CreateUpload("new/short.bin");
  ASSERT_TRUE(short_id.ok());
  EXPECT_EQ(store_
                ->CompleteUpload("new/short.bin", *short_id,
                                 {UploadedPart{1, 0, 10, ""}})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(store_->AbortUpload("new/short.bin", *short_id).ok());
  // A directory at the target is not replaced.
  auto dir_id = store_->CreateUpload("dir/sub");
  ASSERT_TRUE(dir_id.ok());
  auto dir_part = store_->UploadPart("dir/sub", *dir_id, 1, 0, "x");
  ASSERT_TRUE(dir_part.ok());
  EXPECT_EQ(
      store_->CompleteUpload("dir/sub", *dir_id, {*dir_part}).status().code(),
      absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(store_->Stat("dir/sub/c").ok());
  EXPECT_TRUE(store_->AbortUpload("dir/sub", *dir_id).ok());
}

// Uploads are confined as reads are: no directory or file is made outside
// the root, whatever the symlinks on the way.
TEST_F(FileStoreTest, UploadsStayBeneathTheRoot) {
  for (const char* p : {"dirlink_out/x.bin", "dirlink_out/sub/x.bin"}) {
    EXPECT_EQ(store_->CreateUpload(p).status().code(),
              absl::StatusCode::kPermissionDenied)
        << p;
  }
  std::error_code ec;
  EXPECT_TRUE(std::filesystem::is_empty(outer_.path() + "/outside_dir", ec));
  // A symlink at the target is replaced itself; what it points at is not
  // written.
  auto id = store_->CreateUpload("link_out");
  ASSERT_TRUE(id.ok()) << id.status();
  auto part = store_->UploadPart("link_out", *id, 1, 0, "new");
  ASSERT_TRUE(part.ok());
  ASSERT_TRUE(store_->CompleteUpload("link_out", *id, {*part}).ok());
  EXPECT_EQ(testing::ReadFile(outer_.path() + "/secret.txt").value_or(""),
            "outside");
  EXPECT_EQ(testing::ReadFile(root_ + "/link_out").value_or(""), "new");
  // Upload ids name files: only this store's own are taken.
  for (const char* bad : {"../../secret.txt", "0123456789abcdeF", ""}) {
    EXPECT_EQ(store_->UploadPart("a.txt", bad, 1, 0, "x").status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
    EXPECT_EQ(store_->AbortUpload("a.txt", bad).code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_EQ(store_->UploadPart("a.txt", "0123456789abcdef", 1, 0, "x")
                .status()
                .code(),
            absl::StatusCode::kNotFound);
}

TEST(FileStoreDepthTest, DeepChainFailsCleanlyInBoundedTime) {
  testing::TempDir dir;
  const std::string root = dir.path() + "/deep";
  ASSERT_EQ(::mkdir(root.c_str(), 0755), 0);
  absl::Cleanup remove = [&root] { RemoveChain(root); };
  MakeChain(root, 30000);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  auto store = OpenUnderStore("file://" + root);
  ASSERT_TRUE(store.ok()) << store.status();

  const absl::Time start = absl::Now();
  const absl::Status st = InChild([&] {
    ListOptions o;
    o.recursive = true;
    return (*store)->List("", o).status();
  });
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  const std::string message(st.message());
  EXPECT_THAT(message, HasSubstr(absl::StrCat(
                           "'", ChainPath(kMaxRecursiveListDepth + 1), "'")));
  EXPECT_THAT(message, HasSubstr("deeper than 256 levels"));
  EXPECT_LT(took, absl::Seconds(10)) << took;
  // ListAll (what the master and `larder load` use) stops the same way.
  absl::Status all = InChild([&] {
    return ListAll(**store, "", true,
                   [](const ObjectInfo&) { return absl::OkStatus(); });
  });
  EXPECT_EQ(all.code(), absl::StatusCode::kInvalidArgument) << all;
  // A flat listing of the same directory is unaffected.
  auto flat = (*store)->List("", {});
  ASSERT_TRUE(flat.ok()) << flat.status();
  ASSERT_EQ(flat->entries.size(), 1u);
  EXPECT_TRUE(flat->entries[0].is_dir);
}

// The limit is exact: a file kMaxRecursiveListDepth directories down is
// listed; one more level is the error, and listing from one level down
// brings the chain back within the limit.
TEST(FileStoreDepthTest, LimitIsExact) {
  for (int levels : {kMaxRecursiveListDepth, kMaxRecursiveListDepth + 1}) {
    testing::TempDir dir;
    const std::string root = dir.path() + "/deep";
    ASSERT_EQ(::mkdir(root.c_str(), 0755), 0);
    absl::Cleanup remove = [&root] { RemoveChain(root); };
    MakeChain(root, levels);
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
    auto store = OpenUnderStore("file://" + root);
    ASSERT_TRUE(store.ok()) << store.status();
    std::vector<std::string> files;
    absl::Status st = ListAll(**store, "", true, [&](const ObjectInfo& e) {
      files.push_back(e.path);
      return absl::OkStatus();
    });
    if (levels == kMaxRecursiveListDepth) {
      ASSERT_TRUE(st.ok()) << st;
      EXPECT_THAT(files,
                  ::testing::ElementsAre(ChainPath(levels) + "/bottom.txt"));
    } else {
      EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
      EXPECT_TRUE(files.empty());
      ListOptions o;
      o.recursive = true;
      auto below = (*store)->List("d", o);
      ASSERT_TRUE(below.ok()) << below.status();
      ASSERT_EQ(below->entries.size(), 1u);
      EXPECT_EQ(below->entries[0].path, ChainPath(levels) + "/bottom.txt");
    }
  }
}

// An ordinary tree (files at every level, several branches, one branch 40
// levels deep): the iterative walk returns every file exactly once, in
// order, at every page size.
TEST(FileStoreDepthTest, RecursiveListingOfATreeReturnsEveryFile) {
  testing::TempDir dir;
  const std::string root = dir.path() + "/tree";
  std::vector<std::string> expected;
  auto put = [&](const std::string& rel) {
    ASSERT_TRUE(testing::WriteFile(root + "/" + rel, rel).ok()) << rel;
    expected.push_back(rel);
  };
  put("top.txt");
  for (int a = 0; a < 4; ++a) {
    put(absl::StrCat("a", a, "/f.txt"));
    for (int b = 0; b < 3; ++b) {
      for (int f = 0; f < 3; ++f) put(absl::StrCat("a", a, "/b", b, "/f", f));
    }
  }
  ASSERT_EQ(::mkdir((root + "/empty").c_str(), 0755), 0);
  std::string deep = "z";
  for (int i = 0; i < 40; ++i) {
    put(deep + "/file");
    deep += "/z";
  }
  std::sort(expected.begin(), expected.end(),
            [](const std::string& x, const std::string& y) {
              // The listing order: component by component, bytewise.
              return std::lexicographical_compare(
                  x.begin(), x.end(), y.begin(), y.end(), [](char c, char d) {
                    return (c == '/' ? 0 : static_cast<unsigned char>(c)) <
                           (d == '/' ? 0 : static_cast<unsigned char>(d));
                  });
            });
  auto store = OpenUnderStore("file://" + root);
  ASSERT_TRUE(store.ok()) << store.status();
  for (size_t page_size : {1, 4, 1000}) {
    std::vector<std::string> seen;
    ASSERT_TRUE(ListAll(
                    **store, "", true,
                    [&](const ObjectInfo& e) {
                      EXPECT_FALSE(e.is_dir) << e.path;
                      seen.push_back(e.path);
                      return absl::OkStatus();
                    },
                    page_size)
                    .ok());
    EXPECT_EQ(seen, expected) << "page size " << page_size;
  }
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
