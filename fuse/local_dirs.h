// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: local_dirs.h
// -----------------------------------------------------------------------------
//
// Directories made with mkdir(2) in a writable mount that hold no file yet.
// Object stores have no directories of their own (a directory is the common
// prefix of the objects below it), so, as Mountpoint for S3 does, a new
// directory lives in this FUSE process until a file written below it is
// committed; from then on the store lists it, and it leaves this table.
// Until then only this mount sees it (another node does not), and it is
// gone when the daemon stops.
//
// Lookups of names the cluster does not have (and listings) ask here; the
// common case, no directory made, costs one atomic load.
//
// Thread-safe.
#ifndef LARDER_FUSE_LOCAL_DIRS_H_
#define LARDER_FUSE_LOCAL_DIRS_H_

#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "larder/client.h"

namespace larder {

class LocalDirs {
 public:
  // Records directory `info.path` (a cluster path). False if it is there.
  bool Add(FileInfo info);
  // The directory at `path`, if it is one of these.
  std::optional<FileInfo> Get(absl::string_view path) const;
  // The names of these directories directly inside `parent`, sorted.
  std::vector<std::string> Children(absl::string_view parent) const;
  // Forgets `path` unless a directory of these is inside it (checked and
  // removed at once). NotFound: not one of these; FailedPrecondition: not
  // empty.
  absl::Status RemoveIfEmpty(absl::string_view path);
  // A file at `path` was committed, or `path` was found in the cluster:
  // `path` and every directory above it now exist there.
  void Exists(absl::string_view path);

  size_t size() const { return count_.load(std::memory_order_acquire); }

 private:
  void Recount() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    count_.store(dirs_.size(), std::memory_order_release);
  }

  mutable absl::Mutex mu_;
  // Sorted: a directory's descendants follow it ("/a/b" < "/a/b/c").
  absl::btree_map<std::string, FileInfo> dirs_ ABSL_GUARDED_BY(mu_);
  std::atomic<size_t> count_{0};
};

}  // namespace larder

#endif  // LARDER_FUSE_LOCAL_DIRS_H_
