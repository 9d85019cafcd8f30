// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: inode_table.h
// -----------------------------------------------------------------------------
//
// The FUSE adaptor's inode table: cluster paths <-> inode numbers, with the
// kernel's lookup counts (as in libfuse's passthrough_hp). Every reply that
// hands the kernel an inode (lookup, readdirplus) adds one reference; FORGET
// drops them, and an inode whose count reaches zero is removed. Inode numbers
// are never reused, so the generation is always 0.
//
// It also remembers, per inode, the object version seen at the last open, so
// an open of an unchanged object can keep the kernel's page cache.
//
// Thread-safe.
#ifndef LARDER_FUSE_INODE_TABLE_H_
#define LARDER_FUSE_INODE_TABLE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace larder {

class InodeTable {
 public:
  static constexpr uint64_t kRoot = 1;  // FUSE_ROOT_ID: "/", never forgotten.

  InodeTable();

  // "/" + name, or parent + "/" + name.
  static std::string Child(absl::string_view parent, absl::string_view name);

  // The inode number users see for `path` (st_ino, d_ino): 1 for "/", else
  // a hash of the path, never 0 or 1. It is stable across lookups, forgets
  // and daemon restarts, and independent of the FUSE node id, so a plain
  // readdir (which hands out no node ids) reports the number stat will.
  static uint64_t StableIno(absl::string_view path);

  // The inode of `path`, created if needed, with one more lookup reference;
  // `version` is the object version whose attributes go to the kernel with
  // it.
  uint64_t Ref(const std::string& path, const std::string& version = "");
  // Drops `n` references; at zero the inode is removed.
  void Forget(uint64_t ino, uint64_t n);
  // The path of a live inode.
  std::optional<std::string> Path(uint64_t ino) const;

  // Records that the kernel was given the attributes of `version`.
  void RepliedVersion(uint64_t ino, const std::string& version);

  // What an open of `version` means for the kernel's caches of the inode.
  struct OpenCheck {
    bool same_as_last_open = false;  // Cached pages are still valid.
    bool attrs_stale = false;        // The kernel holds another version's size.
  };
  // Records `version` as the one opened now (and as the kernel's, once the
  // caller has invalidated its attributes).
  OpenCheck OpenedVersion(uint64_t ino, const std::string& version);

  size_t size() const;

 private:
  struct Node {
    std::string path;
    uint64_t lookups = 0;
    std::string opened_version;
    std::string replied_version;  // Of the attributes the kernel holds.
  };
  mutable absl::Mutex mu_;
  uint64_t next_ ABSL_GUARDED_BY(mu_) = kRoot + 1;
  absl::flat_hash_map<uint64_t, Node> nodes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, uint64_t> by_path_ ABSL_GUARDED_BY(mu_);
};

}  // namespace larder

#endif  // LARDER_FUSE_INODE_TABLE_H_
