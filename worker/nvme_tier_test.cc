// Copyright 2026 The Larder Authors.
#include "worker/nvme_tier.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/process.h"

namespace larder {
namespace {

std::shared_ptr<const Block> MakeBlock(const std::string& path, uint64_t index,
                                       uint64_t size = 10000,
                                       uint64_t block_size = 4096) {
  BlockId id{"m", path, "v1", index, block_size, size};
  auto w = BlockWriter::Create(id);
  EXPECT_TRUE(w.ok());
  auto buf = w->buffer();
  for (size_t i = 0; i < buf.size(); ++i)
    buf[i] = static_cast<char>(i * 31 + index + path.size());
  return *std::move(*w).Finish();
}

NvmeOptions Options(const std::string& dir, uint64_t capacity) {
  NvmeOptions o;
  o.dirs.push_back({dir, capacity});
  o.reserve_bytes = 0;
  return o;
}

std::vector<std::string> BlockFiles(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e :
       std::filesystem::recursive_directory_iterator(dir + "/blocks")) {
    if (e.is_regular_file()) out.push_back(e.path().string());
  }
  return out;
}

TEST(NvmeTierTest, WriteReadRoundTrip) {
  testing::TempDir dir;
  auto tier = NvmeTier::Open(Options(dir.path(), 1 << 20), nullptr);
  ASSERT_TRUE(tier.ok()) << tier.status();
  auto b = MakeBlock("a.bin", 1);
  ASSERT_TRUE((*tier)->Write(*b).ok());
  EXPECT_TRUE((*tier)->Contains(b->key()));
  auto r = (*tier)->Read(b->id());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->data(), b->data());
  // Data is page-aligned after a 4 KiB header, and nothing is left in tmp/.
  auto files = BlockFiles(dir.path());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(std::filesystem::file_size(files[0]), 4096 + b->length());
  EXPECT_TRUE(std::filesystem::is_empty(dir.path() + "/tmp"));
}

TEST(NvmeTierTest, CorruptionIsDetectedAndTheFileDropped) {
  testing::TempDir dir;
  auto tier = NvmeTier::Open(Options(dir.path(), 1 << 20), nullptr);
  ASSERT_TRUE(tier.ok());
  auto b = MakeBlock("a.bin", 0);
  ASSERT_TRUE((*tier)->Write(*b).ok());
  std::string file = BlockFiles(dir.path()).at(0);
  int fd = ::open(file.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, "X", 1, 4096 + 100), 1);  // One byte of data flipped.
  ::close(fd);
  auto r = (*tier)->Read(b->id());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
  EXPECT_FALSE((*tier)->Contains(b->key()));
  EXPECT_FALSE(std::filesystem::exists(file));
  EXPECT_EQ((*tier)->GetStats().checksum_failures, 1u);
}

TEST(NvmeTierTest, IndexIsRebuiltAfterRestart) {
  testing::TempDir dir;
  std::vector<std::shared_ptr<const Block>> blocks;
  {
    auto tier = NvmeTier::Open(Options(dir.path(), 1 << 20), nullptr);
    ASSERT_TRUE(tier.ok());
    for (int i = 0; i < 3; ++i) {
      blocks.push_back(MakeBlock("f" + std::to_string(i), 1));
      ASSERT_TRUE((*tier)->Write(*blocks.back()).ok());
    }
  }
  // Debris of a crash: a temp file and a garbage file under blocks/.
  ASSERT_TRUE(testing::WriteFile(dir.path() + "/tmp/x.tmp", "partial").ok());
  ASSERT_TRUE(
      testing::WriteFile(dir.path() + "/blocks/00/garbage.blk", "not a block")
          .ok());
  auto tier = NvmeTier::Open(Options(dir.path(), 1 << 20), nullptr);
  ASSERT_TRUE(tier.ok());
  for (const auto& b : blocks) {
    auto r = (*tier)->Read(b->id());
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ((*r)->data(), b->data());
  }
  auto stats = (*tier)->GetStats();
  EXPECT_EQ(stats.rebuilt_blocks, 3u);
  EXPECT_EQ(stats.dropped_at_rebuild, 1u);
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/tmp/x.tmp"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/blocks/00/garbage.blk"));
}

TEST(NvmeTierTest, HitsAreCountedForTheDirectoryThatServedThem) {
  testing::TempDir a, b;
  NvmeOptions o = Options(a.path(), 1 << 20);
  o.dirs.push_back({b.path(), 1 << 20});
  auto tier = NvmeTier::Open(o, nullptr);
  ASSERT_TRUE(tier.ok()) << tier.status();
  // Blocks go to the directories in turn: one each.
  auto first = MakeBlock("x", 0), second = MakeBlock("y", 0);
  ASSERT_TRUE((*tier)->Write(*first).ok());
  ASSERT_TRUE((*tier)->Write(*second).ok());
  ASSERT_EQ(BlockFiles(a.path()).size(), 1u);
  ASSERT_EQ(BlockFiles(b.path()).size(), 1u);
  const bool first_in_a =
      (*tier)->GetStats().dirs[0].blocks == 1 &&
      absl::StrContains(BlockFiles(a.path())[0], first->key().ToHex());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*tier)->Read(first->id()).ok());
  ASSERT_TRUE((*tier)->Read(second->id()).ok());
  const NvmeTier::Stats s = (*tier)->GetStats();
  ASSERT_EQ(s.dirs.size(), 2u);
  EXPECT_EQ(s.dirs[first_in_a ? 0 : 1].hits, 3u);
  EXPECT_EQ(s.dirs[first_in_a ? 1 : 0].hits, 1u);
}

TEST(NvmeTierTest, CapacityEvictsLeastRecentlyUsed) {
  testing::TempDir dir;
  // Room for two 4096-byte blocks with their 4096-byte headers.
  auto tier = NvmeTier::Open(Options(dir.path(), 2 * 8192), nullptr);
  ASSERT_TRUE(tier.ok());
  auto a = MakeBlock("a", 0), b = MakeBlock("b", 0), c = MakeBlock("c", 0);
  ASSERT_TRUE((*tier)->Write(*a).ok());
  ASSERT_TRUE((*tier)->Write(*b).ok());
  ASSERT_TRUE((*tier)->Read(a->id()).ok());  // a is now more recent than b.
  ASSERT_TRUE((*tier)->Write(*c).ok());
  EXPECT_TRUE((*tier)->Contains(a->key()));
  EXPECT_FALSE((*tier)->Contains(b->key()));
  EXPECT_TRUE((*tier)->Contains(c->key()));
  EXPECT_EQ(BlockFiles(dir.path()).size(), 2u);
  EXPECT_LE((*tier)->GetStats().dirs[0].used, 2u * 8192);
}

// A block is in the index from the moment its Write admits it, but its file
// appears only at the rename: a Read meanwhile must not drop the entry of a
// file about to appear (it did: the file stayed, named by no entry, and the
// block was fetched from the store again), and an Erase meanwhile must not
// leave the file behind. Odd blocks are erased during their write, even
// ones read.
TEST(NvmeTierTest, ReadsAndErasesDuringAWriteLeaveNoFileWithoutAnEntry) {
  testing::TempDir dir;
  auto tier = NvmeTier::Open(Options(dir.path(), 1 << 30), nullptr);
  ASSERT_TRUE(tier.ok());
  constexpr int kBlocks = 40;
  constexpr uint64_t kSize = 1 << 20;
  for (int i = 0; i < kBlocks; ++i) {
    SCOPED_TRACE(i);
    auto b = MakeBlock(absl::StrCat("f", i), 0, kSize, kSize);
    std::atomic<bool> written{false};
    std::thread other([&] {
      while (!written) {
        if (i % 2 == 1) {
          (*tier)->Erase({b->key()});
          continue;
        }
        auto r = (*tier)->Read(b->id());
        if (r.ok()) {
          EXPECT_EQ((*r)->data(), b->data());
        } else {
          EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound)
              << r.status();
        }
      }
    });
    EXPECT_TRUE((*tier)->Write(*b).ok());
    written = true;
    other.join();
    if (i % 2 == 0) {
      EXPECT_TRUE((*tier)->Contains(b->key()));
      auto r = (*tier)->Read(b->id());
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ((*r)->data(), b->data());
    }
  }
  // Every file is an entry's, and every entry has its file.
  const std::vector<BlockKey> keys = (*tier)->Keys();
  EXPECT_GE(keys.size(), kBlocks / 2);
  EXPECT_EQ(BlockFiles(dir.path()).size(), keys.size());
  for (const BlockKey& k : keys) EXPECT_TRUE((*tier)->Contains(k));
}

// A disk fuller than the tier's capacity says (the capacity set above
// what the disk holds, or others writing to it): the tier's own least
// recent blocks make room for the reserve, and writes go on; it used to
// degrade the directory every 30 s for good, with nothing ever evicted.
TEST(NvmeTierTest, ADiskFullerThanTheCapacityEvictsInsteadOfStopping) {
  testing::TempDir dir;
  const std::string disk = dir.path() + "/disk";
  std::filesystem::create_directories(disk);
  if (::mount("tmpfs", disk.c_str(), "tmpfs", 0, "size=256k,mode=0700") != 0)
    GTEST_SKIP() << "cannot mount a tmpfs: " << std::strerror(errno);
  absl::Cleanup unmount = [&] { ::umount2(disk.c_str(), MNT_DETACH); };
  NvmeOptions o = Options(disk, 64 << 20);  // Far more than the disk.
  o.reserve_bytes = 64 << 10;
  auto tier = NvmeTier::Open(o, nullptr);
  ASSERT_TRUE(tier.ok()) << tier.status();
  std::vector<std::shared_ptr<const Block>> blocks;
  for (int i = 0; i < 60; ++i) {
    blocks.push_back(MakeBlock("full.bin", i, 60 * 4096));
    ASSERT_TRUE((*tier)->Write(*blocks.back()).ok()) << "block " << i;
    EXPECT_FALSE((*tier)->GetStats().dirs[0].degraded) << "block " << i;
  }
  // The newest are there and read back; the oldest made room.
  EXPECT_TRUE((*tier)->Read(blocks.back()->id()).ok());
  EXPECT_FALSE((*tier)->Contains(blocks.front()->key()));
  struct statvfs vfs {};
  ASSERT_EQ(::statvfs(disk.c_str(), &vfs), 0);
  EXPECT_GE(static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize, 32u << 10);
}

TEST(NvmeTierTest, ReserveDegradesInsteadOfFillingTheDisk) {
  testing::TempDir dir;
  NvmeOptions o = Options(dir.path(), 1 << 20);
  o.reserve_bytes = 1ull << 60;  // More than any disk has free.
  auto tier = NvmeTier::Open(o, nullptr);
  ASSERT_TRUE(tier.ok());
  auto b = MakeBlock("a", 0);
  EXPECT_EQ((*tier)->Write(*b).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE((*tier)->GetStats().dirs[0].degraded);
  EXPECT_TRUE(BlockFiles(dir.path()).empty());
}

}  // namespace
}  // namespace larder
