// Copyright 2026 The Larder Authors.
#include "understore/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/log.h"
#include "common/retry.h"

namespace larder {
namespace {

constexpr size_t kMaxBodyBytes = 64 << 20;

void GlobalInitOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// State of one transfer, seen by the libcurl callbacks.
struct Transfer {
  CURL* curl;
  HttpResponse* response;
  absl::Span<char> sink;
  uint64_t skip;
  bool sink_full = false;
  bool body_too_large = false;
  absl::string_view upload;
  // --store_timeout: the longest time without a byte moving either way.
  absl::Duration quiet_limit = absl::InfiniteDuration();
  absl::Time last_progress = absl::Now();
  curl_off_t last_down = 0, last_up = 0;
  bool stalled = false;
};

// libcurl calls this at least once a second while a request is in flight:
// a request with no byte moving for quiet_limit is stopped.
int OnProgress(void* user, curl_off_t, curl_off_t down, curl_off_t,
               curl_off_t up) {
  auto* t = static_cast<Transfer*>(user);
  const absl::Time now = absl::Now();
  if (down != t->last_down || up != t->last_up) {
    t->last_down = down;
    t->last_up = up;
    t->last_progress = now;
    return 0;
  }
  if (now - t->last_progress < t->quiet_limit) return 0;
  t->stalled = true;
  return 1;  // CURLE_ABORTED_BY_CALLBACK.
}

bool IsSuccess(long status) { return status >= 200 && status < 300; }

size_t OnHeader(char* data, size_t size, size_t nitems, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * nitems;
  absl::string_view line(data, n);
  if (line.rfind("HTTP/", 0) == 0) {
    t->response->headers.clear();  // A new response (after 100 Continue).
    return n;
  }
  size_t colon = line.find(':');
  if (colon == absl::string_view::npos) return n;
  std::string name = absl::AsciiStrToLower(line.substr(0, colon));
  absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
  for (auto& [k, v] : t->response->headers) {
    if (k == name) {
      v = std::string(value);
      return n;
    }
  }
  t->response->headers.emplace_back(std::move(name), std::string(value));
  return n;
}

size_t OnBody(char* data, size_t size, size_t nmemb, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * nmemb;
  long status = 0;
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
  if (t->sink.empty() || !IsSuccess(status)) {
    if (t->response->body.size() + n > kMaxBodyBytes) {
      t->body_too_large = true;
      return 0;  // Aborts the transfer.
    }
    t->response->body.append(data, n);
    return n;
  }
  size_t consumed = 0;
  if (t->skip > 0) {
    size_t s = static_cast<size_t>(std::min<uint64_t>(t->skip, n));
    t->skip -= s;
    consumed += s;
  }
  size_t room = t->sink.size() - t->response->sink_bytes;
  size_t copy = std::min(room, n - consumed);
  std::memcpy(t->sink.data() + t->response->sink_bytes, data + consumed, copy);
  t->response->sink_bytes += copy;
  consumed += copy;
  if (t->response->sink_bytes == t->sink.size() && consumed < n) {
    t->sink_full = true;
    return 0;  // The rest is not wanted; stop the transfer.
  }
  return n;
}

size_t OnUpload(char* buffer, size_t size, size_t nitems, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t n = std::min(size * nitems, t->upload.size());
  std::memcpy(buffer, t->upload.data(), n);
  t->upload.remove_prefix(n);
  return n;
}

absl::Status CurlStatus(CURLcode code, const HttpRequest& request,
                        const char* detail) {
  std::string msg = RedactSecrets(
      absl::StrCat(request.method, " ", request.url, ": ",
                   detail[0] ? detail : curl_easy_strerror(code)));
  switch (code) {
    case CURLE_OPERATION_TIMEDOUT:
      return absl::DeadlineExceededError(msg);
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
      return absl::InvalidArgumentError(msg);
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
      return absl::FailedPreconditionError(msg);
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return absl::UnavailableError(msg);
    default:
      return absl::UnavailableError(msg);
  }
}

}  // namespace

absl::string_view HttpResponse::Header(absl::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return v;
  }
  return {};
}

std::string UriEncode(absl::string_view text, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size() * 3 / 2);
  for (unsigned char c : text) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '.' || c == '_' ||
        c == '~' || (c == '/' && keep_slash)) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

HttpClient::HttpClient(HttpOptions options) : options_(std::move(options)) {
  GlobalInitOnce();
}

HttpClient::~HttpClient() {
  absl::MutexLock lock(&mu_);
  for (void* h : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
}

bool HttpClient::HandleAvailable() const {
  return !idle_.empty() || created_ < std::max(1, options_.max_connections);
}

void* HttpClient::AcquireHandle() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(this, &HttpClient::HandleAvailable));
  if (!idle_.empty()) {
    void* h = idle_.back();
    idle_.pop_back();
    return h;
  }
  ++created_;
  return curl_easy_init();
}

void HttpClient::ReleaseHandle(void* handle) {
  absl::MutexLock lock(&mu_);
  idle_.push_back(handle);
}

absl::StatusOr<HttpResponse> HttpClient::Send(const HttpRequest& request,
                                              absl::Span<char> sink,
                                              uint64_t sink_skip) {
  CURL* curl = static_cast<CURL*>(AcquireHandle());
  if (curl == nullptr) {
    return absl::ResourceExhaustedError("curl_easy_init failed");
  }
  HttpResponse response;
  Transfer t{curl, &response, sink, sink_skip};
  t.upload = request.body;
  char error[CURL_ERROR_SIZE] = {0};

  curl_easy_reset(curl);  // Keeps the live connection and caches.
  // http and https only, for the request and for any redirect, and no
  // redirect followed by libcurl: a URL that came from outside (a WebHDFS
  // Location) must never reach file://, dict://, gopher:// & co. These
  // options exist since libcurl 7.85; a libcurl that refuses them gets no
  // request through at all.
  if (curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK ||
      curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https") !=
          CURLE_OK ||
      curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L) != CURLE_OK) {
    ReleaseHandle(curl);
    return absl::InternalError(
        "libcurl cannot restrict requests to http and https (needs 7.85+)");
  }
  absl::Duration limit = options_.request_timeout > absl::ZeroDuration()
                             ? options_.request_timeout
                             : absl::InfiniteDuration();
  limit = std::min(limit, request.timeout);
  if (limit <= absl::ZeroDuration()) {
    ReleaseHandle(curl);
    return absl::DeadlineExceededError(RedactSecrets(absl::StrCat(
        request.method, " ", request.url, ": no time left before sending")));
  }
  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, 512L * 1024);
  const absl::Duration quiet = options_.store_timeout > absl::ZeroDuration()
                                   ? options_.store_timeout
                                   : absl::InfiniteDuration();
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(absl::ToInt64Milliseconds(
                       std::min(options_.connect_timeout, quiet))));
  if (quiet < absl::InfiniteDuration()) {
    t.quiet_limit = quiet;
    t.last_progress = absl::Now();
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, &OnProgress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &t);
  }
  if (limit < absl::InfiniteDuration()) {
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(std::max<int64_t>(
                         1, absl::ToInt64Milliseconds(limit))));
  }
  if (options_.low_speed_bytes_per_sec > 0) {
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT,
                     static_cast<long>(options_.low_speed_bytes_per_sec));
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME,
                     static_cast<long>(std::max<int64_t>(
                         1, absl::ToInt64Seconds(options_.low_speed_time))));
  }
  if (!options_.ca_bundle.empty())
    curl_easy_setopt(curl, CURLOPT_CAINFO, options_.ca_bundle.c_str());
  if (!options_.verify_tls) {
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &OnBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t);

  if (request.method == "HEAD") {
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (request.method == "PUT") {
    curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(curl, CURLOPT_READFUNCTION, &OnUpload);
    curl_easy_setopt(curl, CURLOPT_READDATA, &t);
    curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE,
                     static_cast<curl_off_t>(request.body.size()));
  } else if (request.method != "GET") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    // A POST always says its length, 0 included (S3 and others answer 411
    // to a POST without Content-Length).
    if (!request.body.empty() || request.method == "POST") {
      curl_easy_setopt(curl, CURLOPT_POSTFIELDS,
                       request.body.empty() ? "" : request.body.data());
      curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                       static_cast<curl_off_t>(request.body.size()));
    }
  }

  struct curl_slist* headers = nullptr;
  bool has_content_type = false;
  for (const auto& [name, value] : request.headers) {
    headers =
        curl_slist_append(headers, absl::StrCat(name, ": ", value).c_str());
    has_content_type =
        has_content_type || absl::EqualsIgnoreCase(name, "content-type");
  }
  // libcurl would call a body it posts a form; the caller says what it is.
  if (!has_content_type) headers = curl_slist_append(headers, "Content-Type:");
  headers =
      curl_slist_append(headers, "Expect:");  // No 100-continue round trip.
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  struct curl_slist* resolve = nullptr;
  for (const std::string& entry : request.resolve)
    resolve = curl_slist_append(resolve, entry.c_str());
  if (resolve != nullptr) curl_easy_setopt(curl, CURLOPT_RESOLVE, resolve);

  CURLcode code = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  curl_off_t connected_us = 0;  // 0: no connection was made.
  curl_easy_getinfo(curl, CURLINFO_CONNECT_TIME_T, &connected_us);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, nullptr);
  curl_slist_free_all(headers);
  curl_easy_setopt(curl, CURLOPT_RESOLVE, nullptr);
  curl_slist_free_all(resolve);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, nullptr);

  if (code == CURLE_WRITE_ERROR && t.sink_full) {
    // We stopped a body we did not need; the connection cannot be reused.
    curl_easy_cleanup(curl);
    curl = curl_easy_init();
    code = CURLE_OK;
    if (curl == nullptr) {
      absl::MutexLock lock(&mu_);
      --created_;
      return response;
    }
  }
  ReleaseHandle(curl);
  if (code != CURLE_OK) {
    if (t.stalled) {
      return StalledError(RedactSecrets(absl::StrCat(
          request.method, " ", request.url, ": the store sent nothing for ",
          absl::FormatDuration(t.quiet_limit),
          " (--store_timeout); not retried")));
    }
    if (code == CURLE_OPERATION_TIMEDOUT && quiet <= options_.connect_timeout &&
        t.last_down == 0 && t.last_up == 0 && connected_us == 0) {
      // No connection within --store_timeout (the connect wait was its):
      // as stalled. A shorter --http_connect_timeout that runs out is
      // retried, as before.
      return StalledError(RedactSecrets(absl::StrCat(
          request.method, " ", request.url, ": no connection within ",
          absl::FormatDuration(quiet), " (--store_timeout); not retried")));
    }
    if (t.body_too_large) {
      return absl::InternalError(RedactSecrets(absl::StrCat(
          request.method, " ", request.url, ": response body over 64 MiB")));
    }
    return CurlStatus(code, request, error);
  }
  return response;
}

std::string NormalizeEtag(absl::string_view etag) {
  etag = absl::StripAsciiWhitespace(etag);
  absl::ConsumePrefix(&etag, "W/");
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') {
    etag = etag.substr(1, etag.size() - 2);
  }
  return std::string(etag);
}

absl::Time ParseHttpDate(absl::string_view text) {
  std::string s(text);
  time_t t = curl_getdate(s.c_str(), nullptr);
  return t < 0 ? absl::UnixEpoch() : absl::FromTimeT(t);
}

std::optional<uint64_t> ParseUint(absl::string_view text) {
  uint64_t v;
  if (!absl::SimpleAtoi(text, &v)) return std::nullopt;
  return v;
}

std::optional<uint64_t> ObjectSizeOf(const HttpResponse& response) {
  absl::string_view range = response.Header("content-range");
  if (!range.empty()) {
    const size_t slash = range.rfind('/');
    if (!absl::StartsWith(range, "bytes ") || slash == absl::string_view::npos)
      return std::nullopt;
    return ParseUint(range.substr(slash + 1));
  }
  if (response.status == 200)
    return ParseUint(response.Header("content-length"));
  return std::nullopt;
}

std::optional<uint64_t> RangeStartOf(const HttpResponse& response) {
  absl::string_view range = response.Header("content-range");
  if (!absl::ConsumePrefix(&range, "bytes ")) return std::nullopt;
  const size_t dash = range.find('-');
  if (dash == absl::string_view::npos) return std::nullopt;
  return ParseUint(range.substr(0, dash));
}

absl::Status HttpErrorStatus(long status, const std::string& msg,
                             absl::string_view what) {
  if (status == 429) return absl::ResourceExhaustedError(msg);
  if (status >= 500) return absl::UnavailableError(msg);
  if (status == 404) return absl::NotFoundError(msg);
  if (status == 401 || status == 403) return absl::PermissionDeniedError(msg);
  if (status == 304 || status == 412) {
    return absl::FailedPreconditionError(
        absl::StrCat(msg, " (the ", what, " changed)"));
  }
  if (status == 416) return absl::OutOfRangeError(msg);
  if (status == 400) return absl::InvalidArgumentError(msg);
  return absl::UnknownError(msg);
}

}  // namespace larder
