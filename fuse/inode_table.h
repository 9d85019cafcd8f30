// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: inode_table.h
// -----------------------------------------------------------------------------
//
// The FUSE adaptor's inode table: the one place that keeps per-inode state,
// as in libfuse's passthrough_hp. Cluster paths <-> FUSE node ids, with the
// kernel's lookup counts: every reply that hands the kernel an inode (lookup,
// readdirplus) adds one reference; FORGET drops them, and an inode whose
// count reaches zero leaves the table. Node ids are never reused, so the
// generation is always 0.
//
// Each inode (Inode) keeps what lookups learned and what its opens share:
// the object version of the attributes the kernel holds and of the last
// open, the passthrough backing file and its open count, and the opens that
// read through the daemon. Open files hold their Inode, so its state
// outlives a FORGET that races a release.
//
// Thread-safe. The table's lock guards the maps and lookup counts; each
// Inode's lock guards its own state (so a slow open of one file never holds
// up lookups of others).
#ifndef LARDER_FUSE_INODE_TABLE_H_
#define LARDER_FUSE_INODE_TABLE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "larder/client.h"

namespace larder {

class BackingFiles;  // passthrough.h

class Inode : public std::enable_shared_from_this<Inode> {
 public:
  explicit Inode(std::string p) : path(std::move(p)) {}
  // Closes a backing file kept after its last open (DetachOpen).
  ~Inode();

  const std::string path;  // Cluster path.

  // Passthrough (see passthrough.h; defined in passthrough.cc). Records an
  // open of the object at `version`; returns the backing id the open reply
  // carries, or 0: the open reads through the daemon. While the inode has a
  // backing file every open shares it, if it is of `version` (else
  // FailedPrecondition: the kernel would serve the other version's bytes).
  // Otherwise, with `may_set_up` (a direct_io open without O_DIRECT: memfds
  // do not take it), passthrough on in `backing` and no open reading through
  // the daemon, `local_object` (the local worker's memfd of the whole
  // object) is registered as the backing file; its hold keeps the worker's
  // lease on the object's blocks until the last passthrough open goes.
  absl::StatusOr<int> AttachOpen(
      const std::string& version, bool may_set_up, BackingFiles& backing,
      absl::FunctionRef<absl::StatusOr<LocalSlice>()> local_object)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Undoes a successful AttachOpen (`passthrough`: it returned an id) at
  // release, or when the kernel never got the open reply. After the last
  // passthrough open the backing file is kept (with the worker's lease on
  // the object) for the next open until BackingFiles::keep() has passed, so
  // an epoch that opens the file again pays no worker round trip.
  void DetachOpen(bool passthrough, BackingFiles& backing)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Closes the backing file if it is kept with no open and its time is up
  // (or `now` is InfiniteFuture). Called by BackingFiles's sweep.
  void DropKept(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether a backing file is set up (open, or kept after its last open).
  // Without the lock: callers may hold another inode's.
  bool has_backing() const { return has_backing_.load(); }

 private:
  friend class InodeTable;

  absl::Mutex mu_;
  // The object version whose attributes (size) the kernel holds, and the
  // one opened last (cached pages are valid while it stays the same).
  std::string replied_version_ ABSL_GUARDED_BY(mu_);
  std::string opened_version_ ABSL_GUARDED_BY(mu_);
  // Passthrough: the kernel's id for the backing file (0: none), the object
  // version lent, the opens using it, and the lent memfd (its hold keeps the
  // worker's lease on the object's blocks).
  int backing_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<bool> has_backing_{false};  // backing_id_ > 0.
  std::string backing_version_ ABSL_GUARDED_BY(mu_);
  int backing_opens_ ABSL_GUARDED_BY(mu_) = 0;
  LocalSlice backing_object_ ABSL_GUARDED_BY(mu_);
  // With no open left: kept until then (see DetachOpen), by `kept_by_`.
  absl::Time kept_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  BackingFiles* kept_by_ ABSL_GUARDED_BY(mu_) = nullptr;
  // Closes the backing file and gives the worker's lease back.
  void CloseBacking(BackingFiles& backing) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Opens reading through the daemon (no backing file may be set up then).
  int daemon_opens_ ABSL_GUARDED_BY(mu_) = 0;
};

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

  // The node id of `path`, created if needed, with one more lookup
  // reference; `version` is the object version whose attributes go to the
  // kernel with it (see RepliedVersion).
  uint64_t Ref(const std::string& path, const std::string& version = "");
  // Drops `n` references; at zero the inode leaves the table.
  void Forget(uint64_t ino, uint64_t n);
  // A live inode; null once forgotten.
  std::shared_ptr<Inode> Get(uint64_t ino) const;
  // The path of a live inode.
  std::optional<std::string> Path(uint64_t ino) const;

  // Records that the kernel was given the attributes of `version`.
  void RepliedVersion(uint64_t ino, const std::string& version);
  // The version whose attributes the kernel was given last ("" if none, or
  // the inode is gone).
  std::string KernelVersion(uint64_t ino) const;
  // Forgets the kernel's version if it is still `version` (a getattr may
  // have given it a newer one meanwhile); true if it did.
  bool ForgetKernelVersion(uint64_t ino, const std::string& version);

  // What an open of `version` means for the kernel's caches of the inode.
  struct OpenCheck {
    bool same_as_last_open = false;  // Cached pages are still valid.
    bool attrs_stale = false;        // The kernel holds another version's size.
  };
  // Records `version` as the one opened now (and as the kernel's, once the
  // caller has invalidated its attributes).
  OpenCheck OpenedVersion(uint64_t ino, const std::string& version);

  // The live inodes at or below `path` ("/": every one), with their
  // paths. For invalidations (a walk of the table: they are rare).
  std::vector<std::pair<uint64_t, std::string>> Under(
      const std::string& path) const;
  // The node id of a live path; 0 if the kernel holds none.
  uint64_t Find(const std::string& path) const;

  size_t size() const;

 private:
  struct Node {
    std::shared_ptr<Inode> inode;
    uint64_t lookups = 0;
  };
  static void Replied(Inode& inode, const std::string& version);

  mutable absl::Mutex mu_;
  uint64_t next_ ABSL_GUARDED_BY(mu_) = kRoot + 1;
  absl::flat_hash_map<uint64_t, Node> nodes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, uint64_t> by_path_ ABSL_GUARDED_BY(mu_);
};

}  // namespace larder

#endif  // LARDER_FUSE_INODE_TABLE_H_
