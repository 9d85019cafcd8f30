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
//  * A caller has one of three roles. kReader may stat, list and read;
//    kWriter may also create objects in writable mounts (MayWriteMount);
//    kAdmin may also mount, unmount, load, invalidate, evict and register
//    workers.
//    It proves its role with a bearer token (gRPC metadata "authorization:
//    Bearer <token>") listed in the server's tokens file, or with a verified
//    client certificate: identities in `tls_admin_identities` are admins,
//    other certificates from the CA are readers. The higher role wins.
//  * A server with neither a tokens file nor client-certificate verification
//    keeps an admin token of its own (EnsureAdminToken) that local admins'
//    tools find by themselves; everyone else is an anonymous reader, limited
//    by the mounts' modes. That is allowed on loopback only (CheckExposure),
//    unless the operator says --allow_insecure_network.
//  * Reads are authorised per mount (MayReadMount): a token may be limited
//    to mounts, and local callers are held to the mount's owner, group and
//    mode, as the FUSE view holds them.
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

enum class Role { kNone = 0, kReader = 1, kWriter = 2, kAdmin = 3 };
absl::string_view RoleName(Role role);

// Reads the bearer token a client presents: the first line of `token_file`
// when set, else $LARDER_TOKEN, else the file named by $LARDER_TOKEN_FILE;
// empty when none is set. The token is registered as a secret. Errors:
// NotFound / PermissionDenied (the file), InvalidArgument (empty file).
absl::StatusOr<std::string> LoadClientToken(const std::string& token_file);

// The tokens a server accepts, from a file of "<role> <token>" lines (role
// admin, writer or reader; blank lines and lines starting with '#' are
// skipped). Tokens shorter than 16 characters are refused. Errors name the file
// and line, never the token.
//
// A reader or writer token may be limited to mounts:
// "reader:/datasets/imagenet,/ref <token>" reads those mounts (and mounts below
// those paths) only; "writer:/checkpoints <token>" reads and writes
// /checkpoints only.
struct TokenEntry {
  Role role;
  std::string token;
  std::vector<std::string> mounts;  // Empty: every mount.
};
absl::StatusOr<std::vector<TokenEntry>> LoadTokensFile(const std::string& path);

// Secure by default on a shared host: a server given neither a tokens file
// nor client-certificate verification keeps an admin token of its own in a
// 0600 file (SecurityOptions::admin_token_file, else DefaultAdminTokenPath),
// made at first start (random, 256 bits). Callers that present it are
// admins; callers that present nothing are readers, and only of what the
// mounts' owner, group and mode let anyone read ("other"). Local clients
// (the CLI, the FUSE daemon, the client library) present it by themselves
// when they can read the file, to loopback servers only: root and the
// daemons' own user are admins, every other local user a reader.
//
// /var/lib/larder/admin.token for root; for other users
// $XDG_STATE_HOME/larder/admin.token, else ~/.local/state/larder/admin.token.
std::string DefaultAdminTokenPath();
// Reads the admin token at `path`, making it (and its directory, 0700) if it
// does not exist; two processes starting at once get the same token. The
// file must be a regular file owned by this user that no one else may read
// or write. Errors: PermissionDenied (owner or mode), InvalidArgument (not a
// token), Internal/Unavailable (I/O).
absl::StatusOr<std::string> EnsureAdminToken(const std::string& path);

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
  // A file:// mount that sets none of owner, group and mode: each file and
  // directory presents its own (as a bind mount would), and who may read a
  // file is decided by its own bits and its directories' (see
  // UnderStore::MayRead); uid/gid/mode above are then unused.
  bool per_file = false;
  // The permission bits files of the mount get: no write, setuid, setgid
  // or sticky bit, whatever `mode` says (the cache is read-only, and a
  // setuid file from a cache is a way to root).
  uint32_t FileMode() const {
    return mode == 0 && !per_file ? 0444 : mode & 0555;
  }
  std::string DebugString() const;  // "uid 0 gid 4242 mode 0440".
};

// Who a call comes from, as a server knows it.
struct Caller {
  Role role = Role::kNone;
  // The mounts its credential may read (TokenEntry::mounts); empty: all.
  std::vector<std::string> mounts;
  // Whom file permissions are checked for: the kernel's word on a
  // short-circuit peer, or, for a gRPC caller who presented nothing (the
  // default of a server without configured authentication), nobody's: the
  // "other" bits only (AnonymousPeer). Unset for a token or a certificate:
  // its grant is its role and mounts.
  std::optional<PeerCredentials> local;
};
// A caller no owner or group matches.
PeerCredentials AnonymousPeer();

// Whether mount path `mount` is one that `scope` (TokenEntry::mounts) lets
// its holder read: empty scope, the path itself, or a path below an entry.
bool MountInScope(const std::vector<std::string>& scope,
                  absl::string_view mount);

// The one decision "may this caller read mount `mount_path`": admins may;
// a credential limited to mounts only those; a local or anonymous caller
// by the mount's owner, group and mode, as the kernel decides for the FUSE
// view (MayReadMount below). A mount whose files each keep their own owner
// and mode (MountAccess::per_file) passes here; its files are checked one by
// one where the bytes are (the worker asks its under-store). Error:
// PermissionDenied, naming the caller and the mount.
absl::Status MayReadMount(const Caller& caller, absl::string_view mount_path,
                          const MountAccess& mount, uint32_t daemon_uid,
                          uint32_t daemon_gid);

// The one decision "may this local caller read this mount", made as the
// kernel makes it for the FUSE view: root may; the owner by the owner bits
// alone; a member of the group (primary or supplementary) by the group bits;
// everyone else by the other bits. `daemon_uid`/`daemon_gid` stand for an
// unset owner or group.
// The one decision "may this caller create objects in mount `mount_path`":
// the mount must be writable (MountEntry.writable), the caller an admin, or
// a writer whose token's mounts include it. Errors: PermissionDenied naming
// what is missing.
absl::Status MayWriteMount(const Caller& caller, absl::string_view mount_path,
                           bool mount_writable);

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
  // The caller's role, mounts and (anonymous callers) AnonymousPeer.
  Caller CallerOf(const grpc::ServerContextBase& context) const;

  bool enabled() const { return enabled_; }

 private:
  Authorizer() = default;
  // The token entry `context` presents, or nullptr.
  const TokenEntry* TokenOf(const grpc::ServerContextBase& context) const;
  std::vector<TokenEntry> tokens_;
  std::vector<std::string> admin_identities_;
  bool verify_client_certs_ = false;
  bool enabled_ = false;
  // No authentication configured: the admin token of EnsureAdminToken, and
  // callers who present nothing are anonymous readers.
  bool anonymous_readers_ = false;
  std::string local_admin_token_;
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
  // The local admin token (DefaultAdminTokenPath) was found and is sent to
  // loopback servers.
  bool has_local_admin_token() const { return !local_token_.empty(); }

 private:
  ChannelFactory() = default;
  static absl::StatusOr<std::shared_ptr<const ChannelFactory>> Make(
      const SecurityOptions& options, bool token);
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
  std::string token_;
  // Sent only to loopback targets, and only when token_ is empty.
  std::string local_token_;
  std::string server_name_;
  bool tls_ = false;
};

}  // namespace larder

#endif  // LARDER_COMMON_SECURITY_H_
