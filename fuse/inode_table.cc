// Copyright 2026 The Larder Authors.
#include "fuse/inode_table.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/hash.h"

namespace larder {

InodeTable::InodeTable() {
  nodes_[kRoot] = Node{std::make_shared<Inode>("/"), 1};
  by_path_["/"] = kRoot;
}

std::string InodeTable::Child(absl::string_view parent,
                              absl::string_view name) {
  return parent == "/" ? absl::StrCat("/", name)
                       : absl::StrCat(parent, "/", name);
}

uint64_t InodeTable::StableIno(absl::string_view path) {
  if (path == "/") return kRoot;
  // 63 bits: some tools print st_ino as a signed number.
  const uint64_t h = Hash64(path) >> 1;
  return h < 2 ? h + 2 : h;
}

uint64_t InodeTable::Ref(const std::string& path, const std::string& version) {
  std::shared_ptr<Inode> inode;
  uint64_t ino;
  {
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = by_path_.try_emplace(path, 0);
    if (inserted) {
      it->second = next_++;
      nodes_[it->second] = Node{std::make_shared<Inode>(path), 0};
    }
    Node& node = nodes_[it->second];
    ++node.lookups;
    inode = node.inode;
    ino = it->second;
  }
  Replied(*inode, version);
  return ino;
}

void InodeTable::Forget(uint64_t ino, uint64_t n) {
  if (ino == kRoot) return;
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(ino);
  if (it == nodes_.end()) return;
  if (it->second.lookups > n) {
    it->second.lookups -= n;
    return;
  }
  by_path_.erase(it->second.inode->path);
  nodes_.erase(it);
}

std::shared_ptr<Inode> InodeTable::Get(uint64_t ino) const {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(ino);
  return it == nodes_.end() ? nullptr : it->second.inode;
}

std::optional<std::string> InodeTable::Path(uint64_t ino) const {
  std::shared_ptr<Inode> inode = Get(ino);
  if (!inode) return std::nullopt;
  return inode->path;
}

void InodeTable::Replied(Inode& inode, const std::string& version) {
  absl::MutexLock lock(&inode.mu_);
  inode.replied_version_ = version;
}

std::string InodeTable::KernelVersion(uint64_t ino) const {
  std::shared_ptr<Inode> inode = Get(ino);
  if (!inode) return "";
  absl::MutexLock lock(&inode->mu_);
  return inode->replied_version_;
}

bool InodeTable::ForgetKernelVersion(uint64_t ino, const std::string& version) {
  std::shared_ptr<Inode> inode = Get(ino);
  if (!inode) return false;
  absl::MutexLock lock(&inode->mu_);
  if (inode->replied_version_ != version) return false;
  inode->replied_version_.clear();
  return true;
}

void InodeTable::RepliedVersion(uint64_t ino, const std::string& version) {
  if (std::shared_ptr<Inode> inode = Get(ino)) Replied(*inode, version);
}

InodeTable::OpenCheck InodeTable::OpenedVersion(uint64_t ino,
                                                const std::string& version) {
  std::shared_ptr<Inode> inode = Get(ino);
  if (!inode) return {};
  absl::MutexLock lock(&inode->mu_);
  OpenCheck check;
  check.same_as_last_open = inode->opened_version_ == version;
  check.attrs_stale = inode->replied_version_ != version;
  inode->opened_version_ = version;
  inode->replied_version_ = version;
  return check;
}

std::vector<std::pair<uint64_t, std::string>> InodeTable::Under(
    const std::string& path) const {
  const std::string below = path == "/" ? "/" : path + "/";
  std::vector<std::pair<uint64_t, std::string>> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [p, ino] : by_path_) {
    if (ino != kRoot && (p == path || absl::StartsWith(p, below)))
      out.emplace_back(ino, p);
  }
  return out;
}

uint64_t InodeTable::Find(const std::string& path) const {
  absl::MutexLock lock(&mu_);
  auto it = by_path_.find(path);
  return it == by_path_.end() ? 0 : it->second;
}

size_t InodeTable::size() const {
  absl::MutexLock lock(&mu_);
  return nodes_.size();
}

}  // namespace larder
