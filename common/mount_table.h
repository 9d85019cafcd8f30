// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: mount_table.h
// -----------------------------------------------------------------------------
//
// The kernel's mount table, /proc/PID/mountinfo: what `larder fuse` checks
// its mount point against and what `larder csi` reads to find its FUSE mount
// and the pods' volumes. Paths come decoded (the kernel writes a space as
// \040).
#ifndef LARDER_COMMON_MOUNT_TABLE_H_
#define LARDER_COMMON_MOUNT_TABLE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace larder {

// One line of mountinfo:
// ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER
struct MountInfo {
  std::string device;  // "major:minor"
  std::string root;    // the mounted directory within its file system
  std::string mount_point;
  std::string options;  // per mount: "ro,nosuid,nodev,relatime"
  std::string type;     // "fuse.larder", "ext4"
  std::string source;
};

// Undoes the octal escapes (\040 for a space) of mountinfo paths.
std::string UnescapeMountInfo(absl::string_view in);
// One line; nullopt where it does not parse.
std::optional<MountInfo> ParseMountInfoLine(absl::string_view line);
// Every mount of `path` (a file in mountinfo's format). Errors: NotFound,
// PermissionDenied (the file), DataLoss (a line that does not parse).
absl::StatusOr<std::vector<MountInfo>> ReadMountInfo(
    const std::string& path = "/proc/self/mountinfo");
// The topmost mount at `path` (mounts stack: the last one listed), or null.
const MountInfo* TopMountAt(const std::vector<MountInfo>& mounts,
                            absl::string_view path);

// The topmost mount at `path` (a resolved path) in `mountinfo` (text in the
// format of /proc/self/mountinfo; lines that do not parse are skipped), if
// any.
std::optional<MountInfo> FindMountIn(absl::string_view mountinfo,
                                     absl::string_view path);
// The same in this process's /proc/self/mountinfo.
std::optional<MountInfo> FindMount(absl::string_view path);

}  // namespace larder

#endif  // LARDER_COMMON_MOUNT_TABLE_H_
