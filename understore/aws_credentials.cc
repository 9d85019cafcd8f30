// Copyright 2026 The Larder Authors.
#include "understore/aws_credentials.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/log.h"

namespace larder {
namespace {

AwsCredentials Registered(AwsCredentials c) {
  RegisterSecret(c.access_key_id);
  RegisterSecret(c.secret_access_key);
  RegisterSecret(c.session_token);
  return c;
}

}  // namespace

EnvLookup ProcessEnv() {
  return [](absl::string_view name) -> std::optional<std::string> {
    const char* v = std::getenv(std::string(name).c_str());
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
  };
}

absl::StatusOr<AwsCredentials> LoadAwsCredentials(absl::string_view profile,
                                                  const EnvLookup& env) {
  if (profile.empty()) {
    std::optional<std::string> id = env("AWS_ACCESS_KEY_ID");
    std::optional<std::string> secret = env("AWS_SECRET_ACCESS_KEY");
    if (id.has_value() != secret.has_value()) {
      return absl::InvalidArgumentError(
          "only one of AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY is set; set "
          "both");
    }
    if (id) {
      return Registered({*id, *secret, env("AWS_SESSION_TOKEN").value_or("")});
    }
  }

  const bool explicit_profile =
      !profile.empty() || env("AWS_PROFILE").has_value();
  const std::string name = !profile.empty()
                               ? std::string(profile)
                               : env("AWS_PROFILE").value_or("default");
  std::optional<std::string> file_env = env("AWS_SHARED_CREDENTIALS_FILE");
  std::string path;
  if (file_env) {
    path = *file_env;
  } else if (std::optional<std::string> home = env("HOME")) {
    path = absl::StrCat(*home, "/.aws/credentials");
  }
  std::ifstream in(path);
  if (!in) {
    if (file_env || explicit_profile) {
      return absl::NotFoundError(absl::StrCat("AWS credentials file '", path,
                                              "' cannot be read (profile '",
                                              name, "')"));
    }
    return absl::UnauthenticatedError(
        "no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
        "or a profile in "
        "~/.aws/credentials, or add anonymous=true to the s3:// URI for a "
        "public bucket");
  }
  std::string section;
  bool found = false;
  AwsCredentials creds;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    absl::string_view l = absl::StripAsciiWhitespace(line);
    if (l.empty() || l[0] == '#' || l[0] == ';') continue;
    if (l.front() == '[') {
      if (l.back() != ']') {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ":", line_no, ": malformed section header"));
      }
      absl::string_view header =
          absl::StripAsciiWhitespace(l.substr(1, l.size() - 2));
      absl::ConsumePrefix(&header, "profile ");
      section = std::string(header);
      if (section == name) found = true;
      continue;
    }
    if (section != name) continue;
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(l, absl::MaxSplits('=', 1));
    std::string key =
        absl::AsciiStrToLower(absl::StripAsciiWhitespace(kv.first));
    std::string value(absl::StripAsciiWhitespace(kv.second));
    if (key == "aws_access_key_id") creds.access_key_id = value;
    if (key == "aws_secret_access_key") creds.secret_access_key = value;
    if (key == "aws_session_token") creds.session_token = value;
  }
  if (!found) {
    if (explicit_profile) {
      return absl::NotFoundError(
          absl::StrCat("profile '", name, "' not found in '", path, "'"));
    }
    return absl::UnauthenticatedError(
        absl::StrCat("no S3 credentials: no environment variables and no "
                     "[default] profile in '",
                     path, "'"));
  }
  if (creds.access_key_id.empty() || creds.secret_access_key.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("profile '", name, "' in '", path,
                     "' lacks aws_access_key_id or aws_secret_access_key"));
  }
  return Registered(std::move(creds));
}

}  // namespace larder
