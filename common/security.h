// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: security.h
// -----------------------------------------------------------------------------
//
// Who may call the master and the workers, and how their traffic is
// protected. Every gRPC channel and server in Larder is made here, so TLS and
// authentication apply to all of them the same way.
//
//  * TLS comes from gRPC's own SslCredentials / SslServerCredentials, fed PEM
//    files (SecurityOptions). A server with a CA bundle verifies client
//    certificates (mutual TLS); one without accepts any client at the TLS
//    layer and relies on tokens.
//  * A caller has one of two roles. kReader may stat, list and read; kAdmin
//    may also mount, unmount, load, invalidate, evict and register workers.
//    It proves its role with a bearer token (gRPC metadata "authorization:
//    Bearer <token>") listed in the server's tokens file, or with a verified
//    client certificate: identities in `tls_admin_identities` are admins,
//    other certificates from the CA are readers. The higher role wins.
//  * A server with neither a tokens file nor client-certificate verification
//    does not authenticate: every caller is an admin. That is allowed on
//    loopback only (CheckExposure), unless the operator says
//    --allow_insecure_network.
//
// Secrets: tokens are read from files or the environment (never flags, which
// `ps` shows), registered with RegisterSecret (so no log line carries them)
// and never echoed in an error.
//
// Usage (server):
//
//   LARDER_ASSIGN_OR_RETURN(auto auth, Authorizer::Create(options));
//   builder.AddListeningPort(listen, *ServerCredentials(options), &port);
//   ...in a handler:
//   if (grpc::Status s = auth->Check(*context, Role::kAdmin, "AddMount");
//       !s.ok()) return s;
//
// Usage (client):
//
//   LARDER_ASSIGN_OR_RETURN(auto channels, ChannelFactory::Create(options));
//   auto stub = v1::Master::NewStub(channels->Channel("master:7060"));
#ifndef LARDER_COMMON_SECURITY_H_
#define LARDER_COMMON_SECURITY_H_

#include <grpcpp/channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/channel_arguments.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/config.h"

namespace larder {

enum class Role { kNone = 0, kReader = 1, kAdmin = 2 };
absl::string_view RoleName(Role role);

// Reads the bearer token a client presents: the first line of `token_file`
// when set, else $LARDER_TOKEN, else the file named by $LARDER_TOKEN_FILE;
// empty when none is set. The token is registered as a secret. Errors:
// NotFound / PermissionDenied (the file), InvalidArgument (empty file).
absl::StatusOr<std::string> LoadClientToken(const std::string& token_file);

// The tokens a server accepts, from a file of "<role> <token>" lines (role
// admin or reader; blank lines and lines starting with '#' are skipped).
// Tokens shorter than 16 characters are refused. Errors name the file and
// line, never the token.
struct TokenEntry {
  Role role;
  std::string token;
};
absl::StatusOr<std::vector<TokenEntry>> LoadTokensFile(const std::string& path);

// The credentials for a server's listening port: TLS when tls_cert_file and
// tls_key_file are set (verifying client certificates against tls_ca_file
// when that is set), else insecure. Errors: NotFound / PermissionDenied
// (a PEM file), InvalidArgument (half a key pair, or a CA without a
// certificate).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const SecurityOptions& options);

// Refuses to serve `listen` beyond loopback without authentication unless
// allow_insecure_network; logs a warning for tokens sent without TLS beyond
// loopback, and for a server that authenticates no one. `component` names
// the daemon in messages ("master", "worker"). Error: FailedPrecondition.
absl::Status CheckExposure(absl::string_view component,
                           absl::string_view listen,
                           const SecurityOptions& options);

// Whether a client-side UNAVAILABLE looks like a failed TLS handshake (a
// server or client certificate that was refused, plain gRPC against a TLS
// port: gRPC reports those as the socket closed during set-up) rather than
// an unreachable server.
bool IsTlsFailure(const absl::Status& status);

// True for 127.0.0.0/8, ::1, "localhost" and unix: addresses.
bool IsLoopbackAddress(absl::string_view listen);

// A local process's identity as the kernel vouches for it on a connected
// unix socket (SO_PEERCRED, SO_PEERGROUPS): taken when the peer connected, so
// neither a later setuid nor the reuse of its pid changes what it says.
struct PeerCredentials {
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<uint32_t> groups;  // Supplementary groups.
  int32_t pid = 0;               // For logs only.
  bool InGroup(uint32_t g) const;
};
// Errors: Internal (not a unix socket, or the kernel would not say).
absl::StatusOr<PeerCredentials> PeerCredentialsOf(int fd);

// Who may read a mount's files: its MountEntry's owner, group and mode.
// FUSE mounts present exactly these to the kernel (default_permissions),
// and the workers apply them to local callers with MayReadMount.
struct MountAccess {
  std::optional<uint32_t> uid;  // Unset: the serving daemon's own uid.
  std::optional<uint32_t> gid;  // Unset: the serving daemon's own gid.
  uint32_t mode = 0;            // 0 = 0444.
  // The permission bits files of the mount get: no write, setuid, setgid
  // or sticky bit, whatever `mode` says (the cache is read-only, and a
  // setuid file from a cache is a way to root).
  uint32_t FileMode() const { return mode == 0 ? 0444 : mode & 0555; }
  std::string DebugString() const;  // "uid 0 gid 4242 mode 0440".
};

// The one decision "may this local caller read this mount", made as the
// kernel makes it for the FUSE view: root may; the owner by the owner bits
// alone; a member of the group (primary or supplementary) by the group bits;
// everyone else by the other bits. `daemon_uid`/`daemon_gid` stand for an
// unset owner or group.
bool MayReadMount(const MountAccess& mount, const PeerCredentials& peer,
                  uint32_t daemon_uid, uint32_t daemon_gid);

// Checks callers' roles on a server. Thread-safe, immutable after Create.
class Authorizer {
 public:
  // Errors: those of LoadTokensFile.
  static absl::StatusOr<std::unique_ptr<Authorizer>> Create(
      const SecurityOptions& options);

  // OK when the caller of `context` holds `needed` (or authentication is
  // off). Else UNAUTHENTICATED (no credential, or an unknown token; the
  // message says which credential is expected) or PERMISSION_DENIED (a
  // reader calling `method`, which needs admin). Refusals are logged, at
  // most once a second, without the token.
  grpc::Status Check(const grpc::ServerContextBase& context, Role needed,
                     absl::string_view method) const;
  // The caller's role (kNone if it presented nothing valid).
  Role RoleOf(const grpc::ServerContextBase& context) const;

  bool enabled() const { return enabled_; }

 private:
  Authorizer() = default;
  std::vector<TokenEntry> tokens_;
  std::vector<std::string> admin_identities_;
  bool verify_client_certs_ = false;
  bool enabled_ = false;
};

// Makes client channels to masters and workers: TLS when tls_ca_file is set
// (presenting tls_cert_file/tls_key_file when set), and the bearer token on
// every call when one is set. Thread-safe, immutable after Create.
class ChannelFactory {
 public:
  // Errors: those of LoadClientToken (with options.token_file) and of
  // reading the PEM files.
  static absl::StatusOr<std::shared_ptr<const ChannelFactory>> Create(
      const SecurityOptions& options);
  // The same without any bearer token (token_file and $LARDER_TOKEN are
  // ignored): for channels to services that are not Larder's (etcd), which
  // must never see a Larder token.
  static absl::StatusOr<std::shared_ptr<const ChannelFactory>>
  CreateWithoutToken(const SecurityOptions& options);
  // Plain channels, no token: for tests and tools that talk to an
  // unauthenticated loopback cluster.
  static std::shared_ptr<const ChannelFactory> Insecure();

  std::shared_ptr<grpc::Channel> Channel(
      const std::string& target,
      grpc::ChannelArguments args = grpc::ChannelArguments()) const;

  bool tls() const { return tls_; }
  bool has_token() const { return !token_.empty(); }

 private:
  ChannelFactory() = default;
  static absl::StatusOr<std::shared_ptr<const ChannelFactory>> Make(
      const SecurityOptions& options, bool token);
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
  std::string token_;
  std::string server_name_;
  bool tls_ = false;
};

}  // namespace larder

#endif  // LARDER_COMMON_SECURITY_H_
