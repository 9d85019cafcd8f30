// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: http_client.h
// -----------------------------------------------------------------------------
//
// A blocking HTTP/1.1 client over libcurl with a bounded pool of reusable
// handles (each keeps its connection alive between requests), shared by the
// object-store backends. It does one attempt per call: retries belong to the
// caller, which must re-sign each attempt.
//
// A 2xx body can be written straight into a caller-provided buffer (no copy
// through an intermediate string), which is how ranged reads land in the
// block being filled. Other bodies (errors, listings) are returned as a string.
//
// Transport failures map to absl codes: connection refused/reset, DNS failure,
// partial transfer -> Unavailable; timeout or stall -> DeadlineExceeded; TLS
// certificate problem -> FailedPrecondition. A request with no byte moving
// for HttpOptions::store_timeout (connecting, waiting for the first byte,
// or mid-transfer: a store that hangs) fails with StalledError
// (common/retry.h), which retries do not repeat. HTTP statuses are NOT mapped
// here (each protocol has its own error bodies); the response carries the
// status.
//
// Only http:// and https:// URLs are ever fetched (CURLOPT_PROTOCOLS_STR on
// every handle; anything else is InvalidArgument before a connection), and
// libcurl never follows a redirect itself (CURLOPT_FOLLOWLOCATION off, and
// CURLOPT_REDIR_PROTOCOLS_STR http,https should anything turn it on): a 3xx
// is returned to the caller, which decides whether the Location is a place
// it may go (see redirect_policy.h).
//
// Thread-safe. Requests beyond `max_connections` wait for a free handle.
#ifndef LARDER_UNDERSTORE_HTTP_CLIENT_H_
#define LARDER_UNDERSTORE_HTTP_CLIENT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/config.h"

namespace larder {

struct HttpRequest {
  std::string method = "GET";  // GET, HEAD, PUT, DELETE, ...
  std::string url;             // Fully encoded, without credentials.
  std::vector<std::pair<std::string, std::string>> headers;
  absl::string_view body;  // Request body (PUT); not owned, must outlive Send.
  // CURLOPT_RESOLVE entries, "[+]HOST:PORT:ADDR[,ADDR]...": the addresses
  // HOST:PORT connects to, instead of what DNS answers at connect time (a
  // caller that checked where a name points pins what it checked).
  std::vector<std::string> resolve;
  // The most this request may take; it caps HttpOptions::request_timeout (for
  // a caller with a deadline of its own). Zero or less: DeadlineExceeded
  // without sending.
  absl::Duration timeout = absl::InfiniteDuration();
};

struct HttpResponse {
  long status = 0;
  // Header names lowercased; a repeated header keeps its last value.
  std::vector<std::pair<std::string, std::string>> headers;
  // The body, unless it went into the caller's buffer (2xx with a sink).
  std::string body;
  // Bytes of the body written into the caller's buffer.
  size_t sink_bytes = 0;

  // Value of header `name` (lowercase), or "" when absent.
  absl::string_view Header(absl::string_view name) const;
};

class HttpClient {
 public:
  explicit HttpClient(HttpOptions options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends one request. If `sink` is non-empty, a 2xx body is written into it
  // (at most sink.size() bytes; the transfer stops once it is full) after
  // skipping the first `sink_skip` body bytes. Bodies of other statuses, or
  // of any status without a sink, are returned in HttpResponse::body (at most
  // 64 MiB; more is an error).
  // Errors: Unavailable, DeadlineExceeded, FailedPrecondition (TLS),
  // InvalidArgument (malformed URL; a scheme other than http or https),
  // Internal.
  absl::StatusOr<HttpResponse> Send(const HttpRequest& request,
                                    absl::Span<char> sink = {},
                                    uint64_t sink_skip = 0);

  const HttpOptions& options() const { return options_; }

 private:
  bool HandleAvailable() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void* AcquireHandle();
  void ReleaseHandle(void* handle);

  const HttpOptions options_;
  absl::Mutex mu_;
  std::vector<void*> idle_ ABSL_GUARDED_BY(mu_);  // CURL* handles, owned.
  int created_ ABSL_GUARDED_BY(mu_) = 0;
};

// Percent-encodes per RFC 3986 as AWS SigV4 requires: unreserved characters
// (A-Z a-z 0-9 - . _ ~) stay, every other byte becomes %XX (uppercase hex);
// '/' stays only if `keep_slash`.
std::string UriEncode(absl::string_view text, bool keep_slash);

// Helpers shared by the HTTP object stores (S3, Azure Blob).

// Strips the quotes (and a weak "W/" marker) from an ETag header value.
std::string NormalizeEtag(absl::string_view etag);
// An RFC 7231 date (Last-Modified); the Unix epoch if it does not parse.
absl::Time ParseHttpDate(absl::string_view text);
// A decimal header value (Content-Length, the size in Content-Range).
std::optional<uint64_t> ParseUint(absl::string_view text);
// The size of the whole object that a GET's body came from: the total of
// Content-Range ("bytes 0-99/1234") on a partial response, Content-Length on
// a whole one; nullopt when the response does not say (or says "*").
std::optional<uint64_t> ObjectSizeOf(const HttpResponse& response);
// The first byte of a 206's range (Content-Range "bytes FIRST-LAST/SIZE");
// nothing when the header is missing or malformed.
std::optional<uint64_t> RangeStartOf(const HttpResponse& response);
// The status for an HTTP error the store's own error codes did not decide:
// 429 ResourceExhausted, 5xx Unavailable, 404 NotFound, 401/403
// PermissionDenied, 304/412 FailedPrecondition ("the `what` changed"), 416
// OutOfRange, 400 InvalidArgument, else Unknown.
absl::Status HttpErrorStatus(long status, const std::string& msg,
                             absl::string_view what);

}  // namespace larder

#endif  // LARDER_UNDERSTORE_HTTP_CLIENT_H_
