// Copyright 2026 The Larder Authors.
#include "understore/http_client.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace larder {
namespace {

TEST(HttpHelpersTest, EtagsLoseQuotesAndWeakMarker) {
  EXPECT_EQ(NormalizeEtag("\"abc\""), "abc");
  EXPECT_EQ(NormalizeEtag(" W/\"0x8D\" "), "0x8D");
  EXPECT_EQ(NormalizeEtag("plain"), "plain");
  EXPECT_EQ(NormalizeEtag("\""), "\"");
}

TEST(HttpHelpersTest, DatesAndNumbers) {
  EXPECT_EQ(ParseHttpDate("Sun, 06 Nov 1994 08:49:37 GMT"),
            absl::FromUnixSeconds(784111777));
  EXPECT_EQ(ParseHttpDate("not a date"), absl::UnixEpoch());
  EXPECT_EQ(ParseUint("12345"), 12345u);
  EXPECT_EQ(ParseUint("-1"), std::nullopt);
  EXPECT_EQ(ParseUint(""), std::nullopt);
}

TEST(HttpHelpersTest, HttpErrorsMapToNamedCodes) {
  const std::pair<long, absl::StatusCode> cases[] = {
      {429, absl::StatusCode::kResourceExhausted},
      {500, absl::StatusCode::kUnavailable},
      {503, absl::StatusCode::kUnavailable},
      {404, absl::StatusCode::kNotFound},
      {401, absl::StatusCode::kPermissionDenied},
      {403, absl::StatusCode::kPermissionDenied},
      {304, absl::StatusCode::kFailedPrecondition},
      {412, absl::StatusCode::kFailedPrecondition},
      {416, absl::StatusCode::kOutOfRange},
      {400, absl::StatusCode::kInvalidArgument},
      {418, absl::StatusCode::kUnknown},
  };
  for (const auto& [http, code] : cases) {
    const absl::Status st = HttpErrorStatus(http, "S3 read of x", "object");
    EXPECT_EQ(st.code(), code) << http;
    EXPECT_THAT(std::string(st.message()),
                ::testing::HasSubstr("S3 read of x"));
  }
  EXPECT_THAT(std::string(HttpErrorStatus(412, "m", "blob").message()),
              ::testing::HasSubstr("(the blob changed)"));
}

}  // namespace
}  // namespace larder
