// Copyright 2026 The Larder Authors.
#include "common/grpc_status.h"

#include "common/log.h"

namespace larder {

constexpr char kServerMarker[] = "larder";

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      RedactSecrets(status.message()), kServerMarker);
}

bool FromLarderServer(const grpc::Status& status) {
  return status.error_details() == kServerMarker;
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

}  // namespace larder
