// Copyright 2026 The Larder Authors.
//
// The cluster of tests/cluster_fixture.h, for metadata: TTLs and replaced
// objects, shared listings, the node's metadata cache, mounts added again.
#include <grpcpp/create_channel.h>
#include <signal.h>
#include <stdlib.h>

#include <atomic>
#include <cstring>
#include <map>
#include <set>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/worker_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "larder/client.h"
#include "master/membership.h"
#include "proto/master.grpc.pb.h"
#include "tests/cluster_fixture.h"
#include "tests/testing/pki.h"
#include "tests/testing/process.h"
#include "tests/testing/s3rver.h"
#include "tests/testing/shaping_proxy.h"
#include "tests/testing/worker_process.h"
#include "understore/factory.h"
#include "understore/s3_store.h"

namespace larder {
namespace {

TEST_F(ClusterTest, ReplacedObjectIsSeenAfterTheTtlAndNeverMixed) {
  auto client = Connect("elsewhere");
  ASSERT_NE(client, nullptr);
  const std::string path = "train/c1/sample-4.bin";
  auto old_file = client->Open("/datasets/ds/" + path);
  ASSERT_TRUE(old_file.ok());
  std::string buf(files_[path].size(), '\0');
  ASSERT_TRUE((*old_file)->Read(0, absl::MakeSpan(buf)).ok());
  ASSERT_TRUE(buf == files_[path]);

  const std::string fresh =
      PatternBytes(files_[path].size(), 99);  // Same size, new bytes.
  ASSERT_TRUE(store_->Put(path, fresh).ok());
  // The open file is pinned to the old version: it may still serve cached old
  // blocks, or fail with FailedPrecondition; it never returns new bytes.
  auto again = (*old_file)->Read(0, absl::MakeSpan(buf));
  if (again.ok()) {
    EXPECT_TRUE(buf == files_[path]);
  } else {
    EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition)
        << again.status();
  }
  // After the metadata TTL (1 s), a new Open sees the new version, whole.
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        auto f = client->Open("/datasets/ds/" + path);
        return f.ok() && (*f)->info().version != (*old_file)->info().version;
      },
      absl::Seconds(10)));
  auto f = client->Open("/datasets/ds/" + path);
  ASSERT_TRUE(f.ok());
  std::string now(fresh.size(), '\0');
  auto n = (*f)->Read(0, absl::MakeSpan(now));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_TRUE(now == fresh);
}

// Stat misses in one directory are answered from one listing of it, not
// one under-store request (S3 HEAD) per file; files the listing does not
// show (added since) and missing files are still looked up one by one.
TEST_F(ClusterTest, StatMissesInADirectoryShareOneListing) {
  auto store = s3_->OpenStore("many");
  ASSERT_TRUE(store.ok()) << store.status();
  constexpr int kFiles = 300;
  for (int i = 0; i < kFiles; ++i)
    ASSERT_TRUE(
        (*store)->Put(absl::StrCat("d/f", i), PatternBytes(100 + i, i)).ok());
  ASSERT_TRUE(AddMount("/datasets/many", s3_->Uri("many"), 60000));
  auto client = Connect("elsewhere");
  ASSERT_NE(client, nullptr);
  auto requests = [&](const std::string& op) {
    return master_
        ->Metric(absl::StrCat(
            "larder_master_under_store_metadata_requests{op=\"", op, "\"}"))
        .value_or(-1);
  };
  const double stats0 = requests("stat"), lists0 = requests("list");

  std::atomic<int> next{0}, bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i; (i = next++) < kFiles;) {
        const std::string rel = absl::StrCat("d/f", i);
        auto got = client->Stat(absl::StrCat("/datasets/many/", rel));
        auto want = (*store)->Stat(rel);
        if (!got.ok() || !want.ok() || got->size != want->size ||
            got->version != want->version || got->is_dir) {
          ++bad;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  // The first misses before the listing took over: at most one per thread.
  EXPECT_LE(requests("stat") - stats0, 8);
  EXPECT_LE(requests("list") - lists0, 2);

  // Added after the listing: found by its own Stat. Missing: NotFound.
  ASSERT_TRUE((*store)->Put("d/late", "late").ok());
  auto late = client->Stat("/datasets/many/d/late");
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(late->size, 4u);
  EXPECT_EQ(client->Stat("/datasets/many/d/none").status().code(),
            absl::StatusCode::kNotFound);
  // Opening and reading a file whose metadata came from the listing.
  auto f = client->Open("/datasets/many/d/f7");
  ASSERT_TRUE(f.ok()) << f.status();
  std::string buf(200, '\0');
  auto n = (*f)->Read(0, absl::MakeSpan(buf));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(buf.substr(0, *n), PatternBytes(107, 7));
}

// A directory of several pages: a lookup waits for its first page only.
// The node's worker lists the rest in the background; meanwhile a path in
// the first page is answered from it, any other by the master, and once
// the listing is done every entry comes from the node's cache.
TEST_F(ClusterTest, ALookupWaitsForTheFirstPageOfItsDirectoryOnly) {
  auto store = s3_->OpenStore("pages");
  ASSERT_TRUE(store.ok()) << store.status();
  constexpr int kFiles = 2500;  // Three pages of 1,000.
  std::atomic<int> next{0}, failed{0};
  std::vector<std::thread> seeders;
  for (int t = 0; t < 8; ++t) {
    seeders.emplace_back([&] {
      for (int i; (i = next++) < kFiles;) {
        if (!(*store)
                 ->Put(absl::StrFormat("d/f%05d", i), PatternBytes(10 + i, i))
                 .ok())
          ++failed;
      }
    });
  }
  for (auto& th : seeders) th.join();
  ASSERT_EQ(failed.load(), 0);
  // Through a front that holds each later page of a listing for 3 s: the
  // first lookup is answered while they are still to come, however loaded
  // the machine.
  auto front = testing::ShapingProxy::Start(s3_->endpoint(),
                                            {"--later_page_ms", "3000"});
  ASSERT_TRUE(front.ok()) << front.status();
  ASSERT_TRUE(AddMount("/datasets/pages",
                       (*front)->Front(s3_->Uri("pages"), s3_->endpoint()),
                       60000));
  auto client = Connect("");  // This host: the node's worker lists.
  ASSERT_NE(client, nullptr);
  auto rpcs = [&](const char* method) {
    return master_
        ->Metric(
            absl::StrCat("larder_master_rpcs_total{method=\"", method, "\"}"))
        .value_or(0);
  };
  const double lists0 = rpcs("List");

  auto first = client->Stat("/datasets/pages/d/f00001");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->size, 11u);
  // Answered after the first page, the other two still to come (the
  // second asked for, perhaps, and held).
  EXPECT_LE(rpcs("List") - lists0, 2);
  auto kept = [&] {
    double n = 0;
    for (const auto& w : workers_)
      n += w->Metric("larder_worker_metadata_entries").value_or(0);
    return n;
  };
  EXPECT_LT(kept(), kFiles);
  // In the third page, while the listing goes on: the master's answer.
  auto third = client->Stat("/datasets/pages/d/f02400");
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(third->size, 2410u);
  EXPECT_EQ(client->Stat("/datasets/pages/d/none").status().code(),
            absl::StatusCode::kNotFound);

  // The whole listing, kept (the node's cache holds every entry: not just
  // the master's third List answered, which a loaded machine may take a
  // while to keep): later lookups cost the master nothing.
  ASSERT_TRUE(
      testing::WaitFor([&] { return kept() >= kFiles; }, absl::Seconds(30)));
  EXPECT_EQ(rpcs("List") - lists0, 3);
  const double stats = rpcs("Stat"), lists = rpcs("List");
  auto fresh = Connect("");  // A process with an empty cache of its own.
  ASSERT_NE(fresh, nullptr);
  for (int i : {0, 999, 1000, 1999, 2000, 2499}) {
    auto s = fresh->Stat(absl::StrFormat("/datasets/pages/d/f%05d", i));
    ASSERT_TRUE(s.ok()) << i << ": " << s.status();
    EXPECT_EQ(s->size, static_cast<uint64_t>(10 + i));
  }
  EXPECT_EQ(rpcs("Stat"), stats);
  EXPECT_EQ(rpcs("List"), lists);
}

// One metadata cache per node: processes on a node (here: clients, each
// with a cache of its own) that stat the same files cost the master one
// List per directory in all (the node's worker lists a file's directory on
// its first miss there), not a Stat per file, nor one per process (a path
// that no listing has is Stat'ed, once); the others are answered by the
// node's worker. An invalidation reaches every one
// of them, and a process that has heard of it never gets the dropped answer
// back from the worker, even before the worker's own heartbeat tells it.
TEST_F(ClusterTest, ProcessesOnANodeShareOneMetadataCache) {
  ASSERT_TRUE(AddMount("/datasets/node", s3_->Uri("ds"), 60000));
  auto rpcs = [&](const char* method) {
    return master_
        ->Metric(
            absl::StrCat("larder_master_rpcs_total{method=\"", method, "\"}"))
        .value_or(0);
  };
  auto stats = [&] { return rpcs("Stat") + rpcs("List"); };
  std::vector<std::string> paths;
  std::set<std::string> dirs;
  for (const auto& [path, data] : files_) {
    paths.push_back("/datasets/node/" + path);
    dirs.insert(paths.back().substr(0, paths.back().rfind('/')));
  }
  paths.push_back("/datasets/node/train/none.bin");  // NotFound: kept too.
  dirs.insert("/datasets/node/train");
  const double before = stats(), stat_before = rpcs("Stat");
  constexpr int kProcesses = 4;
  std::vector<std::unique_ptr<Client>> clients;
  for (int p = 0; p < kProcesses; ++p) {
    clients.push_back(Connect(""));  // This host: the node's workers.
    ASSERT_TRUE(clients.back());
  }
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int p = 0; p < kProcesses; ++p) {
    threads.emplace_back([&, p] {
      for (const std::string& path : paths) {
        absl::StatusOr<FileInfo> s = clients[p]->Stat(path);
        const std::string rel = path.substr(strlen("/datasets/node/"));
        if (files_.count(rel)
                ? !s.ok() || s->size != files_[rel].size()
                : s.status().code() != absl::StatusCode::kNotFound)
          ++bad;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  // One List per directory, and a Stat for the path no listing has,
  // whatever the number of processes.
  EXPECT_EQ(rpcs("Stat") - stat_before, 1);
  EXPECT_EQ(stats() - before, dirs.size() + 1);
  // Every answer came from the node's worker; it asked the master once per
  // directory and answered the rest from its cache.
  uint64_t node_answers = 0;
  for (auto& c : clients) node_answers += c->stats().metadata_node_hits;
  EXPECT_EQ(node_answers, kProcesses * paths.size());
  auto worker_count = [&](const std::string& result) {
    double sum = 0;
    for (const auto& w : workers_) {
      sum += w->Metric(absl::StrCat(
                           "larder_worker_metadata_requests_total{result=\"",
                           result, "\"}"))
                 .value_or(0);
    }
    return sum;
  };
  const double misses = worker_count("miss");
  EXPECT_GE(misses, dirs.size());
  EXPECT_LE(misses, paths.size());
  EXPECT_EQ(worker_count("hit") + misses, kProcesses * paths.size());
  const double per_file = stats();
  for (int i = 0; i < 4; ++i) {  // Another "epoch" of fresh processes.
    auto fresh = Connect("");
    ASSERT_TRUE(fresh);
    for (const std::string& path : paths) (void)fresh->Stat(path);
  }
  EXPECT_EQ(stats(), per_file);
  EXPECT_EQ(worker_count("hit") + misses, (kProcesses + 4) * paths.size());

  // Replaced and invalidated: a process that starts after the invalidation
  // sees the new version at once; the processes that held the old answer
  // see it once they hear of the invalidation (ring_refresh, 200 ms).
  const std::string rel = "train/c0/sample-0.bin";
  const std::string path = "/datasets/node/" + rel;
  const std::string old_version = clients[0]->Stat(path)->version;
  const std::string fresh_bytes = PatternBytes(files_[rel].size() + 7, 77);
  ASSERT_TRUE(store_->Put(rel, fresh_bytes).ok());
  {
    v1::InvalidateRequest req;
    req.set_path(path);
    v1::InvalidateResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->Invalidate(&ctx, req, &resp).ok());
  }
  auto late = Connect("");
  ASSERT_TRUE(late);
  absl::StatusOr<FileInfo> seen = late->Stat(path);
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_NE(seen->version, old_version);
  EXPECT_EQ(seen->size, fresh_bytes.size());
  for (auto& c : clients) {
    EXPECT_TRUE(testing::WaitFor(
        [&] {
          absl::StatusOr<FileInfo> s = c->Stat(path);
          return s.ok() && s->version == seen->version;
        },
        absl::Seconds(10)));
  }
  auto f = late->Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  std::string buf(fresh_bytes.size(), '\0');
  auto n = (*f)->Read(0, absl::MakeSpan(buf));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_TRUE(buf == fresh_bytes);
}

// A cache keeps an answer for what is left of its TTL where it came from,
// not a whole TTL again: an object replaced on the under-store is seen by
// every client within one TTL of the master's first look at it, whether the
// answer went master -> client or master -> node cache -> client.
TEST_F(ClusterTest, AReplacedObjectIsSeenWithinOneTtlNotTwo) {
  constexpr int kTtlMs = 4000;
  ASSERT_TRUE(AddMount("/datasets/age", s3_->Uri("ds"), kTtlMs));
  const std::string rel = "train/c2/sample-5.bin";
  const std::string path = "/datasets/age/" + rel;
  auto first = Connect("elsewhere");  // Fills the master's cache only.
  ASSERT_TRUE(first);
  const absl::Time t0 = absl::Now();
  absl::StatusOr<FileInfo> old_info = first->Stat(path);
  ASSERT_TRUE(old_info.ok()) << old_info.status();
  absl::SleepFor(absl::Milliseconds(kTtlMs * 3 / 4));
  // Three quarters of the TTL later: a remote client, and a local one whose
  // miss goes through the node's worker, each look for the first time.
  auto remote = Connect("elsewhere");
  auto local = Connect("");
  ASSERT_TRUE(remote && local);
  ASSERT_EQ(remote->Stat(path)->version, old_info->version);
  ASSERT_EQ(local->Stat(path)->version, old_info->version);
  EXPECT_EQ(local->stats().metadata_node_hits, 1u);
  const std::string fresh = PatternBytes(files_[rel].size() + 3, 55);
  ASSERT_TRUE(store_->Put(rel, fresh).ok());
  for (Client* c : {remote.get(), local.get()}) {
    ASSERT_TRUE(testing::WaitFor(
        [&] {
          absl::StatusOr<FileInfo> s = c->Stat(path);
          return s.ok() && s->size == fresh.size();
        },
        absl::Seconds(15)));
    // Kept for a whole TTL from its own look, it would be seen only after
    // t0 + 1.75 TTL (7 s).
    EXPECT_LT(absl::Now() - t0, absl::Milliseconds(kTtlMs + 1500));
  }
}

// `larder mount` of a mount that is there already (a start-up Job on every
// upgrade) changes nothing: not the table's version, and no invalidation
// that would drop every client's metadata cache; a new mount does both.
TEST_F(ClusterTest, TheSameMountAgainChangesNothing) {
  const v1::Ring before = Ring();
  ASSERT_TRUE(AddMount("/datasets/ds", s3_->Uri("ds"), 1000));
  const v1::Ring again = Ring();
  EXPECT_EQ(again.mounts_version(), before.mounts_version());
  EXPECT_EQ(again.invalidation_seq(), before.invalidation_seq());
  ASSERT_TRUE(AddMount("/datasets/other", s3_->Uri("ds"), 1000));
  const v1::Ring after = Ring();
  EXPECT_GT(after.mounts_version(), before.mounts_version());
  EXPECT_GT(after.invalidation_seq(), before.invalidation_seq());
}

}  // namespace
}  // namespace larder
