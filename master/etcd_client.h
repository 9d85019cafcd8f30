// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: etcd_client.h
// -----------------------------------------------------------------------------
//
// A small client of etcd's v3 gRPC API (proto/etcd.proto): ranges,
// transactions and leases, which is all the master's leader election and its
// store of record need. Consensus is etcd's; nothing here decides anything.
//
// Several endpoints may be given (the members of an etcd cluster): a call
// that cannot reach one tries the next. Errors name the endpoints:
// Unavailable ("cannot reach etcd at 127.0.0.1:2379: ...") when none
// answers, and etcd's own codes otherwise.
//
// TLS: with `ca_file` the channel verifies etcd's certificate, and with
// `cert_file`/`key_file` presents a client certificate (etcd's
// --client-cert-auth). Larder's bearer token is never sent to etcd.
//
// Thread-safe.
#ifndef LARDER_MASTER_ETCD_CLIENT_H_
#define LARDER_MASTER_ETCD_CLIENT_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/etcd.grpc.pb.h"

namespace larder {

struct EtcdOptions {
  // host:port of each member, e.g. {"10.0.0.1:2379", "10.0.0.2:2379"}.
  std::vector<std::string> endpoints;
  // TLS to etcd (PEM files); empty ca_file = plain gRPC.
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  // Deadline of one call to one endpoint.
  absl::Duration call_timeout = absl::Seconds(2);
};

// Parses "a:2379,b:2379" (an optional http:// or https:// is dropped).
// Errors: InvalidArgument (empty, or an entry without a port).
absl::StatusOr<std::vector<std::string>> ParseEtcdEndpoints(
    absl::string_view list);

class EtcdClient {
 public:
  // Errors: InvalidArgument (no endpoint), and those of reading the PEM
  // files. Nothing is contacted here.
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Create(
      EtcdOptions options);

  // The value of `key` (kvs empty when absent), or of every key starting
  // with `key` when `prefix`.
  absl::StatusOr<etcdserverpb::RangeResponse> Range(const std::string& key,
                                                    bool prefix = false);
  absl::StatusOr<etcdserverpb::TxnResponse> Txn(
      const etcdserverpb::TxnRequest& request);
  // A lease of `ttl` (etcd may round it up to its minimum). Returns its id.
  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl);
  // Renews a lease; returns its new TTL, zero when the lease is gone.
  absl::StatusOr<absl::Duration> KeepAlive(int64_t lease);
  absl::Status RevokeLease(int64_t lease);

  // "127.0.0.1:2379,127.0.0.1:2479", for messages.
  const std::string& endpoints() const { return names_; }

 private:
  struct Endpoint {
    std::string address;
    std::unique_ptr<etcdserverpb::KV::Stub> kv;
    std::unique_ptr<etcdserverpb::Lease::Stub> lease;
  };
  explicit EtcdClient(EtcdOptions options) : options_(std::move(options)) {}
  // Runs `call` against the current endpoint, moving on to the next one while
  // an endpoint cannot be reached.
  absl::Status Call(
      const std::function<grpc::Status(Endpoint&, grpc::ClientContext*)>& call);

  const EtcdOptions options_;
  std::string names_;
  std::vector<Endpoint> endpoints_;
  std::atomic<size_t> current_{0};
};

// The end of the range of every key starting with `prefix` (etcd's
// "prefix + 1").
std::string EtcdPrefixEnd(std::string prefix);

}  // namespace larder

#endif  // LARDER_MASTER_ETCD_CLIENT_H_
