// Copyright 2026 The Larder Authors.
#include "worker/huge_pages.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>

#include "common/log.h"

namespace larder {
namespace {

constexpr int kMaxTries = 3;

}  // namespace

HugePagePromoter::HugePagePromoter(WorkerMetrics* metrics,
                                   std::function<absl::Time()> last_use,
                                   absl::Duration quiet, size_t max_queued)
    : metrics_(metrics),
      last_use_(std::move(last_use)),
      quiet_(quiet),
      max_queued_(max_queued),
      thread_([this] { Run(); }) {}

HugePagePromoter::~HugePagePromoter() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void HugePagePromoter::Add(const std::shared_ptr<const Block>& block) {
  if (block == nullptr || block->length() < Block::kHugePageSize) return;
  absl::MutexLock lock(&mu_);
  if (stop_ || unsupported_ || queue_.size() >= max_queued_) return;
  queue_.push_back(Item{block, 0});
}

size_t HugePagePromoter::queued() {
  absl::MutexLock lock(&mu_);
  return queue_.size() + (busy_ ? 1 : 0);
}

bool HugePagePromoter::WaitIdle() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](HugePagePromoter* p) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return p->stop_ || p->unsupported_ || (p->queue_.empty() && !p->busy_);
      },
      this));
  return !unsupported_;
}

void HugePagePromoter::Run() {
  ::pthread_setname_np(::pthread_self(), "larder-hugepage");
  // Only CPU time no other thread of the node wants.
  sched_param param{};
  ::pthread_setschedparam(::pthread_self(), SCHED_IDLE, &param);
  for (;;) {
    Item item;
    {
      absl::MutexLock lock(&mu_);
      busy_ = false;
      mu_.Await(absl::Condition(
          +[](HugePagePromoter* p) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return p->stop_ || !p->queue_.empty();
          },
          this));
      // Wait for a quiet moment: no block served or fetched for quiet_.
      for (;;) {
        if (stop_) return;
        const absl::Duration since = absl::Now() - last_use_();
        if (since >= quiet_) break;
        // At most quiet_ at a time: last_use_ may move either way.
        mu_.AwaitWithTimeout(absl::Condition(&stop_),
                             std::min(quiet_, quiet_ - since));
      }
      item = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    std::shared_ptr<const Block> block = item.block.lock();
    if (block == nullptr) continue;  // Evicted before its turn.
    absl::Status s = block->CollapseToHugePages();
    if (s.ok()) {
      metrics_->huge_page_collapses.Increment();
      continue;
    }
    metrics_->huge_page_collapse_failures.Increment();
    if (s.code() == absl::StatusCode::kUnimplemented) {
      LARDER_LOG(INFO, "worker.huge_pages")
          .Field("status", s)
          .Field("effect", "RAM blocks stay in 4 KiB pages");
      absl::MutexLock lock(&mu_);
      unsupported_ = true;
      queue_.clear();
      busy_ = false;
      // Keep the thread until stop_, so the destructor's join is simple.
      mu_.Await(absl::Condition(&stop_));
      return;
    }
    if (++item.tries < kMaxTries) {
      block.reset();  // The queue holds weak references only.
      absl::MutexLock lock(&mu_);
      queue_.push_back(std::move(item));
    }
  }
}

}  // namespace larder
