// Copyright 2026 The Larder Authors.
#include "fuse/kernel_channel.h"

#include <cstring>
#include <string>

#include "fuse/passthrough.h"
#include "gtest/gtest.h"

namespace larder {
namespace {

constexpr char kMountInfo[] =
    "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
    "40 22 0:35 / /mnt/a\\040b rw,nosuid - fuse.larder larder "
    "rw,user_id=0\n"
    "41 22 0:36 / /mnt/c rw master:2 shared:7 - tmpfs none rw\n"
    "42 41 0:37 / /mnt/c rw - fuse.larder larder rw\n";

TEST(MountInfoTest, UnescapesOctalAndKeepsTheRest) {
  EXPECT_EQ(UnescapeMountInfo("/mnt/a\\040b"), "/mnt/a b");
  EXPECT_EQ(UnescapeMountInfo("/tab\\011here\\134"), "/tab\there\\");
  EXPECT_EQ(UnescapeMountInfo("\\08x/\\9"), "\\08x/\\9");
  EXPECT_EQ(UnescapeMountInfo(""), "");
}

TEST(MountInfoTest, FindsTheMountAtAPathWithEscapes) {
  std::optional<MountInfo> m = FindMountIn(kMountInfo, "/mnt/a b");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->device, "0:35");
  EXPECT_EQ(m->type, "fuse.larder");
  EXPECT_EQ(m->source, "larder");
  EXPECT_FALSE(FindMountIn(kMountInfo, "/mnt/a\\040b").has_value());
  EXPECT_FALSE(FindMountIn(kMountInfo, "/mnt").has_value());
  EXPECT_FALSE(FindMountIn("", "/").has_value());
}

TEST(MountInfoTest, TheTopmostMountWinsAndOptionalFieldsAreSkipped) {
  std::optional<MountInfo> m = FindMountIn(kMountInfo, "/mnt/c");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->device, "0:37");  // Mounted over the tmpfs.
  EXPECT_EQ(m->type, "fuse.larder");
  m = FindMountIn(kMountInfo, "/");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->type, "ext4");
  EXPECT_EQ(m->source, "/dev/sda1");
}

TEST(MountInfoTest, ThisProcessSeesItsRoot) {
  EXPECT_TRUE(FindMount("/").has_value());
}

// An INIT request as the kernel writes it.
std::string InitRequest(uint32_t flags, uint32_t flags2, uint64_t unique) {
  fuse_in_header in{};
  in.opcode = FUSE_INIT;
  in.unique = unique;
  fuse_init_in init{};
  init.major = 7;
  init.minor = 40;
  init.flags = flags;
  init.flags2 = flags2;
  in.len = sizeof(in) + sizeof(init);
  std::string buf(sizeof(in) + sizeof(init), '\0');
  std::memcpy(buf.data(), &in, sizeof(in));
  std::memcpy(buf.data() + sizeof(in), &init, sizeof(init));
  return buf;
}

TEST(KernelChannelTest, ReadsTheKernelsInitFlagsWithFlags2) {
  uint64_t unique = 0;
  std::string req =
      InitRequest(FUSE_MAX_PAGES | FUSE_INIT_EXT,
                  static_cast<uint32_t>(kInitPassthrough >> 32), 42);
  std::optional<uint64_t> flags =
      KernelChannel::InitRequestFlags(req.data(), req.size(), unique);
  ASSERT_TRUE(flags.has_value());
  EXPECT_EQ(*flags, FUSE_MAX_PAGES | FUSE_INIT_EXT | kInitPassthrough);
  EXPECT_EQ(unique, 42u);

  // Without FUSE_INIT_EXT, flags2 is not the kernel's.
  req = InitRequest(FUSE_MAX_PAGES, 0xffffffff, 7);
  flags = KernelChannel::InitRequestFlags(req.data(), req.size(), unique);
  ASSERT_TRUE(flags.has_value());
  EXPECT_EQ(*flags, uint64_t{FUSE_MAX_PAGES});

  // Not INIT, or too short: nothing.
  req = InitRequest(0, 0, 9);
  EXPECT_FALSE(KernelChannel::InitRequestFlags(req.data(), 20, unique));
  fuse_in_header lookup{};
  lookup.opcode = FUSE_LOOKUP;
  std::memcpy(req.data(), &lookup, sizeof(lookup));
  EXPECT_FALSE(KernelChannel::InitRequestFlags(req.data(), req.size(), unique));
}

TEST(KernelChannelTest, InitReplyGetsMaxPagesForMaxRead) {
  fuse_init_out reply{};
  reply.max_pages = 256;
  KernelChannel::InitResult r = KernelChannel::AmendInitReply(
      reply, sizeof(reply), FUSE_MAX_PAGES, 4 << 20, false);
  EXPECT_TRUE(reply.flags & FUSE_MAX_PAGES);
  EXPECT_EQ(reply.max_pages, 1024);
  EXPECT_FALSE(r.direct_io_mmap);
  EXPECT_FALSE(r.passthrough);
  EXPECT_EQ(reply.flags2, 0u);

  // Never below libfuse's own, and not without the kernel's offer.
  fuse_init_out small{};
  small.max_pages = 256;
  KernelChannel::AmendInitReply(small, sizeof(small), FUSE_MAX_PAGES, 4096,
                                false);
  EXPECT_EQ(small.max_pages, 256);
  fuse_init_out none{};
  KernelChannel::AmendInitReply(none, sizeof(none), 0, 4 << 20, false);
  EXPECT_EQ(none.flags, 0u);
  EXPECT_EQ(none.max_pages, 0);
}

// libfuse 3.14 leaves FUSE_PARALLEL_DIROPS out of its reply: the kernel
// would then send one lookup of a directory at a time.
TEST(KernelChannelTest, InitReplyAsksForParallelDirops) {
  fuse_init_out reply{};
  KernelChannel::AmendInitReply(reply, sizeof(reply),
                                FUSE_PARALLEL_DIROPS | FUSE_MAX_PAGES, 1 << 20,
                                false);
  EXPECT_TRUE(reply.flags & FUSE_PARALLEL_DIROPS);
  fuse_init_out not_offered{};
  KernelChannel::AmendInitReply(not_offered, sizeof(not_offered),
                                FUSE_MAX_PAGES, 1 << 20, false);
  EXPECT_FALSE(not_offered.flags & FUSE_PARALLEL_DIROPS);
}

TEST(KernelChannelTest, InitReplyTakesUpDirectIoMmapAndPassthroughOffered) {
  const uint64_t offered =
      FUSE_INIT_EXT | kDirectIoAllowMmap | kInitPassthrough;
  fuse_init_out reply{};
  KernelChannel::InitResult r = KernelChannel::AmendInitReply(
      reply, sizeof(reply), offered, 1 << 20, true);
  EXPECT_TRUE(r.direct_io_mmap);
  EXPECT_TRUE(r.passthrough);
  EXPECT_TRUE(reply.flags & FUSE_INIT_EXT);
  EXPECT_EQ(uint64_t{reply.flags2} << 32,
            kDirectIoAllowMmap | kInitPassthrough);
  EXPECT_EQ(reply.unused[0], 1u);  // max_stack_depth.

  // Passthrough only when wanted, without a writeback cache, and where the
  // reply carries max_stack_depth.
  fuse_init_out unwanted{};
  r = KernelChannel::AmendInitReply(unwanted, sizeof(unwanted), offered,
                                    1 << 20, false);
  EXPECT_FALSE(r.passthrough);
  EXPECT_EQ(unwanted.unused[0], 0u);
  fuse_init_out writeback{};
  writeback.flags = FUSE_WRITEBACK_CACHE;
  r = KernelChannel::AmendInitReply(writeback, sizeof(writeback), offered,
                                    1 << 20, true);
  EXPECT_FALSE(r.passthrough);
  EXPECT_TRUE(r.direct_io_mmap);
  fuse_init_out short_reply{};
  r = KernelChannel::AmendInitReply(
      short_reply, offsetof(fuse_init_out, unused), offered, 1 << 20, true);
  EXPECT_FALSE(r.passthrough);

  // Flags2 features need FUSE_INIT_EXT from the kernel.
  fuse_init_out no_ext{};
  r = KernelChannel::AmendInitReply(no_ext, sizeof(no_ext),
                                    kDirectIoAllowMmap | kInitPassthrough,
                                    1 << 20, true);
  EXPECT_FALSE(r.direct_io_mmap);
  EXPECT_FALSE(r.passthrough);
  EXPECT_EQ(no_ext.flags, 0u);
  EXPECT_EQ(no_ext.flags2, 0u);
}

TEST(KernelChannelTest, OpenReplyCarriesTheBackingId) {
  fuse_open_out reply{};
  reply.fh = 77;
  reply.open_flags = FOPEN_KEEP_CACHE;
  KernelChannel::AmendOpenReply(reply, 5);
  EXPECT_EQ(reply.open_flags, FOPEN_KEEP_CACHE | kOpenPassthrough);
  EXPECT_EQ(reply.padding, 5u);
  EXPECT_EQ(reply.fh, 77u);
}

}  // namespace
}  // namespace larder
