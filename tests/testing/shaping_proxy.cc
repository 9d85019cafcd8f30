// Copyright 2026 The Larder Authors.
#include "tests/testing/shaping_proxy.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace larder::testing {

absl::StatusOr<std::unique_ptr<ShapingProxy>> ShapingProxy::Start(
    const std::string& upstream, const std::vector<std::string>& flags) {
  std::unique_ptr<ShapingProxy> p(new ShapingProxy);
  const std::string log = p->dir_.path() + "/shaping_proxy.log";
  absl::Status st;
  for (int attempt = 0; attempt < 5; ++attempt) {
    p->port_ = PickFreePort();
    std::vector<std::string> argv = {
        "/usr/bin/python3", SourceDir() + "/tests/servers/shaping_proxy.py",
        "--upstream",       std::string(absl::StripPrefix(upstream, "http://")),
        "--listen",         absl::StrCat(p->port_),
        "--first_byte_ms",  "0",
        "--rate_mbps",      "0"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    st = p->process_.Start(argv, log);
    if (!st.ok()) return st;
    bool exited = false;
    const int port = p->port_;
    if (WaitFor(
            [&] {
              exited = p->process_.Exited();
              return exited || PortAccepts(port);
            },
            absl::Seconds(20)) &&
        !exited) {
      return p;
    }
    absl::StatusOr<std::string> text = ReadFile(log);
    st = absl::DeadlineExceededError(absl::StrCat(
        "the shaping proxy did not start; log:\n", text.value_or("")));
    if (!exited) return st;  // A taken port makes it exit: try another.
  }
  return st;
}

std::string ShapingProxy::endpoint() const {
  return absl::StrCat("http://127.0.0.1:", port_);
}

std::string ShapingProxy::Front(const std::string& uri,
                                const std::string& upstream_endpoint) const {
  return absl::StrReplaceAll(uri, {{upstream_endpoint, endpoint()}});
}

}  // namespace larder::testing
