// Copyright 2026 The Larder Authors.
#include "understore/aws_credentials.h"

#include <map>

#include "common/log.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/process.h"

namespace larder {
namespace {

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](absl::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(AwsCredentialsTest, FromEnvironment) {
  auto c = LoadAwsCredentials("", Env({{"AWS_ACCESS_KEY_ID", "AKIDENV"},
                                       {"AWS_SECRET_ACCESS_KEY", "SECRETENV"},
                                       {"AWS_SESSION_TOKEN", "TOKENENV"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key_id, "AKIDENV");
  EXPECT_EQ(c->secret_access_key, "SECRETENV");
  EXPECT_EQ(c->session_token, "TOKENENV");
  // Loaded secrets are registered for redaction.
  EXPECT_EQ(RedactSecrets("x SECRETENV y"), "x <redacted> y");
}

TEST(AwsCredentialsTest, HalfSetEnvironmentIsAnError) {
  auto c = LoadAwsCredentials("", Env({{"AWS_ACCESS_KEY_ID", "AKID"}}));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(AwsCredentialsTest, FromFileWithProfiles) {
  testing::TempDir dir;
  std::string path = dir.path() + "/credentials";
  ASSERT_TRUE(
      testing::WriteFile(
          path,
          "# comment\n[default]\naws_access_key_id = AKIDDEF\n"
          "aws_secret_access_key=SECRETDEF\n\n[profile other]\n"
          "aws_access_key_id=AKIDOTHER\naws_secret_access_key = SECRETOTHER\n"
          "aws_session_token = TOK\n")
          .ok());
  auto def =
      LoadAwsCredentials("", Env({{"AWS_SHARED_CREDENTIALS_FILE", path}}));
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_EQ(def->access_key_id, "AKIDDEF");
  EXPECT_EQ(def->secret_access_key, "SECRETDEF");
  auto other =
      LoadAwsCredentials("other", Env({{"AWS_SHARED_CREDENTIALS_FILE", path},
                                       {"AWS_ACCESS_KEY_ID", "IGNORED"},
                                       {"AWS_SECRET_ACCESS_KEY", "IGNORED"}}));
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->access_key_id, "AKIDOTHER");
  EXPECT_EQ(other->session_token, "TOK");
  auto via_env = LoadAwsCredentials(
      "",
      Env({{"AWS_SHARED_CREDENTIALS_FILE", path}, {"AWS_PROFILE", "other"}}));
  ASSERT_TRUE(via_env.ok());
  EXPECT_EQ(via_env->access_key_id, "AKIDOTHER");
  auto missing =
      LoadAwsCredentials("nope", Env({{"AWS_SHARED_CREDENTIALS_FILE", path}}));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(),
              ::testing::Not(::testing::HasSubstr("SECRET")));
}

TEST(AwsCredentialsTest, NothingConfigured) {
  testing::TempDir home;
  auto c = LoadAwsCredentials("", Env({{"HOME", home.path()}}));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(c.status().message(), ::testing::HasSubstr("AWS_ACCESS_KEY_ID"));
}

}  // namespace
}  // namespace larder
