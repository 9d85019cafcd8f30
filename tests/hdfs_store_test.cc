// Copyright 2026 The Larder Authors.
//
// hdfs:// specifics against the WebHDFS stand-in (tests/servers/
// webhdfs_server.py): simple auth and delegation tokens, AccessControl and
// RemoteException errors, a stopped server. The behaviour every backend
// shares is in understore_conformance_test.
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/process.h"
#include "tests/testing/webhdfs.h"
#include "understore/factory.h"

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

}  // namespace
}  // namespace larder
