// Copyright 2026 The Larder Authors.
#include "common/grpc_status.h"

#include "absl/strings/cord.h"
#include "common/log.h"

namespace larder {
namespace {

// The details of an error a Larder server returned, and of one its
// under-store returned.
constexpr char kServerMarker[] = "larder";
constexpr char kStoreMarker[] = "larder-store";
constexpr char kStorePayload[] = "type.larder.dev/store-error";

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      RedactSecrets(status.message()),
                      IsStoreError(status) ? kStoreMarker : kServerMarker);
}

bool FromLarderServer(const grpc::Status& status) {
  return status.error_details() == kServerMarker ||
         status.error_details() == kStoreMarker;
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  absl::Status out(static_cast<absl::StatusCode>(status.error_code()),
                   status.error_message());
  if (status.error_details() == kStoreMarker) return MarkStoreError(out);
  return out;
}

absl::Status MarkStoreError(absl::Status status) {
  if (!status.ok()) status.SetPayload(kStorePayload, absl::Cord("1"));
  return status;
}

bool IsStoreError(const absl::Status& status) {
  return status.GetPayload(kStorePayload).has_value();
}

}  // namespace larder
