// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: state_store.h
// -----------------------------------------------------------------------------
//
// Where the master keeps what it must not lose: the mount table, the last
// ring (its workers and version) and the load jobs in progress. Values are
// small text protos under names like "mounts.textproto" or
// "loads/load-42.textproto".
//
//  * LocalStateStore: files in the master's state directory (the embedded
//    default: one master, no etcd). Each write goes to a temporary file that
//    is fsynced and renamed over the old one.
//  * EtcdStateStore (master/leadership.h): keys in etcd, every write a
//    transaction guarded by this master's leadership.
//
// Thread-safe.
#ifndef LARDER_MASTER_STATE_STORE_H_
#define LARDER_MASTER_STATE_STORE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace larder {

class StateStore {
 public:
  virtual ~StateStore() = default;
  // The value stored under `name`. Errors: NotFound (none), Unavailable.
  virtual absl::StatusOr<std::string> Get(const std::string& name) = 0;
  // Every (name, value) under the folder `prefix` (ending in '/').
  virtual absl::StatusOr<std::vector<std::pair<std::string, std::string>>> List(
      const std::string& prefix) = 0;
  // Errors: Internal (the disk), Unavailable (etcd), FailedPrecondition (no
  // longer the leader). Nothing is changed on an error.
  virtual absl::Status Put(const std::string& name,
                           const std::string& value) = 0;
  virtual absl::Status Delete(const std::string& name) = 0;
  // "directory /var/lib/larder/master", "etcd at HOST:PORT under /larder/".
  virtual std::string Describe() const = 0;
};

class LocalStateStore final : public StateStore {
 public:
  // Creates `dir` if needed. Errors: PermissionDenied.
  static absl::StatusOr<std::unique_ptr<LocalStateStore>> Open(
      const std::string& dir);

  absl::StatusOr<std::string> Get(const std::string& name) override;
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> List(
      const std::string& prefix) override;
  absl::Status Put(const std::string& name, const std::string& value) override;
  absl::Status Delete(const std::string& name) override;
  std::string Describe() const override { return "directory " + dir_; }

 private:
  explicit LocalStateStore(std::string dir) : dir_(std::move(dir)) {}
  const std::string dir_;
};

}  // namespace larder

#endif  // LARDER_MASTER_STATE_STORE_H_
