// Copyright 2026 The Larder Authors.
//
// A real azurite (the npm Azure Blob API server, tests/servers/) on a free
// loopback port, with its well-known development account. azurite verifies
// Shared Key and SAS signatures (shared/TESTING-NOTES.md).
#ifndef LARDER_TESTS_TESTING_AZURITE_H_
#define LARDER_TESTS_TESTING_AZURITE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tests/testing/process.h"

namespace larder::testing {

class Azurite {
 public:
  static constexpr const char* kAccount = "devstoreaccount1";
  // The development account's published key (Azure documentation).
  static constexpr const char* kKey =
      "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/"
      "K1SZFPTOtr/KBHBeksoGMGw==";

  static absl::StatusOr<std::unique_ptr<Azurite>> Start();
  ~Azurite() { process_.Stop(9); }
  void Kill() { process_.Stop(9); }
  absl::Status Restart();

  // http://127.0.0.1:PORT/devstoreaccount1
  std::string endpoint() const;
  // az://CONTAINER/PREFIX?account=devstoreaccount1&endpoint=...
  std::string Uri(const std::string& container,
                  const std::string& prefix = "") const;

 private:
  Azurite() = default;
  absl::Status Launch();
  TempDir dir_;
  int port_ = 0;
  Subprocess process_;
};

}  // namespace larder::testing

#endif  // LARDER_TESTS_TESTING_AZURITE_H_
