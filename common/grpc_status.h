// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: grpc_status.h
// -----------------------------------------------------------------------------
//
// The one place where absl::Status and grpc::Status meet (CONVENTIONS 6).
// Codes map one to one (both follow google.rpc.Code); messages are redacted.
#ifndef LARDER_COMMON_GRPC_STATUS_H_
#define LARDER_COMMON_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace larder {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace larder

#endif  // LARDER_COMMON_GRPC_STATUS_H_
