// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: shaping_proxy.h
// -----------------------------------------------------------------------------
//
// tests/servers/shaping_proxy.py in front of an HTTP test server, for C++
// tests: a store that answers with a delay, at a rate, or (--later_page_ms)
// holds a listing's later pages, so that what waits on what is decided by
// the test, not by the machine's load.
//
//   auto front = ShapingProxy::Start(s3->endpoint(), {"--later_page_ms=3000"});
//   AddMount(path, (*front)->Front(s3->Uri("pages"), s3->endpoint()));
#ifndef LARDER_TESTS_TESTING_SHAPING_PROXY_H_
#define LARDER_TESTS_TESTING_SHAPING_PROXY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/testing/process.h"

namespace larder::testing {

class ShapingProxy {
 public:
  // `upstream`: "http://HOST:PORT" or "HOST:PORT". `flags`: the proxy's own
  // ("--first_byte_ms=25", ...); by default it forwards without shaping.
  static absl::StatusOr<std::unique_ptr<ShapingProxy>> Start(
      const std::string& upstream, const std::vector<std::string>& flags = {});
  ~ShapingProxy() { process_.Stop(9); }

  // "http://127.0.0.1:PORT"
  std::string endpoint() const;
  // `uri` with `upstream_endpoint` (as it appears in it) replaced by this
  // front's endpoint.
  std::string Front(const std::string& uri,
                    const std::string& upstream_endpoint) const;

 private:
  ShapingProxy() = default;
  TempDir dir_;
  Subprocess process_;
  int port_ = 0;
};

}  // namespace larder::testing

#endif  // LARDER_TESTS_TESTING_SHAPING_PROXY_H_
