// Copyright 2026 The Larder Authors.
//
// Azure-specific behaviour against a real azurite (which verifies Shared Key
// and SAS signatures): credentials, a stopped server, a listing of more than
// 5000 blobs.
#include "understore/azure_store.h"

#include <atomic>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/azurite.h"
#include "tests/testing/process.h"
#include "understore/factory.h"

namespace larder {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

UnderStoreOptions Options(AzureCredentials creds) {
  UnderStoreOptions o;
  o.azure_credentials = std::move(creds);
  o.http.retry.max_attempts = 3;
  o.http.retry.initial_backoff = absl::Milliseconds(10);
  o.http.retry.max_backoff = absl::Milliseconds(50);
  return o;
}

class AzureStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = testing::Azurite::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    auto s = OpenUnderStore(server_->Uri("data"),
                            Options({testing::Azurite::kKey, ""}));
    ASSERT_TRUE(s.ok()) << s.status();
    store_.reset(static_cast<AzureStore*>(s->release()));
    ASSERT_TRUE(store_->CreateContainer().ok());
    ASSERT_TRUE(store_->Put("x.txt", "hello").ok());
  }
  std::unique_ptr<testing::Azurite> server_;
  std::unique_ptr<AzureStore> store_;
};

TEST_F(AzureStoreTest, WrongAccountKeyIsPermissionDeniedWithoutLeakingIt) {
  // A valid base64 key that is not the account's.
  const std::string wrong =
      "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
      "AAAAAAAAAAAAAAAA";
  auto bad = OpenUnderStore(server_->Uri("data"), Options({wrong, ""}));
  ASSERT_TRUE(bad.ok()) << bad.status();
  for (absl::Status st :
       {(*bad)->Stat("x.txt").status(), (*bad)->List("", {}).status()}) {
    EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied) << st;
    EXPECT_THAT(std::string(st.message()), Not(HasSubstr(wrong)));
  }
  char buf[4];
  auto r = (*bad)->ReadRange("x.txt", 0, absl::MakeSpan(buf), "");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied)
      << r.status();
}

TEST_F(AzureStoreTest, BadSasIsPermissionDeniedWithoutLeakingIt) {
  const std::string sas =
      "sv=2021-08-06&ss=b&srt=sco&sp=rl&se=2030-01-01T00:00:00Z&sig="
      "Zm9yZ2VkU2lnbmF0dXJl";
  auto bad = OpenUnderStore(server_->Uri("data"), Options({"", sas}));
  ASSERT_TRUE(bad.ok()) << bad.status();
  auto st = (*bad)->Stat("x.txt").status();
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied) << st;
  EXPECT_THAT(std::string(st.message()),
              Not(HasSubstr("Zm9yZ2VkU2lnbmF0dXJl")));
}

TEST_F(AzureStoreTest, NoCredentialsIsUnauthenticated) {
  UnderStoreOptions o;
  o.env = [](absl::string_view) -> std::optional<std::string> {
    return std::nullopt;
  };
  EXPECT_EQ(OpenUnderStore(server_->Uri("data"), o).status().code(),
            absl::StatusCode::kUnauthenticated);
}

TEST_F(AzureStoreTest, ConnectionStringFromTheEnvironment) {
  UnderStoreOptions o;
  const std::string cs = absl::StrCat(
      "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=",
      testing::Azurite::kKey, ";BlobEndpoint=", server_->endpoint(), ";");
  o.env = [&](absl::string_view name) -> std::optional<std::string> {
    if (name == "AZURE_STORAGE_CONNECTION_STRING") return cs;
    return std::nullopt;
  };
  auto s = OpenUnderStore("az://data", o);
  ASSERT_TRUE(s.ok()) << s.status();
  auto info = (*s)->Stat("x.txt");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->size, 5u);
}

TEST_F(AzureStoreTest, MissingContainerIsNotFound) {
  auto s = OpenUnderStore(server_->Uri("nosuch"),
                          Options({testing::Azurite::kKey, ""}));
  ASSERT_TRUE(s.ok());
  auto st = (*s)->List("", {}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("container"));
}

TEST_F(AzureStoreTest, ServerStoppedIsUnavailableThenRecovers) {
  auto info = store_->Stat("x.txt");
  ASSERT_TRUE(info.ok());
  server_->Kill();
  char buf[5];
  EXPECT_EQ(store_->ReadRange("x.txt", 0, absl::MakeSpan(buf), info->version)
                .status()
                .code(),
            absl::StatusCode::kUnavailable);
  ASSERT_TRUE(server_->Restart().ok());
  // azurite keeps its metadata in memory and flushes it now and then, so a
  // SIGKILL may lose the container: stage it again, then read.
  ASSERT_TRUE(store_->CreateContainer().ok());
  auto v = store_->Put("x.txt", "hello");
  ASSERT_TRUE(v.ok()) << v.status();
  auto n = store_->ReadRange("x.txt", 0, absl::MakeSpan(buf), *v);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(std::string(buf, 5), "hello");
}

TEST_F(AzureStoreTest, ListsMoreThan5000BlobsAcrossPages) {
  constexpr int kBlobs = 5100;
  std::atomic<int> next{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = next++; i < kBlobs; i = next++) {
        if (!store_->Put(absl::StrFormat("many/b%05d", i), "x").ok()) ++failed;
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(failed.load(), 0);
  std::set<std::string> seen;
  int pages = 0;
  ListOptions o;
  o.page_size = 5000;  // The service maximum.
  do {
    auto page = store_->List("many", o);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const auto& e : page->entries) seen.insert(e.path);
    o.page_token = page->next_page_token;
    ++pages;
  } while (!o.page_token.empty());
  EXPECT_EQ(seen.size(), static_cast<size_t>(kBlobs));
  EXPECT_EQ(pages, 2);
}

}  // namespace
}  // namespace larder
