// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: advise_model.h
// -----------------------------------------------------------------------------
//
// What a cache of a given size does for an epoch of a dataset, after the
// model of DS-Analyzer (Mohan et al., "Analyzing and Mitigating Data Stalls
// in DNN Training", VLDB 2021): a cached fraction `f` of the dataset is read
// at the cache's rate, the rest at the under-store's (through the cache), and
// the accelerators consume at their own rate, overlapped with the reads (the
// loader prefetches), so
//
//   I/O time   = f * D / cache_rate + (1 - f) * D / store_rate
//   epoch time = max(I/O time, D / gpu_rate)
//   GPU wait   = epoch time - D / gpu_rate
//
// The rates are those of the job's readers (measured with as many). `f` is
// min(1, cache / D): what a cache that keeps what it holds through an epoch
// (eviction=epoch, or a dataset that fits) hits every epoch after the first;
// LRU on a dataset larger than the cache hits less (docs/operations.md).
#ifndef LARDER_CLI_ADVISE_MODEL_H_
#define LARDER_CLI_ADVISE_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

namespace larder::cli {

struct AdviseRates {
  double dataset_bytes = 0;
  double cache_rate = 0;  // Bytes/s from the cache (> 0).
  double store_rate = 0;  // Bytes/s from the under-store (> 0).
  double gpu_rate = 0;    // Bytes/s the accelerators consume; 0: unbounded.
};

struct EpochPrediction {
  double cache_bytes = 0;
  double hit_fraction = 0;
  double io_seconds = 0;
  double compute_seconds = 0;  // D / gpu_rate; 0 when unbounded.
  double epoch_seconds = 0;
  double gpu_wait_seconds = 0;
};

EpochPrediction PredictEpoch(const AdviseRates& r, double cache_bytes);

// The smallest cache for which the accelerators wait at most `wait_share` of
// the epoch; -1 when even the whole dataset cached leaves them waiting more
// (the cache's rate is below theirs), 0 when the store alone keeps up.
// Without a gpu_rate: the cache for the whole dataset.
double CacheForWaitShare(const AdviseRates& r, double wait_share);

}  // namespace larder::cli

#endif  // LARDER_CLI_ADVISE_MODEL_H_
