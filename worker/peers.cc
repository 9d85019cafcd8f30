// Copyright 2026 The Larder Authors.
#include "worker/peers.h"

#include <algorithm>

#include "common/log.h"

namespace larder {

bool PeerSet::Contains(absl::string_view address) {
  const uint64_t heard = ring_version_ ? ring_version_->load() : 0;
  {
    absl::MutexLock lock(&mu_);
    const bool known = addresses_.contains(address);
    // At most one ask a kRetry, whatever the answers.
    if ((known && heard <= version_) || absl::Now() - fetched_at_ < kRetry)
      return known;
  }
  absl::MutexLock fetching(&fetch_mu_);
  {
    // Another caller may have asked while this one waited.
    absl::MutexLock lock(&mu_);
    if (absl::Now() - fetched_at_ < kRetry) return addresses_.contains(address);
  }
  absl::StatusOr<v1::Ring> ring = fetch_();
  absl::MutexLock lock(&mu_);
  fetched_at_ = absl::Now();
  if (!ring.ok()) {
    LARDER_LOG(WARNING, "worker.peers")
        .Field("status", ring.status())
        .Field("note", "the ring could not be fetched; keeping the last one");
    return addresses_.contains(address);
  }
  addresses_.clear();
  for (const v1::WorkerInfo& w : ring->workers())
    addresses_.insert(w.address());
  version_ = std::max(version_, ring->version());
  return addresses_.contains(address);
}

}  // namespace larder
