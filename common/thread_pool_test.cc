// Copyright 2026 The Larder Authors.
#include "common/thread_pool.h"

#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace larder {
namespace {

int MyNice() { return getpriority(PRIO_PROCESS, static_cast<id_t>(gettid())); }

TEST(ThreadPoolTest, RunsEveryTaskBeforeItIsDestroyed) {
  std::atomic<int> ran{0};
  {
    ThreadPool pool(3, "test");
    for (int i = 0; i < 100; ++i) pool.Schedule([&] { ++ran; });
  }
  EXPECT_EQ(ran.load(), 100);
}

TEST(ThreadPoolTest, ANicePoolRunsBelowTheProcessAndSoDoItsThreadsThreads) {
  const int base = MyNice();
  if (base > 19 - 4) GTEST_SKIP() << "the test runs at nice " << base;
  int in_pool = -100, in_child = -100;
  absl::Notification done;
  {
    ThreadPool nice(1, "test-nice", 4);
    nice.Schedule([&] {
      in_pool = MyNice();
      std::thread([&] { in_child = MyNice(); }).join();
      done.Notify();
    });
    done.WaitForNotification();
  }
  EXPECT_EQ(in_pool, base + 4);
  EXPECT_EQ(in_child, base + 4);
  // The rest of the process is not lowered.
  EXPECT_EQ(MyNice(), base);
  int plain = -100;
  {
    ThreadPool pool(1, "test");
    pool.Schedule([&] { plain = MyNice(); });
  }
  EXPECT_EQ(plain, base);
}

}  // namespace
}  // namespace larder
