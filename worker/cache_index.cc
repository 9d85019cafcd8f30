// Copyright 2026 The Larder Authors.
#include "worker/cache_index.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace larder {
namespace {

std::string KeyPath(const BlockId& id) {
  return absl::StrCat(id.mount, "/", id.path);
}

const CacheRules::Rule* Match(const std::vector<CacheRules::Rule>& rules,
                              const BlockId& id, bool want_pin) {
  const std::string p = KeyPath(id);
  const CacheRules::Rule* best = nullptr;
  for (const auto& r : rules) {
    if (want_pin ? !r.pin : r.ttl == absl::InfiniteDuration()) continue;
    if (absl::StartsWith(p, r.prefix) &&
        (best == nullptr || r.prefix.size() > best->prefix.size())) {
      best = &r;
    }
  }
  return best;
}

}  // namespace

absl::StatusOr<EvictionPolicy> ParseEvictionPolicy(absl::string_view name) {
  if (name == "lru") return EvictionPolicy::kLru;
  if (name == "none") return EvictionPolicy::kNone;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown eviction policy '", name, "' (want lru or none)"));
}

absl::StatusOr<CacheRules> CacheRules::Parse(
    const std::vector<std::string>& pins,
    const std::vector<std::string>& ttls) {
  CacheRules out;
  for (const std::string& p : pins) {
    if (p.empty()) continue;
    out.rules.push_back({p, true, absl::InfiniteDuration()});
  }
  for (const std::string& t : ttls) {
    if (t.empty()) continue;
    std::pair<std::string, std::string> kv =
        absl::StrSplit(t, absl::MaxSplits('=', 1));
    absl::Duration d;
    if (kv.first.empty() || !absl::ParseDuration(kv.second, &d) ||
        d <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad --ttl entry '", t,
                       "': want PREFIX=DURATION, e.g. imagenet/val=30m"));
    }
    out.rules.push_back({kv.first, false, d});
  }
  return out;
}

bool CacheRules::Pinned(const BlockId& id) const {
  return Match(rules, id, true) != nullptr;
}

absl::Duration CacheRules::Ttl(const BlockId& id) const {
  const Rule* r = Match(rules, id, false);
  return r == nullptr ? absl::InfiniteDuration() : r->ttl;
}

}  // namespace larder
