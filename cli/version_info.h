// Copyright 2026 The Larder Authors.
//
// What `larder version` prints: defined in a source generated at build time
// (cmake/VersionInfo.cmake) from the project version, `git rev-parse HEAD`
// ("-dirty" with uncommitted changes; "unknown" outside a git checkout) and
// CMAKE_BUILD_TYPE (with "+address" etc. for a sanitizer build).
#ifndef LARDER_CLI_VERSION_INFO_H_
#define LARDER_CLI_VERSION_INFO_H_

namespace larder::cli {

extern const char kVersion[];
extern const char kGitCommit[];
extern const char kBuildType[];

}  // namespace larder::cli

#endif  // LARDER_CLI_VERSION_INFO_H_
