// Copyright 2026 The Larder Authors.
#include "understore/aws_sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <algorithm>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "understore/http_client.h"

namespace larder {
namespace {

std::string Hmac(absl::string_view key, absl::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out,
       &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

// Trims a header value and collapses runs of whitespace to one space.
std::string TrimAll(absl::string_view value) {
  std::string out;
  bool space = false;
  for (char c : absl::StripAsciiWhitespace(value)) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
      space = true;
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  return out;
}

}  // namespace

std::string Sha256Hex(absl::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(),
         digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<char*>(digest), sizeof(digest)));
}

SigV4Result SignV4(const SigV4Request& request,
                   const AwsCredentials& credentials, absl::string_view region,
                   absl::string_view service, absl::Time now) {
  SigV4Result out;
  const std::string amz_date =
      absl::FormatTime("%Y%m%dT%H%M%SZ", now, absl::UTCTimeZone());
  const std::string date = amz_date.substr(0, 8);

  // Canonical query string: encode, then sort by name, then value.
  std::vector<std::pair<std::string, std::string>> query;
  query.reserve(request.query.size());
  for (const auto& [k, v] : request.query) {
    query.emplace_back(UriEncode(k, false), UriEncode(v, false));
  }
  std::sort(query.begin(), query.end());
  out.canonical_query =
      absl::StrJoin(query, "&", [](std::string* o, const auto& kv) {
        absl::StrAppend(o, kv.first, "=", kv.second);
      });

  // Headers: lowercase names, trimmed values; repeated names joined by ','.
  std::map<std::string, std::string> canonical;
  auto add = [&](absl::string_view name, absl::string_view value) {
    std::string lower = absl::AsciiStrToLower(name);
    std::string trimmed = TrimAll(value);
    auto [it, inserted] = canonical.emplace(lower, trimmed);
    if (!inserted) absl::StrAppend(&it->second, ",", trimmed);
  };
  add("host", request.host);
  add("x-amz-date", amz_date);
  add("x-amz-content-sha256", request.payload_sha256);
  if (!credentials.session_token.empty())
    add("x-amz-security-token", credentials.session_token);
  for (const auto& [k, v] : request.headers) add(k, v);

  std::string canonical_headers;
  std::vector<absl::string_view> names;
  for (const auto& [k, v] : canonical) {
    absl::StrAppend(&canonical_headers, k, ":", v, "\n");
    names.push_back(k);
  }
  const std::string signed_headers = absl::StrJoin(names, ";");

  out.canonical_request =
      absl::StrCat(request.method, "\n", request.encoded_path, "\n",
                   out.canonical_query, "\n", canonical_headers, "\n",
                   signed_headers, "\n", request.payload_sha256);
  const std::string scope =
      absl::StrCat(date, "/", region, "/", service, "/aws4_request");
  out.string_to_sign = absl::StrCat("AWS4-HMAC-SHA256\n", amz_date, "\n", scope,
                                    "\n", Sha256Hex(out.canonical_request));

  out.headers.emplace_back("Host", request.host);
  out.headers.emplace_back("x-amz-date", amz_date);
  out.headers.emplace_back("x-amz-content-sha256", request.payload_sha256);
  if (!credentials.session_token.empty()) {
    out.headers.emplace_back("x-amz-security-token", credentials.session_token);
  }
  for (const auto& h : request.headers) out.headers.push_back(h);
  if (credentials.anonymous()) return out;

  std::string key =
      Hmac(absl::StrCat("AWS4", credentials.secret_access_key), date);
  key = Hmac(key, region);
  key = Hmac(key, service);
  key = Hmac(key, "aws4_request");
  out.signature = absl::BytesToHexString(Hmac(key, out.string_to_sign));
  out.authorization = absl::StrCat(
      "AWS4-HMAC-SHA256 Credential=", credentials.access_key_id, "/", scope,
      ",SignedHeaders=", signed_headers, ",Signature=", out.signature);
  out.headers.emplace_back("Authorization", out.authorization);
  return out;
}

}  // namespace larder
