// Copyright 2026 The Larder Authors.
//
// The client options of the commands that read through the cache, from
// their flags (ClientOptionsFromFlags): one place, so the FUSE daemon and the
// `larder` read commands cannot drift apart.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "cli/commands.h"
#include "common/flags.h"
#include "common/status_macros.h"
#include "common/units.h"
#include "larder/client.h"

ABSL_DECLARE_FLAG(std::string, node);

// A flag with a struct's field behind it takes its default from that field:
// one home per default (flag_defaults_test checks).
ABSL_FLAG(int64_t, metadata_cache_entries,
          static_cast<int64_t>(larder::ClientOptions().metadata_cache_entries),
          "fuse, client, worker: most entries (stats, negative entries, "
          "directory listings) in the process's metadata cache (the worker's: "
          "the node's, shared by its clients).");
ABSL_FLAG(std::string, metadata_cache_bytes,
          larder::BytesFlagText(larder::ClientOptions().metadata_cache_bytes),
          "fuse, client, worker: most bytes held by the metadata cache; a "
          "directory larger than a quarter of it is paged, never cached.");
ABSL_FLAG(absl::Duration, metadata_stale_window,
          larder::ClientOptions().metadata_stale_window,
          "fuse, client: how long past its TTL cached metadata is still "
          "served while the master or the under-store cannot be reached "
          "(0 = never).");
ABSL_FLAG(int, parallel_writes, larder::ClientOptions().parallel_writes,
          "cp into the cluster, fuse: parts of one written file in flight to "
          "the workers at once (each part held in memory until its worker "
          "answers).");

namespace larder::cli {

absl::StatusOr<ClientOptions> ClientOptionsFromFlags() {
  ClientOptions o;
  o.master = MasterOrDefault();
  o.node = absl::GetFlag(FLAGS_node);
  o.security = SecurityOptionsFromFlags();
  o.metadata_cache_entries = static_cast<size_t>(
      std::max<int64_t>(1, absl::GetFlag(FLAGS_metadata_cache_entries)));
  LARDER_ASSIGN_OR_RETURN(
      const uint64_t cache_bytes,
      ParseBytes(absl::GetFlag(FLAGS_metadata_cache_bytes)));
  o.metadata_cache_bytes = static_cast<size_t>(cache_bytes);
  o.metadata_stale_window = absl::GetFlag(FLAGS_metadata_stale_window);
  o.parallel_writes = std::max(1, absl::GetFlag(FLAGS_parallel_writes));
  // The direct under-store read, when every worker fails, talks to S3, Azure
  // and WebHDFS as the daemons do.
  o.fallback_http = HttpOptionsFromFlags();
  return o;
}

}  // namespace larder::cli
