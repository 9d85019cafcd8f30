// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: invalidation_log.h
// -----------------------------------------------------------------------------
//
// What clients must drop from their metadata caches: every `larder
// invalidate PATH` and every mount change of this master's run, numbered.
// The master publishes the latest number with the ring (which clients poll
// every few seconds); a client that is behind asks for the paths after the
// number it saw, so an invalidation reaches every node within one poll.
//
// The epoch names the run (the start time in ns): after a master restart
// the numbering starts again, and a client of the old epoch drops its whole
// cache, as does one further behind than the kept tail of the log.
//
//   InvalidationLog log;
//   log.Add("/datasets/imagenet/train");
//   v1::GetInvalidationsResponse r = log.Since(client_epoch, client_seq);
//
// Thread-safe.
#ifndef LARDER_MASTER_INVALIDATION_LOG_H_
#define LARDER_MASTER_INVALIDATION_LOG_H_

#include <cstdint>
#include <deque>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/master.pb.h"

namespace larder {

class InvalidationLog {
 public:
  // Invalidations kept for clients that are behind.
  static constexpr size_t kKept = 10000;

  InvalidationLog();

  uint64_t epoch() const;
  // Starts a new epoch with an empty log: a master that becomes the leader
  // again may have missed invalidations made by another leader meanwhile, so
  // every client drops its whole cache once.
  void NewEpoch();
  uint64_t seq() const;
  // Records that cached metadata at or below `path` is stale.
  void Add(std::string path);
  // The paths added after `after_seq` of `epoch`, or reset when that is not
  // this epoch or no longer kept.
  v1::GetInvalidationsResponse Since(uint64_t epoch, uint64_t after_seq) const;

 private:
  mutable absl::Mutex mu_;
  uint64_t epoch_ ABSL_GUARDED_BY(mu_);
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<std::pair<uint64_t, std::string>> log_ ABSL_GUARDED_BY(mu_);
};

}  // namespace larder

#endif  // LARDER_MASTER_INVALIDATION_LOG_H_
