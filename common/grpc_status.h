// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: grpc_status.h
// -----------------------------------------------------------------------------
//
// The one place where absl::Status and grpc::Status meet.
// Codes map one to one (both follow google.rpc.Code); messages are redacted.
#ifndef LARDER_COMMON_GRPC_STATUS_H_
#define LARDER_COMMON_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace larder {

// Errors a Larder server returns carry a marker (in the status details), so
// a client can tell "the master answered UNAVAILABLE because S3 is down"
// from "the master cannot be reached".
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);
// Whether `status` was returned by a Larder server (not by the transport).
bool FromLarderServer(const grpc::Status& status);

// An error of the under-store behind a server (S3 did not answer, refused,
// lost the object), as opposed to one of the server itself. It travels with
// the status (a payload; on the wire, in the details), so that a client does
// not fail over to another worker, which would wait on the same store, but
// reports it at once.
absl::Status MarkStoreError(absl::Status status);
bool IsStoreError(const absl::Status& status);

}  // namespace larder

#endif  // LARDER_COMMON_GRPC_STATUS_H_
