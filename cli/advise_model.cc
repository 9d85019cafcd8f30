// Copyright 2026 The Larder Authors.
#include "cli/advise_model.h"

#include <algorithm>
#include <cmath>

namespace larder::cli {

EpochPrediction PredictEpoch(const AdviseRates& r, double cache_bytes) {
  EpochPrediction p;
  const double d = std::max(0.0, r.dataset_bytes);
  p.cache_bytes = std::max(0.0, cache_bytes);
  p.hit_fraction = d > 0 ? std::min(1.0, p.cache_bytes / d) : 1.0;
  p.io_seconds = p.hit_fraction * d / r.cache_rate +
                 (1 - p.hit_fraction) * d / r.store_rate;
  p.compute_seconds = r.gpu_rate > 0 ? d / r.gpu_rate : 0;
  p.epoch_seconds = std::max(p.io_seconds, p.compute_seconds);
  p.gpu_wait_seconds = r.gpu_rate > 0 ? p.epoch_seconds - p.compute_seconds : 0;
  return p;
}

double CacheForWaitShare(const AdviseRates& r, double wait_share) {
  const double d = r.dataset_bytes;
  if (r.gpu_rate <= 0) return d;
  // epoch <= compute / (1 - share): I/O time within that.
  const double limit = d / r.gpu_rate / (1 - std::clamp(wait_share, 0.0, 0.99));
  const double from_store = d / r.store_rate;
  if (from_store <= limit) return 0;
  const double from_cache = d / r.cache_rate;
  if (from_cache > limit) return -1;
  // f * from_cache + (1 - f) * from_store = limit.
  const double f = (from_store - limit) / (from_store - from_cache);
  return std::ceil(std::clamp(f, 0.0, 1.0) * d);
}

}  // namespace larder::cli
