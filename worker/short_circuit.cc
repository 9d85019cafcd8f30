// Copyright 2026 The Larder Authors.
#include "worker/short_circuit.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/container/flat_hash_map.h"
#include "common/fd_socket.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "proto/worker.pb.h"
#include "worker/data_service.h"

namespace larder {

absl::StatusOr<std::unique_ptr<ShortCircuitServer>> ShortCircuitServer::Start(
    Options options, BlockStore* store, WorkerMetrics* metrics) {
  std::unique_ptr<ShortCircuitServer> s(
      new ShortCircuitServer(std::move(options), store, metrics));
  LARDER_ASSIGN_OR_RETURN(s->listen_fd_, ListenUnix(s->options_.socket_path));
  s->acceptor_ = std::thread([p = s.get()] { p->AcceptLoop(); });
  return s;
}

ShortCircuitServer::~ShortCircuitServer() { Stop(); }

void ShortCircuitServer::Stop() {
  if (stopping_.exchange(true)) return;
  ::shutdown(listen_fd_, SHUT_RDWR);
  acceptor_.join();
  ::close(listen_fd_);
  ::unlink(options_.socket_path.c_str());
  absl::MutexLock lock(&mu_);
  for (int c : connections_) ::shutdown(c, SHUT_RDWR);
  mu_.Await(absl::Condition(
      +[](int* active) { return *active == 0; }, &active_));
}

void ShortCircuitServer::AcceptLoop() {
  while (!stopping_) {
    struct pollfd p = {listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    int conn = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      ::close(conn);
      break;
    }
    connections_.insert(conn);
    ++active_;
    std::thread([this, conn] { Serve(conn); }).detach();
  }
}

void ShortCircuitServer::Serve(int conn) {
  // Leases held by this connection: id -> block key.
  absl::flat_hash_map<uint64_t, BlockKey> leases;
  uint64_t next_lease = 1;
  std::string frame;
  for (;;) {
    int ignored_fd = -1;
    absl::Status st = RecvFrame(conn, &frame, &ignored_fd);
    if (ignored_fd >= 0) ::close(ignored_fd);
    if (!st.ok()) break;  // Closed, or a malformed peer: drop the connection.
    v1::ShortCircuitRequest req;
    v1::ShortCircuitResponse resp;
    int pass_fd = -1;
    std::shared_ptr<const Block> hold;  // Keeps the fd valid until sent.
    if (!req.ParseFromString(frame)) {
      resp.set_code(static_cast<int>(absl::StatusCode::kInvalidArgument));
      resp.set_message("malformed ShortCircuitRequest");
    } else if (req.op() == v1::ShortCircuitRequest::RELEASE) {
      auto it = leases.find(req.lease_id());
      if (it == leases.end()) {
        resp.set_code(static_cast<int>(absl::StatusCode::kNotFound));
        resp.set_message("unknown lease");
      } else {
        store_->Unlease(it->second);
        leases.erase(it);
      }
    } else {
      const BlockId id = FromProto(req.block());
      absl::StatusOr<BlockRead> r =
          store_->Get(id, absl::Now() + options_.open_timeout,
                      [this] { return stopping_.load(); });
      if (!r.ok()) {
        resp.set_code(static_cast<int>(r.status().code()));
        resp.set_message(RedactSecrets(r.status().message()));
      } else {
        hold = r->block;
        absl::Duration lease = std::min(
            options_.max_lease,
            absl::Milliseconds(req.lease_ms() == 0 ? 30000 : req.lease_ms()));
        if (store_->Lease(hold->key(), absl::Now() + lease)) {
          resp.set_lease_id(next_lease);
          leases[next_lease++] = hold->key();
        }
        resp.set_lease_ms(
            static_cast<uint32_t>(absl::ToInt64Milliseconds(lease)));
        resp.set_offset(0);
        resp.set_length(hold->length());
        resp.set_source(std::string(BlockSourceName(r->source)));
        pass_fd = hold->fd();
        metrics_->served_short_circuit.Increment(
            static_cast<double>(hold->length()));
        switch (r->source) {
          case BlockSource::kRam:
            metrics_->served_ram.Increment(static_cast<double>(hold->length()));
            break;
          case BlockSource::kNvme:
            metrics_->served_nvme.Increment(
                static_cast<double>(hold->length()));
            break;
          case BlockSource::kUnderStore:
            metrics_->served_under_store.Increment(
                static_cast<double>(hold->length()));
            break;
        }
      }
    }
    if (!SendFrame(conn, resp.SerializeAsString(), pass_fd).ok()) break;
  }
  for (const auto& [id, key] : leases) store_->Unlease(key);
  absl::MutexLock lock(&mu_);
  connections_.erase(conn);
  ::close(conn);
  --active_;
}

}  // namespace larder
