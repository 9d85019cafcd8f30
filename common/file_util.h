// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: file_util.h
// -----------------------------------------------------------------------------
//
// Reading a whole small file (a token, a PEM bundle, the master's state).
#ifndef LARDER_COMMON_FILE_UTIL_H_
#define LARDER_COMMON_FILE_UTIL_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace larder {

// The whole of the file at `path`, refused past `max_bytes`. Errors name the
// file and `what` it is ("TLS key"), never its contents: NotFound,
// PermissionDenied, InvalidArgument (a read error, or too large).
absl::StatusOr<std::string> ReadWholeFile(const std::string& path,
                                          absl::string_view what,
                                          size_t max_bytes);

// Raises this process's descriptor limit as far as the system lets it (root
// may raise the hard limit up to fs.nr_open) and returns the limit in force.
// For daemons that hold a descriptor per cached block or lent file.
uint64_t RaiseFdLimit();

}  // namespace larder

#endif  // LARDER_COMMON_FILE_UTIL_H_
