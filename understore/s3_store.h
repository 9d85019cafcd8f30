// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: s3_store.h
// -----------------------------------------------------------------------------
//
// `s3://` backend: Amazon S3 or any S3-compatible endpoint.
//
//   s3://bucket/prefix?endpoint=http://127.0.0.1:9000&region=us-east-1&path_style=true
//
// URI options (all optional):
//   endpoint    scheme://host[:port] of the service. Default: AWS,
//               https://s3.<region>.amazonaws.com.
//   region      signing region. Default: AWS_REGION, AWS_DEFAULT_REGION, or
//               us-east-1.
//   path_style  true: http://endpoint/bucket/key; false: virtual-hosted,
//               http://bucket.endpoint/key. Default: false on AWS (true for
//               bucket names with dots over https), true for a custom endpoint
//               (what most S3-compatible servers expect).
//   profile     profile of the shared credentials file (see aws_credentials.h).
//   anonymous   true: send unsigned requests (public buckets).
//
// Requests are signed with SigV4 (aws_sigv4.h), sent through a pool of kept-
// alive libcurl connections (http_client.h), and retried with exponential
// backoff and jitter on connection errors, timeouts, 5xx and throttling
// (429, 503 SlowDown). Ranged GETs land directly in the caller's buffer.
//
// Changed objects: ReadRange with an expected version sends If-Match and also
// compares the ETag of the response, because not every S3-compatible server
// honours If-Match; either way a mismatch is FailedPrecondition.
//
// Directories are prefixes: Stat("a/b") of a key that does not exist but has
// keys below "a/b/" answers is_dir; List uses delimiter '/' (or none when
// recursive) and continuation tokens. Keys that cannot be addressed as store
// paths (with "." / ".." / empty components) are skipped in listings.
//
// Writes are S3 multipart uploads: CreateUpload is CreateMultipartUpload
// (its UploadId is the upload id), UploadPart is UploadPart (the part's ETag
// is its token), CompleteUpload is CompleteMultipartUpload (a 200 whose body
// is an <Error> is a failure, as S3 documents) followed by a HEAD, and
// AbortUpload is AbortMultipartUpload (NoSuchUpload is OK). Every body is
// signed (x-amz-content-sha256 is its SHA-256). A server without
// AbortMultipartUpload (s3rver 3.7.1 answers MethodNotAllowed) makes
// AbortUpload Unimplemented: the parts stay on that server, nothing is
// visible. List and Stat never show keys with a component starting with
// kUploadTempPrefix (no S3 upload makes one; other backends' uploads do).
//
// Thread-safe.
#ifndef LARDER_UNDERSTORE_S3_STORE_H_
#define LARDER_UNDERSTORE_S3_STORE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "understore/aws_credentials.h"
#include "understore/http_client.h"
#include "understore/options.h"
#include "understore/under_store.h"
#include "understore/uri.h"

namespace larder {

// The ETag S3 (and MinIO) give a completed multipart upload: the MD5 of its
// parts' MD5s (their ETags, as bytes), "-", the number of parts. Empty when
// a part's ETag is not an MD5 (32 hex digits). s3rver gives the MD5 of the
// bytes instead, which a part list cannot show.
std::string S3MultipartEtag(const std::vector<UploadedPart>& parts);

class S3Store final : public UnderStore {
 public:
  // Errors: InvalidArgument (bad bucket, endpoint or option), and those of
  // LoadAwsCredentials. Does no network I/O.
  static absl::StatusOr<std::unique_ptr<S3Store>> Open(
      const StoreUri& uri, const UnderStoreOptions& options);

  absl::string_view scheme() const override { return "s3"; }
  std::string DebugString() const override;
  absl::StatusOr<ObjectInfo> Stat(absl::string_view path) override;
  absl::StatusOr<ListPage> List(absl::string_view dir,
                                const ListOptions& options) override;
  using UnderStore::ReadRange;
  absl::StatusOr<size_t> ReadRange(absl::string_view path, uint64_t offset,
                                   absl::Span<char> buffer,
                                   absl::string_view expected_version,
                                   uint64_t* object_size) override;

  absl::StatusOr<std::string> CreateUpload(absl::string_view path) override;
  absl::StatusOr<UploadedPart> UploadPart(absl::string_view path,
                                          absl::string_view upload_id,
                                          uint32_t number, uint64_t offset,
                                          absl::string_view data) override;
  absl::StatusOr<ObjectInfo> CompleteUpload(
      absl::string_view path, absl::string_view upload_id,
      const std::vector<UploadedPart>& parts) override;
  absl::Status AbortUpload(absl::string_view path,
                           absl::string_view upload_id) override;

  // Uploads `data` as `path` with a single PutObject; returns the new version.
  // Used by tests and tools to stage data; the cache itself never writes.
  absl::StatusOr<std::string> Put(absl::string_view path,
                                  absl::string_view data);
  // Deletes `path` (missing is not an error).
  absl::Status Delete(absl::string_view path);

  const std::string& bucket() const { return bucket_; }
  // Whether request bodies are signed (their SHA-256 in the signature) or
  // sent as UNSIGNED-PAYLOAD (the default over https: TLS protects them).
  bool sign_payload() const { return sign_payload_; }

 private:
  struct Call {
    std::string method;
    std::string key;  // Full object key, or "" for a bucket-level request.
    std::vector<std::pair<std::string, std::string>> query;
    std::vector<std::pair<std::string, std::string>> headers;
    absl::string_view body;
    absl::string_view op;  // For logs and errors: "stat", "read", ...
  };

  S3Store(std::string bucket, std::string prefix, std::string region,
          std::string scheme, std::string endpoint_host, bool path_style,
          bool sign_payload, AwsCredentials credentials, HttpOptions http);

  // One signed attempt. Returns the raw response for any HTTP status.
  absl::StatusOr<HttpResponse> SendOnce(const Call& call, absl::Span<char> sink,
                                        uint64_t sink_skip);
  // Turns a non-2xx response into a status (Unavailable etc. for retryables).
  absl::Status ErrorStatus(const Call& call,
                           const HttpResponse& response) const;
  std::string Describe(absl::string_view key) const;

  const std::string bucket_;
  const KeyPrefix keys_;
  const std::string region_;
  const std::string scheme_;         // "http" or "https".
  const std::string endpoint_host_;  // host[:port] of the service.
  const bool path_style_;
  // The body's SHA-256 in the signature; else UNSIGNED-PAYLOAD (https).
  const bool sign_payload_;
  const AwsCredentials credentials_;
  HttpClient http_;
};

}  // namespace larder

#endif  // LARDER_UNDERSTORE_S3_STORE_H_
