// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: huge_pages.h
// -----------------------------------------------------------------------------
//
// Moves RAM-tier blocks into 2 MiB pages on CPU time nobody else wants.
//
// Blocks are filled into 4 KiB pages: each fresh 2 MiB page must be zeroed
// by the kernel before the fill can start, and that sits on the path of
// every cold read (measured on the 2-core VM: filling 1 GiB of memfds ran at
// 0.3-0.65 GB/s into 2 MiB pages, 0.6-0.9 GB/s into 4 KiB pages; in a VM
// with free page reporting a fresh 2 MiB page is also faulted in from the
// host). Warm reads of 2 MiB pages are faster: one page to look up, pin or
// splice instead of 512 (memfd pread 13.5-15 GB/s against 7.6-8.9 GB/s).
// So blocks that are read again are queued here (BlockStore decides), and
// one thread collapses them (Block::CollapseToHugePages), one at a time,
// only while the worker has served nothing for a while, and at SCHED_IDLE
// priority. Collapsing next to reads slowed them 2-6x on the VM (the copy
// and the host's faults hold the vCPU), so a busy worker defers it; where
// the worker is never quiet, blocks stay in 4 KiB pages: correct, only
// slower to read.
//
// Holds weak references: a block evicted before its turn is skipped. A block
// whose pages were busy is tried again later (twice at most). Where the
// kernel cannot collapse (before Linux 6.1, or shmem_enabled = deny) it says
// so once in the log and stops.
//
// Thread-safe. The destructor stops the thread; queued blocks are dropped.
#ifndef LARDER_WORKER_HUGE_PAGES_H_
#define LARDER_WORKER_HUGE_PAGES_H_

#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/block.h"
#include "worker/metrics.h"

namespace larder {

class HugePagePromoter {
 public:
  // `metrics` must outlive the promoter. Collapses run only once `last_use`
  // (the time the worker last served or fetched a block) is at least
  // `quiet` ago. At most `max_queued` blocks wait; beyond that new ones stay
  // in 4 KiB pages.
  HugePagePromoter(WorkerMetrics* metrics, std::function<absl::Time()> last_use,
                   absl::Duration quiet = absl::Milliseconds(250),
                   size_t max_queued = 65536);
  ~HugePagePromoter();
  HugePagePromoter(const HugePagePromoter&) = delete;
  HugePagePromoter& operator=(const HugePagePromoter&) = delete;

  // Queues `block` (blocks shorter than 2 MiB are ignored).
  void Add(const std::shared_ptr<const Block>& block);

  // Blocks waiting, the one being collapsed included.
  size_t queued();

  // Waits until every queued block has had its turn (for tests and
  // benchmarks). Returns false if the promoter gave up (kernel cannot).
  bool WaitIdle();

 private:
  struct Item {
    std::weak_ptr<const Block> block;
    int tries = 0;
  };
  void Run();

  WorkerMetrics* const metrics_;
  const std::function<absl::Time()> last_use_;
  const absl::Duration quiet_;
  const size_t max_queued_;
  absl::Mutex mu_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;  // The thread holds an item.
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool unsupported_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // Last: started after the state above.
};

}  // namespace larder

#endif  // LARDER_WORKER_HUGE_PAGES_H_
