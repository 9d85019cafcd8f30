// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: under_store.h
// -----------------------------------------------------------------------------
//
// `UnderStore` is the one interface between Larder and the systems that hold
// the real data: a local/NFS directory (`file://`), S3 or any S3-compatible
// store (`s3://`), and later Azure Blob and HDFS. A store is opened from a URI
// (see factory.h) that names its root; every path passed to it is relative to
// that root, '/'-separated, without a leading '/'.
//
// Versions. Every object has an opaque `version` string: the ETag where the
// store has one, otherwise mtime+size. Larder keys cached blocks by version,
// and `ReadRange` refuses (FailedPrecondition) to return bytes of any version
// other than the one the caller expects, so a replaced object never yields a
// mix of old and new bytes.
//
// Errors (absl::StatusCode), the same for every backend:
//   NotFound            the object or directory does not exist
//   PermissionDenied    bad or missing rights / credentials, path escapes root
//   Unauthenticated     no credentials configured where the store needs them
//   Unavailable         server down, 5xx, connection reset (retryable; the
//                       backends already retried with backoff)
//   DeadlineExceeded    timed out (retryable)
//   ResourceExhausted   throttled (retryable)
//   FailedPrecondition  the object changed (version mismatch)
//   InvalidArgument     malformed URI or path
//   OutOfRange          a read that starts beyond the end of the object
// No message ever contains a credential.
//
// Usage:
//
//   LARDER_ASSIGN_OR_RETURN(auto store, OpenUnderStore("file:///data", {}));
//   LARDER_ASSIGN_OR_RETURN(ObjectInfo info, store->Stat("train/0001.jpg"));
//   std::vector<char> buf(info.size);
//   LARDER_ASSIGN_OR_RETURN(size_t n,
//       store->ReadRange("train/0001.jpg", 0, absl::MakeSpan(buf),
//       info.version));
#ifndef LARDER_UNDERSTORE_UNDER_STORE_H_
#define LARDER_UNDERSTORE_UNDER_STORE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/security.h"

namespace larder {

// What a store knows about one object or directory.
struct ObjectInfo {
  // Relative to the store root, no leading or trailing '/'. "" is the root.
  std::string path;
  bool is_dir = false;
  // Bytes; 0 for directories.
  uint64_t size = 0;
  // Opaque version: the ETag (without quotes) or "<mtime ns>-<size>". Empty
  // for directories.
  std::string version;
  // Last modification; absl::UnixEpoch() when the store does not say.
  absl::Time mtime = absl::UnixEpoch();
  // file:// only: the file's owner, group and permission bits (07777).
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
  uint32_t mode = 0;
};

// The deepest directory a recursive listing descends into, counted from the
// directory listed (its children are at depth 1). Every backend that walks a
// tree (file://, hdfs://) walks it with an explicit stack bounded by this, so
// a directory chain of any depth (30,000 levels are easy to make) costs at
// most this many levels of memory and open descriptors, never the stack; a
// deeper tree fails the listing with InvalidArgument naming the first
// directory too deep (list a directory further down instead).
inline constexpr int kMaxRecursiveListDepth = 256;

struct ListOptions {
  // false: the direct children of the directory (files and sub-directories).
  // true: every file below it at any depth up to kMaxRecursiveListDepth (no
  // directory entries).
  bool recursive = false;
  // Most entries per page. Backends may return fewer. Default 1000.
  size_t page_size = 1000;
  // From the previous page's `next_page_token`; empty for the first page.
  std::string page_token;
};

struct ListPage {
  // In the store's listing order, which is stable between pages.
  std::vector<ObjectInfo> entries;
  // Empty when this was the last page.
  std::string next_page_token;
};

// Thread-safe: all methods may be called concurrently.
class UnderStore {
 public:
  virtual ~UnderStore() = default;

  // "file", "s3", ...
  virtual absl::string_view scheme() const = 0;

  // The store's URI without any secret, for logs and errors.
  virtual std::string DebugString() const = 0;

  // Size, version and mtime of a file, or `is_dir` for a directory (on object
  // stores: a prefix that has objects below it). "" is the root directory.
  // Errors: NotFound, PermissionDenied, Unavailable, InvalidArgument.
  virtual absl::StatusOr<ObjectInfo> Stat(absl::string_view path) = 0;

  // One page of the listing of directory `dir` ("" = root). Paths in entries
  // are relative to the store root. Errors: NotFound (dir does not exist;
  // object stores answer an empty page instead, having no directories),
  // PermissionDenied, Unavailable (also: a server whose pages do not
  // advance), DeadlineExceeded, InvalidArgument (bad page token; a recursive
  // listing of a tree deeper than kMaxRecursiveListDepth).
  virtual absl::StatusOr<ListPage> List(absl::string_view dir,
                                        const ListOptions& options) = 0;

  // Reads up to `buffer.size()` bytes of `path` starting at `offset` into
  // `buffer`; returns the number of bytes read, which is smaller only at the
  // end of the object. If `expected_version` is not empty and the object's
  // version differs, nothing is returned and the status is FailedPrecondition.
  // Errors: NotFound, PermissionDenied, Unavailable, FailedPrecondition,
  // OutOfRange (offset > size), InvalidArgument.
  absl::StatusOr<size_t> ReadRange(absl::string_view path, uint64_t offset,
                                   absl::Span<char> buffer,
                                   absl::string_view expected_version) {
    return ReadRange(path, offset, buffer, expected_version, nullptr);
  }

  // As above, and sets `*object_size` (when not null) to the size of the
  // whole object that the bytes came from, as the store said it with them
  // (Content-Range's total, the file's size at the read), so a caller can
  // prove the bytes belong to the object it was told about. Never a size
  // that the caller gave.
  virtual absl::StatusOr<size_t> ReadRange(absl::string_view path,
                                           uint64_t offset,
                                           absl::Span<char> buffer,
                                           absl::string_view expected_version,
                                           uint64_t* object_size) = 0;

  // Whether the file system would let `peer` read the file `path`: search
  // permission on the root and every directory on the way, read permission
  // on the file, by its owner, group and mode bits, as the kernel decides
  // (root may). Stores whose objects carry no owner (object stores) have
  // nothing to check: OK. Errors: PermissionDenied (naming the path and the
  // directory or file that denies), NotFound, InvalidArgument.
  virtual absl::Status MayRead(absl::string_view path,
                               const PeerCredentials& peer) {
    (void)path;
    (void)peer;
    return absl::OkStatus();
  }
};

// Calls `fn` for every entry of `dir`, page after page. Stops early, returning
// fn's status, if fn returns an error. A store that answers a page with the
// token it was given (which would loop forever) fails with Internal.
absl::Status ListAll(UnderStore& store, absl::string_view dir, bool recursive,
                     absl::FunctionRef<absl::Status(const ObjectInfo&)> fn,
                     size_t page_size = 1000);

// Stat of a path that is not an object in an object store: a directory if
// any object lies below it (for the root "": if it can be listed at all,
// which also checks access). NotFound otherwise, naming `what`.
absl::StatusOr<ObjectInfo> StatAsDirectory(UnderStore& store,
                                           const std::string& rel,
                                           absl::string_view what);

}  // namespace larder

#endif  // LARDER_UNDERSTORE_UNDER_STORE_H_
