// Copyright 2026 The Larder Authors.
#include "client/short_circuit_client.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/fd_socket.h"
#include "common/status_macros.h"
#include "proto/worker.pb.h"

namespace larder {

absl::StatusOr<std::unique_ptr<ShortCircuitClient>> ShortCircuitClient::Connect(
    const std::string& path) {
  LARDER_ASSIGN_OR_RETURN(int sock, ConnectUnix(path));
  return std::unique_ptr<ShortCircuitClient>(new ShortCircuitClient(sock));
}

ShortCircuitClient::~ShortCircuitClient() {
  absl::MutexLock lock(&mu_);
  ::close(sock_);
}

absl::StatusOr<ShortCircuitClient::Lease> ShortCircuitClient::Open(
    const BlockId& id, absl::Duration lease) {
  v1::ShortCircuitRequest req;
  req.set_op(v1::ShortCircuitRequest::OPEN);
  v1::BlockRef* ref = req.mutable_block();
  ref->set_mount(id.mount);
  ref->set_path(id.path);
  ref->set_version(id.version);
  ref->set_index(id.index);
  ref->set_block_size(id.block_size);
  ref->set_object_size(id.object_size);
  req.set_lease_ms(static_cast<uint32_t>(absl::ToInt64Milliseconds(lease)));
  std::string frame;
  int fd = -1;
  {
    absl::MutexLock lock(&mu_);
    LARDER_RETURN_IF_ERROR(SendFrame(sock_, req.SerializeAsString()));
    LARDER_RETURN_IF_ERROR(RecvFrame(sock_, &frame, &fd));
  }
  v1::ShortCircuitResponse resp;
  if (!resp.ParseFromString(frame)) {
    if (fd >= 0) ::close(fd);
    return absl::InternalError("malformed short-circuit response");
  }
  if (resp.code() != 0) {
    if (fd >= 0) ::close(fd);
    return absl::Status(static_cast<absl::StatusCode>(resp.code()),
                        resp.message());
  }
  if (fd < 0)
    return absl::InternalError(
        "short-circuit response without a file descriptor");
  return Lease{fd, resp.offset(), resp.length(), resp.lease_id(),
               resp.source()};
}

absl::Status ShortCircuitClient::Release(Lease& lease) {
  if (lease.fd >= 0) ::close(lease.fd);
  lease.fd = -1;
  if (lease.lease_id == 0) return absl::OkStatus();
  v1::ShortCircuitRequest req;
  req.set_op(v1::ShortCircuitRequest::RELEASE);
  req.set_lease_id(lease.lease_id);
  std::string frame;
  int fd = -1;
  absl::MutexLock lock(&mu_);
  LARDER_RETURN_IF_ERROR(SendFrame(sock_, req.SerializeAsString()));
  LARDER_RETURN_IF_ERROR(RecvFrame(sock_, &frame, &fd));
  if (fd >= 0) ::close(fd);
  return absl::OkStatus();
}

absl::StatusOr<size_t> ShortCircuitClient::Read(const BlockId& id,
                                                uint64_t offset,
                                                absl::Span<char> buffer,
                                                std::string* source) {
  LARDER_ASSIGN_OR_RETURN(Lease lease, Open(id));
  if (source != nullptr) *source = lease.source;
  size_t done = 0;
  absl::Status st;
  const uint64_t want =
      offset >= lease.length
          ? 0
          : std::min<uint64_t>(buffer.size(), lease.length - offset);
  while (done < want) {
    ssize_t n = ::pread(lease.fd, buffer.data() + done, want - done,
                        static_cast<off_t>(lease.offset + offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      st = absl::InternalError(
          absl::StrCat("pread of a short-circuit block: ",
                       n < 0 ? std::strerror(errno) : "EOF"));
      break;
    }
    done += static_cast<size_t>(n);
  }
  absl::Status released = Release(lease);
  LARDER_RETURN_IF_ERROR(st);
  LARDER_RETURN_IF_ERROR(released);
  return done;
}

}  // namespace larder
