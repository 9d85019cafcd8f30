// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: file_store.h
// -----------------------------------------------------------------------------
//
// `file://` backend: a local or NFS directory, Larder's embedded default.
//
//   file:///data/imagenet
//
// Confinement. Every path is resolved with openat2(RESOLVE_BENEATH |
// RESOLVE_NO_MAGICLINKS) against a descriptor of the root opened once, so
// neither ".." nor a symlink that points outside the root (however it is
// swapped in, even concurrently) can reach a file outside it: the kernel
// refuses the resolution (EXDEV) and Larder answers PermissionDenied. Symlinks
// that stay inside the root work. Kernels without openat2 (< 5.6) fall back to
// checking the opened descriptor's real path against the root.
//
// Version = "<mtime in ns>-<size>". ReadRange checks it before and after the
// read, so a file rewritten in place during a read is reported
// (FailedPrecondition) rather than returned torn.
//
// Listing order is per path component, bytewise; page tokens are the last
// returned path. Recursive listings do not descend into symlinked directories
// (which could form cycles), and walk with an explicit stack of at most
// kMaxRecursiveListDepth open directories (under_store.h): a deeper tree fails
// with InvalidArgument naming the first directory too deep.
//
// Writes. An upload is one temporary file, `<dir of path>/.larder-upload-<id>`
// (kUploadTempPrefix), made O_EXCL with mode 0600 in the target's directory
// (made first, mkdir -p, when missing), every directory opened beneath the
// root as reads are. UploadPart writes its bytes at their offset (pwrite;
// any process that opened the same root may), CompleteUpload cuts the file
// to the parts' total, makes it 0644, fsyncs it, renames it over the target
// (atomic: a reader sees the old file or the new one) and fsyncs the
// directory; AbortUpload unlinks it. A part never sent leaves a hole that
// CompleteUpload cannot tell from zeros, except at the end (the file is
// shorter than the parts say: InvalidArgument). List and Stat never show
// names starting with kUploadTempPrefix.
//
// Thread-safe. Holds one descriptor of the root for its lifetime.
#ifndef LARDER_UNDERSTORE_FILE_STORE_H_
#define LARDER_UNDERSTORE_FILE_STORE_H_

#include <sys/stat.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "understore/under_store.h"
#include "understore/uri.h"

namespace larder {

class FileStore final : public UnderStore {
 public:
  // Opens the directory named by `uri.path` (absolute). No options are
  // accepted. Errors: NotFound (no such directory), InvalidArgument (not a
  // directory, relative path, unknown option), PermissionDenied.
  static absl::StatusOr<std::unique_ptr<FileStore>> Open(const StoreUri& uri);

  ~FileStore() override;

  absl::string_view scheme() const override { return "file"; }
  std::string DebugString() const override;
  // The real path of the root directory this store opened.
  const std::string& root() const { return root_; }
  absl::StatusOr<ObjectInfo> Stat(absl::string_view path) override;
  absl::StatusOr<ListPage> List(absl::string_view dir,
                                const ListOptions& options) override;
  using UnderStore::ReadRange;
  absl::StatusOr<size_t> ReadRange(absl::string_view path, uint64_t offset,
                                   absl::Span<char> buffer,
                                   absl::string_view expected_version,
                                   uint64_t* object_size) override;
  absl::Status MayRead(absl::string_view path,
                       const PeerCredentials& peer) override;
  absl::Status MayLookup(absl::string_view path,
                         const PeerCredentials& peer) override;
  absl::Status MayList(absl::string_view dir,
                       const PeerCredentials& peer) override;

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

 private:
  FileStore(std::string root, int root_fd)
      : root_(std::move(root)), root_fd_(root_fd) {}

  // Opens `rel` (already normalized) beneath the root; returns an owned fd.
  absl::StatusOr<int> OpenBeneath(const std::string& rel, int flags) const;
  // Where `fd` (opened for `rel`) is, relative to the root ("" for the
  // root); EXDEV's error when it is not beneath the root.
  absl::StatusOr<std::string> PathBeneath(int fd, const std::string& rel) const;
  // Opens the directory that holds `rel` (normalized, not the root) beneath
  // the root, O_RDONLY | O_DIRECTORY, and sets `*name` to rel's last
  // component. With `create`, missing directories are made first (mkdir -p,
  // each with mkdirat in its parent opened beneath the root). Returns an
  // owned fd.
  absl::StatusOr<int> OpenParent(const std::string& rel, bool create,
                                 std::string* name) const;
  // Opens upload `id`'s temporary file beside `rel` with `flags` (never
  // following a symlink); `*dir_fd` gets the directory (owned, as the
  // result). Errors: NotFound (no such upload), those of OpenParent.
  absl::StatusOr<int> OpenUpload(const std::string& rel, absl::string_view id,
                                 int flags, int* dir_fd,
                                 std::string* name) const;

  // The check of MayRead, MayLookup and MayList: search permission on the
  // root and every directory on the way to `rel` (normalized), then `bits`
  // (4 read, 1 search) on `rel` itself; `verb` names the access in errors.
  absl::Status MayAccess(const std::string& rel, const PeerCredentials& peer,
                         unsigned bits, absl::string_view verb);
  // stat of directory `rel` ("" = the root) for MayRead, kept for
  // kDirCacheTtl: a chmod of a directory applies within a second.
  absl::Status StatDir(const std::string& rel, struct stat* st);
  static constexpr absl::Duration kDirCacheTtl = absl::Seconds(1);
  static constexpr size_t kMaxCachedDirs = 4096;

  const std::string root_;  // Real path of the root directory.
  const int root_fd_;       // Owned, O_PATH | O_DIRECTORY.
  struct CachedDir {
    struct stat st;
    absl::Time until;
  };
  absl::Mutex dir_mu_;
  absl::flat_hash_map<std::string, CachedDir> dirs_ ABSL_GUARDED_BY(dir_mu_);
};

}  // namespace larder

#endif  // LARDER_UNDERSTORE_FILE_STORE_H_
