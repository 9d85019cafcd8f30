// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: memory_store.h
// -----------------------------------------------------------------------------
//
// An in-memory UnderStore for unit tests (linked only by tests): objects in a
// map, every ReadRange counted, with knobs to slow reads down, make them fail,
// or block them until released. Thread-safe.
#ifndef LARDER_WORKER_TESTING_MEMORY_STORE_H_
#define LARDER_WORKER_TESTING_MEMORY_STORE_H_

#include <atomic>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "understore/under_store.h"

namespace larder::testing {

class MemoryStore : public UnderStore {
 public:
  // Adds or replaces an object; each Put gives a new version.
  void Put(const std::string& path, std::string data) {
    absl::MutexLock lock(&mu_);
    objects_[path] = {std::move(data), absl::StrCat("v", ++next_version_)};
  }
  std::string VersionOf(const std::string& path) {
    absl::MutexLock lock(&mu_);
    return objects_.at(path).version;
  }

  // Every ReadRange fails with `status` while it is not OK.
  void FailReads(absl::Status status) {
    absl::MutexLock lock(&mu_);
    fail_ = std::move(status);
  }
  // ReadRange blocks while the gate is closed.
  void CloseGate() {
    absl::MutexLock lock(&mu_);
    gate_open_ = false;
  }
  void OpenGate() {
    absl::MutexLock lock(&mu_);
    gate_open_ = true;
  }
  int reads() const { return reads_.load(); }
  // The paths of the ReadRange calls that passed the gate, in order.
  std::vector<std::string> read_order() {
    absl::MutexLock lock(&mu_);
    return read_order_;
  }
  // ReadRange calls that are blocked at the gate right now.
  int waiting() const { return waiting_.load(); }

  absl::string_view scheme() const override { return "memory"; }
  std::string DebugString() const override { return "memory://"; }

  absl::StatusOr<ObjectInfo> Stat(absl::string_view path) override {
    absl::MutexLock lock(&mu_);
    auto it = objects_.find(std::string(path));
    if (it == objects_.end())
      return absl::NotFoundError(absl::StrCat("no ", path));
    return ObjectInfo{std::string(path), false, it->second.data.size(),
                      it->second.version};
  }
  absl::StatusOr<ListPage> List(absl::string_view,
                                const ListOptions&) override {
    return absl::UnimplementedError("not needed");
  }
  using UnderStore::ReadRange;
  absl::StatusOr<size_t> ReadRange(absl::string_view path, uint64_t offset,
                                   absl::Span<char> buffer,
                                   absl::string_view expected_version,
                                   uint64_t* object_size) override {
    ++reads_;
    ++waiting_;
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&gate_open_));
    --waiting_;
    if (!fail_.ok()) return fail_;
    auto it = objects_.find(std::string(path));
    if (it == objects_.end())
      return absl::NotFoundError(absl::StrCat("no ", path));
    if (!expected_version.empty() && it->second.version != expected_version) {
      return absl::FailedPreconditionError("changed");
    }
    read_order_.push_back(std::string(path));
    const std::string& d = it->second.data;
    if (offset > d.size()) return absl::OutOfRangeError("beyond");
    if (object_size != nullptr) *object_size = d.size();
    size_t n = std::min<size_t>(buffer.size(), d.size() - offset);
    std::memcpy(buffer.data(), d.data() + offset, n);
    return n;
  }

 private:
  struct Object {
    std::string data;
    std::string version;
  };
  absl::Mutex mu_;
  std::map<std::string, Object> objects_ ABSL_GUARDED_BY(mu_);
  int next_version_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status fail_ ABSL_GUARDED_BY(mu_);
  bool gate_open_ ABSL_GUARDED_BY(mu_) = true;
  std::vector<std::string> read_order_ ABSL_GUARDED_BY(mu_);
  std::atomic<int> reads_{0};
  std::atomic<int> waiting_{0};
};

}  // namespace larder::testing

#endif  // LARDER_WORKER_TESTING_MEMORY_STORE_H_
