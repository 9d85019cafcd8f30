// Copyright 2026 The Larder Authors.
//
// S3-specific behaviour against a real s3rver: credentials, addressing, an
// unreachable or stopped server, and retries.
#include "understore/s3_store.h"

#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/pki.h"
#include "tests/testing/process.h"
#include "tests/testing/s3rver.h"
#include "tests/testing/shaping_proxy.h"
#include "understore/factory.h"

namespace larder {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

UnderStoreOptions FastRetries(AwsCredentials creds) {
  UnderStoreOptions o;
  o.aws_credentials = std::move(creds);
  o.http.retry.max_attempts = 3;
  o.http.retry.initial_backoff = absl::Milliseconds(10);
  o.http.retry.max_backoff = absl::Milliseconds(50);
  o.http.connect_timeout = absl::Seconds(2);
  return o;
}

class S3StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = testing::S3rver::Start("s3-test");
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    auto s = OpenUnderStore(server_->Uri("data"),
                            FastRetries(testing::S3rver::Credentials()));
    ASSERT_TRUE(s.ok()) << s.status();
    store_.reset(static_cast<S3Store*>(s->release()));
  }

  std::unique_ptr<testing::S3rver> server_;
  std::unique_ptr<S3Store> store_;
};

TEST_F(S3StoreTest, UnknownAccessKeyIsPermissionDeniedWithoutLeakingSecrets) {
  ASSERT_TRUE(store_->Put("x.txt", "x").ok());
  auto bad =
      OpenUnderStore(server_->Uri("data"),
                     FastRetries({"AKIDUNKNOWN12345", "wrongSecretValue/xyz",
                                  "SessTokenXYZ"}));
  ASSERT_TRUE(bad.ok()) << bad.status();
  for (absl::Status st :
       {(*bad)->Stat("x.txt").status(), (*bad)->List("", {}).status()}) {
    EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied) << st;
    std::string msg(st.message());
    EXPECT_THAT(msg, Not(HasSubstr("AKIDUNKNOWN12345")));
    EXPECT_THAT(msg, Not(HasSubstr("wrongSecretValue")));
    EXPECT_THAT(msg, Not(HasSubstr("SessTokenXYZ")));
  }
  char buf[1];
  auto r = (*bad)->ReadRange("x.txt", 0, absl::MakeSpan(buf), "");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied)
      << r.status();
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("InvalidAccessKeyId"));
}

TEST_F(S3StoreTest, NoCredentialsIsUnauthenticated) {
  testing::TempDir home;
  UnderStoreOptions o;
  o.env = [&](absl::string_view name) -> std::optional<std::string> {
    if (name == "HOME") return home.path();
    return std::nullopt;
  };
  auto s = OpenUnderStore(server_->Uri("data"), o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnauthenticated)
      << s.status();
}

TEST_F(S3StoreTest, MissingBucketIsNotFound) {
  auto s = OpenUnderStore(
      absl::StrCat("s3://no-such-bucket/p?endpoint=", server_->endpoint()),
      FastRetries(testing::S3rver::Credentials()));
  ASSERT_TRUE(s.ok());
  auto st = (*s)->List("", {});
  EXPECT_EQ(st.status().code(), absl::StatusCode::kNotFound) << st.status();
  EXPECT_THAT(std::string(st.status().message()), HasSubstr("bucket"));
}

TEST_F(S3StoreTest, ServerStoppedMidTestIsUnavailableThenRecovers) {
  ASSERT_TRUE(store_->Put("obj", std::string(100000, 'z')).ok());
  auto info = store_->Stat("obj");
  ASSERT_TRUE(info.ok());
  server_->Kill();
  const absl::Time start = absl::Now();
  std::string buf(1000, '\0');
  auto r = store_->ReadRange("obj", 10, absl::MakeSpan(buf), info->version);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_EQ(store_->Stat("obj").status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(store_->List("", {}).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10))
      << "retries must be bounded";
  ASSERT_TRUE(server_->Restart().ok());
  auto again = store_->ReadRange("obj", 10, absl::MakeSpan(buf), info->version);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(buf, std::string(1000, 'z'));
}

// S3 completed the upload but its answer was lost: the retries meet
// NoSuchUpload (S3) or an error (s3rver). The commit is reported done only
// when the object there has the ETag these parts make (S3's composite
// ETag); s3rver gives a multipart object the MD5 of its bytes, which the
// parts cannot prove, so there the lost answer stays the failure it looks
// like: never a commit of bytes that may be another writer's.
TEST_F(S3StoreTest, ACompleteWhoseAnswerWasLostIsOnlyTakenWhenProven) {
  // The composite ETag, as S3 computes it (checked with Python's hashlib).
  EXPECT_EQ(
      S3MultipartEtag({{1, 0, 5 << 20, "79b281060d337b9b2b84ccf390adcf74"},
                       {2, 5 << 20, 13, "6f175b18df60a8bee9d7f1fd5eb58742"}}),
      "8e00ec7c1f4a969a72f7c846469a7348-2");
  EXPECT_EQ(S3MultipartEtag({{1, 0, 5, "not-an-md5"}}), "");

  auto front = testing::ShapingProxy::Start(
      server_->endpoint(), {"--first_byte_ms=0", "--rate_mbps=0",
                            "--drop_response_of=^POST .*uploadId="});
  ASSERT_TRUE(front.ok()) << front.status();
  auto s =
      OpenUnderStore((*front)->Front(server_->Uri("data"), server_->endpoint()),
                     FastRetries(testing::S3rver::Credentials()));
  ASSERT_TRUE(s.ok()) << s.status();
  const std::string a(5 << 20, 'a'), b = "the last part";
  auto id = (*s)->CreateUpload("lost/answer.bin");
  ASSERT_TRUE(id.ok()) << id.status();
  auto p1 = (*s)->UploadPart("lost/answer.bin", *id, 1, 0, a);
  auto p2 = (*s)->UploadPart("lost/answer.bin", *id, 2, a.size(), b);
  ASSERT_TRUE(p1.ok() && p2.ok());
  EXPECT_EQ(p1->token, "79b281060d337b9b2b84ccf390adcf74");
  auto done = (*s)->CompleteUpload("lost/answer.bin", *id, {*p1, *p2});
  // s3rver completed it (the answer was dropped on the way back)...
  auto there = store_->Stat("lost/answer.bin");
  ASSERT_TRUE(there.ok()) << there.status();
  EXPECT_EQ(there->size, a.size() + b.size());
  // ...under an ETag the parts cannot prove: reported as failed.
  EXPECT_FALSE(done.ok());
  EXPECT_NE(there->version, S3MultipartEtag({*p1, *p2}));
}

TEST_F(S3StoreTest, UnreachableEndpointIsUnavailable) {
  const int port = testing::PickFreePort();  // Nothing listens there.
  auto s = OpenUnderStore(
      absl::StrCat("s3://bucket/p?endpoint=http://127.0.0.1:", port),
      FastRetries(testing::S3rver::Credentials()));
  ASSERT_TRUE(s.ok());
  auto st = (*s)->Stat("k");
  EXPECT_EQ(st.status().code(), absl::StatusCode::kUnavailable) << st.status();
  EXPECT_THAT(std::string(st.status().message()), HasSubstr("127.0.0.1"));
}

TEST_F(S3StoreTest, KeysWithSpecialCharactersRoundTrip) {
  const std::vector<std::string> keys = {
      "a b/c+d=e&f.txt", "ünï/日本語.jpg", "x~y!z*(1)'.bin",
      "semi;colon,comma:at@$.dat", "per%cent.txt"};
  for (const std::string& k : keys) {
    ASSERT_TRUE(store_->Put(k, "payload:" + k).ok()) << k;
  }
  for (const std::string& k : keys) {
    auto info = store_->Stat(k);
    ASSERT_TRUE(info.ok()) << k << ": " << info.status();
    std::string buf(info->size, '\0');
    auto n = store_->ReadRange(k, 0, absl::MakeSpan(buf), info->version);
    ASSERT_TRUE(n.ok()) << n.status();
    EXPECT_EQ(buf, "payload:" + k);
  }
  std::set<std::string> listed;
  ASSERT_TRUE(ListAll(*store_, "", true, [&](const ObjectInfo& e) {
                listed.insert(e.path);
                return absl::OkStatus();
              }).ok());
  for (const std::string& k : keys) EXPECT_TRUE(listed.count(k)) << k;
}

TEST_F(S3StoreTest, ObjectsOutsideThePrefixAreInvisible) {
  auto other = OpenUnderStore(server_->Uri("other"),
                              FastRetries(testing::S3rver::Credentials()));
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(static_cast<S3Store*>(other->get())->Put("secret.txt", "s").ok());
  ASSERT_TRUE(store_->Put("mine.txt", "m").ok());
  EXPECT_EQ(store_->Stat("secret.txt").status().code(),
            absl::StatusCode::kNotFound);
  auto page = store_->List("", {});
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->entries.size(), 1u);
  EXPECT_EQ(page->entries[0].path, "mine.txt");
}

// Over https a body goes as UNSIGNED-PAYLOAD (TLS protects it; no SHA-256
// pass over every part), over http signed; the URI can say either way.
TEST(S3StoreOptionsTest, BodiesAreSignedOverHttpOnlyUnlessTheUriSays) {
  const UnderStoreOptions o = FastRetries(testing::S3rver::Credentials());
  auto open = [&](const std::string& uri) {
    absl::StatusOr<std::unique_ptr<UnderStore>> s = OpenUnderStore(uri, o);
    EXPECT_TRUE(s.ok()) << uri << ": " << s.status();
    return s.ok() ? static_cast<S3Store*>(s->get())->sign_payload() : false;
  };
  EXPECT_TRUE(open("s3://bkt?endpoint=http://127.0.0.1:9000"));
  EXPECT_FALSE(open("s3://bkt?endpoint=https://127.0.0.1:9000"));
  EXPECT_FALSE(open("s3://bkt?region=eu-west-1"));  // AWS: https.
  EXPECT_TRUE(
      open("s3://bkt?endpoint=https://127.0.0.1:9000&sign_payload=true"));
  EXPECT_FALSE(
      open("s3://bkt?endpoint=http://127.0.0.1:9000&sign_payload=false"));
  EXPECT_EQ(OpenUnderStore("s3://bkt?sign_payload=maybe", o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// An S3 endpoint over TLS (s3rver with a certificate of the tests' CA,
// trusted through AWS_CA_BUNDLE): a multipart upload with unsigned parts
// is accepted, and reads back byte for byte; a store that does not trust
// the certificate fails, named.
TEST(S3StoreTlsTest, AnUploadOverHttpsRoundTrips) {
  auto pki = testing::Pki::Create();
  ASSERT_TRUE(pki.ok()) << pki.status();
  auto server = testing::S3rver::StartTls("s3-tls", (*pki)->node().cert,
                                          (*pki)->node().key);
  ASSERT_TRUE(server.ok()) << server.status();
  UnderStoreOptions o = FastRetries(testing::S3rver::Credentials());
  const std::string ca = (*pki)->ca();
  o.env = [ca](absl::string_view name) -> std::optional<std::string> {
    if (name == "AWS_CA_BUNDLE") return ca;
    return std::nullopt;
  };
  auto opened = OpenUnderStore((*server)->Uri("data"), o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  UnderStore& store = **opened;
  ASSERT_FALSE(static_cast<S3Store&>(store).sign_payload());

  const std::string first = testing::PatternBytes(kMinUploadPartBytes, 1);
  const std::string last = testing::PatternBytes(12345, 2);
  absl::StatusOr<std::string> id = store.CreateUpload("ckpt/a.pt");
  ASSERT_TRUE(id.ok()) << id.status();
  absl::StatusOr<UploadedPart> p1 =
      store.UploadPart("ckpt/a.pt", *id, 1, 0, first);
  ASSERT_TRUE(p1.ok()) << p1.status();
  absl::StatusOr<UploadedPart> p2 =
      store.UploadPart("ckpt/a.pt", *id, 2, first.size(), last);
  ASSERT_TRUE(p2.ok()) << p2.status();
  absl::StatusOr<ObjectInfo> info =
      store.CompleteUpload("ckpt/a.pt", *id, {*p1, *p2});
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->size, first.size() + last.size());
  std::string back(first.size() + last.size(), '\0');
  absl::StatusOr<size_t> n =
      store.ReadRange("ckpt/a.pt", 0, absl::MakeSpan(back), info->version);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, back.size());
  EXPECT_TRUE(back == first + last);

  // Without the CA: the certificate is refused, not retried, and named.
  UnderStoreOptions untrusting = FastRetries(testing::S3rver::Credentials());
  untrusting.env = [](absl::string_view) -> std::optional<std::string> {
    return std::nullopt;
  };
  auto other = OpenUnderStore((*server)->Uri("data"), untrusting);
  ASSERT_TRUE(other.ok()) << other.status();
  absl::StatusOr<ObjectInfo> refused = (*other)->Stat("ckpt/a.pt");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition)
      << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("SSL certificate"));
}

}  // namespace
}  // namespace larder
