// Copyright 2026 The Larder Authors.
#include "master/invalidation_log.h"

#include <algorithm>

#include "absl/time/clock.h"

namespace larder {

InvalidationLog::InvalidationLog()
    : epoch_(static_cast<uint64_t>(absl::GetCurrentTimeNanos())) {}

uint64_t InvalidationLog::epoch() const {
  absl::MutexLock lock(&mu_);
  return epoch_;
}

void InvalidationLog::NewEpoch() {
  absl::MutexLock lock(&mu_);
  epoch_ =
      std::max(epoch_ + 1, static_cast<uint64_t>(absl::GetCurrentTimeNanos()));
  seq_ = 0;
  log_.clear();
}

uint64_t InvalidationLog::seq() const {
  absl::MutexLock lock(&mu_);
  return seq_;
}

void InvalidationLog::Add(std::string path) {
  absl::MutexLock lock(&mu_);
  log_.emplace_back(++seq_, std::move(path));
  while (log_.size() > kKept) log_.pop_front();
}

v1::GetInvalidationsResponse InvalidationLog::Since(uint64_t epoch,
                                                    uint64_t after_seq) const {
  v1::GetInvalidationsResponse r;
  absl::MutexLock lock(&mu_);
  r.set_epoch(epoch_);
  r.set_seq(seq_);
  // The log holds seqs (seq_ - size, seq_]; after_seq must be in or past it.
  if (epoch != epoch_ || after_seq > seq_ || after_seq + log_.size() < seq_) {
    r.set_reset(true);
    return r;
  }
  for (auto it = log_.rbegin(); it != log_.rend() && it->first > after_seq;
       ++it)
    r.add_paths(it->second);
  return r;
}

}  // namespace larder
