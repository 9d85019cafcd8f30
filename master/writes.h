// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: writes.h
// -----------------------------------------------------------------------------
//
// The uploads in progress (Master.BeginWrite / CommitWrite / AbortWrite). The
// master starts each upload in the under-store, remembers it, and commits or
// aborts it; the parts themselves go from the writer to the workers and
// from them to the store, never through the master.
//
//   Begin   checks that the caller may write the mount (MayWriteMount), that
//           nothing is at the path unless overwrite is asked for, starts the
//           store's upload and answers a WriteHandle.
//   Commit  checks the handle is one it gave and still holds, completes the
//           upload (the object appears whole, atomically) and invalidates
//           the path everywhere (the invalidation log).
//   Abort   drops the upload; nothing appears.
//   Committed  what a commit made (handle, version, size, parts), for the
//           workers to check before they serve the blocks a writer kept
//           there: remembered for kCommittedMemory (the newest
//           kMaxCommitted), by this master only (a new leader knows none).
//   AbortExpired  (the master's reaper) aborts uploads older than max_age:
//           a writer that died leaves no visible object and, after max_age,
//           no upload in the store.
//
// Two writers of one path each have an upload; the last Commit wins, and
// each reader sees one whole version. Every upload in progress is recorded
// in the master's state store (a StoredWrite under "writes/"), so that a
// master that restarts, or the next leader after a failover, still commits
// it and aborts it once it is too old (Reload).
//
// Thread-safe.
#ifndef LARDER_MASTER_WRITES_H_
#define LARDER_MASTER_WRITES_H_

#include <cstdint>
#include <deque>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/security.h"
#include "master/invalidation_log.h"
#include "master/metadata.h"
#include "master/mount_registry.h"
#include "master/state_store.h"
#include "proto/master.pb.h"

namespace larder {

class Writes {
 public:
  // The parts outlive this. `max_age`: uploads older than it are aborted.
  Writes(const MountRegistry* mounts, UnderStoreMetadata* metadata,
         InvalidationLog* invalidations, StateStore* store,
         absl::Duration max_age)
      : mounts_(mounts),
        metadata_(metadata),
        invalidations_(invalidations),
        store_(store),
        max_age_(max_age) {}

  // Replaces the uploads in progress with those the state store records
  // (when this master becomes the leader). Unreadable records are logged
  // and skipped. Errors: the store's.
  absl::Status Reload();

  // Errors: InvalidArgument (a bad path, a path that is a mount's root or
  // names a temporary upload), NotFound (no mount), PermissionDenied
  // (MayWriteMount), AlreadyExists (an object is there and overwrite is
  // false), FailedPrecondition (a directory is there), the under-store's,
  // and the state store's (the upload could not be recorded: it is
  // aborted).
  absl::StatusOr<v1::WriteHandle> Begin(const Caller& caller,
                                        const v1::BeginWriteRequest& request);
  // Errors: FailedPrecondition (not an upload in progress: committed,
  // aborted or expired), InvalidArgument (the parts
  // do not make the object: the upload is kept, the writer may fix them),
  // PermissionDenied, AlreadyExists (an object appeared meanwhile and
  // overwrite is false: the upload is aborted), and the store's.
  absl::StatusOr<v1::CommitWriteResponse> Commit(
      const Caller& caller, const v1::CommitWriteRequest& request);
  // OK when the upload is already gone.
  absl::Status Abort(const Caller& caller, const v1::WriteHandle& handle);
  // Aborts every upload started before now - max_age; returns how many.
  size_t AbortExpired(absl::Time now);

  static constexpr absl::Duration kCommittedMemory = absl::Minutes(10);
  static constexpr size_t kMaxCommitted = 10000;
  // The write `write_id` this master committed in the last
  // kCommittedMemory. Errors: NotFound (never, not by this master, or too
  // long ago).
  absl::StatusOr<v1::CommittedWrite> Committed(
      const std::string& write_id) const;

  size_t in_progress() const;

 private:
  struct Upload {
    v1::WriteHandle handle;
    absl::Time started;
  };
  // The upload `handle` names, checked field by field against the one
  // Begin gave (a writer cannot commit another path with its id).
  absl::StatusOr<Upload> Find(const v1::WriteHandle& handle) const;
  // Drops the upload from memory and from the state store.
  void Forget(const std::string& write_id);

  const MountRegistry* const mounts_;
  UnderStoreMetadata* const metadata_;
  InvalidationLog* const invalidations_;
  StateStore* const store_;
  const absl::Duration max_age_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Upload> uploads_ ABSL_GUARDED_BY(mu_);
  struct Done {
    v1::CommittedWrite write;
    absl::Time at;
  };
  void Remember(v1::CommittedWrite write) ABSL_LOCKS_EXCLUDED(mu_);
  absl::flat_hash_map<std::string, Done> committed_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> committed_order_ ABSL_GUARDED_BY(mu_);  // Oldest 1st.
};

}  // namespace larder

#endif  // LARDER_MASTER_WRITES_H_
