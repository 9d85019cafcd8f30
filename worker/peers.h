// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: peers.h
// -----------------------------------------------------------------------------
//
// The workers of the ring, as the master last listed them. A writer names
// the workers that are to keep the blocks of a part it sends to another
// (WritePartHeader.forward, PublishWriteRequest.forward); a worker sends
// blocks only to addresses in this set, never to one a request made up:
// what it sends goes with its own credentials.
//
//   PeerSet peers([&] { return link->GetRing(); }, &ring_version);
//   if (peers.Contains("10.0.0.7:7070")) { ... send ... }
//
// Thread-safe.
#ifndef LARDER_WORKER_PEERS_H_
#define LARDER_WORKER_PEERS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/master.pb.h"

namespace larder {

class PeerSet {
 public:
  // `fetch` asks the master for the ring (called on the caller's thread,
  // one call at a time); `ring_version` (may be null) is the latest ring
  // version the worker heard of, and must outlive the set.
  using Fetch = std::function<absl::StatusOr<v1::Ring>()>;
  PeerSet(Fetch fetch, const std::atomic<uint64_t>* ring_version)
      : fetch_(std::move(fetch)), ring_version_(ring_version) {}

  // Whether `address` is a worker of the ring. Asks the master again first
  // when the ring's version moved past the one held or the address is not
  // known (a worker that joined a moment ago), at most once a kRetry; a
  // master that cannot be reached leaves the set as it was.
  bool Contains(absl::string_view address);

  static constexpr absl::Duration kRetry = absl::Seconds(1);

 private:
  const Fetch fetch_;
  const std::atomic<uint64_t>* const ring_version_;
  absl::Mutex fetch_mu_;  // One fetch at a time; taken before mu_.
  absl::Mutex mu_;
  absl::flat_hash_set<std::string> addresses_ ABSL_GUARDED_BY(mu_);
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time fetched_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace larder

#endif  // LARDER_WORKER_PEERS_H_
