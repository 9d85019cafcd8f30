// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: mount_set.h
// -----------------------------------------------------------------------------
//
// The cluster's mount table as a value: the master's table (v1::MountTable),
// sorted by path, with its version, and the one way a cluster path is
// resolved to the mount that holds it. Mount paths do not nest ("/a" and
// "/a/b" are never both mounted), so a path's mount is the first of the path
// itself and its parents that is mounted. The master's registry, the
// worker's mounts and the client resolve paths with it.
//
// Immutable once built; copy or share it.
#ifndef LARDER_COMMON_MOUNT_SET_H_
#define LARDER_COMMON_MOUNT_SET_H_

#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "proto/master.pb.h"

namespace larder {

class MountSet {
 public:
  MountSet() = default;
  explicit MountSet(v1::MountTable table);

  uint64_t version() const { return table_.version(); }
  // The entries, sorted by path.
  const v1::MountTable& table() const { return table_; }
  bool empty() const { return table_.mounts().empty(); }

  // The mount at exactly `mount_path`, or null.
  const v1::MountEntry* Find(absl::string_view mount_path) const;

  struct Resolved {
    const v1::MountEntry* entry;
    // The path within the mount: a suffix of the path resolved, "" for the
    // mount itself.
    absl::string_view relative;
  };
  // The mount holding normalized cluster path `path` ("/a/b/c": the mount
  // "/a/b/c", "/a/b" or "/a"); none when no mount holds it. The answer
  // points into this set and into `path`.
  std::optional<Resolved> Resolve(absl::string_view path) const;

  // The first of `path` and its parents ("/a/b/c", "/a/b", "/a") for which
  // `is_mount` is true; empty when none is. For tables kept in other shapes
  // (the worker's opened mounts).
  static absl::string_view Covering(
      absl::string_view path,
      absl::FunctionRef<bool(absl::string_view)> is_mount);

 private:
  v1::MountTable table_;
  absl::flat_hash_map<std::string, int> index_;  // Path -> entry.
};

}  // namespace larder

#endif  // LARDER_COMMON_MOUNT_SET_H_
