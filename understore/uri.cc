// Copyright 2026 The Larder Authors.
#include "understore/uri.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace larder {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

absl::StatusOr<std::string> PercentDecode(absl::string_view text,
                                          bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(plus_is_space && text[i] == '+' ? ' ' : text[i]);
      continue;
    }
    if (i + 2 >= text.size() || HexValue(text[i + 1]) < 0 ||
        HexValue(text[i + 2]) < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad percent-escape at byte ", i, " of '", text, "'"));
    }
    out.push_back(
        static_cast<char>(HexValue(text[i + 1]) * 16 + HexValue(text[i + 2])));
    i += 2;
  }
  return out;
}

absl::StatusOr<StoreUri> ParseStoreUri(absl::string_view uri) {
  StoreUri out;
  size_t colon = uri.find("://");
  if (colon == absl::string_view::npos || colon == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad under-store URI '", uri,
        "': expected SCHEME://..., e.g. file:///data or s3://bucket/prefix"));
  }
  out.scheme = absl::AsciiStrToLower(uri.substr(0, colon));
  for (char c : out.scheme) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '+' &&
        c != '-' && c != '.') {
      return absl::InvalidArgumentError(
          absl::StrCat("bad scheme in URI '", uri, "'"));
    }
  }
  absl::string_view rest = uri.substr(colon + 3);
  absl::string_view query;
  if (size_t q = rest.find('?'); q != absl::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  if (rest.find('#') != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("URI '", uri, "' must not have a fragment"));
  }
  size_t slash = rest.find('/');
  absl::string_view authority = rest.substr(0, slash);
  absl::string_view path =
      slash == absl::string_view::npos ? "" : rest.substr(slash);
  if (absl::StrContains(authority, '@')) {
    return absl::InvalidArgumentError(
        "credentials in the URI's authority are not accepted; use the "
        "environment or a "
        "credentials file");
  }
  out.authority = std::string(authority);
  LARDER_ASSIGN_OR_RETURN(out.path, PercentDecode(path));
  if (out.scheme != "file") {
    while (!out.path.empty() && out.path.front() == '/') out.path.erase(0, 1);
  } else {
    // A root is named by its own path: "/a/../b" would be checked against
    // --allowed_file_roots, and shown in the mount table, as one directory
    // while it is another.
    for (absl::string_view part : absl::StrSplit(out.path, '/')) {
      if (part == "." || part == "..") {
        return absl::InvalidArgumentError(absl::StrCat(
            "file:// root '", out.path, "' has a '", part,
            "' component; write the directory's own absolute path"));
      }
    }
  }
  if (!query.empty()) {
    for (absl::string_view pair :
         absl::StrSplit(query, '&', absl::SkipEmpty())) {
      std::pair<absl::string_view, absl::string_view> kv =
          absl::StrSplit(pair, absl::MaxSplits('=', 1));
      LARDER_ASSIGN_OR_RETURN(std::string key, PercentDecode(kv.first));
      LARDER_ASSIGN_OR_RETURN(std::string value, PercentDecode(kv.second));
      if (key.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("empty option name in URI '", uri, "'"));
      }
      if (!out.options.emplace(std::move(key), std::move(value)).second) {
        return absl::InvalidArgumentError(absl::StrCat(
            "option '", kv.first, "' given twice in URI '", uri, "'"));
      }
    }
  }
  return out;
}

absl::StatusOr<std::string> NormalizeStorePath(absl::string_view path) {
  if (path.size() > 4096) {
    return absl::InvalidArgumentError("path longer than 4096 bytes");
  }
  if (path.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError("path contains a NUL byte");
  }
  std::vector<absl::string_view> parts;
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    if (part == "." || part == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat("path '", path, "' has a '", part,
                       "' component; paths must stay inside the store root"));
    }
    parts.push_back(part);
  }
  return absl::StrJoin(parts, "/");
}

absl::StatusOr<std::string> NormalizeClusterPath(absl::string_view path) {
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster path '", path, "' must start with '/'"));
  }
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeStorePath(path));
  return absl::StrCat("/", rel);
}

std::string ParentClusterPath(absl::string_view path) {
  const size_t slash = path.rfind('/');
  if (slash == 0 || slash == absl::string_view::npos) return "/";
  return std::string(path.substr(0, slash));
}

std::string JoinStorePath(absl::string_view dir, absl::string_view name) {
  if (dir.empty()) return std::string(name);
  return absl::StrCat(dir, "/", name);
}

std::string KeyPrefix::KeyOf(absl::string_view rel) const {
  if (prefix_.empty()) return std::string(rel);
  if (rel.empty()) return prefix_;
  return absl::StrCat(prefix_, "/", rel);
}

std::optional<std::string> KeyPrefix::RelOf(absl::string_view key) const {
  if (!prefix_.empty()) {
    if (!absl::ConsumePrefix(&key, prefix_) || !absl::ConsumePrefix(&key, "/"))
      return std::nullopt;
  }
  absl::StatusOr<std::string> rel = NormalizeStorePath(key);
  if (!rel.ok() || *rel != key || rel->empty()) return std::nullopt;
  return std::move(*rel);
}

absl::StatusOr<bool> ParseBoolOption(absl::string_view name,
                                     absl::string_view value) {
  std::string v = absl::AsciiStrToLower(value);
  if (v == "true" || v == "1" || v == "yes" || v.empty()) return true;
  if (v == "false" || v == "0" || v == "no") return false;
  return absl::InvalidArgumentError(absl::StrCat(
      "option '", name, "' wants true or false, got '", value, "'"));
}

}  // namespace larder
