// Copyright 2026 The Larder Authors.
#include "understore/azure_store.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/log.h"
#include "common/retry.h"
#include "common/status_macros.h"
#include "understore/s3_store.h"
#include "understore/xml.h"

namespace larder {
namespace {

constexpr absl::string_view kApiVersion = "2021-08-06";

std::string HttpDate(absl::Time t) {
  return absl::FormatTime("%a, %d %b %Y %H:%M:%S GMT", t, absl::UTCTimeZone());
}

// Parses
// "AccountName=..;AccountKey=..;BlobEndpoint=..;SharedAccessSignature=..".
std::map<std::string, std::string> ParseConnectionString(absl::string_view cs) {
  std::map<std::string, std::string> out;
  for (absl::string_view part : absl::StrSplit(cs, ';', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv =
        absl::StrSplit(part, absl::MaxSplits('=', 1));
    out[std::string(absl::StripAsciiWhitespace(kv.first))] =
        std::string(absl::StripAsciiWhitespace(kv.second));
  }
  return out;
}

// The block id of part `number` of upload `id`: every id of a blob must have
// the same length, which the fixed-width number gives.
std::string BlockId(absl::string_view upload_id, uint32_t number) {
  return absl::Base64Escape(absl::StrFormat("%s-%06u", upload_id, number));
}

std::string Md5Base64(absl::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_md5(), nullptr);
  return absl::Base64Escape(
      absl::string_view(reinterpret_cast<const char*>(md), len));
}

}  // namespace

std::string AzureStringToSign(
    absl::string_view method, absl::string_view account,
    absl::string_view encoded_path,
    const std::vector<std::pair<std::string, std::string>>& query,
    const std::vector<std::pair<std::string, std::string>>& headers) {
  auto header = [&](absl::string_view name) -> std::string {
    for (const auto& [k, v] : headers) {
      if (absl::EqualsIgnoreCase(k, name)) return v;
    }
    return "";
  };
  std::string content_length = header("Content-Length");
  if (content_length == "0")
    content_length.clear();  // Versions 2015-02-21 and later.
  std::string out =
      absl::StrCat(method, "\n", header("Content-Encoding"), "\n",
                   header("Content-Language"), "\n", content_length, "\n",
                   header("Content-MD5"), "\n", header("Content-Type"), "\n",
                   header("Date"), "\n", header("If-Modified-Since"), "\n",
                   header("If-Match"), "\n", header("If-None-Match"), "\n",
                   header("If-Unmodified-Since"), "\n", header("Range"), "\n");
  std::map<std::string, std::string> ms;
  for (const auto& [k, v] : headers) {
    std::string lower = absl::AsciiStrToLower(k);
    if (absl::StartsWith(lower, "x-ms-"))
      ms[lower] = std::string(absl::StripAsciiWhitespace(v));
  }
  for (const auto& [k, v] : ms) absl::StrAppend(&out, k, ":", v, "\n");
  absl::StrAppend(&out, "/", account, encoded_path);
  std::map<std::string, std::vector<std::string>> params;
  for (const auto& [k, v] : query)
    params[absl::AsciiStrToLower(k)].push_back(v);
  for (auto& [k, vs] : params) {
    std::sort(vs.begin(), vs.end());
    absl::StrAppend(&out, "\n", k, ":", absl::StrJoin(vs, ","));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<AzureStore>> AzureStore::Open(
    const StoreUri& uri, const UnderStoreOptions& options) {
  for (const auto& [k, v] : uri.options) {
    if (k != "account" && k != "endpoint") {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown az:// option '", k, "' (known: account, endpoint)"));
    }
  }
  const std::string& container = uri.authority;
  if (container.size() < 3 || container.size() > 63 ||
      !std::all_of(container.begin(), container.end(), [](char c) {
        return absl::ascii_islower(static_cast<unsigned char>(c)) ||
               absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '-';
      })) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad Azure container name '", container,
                     "': 3-63 characters of a-z, 0-9, '-'"));
  }
  LARDER_ASSIGN_OR_RETURN(std::string prefix, NormalizeStorePath(uri.path));
  std::map<std::string, std::string> cs;
  if (auto v = options.env("AZURE_STORAGE_CONNECTION_STRING")) {
    RegisterSecret(*v);
    cs = ParseConnectionString(*v);
  }
  auto opt = [&](const std::string& name) -> std::string {
    auto it = uri.options.find(name);
    return it == uri.options.end() ? "" : it->second;
  };
  std::string account = opt("account");
  if (account.empty())
    account = options.env("AZURE_STORAGE_ACCOUNT").value_or(cs["AccountName"]);
  if (account.empty()) {
    return absl::InvalidArgumentError(
        "az:// needs an account: ?account=NAME, AZURE_STORAGE_ACCOUNT or a "
        "connection string");
  }
  std::string endpoint = opt("endpoint");
  if (endpoint.empty()) endpoint = cs["BlobEndpoint"];
  if (endpoint.empty())
    endpoint = absl::StrCat("https://", account, ".blob.core.windows.net");
  while (absl::EndsWith(endpoint, "/")) endpoint.pop_back();
  if (!absl::StartsWith(endpoint, "http://") &&
      !absl::StartsWith(endpoint, "https://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad Azure endpoint '", endpoint,
                     "': want http(s)://host[:port][/account]"));
  }
  std::string key_b64, sas;
  if (options.azure_credentials) {
    key_b64 = options.azure_credentials->key;
    sas = options.azure_credentials->sas;
  } else {
    key_b64 = options.env("AZURE_STORAGE_KEY").value_or(cs["AccountKey"]);
    sas = options.env("AZURE_STORAGE_SAS_TOKEN")
              .value_or(cs["SharedAccessSignature"]);
  }
  if (absl::StartsWith(sas, "?")) sas.erase(0, 1);
  std::string key;
  if (!key_b64.empty()) {
    RegisterSecret(key_b64);
    if (!absl::Base64Unescape(key_b64, &key) || key.empty()) {
      return absl::InvalidArgumentError(
          "the Azure account key is not valid base64");
    }
  } else if (sas.empty()) {
    return absl::UnauthenticatedError(
        "no Azure credentials: set AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN "
        "or AZURE_STORAGE_CONNECTION_STRING");
  }
  if (!sas.empty()) {
    RegisterSecret(sas);
    for (absl::string_view p : absl::StrSplit(sas, '&')) {
      if (absl::StartsWith(p, "sig=")) RegisterSecret(p.substr(4));
    }
  }
  return std::unique_ptr<AzureStore>(
      new AzureStore(account, endpoint, container, std::move(prefix),
                     std::move(key), std::move(sas), options.http));
}

std::string AzureStore::DebugString() const {
  return absl::StrCat("az://", container_, keys_.prefix().empty() ? "" : "/",
                      keys_.prefix(), "?account=", account_,
                      "&endpoint=", endpoint_);
}

std::string AzureStore::Describe(absl::string_view blob) const {
  return absl::StrCat("az://", container_, "/", blob);
}

absl::StatusOr<HttpResponse> AzureStore::SendOnce(const Call& call,
                                                  absl::Span<char> sink,
                                                  uint64_t skip) {
  // The URL path: the endpoint's own path (the account, path-style) + container
  // + blob.
  absl::string_view ep = endpoint_;
  const size_t host_start = ep.find("://") + 3;
  const size_t path_start = ep.find('/', host_start);
  const std::string base_path = path_start == absl::string_view::npos
                                    ? ""
                                    : std::string(ep.substr(path_start));
  std::string path = absl::StrCat(base_path, "/", container_);
  if (!call.blob.empty())
    absl::StrAppend(&path, "/", UriEncode(call.blob, /*keep_slash=*/true));
  std::vector<std::pair<std::string, std::string>> headers = call.headers;
  headers.emplace_back("x-ms-date", HttpDate(absl::Now()));
  headers.emplace_back("x-ms-version", std::string(kApiVersion));
  if (call.method == "PUT")
    headers.emplace_back("Content-Length", absl::StrCat(call.body.size()));
  std::vector<std::string> q;
  for (const auto& [k, v] : call.query)
    q.push_back(absl::StrCat(UriEncode(k, false), "=", UriEncode(v, false)));
  if (!sas_.empty()) q.push_back(sas_);
  if (key_.size() > 0) {
    const std::string to_sign =
        AzureStringToSign(call.method, account_, path, call.query, headers);
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
         reinterpret_cast<const unsigned char*>(to_sign.data()), to_sign.size(),
         mac, &len);
    headers.emplace_back("Authorization",
                         absl::StrCat("SharedKey ", account_, ":",
                                      absl::Base64Escape(absl::string_view(
                                          reinterpret_cast<char*>(mac), len))));
  }
  HttpRequest req;
  req.method = call.method;
  req.url = absl::StrCat(
      std::string(ep.substr(
          0, path_start == absl::string_view::npos ? ep.size() : path_start)),
      path, q.empty() ? "" : "?", absl::StrJoin(q, "&"));
  req.headers = std::move(headers);
  req.body = call.body;
  return http_.Send(req, sink, skip);
}

absl::Status AzureStore::ErrorStatus(const Call& call,
                                     const HttpResponse& response) const {
  std::string code(response.Header("x-ms-error-code")), message;
  if (!response.body.empty()) {
    if (absl::StatusOr<XmlElement> doc = ParseXml(response.body);
        doc.ok() && doc->name == "Error") {
      if (code.empty()) code = std::string(doc->ChildText("Code"));
      message = std::string(doc->ChildText("Message"));
      if (size_t nl = message.find('\n'); nl != std::string::npos)
        message.resize(nl);  // Drop request id lines.
    }
  }
  if (code.empty()) code = absl::StrCat("HTTP ", response.status);
  std::string msg = RedactSecrets(absl::StrCat(
      "Azure ", call.op, " of ", Describe(call.blob), ": ", response.status,
      " ", code, message.empty() ? "" : ": ", message));
  if (code == "ServerBusy") return absl::ResourceExhaustedError(msg);
  if (code == "OperationTimedOut") return absl::UnavailableError(msg);
  if (code == "ContainerNotFound")
    return absl::NotFoundError(
        absl::StrCat(msg, " (the container does not exist)"));
  // ConditionNotMet (If-Match failed) whatever the status says.
  return HttpErrorStatus(code == "ConditionNotMet" ? 412 : response.status, msg,
                         "blob");
}

absl::StatusOr<ObjectInfo> AzureStore::Stat(absl::string_view path) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeStorePath(path));
  const std::string blob = keys_.KeyOf(rel);
  if (HasUploadTempComponent(rel)) {
    return absl::NotFoundError(absl::StrCat(
        "stat of ", Describe(blob), ": no such blob (a name for uploads)"));
  }
  if (!rel.empty()) {
    Call head{.method = "HEAD", .blob = blob, .op = "stat"};
    HttpResponse r;
    LARDER_RETURN_IF_ERROR(RetryWithBackoff(
        http_.options().retry, "az.head", [&]() -> absl::Status {
          LARDER_ASSIGN_OR_RETURN(r, SendOnce(head, {}, 0));
          if (r.status == 200 || r.status == 404) return absl::OkStatus();
          return ErrorStatus(head, r);
        }));
    if (r.status == 200) {
      ObjectInfo info;
      info.path = rel;
      info.size = ParseUint(r.Header("content-length")).value_or(0);
      info.version = NormalizeEtag(r.Header("etag"));
      info.mtime = ParseHttpDate(r.Header("last-modified"));
      return info;
    }
  }
  return StatAsDirectory(*this, rel, Describe(blob));
}

absl::StatusOr<ListPage> AzureStore::List(absl::string_view dir,
                                          const ListOptions& options) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeStorePath(dir));
  if (HasUploadTempComponent(rel)) return ListPage();  // Never shown.
  std::string prefix = keys_.KeyOf(rel);
  if (!prefix.empty()) prefix.push_back('/');
  Call call{.method = "GET", .blob = "", .op = "list"};
  call.query = {{"restype", "container"},
                {"comp", "list"},
                {"maxresults",
                 absl::StrCat(std::clamp<size_t>(options.page_size, 1, 5000))}};
  if (!prefix.empty()) call.query.emplace_back("prefix", prefix);
  if (!options.recursive) call.query.emplace_back("delimiter", "/");
  if (!options.page_token.empty())
    call.query.emplace_back("marker", options.page_token);
  HttpResponse r;
  LARDER_RETURN_IF_ERROR(
      RetryWithBackoff(http_.options().retry, "az.list", [&]() -> absl::Status {
        LARDER_ASSIGN_OR_RETURN(r, SendOnce(call, {}, 0));
        if (r.status == 200) return absl::OkStatus();
        return ErrorStatus(call, r);
      }));
  absl::StatusOr<XmlElement> doc = ParseXml(r.body);
  if (!doc.ok() || doc->name != "EnumerationResults") {
    return absl::InternalError(absl::StrCat("Azure list of ", Describe(prefix),
                                            ": unexpected response body"));
  }
  ListPage page;
  if (const XmlElement* blobs = doc->Child("Blobs")) {
    for (const XmlElement& e : blobs->children) {
      if (e.name == "Blob") {
        const std::string name(e.ChildText("Name"));
        if (absl::EndsWith(name, "/")) continue;
        std::optional<std::string> entry = keys_.RelOf(name);
        if (!entry || HasUploadTempComponent(*entry)) continue;
        ObjectInfo info;
        info.path = std::move(*entry);
        if (const XmlElement* p = e.Child("Properties")) {
          info.size = ParseUint(p->ChildText("Content-Length")).value_or(0);
          info.version = NormalizeEtag(p->ChildText("Etag"));
          info.mtime = ParseHttpDate(p->ChildText("Last-Modified"));
        }
        page.entries.push_back(std::move(info));
      } else if (e.name == "BlobPrefix") {
        std::string name(e.ChildText("Name"));
        while (absl::EndsWith(name, "/")) name.pop_back();
        std::optional<std::string> entry = keys_.RelOf(name);
        if (!entry || HasUploadTempComponent(*entry)) continue;
        ObjectInfo info;
        info.path = std::move(*entry);
        info.is_dir = true;
        page.entries.push_back(std::move(info));
      }
    }
  }
  std::sort(
      page.entries.begin(), page.entries.end(),
      [](const ObjectInfo& a, const ObjectInfo& b) { return a.path < b.path; });
  page.next_page_token = std::string(doc->ChildText("NextMarker"));
  return page;
}

absl::StatusOr<size_t> AzureStore::ReadRange(absl::string_view path,
                                             uint64_t offset,
                                             absl::Span<char> buffer,
                                             absl::string_view expected_version,
                                             uint64_t* object_size) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeStorePath(path));
  if (rel.empty())
    return absl::InvalidArgumentError(
        "cannot read the store root: it is a directory");
  if (buffer.empty()) return 0;
  const std::string blob = keys_.KeyOf(rel);
  Call call{.method = "GET", .blob = blob, .op = "read"};
  call.headers.emplace_back(
      "x-ms-range",
      absl::StrCat("bytes=", offset, "-", offset + buffer.size() - 1));
  if (!expected_version.empty())
    call.headers.emplace_back("If-Match",
                              absl::StrCat("\"", expected_version, "\""));
  size_t result = 0;
  LARDER_RETURN_IF_ERROR(
      RetryWithBackoff(http_.options().retry, "az.get", [&]() -> absl::Status {
        LARDER_ASSIGN_OR_RETURN(HttpResponse r, SendOnce(call, buffer, 0));
        if (r.status == 206 || r.status == 200) {
          const std::string etag = NormalizeEtag(r.Header("etag"));
          if (!expected_version.empty() && etag != expected_version) {
            return absl::FailedPreconditionError(absl::StrCat(
                "Azure read of ", Describe(blob), ": the blob changed"));
          }
          if (r.status == 200 && offset != 0)
            return absl::InternalError("server ignored x-ms-range");
          if (r.status == 206 && RangeStartOf(r) != offset) {
            return absl::UnavailableError(
                absl::StrCat("Azure read of ", Describe(blob), " at ", offset,
                             ": the answer's range is '",
                             r.Header("content-range"), "'; reading again"));
          }
          if (object_size != nullptr) {
            std::optional<uint64_t> size = ObjectSizeOf(r);
            if (!size) {
              return absl::UnavailableError(
                  absl::StrCat("Azure read of ", Describe(blob),
                               ": the response does not say the blob's size"));
            }
            *object_size = *size;
          }
          result = r.sink_bytes;
          return absl::OkStatus();
        }
        if (r.status == 416) {
          LARDER_ASSIGN_OR_RETURN(ObjectInfo info, Stat(rel));
          if (!expected_version.empty() && info.version != expected_version) {
            return absl::FailedPreconditionError(absl::StrCat(
                "Azure read of ", Describe(blob), ": the blob changed"));
          }
          if (offset == info.size) {
            if (object_size != nullptr) *object_size = info.size;
            result = 0;
            return absl::OkStatus();
          }
          return absl::OutOfRangeError(
              absl::StrCat("Azure read of ", Describe(blob), " at ", offset,
                           " beyond its size ", info.size));
        }
        return ErrorStatus(call, r);
      }));
  return result;
}

absl::StatusOr<std::string> AzureStore::Put(absl::string_view path,
                                            absl::string_view data) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeStorePath(path));
  Call call{
      .method = "PUT", .blob = keys_.KeyOf(rel), .body = data, .op = "put"};
  call.headers = {{"x-ms-blob-type", "BlockBlob"},
                  {"Content-Type", "application/octet-stream"}};
  std::string version;
  LARDER_RETURN_IF_ERROR(
      RetryWithBackoff(http_.options().retry, "az.put", [&]() -> absl::Status {
        LARDER_ASSIGN_OR_RETURN(HttpResponse r, SendOnce(call, {}, 0));
        if (r.status != 201) return ErrorStatus(call, r);
        version = NormalizeEtag(r.Header("etag"));
        return absl::OkStatus();
      }));
  return version;
}

absl::Status AzureStore::CreateContainer() {
  Call call{.method = "PUT", .blob = "", .op = "create container"};
  call.query = {{"restype", "container"}};
  return RetryWithBackoff(
      http_.options().retry, "az.mkcontainer", [&]() -> absl::Status {
        LARDER_ASSIGN_OR_RETURN(HttpResponse r, SendOnce(call, {}, 0));
        if (r.status == 201 || r.status == 409) return absl::OkStatus();
        return ErrorStatus(call, r);
      });
}

absl::StatusOr<std::string> AzureStore::CreateUpload(absl::string_view path) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeUploadPath("az", path));
  (void)rel;
  return NewUploadId();  // Azure keeps no upload: the id names its blocks.
}

absl::StatusOr<UploadedPart> AzureStore::UploadPart(absl::string_view path,
                                                    absl::string_view upload_id,
                                                    uint32_t number,
                                                    uint64_t offset,
                                                    absl::string_view data) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeUploadPath("az", path));
  LARDER_RETURN_IF_ERROR(CheckLocalUploadId("az", upload_id));
  LARDER_RETURN_IF_ERROR(CheckUploadPart("az", number, offset, data.size()));
  UploadedPart part{number, offset, data.size(), ""};
  if (data.empty()) return part;  // No empty blocks: left out of the list.
  part.token = BlockId(upload_id, number);
  Call call{.method = "PUT",
            .blob = keys_.KeyOf(rel),
            .body = data,
            .op = "put block"};
  call.query = {{"comp", "block"}, {"blockid", part.token}};
  call.headers = {{"Content-MD5", Md5Base64(data)}};
  // Idempotent: a block sent again under its id replaces itself.
  LARDER_RETURN_IF_ERROR(RetryWithBackoff(
      http_.options().retry, "az.put_block", [&]() -> absl::Status {
        LARDER_ASSIGN_OR_RETURN(HttpResponse r, SendOnce(call, {}, 0));
        if (r.status != 201) return ErrorStatus(call, r);
        return absl::OkStatus();
      }));
  return part;
}

absl::StatusOr<ObjectInfo> AzureStore::CompleteUpload(
    absl::string_view path, absl::string_view upload_id,
    const std::vector<UploadedPart>& parts) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeUploadPath("az", path));
  LARDER_RETURN_IF_ERROR(CheckLocalUploadId("az", upload_id));
  LARDER_RETURN_IF_ERROR(CheckUploadParts("az", parts).status());
  std::string body = "<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>";
  for (const UploadedPart& p : parts) {
    if (p.size == 0) continue;  // Never sent (see UploadPart).
    const std::string id = BlockId(upload_id, p.number);
    if (!p.token.empty() && p.token != id) {
      return absl::InvalidArgumentError(absl::StrCat(
          "az: part ", p.number, "'s token is not the block id of part ",
          p.number, " of upload ", upload_id));
    }
    absl::StrAppend(&body, "<Latest>", id, "</Latest>");
  }
  body += "</BlockList>";
  Call call{.method = "PUT",
            .blob = keys_.KeyOf(rel),
            .body = body,
            .op = "put block list"};
  call.query = {{"comp", "blocklist"}};
  call.headers = {{"Content-Type", "application/xml"},
                  {"x-ms-blob-content-type", "application/octet-stream"}};
  // Idempotent while the blocks are there; once committed, a retry that
  // lists them again finds them committed, which Latest accepts.
  HttpResponse committed;
  LARDER_RETURN_IF_ERROR(RetryWithBackoff(
      http_.options().retry, "az.put_block_list", [&]() -> absl::Status {
        LARDER_ASSIGN_OR_RETURN(HttpResponse r, SendOnce(call, {}, 0));
        if (r.status != 201) return ErrorStatus(call, r);
        committed = std::move(r);
        return absl::OkStatus();
      }));
  // The version is the ETag this commit made, not a Stat's afterwards: a
  // writer that committed the same blob meanwhile would lend it its version
  // (and, at the same size, its cached blocks ours).
  const std::string etag = NormalizeEtag(committed.Header("etag"));
  if (etag.empty()) return Stat(rel);
  ObjectInfo info;
  info.path = rel;
  info.version = etag;
  for (const UploadedPart& p : parts) info.size += p.size;
  info.mtime = ParseHttpDate(committed.Header("last-modified"));
  return info;
}

absl::Status AzureStore::AbortUpload(absl::string_view path,
                                     absl::string_view upload_id) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeUploadPath("az", path));
  (void)rel;
  // Uncommitted blocks are not visible and Azure drops them after 7 days
  // (or at the blob's next Put Block List or Put Blob); there is no call
  // that removes only one upload's blocks.
  return CheckLocalUploadId("az", upload_id);
}

}  // namespace larder
