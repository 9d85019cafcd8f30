// Copyright 2026 The Larder Authors.
#include "understore/s3_store.h"

#include <openssl/evp.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/log.h"
#include "common/retry.h"
#include "common/status_macros.h"
#include "understore/aws_sigv4.h"
#include "understore/xml.h"

namespace larder {
namespace {

bool IsIpLiteral(absl::string_view host) {
  if (!host.empty() && host.front() == '[') return true;  // IPv6.
  if (size_t colon = host.rfind(':'); colon != absl::string_view::npos)
    host = host.substr(0, colon);
  if (host == "localhost") return true;
  for (char c : host) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c)) && c != '.')
      return false;
  }
  return !host.empty();
}

// "host", "host:port" or "[v6]:port": a DNS name or IP literal and a port
// of 1 to 65535.
bool IsHostPort(absl::string_view e) {
  absl::string_view host = e, port;
  if (absl::StartsWith(e, "[")) {
    const size_t close = e.find(']');
    if (close == absl::string_view::npos) return false;
    host = e.substr(1, close - 1);
    absl::string_view rest = e.substr(close + 1);
    if (!rest.empty() && !absl::ConsumePrefix(&rest, ":")) return false;
    port = rest;
    if (host.empty()) return false;
    for (char c : host) {
      if (!absl::ascii_isxdigit(static_cast<unsigned char>(c)) && c != ':' &&
          c != '.')
        return false;
    }
  } else {
    if (size_t colon = e.rfind(':'); colon != absl::string_view::npos) {
      host = e.substr(0, colon);
      port = e.substr(colon + 1);
      if (port.empty()) return false;
    }
    if (host.empty() || host.size() > 253 || host.front() == '-' ||
        host.front() == '.')
      return false;
    for (char c : host) {
      // '_' is no DNS character, but container service names use it.
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' &&
          c != '.' && c != '_')
        return false;
    }
  }
  if (!port.empty()) {
    int p = 0;
    if (!absl::SimpleAtoi(port, &p) || p < 1 || p > 65535) return false;
  }
  return true;
}

bool ValidBucketName(absl::string_view b) {
  if (b.size() < 3 || b.size() > 63) return false;
  for (char c : b) {
    if (!(absl::ascii_islower(static_cast<unsigned char>(c)) ||
          absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '.' ||
          c == '-' || c == '_'))
      return false;
  }
  return true;
}

// What S3 gives as an UploadId and what may travel in a query: 1 to 1024
// printable ASCII characters.
absl::Status CheckS3UploadId(absl::string_view id) {
  bool ok = !id.empty() && id.size() <= 1024;
  for (char c : id) ok = ok && c >= 0x21 && c <= 0x7e;
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "s3: an upload id is 1 to 1024 printable ASCII characters");
}

// Text for an XML element's content.
std::string XmlEscape(absl::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

absl::Time ParseIsoTime(absl::string_view text) {
  absl::Time t;
  std::string err;
  if (absl::ParseTime("%Y-%m-%dT%H:%M:%E*SZ", text, &t, &err)) return t;
  return absl::UnixEpoch();
}

}  // namespace

// The ETag S3 gives a completed multipart upload: the MD5 of its parts'
// MD5s (their ETags, as bytes), "-", the number of parts. Empty when a
// part's ETag is not an MD5 (32 hex digits).
std::string S3MultipartEtag(const std::vector<UploadedPart>& parts) {
  std::string md5s;
  for (const UploadedPart& p : parts) {
    if (p.token.size() != 32 ||
        !std::all_of(p.token.begin(), p.token.end(), absl::ascii_isxdigit))
      return "";
    md5s += absl::HexStringToBytes(p.token);
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(md5s.data(), md5s.size(), digest, &len, EVP_md5(), nullptr) !=
      1) {
    return "";
  }
  return absl::StrCat(absl::BytesToHexString(absl::string_view(
                          reinterpret_cast<const char*>(digest), len)),
                      "-", parts.size());
}

absl::StatusOr<std::unique_ptr<S3Store>> S3Store::Open(
    const StoreUri& uri, const UnderStoreOptions& options) {
  static constexpr absl::string_view kKnown[] = {"endpoint",   "region",
                                                 "path_style", "profile",
                                                 "anonymous",  "sign_payload"};
  for (const auto& [k, v] : uri.options) {
    if (std::find(std::begin(kKnown), std::end(kKnown), k) ==
        std::end(kKnown)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown s3:// option '", k,
          "' (known: endpoint, region, path_style, profile, anonymous, "
          "sign_payload)"));
    }
  }
  const std::string& bucket = uri.authority;
  if (!ValidBucketName(bucket)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad S3 bucket name '", bucket,
                     "' in URI: 3-63 characters of a-z, 0-9, '.', '-'"));
  }
  LARDER_ASSIGN_OR_RETURN(std::string prefix, NormalizeStorePath(uri.path));

  auto option = [&](absl::string_view name) -> std::optional<std::string> {
    auto it = uri.options.find(std::string(name));
    if (it == uri.options.end()) return std::nullopt;
    return it->second;
  };
  std::string region = option("region").value_or(
      options.env("AWS_REGION")
          .value_or(options.env("AWS_DEFAULT_REGION").value_or("us-east-1")));

  std::string scheme = "https";
  std::string host;
  const std::optional<std::string> endpoint = option("endpoint");
  if (endpoint) {
    absl::string_view e = *endpoint;
    if (absl::ConsumePrefix(&e, "http://")) {
      scheme = "http";
    } else {
      absl::ConsumePrefix(&e, "https://");
    }
    while (absl::ConsumeSuffix(&e, "/")) {
    }
    if (!IsHostPort(e)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bad S3 endpoint '", *endpoint,
          "': want scheme://host[:port], e.g. http://127.0.0.1:9000"));
    }
    host = std::string(e);
    if ((scheme == "http" && absl::ConsumeSuffix(&e, ":80")) ||
        (scheme == "https" && absl::ConsumeSuffix(&e, ":443"))) {
      host = std::string(e);  // The Host header omits default ports.
    }
  } else {
    host = absl::StrCat("s3.", region, ".amazonaws.com");
  }

  bool path_style;
  if (std::optional<std::string> ps = option("path_style")) {
    LARDER_ASSIGN_OR_RETURN(path_style, ParseBoolOption("path_style", *ps));
  } else {
    path_style = endpoint.has_value() || IsIpLiteral(host) ||
                 (scheme == "https" && absl::StrContains(bucket, '.'));
  }

  // Over https, TLS already protects a body on its way, so bodies go as
  // UNSIGNED-PAYLOAD, as the AWS SDKs send them there: no SHA-256 pass
  // over every part a worker uploads (about 0.7 CPU-s per GB with SHA-NI).
  // Over http the signature is what protects the body.
  bool sign_payload = scheme == "http";
  if (std::optional<std::string> sp = option("sign_payload")) {
    LARDER_ASSIGN_OR_RETURN(sign_payload, ParseBoolOption("sign_payload", *sp));
  }

  AwsCredentials credentials;
  bool anonymous = false;
  if (std::optional<std::string> a = option("anonymous")) {
    LARDER_ASSIGN_OR_RETURN(anonymous, ParseBoolOption("anonymous", *a));
  }
  if (options.aws_credentials) {
    credentials = *options.aws_credentials;
    RegisterSecret(credentials.access_key_id);
    RegisterSecret(credentials.secret_access_key);
    RegisterSecret(credentials.session_token);
  } else if (!anonymous) {
    LARDER_ASSIGN_OR_RETURN(
        credentials,
        LoadAwsCredentials(option("profile").value_or(""), options.env));
  }

  HttpOptions http = options.http;
  if (http.ca_bundle.empty())
    http.ca_bundle = options.env("AWS_CA_BUNDLE").value_or("");
  return std::unique_ptr<S3Store>(
      new S3Store(bucket, std::move(prefix), std::move(region),
                  std::move(scheme), std::move(host), path_style, sign_payload,
                  std::move(credentials), std::move(http)));
}

S3Store::S3Store(std::string bucket, std::string prefix, std::string region,
                 std::string scheme, std::string endpoint_host, bool path_style,
                 bool sign_payload, AwsCredentials credentials,
                 HttpOptions http)
    : bucket_(std::move(bucket)),
      keys_(std::move(prefix)),
      region_(std::move(region)),
      scheme_(std::move(scheme)),
      endpoint_host_(std::move(endpoint_host)),
      path_style_(path_style),
      sign_payload_(sign_payload),
      credentials_(std::move(credentials)),
      http_(std::move(http)) {}

std::string S3Store::DebugString() const {
  return absl::StrCat("s3://", bucket_, keys_.prefix().empty() ? "" : "/",
                      keys_.prefix(), "?endpoint=", scheme_, "://",
                      endpoint_host_, "&region=", region_,
                      "&path_style=", path_style_ ? "true" : "false");
}

std::string S3Store::Describe(absl::string_view key) const {
  return absl::StrCat("s3://", bucket_, "/", key);
}

absl::StatusOr<HttpResponse> S3Store::SendOnce(const Call& call,
                                               absl::Span<char> sink,
                                               uint64_t sink_skip) {
  SigV4Request req;
  req.method = call.method;
  req.query = call.query;
  req.headers = call.headers;
  if (!call.body.empty() || call.method == "PUT" || call.method == "POST") {
    req.payload_sha256 =
        sign_payload_ ? Sha256Hex(call.body) : std::string(kUnsignedPayload);
  }
  std::string encoded_key = UriEncode(call.key, /*keep_slash=*/true);
  if (path_style_) {
    req.host = endpoint_host_;
    req.encoded_path =
        absl::StrCat("/", bucket_, call.key.empty() ? "" : "/", encoded_key);
  } else {
    req.host = absl::StrCat(bucket_, ".", endpoint_host_);
    req.encoded_path = absl::StrCat("/", encoded_key);
  }
  SigV4Result sig = SignV4(req, credentials_, region_, "s3", absl::Now());
  HttpRequest http;
  http.method = call.method;
  http.url =
      absl::StrCat(scheme_, "://", req.host, req.encoded_path,
                   sig.canonical_query.empty() ? "" : "?", sig.canonical_query);
  http.headers = std::move(sig.headers);
  http.body = call.body;
  return http_.Send(http, sink, sink_skip);
}

absl::Status S3Store::ErrorStatus(const Call& call,
                                  const HttpResponse& response) const {
  std::string code, message;
  if (!response.body.empty()) {
    if (absl::StatusOr<XmlElement> doc = ParseXml(response.body);
        doc.ok() && doc->name == "Error") {
      code = std::string(doc->ChildText("Code"));
      message = std::string(doc->ChildText("Message"));
    }
  }
  if (code.empty()) {
    switch (response.status) {
      case 403:
        code = "AccessDenied";
        break;
      case 404:
        code = "NotFound";
        break;
      case 412:
        code = "PreconditionFailed";
        break;
      default:
        code = absl::StrCat("HTTP ", response.status);
    }
  }
  std::string msg = RedactSecrets(absl::StrCat(
      "S3 ", call.op, " of ", Describe(call.key), ": ", response.status, " ",
      code, message.empty() ? "" : ": ", message,
      response.Header("x-amz-request-id").empty() ? "" : " (request id ",
      response.Header("x-amz-request-id"),
      response.Header("x-amz-request-id").empty() ? "" : ")"));
  if (code == "SlowDown") return absl::ResourceExhaustedError(msg);
  if (code == "NotImplemented" || code == "MethodNotAllowed")
    return absl::UnimplementedError(msg);
  if (code == "RequestTimeout" || code == "InternalError")
    return absl::UnavailableError(msg);
  if (code == "NoSuchBucket") {
    return absl::NotFoundError(
        absl::StrCat(msg, " (the bucket does not exist)"));
  }
  if (code == "ExpiredToken" || code == "InvalidToken" ||
      code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" ||
      code == "AuthorizationHeaderMalformed") {
    return absl::PermissionDeniedError(msg);
  }
  return HttpErrorStatus(response.status, msg, "object");
}

absl::StatusOr<ObjectInfo> S3Store::Stat(absl::string_view path) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeStorePath(path));
  const std::string key = keys_.KeyOf(rel);
  if (HasUploadTempComponent(rel)) {
    return absl::NotFoundError(absl::StrCat(
        "stat of ", Describe(key), ": no such object (a name for uploads)"));
  }
  if (!rel.empty()) {
    Call head{.method = "HEAD", .key = key, .op = "stat"};
    HttpResponse response;
    LARDER_RETURN_IF_ERROR(RetryWithBackoff(
        http_.options().retry, "s3.head", [&]() -> absl::Status {
          LARDER_ASSIGN_OR_RETURN(response, SendOnce(head, {}, 0));
          if (response.status == 200 || response.status == 404)
            return absl::OkStatus();
          return ErrorStatus(head, response);
        }));
    if (response.status == 200) {
      ObjectInfo info;
      info.path = rel;
      std::optional<uint64_t> size =
          ParseUint(response.Header("content-length"));
      if (!size) {
        return absl::InternalError(
            absl::StrCat("S3 stat of ", Describe(key), ": no Content-Length"));
      }
      info.size = *size;
      info.version = NormalizeEtag(response.Header("etag"));
      info.mtime = ParseHttpDate(response.Header("last-modified"));
      return info;
    }
  }
  return StatAsDirectory(*this, rel, Describe(key));
}

absl::StatusOr<ListPage> S3Store::List(absl::string_view dir,
                                       const ListOptions& options) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeStorePath(dir));
  if (HasUploadTempComponent(rel)) return ListPage();  // Never shown.
  std::string list_prefix = keys_.KeyOf(rel);
  if (!list_prefix.empty()) list_prefix.push_back('/');
  Call call{.method = "GET", .key = "", .op = "list"};
  call.query = {{"list-type", "2"},
                {"prefix", list_prefix},
                {"max-keys",
                 absl::StrCat(std::clamp<size_t>(options.page_size, 1, 1000))},
                {"encoding-type", "url"}};
  if (!options.recursive) call.query.emplace_back("delimiter", "/");
  if (!options.page_token.empty())
    call.query.emplace_back("continuation-token", options.page_token);

  HttpResponse response;
  LARDER_RETURN_IF_ERROR(
      RetryWithBackoff(http_.options().retry, "s3.list", [&]() -> absl::Status {
        LARDER_ASSIGN_OR_RETURN(response, SendOnce(call, {}, 0));
        if (response.status == 200) return absl::OkStatus();
        return ErrorStatus(call, response);
      }));
  absl::StatusOr<XmlElement> doc = ParseXml(response.body);
  if (!doc.ok() || doc->name != "ListBucketResult") {
    return absl::InternalError(absl::StrCat(
        "S3 list of ", Describe(list_prefix), ": unexpected response body"));
  }
  const bool url_encoded = doc->ChildText("EncodingType") == "url";
  // Form encoding, as S3 and MinIO write it: a space is '+', a '+' is %2B.
  auto decode = [&](absl::string_view text) -> std::string {
    if (!url_encoded) return std::string(text);
    absl::StatusOr<std::string> d = PercentDecode(text, /*plus_is_space=*/true);
    return d.ok() ? *d : std::string(text);
  };

  ListPage page;
  for (const XmlElement& e : doc->children) {
    if (e.name == "Contents") {
      std::string key = decode(e.ChildText("Key"));
      if (key == list_prefix || absl::EndsWith(key, "/"))
        continue;  // Directory markers.
      std::optional<std::string> entry_rel = keys_.RelOf(key);
      if (!entry_rel) {
        LARDER_LOG(DEBUG, "s3.list.skip")
            .Field("key", key)
            .Field("why", "not addressable");
        continue;
      }
      if (HasUploadTempComponent(*entry_rel)) continue;
      ObjectInfo info;
      info.path = std::move(*entry_rel);
      info.size = ParseUint(e.ChildText("Size")).value_or(0);
      info.version = NormalizeEtag(e.ChildText("ETag"));
      info.mtime = ParseIsoTime(e.ChildText("LastModified"));
      page.entries.push_back(std::move(info));
    } else if (e.name == "CommonPrefixes") {
      const std::string decoded = decode(e.ChildText("Prefix"));
      absl::string_view p = decoded;
      while (absl::ConsumeSuffix(&p, "/")) {
      }
      std::optional<std::string> entry_rel = keys_.RelOf(p);
      if (!entry_rel || HasUploadTempComponent(*entry_rel)) continue;
      ObjectInfo info;
      info.path = std::move(*entry_rel);
      info.is_dir = true;
      page.entries.push_back(std::move(info));
    }
  }
  // Contents and CommonPrefixes are each sorted; merge into one order.
  std::sort(
      page.entries.begin(), page.entries.end(),
      [](const ObjectInfo& a, const ObjectInfo& b) { return a.path < b.path; });
  if (doc->ChildText("IsTruncated") == "true") {
    page.next_page_token = std::string(doc->ChildText("NextContinuationToken"));
    if (page.next_page_token.empty()) {
      return absl::InternalError(
          absl::StrCat("S3 list of ", Describe(list_prefix),
                       ": truncated listing without a continuation token"));
    }
  }
  return page;
}

absl::StatusOr<size_t> S3Store::ReadRange(absl::string_view path,
                                          uint64_t offset,
                                          absl::Span<char> buffer,
                                          absl::string_view expected_version,
                                          uint64_t* object_size) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeStorePath(path));
  if (rel.empty())
    return absl::InvalidArgumentError(
        "cannot read the store root: it is a directory");
  const std::string key = keys_.KeyOf(rel);
  if (buffer.empty()) return 0;
  Call call{.method = "GET", .key = key, .op = "read"};
  call.headers.emplace_back(
      "Range", absl::StrCat("bytes=", offset, "-", offset + buffer.size() - 1));
  if (!expected_version.empty())
    call.headers.emplace_back("If-Match",
                              absl::StrCat("\"", expected_version, "\""));

  auto check_version = [&](const HttpResponse& r) -> absl::Status {
    std::string etag = NormalizeEtag(r.Header("etag"));
    if (!expected_version.empty() && etag != expected_version) {
      return absl::FailedPreconditionError(absl::StrCat(
          "S3 read of ", Describe(key), ": the object changed (ETag ", etag,
          ", expected ", expected_version, ")"));
    }
    return absl::OkStatus();
  };

  size_t result = 0;
  uint64_t skip = 0;  // Becomes `offset` if the server ignores Range.
  LARDER_RETURN_IF_ERROR(
      RetryWithBackoff(http_.options().retry, "s3.get", [&]() -> absl::Status {
        LARDER_ASSIGN_OR_RETURN(HttpResponse r, SendOnce(call, buffer, skip));
        if (r.status == 206 && (skip != 0 || RangeStartOf(r) != offset)) {
          // A range other than the one asked for, or one read while
          // skipping (after a server that ignored Range): read again.
          skip = 0;
          return absl::UnavailableError(
              absl::StrCat("S3 read of ", Describe(key), " at ", offset,
                           ": the answer's range is '",
                           r.Header("content-range"), "'; reading again"));
        }
        if (r.status == 206 || (r.status == 200 && skip == offset)) {
          LARDER_RETURN_IF_ERROR(check_version(r));
          if (object_size != nullptr) {
            std::optional<uint64_t> size = ObjectSizeOf(r);
            if (!size) {
              return absl::UnavailableError(absl::StrCat(
                  "S3 read of ", Describe(key),
                  ": the response does not say the object's size"));
            }
            *object_size = *size;
          }
          result = r.sink_bytes;
          return absl::OkStatus();
        }
        if (r.status == 200) {
          // Range ignored: the body starts at byte 0. Read again, skipping.
          skip = offset;
          return absl::UnavailableError(
              "server ignored the Range header; reading again");
        }
        if (r.status == 416) {
          // Beyond the end. "bytes */SIZE" says where the end is.
          absl::string_view cr = r.Header("content-range");
          std::optional<uint64_t> size;
          if (absl::ConsumePrefix(&cr, "bytes */")) size = ParseUint(cr);
          if (!size) {
            LARDER_ASSIGN_OR_RETURN(ObjectInfo info, Stat(rel));
            if (!expected_version.empty() && info.version != expected_version) {
              return absl::FailedPreconditionError(absl::StrCat(
                  "S3 read of ", Describe(key), ": the object changed"));
            }
            size = info.size;
          } else {
            LARDER_RETURN_IF_ERROR(check_version(r));
          }
          if (offset == *size) {
            if (object_size != nullptr) *object_size = *size;
            result = 0;
            return absl::OkStatus();
          }
          return absl::OutOfRangeError(
              absl::StrCat("S3 read of ", Describe(key), " at ", offset,
                           " beyond its size ", *size));
        }
        return ErrorStatus(call, r);
      }));
  return result;
}

absl::StatusOr<std::string> S3Store::Put(absl::string_view path,
                                         absl::string_view data) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeStorePath(path));
  Call call{
      .method = "PUT", .key = keys_.KeyOf(rel), .body = data, .op = "put"};
  std::string version;
  LARDER_RETURN_IF_ERROR(
      RetryWithBackoff(http_.options().retry, "s3.put", [&]() -> absl::Status {
        LARDER_ASSIGN_OR_RETURN(HttpResponse r, SendOnce(call, {}, 0));
        if (r.status != 200) return ErrorStatus(call, r);
        version = NormalizeEtag(r.Header("etag"));
        return absl::OkStatus();
      }));
  return version;
}

absl::Status S3Store::Delete(absl::string_view path) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeStorePath(path));
  Call call{.method = "DELETE", .key = keys_.KeyOf(rel), .op = "delete"};
  return RetryWithBackoff(
      http_.options().retry, "s3.delete", [&]() -> absl::Status {
        LARDER_ASSIGN_OR_RETURN(HttpResponse r, SendOnce(call, {}, 0));
        if (r.status == 204 || r.status == 200 || r.status == 404)
          return absl::OkStatus();
        return ErrorStatus(call, r);
      });
}

absl::StatusOr<std::string> S3Store::CreateUpload(absl::string_view path) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeUploadPath("s3", path));
  Call call{.method = "POST", .key = keys_.KeyOf(rel), .op = "create upload"};
  call.query = {{"uploads", ""}};
  // The object's type, as PutObject leaves it (and not the HTTP client's).
  call.headers = {{"Content-Type", "application/octet-stream"}};
  std::string id;
  LARDER_RETURN_IF_ERROR(RetryWithBackoff(
      http_.options().retry, "s3.create_upload", [&]() -> absl::Status {
        LARDER_ASSIGN_OR_RETURN(HttpResponse r, SendOnce(call, {}, 0));
        if (r.status != 200) return ErrorStatus(call, r);
        absl::StatusOr<XmlElement> doc = ParseXml(r.body);
        if (!doc.ok() || doc->name != "InitiateMultipartUploadResult") {
          return absl::InternalError(
              absl::StrCat("S3 create upload of ", Describe(call.key),
                           ": unexpected response body"));
        }
        id = std::string(doc->ChildText("UploadId"));
        absl::Status valid = CheckS3UploadId(id);
        if (!valid.ok()) {
          return absl::InternalError(absl::StrCat(
              "S3 create upload of ", Describe(call.key),
              ": the server's UploadId is unusable: ", valid.message()));
        }
        return absl::OkStatus();
      }));
  return id;
}

absl::StatusOr<UploadedPart> S3Store::UploadPart(absl::string_view path,
                                                 absl::string_view upload_id,
                                                 uint32_t number,
                                                 uint64_t offset,
                                                 absl::string_view data) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeUploadPath("s3", path));
  LARDER_RETURN_IF_ERROR(CheckS3UploadId(upload_id));
  LARDER_RETURN_IF_ERROR(CheckUploadPart("s3", number, offset, data.size()));
  Call call{.method = "PUT",
            .key = keys_.KeyOf(rel),
            .body = data,
            .op = "upload part"};
  call.query = {{"partNumber", absl::StrCat(number)},
                {"uploadId", std::string(upload_id)}};
  UploadedPart part{number, offset, data.size(), ""};
  // Idempotent: a part sent again replaces itself.
  LARDER_RETURN_IF_ERROR(RetryWithBackoff(
      http_.options().retry, "s3.upload_part", [&]() -> absl::Status {
        LARDER_ASSIGN_OR_RETURN(HttpResponse r, SendOnce(call, {}, 0));
        if (r.status != 200) return ErrorStatus(call, r);
        part.token = NormalizeEtag(r.Header("etag"));
        if (part.token.empty()) {
          return absl::InternalError(absl::StrCat("S3 upload of part ", number,
                                                  " of ", Describe(call.key),
                                                  ": the answer has no ETag"));
        }
        return absl::OkStatus();
      }));
  return part;
}

absl::StatusOr<ObjectInfo> S3Store::CompleteUpload(
    absl::string_view path, absl::string_view upload_id,
    const std::vector<UploadedPart>& parts) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeUploadPath("s3", path));
  LARDER_RETURN_IF_ERROR(CheckS3UploadId(upload_id));
  LARDER_RETURN_IF_ERROR(CheckUploadParts("s3", parts).status());
  std::string body =
      "<CompleteMultipartUpload "
      "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">";
  for (const UploadedPart& p : parts) {
    if (p.token.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "s3: part ", p.number, " has no ETag (its token from UploadPart)"));
    }
    absl::StrAppend(&body, "<Part><PartNumber>", p.number,
                    "</PartNumber><ETag>&quot;", XmlEscape(p.token),
                    "&quot;</ETag></Part>");
  }
  body += "</CompleteMultipartUpload>";
  Call call{.method = "POST",
            .key = keys_.KeyOf(rel),
            .body = body,
            .op = "complete upload"};
  call.query = {{"uploadId", std::string(upload_id)}};
  call.headers = {{"Content-Type", "application/xml"}};
  std::string etag;
  absl::Status completed = RetryWithBackoff(
      http_.options().retry, "s3.complete_upload", [&]() -> absl::Status {
        LARDER_ASSIGN_OR_RETURN(HttpResponse r, SendOnce(call, {}, 0));
        if (r.status != 200) return ErrorStatus(call, r);
        // S3 may answer 200 and then, having kept the connection alive
        // with whitespace, an <Error>: the upload did not complete.
        absl::StatusOr<XmlElement> doc =
            ParseXml(absl::StripLeadingAsciiWhitespace(r.body));
        if (doc.ok() && doc->name == "Error") {
          r.body = std::string(absl::StripLeadingAsciiWhitespace(r.body));
          absl::Status st = ErrorStatus(call, r);
          // S3 sends this for transient failures (InternalError, SlowDown)
          // and asks for a retry: Unavailable unless the code says more.
          return st.code() == absl::StatusCode::kUnknown
                     ? absl::UnavailableError(st.message())
                     : st;
        }
        if (!doc.ok() || doc->name != "CompleteMultipartUploadResult") {
          return absl::UnavailableError(
              absl::StrCat("S3 complete upload of ", Describe(call.key),
                           ": unexpected response body"));
        }
        etag = std::string(absl::StripSuffix(
            absl::StripPrefix(doc->ChildText("ETag"), "\""), "\""));
        return absl::OkStatus();
      });
  if (!completed.ok()) {
    // An attempt may have gone through with its answer lost, the retries
    // then meeting NoSuchUpload (S3) or an error (s3rver): the object is
    // these parts if it has the ETag they make (the same parts' MD5s in the
    // same order: the same bytes, whoever completed them).
    const std::string ours = S3MultipartEtag(parts);
    absl::StatusOr<ObjectInfo> there =
        ours.empty() ? absl::NotFoundError("") : Stat(rel);
    if (!there.ok() || there->version != ours) return completed;
    LARDER_LOG(INFO, "s3.complete_upload_recovered")
        .Field("key", Describe(call.key))
        .Field("etag", ours)
        .Field("after", completed);
    etag = ours;
  }
  // The version is the ETag this upload completed with: a HEAD now may
  // already see another writer's object (the last Complete wins), whose
  // version must not name these bytes.
  LARDER_ASSIGN_OR_RETURN(ObjectInfo info, Stat(rel));
  if (!etag.empty() && info.version != etag) {
    info.version = etag;
    info.size = 0;
    for (const UploadedPart& p : parts) info.size += p.size;
  }
  return info;
}

absl::Status S3Store::AbortUpload(absl::string_view path,
                                  absl::string_view upload_id) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeUploadPath("s3", path));
  LARDER_RETURN_IF_ERROR(CheckS3UploadId(upload_id));
  Call call{.method = "DELETE", .key = keys_.KeyOf(rel), .op = "abort upload"};
  call.query = {{"uploadId", std::string(upload_id)}};
  absl::Status st = RetryWithBackoff(
      http_.options().retry, "s3.abort_upload", [&]() -> absl::Status {
        LARDER_ASSIGN_OR_RETURN(HttpResponse r, SendOnce(call, {}, 0));
        // 404 NoSuchUpload: aborted or completed already.
        if (r.status == 204 || r.status == 200 || r.status == 404)
          return absl::OkStatus();
        return ErrorStatus(call, r);
      });
  if (st.code() == absl::StatusCode::kUnimplemented) {
    return absl::UnimplementedError(absl::StrCat(
        st.message(),
        " (this S3 endpoint has no AbortMultipartUpload: the upload's parts "
        "stay on the server, invisible, until a lifecycle rule removes "
        "them)"));
  }
  return st;
}

}  // namespace larder
