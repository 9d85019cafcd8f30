// Copyright 2026 The Larder Authors.
#include "common/outage_pause.h"

#include <algorithm>

namespace larder {

std::optional<OutagePause::Outage> OutagePause::Check(const std::string& key,
                                                      absl::Time now) {
  absl::MutexLock lock(&mu_);
  auto it = down_.find(key);
  if (it == down_.end()) return std::nullopt;
  State& s = it->second;
  if (now < s.until) return Outage{s.why, s.until - now};
  if (s.trying && now - s.trying_since < options_.try_timeout)
    return Outage{s.why, absl::ZeroDuration()};
  s.trying = true;
  s.trying_since = now;
  return std::nullopt;
}

void OutagePause::Failed(const std::string& key, absl::Time started,
                         absl::Time now, const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  auto [it, fresh] = down_.try_emplace(key);
  State& s = it->second;
  if (fresh) {
    s.pause = options_.first;
  } else if (s.trying) {
    s.pause = std::min(2 * s.pause, options_.max);
  } else if (started < s.until) {
    return;  // Concurrent with the try that set this pause.
  } else {
    s.pause = std::min(2 * s.pause, options_.max);
  }
  s.trying = false;
  s.until = now + s.pause;
  s.why = why;
}

void OutagePause::Succeeded(const std::string& key) {
  absl::MutexLock lock(&mu_);
  down_.erase(key);
}

void OutagePause::Abandoned(const std::string& key, absl::Time started) {
  absl::MutexLock lock(&mu_);
  if (auto it = down_.find(key); it != down_.end() && it->second.trying &&
                                 it->second.trying_since == started) {
    it->second.trying = false;
  }
}

size_t OutagePause::outages() const {
  absl::MutexLock lock(&mu_);
  return down_.size();
}

}  // namespace larder
