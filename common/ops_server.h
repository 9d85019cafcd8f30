// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: ops_server.h
// -----------------------------------------------------------------------------
//
// The operations endpoint of every Larder daemon, on its own HTTP port:
//
//   GET /metrics   Prometheus text format of the daemon's registry
//   GET /healthz   200 "ok" while the health check passes, else 503 + reason
//
// Served by civetweb (embedded HTTP server); the text format comes from
// prometheus-cpp's serializer. Thread-safe; callbacks run on civetweb threads.
#ifndef LARDER_COMMON_OPS_SERVER_H_
#define LARDER_COMMON_OPS_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

struct mg_connection;
struct mg_context;

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace larder {

class OpsServer {
 public:
  struct Options {
    // "127.0.0.1:9100", or "0.0.0.0:9100" to be scraped from elsewhere.
    std::string listen = "127.0.0.1:9100";
    std::shared_ptr<prometheus::Registry> registry;
    // Called before each scrape, e.g. to refresh gauges. May be empty.
    std::function<void()> before_scrape;
    // The health check; empty means always healthy.
    std::function<absl::Status()> health;
  };

  // Errors: Unavailable (the port cannot be bound), InvalidArgument.
  static absl::StatusOr<std::unique_ptr<OpsServer>> Start(Options options);
  ~OpsServer();

  int port() const { return port_; }

 private:
  explicit OpsServer(Options options) : options_(std::move(options)) {}
  static int HandleMetrics(::mg_connection* conn, void* self);
  static int HandleHealth(::mg_connection* conn, void* self);

  Options options_;
  ::mg_context* ctx_ = nullptr;
  int port_ = 0;
};

}  // namespace larder

#endif  // LARDER_COMMON_OPS_SERVER_H_
