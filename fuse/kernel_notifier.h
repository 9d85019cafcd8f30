// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: kernel_notifier.h
// -----------------------------------------------------------------------------
//
// Invalidations, passed on to the kernel. Paths the master invalidated (the
// client's invalidation hook) go to the kernel from a thread of their own: a
// FUSE handler must not send entry notifications itself (the kernel may hold
// the directory's lock for that very request). For every inode at or below
// the path: its attributes and pages (notify_inval_inode), and its name
// (notify_inval_entry), so the next access asks this daemon, whose metadata
// cache asks the master.
//
//   KernelNotifier notifier(inodes);
//   notifier.Start(session);
//   client->SetInvalidationHook(
//       [&](const std::string& path) { notifier.Push(path); });
//   ...
//   client->SetInvalidationHook(nullptr);
//   notifier.Stop();   // Before the session goes.
//
// Thread-safe.
#ifndef LARDER_FUSE_KERNEL_NOTIFIER_H_
#define LARDER_FUSE_KERNEL_NOTIFIER_H_

#include <deque>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "fuse/inode_table.h"

struct fuse_session;

namespace larder {

class KernelNotifier {
 public:
  explicit KernelNotifier(const InodeTable& inodes) : inodes_(inodes) {}
  ~KernelNotifier() { Stop(); }
  KernelNotifier(const KernelNotifier&) = delete;
  KernelNotifier& operator=(const KernelNotifier&) = delete;

  // Starts the thread that notifies `session`'s kernel.
  void Start(fuse_session* session);
  // Queues an invalidation of `path` and everything below it.
  void Push(const std::string& path) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the thread (queued paths are dropped); idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  void Invalidate(const std::string& path);
  bool Ready() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stop_ || !queue_.empty();
  }

  const InodeTable& inodes_;
  fuse_session* session_ = nullptr;
  absl::Mutex mu_;
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace larder

#endif  // LARDER_FUSE_KERNEL_NOTIFIER_H_
