// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: master_connection.h
// -----------------------------------------------------------------------------
//
// The way every Larder process (worker, client library, FUSE daemon, CLI,
// Python module) calls the master: one address, or the several masters of an
// HA cluster ("a:7060,b:7060,c:7060"). Calls go to the leader:
//
//  * A master that does not lead answers UNAVAILABLE with the leader's
//    address in the trailing metadata `larder-leader` ("none" during an
//    election). The call goes again to that address at once if it is one of
//    the addresses given (no other address is ever called: a hint is only
//    the claim of whoever answered, and the call carries the caller's
//    token; an unlisted leader is logged and the next listed master tried,
//    and a single address fails UNAVAILABLE naming the leader), or, with no
//    leader yet, after a short backoff (50 ms doubling to 500 ms), for at
//    most 10 s (an election takes a lease's time; longer means the masters
//    cannot reach etcd: the call then fails with the masters' own error).
//  * A master that cannot be reached is skipped for the next address, until
//    the call's timeout. With several masters each try is bounded: 2 s to
//    a master not yet connected (a paused process accepts TCP connections
//    but never answers), a third of the call's timeout (at least 2 s) to
//    one that is.
//  * With a single address and no leader hint, an unreachable master fails
//    the call at once, as it always did.
//
// The leader found is remembered for the next calls. Thread-safe.
//
// Usage:
//
//   LARDER_ASSIGN_OR_RETURN(auto master,
//                           MasterConnection::Create("a:7060,b:7060",
//                           channels));
//   v1::Ring ring;
//   grpc::Status s = master->Call(&v1::Master::Stub::GetRing,
//                                 v1::GetRingRequest(), &ring,
//                                 absl::Seconds(10));
#ifndef LARDER_COMMON_MASTER_CONNECTION_H_
#define LARDER_COMMON_MASTER_CONNECTION_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/security.h"
#include "proto/master.grpc.pb.h"

namespace larder {

// The trailing metadata of a master that does not lead: the leader's
// address, or "none".
inline constexpr char kLeaderTrailer[] = "larder-leader";

// "a:7060, b:7060" -> {"a:7060", "b:7060"}. Errors: InvalidArgument (empty,
// or an entry that is not HOST:PORT).
absl::StatusOr<std::vector<std::string>> ParseMasterAddresses(
    absl::string_view list);

class MasterConnection {
 public:
  // Errors: those of ParseMasterAddresses. Nothing is contacted here.
  static absl::StatusOr<std::unique_ptr<MasterConnection>> Create(
      absl::string_view addresses,
      std::shared_ptr<const ChannelFactory> channels);

  // Calls `rpc` on the leader within `timeout` (see above).
  template <typename Request, typename Response>
  grpc::Status Call(grpc::Status (v1::Master::Stub::*rpc)(grpc::ClientContext*,
                                                          const Request&,
                                                          Response*),
                    const Request& request, Response* response,
                    absl::Duration timeout) {
    return Run(
        [&](v1::Master::Stub& stub, grpc::ClientContext* ctx) {
          return (stub.*rpc)(ctx, request, response);
        },
        timeout);
  }

  // The address calls go to now (the leader, once one answered).
  std::string current() const;
  // The addresses given, comma-separated (for messages).
  const std::string& addresses() const { return names_; }
  bool several() const { return list_.size() > 1; }

 private:
  MasterConnection() = default;
  grpc::Status Run(
      absl::FunctionRef<grpc::Status(v1::Master::Stub&, grpc::ClientContext*)>
          call,
      absl::Duration timeout);
  struct Target {
    std::shared_ptr<grpc::Channel> channel;
    std::shared_ptr<v1::Master::Stub> stub;
  };
  Target TargetFor(const std::string& address)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::shared_ptr<const ChannelFactory> channels_;
  std::vector<std::string> list_;
  std::string names_;
  mutable absl::Mutex mu_;
  std::string current_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Target> targets_ ABSL_GUARDED_BY(mu_);
};

}  // namespace larder

#endif  // LARDER_COMMON_MASTER_CONNECTION_H_
