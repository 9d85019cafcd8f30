// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: output.h
// -----------------------------------------------------------------------------
//
// Machine-readable output of `larder ... --output=json`: one JSON document on
// stdout per command (ls, stat, stats, ring, mount, unmount, load, version).
// Field names are part of Larder's interface (README, "JSON output"): they
// are only ever added to, never renamed. Sizes are bytes, times are Unix
// milliseconds or RFC 3339 strings as named (`..._unix_ms`, `mtime`).
#ifndef LARDER_CLI_OUTPUT_H_
#define LARDER_CLI_OUTPUT_H_

#include <cstdint>
#include <string>

#include "nlohmann/json.hpp"

namespace larder::cli {

// Objects keep their fields in the order they were set.
using Json = nlohmann::ordered_json;

// Writes `doc` to stdout, indented, with a final newline. Bytes that are not
// UTF-8 (a file name can be anything) are replaced, never an error.
void PrintJson(const Json& doc);

// RFC 3339 (UTC) for a Unix time in nanoseconds.
std::string Rfc3339(int64_t unix_ns);

}  // namespace larder::cli

#endif  // LARDER_CLI_OUTPUT_H_
