// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: status_macros.h
// -----------------------------------------------------------------------------
//
// The two status-propagation macros Larder uses. Abseil 20220623 (Debian 12)
// has no public RETURN_IF_ERROR, so these are the project's only ones.
//
// Usage:
//
//   absl::StatusOr<Config> Load(absl::string_view path) {
//     LARDER_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
//     LARDER_RETURN_IF_ERROR(Validate(text));
//     return Parse(text);
//   }
#ifndef LARDER_COMMON_STATUS_MACROS_H_
#define LARDER_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Evaluates `expr` (an absl::Status) and returns it from the enclosing function
// if it is not OK.
#define LARDER_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::absl::Status larder_status_ = (expr);          \
    if (!larder_status_.ok()) return larder_status_; \
  } while (0)

#define LARDER_STATUS_MACROS_CONCAT_INNER_(x, y) x##y
#define LARDER_STATUS_MACROS_CONCAT_(x, y) \
  LARDER_STATUS_MACROS_CONCAT_INNER_(x, y)

// Evaluates `rexpr` (an absl::StatusOr<T>); on error returns its status from
// the enclosing function, otherwise moves the value into `lhs`, which may be a
// declaration (`auto x`, `std::string s`) or an existing lvalue.
#define LARDER_ASSIGN_OR_RETURN(lhs, rexpr) \
  LARDER_ASSIGN_OR_RETURN_IMPL_(            \
      LARDER_STATUS_MACROS_CONCAT_(larder_statusor_, __LINE__), lhs, rexpr)

#define LARDER_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                  \
  if (!statusor.ok()) return std::move(statusor).status();  \
  lhs = std::move(statusor).value()

#endif  // LARDER_COMMON_STATUS_MACROS_H_
