// Copyright 2026 The Larder Authors.
#include "cli/output.h"

#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cli/commands.h"

ABSL_FLAG(std::string, output, "table",
          "ls, stat, stats, ring, mount, unmount, load, version: table (for "
          "people) or json (one document on stdout, for scripts).");

namespace larder::cli {

absl::StatusOr<bool> JsonOutput() {
  const std::string o = absl::GetFlag(FLAGS_output);
  if (o == "json") return true;
  if (o == "table" || o.empty()) return false;
  return absl::InvalidArgumentError(
      absl::StrCat("--output: '", o, "' is not table or json"));
}

std::string DumpJson(const Json& doc, int indent) {
  return doc.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

void PrintJson(const Json& doc) {
  const std::string text = DumpJson(doc, 2);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

Json FileJson(const std::string& path, bool is_dir, uint64_t size,
              const std::string& version, int64_t mtime_unix_ns) {
  Json j;
  j["path"] = path;
  j["type"] = is_dir ? "directory" : "file";
  j["size"] = size;
  j["version"] = version;
  j["mtime"] = Rfc3339(mtime_unix_ns);
  j["mtime_unix_ms"] = mtime_unix_ns / 1000000;
  return j;
}

std::string Rfc3339(int64_t unix_ns) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixNanos(unix_ns),
                          absl::UTCTimeZone());
}

}  // namespace larder::cli
