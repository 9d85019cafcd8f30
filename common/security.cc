// Copyright 2026 The Larder Authors.
#include "common/security.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/auth_context.h>
#include <grpcpp/support/client_interceptor.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/file_util.h"
#include "common/log.h"
#include "common/security_internal.h"
#include "common/status_macros.h"

namespace larder {

absl::StatusOr<std::string> ReadSmallFile(const std::string& path,
                                          absl::string_view what) {
  constexpr size_t kMaxFileBytes = 1 << 20;
  return ReadWholeFile(path, what, kMaxFileBytes);
}

namespace {

// Compares in time that depends on the lengths only, not on where the first
// difference is.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? a[i] : 0;
    const unsigned char y = i < b.size() ? b[i] : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

absl::string_view ToView(grpc::string_ref r) { return {r.data(), r.size()}; }

// Adds "authorization: Bearer <token>" to every call of a channel.
// The metadata key of the local admin token. Not "authorization": a server
// with its own tokens ignores it, so a local client that found the file
// still gets the errors of a client without a token there.
constexpr char kLocalAdminKey[] = "larder-local-admin";

// Adds one metadata entry (key, value) to every call of a channel.
class TokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(const std::pair<std::string, std::string>* header)
      : header_(header) {}
  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::
                PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(header_->first,
                                                 header_->second);
    }
    methods->Proceed();
  }

 private:
  const std::pair<std::string, std::string>* const header_;
};

class TokenInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(
      std::shared_ptr<const std::pair<std::string, std::string>> header)
      : header_(std::move(header)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new TokenInterceptor(header_.get());
  }

 private:
  const std::shared_ptr<const std::pair<std::string, std::string>> header_;
};

}  // namespace

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kAdmin:
      return "admin";
    case Role::kWriter:
      return "writer";
    case Role::kReader:
      return "reader";
    case Role::kNone:
      break;
  }
  return "none";
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const SecurityOptions& options) {
  const bool cert = !options.tls_cert_file.empty();
  const bool key = !options.tls_key_file.empty();
  if (cert != key) {
    return absl::InvalidArgumentError(
        "TLS needs both --tls_cert_file and --tls_key_file");
  }
  if (!cert) {
    if (!options.tls_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "--tls_ca_file verifies client certificates only over TLS: set "
          "--tls_cert_file and --tls_key_file too");
    }
    return grpc::InsecureServerCredentials();
  }
  grpc::SslServerCredentialsOptions ssl(
      options.tls_ca_file.empty()
          ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
          : (options.tls_require_client_cert
                 ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                 : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY));
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  LARDER_ASSIGN_OR_RETURN(pair.private_key,
                          ReadSmallFile(options.tls_key_file, "TLS key"));
  RegisterSecret(pair.private_key);
  LARDER_ASSIGN_OR_RETURN(
      pair.cert_chain, ReadSmallFile(options.tls_cert_file, "TLS certificate"));
  if (!absl::StrContains(pair.private_key, "-----BEGIN ")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TLS key ", options.tls_key_file, " is not a PEM private key"));
  }
  if (!absl::StrContains(pair.cert_chain, "-----BEGIN CERTIFICATE-----")) {
    return absl::InvalidArgumentError(
        absl::StrCat("TLS certificate ", options.tls_cert_file,
                     " is not a PEM certificate"));
  }
  ssl.pem_key_cert_pairs.push_back(std::move(pair));
  if (!options.tls_ca_file.empty()) {
    LARDER_ASSIGN_OR_RETURN(
        ssl.pem_root_certs,
        ReadSmallFile(options.tls_ca_file, "TLS CA bundle"));
    if (!absl::StrContains(ssl.pem_root_certs, "-----BEGIN CERTIFICATE-----")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "TLS CA bundle ", options.tls_ca_file, " holds no PEM certificate"));
    }
  }
  return grpc::SslServerCredentials(ssl);
}

bool IsTlsFailure(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kUnavailable) return false;
  const std::string m = absl::AsciiStrToLower(status.message());
  // gRPC's client sees a refused handshake as the peer closing the socket
  // during connection set-up.
  for (const char* s :
       {"handshake", "ssl", "tls", "certificate", "socket closed"}) {
    if (absl::StrContains(m, s)) return true;
  }
  return false;
}

bool IsLoopbackAddress(absl::string_view listen) {
  if (absl::StartsWith(listen, "unix:") ||
      absl::StartsWith(listen, "unix-abstract:")) {
    return true;
  }
  absl::string_view host = listen;
  if (absl::StartsWith(host, "[")) {
    const size_t close = host.find(']');
    if (close == absl::string_view::npos) return false;
    host = host.substr(1, close - 1);
  } else if (std::count(host.begin(), host.end(), ':') == 1) {
    host = host.substr(0, host.find(':'));
  }
  if (absl::EqualsIgnoreCase(host, "localhost")) return true;
  const std::string h(host);
  in_addr v4;
  if (::inet_pton(AF_INET, h.c_str(), &v4) == 1)
    return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6;
  if (::inet_pton(AF_INET6, h.c_str(), &v6) == 1)
    return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

absl::Status CheckExposure(absl::string_view component,
                           absl::string_view listen,
                           const SecurityOptions& options) {
  const bool tls = !options.tls_cert_file.empty();
  const bool certs = tls && !options.tls_ca_file.empty();
  const bool tokens = !options.auth_tokens_file.empty();
  const bool authenticates = certs || tokens;
  if (IsLoopbackAddress(listen)) {
    if (!authenticates) {
      LARDER_LOG(INFO, "security.local_admin_token")
          .Field("component", component)
          .Field("listen", listen)
          .Field("detail",
                 "no --auth_tokens_file: admins are who can read the admin "
                 "token file (root, this daemon's user); other local users "
                 "read what the mounts' modes let anyone read");
    }
    return absl::OkStatus();
  }
  if (!authenticates) {
    if (!options.allow_insecure_network) {
      return absl::FailedPreconditionError(absl::StrCat(
          "refusing to serve the ", component, " on ", listen,
          " (beyond loopback) without authentication: anyone who can reach "
          "it could mount, evict and read. Set --auth_tokens_file, or "
          "--tls_cert_file/--tls_key_file/--tls_ca_file for client "
          "certificates; or pass --allow_insecure_network to accept the "
          "risk"));
    }
    LARDER_LOG(WARNING, "security.insecure_network")
        .Field("component", component)
        .Field("listen", listen)
        .Field("detail",
               "serving beyond loopback without authentication "
               "(--allow_insecure_network)");
  } else if (!tls) {
    LARDER_LOG(WARNING, "security.plaintext_tokens")
        .Field("component", component)
        .Field("listen", listen)
        .Field("detail",
               "bearer tokens cross the network unencrypted; set "
               "--tls_cert_file and --tls_key_file");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Authorizer>> Authorizer::Create(
    const SecurityOptions& options) {
  std::unique_ptr<Authorizer> a(new Authorizer);
  if (!options.auth_tokens_file.empty()) {
    LARDER_ASSIGN_OR_RETURN(a->tokens_,
                            LoadTokensFile(options.auth_tokens_file));
  }
  a->verify_client_certs_ =
      !options.tls_cert_file.empty() && !options.tls_ca_file.empty();
  a->admin_identities_ = options.tls_admin_identities;
  if (a->tokens_.empty() && !a->verify_client_certs_) {
    const std::string path = options.admin_token_file.empty()
                                 ? DefaultAdminTokenPath()
                                 : options.admin_token_file;
    LARDER_ASSIGN_OR_RETURN(a->local_admin_token_, EnsureAdminToken(path));
    a->anonymous_readers_ = true;
  }
  a->enabled_ = true;
  return a;
}

const TokenEntry* Authorizer::TokenOf(
    const grpc::ServerContextBase& context) const {
  const auto& md = context.client_metadata();
  const auto it = md.find("authorization");
  if (it == md.end()) return nullptr;
  absl::string_view v = ToView(it->second);
  if (v.size() <= 7 || !absl::EqualsIgnoreCase(v.substr(0, 7), "bearer "))
    return nullptr;
  v.remove_prefix(7);
  const TokenEntry* found = nullptr;
  for (const TokenEntry& e : tokens_) {
    // Every entry is compared (no early exit): the time taken does not say
    // which one matched.
    if (ConstantTimeEquals(v, e.token) &&
        (found == nullptr || e.role > found->role)) {
      found = &e;
    }
  }
  return found;
}

Caller Authorizer::CallerOf(const grpc::ServerContextBase& context) const {
  Caller caller;
  const TokenEntry* token = TokenOf(context);
  if (token != nullptr) {
    caller.role = token->role;
    caller.mounts = token->mounts;
  }
  if (verify_client_certs_ && caller.role != Role::kAdmin) {
    std::shared_ptr<const grpc::AuthContext> ac = context.auth_context();
    if (ac != nullptr && ac->IsPeerAuthenticated()) {
      // A certificate reads every mount: a token's limit does not narrow it.
      if (caller.role == Role::kNone) caller.mounts.clear();
      caller.role = std::max(caller.role, Role::kReader);
      for (const char* prop :
           {"x509_subject_alternative_name", "x509_common_name"}) {
        for (grpc::string_ref id : ac->FindPropertyValues(prop)) {
          for (const std::string& admin : admin_identities_) {
            if (ToView(id) == admin) caller.role = Role::kAdmin;
          }
        }
      }
    }
  }
  const auto& md = context.client_metadata();
  if (caller.role == Role::kNone && anonymous_readers_ &&
      md.find("authorization") == md.end()) {
    const auto local = md.find(kLocalAdminKey);
    if (local != md.end() &&
        ConstantTimeEquals(ToView(local->second), local_admin_token_)) {
      caller.role = Role::kAdmin;
    } else {
      caller.role = Role::kReader;
      caller.local = AnonymousPeer();
    }
  }
  if (caller.role == Role::kAdmin) caller.mounts.clear();
  return caller;
}

Role Authorizer::RoleOf(const grpc::ServerContextBase& context) const {
  if (!enabled_) return Role::kAdmin;
  return CallerOf(context).role;
}

grpc::Status Authorizer::Check(const grpc::ServerContextBase& context,
                               Role needed, absl::string_view method) const {
  if (!enabled_) return grpc::Status::OK;
  const Role role = RoleOf(context);
  if (role >= needed) return grpc::Status::OK;
  grpc::Status refusal;
  const auto& md = context.client_metadata();
  const bool sent_token = md.find("authorization") != md.end();
  if (role == Role::kNone && sent_token) {
    refusal = grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                           "the bearer token presented is not accepted here "
                           "(check --token_file / $LARDER_TOKEN)");
  } else if (role == Role::kNone) {
    std::string expected;
    if (anonymous_readers_) {
      expected = "the admin token (readable by root and the daemon's user)";
    } else if (!tokens_.empty()) {
      expected =
          "a bearer token (--token_file, $LARDER_TOKEN or "
          "$LARDER_TOKEN_FILE)";
    }
    if (verify_client_certs_) {
      absl::StrAppend(&expected, expected.empty() ? "" : " or ",
                      "a client certificate from the cluster's CA "
                      "(--tls_cert_file, --tls_key_file)");
    }
    refusal = grpc::Status(
        grpc::StatusCode::UNAUTHENTICATED,
        absl::StrCat("no credentials: ", method, " needs ", expected));
  } else {
    refusal = grpc::Status(
        grpc::StatusCode::PERMISSION_DENIED,
        absl::StrCat(
            method, " needs the ", RoleName(needed), " role; the caller's ",
            anonymous_readers_ &&
                    context.client_metadata().count("authorization") == 0
                ? "has none, and is a reader (the admin token is read by "
                  "root and the daemons' user: run as one of them, or give "
                  "--token_file)"
                : absl::StrCat("credential has the ", RoleName(role),
                               " role")));
  }
  // At most one log line a second: a misconfigured client retries fast.
  static std::atomic<int64_t> last_log_ns{0};
  const int64_t now = absl::GetCurrentTimeNanos();
  int64_t last = last_log_ns.load(std::memory_order_relaxed);
  if (now - last >= 1000000000 &&
      last_log_ns.compare_exchange_strong(last, now)) {
    LARDER_LOG(WARNING, "auth.refused")
        .Field("method", method)
        .Field("peer", context.peer())
        .Field("reason", refusal.error_message());
  }
  return refusal;
}

absl::StatusOr<std::shared_ptr<const ChannelFactory>> ChannelFactory::Create(
    const SecurityOptions& options) {
  return Make(options, /*token=*/true);
}

absl::StatusOr<std::shared_ptr<const ChannelFactory>>
ChannelFactory::CreateWithoutToken(const SecurityOptions& options) {
  return Make(options, /*token=*/false);
}

absl::StatusOr<std::shared_ptr<const ChannelFactory>> ChannelFactory::Make(
    const SecurityOptions& options, bool token) {
  std::shared_ptr<ChannelFactory> f(new ChannelFactory);
  if (token) {
    LARDER_ASSIGN_OR_RETURN(f->token_, LoadClientToken(options.token_file));
    if (f->token_.empty()) {
      // The local admin token, when this process may read it (root, the
      // daemons' user): anything else (missing, not ours) is no token.
      absl::StatusOr<std::string> local = ReadAdminToken(
          options.admin_token_file.empty() ? DefaultAdminTokenPath()
                                           : options.admin_token_file);
      if (local.ok()) f->local_token_ = *std::move(local);
    }
  }
  f->server_name_ = options.tls_server_name;
  if (options.tls_ca_file.empty()) {
    if (!options.tls_server_name.empty()) {
      return absl::InvalidArgumentError(
          "--tls_server_name needs --tls_ca_file (TLS is off without it)");
    }
    f->credentials_ = grpc::InsecureChannelCredentials();
    return std::shared_ptr<const ChannelFactory>(std::move(f));
  }
  grpc::SslCredentialsOptions ssl;
  LARDER_ASSIGN_OR_RETURN(ssl.pem_root_certs,
                          ReadSmallFile(options.tls_ca_file, "TLS CA bundle"));
  if (!absl::StrContains(ssl.pem_root_certs, "-----BEGIN CERTIFICATE-----")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TLS CA bundle ", options.tls_ca_file, " holds no PEM certificate"));
  }
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "a client certificate needs both --tls_cert_file and --tls_key_file");
  }
  if (!options.tls_cert_file.empty()) {
    LARDER_ASSIGN_OR_RETURN(ssl.pem_private_key,
                            ReadSmallFile(options.tls_key_file, "TLS key"));
    RegisterSecret(ssl.pem_private_key);
    LARDER_ASSIGN_OR_RETURN(
        ssl.pem_cert_chain,
        ReadSmallFile(options.tls_cert_file, "TLS certificate"));
  }
  f->credentials_ = grpc::SslCredentials(ssl);
  f->tls_ = true;
  return std::shared_ptr<const ChannelFactory>(std::move(f));
}

std::shared_ptr<const ChannelFactory> ChannelFactory::Insecure() {
  static const std::shared_ptr<const ChannelFactory> insecure = [] {
    std::shared_ptr<ChannelFactory> f(new ChannelFactory);
    f->credentials_ = grpc::InsecureChannelCredentials();
    return f;
  }();
  return insecure;
}

std::shared_ptr<grpc::Channel> ChannelFactory::Channel(
    const std::string& target, grpc::ChannelArguments args) const {
  if (!server_name_.empty()) args.SetSslTargetNameOverride(server_name_);
  // The local admin token never leaves the machine.
  std::shared_ptr<const std::pair<std::string, std::string>> header;
  if (!token_.empty()) {
    header = std::make_shared<const std::pair<std::string, std::string>>(
        "authorization", absl::StrCat("Bearer ", token_));
  } else if (!local_token_.empty() && IsLoopbackAddress(target)) {
    header = std::make_shared<const std::pair<std::string, std::string>>(
        kLocalAdminKey, local_token_);
  }
  if (header == nullptr)
    return grpc::CreateCustomChannel(target, credentials_, args);
  std::vector<
      std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
      interceptors;
  interceptors.push_back(
      std::make_unique<TokenInterceptorFactory>(std::move(header)));
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      target, credentials_, args, std::move(interceptors));
}

bool PeerCredentials::InGroup(uint32_t g) const {
  return gid == g || std::find(groups.begin(), groups.end(), g) != groups.end();
}

absl::StatusOr<PeerCredentials> PeerCredentialsOf(int fd) {
  struct ucred cred {};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return absl::InternalError(
        absl::StrCat("SO_PEERCRED: ", std::strerror(errno)));
  }
  PeerCredentials peer{cred.uid, cred.gid, {}, cred.pid};
  std::vector<gid_t> groups(64);
  for (;;) {
    len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0)
      break;
    // ERANGE: `len` now says how much room the list needs.
    if (errno != ERANGE || len <= groups.size() * sizeof(gid_t) ||
        len > 65536 * sizeof(gid_t)) {
      return absl::InternalError(
          absl::StrCat("SO_PEERGROUPS: ", std::strerror(errno)));
    }
    groups.resize(len / sizeof(gid_t));
  }
  peer.groups.assign(groups.begin(), groups.begin() + len / sizeof(gid_t));
  return peer;
}

std::string MountAccess::DebugString() const {
  return absl::StrFormat("uid %s gid %s mode %04o",
                         uid ? absl::StrCat(*uid) : "(daemon)",
                         gid ? absl::StrCat(*gid) : "(daemon)", FileMode());
}

bool MayReadMount(const MountAccess& mount, const PeerCredentials& peer,
                  uint32_t daemon_uid, uint32_t daemon_gid) {
  if (peer.uid == 0) return true;
  const uint32_t mode = mount.FileMode();
  if (peer.uid == mount.uid.value_or(daemon_uid)) return (mode & 0400) != 0;
  if (peer.InGroup(mount.gid.value_or(daemon_gid))) return (mode & 0040) != 0;
  return (mode & 0004) != 0;
}

}  // namespace larder

namespace larder {

PeerCredentials AnonymousPeer() {
  // (uid_t)-2 and (gid_t)-2: ids that own nothing ((uid_t)-1 means "no
  // change" to chown, so it is avoided too).
  PeerCredentials p;
  p.uid = 0xfffffffe;
  p.gid = 0xfffffffe;
  return p;
}

bool MountInScope(const std::vector<std::string>& scope,
                  absl::string_view mount) {
  if (scope.empty()) return true;
  for (const std::string& s : scope) {
    if (mount == s || s == "/" ||
        (absl::StartsWith(mount, s) && mount.size() > s.size() &&
         mount[s.size()] == '/')) {
      return true;
    }
  }
  return false;
}

absl::Status MayReadMount(const Caller& caller, absl::string_view mount_path,
                          const MountAccess& mount, uint32_t daemon_uid,
                          uint32_t daemon_gid) {
  if (caller.role == Role::kAdmin) return absl::OkStatus();
  if (caller.role == Role::kNone) {
    return absl::PermissionDeniedError(
        absl::StrCat("no credential may read mount '", mount_path, "'"));
  }
  if (!MountInScope(caller.mounts, mount_path)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the caller's token reads ", absl::StrJoin(caller.mounts, ","),
        " only, not mount '", mount_path, "'"));
  }
  if (caller.local && !mount.per_file &&
      !MayReadMount(mount, *caller.local, daemon_uid, daemon_gid)) {
    return absl::PermissionDeniedError(absl::StrCat(
        caller.local->uid == AnonymousPeer().uid
            ? std::string("a caller without credentials")
            : absl::StrCat("uid ", caller.local->uid),
        " may not read mount '", mount_path, "' (", mount.DebugString(), ")"));
  }
  return absl::OkStatus();
}

absl::Status MayWriteMount(const Caller& caller, absl::string_view mount_path,
                           bool mount_writable) {
  if (!mount_writable) {
    return absl::PermissionDeniedError(absl::StrCat(
        "mount '", mount_path,
        "' is not writable (an admin makes it so: larder mount ... "
        "--writable)"));
  }
  if (caller.role == Role::kAdmin) return absl::OkStatus();
  if (caller.role < Role::kWriter) {
    return absl::PermissionDeniedError(absl::StrCat(
        "writing to mount '", mount_path,
        "' needs the writer role; the caller ",
        caller.role == Role::kNone
            ? std::string("has no credential")
            : absl::StrCat("has the ", RoleName(caller.role), " role")));
  }
  if (!MountInScope(caller.mounts, mount_path)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the caller's token writes ", absl::StrJoin(caller.mounts, ","),
        " only, not mount '", mount_path, "'"));
  }
  return absl::OkStatus();
}

}  // namespace larder
