// Copyright 2026 The Larder Authors.
//
// hdfs:// specifics against the WebHDFS stand-in (tests/servers/
// webhdfs_server.py): simple auth and delegation tokens, AccessControl and
// RemoteException errors, a stopped server; and a namenode that misbehaves:
// redirects to places a client must not go, listings that never advance or
// never end, trees deeper than a walk should follow. The behaviour every
// backend shares is in understore_conformance_test.
#include "understore/hdfs_store.h"

#include <net/if.h>
#include <netinet/in.h>

#include <filesystem>
#include <functional>
#include <future>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/process.h"
#include "tests/testing/webhdfs.h"
#include "understore/factory.h"
#include "understore/testing/tcp_listener.h"

namespace larder {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

UnderStoreOptions Options(std::map<std::string, std::string> env = {}) {
  UnderStoreOptions o;
  o.http.retry.max_attempts = 3;
  o.http.retry.initial_backoff = absl::Milliseconds(5);
  o.env = [env](absl::string_view name) -> std::optional<std::string> {
    auto it = env.find(std::string(name));
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  return o;
}

TEST(HdfsStoreTest, SimpleAuthAndDelegationTokens) {
  testing::WebHdfs::Options so;
  so.token = "tok-3f9a-secret";
  auto server = testing::WebHdfs::Start(so);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->Put("data/a.bin", "0123456789").ok());

  // user.name from the URI, or from HADOOP_USER_NAME.
  auto store = OpenUnderStore((*server)->Uri("data"), Options());
  ASSERT_TRUE(store.ok()) << store.status();
  auto info = (*store)->Stat("a.bin");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->size, 10u);
  const std::string bare =
      absl::StrCat("hdfs://127.0.0.1:", (*server)->port(), "/data");
  store = OpenUnderStore(bare, Options({{"HADOOP_USER_NAME", "larder"}}));
  ASSERT_TRUE(store.ok());
  EXPECT_TRUE((*store)->Stat("a.bin").ok());

  // No identity at all, or the wrong user: PermissionDenied that says how.
  store = OpenUnderStore(bare, Options());
  ASSERT_TRUE(store.ok());
  auto denied = (*store)->Stat("a.bin");
  EXPECT_EQ(denied.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(denied.status().message(), HasSubstr("HADOOP_USER_NAME"));
  store = OpenUnderStore(bare + "?user=mallory", Options());
  EXPECT_EQ((*store)->Stat("a.bin").status().code(),
            absl::StatusCode::kPermissionDenied);

  // A delegation token from the environment; a forged one is refused and
  // never shows up in an error.
  store = OpenUnderStore(
      bare, Options({{"HDFS_DELEGATION_TOKEN", "tok-3f9a-secret"}}));
  ASSERT_TRUE(store.ok());
  char buf[10];
  auto n = (*store)->ReadRange("a.bin", 3, absl::MakeSpan(buf, 4), "");
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(std::string(buf, *n), "3456");
  store = OpenUnderStore(
      bare, Options({{"HDFS_DELEGATION_TOKEN", "tok-forged-value"}}));
  denied = (*store)->Stat("a.bin");
  EXPECT_EQ(denied.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(denied.status().ToString(), Not(HasSubstr("tok-forged-value")));
}

TEST(HdfsStoreTest, RemoteExceptionsMapToNamedErrors) {
  testing::WebHdfs::Options so;
  so.deny = {"/data/secret"};
  auto server = testing::WebHdfs::Start(so);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->Put("data/secret/x", "hidden").ok());
  ASSERT_TRUE((*server)->Put("data/open/y", "visible").ok());
  auto store = OpenUnderStore((*server)->Uri("data"), Options());
  ASSERT_TRUE(store.ok());
  char buf[16];

  auto st = (*store)->Stat("secret/x");
  EXPECT_EQ(st.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(st.status().message(), HasSubstr("AccessControlException"));
  EXPECT_EQ((*store)
                ->ReadRange("secret/x", 0, absl::MakeSpan(buf), "")
                .status()
                .code(),
            absl::StatusCode::kPermissionDenied);
  st = (*store)->Stat("open/missing");
  EXPECT_EQ(st.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(st.status().message(), HasSubstr("FileNotFoundException"));
  EXPECT_EQ(
      (*store)->ReadRange("open", 0, absl::MakeSpan(buf), "").status().code(),
      absl::StatusCode::kInvalidArgument);  // A directory.
  ListOptions lo;
  EXPECT_EQ((*store)->List("open/y", lo).status().code(),
            absl::StatusCode::kInvalidArgument);  // A file.
  EXPECT_EQ(
      (*store)->ReadRange("open/y", 8, absl::MakeSpan(buf), "").status().code(),
      absl::StatusCode::kOutOfRange);
  EXPECT_EQ((*store)
                ->ReadRange("open/y", 0, absl::MakeSpan(buf), "123-7")
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);  // Another version.
  // Unknown options are named.
  auto bad =
      OpenUnderStore((*server)->Uri("data") + "&replication=3", Options());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("replication"));
}

// The namenode lists a directory's children in the order of their names'
// bytes taken as signed (UTF-8 names first), and LISTSTATUS_BATCH's
// startAfter follows that order: every name is listed once, at any batch
// and page size, flat and recursive. (Compared as unsigned, a batch that
// ended with a UTF-8 name dropped the ASCII names after it.)
TEST(HdfsStoreTest, ListingsFollowTheNamenodesOrder) {
  testing::WebHdfs::Options so;
  so.batch = 1;
  auto server = testing::WebHdfs::Start(so);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::set<std::string> names = {"a.txt", "\xc3\xa9t\xc3\xa9.txt", "b",
                                       "z", "\xe6\x97\xa5\xe6\x9c\xac.bin"};
  for (const std::string& n : names)
    ASSERT_TRUE((*server)->Put("data/" + n, n).ok());
  auto store = OpenUnderStore((*server)->Uri("data"), Options());
  ASSERT_TRUE(store.ok());
  for (bool recursive : {false, true}) {
    for (size_t page_size : {1, 2, 1000}) {
      std::multiset<std::string> seen;
      absl::Status st = ListAll(
          **store, "", recursive,
          [&](const ObjectInfo& e) {
            seen.insert(e.path);
            return absl::OkStatus();
          },
          page_size);
      ASSERT_TRUE(st.ok()) << st;
      EXPECT_EQ(seen, std::multiset<std::string>(names.begin(), names.end()))
          << "recursive " << recursive << ", page size " << page_size;
    }
  }
  EXPECT_TRUE(webhdfs::NameAfter("a", "\xc3\xa9"));
  EXPECT_FALSE(webhdfs::NameAfter("\xc3\xa9", "a"));
  EXPECT_TRUE(webhdfs::NameAfter("ab", "a"));
  EXPECT_FALSE(webhdfs::NameAfter("a", "a"));
}

// A namenode before Hadoop 2.8 does not know LISTSTATUS_BATCH and says so
// with a 400 IllegalArgumentException: listings fall back to LISTSTATUS.
TEST(HdfsStoreTest, NamenodesWithoutBatchListingsAreListedWhole) {
  testing::WebHdfs::Options so;
  so.old_namenode = true;
  auto server = testing::WebHdfs::Start(so);
  ASSERT_TRUE(server.ok()) << server.status();
  for (const char* f : {"d/a", "d/b", "d/sub/c"})
    ASSERT_TRUE((*server)->Put(f, f).ok());
  auto store = OpenUnderStore((*server)->Uri("d"), Options());
  ASSERT_TRUE(store.ok());
  for (bool recursive : {false, true}) {
    std::vector<std::string> seen;
    absl::Status st = ListAll(
        **store, "", recursive,
        [&](const ObjectInfo& e) {
          seen.push_back(e.path);
          return absl::OkStatus();
        },
        1);
    ASSERT_TRUE(st.ok()) << st;
    const std::vector<std::string> want =
        recursive ? std::vector<std::string>{"a", "b", "sub/c"}
                  : std::vector<std::string>{"a", "b", "sub"};
    EXPECT_EQ(seen, want);
  }
}

// WebHDFS answers a standby namenode's StandbyException with 403, as it
// does every IOException: it is retried (Unavailable), not taken for a
// denied permission.
TEST(HdfsStoreTest, AStandbyNamenodeIsUnavailableNotADenial) {
  testing::WebHdfs::Options so;
  so.standby = 2;
  auto server = testing::WebHdfs::Start(so);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->Put("d/f", "abc").ok());
  auto store = OpenUnderStore((*server)->Uri("d"), Options());
  ASSERT_TRUE(store.ok());
  auto info = (*store)->Stat("f");  // Two standby answers, then the file.
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->size, 3u);

  so.standby = 100;
  server = testing::WebHdfs::Start(so);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->Put("d/f", "abc").ok());
  store = OpenUnderStore((*server)->Uri("d"), Options());
  ASSERT_TRUE(store.ok());
  info = (*store)->Stat("f");
  EXPECT_EQ(info.status().code(), absl::StatusCode::kUnavailable)
      << info.status();
  EXPECT_THAT(info.status().message(), HasSubstr("StandbyException"));
}

TEST(HdfsStoreTest, StoppedServerIsUnavailableThenRecovers) {
  auto server = testing::WebHdfs::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->Put("d/f", "abc").ok());
  auto store = OpenUnderStore((*server)->Uri("d"), Options());
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Stat("f").ok());
  (*server)->Kill();
  const absl::Time start = absl::Now();
  auto st = (*store)->Stat("f");
  EXPECT_EQ(st.status().code(), absl::StatusCode::kUnavailable) << st.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  // Same ports after a restart? The stand-in picks fresh ones if taken; the
  // store is re-opened on the server's current URI.
  ASSERT_TRUE((*server)->Restart().ok());
  store = OpenUnderStore((*server)->Uri("d"), Options());
  ASSERT_TRUE(store.ok());
  char buf[3];
  auto n = (*store)->ReadRange("f", 0, absl::MakeSpan(buf), "");
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(std::string(buf, *n), "abc");
}

// A namenode whose OPEN redirects to `location`, with file d/f staged.
std::unique_ptr<testing::WebHdfs> RedirectingNamenode(
    const std::string& location, const std::string& host = "127.0.0.1") {
  testing::WebHdfs::Options so;
  so.open_redirect = location;
  so.host = host;
  auto server = testing::WebHdfs::Start(so);
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return nullptr;
  EXPECT_TRUE((*server)->Put("d/f", "0123456789").ok());
  return *std::move(server);
}

// Short timeouts: before the policy existed, a redirect to an unroutable
// address only failed once the connection attempts timed out.
UnderStoreOptions Quick() {
  UnderStoreOptions o = Options();
  o.http.connect_timeout = absl::Seconds(1);
  o.http.request_timeout = absl::Seconds(5);
  return o;
}

// Reads d/f through `uri` into a buffer of 'Z's; the status, and whether the
// buffer was left untouched.
absl::Status ReadThrough(const std::string& uri, bool* untouched) {
  auto store = OpenUnderStore(uri, Quick());
  if (!store.ok()) return store.status();
  std::string buf(10, 'Z');
  auto n = (*store)->ReadRange("f", 0, absl::MakeSpan(buf), "");
  *untouched = buf == std::string(10, 'Z');
  return n.status();
}

// A Location the namenode has no business sending a client to is refused
// before any connection, as PermissionDenied naming the host and the rule:
// other protocols aimed at a local port (dict://, gopher://: an SSRF into
// memcached or redis), a local file, the cloud metadata endpoint (in two
// spellings). The listener they point at sees no connection, no byte
// reaches the caller's buffer.
TEST(HdfsRedirectTest, RefusedLocationsAreNeverFetched) {
  testing::TcpListener target;
  ASSERT_GT(target.port(), 0);
  const std::string t = absl::StrCat("127.0.0.1:", target.port());
  struct Case {
    std::string location, rule, host;
  };
  for (const Case& c : std::vector<Case>{
           {absl::StrCat("dict://", t, "/info"), "scheme", "127.0.0.1"},
           {absl::StrCat("gopher://", t, "/_SET%20owned%201"), "scheme",
            "127.0.0.1"},
           {"file:///etc/passwd", "scheme", ""},
           // Link-local and metadata addresses are refused by the same
           // policy (redirect_policy_test): they are not tried live, where
           // a regression would send a request off this machine.
       }) {
    SCOPED_TRACE(c.location);
    auto server = RedirectingNamenode(c.location);
    ASSERT_NE(server, nullptr);
    bool untouched = false;
    const absl::Time start = absl::Now();
    absl::Status st = ReadThrough(server->Uri("d"), &untouched);
    EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied) << st;
    EXPECT_THAT(std::string(st.message()),
                HasSubstr(absl::StrCat("(", c.rule, " rule)")));
    EXPECT_THAT(std::string(st.message()),
                HasSubstr(absl::StrCat("'", c.host, "'")));
    EXPECT_THAT(std::string(st.message()), Not(HasSubstr("meta-data")));
    EXPECT_TRUE(untouched);
    EXPECT_LT(absl::Now() - start, absl::Seconds(3));  // No connect timeout.
  }
  EXPECT_EQ(target.accepted(), 0);
}

// Runs `fn` on its own thread. Should it still run after `limit` (the
// listing loops), the namenode is killed so that it returns, and the test
// fails: a hang becomes a failure instead of a ctest timeout.
absl::Status Bounded(testing::WebHdfs& server, absl::Duration limit,
                     std::function<absl::Status()> fn) {
  std::future<absl::Status> done = std::async(std::launch::async, fn);
  if (done.wait_for(absl::ToChronoSeconds(limit)) !=
      std::future_status::ready) {
    ADD_FAILURE() << "the listing still ran after " << limit
                  << ": it loops on the namenode's answers";
    server.Kill();
  }
  return done.get();
}

// A namenode that repeats a batch (ignoring startAfter) or sends empty ones
// while it reports remainingEntries > 0: the listing fails at once, naming
// the misbehaviour, flat and recursive, instead of asking forever.
TEST(HdfsListingBoundsTest, BatchesThatDoNotAdvanceFail) {
  for (auto fault : {testing::WebHdfs::ListFault::kRepeatBatch,
                     testing::WebHdfs::ListFault::kEmptyBatch}) {
    SCOPED_TRACE(static_cast<int>(fault));
    testing::WebHdfs::Options so;
    so.batch = 2;
    so.list_fault = fault;
    auto server = testing::WebHdfs::Start(so);
    ASSERT_TRUE(server.ok()) << server.status();
    for (const char* f : {"a", "b", "c", "d", "e"})
      ASSERT_TRUE((*server)->Put(absl::StrCat("dir/", f), f).ok());
    auto store = OpenUnderStore((*server)->Uri("dir"), Options());
    ASSERT_TRUE(store.ok());
    for (bool recursive : {false, true}) {
      const absl::Time start = absl::Now();
      absl::Status st =
          Bounded(**server, absl::Seconds(20), [&]() -> absl::Status {
            ListOptions o;
            o.recursive = recursive;
            return (*store)->List("", o).status();
          });
      EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
      EXPECT_THAT(std::string(st.message()), HasSubstr("remainingEntries > 0"));
      EXPECT_THAT(std::string(st.message()),
                  HasSubstr("repeated or empty batch"));
      EXPECT_LT(absl::Now() - start, absl::Seconds(5));
    }
  }
}

// A namenode that keeps bringing new names, batch after batch, forever:
// every batch advances, so only the deadline ends the call, and it does,
// on time.
TEST(HdfsListingBoundsTest, EndlessListingStopsAtItsDeadline) {
  testing::WebHdfs::Options so;
  so.list_fault = testing::WebHdfs::ListFault::kEndless;
  auto server = testing::WebHdfs::Start(so);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->Put("dir/x", "x").ok());
  UnderStoreOptions o = Options();
  o.list_deadline = absl::Seconds(2);
  auto store = OpenUnderStore((*server)->Uri("dir"), o);
  ASSERT_TRUE(store.ok());
  for (bool recursive : {false, true}) {
    const absl::Time start = absl::Now();
    absl::Status st =
        Bounded(**server, absl::Seconds(30), [&]() -> absl::Status {
          ListOptions lo;
          lo.recursive = recursive;
          lo.page_size = 100000000;  // Never filled: only time ends it.
          return (*store)->List("", lo).status();
        });
    const absl::Duration took = absl::Now() - start;
    EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
    EXPECT_GE(took, absl::Seconds(2));
    EXPECT_LT(took, absl::Seconds(6));
  }
}

// A tree deeper than kMaxRecursiveListDepth: a clean InvalidArgument naming
// where the walk stopped (each level used to be a stack frame). A normal
// tree, in batches of 2 and at every page size, still lists every file once.
TEST(HdfsListingBoundsTest, DeepTreesStopAndNormalTreesListFully) {
  testing::WebHdfs::Options so;
  so.batch = 2;
  auto server = testing::WebHdfs::Start(so);
  ASSERT_TRUE(server.ok()) << server.status();
  std::string deep = "deep";
  for (int i = 0; i < kMaxRecursiveListDepth + 20; ++i) deep += "/x";
  ASSERT_TRUE((*server)->Put(deep + "/bottom", "b").ok());
  std::vector<std::string> expected;
  for (const std::string f :
       {"tree/a0/b0/f0", "tree/a0/b0/f1", "tree/a0/b0/f2", "tree/a0/b1/f0",
        "tree/a0/f", "tree/a1/b0/c0/d0/f", "tree/a1/f0", "tree/a1/f1",
        "tree/a1/f2", "tree/top1", "tree/top2", "tree/top3"}) {
    ASSERT_TRUE((*server)->Put(f, f).ok());
    expected.push_back(f.substr(5));  // Below "tree/".
  }
  std::filesystem::create_directories((*server)->root() + "/tree/empty/e");
  auto store = OpenUnderStore((*server)->Uri(""), Options());
  ASSERT_TRUE(store.ok());

  const absl::Time start = absl::Now();
  ListOptions o;
  o.recursive = true;
  auto page = (*store)->List("deep", o);
  EXPECT_EQ(page.status().code(), absl::StatusCode::kInvalidArgument)
      << page.status();
  std::string stop = "/deep";
  for (int i = 0; i <= kMaxRecursiveListDepth; ++i) stop += "/x";
  EXPECT_THAT(std::string(page.status().message()),
              HasSubstr(" stopped at " + stop + ":"));
  EXPECT_THAT(std::string(page.status().message()),
              HasSubstr("deeper than 256 levels"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));

  auto tree = OpenUnderStore((*server)->Uri("tree"), Options());
  ASSERT_TRUE(tree.ok());
  for (size_t page_size : {1, 3, 1000}) {
    std::vector<std::string> seen;
    absl::Status st = ListAll(
        **tree, "", true,
        [&](const ObjectInfo& e) {
          seen.push_back(e.path);
          return absl::OkStatus();
        },
        page_size);
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_EQ(seen, expected) << "page size " << page_size;
  }
}

}  // namespace
}  // namespace larder
