// Copyright 2026 The Larder Authors.
#include "common/mount_set.h"

#include <algorithm>

namespace larder {

MountSet::MountSet(v1::MountTable table) : table_(std::move(table)) {
  std::sort(table_.mutable_mounts()->begin(), table_.mutable_mounts()->end(),
            [](const v1::MountEntry& a, const v1::MountEntry& b) {
              return a.path() < b.path();
            });
  for (int i = 0; i < table_.mounts_size(); ++i)
    index_.emplace(table_.mounts(i).path(), i);
}

const v1::MountEntry* MountSet::Find(absl::string_view mount_path) const {
  auto it = index_.find(mount_path);
  return it == index_.end() ? nullptr : &table_.mounts(it->second);
}

std::optional<MountSet::Resolved> MountSet::Resolve(
    absl::string_view path) const {
  const absl::string_view at =
      Covering(path, [&](absl::string_view p) { return index_.contains(p); });
  if (at.empty()) return std::nullopt;
  absl::string_view relative = path.substr(at.size());
  if (!relative.empty()) relative.remove_prefix(1);  // The '/'.
  return Resolved{Find(at), relative};
}

absl::string_view MountSet::Covering(
    absl::string_view path,
    absl::FunctionRef<bool(absl::string_view)> is_mount) {
  if (path.empty() || path[0] != '/') return {};
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  for (absl::string_view p = path; p.size() > 1;) {
    if (is_mount(p)) return p;
    const size_t slash = p.rfind('/');
    if (slash == 0 || slash == absl::string_view::npos) break;
    p = p.substr(0, slash);
  }
  return {};
}

}  // namespace larder
