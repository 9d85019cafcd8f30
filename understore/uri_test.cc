// Copyright 2026 The Larder Authors.
#include "understore/uri.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "understore/factory.h"

namespace larder {
namespace {

using ::testing::HasSubstr;

TEST(UriTest, ParsesS3WithOptions) {
  absl::StatusOr<StoreUri> u = ParseStoreUri(
      "s3://bucket/some/"
      "prefix?endpoint=http%3A%2F%2F127.0.0.1%3A9000&region=us-east-1&path_"
      "style=true");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->scheme, "s3");
  EXPECT_EQ(u->authority, "bucket");
  EXPECT_EQ(u->path, "some/prefix");
  EXPECT_EQ(u->options.at("endpoint"), "http://127.0.0.1:9000");
  EXPECT_EQ(u->options.at("region"), "us-east-1");
  EXPECT_EQ(u->options.at("path_style"), "true");
}

TEST(UriTest, UnescapedEndpointInQueryWorks) {
  absl::StatusOr<StoreUri> u =
      ParseStoreUri("s3://b/p?endpoint=http://127.0.0.1:9000");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->options.at("endpoint"), "http://127.0.0.1:9000");
}

TEST(UriTest, ParsesFile) {
  absl::StatusOr<StoreUri> u = ParseStoreUri("FILE:///data/my%20set");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->scheme, "file");
  EXPECT_EQ(u->authority, "");
  EXPECT_EQ(u->path, "/data/my set");
}

TEST(UriTest, RejectsMalformed) {
  for (const char* bad :
       {"", "data", "/data", "://x", "s3://b/p?x=1&x=2", "s3://b/%zz",
        "s3://user:pw@bucket/p", "s3://b/p#frag", "s3://b/p?=v"}) {
    EXPECT_EQ(ParseStoreUri(bad).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST(UriTest, FactoryRejectsUnknownSchemeAndOptions) {
  auto s = OpenUnderStore("gopher://x/y");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("unknown under-store scheme"));
  UnderStoreOptions o;
  o.aws_credentials = AwsCredentials{"AKID", "SECRETKEY", ""};
  s = OpenUnderStore("s3://bucket/p?endpiont=http://x", o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(),
              HasSubstr("unknown s3:// option 'endpiont'"));
  EXPECT_EQ(OpenUnderStore("s3://B_/p", o).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      OpenUnderStore("s3://bucket/p?endpoint=http://h/x", o).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenUnderStore("s3://bucket/p?path_style=maybe", o).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenUnderStore("s3://bucket/../x", o).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenUnderStore("file://host/data").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenUnderStore("file:///data?x=1").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(UriTest, S3EndpointsAreHostAndPort) {
  UnderStoreOptions o;
  o.aws_credentials = AwsCredentials{"AKID", "SECRETKEY", ""};
  for (const char* good :
       {"http://127.0.0.1:9000", "https://s3.example.com", "minio:9000",
        "http://[::1]:9000/", "http://my_minio:9000", "HTTP-HOST.local"}) {
    EXPECT_TRUE(
        OpenUnderStore(absl::StrCat("s3://bucket/p?endpoint=", good), o).ok())
        << good;
  }
  for (const char* bad : {"not a url", "http://host:99999", "http://host:0",
                          "http://host:", "http://:9000", "http://[::1",
                          "ftp://host", "http://-host", "http://user@host"}) {
    auto s = OpenUnderStore(absl::StrCat("s3://bucket/p?endpoint=", bad), o);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.status().message(), HasSubstr("bad S3 endpoint")) << bad;
  }
  // file:// roots are their own paths.
  for (const char* bad : {"file:///a/../b", "file:///a/./b", "file:///.."}) {
    auto u = ParseStoreUri(bad);
    EXPECT_EQ(u.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(UriTest, FactoryS3DebugStringHasNoSecrets) {
  UnderStoreOptions o;
  o.aws_credentials =
      AwsCredentials{"AKIDVISIBLE1", "SECRETKEYVALUE", "TOKENVALUE"};
  auto s =
      OpenUnderStore("s3://my-bucket/a/b?endpoint=http://127.0.0.1:9000", o);
  ASSERT_TRUE(s.ok()) << s.status();
  std::string d = (*s)->DebugString();
  EXPECT_THAT(d, HasSubstr("s3://my-bucket/a/b"));
  EXPECT_THAT(d, HasSubstr("path_style=true"));  // Custom endpoint default.
  EXPECT_THAT(d, ::testing::Not(HasSubstr("SECRETKEYVALUE")));
  EXPECT_THAT(d, ::testing::Not(HasSubstr("AKIDVISIBLE1")));
}

TEST(UriTest, PercentDecodeKeepsOrSpacesPluses) {
  EXPECT_EQ(*PercentDecode("a+b%2Bc%20d"), "a+b+c d");
  // An S3 listing's keys with encoding-type=url: '+' is a space, %2B a '+'.
  EXPECT_EQ(*PercentDecode("a+b%2Bc%20d", /*plus_is_space=*/true), "a b+c d");
  EXPECT_FALSE(PercentDecode("bad%2", true).ok());
}

TEST(StorePathTest, Normalizes) {
  EXPECT_EQ(*NormalizeStorePath(""), "");
  EXPECT_EQ(*NormalizeStorePath("/"), "");
  EXPECT_EQ(*NormalizeStorePath("/a//b/"), "a/b");
  EXPECT_EQ(*NormalizeStorePath("a/b.c/..d/e.."), "a/b.c/..d/e..");
}

TEST(StorePathTest, RejectsEscapes) {
  for (const char* bad : {"..", "../x", "a/../../b", "a/./b", "./a", "a/.."}) {
    absl::StatusOr<std::string> p = NormalizeStorePath(bad);
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(p.status().message(), HasSubstr("inside the store root"))
        << bad;
  }
  EXPECT_EQ(NormalizeStorePath(std::string("a\0b", 3)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NormalizeStorePath(std::string(5000, 'a')).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace larder
