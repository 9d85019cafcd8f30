// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: redirect_policy.h
// -----------------------------------------------------------------------------
//
// Where the hdfs:// store may go when the namenode redirects it. WebHDFS
// answers OPEN with a 307 whose Location names a datanode, and the store
// follows it; a namenode that is compromised, misconfigured or impersonated
// can put anything there: the cloud metadata endpoint (169.254.169.254, which
// hands out the node's credentials), a port on the worker's own loopback (an
// admin endpoint, a redis), a file:// or gopher:// URL. `RedirectPolicy`
// decides, before any connection is made, whether a Location may be followed:
//
//   1. Scheme: http or https only, without user:password.
//   2. Host: the namenode's own host, or a host in the namenode's DNS domain
//      (namenode nn1.hdfs.example.com: any dnN.hdfs.example.com, i.e. a host
//      whose name after its first label equals the namenode's after its
//      first label). The domain must have two labels or more, so that a
//      namenode named "example.com" does not admit all of ".com"; a namenode
//      given as an IP address or a one-label name has no domain. A mount that
//      lists its datanodes (`datanodes=` in the URI, see hdfs_store.h) allows
//      the namenode's host and the listed hosts instead of the domain: an
//      entry "dn1.example.com" allows that host, ".dn.example.com" any host
//      below that domain, "10.0.0.7" that address.
//   3. Address: never link-local (169.254.0.0/16, fe80::/10, also written as
//      IPv4-mapped, IPv4-compatible or NAT64 IPv6) nor a cloud metadata
//      address outside that range (fd00:ec2::254, 100.100.100.200), whatever
//      the other rules say. Never loopback (127.0.0.0/8, ::1, and 0.0.0.0/8
//      and ::, which reach the local host on Linux), unless the namenode
//      itself is on loopback (its host is a loopback address or "localhost":
//      a test cluster on one machine) or the mount lists the host exactly in
//      `datanodes=`.
//
// Literal addresses in the Location are checked as parsed by libcurl's own
// URL parser, the one that will connect (it also turns 2852039166 or
// 0xA9FEA9FE into 169.254.169.254 first). Names are resolved with
// getaddrinfo, every address is checked, and the checked addresses are then
// pinned for the connection (RedirectTarget::resolve, given to libcurl as
// CURLOPT_RESOLVE). Checking alone would leave a window: a name can answer a
// harmless address to the check and 169.254.169.254 to the connection a
// moment later (DNS rebinding); with the pin, the connection goes to exactly
// the addresses checked. Pinning was also preferred to rewriting the URL to
// the address: the URL keeps its name, so https still sends it as SNI and
// verifies the datanode's certificate against it. (Through an HTTP proxy the
// proxy resolves; a proxy is the operator's own choice.)
//
// A refused redirect is PermissionDenied naming the host and the rule,
// never the Location's path or query (a WebHDFS Location carries the
// delegation token).
//
// Immutable after Create; thread-safe when the resolver is.
#ifndef LARDER_UNDERSTORE_REDIRECT_POLICY_H_
#define LARDER_UNDERSTORE_REDIRECT_POLICY_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace larder {

// A Location that may be followed.
struct RedirectTarget {
  // The URL to fetch: the Location resolved against the URL that answered
  // it, host lowercased.
  std::string url;
  // Its host, for messages.
  std::string host;
  // For HttpRequest::resolve: "+HOST:PORT:ADDR,..." with the addresses that
  // were checked; empty when the host is a literal address.
  std::vector<std::string> resolve;
};

class RedirectPolicy {
 public:
  // The numeric addresses (as inet_ntop writes them) that `host` resolves
  // to. Errors: Unavailable (no answer).
  using Resolver = std::function<absl::StatusOr<std::vector<std::string>>(
      const std::string& host)>;
  // getaddrinfo(3), every address family.
  static absl::StatusOr<std::vector<std::string>> SystemResolve(
      const std::string& host);

  // `namenode_url`: the URL the store sends its requests to
  // ("http://nn1.example.com:9870"). `datanodes`: the mount's `datanodes=`
  // value, comma-separated hosts (see above); "" for the domain rule.
  // Errors: InvalidArgument (a bad URL or datanodes entry).
  static absl::StatusOr<RedirectPolicy> Create(
      absl::string_view namenode_url, absl::string_view datanodes,
      Resolver resolver = SystemResolve);

  // Decides whether `location`, a redirect answered by `from` (relative
  // Locations resolve against it), may be followed. Errors: PermissionDenied
  // (refused: the message names the host and the rule), Unavailable (the
  // host's name does not resolve).
  absl::StatusOr<RedirectTarget> Check(absl::string_view from,
                                       absl::string_view location) const;

 private:
  RedirectPolicy() = default;

  // Whether `host` (normalized) passes rule 2; `why` says why not.
  bool HostAllowed(const std::string& host, std::string* why) const;
  bool ListedExactly(const std::string& host) const;
  // Rule 3 for one numeric address of `host`: OK or PermissionDenied.
  absl::Status CheckAddress(const std::string& host,
                            const std::string& address) const;

  std::string namenode_host_;  // Normalized (lowercase, no brackets or dot).
  std::string domain_;         // After the first label; "" when none.
  bool namenode_on_loopback_ = false;
  bool listed_ = false;                // datanodes= given.
  std::vector<std::string> exact_;     // datanodes= hosts.
  std::vector<std::string> suffixes_;  // datanodes= ".domain" entries.
  Resolver resolver_;
};

}  // namespace larder

#endif  // LARDER_UNDERSTORE_REDIRECT_POLICY_H_
