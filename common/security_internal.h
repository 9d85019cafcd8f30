// Copyright 2026 The Larder Authors.
//
// What security.cc and tokens.cc share; not part of security.h's interface.
#ifndef LARDER_COMMON_SECURITY_INTERNAL_H_
#define LARDER_COMMON_SECURITY_INTERNAL_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace larder {

// The whole of a small file (a token, a PEM bundle), at most 1 MiB.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path,
                                          absl::string_view what);
// Reads an admin token file that must be this user's alone (a regular file
// of this uid, mode 0600). Errors: PermissionDenied, those of reading it.
absl::StatusOr<std::string> ReadAdminToken(const std::string& path);

}  // namespace larder

#endif  // LARDER_COMMON_SECURITY_INTERNAL_H_
