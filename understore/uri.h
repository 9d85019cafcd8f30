// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: uri.h
// -----------------------------------------------------------------------------
//
// Parsing of under-store URIs and of the relative paths given to a store.
//
//   file:///data/imagenet
//   s3://bucket/prefix?endpoint=http://127.0.0.1:9000&region=us-east-1&path_style=true
//
// Query values are percent-decoded; an option given twice is an error, so is an
// option the backend does not know (each backend checks its own set), so that a
// typo never silently falls back to a default.
#ifndef LARDER_UNDERSTORE_URI_H_
#define LARDER_UNDERSTORE_URI_H_

#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace larder {

struct StoreUri {
  std::string scheme;     // Lowercase: "file", "s3", ...
  std::string authority;  // Bucket / container / host[:port]; "" for file://.
  std::string
      path;  // Percent-decoded; for file:// absolute, else no leading '/'.
  std::map<std::string, std::string> options;  // Decoded query parameters.
};

// Errors: InvalidArgument, naming what is wrong.
absl::StatusOr<StoreUri> ParseStoreUri(absl::string_view uri);

// Decodes %XX escapes ('+' stays '+', or becomes ' ' with plus_is_space,
// as in form encoding). InvalidArgument on a bad escape.
absl::StatusOr<std::string> PercentDecode(absl::string_view text,
                                          bool plus_is_space = false);

// Checks and normalizes a path relative to a store root: strips leading and
// trailing '/', collapses "//". Returns InvalidArgument for "." or ".."
// components (which would escape or alias), NUL bytes and paths over 4096
// bytes. "" (and "/") is the root.
absl::StatusOr<std::string> NormalizeStorePath(absl::string_view path);

// Cluster paths (the namespace every mount appears in: "/datasets/x"):
// "/a//b/" -> "/a/b". Errors: InvalidArgument (relative, "." or "..", as
// NormalizeStorePath).
absl::StatusOr<std::string> NormalizeClusterPath(absl::string_view path);
// The directory of a normalized cluster path: "/a/b" -> "/a", "/a" -> "/",
// "/" -> "/".
std::string ParentClusterPath(absl::string_view path);

// Joins a store-relative directory and child name ("" + "a" = "a").
std::string JoinStorePath(absl::string_view dir, absl::string_view name);

// Maps store paths to object keys below a key prefix, for object stores
// (S3, Azure), where "directories" are only key prefixes. Immutable.
class KeyPrefix {
 public:
  // `prefix`: normalized, no leading or trailing '/'; may be empty.
  explicit KeyPrefix(std::string prefix) : prefix_(std::move(prefix)) {}
  const std::string& prefix() const { return prefix_; }
  // The key of a normalized store path ("" = the prefix itself).
  std::string KeyOf(absl::string_view rel) const;
  // The store path of a key, or nullopt if the key lies outside the prefix
  // or cannot be addressed as a store path ("." / ".." / empty components).
  std::optional<std::string> RelOf(absl::string_view key) const;

 private:
  std::string prefix_;
};

// Reads a boolean option value: true/false/1/0/yes/no. InvalidArgument
// otherwise.
absl::StatusOr<bool> ParseBoolOption(absl::string_view name,
                                     absl::string_view value);

}  // namespace larder

#endif  // LARDER_UNDERSTORE_URI_H_
