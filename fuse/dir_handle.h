// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: dir_handle.h
// -----------------------------------------------------------------------------
//
// An open directory of the FUSE adaptor (opendir to releasedir): the whole
// listing from the node's metadata cache (shared with it, so an open
// directory costs no copy), or, for a directory too large for the cache, one
// page of the master's listing at a time. Entry i of the listing has the
// readdir offset i + 3 ("." is 1, ".." is 2).
//
// Callers hold `mu` while they seek and read entries: readdir requests for
// one open directory may come in parallel.
#ifndef LARDER_FUSE_DIR_HANDLE_H_
#define LARDER_FUSE_DIR_HANDLE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "larder/client.h"

namespace larder {

class DirHandle {
 public:
  explicit DirHandle(std::string p) : path(std::move(p)) {}

  const std::string path;  // Cluster path.
  // Set at opendir, before the handle is shared: the directory was made
  // here and the cluster does not have it (nothing to list), and the names
  // of the directories made here inside it (listed after the cluster's
  // entries; LocalDirs).
  bool local = false;
  std::vector<std::string> local_children;
  absl::Mutex mu;
  // The number of entries in the cluster's listing, once its end was seen.
  std::optional<uint64_t> listed ABSL_GUARDED_BY(mu);

  // Makes sure the entry at listing index `index` is loaded, listing pages
  // of `page_size` entries through `client` when the directory is too large
  // for its metadata cache; false with `status` OK means the listing ends
  // before `index`.
  absl::StatusOr<bool> Seek(Client& client, int page_size, uint64_t index)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The entry at `index`, after Seek returned true for it.
  const FileInfo& Entry(uint64_t index) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return all_ ? (*all_)[index] : page_[index - page_start_];
  }

 private:
  bool loaded_ ABSL_GUARDED_BY(mu) = false;
  // The whole listing, shared with the node's metadata cache; empty for a
  // directory too large to cache, which is paged through the master below.
  std::shared_ptr<const std::vector<FileInfo>> all_ ABSL_GUARDED_BY(mu);
  bool paged_ ABSL_GUARDED_BY(mu) = false;
  uint64_t page_start_ ABSL_GUARDED_BY(mu) = 0;  // Listing index of page_[0].
  std::vector<FileInfo> page_ ABSL_GUARDED_BY(mu);
  std::string next_token_ ABSL_GUARDED_BY(mu);
};

}  // namespace larder

#endif  // LARDER_FUSE_DIR_HANDLE_H_
