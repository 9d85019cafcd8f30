// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: fd_socket.h
// -----------------------------------------------------------------------------
//
// Length-prefixed frames over a Unix stream socket, optionally carrying one
// file descriptor (SCM_RIGHTS). The framing of the short-circuit protocol
// (proto/worker.proto): a 4-byte little-endian length, then the payload; a
// passed descriptor travels with the frame's first byte.
#ifndef LARDER_COMMON_FD_SOCKET_H_
#define LARDER_COMMON_FD_SOCKET_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace larder {

// Frames larger than this are refused (a malformed peer). 1 MiB.
inline constexpr size_t kMaxFrameBytes = 1 << 20;

// Most descriptors one frame may carry (the kernel's SCM_MAX_FD is 253).
inline constexpr size_t kMaxFramesFds = 64;

// Sends one frame; the descriptors in `pass_fds` (at most kMaxFramesFds) are
// duplicated into the peer. Errors: Unavailable (peer gone), InvalidArgument,
// DeadlineExceeded (the socket's SO_SNDTIMEO ran out: part of the frame may
// have gone).
absl::Status SendFrame(int sock, absl::string_view payload,
                       const std::vector<int>& pass_fds = {});

// Receives one frame. `received_fds` (may be null: then passed descriptors
// are closed) gets the passed descriptors, owned by the caller. Errors:
// Unavailable (peer closed or failed), InvalidArgument (oversized frame),
// DeadlineExceeded (the socket's SO_RCVTIMEO ran out, perhaps mid-frame).
absl::Status RecvFrame(int sock, std::string* payload,
                       std::vector<int>* received_fds);

// Connects to a Unix socket path. Errors: Unavailable, InvalidArgument.
absl::StatusOr<int> ConnectUnix(const std::string& path);

// Creates a listening Unix socket at `path`, replacing a stale socket file,
// and gives the socket file `mode` and (gid >= 0; a warning if it cannot)
// group `gid`. Both are set on the socket that was bound, never through a
// symlink someone put in its place. Errors: Unavailable (cannot bind or
// listen), InvalidArgument (path too long), PermissionDenied (the path is no
// longer the socket bound, or its mode cannot be set).
absl::StatusOr<int> ListenUnix(const std::string& path, int mode = 0666,
                               int gid = -1);

}  // namespace larder

#endif  // LARDER_COMMON_FD_SOCKET_H_
