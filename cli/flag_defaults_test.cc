// Copyright 2026 The Larder Authors.
//
// One home per default: every flag with an options struct's field behind it
// starts from that field's default. A flag written with a literal default
// that drifts from its struct fails here.
#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "common/block_key.h"
#include "common/config.h"
#include "common/units.h"
#include "fuse/fuse_mount.h"
#include "gtest/gtest.h"
#include "larder/client.h"
#include "worker/worker.h"

ABSL_DECLARE_FLAG(absl::Duration, attr_timeout);
ABSL_DECLARE_FLAG(absl::Duration, entry_timeout);
ABSL_DECLARE_FLAG(absl::Duration, negative_timeout);
ABSL_DECLARE_FLAG(bool, keep_cache);
ABSL_DECLARE_FLAG(std::string, max_read);
ABSL_DECLARE_FLAG(std::string, direct_io_min_size);
ABSL_DECLARE_FLAG(bool, passthrough);
ABSL_DECLARE_FLAG(absl::Duration, passthrough_keep);
ABSL_DECLARE_FLAG(std::string, passthrough_min_size);
ABSL_DECLARE_FLAG(int, lease_ahead);
ABSL_DECLARE_FLAG(absl::Duration, lease_ahead_keep);
ABSL_DECLARE_FLAG(std::string, kernel_read_ahead);
ABSL_DECLARE_FLAG(int, fuse_threads);
ABSL_DECLARE_FLAG(int, fuse_channel_threads);
ABSL_DECLARE_FLAG(bool, allow_other);
ABSL_DECLARE_FLAG(bool, auto_unmount);
ABSL_DECLARE_FLAG(std::string, fuse_metrics_listen);
ABSL_DECLARE_FLAG(int, list_page_size);
ABSL_DECLARE_FLAG(int64_t, metadata_cache_entries);
ABSL_DECLARE_FLAG(std::string, metadata_cache_bytes);
ABSL_DECLARE_FLAG(absl::Duration, metadata_stale_window);
ABSL_DECLARE_FLAG(int, parallel_writes);
ABSL_DECLARE_FLAG(int, readahead_blocks);
ABSL_DECLARE_FLAG(std::string, mount_block_size);
ABSL_DECLARE_FLAG(absl::Duration, epoch_window);
ABSL_DECLARE_FLAG(absl::Duration, metadata_ttl);
ABSL_DECLARE_FLAG(std::string, listen);
ABSL_DECLARE_FLAG(std::string, metrics_listen);
ABSL_DECLARE_FLAG(std::string, ram_capacity);
ABSL_DECLARE_FLAG(std::string, nvme_reserve);
ABSL_DECLARE_FLAG(bool, nvme_sync);
ABSL_DECLARE_FLAG(bool, collapse_huge_pages);
ABSL_DECLARE_FLAG(std::string, fetch_subrange);
ABSL_DECLARE_FLAG(int, fetch_threads);
ABSL_DECLARE_FLAG(std::string, fetch_buffer);
ABSL_DECLARE_FLAG(std::string, block_size);

namespace larder {
namespace {

uint64_t Bytes(const std::string& flag) {
  absl::StatusOr<uint64_t> b = ParseBytes(flag);
  EXPECT_TRUE(b.ok()) << flag << ": " << b.status();
  return b.value_or(0);
}

TEST(FlagDefaultsTest, FuseFlagsStartFromFuseOptions) {
  const FuseOptions o;
  EXPECT_EQ(absl::GetFlag(FLAGS_attr_timeout), o.attr_timeout);
  EXPECT_EQ(absl::GetFlag(FLAGS_entry_timeout), o.entry_timeout);
  EXPECT_EQ(absl::GetFlag(FLAGS_negative_timeout), o.negative_timeout);
  EXPECT_EQ(absl::GetFlag(FLAGS_keep_cache), o.keep_cache);
  EXPECT_EQ(Bytes(absl::GetFlag(FLAGS_max_read)), o.max_read);
  EXPECT_EQ(Bytes(absl::GetFlag(FLAGS_direct_io_min_size)),
            o.direct_io_min_size);
  EXPECT_EQ(absl::GetFlag(FLAGS_passthrough), o.passthrough);
  EXPECT_EQ(absl::GetFlag(FLAGS_passthrough_keep), o.passthrough_keep);
  EXPECT_EQ(Bytes(absl::GetFlag(FLAGS_passthrough_min_size)),
            o.passthrough_min_size);
  EXPECT_EQ(static_cast<size_t>(absl::GetFlag(FLAGS_lease_ahead)),
            o.lease_ahead);
  EXPECT_EQ(absl::GetFlag(FLAGS_lease_ahead_keep), o.lease_ahead_keep);
  EXPECT_EQ(Bytes(absl::GetFlag(FLAGS_kernel_read_ahead)), o.read_ahead);
  EXPECT_EQ(absl::GetFlag(FLAGS_fuse_threads), o.max_threads);
  EXPECT_EQ(absl::GetFlag(FLAGS_fuse_channel_threads), o.channel_threads);
  EXPECT_EQ(absl::GetFlag(FLAGS_allow_other), o.allow_other);
  EXPECT_EQ(absl::GetFlag(FLAGS_auto_unmount), o.auto_unmount);
  EXPECT_EQ(absl::GetFlag(FLAGS_fuse_metrics_listen), o.ops_listen);
  EXPECT_EQ(absl::GetFlag(FLAGS_list_page_size), o.list_page_size);
  EXPECT_EQ(absl::GetFlag(FLAGS_readahead_blocks),
            FuseOptions::kReadaheadBlocks);
}

TEST(FlagDefaultsTest, MetadataCacheFlagsStartFromClientOptions) {
  const ClientOptions o;
  EXPECT_EQ(static_cast<size_t>(absl::GetFlag(FLAGS_metadata_cache_entries)),
            o.metadata_cache_entries);
  EXPECT_EQ(Bytes(absl::GetFlag(FLAGS_metadata_cache_bytes)),
            o.metadata_cache_bytes);
  EXPECT_EQ(absl::GetFlag(FLAGS_metadata_stale_window),
            o.metadata_stale_window);
  EXPECT_EQ(absl::GetFlag(FLAGS_parallel_writes), o.parallel_writes);
  // The worker keeps the node's cache with the same bounds.
  const WorkerOptions w;
  EXPECT_EQ(w.metadata_cache.max_entries, o.metadata_cache_entries);
  EXPECT_EQ(w.metadata_cache.max_bytes, o.metadata_cache_bytes);
}

TEST(FlagDefaultsTest, MountAndWorkerFlagsStartFromTheirDefaults) {
  // Left to the master, which knows whether the mount is writable.
  EXPECT_EQ(absl::GetFlag(FLAGS_mount_block_size), "");
  EXPECT_EQ(Bytes(absl::GetFlag(FLAGS_block_size)), kDefaultBlockSize);
  EXPECT_EQ(absl::GetFlag(FLAGS_metadata_ttl), kDefaultMetadataTtl);
  EXPECT_EQ(absl::GetFlag(FLAGS_epoch_window), kDefaultEpochWindow);
  const WorkerOptions w;
  EXPECT_EQ(absl::GetFlag(FLAGS_listen), w.listen);
  EXPECT_EQ(absl::GetFlag(FLAGS_metrics_listen), w.ops_listen);
  const BlockStoreOptions s;
  EXPECT_EQ(Bytes(absl::GetFlag(FLAGS_ram_capacity)), s.ram_capacity_bytes);
  EXPECT_EQ(absl::GetFlag(FLAGS_collapse_huge_pages), s.collapse_huge_pages);
  EXPECT_EQ(Bytes(absl::GetFlag(FLAGS_fetch_subrange)), s.fetch_subrange_bytes);
  EXPECT_EQ(absl::GetFlag(FLAGS_fetch_threads), s.fetch_threads);
  EXPECT_EQ(Bytes(absl::GetFlag(FLAGS_fetch_buffer)), s.fetch_buffer_bytes);
  const NvmeOptions n;
  EXPECT_EQ(Bytes(absl::GetFlag(FLAGS_nvme_reserve)), n.reserve_bytes);
  EXPECT_EQ(absl::GetFlag(FLAGS_nvme_sync), n.sync_writes);
}

}  // namespace
}  // namespace larder
