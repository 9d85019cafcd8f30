// Copyright 2026 The Larder Authors.
//
// MetadataView against a fake backend (no master, no worker): the order of
// the answers (own cache, listing, node, master), TTL ages, stale-if-error,
// and invalidations.
#include "client/metadata_view.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "gtest/gtest.h"

namespace larder {
namespace {

class FakeBackend : public MetadataView::Backend {
 public:
  absl::StatusOr<v1::StatResponse> MasterStat(
      const std::string& path) override {
    ++master_stats;
    if (!master_up) return absl::UnavailableError("master down");
    if (!store_up) {
      return MarkStoreError(absl::UnavailableError(
          "HEAD http://127.0.0.1:1/b/a: Couldn't connect to server"));
    }
    auto it = files.find(path);
    if (it == files.end()) return absl::NotFoundError("no " + path);
    v1::StatResponse r;
    r.mutable_info()->set_path(path);
    r.mutable_info()->set_size(it->second);
    r.set_mount("/m");
    r.set_relative(path.substr(3));
    r.set_block_size(4 << 20);
    r.set_ttl_remaining_ms(ttl_remaining_ms);
    return r;
  }
  absl::StatusOr<v1::ListResponse> MasterList(
      const std::string& path, const std::string& page_token) override {
    ++master_lists;
    if (!master_up) return absl::UnavailableError("master down");
    v1::ListResponse r;
    for (const auto& [p, size] : files) {
      if (p.rfind(path + "/", 0) != 0) continue;
      v1::ObjectInfo* e = r.add_entries();
      e->set_path(p);
      e->set_size(size);
    }
    r.set_ttl_remaining_ms(ttl_remaining_ms);
    return r;
  }
  absl::StatusOr<v1::GetInvalidationsResponse> MasterInvalidations(
      uint64_t epoch, uint64_t after_seq) override {
    v1::GetInvalidationsResponse r = invalidations;
    asked_after.push_back(after_seq);
    (void)epoch;
    return r;
  }
  std::optional<NodeAnswer> NodeStat(const std::string& path, uint64_t epoch,
                                     uint64_t seq) override {
    ++node_stats;
    node_seen = {epoch, seq};
    if (node_store_down) {
      return NodeAnswer{{MarkStoreError(absl::UnavailableError(
                             "HEAD http://127.0.0.1:1/b/a: no answer")),
                         {}},
                        absl::ZeroDuration()};
    }
    auto it = node.find(path);
    if (it == node.end()) return std::nullopt;
    NodeAnswer a;
    a.stat.response.mutable_info()->set_path(path);
    a.stat.response.mutable_info()->set_size(it->second);
    a.ttl = node_ttl;
    return a;
  }
  std::optional<v1::MountEntry> MountOf(const std::string& key) override {
    if (key.rfind("/m/", 0) != 0) return std::nullopt;
    v1::MountEntry m;
    m.set_path("/m");
    m.set_block_size(4 << 20);
    m.set_metadata_ttl_ms(60000);
    return m;
  }

  std::map<std::string, uint64_t> files;  // The master's truth.
  std::map<std::string, uint64_t> node;   // What the node's cache answers.
  bool master_up = true;
  bool store_up = true;  // Else the master says its store did not answer.
  bool node_store_down = false;  // Likewise, said by the node's worker.
  uint64_t ttl_remaining_ms = 0;
  absl::Duration node_ttl = absl::Seconds(30);
  v1::GetInvalidationsResponse invalidations;
  std::vector<uint64_t> asked_after;
  std::pair<uint64_t, uint64_t> node_seen;
  int master_stats = 0, master_lists = 0, node_stats = 0;
};

class MetadataViewTest : public ::testing::Test {
 protected:
  MetadataView View(absl::Duration stale_window = absl::Hours(1)) {
    return MetadataView({.stale_window = stale_window, .master = "m:1"},
                        std::make_shared<NodeMetadataCache>(), &backend_);
  }
  FakeBackend backend_;
};

TEST_F(MetadataViewTest, ANodeAnswerComesBeforeTheMasterAndIsKept) {
  backend_.files = {{"/m/a", 1}, {"/m/b", 2}};
  backend_.node = {{"/m/a", 1}};
  MetadataView view = View();
  view.StartFrom(7, 3);
  ASSERT_EQ(view.Stat("/m/a")->info().size(), 1u);
  EXPECT_EQ(backend_.node_stats, 1);
  EXPECT_EQ(backend_.master_stats, 0);
  EXPECT_EQ(backend_.node_seen, (std::pair<uint64_t, uint64_t>{7, 3}));
  // Kept: asked nobody again.
  ASSERT_TRUE(view.Stat("/m/a").ok());
  EXPECT_EQ(backend_.node_stats, 1);
  // The node does not answer for b: the master does; NotFound is kept too.
  ASSERT_EQ(view.Stat("/m/b")->info().size(), 2u);
  EXPECT_EQ(view.Stat("/m/none").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(view.Stat("/m/none").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(backend_.master_stats, 2);
  // Outside the client's mounts the node is not asked.
  (void)view.Stat("/elsewhere/x");
  EXPECT_EQ(backend_.node_stats, 3);  // a, b, none; not /elsewhere.
  const MetadataView::Counters c = view.counters();
  EXPECT_EQ(c.node_hits, 1u);
  EXPECT_EQ(c.misses, 3u);
  EXPECT_EQ(c.hits, 2u);
}

TEST_F(MetadataViewTest, AnswersAreKeptForWhatIsLeftOfTheirTtl) {
  backend_.files = {{"/m/a", 1}};
  backend_.ttl_remaining_ms = 50;  // The master had it cached already.
  MetadataView view = View();
  ASSERT_TRUE(view.Stat("/m/a").ok());
  ASSERT_TRUE(view.Stat("/m/a").ok());
  EXPECT_EQ(backend_.master_stats, 1);
  absl::SleepFor(absl::Milliseconds(80));
  backend_.files["/m/a"] = 9;
  EXPECT_EQ(view.Stat("/m/a")->info().size(), 9u);
  EXPECT_EQ(backend_.master_stats, 2);
  // The node's ttl likewise.
  backend_.node = {{"/m/n", 5}};
  backend_.node_ttl = absl::Milliseconds(50);
  ASSERT_TRUE(view.Stat("/m/n").ok());
  absl::SleepFor(absl::Milliseconds(80));
  ASSERT_TRUE(view.Stat("/m/n").ok());
  EXPECT_EQ(backend_.node_stats, 4);  // /m/a twice, /m/n twice.
}

TEST_F(MetadataViewTest, AListingAnswersStatsBelowIt) {
  backend_.files = {{"/m/d/x", 1}, {"/m/d/y", 2}};
  MetadataView view = View();
  auto listing = view.ListDir("/m/d");
  ASSERT_TRUE(listing.ok()) << listing.status();
  ASSERT_EQ((*listing)->size(), 2u);
  EXPECT_EQ(view.Stat("/m/d/y")->info().size(), 2u);
  EXPECT_EQ(view.Stat("/m/d/y")->relative(), "d/y");
  EXPECT_EQ(view.Stat("/m/d/z").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(backend_.master_stats, 0);
  EXPECT_EQ(backend_.node_stats, 0);
  EXPECT_EQ(backend_.master_lists, 1);
}

TEST_F(MetadataViewTest, CachedStatAnswersOnlyFromTheCacheAndAsksNobody) {
  backend_.files = {{"/m/a", 1}, {"/m/d/x", 3}};
  backend_.ttl_remaining_ms = 50;
  MetadataView view = View();
  // Nothing cached: no answer, and nobody asked.
  EXPECT_FALSE(view.CachedStat("/m/a").has_value());
  EXPECT_FALSE(view.CachedStat("/m/none").has_value());
  EXPECT_EQ(backend_.master_stats + backend_.node_stats, 0);
  // Found and NotFound, once Stat has them.
  ASSERT_TRUE(view.Stat("/m/a").ok());
  ASSERT_FALSE(view.Stat("/m/none").ok());
  const int asked = backend_.master_stats + backend_.node_stats;
  std::optional<absl::StatusOr<v1::StatResponse>> a = view.CachedStat("/m/a");
  ASSERT_TRUE(a.has_value());
  ASSERT_TRUE(a->ok());
  EXPECT_EQ((*a)->info().size(), 1u);
  std::optional<absl::StatusOr<v1::StatResponse>> none =
      view.CachedStat("/m/none");
  ASSERT_TRUE(none.has_value());
  EXPECT_EQ(none->status().code(), absl::StatusCode::kNotFound);
  // From a directory's listing too.
  ASSERT_TRUE(view.ListDir("/m/d").ok());
  std::optional<absl::StatusOr<v1::StatResponse>> x = view.CachedStat("/m/d/x");
  ASSERT_TRUE(x.has_value() && x->ok());
  EXPECT_EQ((*x)->info().size(), 3u);
  EXPECT_EQ(backend_.master_stats + backend_.node_stats, asked);
  // Expired: no answer (the caller asks with Stat, where it may wait).
  absl::SleepFor(absl::Milliseconds(80));
  EXPECT_FALSE(view.CachedStat("/m/a").has_value());
  EXPECT_EQ(backend_.master_stats + backend_.node_stats, asked);
  // A malformed path is an answer: InvalidArgument.
  std::optional<absl::StatusOr<v1::StatResponse>> bad = view.CachedStat("m/a");
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(MetadataViewTest, ExpiredAnswersAreServedWhileTheMasterIsDown) {
  backend_.files = {{"/m/a", 1}};
  backend_.ttl_remaining_ms = 1;
  MetadataView view = View();
  ASSERT_TRUE(view.Stat("/m/a").ok());
  absl::SleepFor(absl::Milliseconds(5));
  backend_.master_up = false;
  absl::StatusOr<v1::StatResponse> s = view.Stat("/m/a");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->info().size(), 1u);
  EXPECT_EQ(view.counters().stale, 1u);
  // For a second the master is not asked again while a stale answer can
  // be served.
  const int asked = backend_.master_stats;
  ASSERT_TRUE(view.Stat("/m/a").ok());
  EXPECT_EQ(backend_.master_stats, asked);
  // A name never seen fails, named.
  EXPECT_EQ(view.Stat("/m/new").status().code(),
            absl::StatusCode::kUnavailable);
}

// The master is up but its store is not (each try costs the store's
// retries there): after one failed try the mount's expired entries are
// served without asking, for a pause that doubles while the store stays
// down and ends at its first answer.
TEST_F(MetadataViewTest,
       ExpiredAnswersAreServedWithoutAskingWhileTheStoreIsDown) {
  backend_.files = {{"/m/a", 1}, {"/m/b", 2}};
  backend_.ttl_remaining_ms = 1;
  MetadataView view = View();
  ASSERT_TRUE(view.Stat("/m/a").ok());
  ASSERT_TRUE(view.Stat("/m/b").ok());
  absl::SleepFor(absl::Milliseconds(5));
  backend_.store_up = false;
  EXPECT_EQ(view.Stat("/m/a")->info().size(), 1u);  // Asked: the store is down.
  EXPECT_EQ(backend_.master_stats, 3);
  EXPECT_EQ(view.Stat("/m/b")->info().size(), 2u);  // Not asked.
  EXPECT_EQ(view.Stat("/m/a")->info().size(), 1u);
  EXPECT_EQ(backend_.master_stats, 3);
  EXPECT_EQ(view.counters().stale, 3u);
  // A name never seen is asked for, and fails, named.
  absl::StatusOr<v1::StatResponse> fresh = view.Stat("/m/new");
  EXPECT_EQ(fresh.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(IsStoreError(fresh.status())) << fresh.status();
  EXPECT_EQ(backend_.master_stats, 4);
  // After the first pause (1 s) one try; it fails: the next pause is 2 s.
  absl::SleepFor(absl::Milliseconds(1100));
  EXPECT_TRUE(view.Stat("/m/a").ok());
  EXPECT_EQ(backend_.master_stats, 5);
  absl::SleepFor(absl::Milliseconds(1100));
  EXPECT_TRUE(view.Stat("/m/b").ok());
  EXPECT_EQ(backend_.master_stats, 5);
  // The store answers again: the first try after the pause ends it.
  absl::SleepFor(absl::Milliseconds(1000));
  backend_.store_up = true;
  backend_.files["/m/b"] = 7;
  EXPECT_EQ(view.Stat("/m/b")->info().size(), 7u);
  EXPECT_EQ(view.Stat("/m/a")->info().size(), 1u);
  EXPECT_EQ(backend_.master_stats, 7);
}

// The node's worker asked the master, whose store did not answer: the
// client does not ask the master the same again.
TEST_F(MetadataViewTest, ANodesStoreErrorIsNotAskedOfTheMasterAgain) {
  backend_.files = {{"/m/a", 1}};
  backend_.node = {{"/m/a", 1}};
  backend_.node_ttl = absl::Milliseconds(1);
  MetadataView view = View();
  ASSERT_TRUE(view.Stat("/m/a").ok());
  absl::SleepFor(absl::Milliseconds(5));
  backend_.node_store_down = true;
  EXPECT_EQ(view.Stat("/m/a")->info().size(), 1u);
  EXPECT_EQ(view.counters().stale, 1u);
  absl::StatusOr<v1::StatResponse> fresh = view.Stat("/m/new");
  EXPECT_EQ(fresh.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(IsStoreError(fresh.status())) << fresh.status();
  EXPECT_EQ(backend_.node_stats, 3);
  EXPECT_EQ(backend_.master_stats, 0);
}

TEST_F(MetadataViewTest, NothingStaleIsServedPastTheWindow) {
  backend_.files = {{"/m/a", 1}};
  backend_.ttl_remaining_ms = 1;
  MetadataView view = View(/*stale_window=*/absl::Milliseconds(1));
  ASSERT_TRUE(view.Stat("/m/a").ok());
  absl::SleepFor(absl::Milliseconds(10));
  backend_.master_up = false;
  EXPECT_EQ(view.Stat("/m/a").status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(MetadataViewTest, InvalidationsDropWhatTheyNameAndCallTheHook) {
  backend_.files = {{"/m/a", 1}, {"/m/b", 2}};
  MetadataView view = View();
  std::vector<std::string> heard;
  view.SetInvalidationHook([&](const std::string& p) { heard.push_back(p); });
  view.SyncInvalidations(5, 1);  // The first ring: nothing to drop.
  EXPECT_TRUE(backend_.asked_after.empty());
  ASSERT_TRUE(view.Stat("/m/a").ok());
  ASSERT_TRUE(view.Stat("/m/b").ok());
  backend_.files["/m/a"] = 10;
  backend_.invalidations.set_epoch(5);
  backend_.invalidations.set_seq(2);
  backend_.invalidations.add_paths("/m/a");
  view.SyncInvalidations(5, 2);
  EXPECT_EQ(backend_.asked_after, std::vector<uint64_t>{1});
  EXPECT_EQ(heard, std::vector<std::string>{"/m/a"});
  EXPECT_EQ(view.invalidations(), (std::pair<uint64_t, uint64_t>{5, 2}));
  EXPECT_EQ(view.Stat("/m/a")->info().size(), 10u);
  const int asked = backend_.master_stats;
  ASSERT_TRUE(view.Stat("/m/b").ok());  // Still cached.
  EXPECT_EQ(backend_.master_stats, asked);
  // A new epoch (a restarted master): everything goes.
  backend_.invalidations.Clear();
  backend_.invalidations.set_epoch(6);
  backend_.invalidations.set_seq(0);
  backend_.invalidations.set_reset(true);
  view.SyncInvalidations(6, 0);
  EXPECT_EQ(heard.back(), "/");
  ASSERT_TRUE(view.Stat("/m/b").ok());
  EXPECT_EQ(backend_.master_stats, asked + 1);
}

}  // namespace
}  // namespace larder
