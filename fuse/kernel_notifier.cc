// Copyright 2026 The Larder Authors.
#include "fuse/kernel_notifier.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "common/log.h"
#include "fuse/libfuse.h"
#include "understore/uri.h"

namespace larder {

void KernelNotifier::Start(fuse_session* session) {
  session_ = session;
  thread_ = std::thread([this] { Run(); });
}

void KernelNotifier::Push(const std::string& path) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(path);
}

void KernelNotifier::Stop() {
  if (!thread_.joinable()) return;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void KernelNotifier::Run() {
  while (true) {
    std::string path;
    {
      absl::MutexLock lock(&mu_, absl::Condition(this, &KernelNotifier::Ready));
      if (stop_) return;
      path = std::move(queue_.front());
      queue_.pop_front();
    }
    Invalidate(path);
  }
}

void KernelNotifier::Invalidate(const std::string& path) {
  auto drop_name = [&](const std::string& p) {
    if (p == "/") return;
    const uint64_t parent = inodes_.Find(ParentClusterPath(p));
    if (parent == 0) return;
    const std::string name = p.substr(p.rfind('/') + 1);
    // -ENOENT when the kernel holds no such name: nothing to drop.
    fuse_lowlevel_notify_inval_entry(session_, parent, name.c_str(),
                                     name.size());
  };
  std::vector<std::pair<uint64_t, std::string>> inodes = inodes_.Under(path);
  for (const auto& [ino, p] : inodes) {
    fuse_lowlevel_notify_inval_inode(session_, ino, 0, 0);
    drop_name(p);
  }
  // A name the kernel remembers as missing has no inode.
  if (inodes.empty()) drop_name(path);
  LARDER_LOG(DEBUG, "fuse.kernel_invalidated")
      .Field("path", path)
      .Field("inodes", inodes.size());
}

}  // namespace larder
