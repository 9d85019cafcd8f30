// Copyright 2026 The Larder Authors.
#include "common/ops_server.h"

#include <civetweb.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <mutex>

#include "absl/strings/str_cat.h"

namespace larder {
namespace {

void Reply(mg_connection* conn, int code, absl::string_view type,
           absl::string_view body) {
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: %.*s\r\nContent-Length: %zu\r\n"
            "Connection: close\r\n\r\n",
            code, code == 200 ? "OK" : "Service Unavailable",
            static_cast<int>(type.size()), type.data(), body.size());
  mg_write(conn, body.data(), body.size());
}

}  // namespace

absl::StatusOr<std::unique_ptr<OpsServer>> OpsServer::Start(Options options) {
  static std::once_flag init;
  std::call_once(init, [] { mg_init_library(0); });
  std::unique_ptr<OpsServer> s(new OpsServer(std::move(options)));
  // /healthz is the kubelet's liveness probe: it must answer while other
  // clients hold connections open. Each connection takes a thread until it
  // closes or times out, so: threads to spare for idle or slow clients, and
  // a bound on how long one may sit on a thread without sending a request.
  const char* opts[] = {"listening_ports",
                        s->options_.listen.c_str(),
                        "num_threads",
                        "16",
                        "request_timeout_ms",
                        "2000",
                        "enable_keep_alive",
                        "no",
                        nullptr};
  mg_callbacks callbacks{};
  s->ctx_ = mg_start(&callbacks, nullptr, opts);
  if (s->ctx_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve /metrics on ", s->options_.listen,
                     " (address in use or malformed)"));
  }
  mg_server_port ports[1];
  if (mg_get_server_ports(s->ctx_, 1, ports) > 0) s->port_ = ports[0].port;
  mg_set_request_handler(s->ctx_, "/metrics$", &OpsServer::HandleMetrics,
                         s.get());
  mg_set_request_handler(s->ctx_, "/healthz$", &OpsServer::HandleHealth,
                         s.get());
  return s;
}

OpsServer::~OpsServer() {
  if (ctx_ != nullptr) mg_stop(ctx_);
}

int OpsServer::HandleMetrics(mg_connection* conn, void* self) {
  auto* s = static_cast<OpsServer*>(self);
  if (s->options_.before_scrape) s->options_.before_scrape();
  std::string text;
  if (s->options_.registry)
    text =
        prometheus::TextSerializer().Serialize(s->options_.registry->Collect());
  Reply(conn, 200, "text/plain; version=0.0.4", text);
  return 200;
}

int OpsServer::HandleHealth(mg_connection* conn, void* self) {
  auto* s = static_cast<OpsServer*>(self);
  absl::Status st =
      s->options_.health ? s->options_.health() : absl::OkStatus();
  if (st.ok()) {
    Reply(conn, 200, "text/plain", "ok\n");
    return 200;
  }
  Reply(conn, 503, "text/plain", absl::StrCat(st.ToString(), "\n"));
  return 503;
}

}  // namespace larder
