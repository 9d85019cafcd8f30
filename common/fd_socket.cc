// Copyright 2026 The Larder Authors.
#include "common/fd_socket.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace larder {
namespace {

absl::Status ErrnoUnavailable(absl::string_view what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

absl::Status ReadFully(int sock, char* data, size_t n, std::vector<int>* fds) {
  size_t done = 0;
  while (done < n) {
    struct iovec iov = {data + done, n - done};
    alignas(
        struct cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFramesFds)];
    struct msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t r = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)  // SO_RCVTIMEO ran out.
        return absl::DeadlineExceededError("no answer on the socket in time");
      return ErrnoUnavailable("recvmsg");
    }
    if (r == 0) return absl::UnavailableError("peer closed the connection");
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr;
         c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        if (fds != nullptr) {
          fds->push_back(fd);
        } else {
          ::close(fd);
        }
      }
    }
    done += static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SendFrame(int sock, absl::string_view payload,
                       const std::vector<int>& pass_fds) {
  if (payload.size() > kMaxFrameBytes)
    return absl::InvalidArgumentError("frame too large");
  if (pass_fds.size() > kMaxFramesFds)
    return absl::InvalidArgumentError("too many descriptors in one frame");
  std::string buf(4 + payload.size(), '\0');
  const uint32_t len = static_cast<uint32_t>(payload.size());
  for (int i = 0; i < 4; ++i) buf[i] = static_cast<char>(len >> (8 * i));
  std::memcpy(buf.data() + 4, payload.data(), payload.size());
  size_t done = 0;
  while (done < buf.size()) {
    struct iovec iov = {buf.data() + done, buf.size() - done};
    alignas(
        struct cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFramesFds)];
    struct msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (!pass_fds.empty() && done == 0) {
      msg.msg_control = control;
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * pass_fds.size());
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * pass_fds.size());
      std::memcpy(CMSG_DATA(c), pass_fds.data(), sizeof(int) * pass_fds.size());
    }
    ssize_t w = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)  // SO_SNDTIMEO ran out.
        return absl::DeadlineExceededError("the peer takes no data in time");
      return ErrnoUnavailable("sendmsg");
    }
    done += static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

absl::Status RecvFrame(int sock, std::string* payload,
                       std::vector<int>* received_fds) {
  char header[4];
  absl::Status st = ReadFully(sock, header, 4, received_fds);
  if (!st.ok()) return st;
  uint32_t len = 0;
  for (int i = 0; i < 4; ++i)
    len |= static_cast<uint32_t>(static_cast<unsigned char>(header[i]))
           << (8 * i);
  if (len > kMaxFrameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("frame of ", len, " bytes exceeds the limit"));
  }
  payload->resize(len);
  return ReadFully(sock, payload->data(), len, received_fds);
}

absl::StatusOr<int> ConnectUnix(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path))
    return absl::InvalidArgumentError("socket path too long");
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoUnavailable("socket");
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    absl::Status st = absl::UnavailableError(
        absl::StrCat("connect ", path, ": ", std::strerror(errno)));
    ::close(fd);
    return st;
  }
  return fd;
}

absl::StatusOr<int> ListenUnix(const std::string& path, int mode, int gid) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path))
    return absl::InvalidArgumentError("socket path too long");
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode))
    ::unlink(path.c_str());  // Stale.
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoUnavailable("socket");
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(fd, 128) != 0) {
    absl::Status s = absl::UnavailableError(
        absl::StrCat("listen on ", path, ": ", std::strerror(errno)));
    ::close(fd);
    return s;
  }
  // The path could be swapped for a symlink between bind and chmod: open it
  // without following links, check it is the socket just bound, and change
  // that inode through /proc/self/fd (which names the inode itself).
  struct stat bound;
  const int file = ::open(path.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
  absl::Status result;
  if (file < 0 || ::fstat(file, &bound) != 0 || !S_ISSOCK(bound.st_mode)) {
    result = absl::PermissionDeniedError(
        absl::StrCat(path, " is no longer the socket just bound"));
  } else {
    const std::string self = absl::StrCat("/proc/self/fd/", file);
    if (::chmod(self.c_str(), static_cast<mode_t>(mode)) != 0) {
      result = absl::PermissionDeniedError(absl::StrCat(
          "cannot set the mode of ", path, ": ", std::strerror(errno)));
    } else if (gid >= 0 && ::chown(self.c_str(), static_cast<uid_t>(-1),
                                   static_cast<gid_t>(gid)) != 0) {
      // Not fatal: the socket stays the daemon's group's (a daemon that is
      // not root may not give it to a group it is not in).
      LARDER_LOG(WARNING, "socket.chown_failed")
          .Field("socket", path)
          .Field("gid", gid)
          .Field("error", std::strerror(errno));
    }
  }
  if (file >= 0) ::close(file);
  if (!result.ok()) {
    ::close(fd);
    return result;
  }
  return fd;
}

}  // namespace larder
