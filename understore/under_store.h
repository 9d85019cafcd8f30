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
// Writes. An object is written as a multipart upload, on every backend the
// same way: CreateUpload names the upload, UploadPart sends its parts (in
// any order, concurrently, from any process that opened the same URI), and
// CompleteUpload makes the whole object visible at once; AbortUpload drops
// it. Until CompleteUpload nothing is visible at the path. What each backend
// keeps meanwhile: S3 its multipart upload; Azure uncommitted blocks;
// file:// one temporary file and hdfs:// one per part, beside the target
// and named kUploadTempPrefix..., which List and Stat never show (nor any
// other name starting with kUploadTempPrefix, on any backend).
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

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/security.h"
#include "common/write_parts.h"
#include "proto/larder.pb.h"

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

// Every part of an upload but the last is at least this big (S3's rule);
// no upload has more than kMaxUploadParts parts (common/write_parts.h).
inline constexpr uint64_t kMinUploadPartBytes = kMinWritePartBytes;
inline constexpr uint32_t kMaxUploadParts = kMaxWriteParts;
// Name prefix of the temporary files/objects an upload leaves while in
// progress on stores that need them (file://, hdfs://); List and Stat never
// show them.
inline constexpr absl::string_view kUploadTempPrefix = ".larder-upload-";

// One part of an upload, as UploadPart returned it; CompleteUpload takes them
// back.
struct UploadedPart {
  uint32_t number = 0;  // 1 .. kMaxUploadParts, consecutive from 1 at Complete
  uint64_t offset = 0;  // of the part's first byte in the object
  uint64_t size = 0;
  // The store's receipt: S3 ETag, Azure block id, file name...
  std::string token;
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
  // As MayRead, for seeing that `path` (a file or a directory; "" the
  // root) exists and its attributes (stat): search permission on the root
  // and every directory on the way, nothing on `path` itself.
  virtual absl::Status MayLookup(absl::string_view path,
                                 const PeerCredentials& peer) {
    (void)path;
    (void)peer;
    return absl::OkStatus();
  }
  // As MayRead, for listing directory `dir` ("" the root) with its
  // entries' attributes: search permission on the way, read and search
  // permission on `dir`.
  virtual absl::Status MayList(absl::string_view dir,
                               const PeerCredentials& peer) {
    (void)dir;
    (void)peer;
    return absl::OkStatus();
  }

  // Writes (see the top of this file). The default implementations answer
  // Unimplemented ("<scheme>: this under-store cannot write").

  // Starts a new upload of `path` (which is not made visible until
  // CompleteUpload). Returns the upload id (printable ASCII, at most 1024
  // bytes). Errors: InvalidArgument (the root, a name starting with
  // kUploadTempPrefix), PermissionDenied, Unavailable.
  virtual absl::StatusOr<std::string> CreateUpload(absl::string_view path);

  // Uploads part `number` = bytes [offset, offset+data.size()) of the object.
  // Parts may arrive in any order, concurrently, from different processes
  // (each opens the store itself from the same URI) given the same upload id.
  // Sending the same part again replaces it. Errors: InvalidArgument (a
  // number outside 1..kMaxUploadParts, an upload id this store never gives),
  // NotFound (no such upload), PermissionDenied, Unavailable.
  virtual absl::StatusOr<UploadedPart> UploadPart(absl::string_view path,
                                                  absl::string_view upload_id,
                                                  uint32_t number,
                                                  uint64_t offset,
                                                  absl::string_view data);

  // Makes the object visible, whole, atomically replacing any object at
  // `path` (the caller decides whether overwriting is allowed; hdfs:// cannot
  // replace atomically, see hdfs_store.h). `parts` must be numbered 1..n
  // (n >= 1: an empty object is one part of 0 bytes), contiguous in offset
  // starting at 0, every part but the last >= kMinUploadPartBytes
  // (InvalidArgument otherwise, nothing visible).
  // Returns the new object's ObjectInfo (as Stat would say it right after:
  // its version must be what a later Stat/ReadRange sees). Errors:
  // InvalidArgument, NotFound (no such upload, a part never uploaded),
  // FailedPrecondition (`path` is a directory), PermissionDenied,
  // Unavailable.
  virtual absl::StatusOr<ObjectInfo> CompleteUpload(
      absl::string_view path, absl::string_view upload_id,
      const std::vector<UploadedPart>& parts);

  // Drops the upload and every part it holds; nothing becomes visible. OK if
  // the upload is already gone (idempotent). Errors: InvalidArgument,
  // PermissionDenied, Unavailable; Unimplemented from an S3-compatible
  // server without AbortMultipartUpload (s3rver): its parts stay there.
  virtual absl::Status AbortUpload(absl::string_view path,
                                   absl::string_view upload_id);
};

// Calls `fn` for every entry of `dir`, page after page. Stops early, returning
// fn's status, if fn returns an error. A store that answers a page with the
// token it was given (which would loop forever) fails with Internal.
absl::Status ListAll(UnderStore& store, absl::string_view dir, bool recursive,
                     absl::FunctionRef<absl::Status(const ObjectInfo&)> fn,
                     size_t page_size = 1000);

// Stat of a path that is not an object in an object store: a directory if
// any object lies below it (for the root "": if it can be listed at all,
// which also checks access). NotFound otherwise, naming `what`. Pages that
// come back empty with more to follow (a folder marker "dir/" is not an
// entry) are followed, up to kStatAsDirectoryPages.
inline constexpr int kStatAsDirectoryPages = 4;
absl::StatusOr<ObjectInfo> StatAsDirectory(UnderStore& store,
                                           const std::string& rel,
                                           absl::string_view what);

// What a caller may do with a path of a mount: see it (Stat), list it
// (List of a directory, with its entries' attributes) or read it.
enum class PathAccess { kLookup, kList, kRead };
// The one decision for Stat, List and reads, on the master (for callers
// without credentials) and on the workers (for local callers, by the
// kernel's word): MayReadMount for the mount (its root is seen by anyone
// who may see the mount: a mount point), then, for a mount whose files keep
// their own owner and mode and a local or anonymous caller other than root,
// the store's MayLookup, MayList or MayRead of `relative`. `daemon_uid` and
// `daemon_gid` stand for a mount's unset owner and group. Errors:
// PermissionDenied, and the store's (NotFound, ...).
absl::Status MayAccessPath(const Caller& caller, absl::string_view mount_path,
                           const MountAccess& access, UnderStore& store,
                           absl::string_view relative, PathAccess want,
                           uint32_t daemon_uid, uint32_t daemon_gid);
// A page of a recursive listing of directory `dir` ("" the root) of mount
// `mount_path`, which `caller` may list, as `caller` may see it: without the
// entries below directories it may not list (every directory between must
// be listable, as `find` needs), and, when the page's last entry is one of
// them, with the page token (a file:// store's: the last entry's path below
// `dir`) moved to the directory that hid it, so that the next page starts
// past that directory and no token names what the caller may not see.
// Nothing changes for callers held to no file modes (HeldToFileModes).
void FilterRecursiveListing(const Caller& caller, absl::string_view mount_path,
                            const MountAccess& access, UnderStore& store,
                            absl::string_view dir, v1::ListResponse* page);
// Whether `caller` is held to each file's own owner and mode in a mount of
// `access`: the mount's files keep theirs (MountAccess::per_file), and the
// caller is local or anonymous, and neither an admin nor root.
bool HeldToFileModes(const Caller& caller, const MountAccess& access);
// What the invalidation of mount-relative path `relative` (Master.
// GetInvalidations) may tell `caller`, who follows the log to drop what it
// cached: `relative` itself where the caller may list every directory on
// the way to it, so it could have seen the name; otherwise the first
// directory on the way it may not list ("" the mount's root), whose name
// it may see: dropping that drops everything below it too, so what the
// caller cached of `relative` goes either way, and no name it may not see
// reaches it. The mount's root ("") where its mode lets the caller read
// nothing (a process of its user may have cached paths there through its
// worker, which knows the user's uid and groups); nothing (nullopt) for a
// mount outside the caller's token's mounts. `listable` remembers MayList's
// answers across calls (by mount-relative directory; one map per mount).
std::optional<std::string> InvalidationSeenBy(
    const Caller& caller, absl::string_view mount_path,
    const MountAccess& access, UnderStore& store, absl::string_view relative,
    uint32_t daemon_uid, uint32_t daemon_gid,
    absl::flat_hash_map<std::string, bool>* listable);

// Helpers for the backends' uploads.

// Whether `name` (one path component) is reserved for uploads in progress:
// it starts with kUploadTempPrefix.
bool IsUploadTempName(absl::string_view name);
// Whether any component of the store path `rel` is such a name: List skips
// these entries and Stat answers NotFound for them.
bool HasUploadTempComponent(absl::string_view rel);
// Normalizes `path` for CreateUpload/UploadPart/CompleteUpload/AbortUpload:
// not the root, no component reserved for uploads. InvalidArgument
// otherwise (naming `scheme`).
absl::StatusOr<std::string> NormalizeUploadPath(absl::string_view scheme,
                                                absl::string_view path);
// A new upload id for the stores that make their own (file://, az://,
// hdfs://): 16 random lowercase hex digits.
std::string NewUploadId();
// InvalidArgument unless `id` is what NewUploadId makes (it then is safe in
// file names and block ids).
absl::Status CheckLocalUploadId(absl::string_view scheme, absl::string_view id);
// InvalidArgument unless `number` is in 1..kMaxUploadParts and the part's
// end does not overflow.
absl::Status CheckUploadPart(absl::string_view scheme, uint32_t number,
                             uint64_t offset, uint64_t size);
// Checks CompleteUpload's `parts` (numbered 1..n, n >= 1, contiguous from
// offset 0, every part but the last >= kMinUploadPartBytes, n <=
// kMaxUploadParts) and returns the object's size. InvalidArgument
// otherwise, naming the first part at fault.
absl::StatusOr<uint64_t> CheckUploadParts(
    absl::string_view scheme, const std::vector<UploadedPart>& parts);

}  // namespace larder

#endif  // LARDER_UNDERSTORE_UNDER_STORE_H_
