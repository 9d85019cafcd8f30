// Copyright 2026 The Larder Authors.
#include "common/ring.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/hash.h"

namespace larder {

HashRing::HashRing(std::vector<RingMember> members, int vnodes_per_member)
    : members_(std::move(members)) {
  if (members_.empty()) return;
  double total = 0;
  for (const RingMember& m : members_) total += std::max(0.0, m.weight);
  const double mean = total > 0 ? total / members_.size() : 1.0;
  for (size_t i = 0; i < members_.size(); ++i) {
    const double w = total > 0 ? std::max(0.0, members_[i].weight) / mean : 1.0;
    const int v =
        std::max(1, static_cast<int>(std::lround(w * vnodes_per_member)));
    vnodes_.push_back(v);
    for (int k = 0; k < v; ++k) {
      points_.push_back(
          {Hash64(absl::StrCat(members_[i].id, "#", k)), static_cast<int>(i)});
    }
  }
  std::sort(points_.begin(), points_.end(), [](const Point& a, const Point& b) {
    return a.position != b.position ? a.position < b.position
                                    : a.member < b.member;
  });
}

int HashRing::Owner(uint64_t position) const {
  if (points_.empty()) return -1;
  auto it = std::lower_bound(
      points_.begin(), points_.end(), position,
      [](const Point& p, uint64_t pos) { return p.position < pos; });
  if (it == points_.end()) it = points_.begin();
  return it->member;
}

std::vector<int> HashRing::Successors(uint64_t position, int n) const {
  std::vector<int> out;
  if (points_.empty()) return out;
  n = std::min<int>(n, static_cast<int>(members_.size()));
  auto it = std::lower_bound(
      points_.begin(), points_.end(), position,
      [](const Point& p, uint64_t pos) { return p.position < pos; });
  size_t idx =
      it == points_.end() ? 0 : static_cast<size_t>(it - points_.begin());
  for (size_t steps = 0;
       steps < points_.size() && static_cast<int>(out.size()) < n; ++steps) {
    const int m = points_[(idx + steps) % points_.size()].member;
    if (std::find(out.begin(), out.end(), m) == out.end()) out.push_back(m);
  }
  return out;
}

std::vector<double> HashRing::Shares() const {
  std::vector<double> shares(members_.size(), 0.0);
  if (points_.empty()) return shares;
  // The point at position p owns (previous position, p].
  for (size_t i = 0; i < points_.size(); ++i) {
    const uint64_t prev =
        points_[(i + points_.size() - 1) % points_.size()].position;
    const uint64_t span =
        points_[i].position - prev;  // Wraps correctly for i == 0.
    shares[points_[i].member] +=
        static_cast<double>(span) / 18446744073709551616.0;
  }
  return shares;
}

}  // namespace larder
