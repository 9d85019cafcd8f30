// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: azure_store.h
// -----------------------------------------------------------------------------
//
// `az://` backend: Azure Blob Storage (and azurite).
//
//   az://container/prefix?account=NAME[&endpoint=http://127.0.0.1:10000/devstoreaccount1]
//
// URI options: `account` (default: $AZURE_STORAGE_ACCOUNT or the connection
// string's AccountName) and `endpoint` (default
// https://<account>.blob.core.windows.net; for azurite or any path-style
// endpoint, include the account segment).
//
// Credentials, never in the URI: Shared Key (AZURE_STORAGE_KEY, or
// AccountKey in AZURE_STORAGE_CONNECTION_STRING), or a SAS token
// (AZURE_STORAGE_SAS_TOKEN, or SharedAccessSignature in the connection
// string). Shared Key requests are signed as the "Authorize with Shared Key"
// specification describes (HMAC-SHA256 of the canonicalized headers and
// resource).
//
// The Blob REST API over the shared libcurl client: Get Blob with x-ms-range,
// Get Blob Properties, List Blobs with marker pagination and prefix/delimiter;
// version = ETag, sent as If-Match and compared on every range. Retries,
// errors and listings behave as in s3_store.h.
//
// Writes are block blobs built from blocks: the upload id is 16 random hex
// digits of our own (no call), UploadPart is Put Block with the block id
// base64("<upload id>-<part number, 6 digits>") (all of one length, as
// Azure requires; the body's MD5 sent as Content-MD5), CompleteUpload is
// Put Block List of the parts' ids (Latest) then a HEAD, and AbortUpload
// has nothing to do: uncommitted blocks expire by themselves after 7 days.
// Azure takes no empty block: a part of 0 bytes (the last, or the only one
// of an empty blob) is not sent and not listed. A blob keeps one set of
// uncommitted blocks: Put Block List (or Put Blob) of a blob discards every
// uncommitted block not in its list, so of two uploads of the same blob at
// once, the one completed second fails (InvalidArgument, InvalidBlockList)
// without making anything visible. List and Stat never show blobs with a
// component starting with kUploadTempPrefix. Thread-safe.
#ifndef LARDER_UNDERSTORE_AZURE_STORE_H_
#define LARDER_UNDERSTORE_AZURE_STORE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "understore/http_client.h"
#include "understore/options.h"
#include "understore/under_store.h"
#include "understore/uri.h"

namespace larder {

class AzureStore final : public UnderStore {
 public:
  // Errors: InvalidArgument (bad URI or option), Unauthenticated (no key and
  // no SAS token). Does no network I/O.
  static absl::StatusOr<std::unique_ptr<AzureStore>> Open(
      const StoreUri& uri, const UnderStoreOptions& options);

  absl::string_view scheme() const override { return "az"; }
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

  // Uploads a block blob (tests and tools stage data with it).
  absl::StatusOr<std::string> Put(absl::string_view path,
                                  absl::string_view data);
  // Creates the container (an existing one is fine).
  absl::Status CreateContainer();

 private:
  struct Call {
    std::string method;
    std::string blob;  // Full blob name, or "" for a container-level request.
    std::vector<std::pair<std::string, std::string>> query;  // Raw.
    std::vector<std::pair<std::string, std::string>>
        headers;  // Standard and x-ms-*.
    absl::string_view body;
    absl::string_view op;
  };

  AzureStore(std::string account, std::string endpoint, std::string container,
             std::string prefix, std::string key, std::string sas,
             HttpOptions http)
      : account_(std::move(account)),
        endpoint_(std::move(endpoint)),
        container_(std::move(container)),
        keys_(std::move(prefix)),
        key_(std::move(key)),
        sas_(std::move(sas)),
        http_(std::move(http)) {}

  absl::StatusOr<HttpResponse> SendOnce(const Call& call, absl::Span<char> sink,
                                        uint64_t skip);
  absl::Status ErrorStatus(const Call& call,
                           const HttpResponse& response) const;
  std::string Describe(absl::string_view blob) const;

  const std::string account_;
  const std::string
      endpoint_;  // scheme://host[:port][/account], no trailing '/'.
  const std::string container_;
  const KeyPrefix keys_;
  const std::string key_;  // Decoded Shared Key; empty with SAS.
  const std::string sas_;  // Query string without '?'; empty with Shared Key.
  HttpClient http_;
};

// The Shared Key string-to-sign of a request (exposed for tests).
std::string AzureStringToSign(
    absl::string_view method, absl::string_view account,
    absl::string_view encoded_path,
    const std::vector<std::pair<std::string, std::string>>& query,
    const std::vector<std::pair<std::string, std::string>>& headers);

}  // namespace larder

#endif  // LARDER_UNDERSTORE_AZURE_STORE_H_
