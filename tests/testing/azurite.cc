// Copyright 2026 The Larder Authors.
#include "tests/testing/azurite.h"

#include <filesystem>

#include "absl/strings/str_cat.h"

namespace larder::testing {

absl::StatusOr<std::unique_ptr<Azurite>> Azurite::Start() {
  std::unique_ptr<Azurite> a(new Azurite);
  a->port_ = PickFreePort();
  absl::Status st = a->Launch();
  if (!st.ok()) return st;
  return a;
}

absl::Status Azurite::Launch() {
  const std::string script =
      SourceDir() + "/tests/servers/node_modules/azurite/dist/src/blob/main.js";
  if (!std::filesystem::exists(script)) {
    return absl::FailedPreconditionError(
        absl::StrCat(script, " is missing: run scripts/install-deps.sh"));
  }
  absl::Status st = process_.Start(
      {"node", script, "--blobHost", "127.0.0.1", "--blobPort",
       absl::StrCat(port_), "--location", dir_.path(), "--skipApiVersionCheck",
       "--silent", "--disableProductStyleUrl"},
      dir_.path() + "/azurite.log");
  if (!st.ok()) return st;
  const int port = port_;
  if (!WaitFor([port] { return PortAccepts(port); }, absl::Seconds(30))) {
    return absl::DeadlineExceededError(
        absl::StrCat("azurite did not listen on ", port_));
  }
  return absl::OkStatus();
}

absl::Status Azurite::Restart() {
  process_.Stop(9);
  return Launch();
}

std::string Azurite::endpoint() const {
  return absl::StrCat("http://127.0.0.1:", port_, "/", kAccount);
}

std::string Azurite::Uri(const std::string& container,
                         const std::string& prefix) const {
  return absl::StrCat("az://", container, prefix.empty() ? "" : "/", prefix,
                      "?account=", kAccount, "&endpoint=", endpoint());
}

}  // namespace larder::testing
