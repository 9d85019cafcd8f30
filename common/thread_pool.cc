// Copyright 2026 The Larder Authors.
#include "common/thread_pool.h"

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

#include "absl/synchronization/blocking_counter.h"

namespace larder {

ThreadPool::ThreadPool(int threads, std::string name, int nice)
    : name_(std::move(name)), nice_(nice) {
  threads = std::max(1, threads);
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this] { Loop(); });
    pthread_setname_np(threads_.back().native_handle(),
                       name_.substr(0, 15).c_str());
  }
}

ThreadPool::~ThreadPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void ThreadPool::Schedule(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(task));
}

void ThreadPool::ScheduleUrgent(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  urgent_.push_back(std::move(task));
}

size_t ThreadPool::queued() const {
  absl::MutexLock lock(&mu_);
  return queue_.size() + urgent_.size();
}

void ThreadPool::Loop() {
  // Relative to the process's own (a worker an operator started at nice 5
  // runs these at 5 + nice_). Raising one's nice value needs no privilege;
  // failing leaves the thread at the process's priority.
  if (nice_ > 0) {
    const id_t tid = static_cast<id_t>(gettid());
    errno = 0;
    const int now = getpriority(PRIO_PROCESS, tid);
    if (errno == 0) setpriority(PRIO_PROCESS, tid, std::min(19, now + nice_));
  }
  for (;;) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](ThreadPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
            return p->stopping_ || !p->queue_.empty() || !p->urgent_.empty();
          },
          this));
      std::deque<std::function<void()>>& q = urgent_.empty() ? queue_ : urgent_;
      if (q.empty()) return;  // Stopping and drained.
      task = std::move(q.front());
      q.pop_front();
    }
    task();
  }
}

void ParallelFor(ThreadPool& pool, size_t n,
                 absl::FunctionRef<void(size_t)> fn) {
  if (n <= 1) {
    if (n == 1) fn(0);
    return;
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;) fn(i);
  };
  const int helpers = static_cast<int>(
      std::min<size_t>(n - 1, static_cast<size_t>(pool.threads())));
  absl::BlockingCounter done(helpers);
  for (int h = 0; h < helpers; ++h) {
    pool.Schedule([&] {
      work();
      done.DecrementCount();
    });
  }
  work();
  done.Wait();
}

}  // namespace larder
