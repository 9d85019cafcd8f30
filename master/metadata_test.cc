// Copyright 2026 The Larder Authors.
#include "master/metadata.h"

#include <atomic>
#include <filesystem>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "tests/testing/process.h"

namespace larder {
namespace {

// Passes every call to `inner`; the stores below change some.
class PassingStore : public UnderStore {
 public:
  explicit PassingStore(std::shared_ptr<UnderStore> inner)
      : inner_(std::move(inner)) {}
  absl::string_view scheme() const override { return inner_->scheme(); }
  std::string DebugString() const override { return inner_->DebugString(); }
  absl::StatusOr<ObjectInfo> Stat(absl::string_view path) override {
    return inner_->Stat(path);
  }
  absl::StatusOr<ListPage> List(absl::string_view dir,
                                const ListOptions& options) override {
    return inner_->List(dir, options);
  }
  using UnderStore::ReadRange;
  absl::StatusOr<size_t> ReadRange(absl::string_view path, uint64_t offset,
                                   absl::Span<char> buffer,
                                   absl::string_view expected_version,
                                   uint64_t* object_size) override {
    return inner_->ReadRange(path, offset, buffer, expected_version,
                             object_size);
  }

 private:
  const std::shared_ptr<UnderStore> inner_;
};

// Passes every call on, except that a listing's later pages (those asked
// for with a page token) wait until Release().
class HeldPagesStore : public PassingStore {
 public:
  using PassingStore::PassingStore;
  void Release() {
    absl::MutexLock lock(&mu_);
    released_ = true;
  }
  // Later pages asked for so far.
  int later_pages() const { return later_pages_.load(); }

  absl::StatusOr<ListPage> List(absl::string_view dir,
                                const ListOptions& options) override {
    if (!options.page_token.empty()) {
      ++later_pages_;
      // Bounded: a cache that waits for its later pages fails the test
      // instead of hanging it.
      mu_.LockWhenWithTimeout(absl::Condition(&released_), absl::Seconds(30));
      mu_.Unlock();
    }
    return PassingStore::List(dir, options);
  }

 private:
  absl::Mutex mu_;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int> later_pages_{0};
};

// Passes every listing on, then holds its answer until Release(): the
// store has answered, and the answer is on its way back.
class HeldAnswersStore : public PassingStore {
 public:
  using PassingStore::PassingStore;
  void Release() {
    absl::MutexLock lock(&mu_);
    released_ = true;
  }
  std::atomic<int> lists{0};

  absl::StatusOr<ListPage> List(absl::string_view dir,
                                const ListOptions& options) override {
    absl::StatusOr<ListPage> page = PassingStore::List(dir, options);
    ++lists;
    mu_.LockWhenWithTimeout(absl::Condition(&released_), absl::Seconds(30));
    mu_.Unlock();
    return page;
  }

 private:
  absl::Mutex mu_;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
};

// Passes every call on while up; while down, Stat and List fail as an
// unreachable store does (after its retries). Counts the calls that
// reached it.
class SwitchedStore : public PassingStore {
 public:
  using PassingStore::PassingStore;
  std::atomic<bool> down{false};
  std::atomic<bool> throttled{false};  // 503 SlowDown, after the retries.
  std::atomic<int> stats{0}, lists{0};

  absl::StatusOr<ObjectInfo> Stat(absl::string_view path) override {
    ++stats;
    LARDER_RETURN_IF_ERROR(Failure());
    return PassingStore::Stat(path);
  }
  absl::StatusOr<ListPage> List(absl::string_view dir,
                                const ListOptions& options) override {
    ++lists;
    LARDER_RETURN_IF_ERROR(Failure());
    return PassingStore::List(dir, options);
  }

 private:
  absl::Status Failure() const {
    if (down) return absl::UnavailableError("connect: connection refused");
    if (throttled) return absl::ResourceExhaustedError("503 SlowDown");
    return absl::OkStatus();
  }
};

class MetadataCacheTest : public ::testing::Test {
 protected:
  void Mount(int ttl_ms) {
    auto r = MountRegistry::Open(state_.path());
    ASSERT_TRUE(r.ok()) << r.status();
    registry_ = std::move(*r);
    v1::MountEntry e;
    e.set_path("/datasets/ds");
    e.set_uri(absl::StrCat("file://", data_.path()));
    e.set_metadata_ttl_ms(ttl_ms);
    ASSERT_TRUE(registry_->Add(e).ok());
    mount_ = e;
    cache_ = std::make_unique<UnderStoreMetadata>(registry_.get(),
                                                  UnderStoreOptions{});
  }
  void Write(const std::string& rel, const std::string& data) {
    const std::string path = absl::StrCat(data_.path(), "/", rel);
    std::filesystem::create_directories(
        std::filesystem::path(path).parent_path());
    ASSERT_TRUE(testing::WriteFile(path, data).ok());
  }

  // The mount's store, behind a SwitchedStore from now on.
  std::shared_ptr<SwitchedStore> Switch() {
    absl::StatusOr<std::shared_ptr<UnderStore>> inner = cache_->Store(mount_);
    EXPECT_TRUE(inner.ok()) << inner.status();
    if (!inner.ok()) return nullptr;
    auto store = std::make_shared<SwitchedStore>(*inner);
    cache_->SetStoreForTesting(mount_, store);
    return store;
  }

  testing::TempDir state_, data_;
  v1::MountEntry mount_;
  std::unique_ptr<MountRegistry> registry_;
  std::unique_ptr<UnderStoreMetadata> cache_;
};

TEST_F(MetadataCacheTest, StatMissesOfOneDirectoryShareOneListing) {
  for (int i = 0; i < 50; ++i)
    Write(absl::StrCat("d/f", i), std::string(i + 1, 'x'));
  Mount(60000);
  for (int i = 0; i < 50; ++i) {
    auto st = cache_->Stat(absl::StrCat("/datasets/ds/d/f", i));
    ASSERT_TRUE(st.ok()) << i << ": " << st.status();
    EXPECT_EQ(st->info().size(), static_cast<uint64_t>(i + 1));
    EXPECT_EQ(st->relative(), absl::StrCat("d/f", i));
    EXPECT_FALSE(st->info().version().empty());
  }
  // The first miss was looked up alone, the second listed the directory.
  EXPECT_EQ(cache_->requests().stats, 1u);
  EXPECT_EQ(cache_->requests().lists, 1u);
  // Not in the listing: its own Stat, and NotFound for a missing path.
  Write("d/late", "late");
  auto late = cache_->Stat("/datasets/ds/d/late");
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(late->info().size(), 4u);
  EXPECT_EQ(cache_->Stat("/datasets/ds/d/none").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(cache_->requests().stats, 3u);
  EXPECT_EQ(cache_->requests().lists, 1u);
  // Invalidate forgets the listing too: the directory is listed again.
  EXPECT_GT(cache_->Invalidate("/datasets/ds/d"), 0u);
  ASSERT_TRUE(cache_->Stat("/datasets/ds/d/f1").ok());
  ASSERT_TRUE(cache_->Stat("/datasets/ds/d/f2").ok());
  ASSERT_TRUE(cache_->Stat("/datasets/ds/d/f3").ok());
  EXPECT_EQ(cache_->requests().lists, 2u);
}

// Invalidating "/" drops everything (a master that becomes leader again
// drops what it cached before another master changed the store).
TEST_F(MetadataCacheTest, InvalidatingTheRootDropsEverything) {
  Write("d/f", "one");
  Mount(60000);
  ASSERT_EQ(cache_->Stat("/datasets/ds/d/f")->info().size(), 3u);
  v1::ListRequest list;
  list.set_path("/datasets/ds/d");
  ASSERT_TRUE(cache_->List(list).ok());
  const auto before = cache_->requests();
  ASSERT_TRUE(cache_->Stat("/datasets/ds/d/f").ok());
  EXPECT_EQ(cache_->requests().stats, before.stats);  // Cached.
  Write("d/f", "three");
  EXPECT_GT(cache_->Invalidate("/"), 0u);
  EXPECT_EQ(cache_->CachedEntries(), 0u);
  auto again = cache_->Stat("/datasets/ds/d/f");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->info().size(), 5u);
  ASSERT_TRUE(cache_->List(list).ok());
  EXPECT_EQ(cache_->requests().lists, before.lists + 1);
}

// A listing the store answered before an invalidation (its answer still
// on the way) is neither kept nor joined by a caller after it: the file
// replaced meanwhile is seen at its new version, not for a TTL at the old.
TEST_F(MetadataCacheTest, AnAnswerFromBeforeAnInvalidationIsNotKept) {
  Write("d/f", "old");
  Mount(60000);
  auto inner = cache_->Store(mount_);
  ASSERT_TRUE(inner.ok()) << inner.status();
  auto held = std::make_shared<HeldAnswersStore>(*inner);
  cache_->SetStoreForTesting(mount_, held);
  v1::ListRequest list;
  list.set_path("/datasets/ds/d");
  auto size_in = [](const absl::StatusOr<v1::ListResponse>& r) -> int64_t {
    if (!r.ok() || r->entries_size() != 1) return -1;
    return static_cast<int64_t>(r->entries(0).size());
  };
  absl::StatusOr<v1::ListResponse> before, after;
  std::thread a([&] { before = cache_->List(list); });
  auto join_a = absl::MakeCleanup([&] {
    held->Release();
    a.join();
  });
  ASSERT_TRUE(
      testing::WaitFor([&] { return held->lists >= 1; }, absl::Seconds(10)));
  Write("d/f", "newer");  // A commit: the store changes, then invalidates.
  cache_->Invalidate("/datasets/ds/d/f");
  std::thread b([&] { after = cache_->List(list); });
  // A caller after the invalidation asks the store itself.
  EXPECT_TRUE(
      testing::WaitFor([&] { return held->lists >= 2; }, absl::Seconds(5)));
  held->Release();
  b.join();
  std::move(join_a).Invoke();
  EXPECT_EQ(size_in(before), 3);  // Served to its own caller.
  EXPECT_EQ(size_in(after), 5);
  EXPECT_EQ(size_in(cache_->List(list)), 5);  // And kept: the new one.
  EXPECT_EQ(cache_->Stat("/datasets/ds/d/f")->info().size(), 5u);
}

// Answers say how long they have left: the whole TTL when just looked up,
// what is left of it when served from the cache (Stat and List alike).
TEST_F(MetadataCacheTest, AnswersCarryWhatIsLeftOfTheirTtl) {
  Write("d/f", "x");
  Mount(2000);
  auto first = cache_->Stat("/datasets/ds/d/f");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->ttl_remaining_ms(), 2000u);
  v1::ListRequest list;
  list.set_path("/datasets/ds/d");
  auto page = cache_->List(list);
  ASSERT_TRUE(page.ok()) << page.status();
  // A listing lasts no longer than the Stat answer of an entry of it.
  EXPECT_LE(page->ttl_remaining_ms(), first->ttl_remaining_ms());
  EXPECT_GE(page->ttl_remaining_ms(), 1900u);
  absl::SleepFor(absl::Milliseconds(500));
  auto again = cache_->Stat("/datasets/ds/d/f");
  ASSERT_TRUE(again.ok());
  EXPECT_LE(again->ttl_remaining_ms(), 1500u);
  EXPECT_GE(again->ttl_remaining_ms(), 1u);
  page = cache_->List(list);
  ASSERT_TRUE(page.ok());
  EXPECT_LE(page->ttl_remaining_ms(), 1500u);
}

TEST_F(MetadataCacheTest, ExpiredEntriesAreSwept) {
  // One file per directory: no listings, one entry per Stat.
  constexpr int kFiles = 4200;
  for (int i = 0; i < 2 * kFiles; ++i) Write(absl::StrCat("d", i, "/f"), "x");
  Mount(100);
  for (int i = 0; i < kFiles; ++i)
    ASSERT_TRUE(cache_->Stat(absl::StrCat("/datasets/ds/d", i, "/f")).ok());
  EXPECT_GE(cache_->CachedEntries(), static_cast<size_t>(kFiles) - 4096);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  for (int i = kFiles; i < 2 * kFiles; ++i)
    ASSERT_TRUE(cache_->Stat(absl::StrCat("/datasets/ds/d", i, "/f")).ok());
  // The first batch expired and was swept on the way.
  EXPECT_LT(cache_->CachedEntries(), static_cast<size_t>(kFiles) + 200);
}

// Lists of one page, and the listing for Stat, share one request for each
// page: a directory listed for a node is not listed again for Stat misses.
TEST_F(MetadataCacheTest, ListsAndTheListingForStatShareEachPage) {
  for (int i = 0; i < 20; ++i)
    Write(absl::StrCat("d/f", i), std::string(i + 1, 'x'));
  Mount(60000);
  v1::ListRequest list;
  list.set_path("/datasets/ds/d");
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      auto page = cache_->List(list);
      EXPECT_TRUE(page.ok() && page->entries_size() == 20);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(cache_->requests().lists, 1u);
  // The second miss lists the directory for Stat: the same page.
  for (int i : {3, 4, 5}) {
    auto st = cache_->Stat(absl::StrCat("/datasets/ds/d/f", i));
    ASSERT_TRUE(st.ok()) << st.status();
    EXPECT_EQ(st->info().size(), static_cast<uint64_t>(i + 1));
    EXPECT_EQ(st->relative(), absl::StrCat("d/f", i));
    EXPECT_EQ(st->mount(), "/datasets/ds");
  }
  EXPECT_EQ(cache_->requests().lists, 1u);
  EXPECT_EQ(cache_->requests().stats, 1u);  // The first miss.
}

// A Stat miss that lists its directory returns with the listing's first
// page: the store holds the later pages back until the miss has returned.
// Meanwhile a path past the first page gets a Stat of its own; once the
// pages are released the rest of the directory comes from the cache.
TEST_F(MetadataCacheTest, AStatMissWaitsForTheFirstPageOfItsListingOnly) {
  constexpr int kFiles = 2500;  // Three pages of 1,000.
  for (int i = 0; i < kFiles; ++i)
    Write(absl::StrFormat("d/f%05d", i), std::string(i % 7 + 1, 'x'));
  Mount(60000);
  auto inner = cache_->Store(mount_);
  ASSERT_TRUE(inner.ok()) << inner.status();
  auto held = std::make_shared<HeldPagesStore>(*inner);
  cache_->SetStoreForTesting(mount_, held);
  auto release = absl::MakeCleanup([&] { held->Release(); });
  ASSERT_TRUE(cache_->Stat("/datasets/ds/d/f00001").ok());  // Alone.
  EXPECT_EQ(cache_->requests().lists, 0u);

  absl::Notification returned;
  absl::StatusOr<v1::StatResponse> second;
  std::thread miss([&] {
    second = cache_->Stat("/datasets/ds/d/f00002");  // Lists d/.
    returned.Notify();
  });
  // Released and joined however the test ends (an ASSERT below returns).
  auto join = absl::MakeCleanup([&] {
    held->Release();
    miss.join();
  });
  EXPECT_TRUE(returned.WaitForNotificationWithTimeout(absl::Seconds(10)))
      << "the Stat miss waited for the listing's later pages";
  ASSERT_TRUE(testing::WaitFor([&] { return held->later_pages() >= 1; },
                               absl::Seconds(10)));
  EXPECT_FALSE(returned.HasBeenNotified() && !second.ok()) << second.status();
  if (returned.HasBeenNotified() && second.ok()) {
    EXPECT_EQ(second->info().size(), 3u);
  }
  // Past the first page, while the second is held: a Stat of its own.
  const uint64_t stats = cache_->requests().stats;
  auto far = cache_->Stat("/datasets/ds/d/f02400");
  ASSERT_TRUE(far.ok()) << far.status();
  EXPECT_EQ(far->info().size(), 2400u % 7 + 1);
  EXPECT_EQ(cache_->requests().stats, stats + 1);

  std::move(join).Invoke();
  ASSERT_TRUE(testing::WaitFor([&] { return cache_->requests().lists >= 3; },
                               absl::Seconds(30)));
  absl::SleepFor(absl::Milliseconds(50));  // Its last page in the cache.
  auto cached = cache_->Stat("/datasets/ds/d/f01500");
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ(cached->info().size(), 1500u % 7 + 1);
  EXPECT_EQ(cache_->requests().stats, stats + 1);
  EXPECT_EQ(cache_->requests().lists, 3u);
}

// A directory of several pages: Stat misses while the listing for Stat
// goes on in the background get the right answers (from its pages so far,
// or their own Stat); once it is done every entry comes from the cache.
// (That a miss waits for the first page only: the test above.)
TEST_F(MetadataCacheTest, StatMissesDuringABackgroundListingAreRight) {
  constexpr int kFiles = 2500;  // Three pages.
  for (int i = 0; i < kFiles; ++i)
    Write(absl::StrFormat("d/f%05d", i), std::string(i % 7 + 1, 'x'));
  Mount(60000);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      // Spread over the pages, while the listing goes on.
      for (int i = t * 300; i < t * 300 + 20; ++i) {
        auto st = cache_->Stat(absl::StrFormat("/datasets/ds/d/f%05d", i));
        if (!st.ok() || st->info().size() != static_cast<uint64_t>(i % 7 + 1))
          ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  ASSERT_TRUE(testing::WaitFor([&] { return cache_->requests().lists >= 3; },
                               absl::Seconds(30)));
  absl::SleepFor(absl::Milliseconds(50));  // Its last page in the cache.
  const UnderStoreMetadata::Requests before = cache_->requests();
  for (int i = 0; i < kFiles; i += 97) {
    auto st = cache_->Stat(absl::StrFormat("/datasets/ds/d/f%05d", i));
    ASSERT_TRUE(st.ok()) << i << ": " << st.status();
    EXPECT_EQ(st->info().size(), static_cast<uint64_t>(i % 7 + 1));
  }
  EXPECT_EQ(cache_->requests().stats, before.stats);
  EXPECT_EQ(cache_->requests().lists, 3u);
  // Destroyed while a listing for Stat may be going on: it stops there.
  Write("e/x", "x");
  for (int i = 0; i < kFiles; ++i) Write(absl::StrFormat("e/f%05d", i), "y");
  ASSERT_TRUE(cache_->Stat("/datasets/ds/e/f00001").ok());
  ASSERT_TRUE(cache_->Stat("/datasets/ds/e/f00002").ok());
  cache_.reset();
}

// A store that failed with an outage is not asked again during its pause:
// misses of its mount fail at once, named; one try when the pause ends
// (failing: the next pause is twice as long); the first answer ends the
// outage. Another mount is asked as usual meanwhile.
TEST_F(MetadataCacheTest, AStoreThatIsDownIsNotAskedAgainDuringItsPause) {
  Write("d1/a", "aa");
  Write("d2/b", "bbb");
  Mount(1);  // Every Stat asks the store (one file a directory: no listing).
  v1::MountEntry other = mount_;
  other.set_path("/datasets/other");
  ASSERT_TRUE(registry_->Add(other).ok());
  std::shared_ptr<SwitchedStore> store = Switch();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(cache_->Stat("/datasets/ds/d1/a").ok());
  EXPECT_EQ(store->stats.load(), 1);

  store->down = true;
  absl::SleepFor(absl::Milliseconds(5));
  absl::StatusOr<v1::StatResponse> st = cache_->Stat("/datasets/ds/d1/a");
  EXPECT_EQ(st.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(store->stats.load(), 2);
  // Paused: not asked, the outage named.
  st = cache_->Stat("/datasets/ds/d2/b");
  EXPECT_EQ(st.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(st.status().message(),
                                "the under-store of /datasets/ds is down"))
      << st.status();
  EXPECT_TRUE(absl::StrContains(st.status().message(), "connection refused"))
      << st.status();
  v1::ListRequest list;
  list.set_path("/datasets/ds/d1");
  EXPECT_EQ(cache_->List(list).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(store->stats.load(), 2);
  EXPECT_EQ(store->lists.load(), 0);
  EXPECT_EQ(cache_->requests().paused, 2u);
  // The other mount's store is asked.
  st = cache_->Stat("/datasets/other/d2/b");
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->info().size(), 3u);

  // After the first pause (1 s): one try, which fails; the next pause, 2 s.
  absl::SleepFor(absl::Milliseconds(1100));
  EXPECT_FALSE(cache_->Stat("/datasets/ds/d1/a").ok());
  EXPECT_EQ(store->stats.load(), 3);
  absl::SleepFor(absl::Milliseconds(1100));
  EXPECT_FALSE(cache_->Stat("/datasets/ds/d2/b").ok());
  EXPECT_EQ(store->stats.load(), 3);

  // Up again: the try after the pause answers, and the outage is over.
  store->down = false;
  absl::SleepFor(absl::Milliseconds(1000));
  st = cache_->Stat("/datasets/ds/d2/b");
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->info().size(), 3u);
  ASSERT_TRUE(cache_->Stat("/datasets/ds/d1/a").ok());
  EXPECT_EQ(store->stats.load(), 5);
}

// Throttling is not an outage: the store still lets some requests through,
// so each miss still asks it.
TEST_F(MetadataCacheTest, AThrottlingStoreIsStillAsked) {
  Write("d1/a", "aa");
  Mount(1);
  std::shared_ptr<SwitchedStore> store = Switch();
  ASSERT_NE(store, nullptr);
  store->throttled = true;
  EXPECT_EQ(cache_->Stat("/datasets/ds/d1/a").status().code(),
            absl::StatusCode::kResourceExhausted);
  store->throttled = false;
  absl::SleepFor(absl::Milliseconds(5));
  ASSERT_TRUE(cache_->Stat("/datasets/ds/d1/a").ok());
  EXPECT_EQ(store->stats.load(), 2);
  EXPECT_EQ(cache_->requests().paused, 0u);
}

// A directory whose listing for Stat failed because the store was down is
// listed again once the store is back: one LIST, not a HEAD per file for a
// TTL (a listing refused otherwise is not retried within the TTL).
TEST_F(MetadataCacheTest, AListingThatFailedInAnOutageIsTriedAgain) {
  for (int i = 0; i < 10; ++i)
    Write(absl::StrCat("d/f", i), std::string(i + 1, 'x'));
  Mount(60000);
  std::shared_ptr<SwitchedStore> store = Switch();
  ASSERT_NE(store, nullptr);
  store->down = true;
  EXPECT_FALSE(cache_->Stat("/datasets/ds/d/f0").ok());  // Its own Stat.
  EXPECT_FALSE(cache_->Stat("/datasets/ds/d/f1").ok());  // Lists: paused.
  EXPECT_EQ(store->stats.load(), 1);
  EXPECT_EQ(store->lists.load(), 0);

  store->down = false;
  absl::SleepFor(absl::Milliseconds(1100));  // The pause.
  for (int i = 2; i < 10; ++i) {
    auto st = cache_->Stat(absl::StrCat("/datasets/ds/d/f", i));
    ASSERT_TRUE(st.ok()) << i << ": " << st.status();
    EXPECT_EQ(st->info().size(), static_cast<uint64_t>(i + 1));
  }
  // The first miss after the pause looked up alone, the next listed.
  EXPECT_EQ(store->stats.load(), 2);
  EXPECT_EQ(store->lists.load(), 1);
}

}  // namespace
}  // namespace larder
