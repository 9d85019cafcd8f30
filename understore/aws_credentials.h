// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: aws_credentials.h
// -----------------------------------------------------------------------------
//
// Where the S3 backend finds its credentials, in the order the AWS CLI uses:
//
//   1. AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN);
//   2. the shared credentials file (AWS_SHARED_CREDENTIALS_FILE, default
//      ~/.aws/credentials), profile AWS_PROFILE or "default", keys
//      aws_access_key_id, aws_secret_access_key, aws_session_token.
//
// A profile named explicitly (URI option `profile=`) skips step 1.
// Everything loaded is registered with RegisterSecret, so no log line and no
// redacted error message can show it.
#ifndef LARDER_UNDERSTORE_AWS_CREDENTIALS_H_
#define LARDER_UNDERSTORE_AWS_CREDENTIALS_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace larder {

struct AwsCredentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // Empty for long-term keys.
  // Anonymous credentials send unsigned requests (public buckets).
  bool anonymous() const { return access_key_id.empty(); }
};

// Reads an environment variable; injectable for tests.
using EnvLookup = std::function<std::optional<std::string>(absl::string_view)>;
EnvLookup ProcessEnv();

// Loads credentials as described above. `profile` empty = AWS_PROFILE or
// "default" (then environment variables win).
// Errors: Unauthenticated (none found anywhere), NotFound (a named profile or
// AWS_SHARED_CREDENTIALS_FILE that does not exist), InvalidArgument (only one
// of the key id / secret set, malformed file).
absl::StatusOr<AwsCredentials> LoadAwsCredentials(
    absl::string_view profile, const EnvLookup& env = ProcessEnv());

}  // namespace larder

#endif  // LARDER_UNDERSTORE_AWS_CREDENTIALS_H_
