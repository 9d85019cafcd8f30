// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: hdfs_store.h
// -----------------------------------------------------------------------------
//
// The `hdfs://` (and `webhdfs://`) under-store: HDFS through the WebHDFS REST
// API over libcurl.
//
//   hdfs://NAMENODE:HTTP_PORT/path/to/dataset?user=NAME&tls=false
//       [&datanodes=dn1.example.com,dn2.example.com,.dn.example.com]
//
// The authority is the namenode's HTTP address (dfs.namenode.http-address,
// 9870 by default). Operations: GETFILESTATUS (Stat), LISTSTATUS_BATCH
// (List, paged by `startAfter`; recursive listings walk the tree and resume
// from the last path), OPEN with offset/length, following the namenode's
// 307 redirect to a datanode. Errors come as RemoteException JSON bodies and
// map to NotFound / PermissionDenied / InvalidArgument / Unavailable.
//
// Options: `user` (simple auth, below); `tls` (https to the namenode;
// default false, true for swebhdfs://); `datanodes`, the hosts the
// namenode's redirects may send the store to, comma-separated: "dn1.x.com"
// that host, ".dn.x.com" any host below that domain, "10.0.0.7" that
// address; unset (the default): the namenode's own host and the hosts in its
// DNS domain.
//
// Redirects. Only the OPEN redirect is followed, once, by this store (libcurl
// follows none), and only where redirect_policy.h allows: http or https, a
// host the namenode's domain or `datanodes` allows, never a link-local or
// metadata address, never loopback unless the namenode is on loopback or
// `datanodes` lists the host. Anything else is PermissionDenied naming the
// host and the rule; nothing is fetched from it.
//
// Listings are bounded whatever the namenode answers: each LISTSTATUS_BATCH
// must advance (a batch with remainingEntries > 0 must bring a name after
// the last one: a repeated or empty batch is Unavailable naming the
// misbehaviour instead of a loop forever); one List call, all its requests
// together, ends at UnderStoreOptions::list_deadline (DeadlineExceeded); and
// a recursive listing walks with an explicit stack no deeper than
// kMaxRecursiveListDepth (under_store.h; deeper is InvalidArgument).
//
// Authentication: simple auth with `user.name` (the `user` option, else
// $HADOOP_USER_NAME), or a delegation token from $HDFS_DELEGATION_TOKEN (a
// secret: never in the URI, redacted from logs).
//
// Writes. Each part of an upload is a file of its own beside the target,
// `<dir of path>/.larder-upload-<id>.<number>` (kUploadTempPrefix; the id is
// 16 random hex digits of our own, CreateUpload makes no call), written with
// CREATE (overwrite=true, so a part sent again replaces itself) in its two
// steps: the namenode answers 307 to a datanode, which is followed only where
// the redirect policy allows (as OPEN's), and the data goes there.
// CompleteUpload CONCATs parts 2..n into part 1 (HDFS refuses empty
// sources: an empty last part is left out), checks that part 1 now holds
// the parts' total, DELETEs the file at the target if there is one and
// RENAMEs part 1 to the target, then Stats it. The DELETE makes an
// overwrite NOT atomic on HDFS: between it and the RENAME, readers find no
// file (WebHDFS's documented RENAME never replaces a file). A Complete that
// failed half-way (or was retried) may be called again: a CONCAT or a
// RENAME already done is recognised by the sizes and names it left.
// AbortUpload lists the directory from `.larder-upload-<id>` on and DELETEs
// every `.larder-upload-<id>.*`. List and Stat never show names starting
// with kUploadTempPrefix.
//
// Versions: HDFS has no ETag; the version is "<modificationTime ms>-<length>"
// and is checked with GETFILESTATUS before and after every ranged read, so a
// file replaced during a read fails with FailedPrecondition instead of
// returning mixed bytes.
#ifndef LARDER_UNDERSTORE_HDFS_STORE_H_
#define LARDER_UNDERSTORE_HDFS_STORE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "understore/http_client.h"
#include "understore/options.h"
#include "understore/redirect_policy.h"
#include "understore/under_store.h"
#include "understore/uri.h"

namespace larder {

// The JSON of WebHDFS answers, parsed (exposed for the randomized-input
// tests). `rel` is the store path asked about.
namespace webhdfs {
// Whether `name` comes after `after` in the namenode's order of a
// directory's children: bytes compared as signed (HDFS's
// DFSUtilClient.compareBytes), so a UTF-8 name (first byte 0x80 or more)
// sorts before every ASCII one. LISTSTATUS_BATCH's startAfter follows it.
bool NameAfter(absl::string_view name, absl::string_view after);
// A GETFILESTATUS answer. Errors: Internal (not JSON, no FileStatus).
// `shown` is the path errors name.
absl::StatusOr<ObjectInfo> ParseFileStatus(const std::string& body,
                                           const std::string& rel,
                                           const std::string& shown);
// A LISTSTATUS_BATCH answer (`batch`: DirectoryListing, with the count of
// remaining entries) or a LISTSTATUS one: the entries after `after`, and
// whether more remain. Errors: Internal (not JSON), InvalidArgument (`rel`
// is a file; a name that is not one path component).
absl::StatusOr<std::pair<std::vector<ObjectInfo>, bool>> ParseListing(
    const std::string& body, const std::string& rel, const std::string& shown,
    const std::string& after, bool batch);
}  // namespace webhdfs

// Thread-safe. Owns its HTTP connection pool.
class HdfsStore final : public UnderStore {
 public:
  // Errors: InvalidArgument (bad URI or option).
  static absl::StatusOr<std::unique_ptr<HdfsStore>> Open(
      const StoreUri& uri, const UnderStoreOptions& options);

  absl::string_view scheme() const override { return "hdfs"; }
  std::string DebugString() const override;
  absl::StatusOr<ObjectInfo> Stat(absl::string_view path) override;
  // Errors as UnderStore::List, and: Unavailable (a batch that does not
  // advance), DeadlineExceeded (list_deadline passed), InvalidArgument (a
  // tree deeper than kMaxRecursiveListDepth).
  absl::StatusOr<ListPage> List(absl::string_view dir,
                                const ListOptions& options) override;
  // Errors as UnderStore::ReadRange, and PermissionDenied for a redirect the
  // policy refuses (see above).
  using UnderStore::ReadRange;
  absl::StatusOr<size_t> ReadRange(absl::string_view path, uint64_t offset,
                                   absl::Span<char> buffer,
                                   absl::string_view expected_version,
                                   uint64_t* object_size) override;

  absl::StatusOr<std::string> CreateUpload(absl::string_view path) override;
  // Errors as UnderStore::UploadPart, and PermissionDenied for a redirect
  // the policy refuses.
  absl::StatusOr<UploadedPart> UploadPart(absl::string_view path,
                                          absl::string_view upload_id,
                                          uint32_t number, uint64_t offset,
                                          absl::string_view data) override;
  absl::StatusOr<ObjectInfo> CompleteUpload(
      absl::string_view path, absl::string_view upload_id,
      const std::vector<UploadedPart>& parts) override;
  absl::Status AbortUpload(absl::string_view path,
                           absl::string_view upload_id) override;

 private:
  HdfsStore(std::string base_url, std::string root, std::string user,
            std::string token, HttpOptions http, RedirectPolicy redirects,
            absl::Duration list_deadline)
      : base_url_(std::move(base_url)),
        root_(std::move(root)),
        user_(std::move(user)),
        token_(std::move(token)),
        redirects_(std::move(redirects)),
        list_deadline_(list_deadline),
        http_(std::move(http)) {}

  // The HDFS path of store path `rel` ("/root/rel").
  std::string HdfsPath(const std::string& rel) const;
  // The namenode URL for `op` on `rel` with extra query parameters.
  std::string Url(
      const std::string& rel, absl::string_view op,
      const std::vector<std::pair<std::string, std::string>>& extra = {}) const;
  // GET with retries; returns a 2xx or 3xx response, else the mapped error.
  // `resolve`: HttpRequest::resolve. No attempt starts after `deadline`, and
  // none runs past it (DeadlineExceeded).
  absl::StatusOr<HttpResponse> Get(
      const std::string& url, absl::string_view op, const std::string& rel,
      absl::Span<char> sink = {}, const std::vector<std::string>& resolve = {},
      absl::Time deadline = absl::InfiniteFuture()) {
    return Send("GET", url, op, rel, {}, sink, resolve, deadline);
  }
  // As Get, with `method` and a request body.
  absl::StatusOr<HttpResponse> Send(
      absl::string_view method, const std::string& url, absl::string_view op,
      const std::string& rel, absl::string_view body,
      absl::Span<char> sink = {}, const std::vector<std::string>& resolve = {},
      absl::Time deadline = absl::InfiniteFuture());
  // GETFILESTATUS of `rel`, names reserved for uploads included.
  absl::StatusOr<ObjectInfo> StatAny(const std::string& rel);
  // Writes file `rel` (replacing it) with CREATE's two steps, retried whole.
  absl::Status CreateFile(const std::string& rel, absl::string_view data);
  // DELETE of file `rel` (not recursive); one already gone is OK.
  absl::Status DeleteFile(const std::string& rel);
  absl::Status ErrorStatus(absl::string_view op, const std::string& rel,
                           const HttpResponse& response) const;
  // One LISTSTATUS_BATCH page of directory `rel`: the children after child
  // `after`, and whether more remain. A batch with more remaining must bring
  // at least one child after `after` (Unavailable otherwise), so the caller's
  // cursor always advances.
  absl::StatusOr<std::pair<std::vector<ObjectInfo>, bool>> ListBatch(
      const std::string& rel, const std::string& after, absl::Time deadline);
  // Appends up to `limit` files below `rel` in depth-first name order,
  // skipping everything up to and including path `after`. Iterative, at most
  // kMaxRecursiveListDepth directories deep.
  absl::Status Walk(const std::string& rel, const std::string& after,
                    size_t limit, absl::Time deadline,
                    std::vector<ObjectInfo>* out);

  const std::string base_url_;  // http://namenode:port
  const std::string root_;      // HDFS path of the store root, no trailing /.
  const std::string user_;
  const std::string token_;
  const RedirectPolicy redirects_;
  const absl::Duration list_deadline_;
  HttpClient http_;
};

}  // namespace larder

#endif  // LARDER_UNDERSTORE_HDFS_STORE_H_
