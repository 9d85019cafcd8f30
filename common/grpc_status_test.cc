// Copyright 2026 The Larder Authors.
#include "common/grpc_status.h"

#include "gtest/gtest.h"

namespace larder {
namespace {

TEST(GrpcStatusTest, AStoreErrorCrossesTheWireAsOne) {
  const absl::Status store =
      MarkStoreError(absl::DeadlineExceededError("s3 sent nothing"));
  EXPECT_TRUE(IsStoreError(store));
  const grpc::Status wire = ToGrpcStatus(store);
  EXPECT_TRUE(FromLarderServer(wire));
  const absl::Status back = FromGrpcStatus(wire);
  EXPECT_EQ(back.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(back.message(), "s3 sent nothing");
  EXPECT_TRUE(IsStoreError(back));
}

TEST(GrpcStatusTest, TheServersOwnErrorsAreNotTheStores) {
  const grpc::Status wire =
      ToGrpcStatus(absl::UnavailableError("worker stopping"));
  EXPECT_TRUE(FromLarderServer(wire));
  EXPECT_FALSE(IsStoreError(FromGrpcStatus(wire)));
  // From the transport (no Larder server answered).
  EXPECT_FALSE(FromLarderServer(grpc::Status(grpc::UNAVAILABLE, "refused")));
  EXPECT_FALSE(
      IsStoreError(FromGrpcStatus(grpc::Status(grpc::UNAVAILABLE, "refused"))));
  EXPECT_TRUE(MarkStoreError(absl::OkStatus()).ok());
}

}  // namespace
}  // namespace larder
