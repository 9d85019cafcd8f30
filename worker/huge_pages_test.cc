// Copyright 2026 The Larder Authors.
#include "worker/huge_pages.h"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/process.h"
#include "worker/block_store.h"
#include "worker/testing/memory_store.h"

namespace larder {
namespace {

constexpr uint64_t kBlock = 4 << 20;

using testing::PatternBytes;

std::shared_ptr<const Block> MakeBlock(uint64_t length, uint64_t seed) {
  BlockId id{"m", "obj", "v1", 0, std::max<uint64_t>(length, kBlock), length};
  absl::StatusOr<BlockWriter> w = BlockWriter::Create(id);
  EXPECT_TRUE(w.ok()) << w.status();
  const std::string data = PatternBytes(length, seed);
  std::copy(data.begin(), data.end(), w->buffer().begin());
  absl::StatusOr<std::shared_ptr<const Block>> b = std::move(*w).Finish();
  EXPECT_TRUE(b.ok()) << b.status();
  return *b;
}

// KiB of the mapping that starts at `addr` mapped by 2 MiB entries, from
// /proc/self/smaps ("ShmemPmdMapped"); -1 if the mapping is not found.
long PmdMappedKib(const void* addr) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in = false;
  const uintptr_t want = reinterpret_cast<uintptr_t>(addr);
  while (std::getline(smaps, line)) {
    const size_t dash = line.find('-');
    if (dash != std::string::npos && dash > 0 && line.find(' ') > dash &&
        std::isxdigit(static_cast<unsigned char>(line[0]))) {
      in = std::stoull(line.substr(0, dash), nullptr, 16) == want;
      continue;
    }
    if (in && line.rfind("ShmemPmdMapped:", 0) == 0) {
      std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      long kib = -1;
      if (f.size() >= 2 && absl::SimpleAtoi(f[1], &kib)) return kib;
    }
  }
  return -1;
}

TEST(BlockTest, CollapseMovesWholeHugePagesAndKeepsTheBytes) {
  const uint64_t length = 5 << 20;  // Two 2 MiB pages and a 1 MiB tail.
  std::shared_ptr<const Block> b = MakeBlock(length, 1);
  EXPECT_EQ(
      reinterpret_cast<uintptr_t>(b->data().data()) % Block::kHugePageSize, 0u)
      << "block mappings are 2 MiB-aligned";
  EXPECT_EQ(PmdMappedKib(b->data().data()), 0) << "filled in 4 KiB pages";
  absl::Status s = b->CollapseToHugePages();
  if (s.code() == absl::StatusCode::kUnimplemented) GTEST_SKIP() << s;
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(PmdMappedKib(b->data().data()), 4096);
  EXPECT_EQ(b->data(), PatternBytes(length, 1));
  // The sealed memfd that clients read still has the same bytes.
  std::string via_fd(length, '\0');
  ASSERT_EQ(::pread(b->fd(), via_fd.data(), length, 0),
            static_cast<ssize_t>(length));
  EXPECT_EQ(via_fd, PatternBytes(length, 1));
  // Blocks under 2 MiB have nothing to collapse.
  EXPECT_TRUE(MakeBlock(100 << 10, 2)->CollapseToHugePages().ok());
}

// A block of 2 MiB or more whose length is no multiple of a page: its
// mapping and the address space reserved to align it are all given back
// (the reservation's tail after an odd length used to stay mapped, one
// mapping per block, until the process ran out of them).
TEST(BlockTest, OddLengthBlocksLeaveNoMappingBehind) {
  auto mappings = [] {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    size_t n = 0;
    while (std::getline(maps, line)) ++n;
    return n;
  };
  // Filled in place, not from a heap string: an allocator (ASan's keeps
  // freed memory in quarantine) maps regions of its own as it goes. A leak
  // is one mapping per block.
  auto make = [](uint64_t length, int i) {
    BlockId id{"m", "obj", "v1", 0, std::max<uint64_t>(length, kBlock), length};
    absl::StatusOr<BlockWriter> w = BlockWriter::Create(id);
    EXPECT_TRUE(w.ok()) << w.status();
    std::memset(w->buffer().data(), i, length);
    absl::StatusOr<std::shared_ptr<const Block>> b = std::move(*w).Finish();
    EXPECT_TRUE(b.ok()) << b.status();
    return *b;
  };
  constexpr int kBlocks = 300;
  for (uint64_t length : {(2u << 20) + 100, (5u << 20) + 4095, 3u << 20}) {
    make(length, 3);  // Warm up whatever the first block maps.
    const size_t before = mappings();
    for (int i = 0; i < kBlocks; ++i) {
      std::shared_ptr<const Block> b = make(length, i);
      ASSERT_EQ(b->data().size(), length);
    }
    EXPECT_LT(mappings(), before + kBlocks / 6) << length << "-byte blocks";
  }
}

TEST(HugePagePromoterTest, WaitsForQuietAndSkipsEvictedBlocks) {
  WorkerMetrics metrics;
  std::atomic<int64_t> last_use{absl::GetCurrentTimeNanos() +
                                absl::ToInt64Nanoseconds(absl::Hours(1))};
  HugePagePromoter p(
      &metrics, [&] { return absl::FromUnixNanos(last_use.load()); },
      absl::Milliseconds(10));
  std::shared_ptr<const Block> kept = MakeBlock(kBlock, 3);
  std::shared_ptr<const Block> evicted = MakeBlock(kBlock, 4);
  p.Add(kept);
  p.Add(evicted);
  p.Add(MakeBlock(1 << 20, 5));  // Too small: ignored.
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(p.queued(), 2u) << "the worker is busy: nothing collapsed yet";
  EXPECT_EQ(metrics.huge_page_collapses.Value(), 0);
  evicted.reset();
  last_use = absl::GetCurrentTimeNanos();  // Quiet from now on.
  if (!p.WaitIdle()) GTEST_SKIP() << "the kernel cannot collapse shmem";
  EXPECT_EQ(metrics.huge_page_collapses.Value(), 1);
  EXPECT_EQ(p.queued(), 0u);
  EXPECT_EQ(PmdMappedKib(kept->data().data()), 4096);
  EXPECT_EQ(kept->data(), PatternBytes(kBlock, 3));
}

TEST(HugePagePromoterTest, BlockStoreQueuesBlocksThatAreReadAgain) {
  auto store = std::make_shared<testing::MemoryStore>();
  WorkerMounts mounts;
  ASSERT_TRUE(mounts.Add("m", store, kBlock).ok());
  const std::string data = PatternBytes(2 * kBlock, 6);
  store->Put("obj", data);
  WorkerMetrics metrics;
  BlockStoreOptions o;
  o.collapse_min_age = absl::Milliseconds(200);
  o.collapse_quiet = absl::ZeroDuration();
  auto bs = BlockStore::Create(o, &mounts, &metrics);
  ASSERT_TRUE(bs.ok()) << bs.status();
  auto id = [&](uint64_t i) {
    return BlockId{"m", "obj", store->VersionOf("obj"), i, kBlock, data.size()};
  };
  // Fetched, then looked up again at once (a reader racing its own
  // readahead): not a re-read.
  ASSERT_TRUE((*bs)->Get(id(0)).ok());
  ASSERT_TRUE((*bs)->Get(id(1)).ok());
  ASSERT_TRUE((*bs)->Get(id(0)).ok());
  ASSERT_NE((*bs)->huge_pages(), nullptr);
  (*bs)->huge_pages()->WaitIdle();
  EXPECT_EQ(metrics.huge_page_collapses.Value(), 0);
  // Read again later: block 0 is collapsed, once however often it is read.
  absl::SleepFor(absl::Milliseconds(250));
  for (int i = 0; i < 3; ++i) {
    auto r = (*bs)->Get(id(0));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->source, BlockSource::kRam);
  }
  if (!(*bs)->huge_pages()->WaitIdle())
    GTEST_SKIP() << "the kernel cannot collapse shmem";
  EXPECT_EQ(metrics.huge_page_collapses.Value(), 1);
  auto r = (*bs)->Get(id(0));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(PmdMappedKib(r->block->data().data()), 4096);
  EXPECT_EQ(r->block->data(), data.substr(0, kBlock));
  EXPECT_EQ(store->reads(), 2);

  // Turned off: no promoter.
  o.collapse_huge_pages = false;
  auto off = BlockStore::Create(o, &mounts, &metrics);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ((*off)->huge_pages(), nullptr);
}

}  // namespace
}  // namespace larder
