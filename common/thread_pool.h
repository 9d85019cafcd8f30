// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: thread_pool.h
// -----------------------------------------------------------------------------
//
// A fixed-size pool of threads running queued tasks in FIFO order. It bounds
// how much work of one kind runs at once (under-store fetches, NVMe writes).
// Tasks must not wait for other tasks of the same pool (that can deadlock a
// full pool); use a second pool for sub-tasks.
//
// Thread-safe. The destructor runs every queued task, then joins.
#ifndef LARDER_COMMON_THREAD_POOL_H_
#define LARDER_COMMON_THREAD_POOL_H_

#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"

namespace larder {

class ThreadPool {
 public:
  // `nice` > 0 runs the pool's threads at that lower CPU priority (Linux's
  // per-thread nice value, which the threads they start inherit): work that
  // must yield the CPU to more urgent work of the same process.
  ThreadPool(int threads, std::string name, int nice = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void Schedule(std::function<void()> task);
  // Queued ahead of every task that Schedule queued (in order among
  // themselves): work someone waits for before work done ahead of need.
  void ScheduleUrgent(std::function<void()> task);
  // Tasks queued and not yet started.
  size_t queued() const;
  int threads() const { return static_cast<int>(threads_.size()); }

 private:
  void Loop();

  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  std::deque<std::function<void()>> urgent_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
  const std::string name_;
  const int nice_;
};

// fn(0), ..., fn(n - 1) on the calling thread and up to pool.threads() of
// the pool's threads, each taking the next index; returns when all are done.
// The caller must not be a thread of `pool`, and fn must not wait for tasks
// of `pool`.
void ParallelFor(ThreadPool& pool, size_t n,
                 absl::FunctionRef<void(size_t)> fn);

}  // namespace larder

#endif  // LARDER_COMMON_THREAD_POOL_H_
