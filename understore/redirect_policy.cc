// Copyright 2026 The Larder Authors.
#include "understore/redirect_policy.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace larder {
namespace {

enum class AddressClass { kOrdinary, kLoopback, kLinkLocal, kMetadata };

AddressClass ClassifyV4(uint32_t a) {  // Host byte order.
  // 0.0.0.0/8 is "this host": connecting to it reaches loopback on Linux.
  if ((a >> 24) == 127 || (a >> 24) == 0) return AddressClass::kLoopback;
  if ((a >> 16) == 0xA9FE) return AddressClass::kLinkLocal;  // 169.254/16
  if (a == 0x646464C8) return AddressClass::kMetadata;       // 100.100.100.200
  return AddressClass::kOrdinary;
}

// The class of a numeric address, or nullopt when `ip` is not one.
std::optional<AddressClass> Classify(const std::string& ip) {
  in_addr v4;
  if (::inet_pton(AF_INET, ip.c_str(), &v4) == 1)
    return ClassifyV4(ntohl(v4.s_addr));
  in6_addr v6;
  if (::inet_pton(AF_INET6, ip.c_str(), &v6) != 1) return std::nullopt;
  if (IN6_IS_ADDR_LOOPBACK(&v6) || IN6_IS_ADDR_UNSPECIFIED(&v6))
    return AddressClass::kLoopback;
  if (IN6_IS_ADDR_LINKLOCAL(&v6)) return AddressClass::kLinkLocal;
  const uint8_t* b = v6.s6_addr;
  static constexpr uint8_t kNat64[12] = {0x00, 0x64, 0xff, 0x9b};  // /96
  // An IPv4 address inside IPv6 (mapped ::ffff:a.b.c.d, compatible
  // ::a.b.c.d, NAT64 64:ff9b::a.b.c.d) is the IPv4 address it carries.
  if (IN6_IS_ADDR_V4MAPPED(&v6) || IN6_IS_ADDR_V4COMPAT(&v6) ||
      std::memcmp(b, kNat64, 12) == 0) {
    return ClassifyV4((uint32_t{b[12]} << 24) | (uint32_t{b[13]} << 16) |
                      (uint32_t{b[14]} << 8) | b[15]);
  }
  static constexpr uint8_t kAwsMetadata[16] = {
      0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54};
  if (std::memcmp(b, kAwsMetadata, 16) == 0) return AddressClass::kMetadata;
  return AddressClass::kOrdinary;
}

// Lowercase, without IPv6 brackets or a final dot; a literal address in
// inet_ntop's canonical form.
std::string NormalizeHost(absl::string_view host) {
  std::string h = absl::AsciiStrToLower(absl::StripAsciiWhitespace(host));
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']')
    h = h.substr(1, h.size() - 2);
  if (!h.empty() && h.back() == '.') h.pop_back();
  char buf[INET6_ADDRSTRLEN];
  in6_addr v6;
  if (::inet_pton(AF_INET6, h.c_str(), &v6) == 1 &&
      ::inet_ntop(AF_INET6, &v6, buf, sizeof(buf)) != nullptr) {
    return buf;
  }
  return h;
}

bool IsLiteral(const std::string& host) { return Classify(host).has_value(); }

// What is after the first label of a name, when that has two labels or more.
std::string DomainOf(const std::string& host) {
  if (IsLiteral(host)) return "";
  const size_t dot = host.find('.');
  if (dot == std::string::npos) return "";
  std::string domain = host.substr(dot + 1);
  if (domain.find('.') == std::string::npos) return "";
  return domain;
}

bool IsLoopbackName(const std::string& host) {
  return host == "localhost" || absl::EndsWith(host, ".localhost");
}

// A host name as DNS allows it (letters, digits, '-', '_', '.').
bool IsHostName(absl::string_view host) {
  if (host.empty() || host.front() == '.' || host.back() == '.') return false;
  return std::all_of(host.begin(), host.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' ||
           c == '_' || c == '.';
  });
}

struct UrlDeleter {
  void operator()(CURLU* u) const { curl_url_cleanup(u); }
};
using Url = std::unique_ptr<CURLU, UrlDeleter>;

std::optional<std::string> Part(CURLU* u, CURLUPart part, unsigned flags = 0) {
  char* value = nullptr;
  if (curl_url_get(u, part, &value, flags) != CURLUE_OK || value == nullptr)
    return std::nullopt;
  std::string out(value);
  curl_free(value);
  return out;
}

absl::Status Refused(const std::string& host, absl::string_view rule,
                     absl::string_view detail) {
  return absl::PermissionDeniedError(absl::StrCat(
      "redirect to host '", host, "' refused (", rule, " rule): ", detail));
}

}  // namespace

absl::StatusOr<std::vector<std::string>> RedirectPolicy::SystemResolve(
    const std::string& host) {
  addrinfo hints;
  std::memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve '", host, "': ", ::gai_strerror(rc)));
  }
  std::vector<std::string> out;
  for (const addrinfo* a = res; a != nullptr; a = a->ai_next) {
    char buf[INET6_ADDRSTRLEN];
    const void* addr = nullptr;
    if (a->ai_family == AF_INET) {
      addr = &reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr;
    } else if (a->ai_family == AF_INET6) {
      addr = &reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr;
    } else {
      continue;
    }
    if (::inet_ntop(a->ai_family, addr, buf, sizeof(buf)) == nullptr) continue;
    if (std::find(out.begin(), out.end(), buf) == out.end())
      out.emplace_back(buf);
  }
  ::freeaddrinfo(res);
  return out;
}

absl::StatusOr<RedirectPolicy> RedirectPolicy::Create(
    absl::string_view namenode_url, absl::string_view datanodes,
    Resolver resolver) {
  RedirectPolicy p;
  p.resolver_ = std::move(resolver);
  Url u(curl_url());
  if (u == nullptr) return absl::ResourceExhaustedError("curl_url failed");
  std::optional<std::string> host;
  if (curl_url_set(u.get(), CURLUPART_URL, std::string(namenode_url).c_str(),
                   0) != CURLUE_OK ||
      !(host = Part(u.get(), CURLUPART_HOST)) || host->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("namenode address '", namenode_url, "' is not a URL"));
  }
  p.namenode_host_ = NormalizeHost(*host);
  p.domain_ = DomainOf(p.namenode_host_);
  std::optional<AddressClass> cls = Classify(p.namenode_host_);
  p.namenode_on_loopback_ =
      IsLoopbackName(p.namenode_host_) ||
      (cls.has_value() && *cls == AddressClass::kLoopback);

  if (datanodes.empty()) return p;
  p.listed_ = true;
  for (absl::string_view entry :
       absl::StrSplit(datanodes, ',', absl::SkipWhitespace())) {
    entry = absl::StripAsciiWhitespace(entry);
    const bool suffix = absl::ConsumePrefix(&entry, ".");
    const std::string host = NormalizeHost(entry);
    if (!suffix && IsLiteral(host)) {
      p.exact_.push_back(host);
      continue;
    }
    if (!IsHostName(host)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "datanodes= entry '", entry,
          "' is not a host name, an address or a .domain (no ports: "
          "datanodes=dn1.example.com,dn2.example.com,.dn.example.com)"));
    }
    (suffix ? p.suffixes_ : p.exact_).push_back(suffix ? "." + host : host);
  }
  if (p.exact_.empty() && p.suffixes_.empty())
    return absl::InvalidArgumentError("datanodes= lists no host");
  return p;
}

bool RedirectPolicy::ListedExactly(const std::string& host) const {
  return std::find(exact_.begin(), exact_.end(), host) != exact_.end();
}

bool RedirectPolicy::HostAllowed(const std::string& host,
                                 std::string* why) const {
  if (host == namenode_host_) return true;
  if (listed_) {
    if (ListedExactly(host)) return true;
    for (const std::string& s : suffixes_) {
      if (absl::EndsWith(host, s) && host.size() > s.size()) return true;
    }
    *why = absl::StrCat("it is neither the namenode's host '", namenode_host_,
                        "' nor listed in the mount's datanodes= (",
                        absl::StrJoin(exact_, ","),
                        exact_.empty() || suffixes_.empty() ? "" : ",",
                        absl::StrJoin(suffixes_, ","), ")");
    return false;
  }
  if (!domain_.empty() && DomainOf(host) == domain_) return true;
  *why = absl::StrCat(
      domain_.empty()
          ? absl::StrCat("it is not the namenode's host '", namenode_host_,
                         "' (which has no DNS domain of two labels or more)")
          : absl::StrCat("it is neither the namenode's host '", namenode_host_,
                         "' nor a host in its domain '", domain_, "'"),
      "; list it in the mount's datanodes= option to allow it");
  return false;
}

absl::Status RedirectPolicy::CheckAddress(const std::string& host,
                                          const std::string& address) const {
  const std::optional<AddressClass> cls = Classify(address);
  const std::string what =
      address == host
          ? absl::StrCat("'", host, "'")
          : absl::StrCat("'", host, "' resolves to ", address, ", which");
  if (!cls.has_value()) {
    return Refused(host, "address",
                   absl::StrCat(what, " is not an address it can check"));
  }
  switch (*cls) {
    case AddressClass::kLinkLocal:
      return Refused(host, "link-local",
                     absl::StrCat(what,
                                  " is a link-local address (169.254.0.0/16, "
                                  "fe80::/10: where cloud metadata "
                                  "endpoints answer); never followed"));
    case AddressClass::kMetadata:
      return Refused(host, "metadata",
                     absl::StrCat(what,
                                  " is a cloud instance-metadata address; "
                                  "never followed"));
    case AddressClass::kLoopback:
      if (namenode_on_loopback_ || ListedExactly(host)) return absl::OkStatus();
      return Refused(
          host, "loopback",
          absl::StrCat(what,
                       " is a loopback (or this-host) address and the "
                       "namenode '",
                       namenode_host_,
                       "' is not on loopback; list the host in the mount's "
                       "datanodes= option to allow it"));
    case AddressClass::kOrdinary:
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::StatusOr<RedirectTarget> RedirectPolicy::Check(
    absl::string_view from, absl::string_view location) const {
  Url u(curl_url());
  if (u == nullptr) return absl::ResourceExhaustedError("curl_url failed");
  // The Location is parsed after `from`, so a relative one resolves against
  // it, by the parser that will connect.
  if (curl_url_set(u.get(), CURLUPART_URL, std::string(from).c_str(), 0) !=
          CURLUE_OK ||
      curl_url_set(u.get(), CURLUPART_URL, std::string(location).c_str(),
                   CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK) {
    return absl::PermissionDeniedError(
        "redirect refused (url rule): the Location is not a URL");
  }
  const std::string scheme =
      absl::AsciiStrToLower(Part(u.get(), CURLUPART_SCHEME).value_or(""));
  const std::string host =
      NormalizeHost(Part(u.get(), CURLUPART_HOST).value_or(""));
  if (scheme != "http" && scheme != "https") {
    return Refused(host, "scheme",
                   absl::StrCat("the Location's scheme is '", scheme,
                                "'; only http and https are followed"));
  }
  if (host.empty()) {
    return absl::PermissionDeniedError(
        "redirect refused (url rule): the Location names no host");
  }
  if (Part(u.get(), CURLUPART_USER) || Part(u.get(), CURLUPART_PASSWORD)) {
    return Refused(host, "credentials",
                   "the Location carries a user name or password");
  }
  if (Part(u.get(), CURLUPART_ZONEID)) {
    return Refused(host, "link-local",
                   "the Location names an IPv6 zone (a link-local scope)");
  }
  const std::string port =
      Part(u.get(), CURLUPART_PORT, CURLU_DEFAULT_PORT).value_or("");

  RedirectTarget target;
  target.host = host;
  const bool literal = IsLiteral(host);
  // A literal address is judged by what it is before whose it is, so that
  // the message names the sharper rule (169.254.169.254 is "link-local"
  // rather than "not the namenode").
  if (literal) {
    if (absl::Status st = CheckAddress(host, host); !st.ok()) return st;
  }
  if (std::string why; !HostAllowed(host, &why)) {
    return Refused(host, "host", why);
  }
  if (!literal) {
    absl::StatusOr<std::vector<std::string>> addresses = resolver_(host);
    if (!addresses.ok()) {
      return absl::UnavailableError(absl::StrCat(
          "redirect to host '", host, "': ", addresses.status().message()));
    }
    if (addresses->empty()) {
      return absl::UnavailableError(absl::StrCat(
          "redirect to host '", host, "': the name resolves to no address"));
    }
    if (IsLoopbackName(host) && !namenode_on_loopback_ && !ListedExactly(host))
      return CheckAddress(host, "127.0.0.1");  // libcurl's own rule for it.
    std::vector<std::string> pinned;
    for (const std::string& a : *addresses) {
      if (absl::Status st = CheckAddress(host, a); !st.ok()) return st;
      pinned.push_back(
          a.find(':') == std::string::npos ? a : absl::StrCat("[", a, "]"));
    }
    target.resolve.push_back(
        absl::StrCat("+", host, ":", port, ":", absl::StrJoin(pinned, ",")));
  }
  const std::string url_host =
      host.find(':') == std::string::npos ? host : absl::StrCat("[", host, "]");
  std::optional<std::string> url;
  if (curl_url_set(u.get(), CURLUPART_HOST, url_host.c_str(), 0) != CURLUE_OK ||
      !(url = Part(u.get(), CURLUPART_URL))) {
    return absl::PermissionDeniedError(absl::StrCat(
        "redirect to host '", host, "' refused (url rule): cannot rebuild it"));
  }
  target.url = std::move(*url);
  return target;
}

}  // namespace larder
