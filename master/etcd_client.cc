// Copyright 2026 The Larder Authors.
#include "master/etcd_client.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/grpc_status.h"
#include "common/security.h"
#include "common/status_macros.h"

namespace larder {

absl::StatusOr<std::vector<std::string>> ParseEtcdEndpoints(
    absl::string_view list) {
  std::vector<std::string> out;
  for (absl::string_view e :
       absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    e = absl::StripAsciiWhitespace(e);
    absl::ConsumePrefix(&e, "http://") || absl::ConsumePrefix(&e, "https://");
    absl::ConsumeSuffix(&e, "/");
    const size_t colon = e.rfind(':');
    int port = 0;
    if (colon == absl::string_view::npos || colon == 0 ||
        !absl::SimpleAtoi(e.substr(colon + 1), &port) || port <= 0 ||
        port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd endpoint '", e, "' is not HOST:PORT"));
    }
    out.emplace_back(e);
  }
  if (out.empty())
    return absl::InvalidArgumentError("no etcd endpoint given (HOST:PORT,...)");
  return out;
}

std::string EtcdPrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    if (static_cast<unsigned char>(prefix.back()) < 0xff) {
      prefix.back() = static_cast<char>(prefix.back() + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');  // Every key.
}

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Create(
    EtcdOptions options) {
  if (options.endpoints.empty())
    return absl::InvalidArgumentError("no etcd endpoint given");
  SecurityOptions tls;
  tls.tls_ca_file = options.ca_file;
  tls.tls_cert_file = options.cert_file;
  tls.tls_key_file = options.key_file;
  absl::StatusOr<std::shared_ptr<const ChannelFactory>> channels =
      ChannelFactory::CreateWithoutToken(tls);
  if (!channels.ok()) {
    return absl::Status(channels.status().code(),
                        absl::StrCat("etcd TLS (--etcd_ca_file, "
                                     "--etcd_cert_file, --etcd_key_file): ",
                                     channels.status().message()));
  }
  std::unique_ptr<EtcdClient> c(new EtcdClient(std::move(options)));
  c->names_ = absl::StrJoin(c->options_.endpoints, ",");
  for (const std::string& address : c->options_.endpoints) {
    grpc::ChannelArguments args;
    // A dead member is retried soon after it comes back.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    std::shared_ptr<grpc::Channel> ch = (*channels)->Channel(address, args);
    c->endpoints_.push_back({address, etcdserverpb::KV::NewStub(ch),
                             etcdserverpb::Lease::NewStub(ch)});
  }
  return c;
}

absl::Status EtcdClient::Call(
    const std::function<grpc::Status(Endpoint&, grpc::ClientContext*)>& call) {
  const size_t n = endpoints_.size();
  const size_t first = current_.load();
  grpc::Status last;
  for (size_t i = 0; i < n; ++i) {
    Endpoint& e = endpoints_[(first + i) % n];
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     absl::ToChronoMilliseconds(options_.call_timeout));
    last = call(e, &ctx);
    if (last.error_code() != grpc::StatusCode::UNAVAILABLE &&
        last.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
      if (i != 0) current_.store((first + i) % n);
      if (last.ok()) return absl::OkStatus();
      return absl::Status(
          static_cast<absl::StatusCode>(last.error_code()),
          absl::StrCat("etcd at ", e.address, ": ", last.error_message()));
    }
  }
  return absl::UnavailableError(absl::StrCat("cannot reach etcd at ", names_,
                                             ": ", last.error_message()));
}

absl::StatusOr<etcdserverpb::RangeResponse> EtcdClient::Range(
    const std::string& key, bool prefix) {
  etcdserverpb::RangeRequest req;
  req.set_key(key);
  if (prefix) req.set_range_end(EtcdPrefixEnd(key));
  etcdserverpb::RangeResponse resp;
  LARDER_RETURN_IF_ERROR(Call([&](Endpoint& e, grpc::ClientContext* ctx) {
    return e.kv->Range(ctx, req, &resp);
  }));
  return resp;
}

absl::StatusOr<etcdserverpb::TxnResponse> EtcdClient::Txn(
    const etcdserverpb::TxnRequest& request) {
  etcdserverpb::TxnResponse resp;
  LARDER_RETURN_IF_ERROR(Call([&](Endpoint& e, grpc::ClientContext* ctx) {
    return e.kv->Txn(ctx, request, &resp);
  }));
  return resp;
}

absl::StatusOr<int64_t> EtcdClient::GrantLease(absl::Duration ttl) {
  etcdserverpb::LeaseGrantRequest req;
  req.set_ttl(std::max<int64_t>(1, absl::ToInt64Seconds(ttl)));
  etcdserverpb::LeaseGrantResponse resp;
  LARDER_RETURN_IF_ERROR(Call([&](Endpoint& e, grpc::ClientContext* ctx) {
    return e.lease->LeaseGrant(ctx, req, &resp);
  }));
  if (!resp.error().empty())
    return absl::UnavailableError(
        absl::StrCat("etcd refused a lease: ", resp.error()));
  return resp.id();
}

absl::StatusOr<absl::Duration> EtcdClient::KeepAlive(int64_t lease) {
  etcdserverpb::LeaseKeepAliveResponse resp;
  LARDER_RETURN_IF_ERROR(Call([&](Endpoint& e, grpc::ClientContext* ctx) {
    // One request and its answer per stream: simple, and it survives an
    // etcd restart without a stream to re-establish.
    auto stream = e.lease->LeaseKeepAlive(ctx);
    etcdserverpb::LeaseKeepAliveRequest req;
    req.set_id(lease);
    if (!stream->Write(req) || !stream->Read(&resp)) {
      stream->WritesDone();
      grpc::Status s = stream->Finish();
      return s.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                   "keep-alive stream closed")
                    : s;
    }
    stream->WritesDone();
    return stream->Finish();
  }));
  return absl::Seconds(resp.ttl());
}

absl::Status EtcdClient::RevokeLease(int64_t lease) {
  etcdserverpb::LeaseRevokeRequest req;
  req.set_id(lease);
  etcdserverpb::LeaseRevokeResponse resp;
  return Call([&](Endpoint& e, grpc::ClientContext* ctx) {
    return e.lease->LeaseRevoke(ctx, req, &resp);
  });
}

}  // namespace larder
