// Copyright 2026 The Larder Authors.
#include "common/log.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace larder {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Render(LogLine& line) {
  line.Discard();
  return line.Render();
}

TEST(LogTest, FormatsFieldsAndQuotes) {
  LogLine line(LogLevel::kInfo, "s3.get", __FILE__, __LINE__);
  line.Field("bucket", "b")
      .Field("key", "a b\"c")
      .Field("bytes", 42)
      .Field("ok", true);
  std::string text = Render(line);
  EXPECT_THAT(text, HasSubstr(" INFO s3.get bucket=b key=\"a b\\\"c\" bytes=42 "
                              "ok=true src=log_test.cc:"));
}

TEST(LogTest, SecretKeysAreRedacted) {
  LogLine line(LogLevel::kInfo, "creds", __FILE__, __LINE__);
  line.Field("secret_access_key", "wJalrXUtnFEMI")
      .Field("session_token", "FQoGZXIvYXdz")
      .Field("sas", "sv=2020&sig=abc");
  std::string text = Render(line);
  EXPECT_THAT(text, Not(HasSubstr("wJalrXUtnFEMI")));
  EXPECT_THAT(text, Not(HasSubstr("FQoGZXIvYXdz")));
  EXPECT_THAT(text, Not(HasSubstr("abc")));
  EXPECT_THAT(text, HasSubstr("secret_access_key=<redacted>"));
}

TEST(LogTest, SigningPatternsAreMaskedInFreeText) {
  std::string text = RedactSecrets(
      "GET "
      "/b/"
      "k?X-Amz-Credential=AKIAEXAMPLE%2F20130524&X-Amz-Signature=deadbeef&x=1 "
      "Authorization: AWS4-HMAC-SHA256 Credential=AKIA/2013, Signature=f00\n"
      "blob?sv=2021&sig=SECRETSIG&se=2030 "
      "AccountKey=Eby8vdM02x==;EndpointSuffix=x");
  EXPECT_THAT(text, Not(HasSubstr("AKIAEXAMPLE")));
  EXPECT_THAT(text, Not(HasSubstr("deadbeef")));
  EXPECT_THAT(text, Not(HasSubstr("Signature=f00")));
  EXPECT_THAT(text, Not(HasSubstr("SECRETSIG")));
  EXPECT_THAT(text, Not(HasSubstr("Eby8vdM02x")));
  EXPECT_THAT(text, HasSubstr("&x=1"));
  EXPECT_THAT(text, HasSubstr("EndpointSuffix=x"));
  EXPECT_THAT(text, HasSubstr("se=2030"));
}

TEST(LogTest, RegisteredSecretsAreMaskedEverywhere) {
  RegisterSecret("MyVerySecretValue123");
  RegisterSecret("abc");  // Too short to register: would mangle normal text.
  LogLine line(LogLevel::kWarning, "oops", __FILE__, __LINE__);
  line.Field("message", "server said MyVerySecretValue123 is wrong; abc");
  std::string text = Render(line);
  EXPECT_THAT(text, Not(HasSubstr("MyVerySecretValue123")));
  EXPECT_THAT(text, HasSubstr("<redacted> is wrong; abc"));
  EXPECT_THAT(RedactSecrets("x MyVerySecretValue123 y"), "x <redacted> y");
}

TEST(LogTest, StatusFieldIsRedacted) {
  RegisterSecret("AKIDSECRETLEAK");
  LogLine line(LogLevel::kError, "e", __FILE__, __LINE__);
  line.Field("status",
             absl::PermissionDeniedError("key AKIDSECRETLEAK rejected"));
  EXPECT_THAT(Render(line), Not(HasSubstr("AKIDSECRETLEAK")));
}

TEST(LogTest, ParseLevel) {
  EXPECT_EQ(*ParseLogLevel("DEBUG"), LogLevel::kDebug);
  EXPECT_EQ(*ParseLogLevel("warning"), LogLevel::kWarning);
  EXPECT_EQ(ParseLogLevel("loud").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LogTest, LevelFilter) {
  SetMinLogLevel(LogLevel::kWarning);
  EXPECT_FALSE(LogEnabled(LogLevel::kInfo));
  EXPECT_TRUE(LogEnabled(LogLevel::kError));
  SetMinLogLevel(LogLevel::kInfo);
}

}  // namespace
}  // namespace larder
