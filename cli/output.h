// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: output.h
// -----------------------------------------------------------------------------
//
// Machine-readable output of `larder ... --output=json`: one JSON document on
// stdout per command (ls, stat, stats, ring, mount, unmount, load, evict,
// version).
// Field names are part of Larder's interface (docs/operations.md, "JSON
// output"): they are only ever added to, never renamed. Sizes are bytes, times
// are Unix milliseconds or RFC 3339 strings as named (`..._unix_ms`, `mtime`).
#ifndef LARDER_CLI_OUTPUT_H_
#define LARDER_CLI_OUTPUT_H_

#include <cstdint>
#include <string>

#include "nlohmann/json.hpp"

namespace larder::cli {

// Objects keep their fields in the order they were set.
using Json = nlohmann::ordered_json;

// `doc` as text: indented by `indent` spaces, or on one line with -1. Bytes
// that are not UTF-8 (a file name can be anything) are replaced, never an
// error (nlohmann's default throws).
std::string DumpJson(const Json& doc, int indent = -1);

// Writes DumpJson(doc, 2) to stdout with a final newline.
void PrintJson(const Json& doc);

// A file or directory as `ls` and `stat` show it: {"path", "type" ("file"
// or "directory"), "size", "version", "mtime" (RFC 3339), "mtime_unix_ms"}.
Json FileJson(const std::string& path, bool is_dir, uint64_t size,
              const std::string& version, int64_t mtime_unix_ns);

// RFC 3339 (UTC) for a Unix time in nanoseconds.
std::string Rfc3339(int64_t unix_ns);

}  // namespace larder::cli

#endif  // LARDER_CLI_OUTPUT_H_
