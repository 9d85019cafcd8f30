// Copyright 2026 The Larder Authors.
#include "common/status_macros.h"

#include <memory>

#include "gtest/gtest.h"

namespace larder {
namespace {

absl::StatusOr<std::unique_ptr<int>> MakeInt(bool ok) {
  if (!ok) return absl::NotFoundError("no int");
  return std::make_unique<int>(7);
}

absl::StatusOr<int> UseAssign(bool ok) {
  LARDER_ASSIGN_OR_RETURN(std::unique_ptr<int> v,
                          MakeInt(ok));  // Move-only type.
  return *v + 1;
}

absl::Status UseReturn(absl::Status s, int* reached) {
  LARDER_RETURN_IF_ERROR(s);
  ++*reached;
  return absl::OkStatus();
}

TEST(StatusMacrosTest, AssignOrReturn) {
  EXPECT_EQ(*UseAssign(true), 8);
  EXPECT_EQ(UseAssign(false).status().code(), absl::StatusCode::kNotFound);
}

TEST(StatusMacrosTest, ReturnIfError) {
  int reached = 0;
  EXPECT_TRUE(UseReturn(absl::OkStatus(), &reached).ok());
  EXPECT_EQ(reached, 1);
  EXPECT_EQ(UseReturn(absl::InternalError("x"), &reached).code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(reached, 1);
}

}  // namespace
}  // namespace larder
