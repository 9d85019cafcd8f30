// Copyright 2026 The Larder Authors.
//
// SigV4 is proven here, not by s3rver (which accepts any signature):
//   1. AWS's published examples from the S3 API reference ("Examples: Signature
//      Calculations in AWS Signature Version 4"), byte for byte;
//   2. hundreds of generated requests (odd keys, unicode, query strings,
//      ranges, session tokens) signed by botocore's S3SigV4Auth.
#include "understore/aws_sigv4.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/testing/process.h"
#include "understore/http_client.h"

namespace larder {
namespace {

const AwsCredentials kExampleCredentials{
    "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""};

absl::Time ExampleTime() {
  return absl::FromCivil(absl::CivilSecond(2013, 5, 24, 0, 0, 0),
                         absl::UTCTimeZone());
}

TEST(SigV4Test, AwsExampleGetObject) {
  SigV4Request req;
  req.method = "GET";
  req.host = "examplebucket.s3.amazonaws.com";
  req.encoded_path = "/test.txt";
  req.headers = {{"Range", "bytes=0-9"}};
  req.payload_sha256 = std::string(kEmptyPayloadSha256);
  SigV4Result r =
      SignV4(req, kExampleCredentials, "us-east-1", "s3", ExampleTime());
  EXPECT_EQ(
      r.canonical_request,
      "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
      "x-amz-content-sha256:"
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
      "x-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-"
      "date\n"
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(
      r.string_to_sign,
      "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
      "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  EXPECT_EQ(r.signature,
            "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  EXPECT_EQ(
      r.authorization,
      "AWS4-HMAC-SHA256 "
      "Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
      "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
      "Signature="
      "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(SigV4Test, AwsExamplePutObject) {
  SigV4Request req;
  req.method = "PUT";
  req.host = "examplebucket.s3.amazonaws.com";
  req.encoded_path = "/test%24file.text";
  req.headers = {{"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                 {"x-amz-storage-class", "REDUCED_REDUNDANCY"}};
  req.payload_sha256 = Sha256Hex("Welcome to Amazon S3.");
  EXPECT_EQ(req.payload_sha256,
            "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  SigV4Result r =
      SignV4(req, kExampleCredentials, "us-east-1", "s3", ExampleTime());
  EXPECT_EQ(r.signature,
            "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

TEST(SigV4Test, AwsExampleListObjects) {
  SigV4Request req;
  req.method = "GET";
  req.host = "examplebucket.s3.amazonaws.com";
  req.encoded_path = "/";
  req.query = {{"prefix", "J"}, {"max-keys", "2"}};
  req.payload_sha256 = std::string(kEmptyPayloadSha256);
  SigV4Result r =
      SignV4(req, kExampleCredentials, "us-east-1", "s3", ExampleTime());
  EXPECT_EQ(r.canonical_query, "max-keys=2&prefix=J");
  EXPECT_EQ(r.signature,
            "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

TEST(SigV4Test, AwsExampleGetBucketLifecycle) {
  SigV4Request req;
  req.method = "GET";
  req.host = "examplebucket.s3.amazonaws.com";
  req.encoded_path = "/";
  req.query = {{"lifecycle", ""}};
  req.payload_sha256 = std::string(kEmptyPayloadSha256);
  SigV4Result r =
      SignV4(req, kExampleCredentials, "us-east-1", "s3", ExampleTime());
  EXPECT_EQ(r.signature,
            "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
}

TEST(SigV4Test, AnonymousIsUnsigned) {
  SigV4Request req{.method = "GET", .host = "h", .encoded_path = "/k"};
  SigV4Result r =
      SignV4(req, AwsCredentials{}, "us-east-1", "s3", ExampleTime());
  EXPECT_TRUE(r.authorization.empty());
  for (const auto& [k, v] : r.headers) EXPECT_NE(k, "Authorization");
}

TEST(SigV4Test, UriEncode) {
  EXPECT_EQ(UriEncode("a b/c~d-e_f.g", true), "a%20b/c~d-e_f.g");
  EXPECT_EQ(UriEncode("a b/c", false), "a%20b%2Fc");
  EXPECT_EQ(UriEncode("ü+*", false), "%C3%BC%2B%2A");
}

std::string Str(const google::protobuf::Struct& s, const std::string& key) {
  return s.fields().at(key).string_value();
}

std::vector<std::pair<std::string, std::string>> Pairs(
    const google::protobuf::Struct& s, const std::string& key) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& v : s.fields().at(key).list_value().values()) {
    out.emplace_back(v.list_value().values(0).string_value(),
                     v.list_value().values(1).string_value());
  }
  return out;
}

TEST(SigV4Test, MatchesBotocoreOnGeneratedRequests) {
  const std::string script =
      testing::SourceDir() + "/understore/testing/sigv4_botocore_cases.py";
  absl::StatusOr<std::string> out =
      testing::RunCommand({"/usr/bin/python3", script, "400", "20261122"});
  ASSERT_TRUE(out.ok())
      << out.status()
      << " (python3-botocore is installed by scripts/install-deps.sh)";
  int cases = 0;
  for (absl::string_view line : absl::StrSplit(*out, '\n', absl::SkipEmpty())) {
    google::protobuf::Struct c;
    ASSERT_TRUE(
        google::protobuf::util::JsonStringToMessage(std::string(line), &c).ok())
        << line;
    SigV4Request req;
    req.method = Str(c, "method");
    req.host = Str(c, "host");
    req.encoded_path = UriEncode(Str(c, "raw_path"), /*keep_slash=*/true);
    req.query = Pairs(c, "query");
    req.headers = Pairs(c, "headers");
    req.payload_sha256 = Str(c, "payload");
    AwsCredentials creds{Str(c, "access_key"), Str(c, "secret_key"),
                         Str(c, "token")};
    const std::string ts = Str(c, "timestamp");  // YYYYMMDDTHHMMSSZ
    auto num = [&](size_t pos, size_t len) {
      return std::stoi(ts.substr(pos, len));
    };
    absl::Time when =
        absl::FromCivil(absl::CivilSecond(num(0, 4), num(4, 2), num(6, 2),
                                          num(9, 2), num(11, 2), num(13, 2)),
                        absl::UTCTimeZone());
    SigV4Result r = SignV4(req, creds, Str(c, "region"), "s3", when);
    ASSERT_EQ(r.canonical_request, Str(c, "canonical_request"))
        << "case " << cases;
    ASSERT_EQ(r.string_to_sign, Str(c, "string_to_sign")) << "case " << cases;
    ASSERT_EQ(r.signature, Str(c, "signature")) << "case " << cases;
    ++cases;
  }
  EXPECT_EQ(cases, 400);
}

}  // namespace
}  // namespace larder
