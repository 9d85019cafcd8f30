// Copyright 2026 The Larder Authors.
//
// Opens by the kernel (FuseOptions::opens == "kernel"): the daemon declines
// OPEN, so reads arrive with no file handle and are served from a File per
// inode, of the version whose attributes the kernel holds.
#include <cerrno>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/log.h"
#include "fuse/fuse_ops.h"

namespace larder {

std::shared_ptr<File> FuseOps::SharedFile(fuse_req_t req, fuse_ino_t ino,
                                          OpScope& scope) {
  const std::string kernel = inodes_.KernelVersion(ino);
  {
    absl::MutexLock lock(&shared_mu_);
    auto it = shared_files_.find(ino);
    if (it != shared_files_.end() && it->second->info().version == kernel)
      return it->second;
  }
  std::optional<std::string> path = PathOf(req, ino, scope);
  if (!path) return nullptr;
  absl::StatusOr<std::unique_ptr<File>> opened = client_.Open(*path);
  if (!opened.ok()) {
    ReplyError(req, scope, "read", *path, opened.status());
    return nullptr;
  }
  if ((*opened)->info().version != kernel) {
    // The kernel's pages and size are another version's: this one's bytes
    // among them would tear the file. This read fails (as an open file's
    // do when its object changes); the kernel is told its attributes are
    // stale, its next read fetches them, the new mtime (see Attr) drops its
    // pages (auto_inval_data), and reads go on with the new version.
    // Only the kernel's attributes (offset -1: no page is waited for, so
    // safe inside a read): its next read asks for them again.
    if (inodes_.ForgetKernelVersion(ino, kernel) && session_ != nullptr)
      fuse_lowlevel_notify_inval_inode(session_, ino, -1, 0);
    LARDER_LOG(DEBUG, "fuse.read_changed")
        .Field("path", *path)
        .Field("kernel_version", kernel)
        .Field("version", (*opened)->info().version);
    scope.Failed();
    fuse_reply_err(req, ESTALE);
    return nullptr;
  }
  std::shared_ptr<File> file = *std::move(opened);
  absl::MutexLock lock(&shared_mu_);
  shared_files_[ino] = file;
  return file;
}

void FuseOps::DropShared(fuse_ino_t ino) {
  if (!no_open_ || inodes_.Get(ino) != nullptr) return;
  absl::MutexLock lock(&shared_mu_);
  shared_files_.erase(ino);
}

}  // namespace larder
