// Copyright 2026 The Larder Authors.
#include "fuse/local_dirs.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace larder {

bool LocalDirs::Add(FileInfo info) {
  absl::MutexLock lock(&mu_);
  std::string path = info.path;
  const bool added = dirs_.try_emplace(std::move(path), std::move(info)).second;
  Recount();
  return added;
}

std::optional<FileInfo> LocalDirs::Get(absl::string_view path) const {
  if (size() == 0) return std::nullopt;
  absl::MutexLock lock(&mu_);
  auto it = dirs_.find(path);
  if (it == dirs_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> LocalDirs::Children(absl::string_view parent) const {
  std::vector<std::string> out;
  if (size() == 0) return out;
  const std::string prefix = parent == "/" ? "/" : absl::StrCat(parent, "/");
  absl::MutexLock lock(&mu_);
  for (auto it = dirs_.lower_bound(prefix);
       it != dirs_.end() && absl::StartsWith(it->first, prefix); ++it) {
    absl::string_view rest = absl::string_view(it->first).substr(prefix.size());
    if (!rest.empty() && !absl::StrContains(rest, '/')) out.emplace_back(rest);
  }
  return out;
}

absl::Status LocalDirs::RemoveIfEmpty(absl::string_view path) {
  absl::MutexLock lock(&mu_);
  auto it = dirs_.find(path);
  if (it == dirs_.end())
    return absl::NotFoundError(absl::StrCat(path, " was not made here"));
  // Not the next key: siblings such as "PATH-b" sort before "PATH/...".
  const std::string below = path == "/" ? "/" : absl::StrCat(path, "/");
  if (auto child = dirs_.lower_bound(below);
      child != dirs_.end() && absl::StartsWith(child->first, below)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " holds ", child->first));
  }
  dirs_.erase(it);
  Recount();
  return absl::OkStatus();
}

void LocalDirs::Exists(absl::string_view path) {
  if (size() == 0) return;
  absl::MutexLock lock(&mu_);
  for (absl::string_view p = path; !p.empty() && p != "/";) {
    dirs_.erase(p);
    const size_t slash = p.rfind('/');
    if (slash == absl::string_view::npos) break;
    p = p.substr(0, slash);
  }
  Recount();
}

}  // namespace larder
