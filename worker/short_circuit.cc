// Copyright 2026 The Larder Authors.
#include "worker/short_circuit.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/block_proto.h"
#include "common/fd_socket.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "proto/worker.pb.h"
#include "worker/data_service.h"

namespace larder {

absl::StatusOr<std::unique_ptr<ShortCircuitServer>> ShortCircuitServer::Start(
    Options options, BlockStore* store, const WorkerMounts* mounts,
    WorkerMetrics* metrics, MetadataService* metadata) {
  std::unique_ptr<ShortCircuitServer> s(new ShortCircuitServer(
      std::move(options), store, mounts, metrics, metadata));
  s->allowed_gids_ = s->options_.allowed_gids;
  if (s->allowed_gids_.empty()) s->allowed_gids_.push_back(::getegid());
  LARDER_ASSIGN_OR_RETURN(
      s->listen_fd_,
      ListenUnix(s->options_.socket_path, s->options_.socket_mode,
                 static_cast<int>(s->allowed_gids_[0])));
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
    absl::StatusOr<PeerCredentials> peer = PeerCredentialsOf(conn);
    if (!peer.ok() || !PeerAllowed(*peer)) {
      const std::string who = peer.ok()
                                  ? absl::StrCat("uid ", peer->uid, " gid ",
                                                 peer->gid, " pid ", peer->pid)
                                  : "an unknown peer";
      bool first;
      {
        absl::MutexLock lock(&refused_mu_);
        first = refused_uids_.insert(peer.ok() ? peer->uid : ~0u).second;
      }
      if (first) {  // Once per uid: a refused client retries over gRPC.
        LARDER_LOG(WARNING, "short_circuit.refused")
            .Field("peer", who)
            .Field("socket", options_.socket_path);
      }
      Refuse(conn, absl::StatusCode::kPermissionDenied,
             absl::StrCat("short-circuit refused for ", who,
                          ": not an allowed uid or group of this worker (read "
                          "over gRPC)"));
      continue;
    }
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      ::close(conn);
      break;
    }
    if (active_ >= options_.max_connections) {
      if (absl::Now() - last_busy_log_ > absl::Seconds(10)) {
        last_busy_log_ = absl::Now();
        LARDER_LOG(WARNING, "short_circuit.busy")
            .Field("connections", active_)
            .Field("socket", options_.socket_path);
      }
      Refuse(conn, absl::StatusCode::kResourceExhausted,
             absl::StrCat("short-circuit busy: ", active_,
                          " connections served (read over gRPC)"));
      continue;
    }
    connections_.insert(conn);
    ++active_;
    std::thread([this, conn, p = *std::move(peer)]() mutable {
      Serve(conn, std::move(p));
    }).detach();
  }
}

void ShortCircuitServer::Refuse(int conn, absl::StatusCode code,
                                std::string message) {
  v1::ShortCircuitResponse refusal;
  refusal.set_code(static_cast<int>(code));
  refusal.set_message(std::move(message));
  SendFrame(conn, refusal.SerializeAsString()).IgnoreError();
  ::close(conn);
}

bool ShortCircuitServer::PeerAllowed(const PeerCredentials& peer) const {
  if (peer.uid == 0 || peer.uid == ::geteuid()) return true;
  for (uint32_t u : options_.allowed_uids) {
    if (peer.uid == u) return true;
  }
  for (uint32_t g : allowed_gids_) {
    if (peer.InGroup(g)) return true;
  }
  return false;
}

absl::Status ShortCircuitServer::MayRead(const Caller& peer,
                                         const BlockId& id) const {
  return mounts_->MayRead(peer, id);
}

absl::Duration ShortCircuitServer::LeaseDuration(
    const v1::ShortCircuitRequest& req, const Caller& peer) const {
  if (req.op() == v1::ShortCircuitRequest::EXPORT &&
      req.lease_ms() == kLeaseUntilReleased && peer.local &&
      peer.local->uid == 0) {
    return absl::InfiniteDuration();
  }
  return std::min(
      options_.max_lease,
      absl::Milliseconds(req.lease_ms() == 0 ? 30000 : req.lease_ms()));
}

namespace {

// A STAT or LIST that failed as a whole.
void Failed(const absl::Status& st, v1::ShortCircuitResponse* resp) {
  resp->set_code(static_cast<int>(st.code()));
  resp->set_message(RedactSecrets(st.message()));
  resp->set_store_error(IsStoreError(st));
}

}  // namespace

void ShortCircuitServer::Stat(const Caller& peer,
                              const v1::ShortCircuitRequest& req,
                              v1::ShortCircuitResponse* resp) {
  absl::StatusOr<MetadataService::Answer> a =
      metadata_ == nullptr
          ? absl::FailedPreconditionError(
                "this worker keeps no node metadata cache (no master)")
          : metadata_->Stat(peer, req.path(), req.metadata_epoch(),
                            req.invalidation_seq());
  if (!a.ok()) {
    Failed(a.status(), resp);
    return;
  }
  resp->set_code(static_cast<int>(a->stat->status.code()));
  resp->set_message(std::string(a->stat->status.message()));
  if (a->stat->status.ok()) *resp->mutable_stat() = a->stat->response;
  resp->set_ttl_ms(static_cast<uint32_t>(std::clamp<int64_t>(
      absl::ToInt64Milliseconds(a->ttl), 0, int64_t{24} * 3600 * 1000)));
}

void ShortCircuitServer::List(const Caller& peer,
                              const v1::ShortCircuitRequest& req,
                              v1::ShortCircuitResponse* resp) {
  absl::StatusOr<v1::ListResponse> page =
      metadata_ == nullptr
          ? absl::FailedPreconditionError(
                "this worker lists nothing for clients (no master)")
          : metadata_->List(peer, req.list());
  if (page.ok() && page->ByteSizeLong() > kMaxFrameBytes - (64 << 10)) {
    page = absl::FailedPreconditionError(
        absl::StrCat("an entry of ", page->ByteSizeLong(),
                     " bytes does not fit a short-circuit frame"));
  }
  if (!page.ok()) {
    Failed(page.status(), resp);
    return;
  }
  *resp->mutable_list() = *std::move(page);
}

void ShortCircuitServer::Serve(int conn, PeerCredentials credentials) {
  // A local reader: its mounts' and files' modes decide, as for the FUSE
  // view (an admin token is not presented on this socket).
  Caller peer;
  peer.role = Role::kReader;
  peer.local = std::move(credentials);
  // Leases held by this connection: id -> block key, and exported objects:
  // id -> a block of the object.
  absl::flat_hash_map<uint64_t, BlockKey> leases;
  struct Exported {
    BlockId block;
    absl::Time until;  // InfiniteFuture: until released.
  };
  absl::flat_hash_map<uint64_t, Exported> exports;
  uint64_t next_lease = 1;
  std::string frame;
  for (;;) {
    absl::Status st =
        RecvFrame(conn, &frame, nullptr);  // Stray fds are closed.
    if (!st.ok()) break;  // Closed, or a malformed peer: drop the connection.
    v1::ShortCircuitRequest req;
    v1::ShortCircuitResponse resp;
    std::vector<std::shared_ptr<const Block>>
        hold;  // Keeps the fds valid until sent.
    std::vector<std::shared_ptr<const void>> object_holds;
    std::vector<int> fds;
    if (!req.ParseFromString(frame)) {
      resp.set_code(static_cast<int>(absl::StatusCode::kInvalidArgument));
      resp.set_message("malformed ShortCircuitRequest");
    } else if (req.op() == v1::ShortCircuitRequest::RELEASE) {
      // One-way: no response.
      for (uint64_t id : req.lease_ids()) {
        if (auto it = leases.find(id); it != leases.end()) {
          store_->Unlease(it->second);
          leases.erase(it);
        } else if (auto e = exports.find(id); e != exports.end()) {
          store_->UnexportObject(e->second.block, e->second.until);
          exports.erase(e);
        }
      }
      continue;
    } else if (req.op() == v1::ShortCircuitRequest::STAT) {
      Stat(peer, req, &resp);
    } else if (req.op() == v1::ShortCircuitRequest::LIST) {
      List(peer, req, &resp);
    } else if (req.op() == v1::ShortCircuitRequest::EXPORT) {
      // An export is a lease like OPEN's: it ends at RELEASE, when the
      // connection closes, or when its duration runs out. One grant per
      // block named, each the whole object of that block (a FUSE daemon
      // leases the files it expects to open in one exchange).
      const absl::Duration lease = LeaseDuration(req, peer);
      if (req.blocks_size() == 0 ||
          static_cast<size_t>(req.blocks_size()) > kMaxFramesFds) {
        resp.set_code(static_cast<int>(absl::StatusCode::kInvalidArgument));
        resp.set_message(absl::StrCat("EXPORT names ", req.blocks_size(),
                                      " objects; 1 to ", kMaxFramesFds,
                                      " allowed"));
      }
      for (int k = 0; resp.code() == 0 && k < req.blocks_size(); ++k) {
        v1::ShortCircuitGrant* g = resp.add_grants();
        const BlockId id = FromProto(req.blocks(k));
        absl::Status allowed = MayRead(peer, id);
        const absl::Time until = absl::Now() + lease;
        absl::StatusOr<BlockStore::Export> object =
            allowed.ok() ? store_->ExportObject(id, until) : allowed;
        if (!object.ok()) {
          g->set_code(static_cast<int>(object.status().code()));
          g->set_message(RedactSecrets(object.status().message()));
          continue;
        }
        exports[next_lease] = Exported{id, until};
        g->set_lease_id(next_lease++);
        g->set_lease_ms(
            lease == absl::InfiniteDuration()
                ? kLeaseUntilReleased
                : static_cast<uint32_t>(absl::ToInt64Milliseconds(lease)));
        g->set_offset(0);
        g->set_length(object->size);
        g->set_source("ram");
        fds.push_back(object->fd);
        CountServed(metrics_, BlockSource::kRam, object->size,
                    ServePath::kShortCircuit);
        object_holds.push_back(std::move(object->hold));
      }
    } else if (req.blocks_size() == 0 ||
               static_cast<size_t>(req.blocks_size()) > kMaxFramesFds) {
      resp.set_code(static_cast<int>(absl::StatusCode::kInvalidArgument));
      resp.set_message(absl::StrCat("OPEN names ", req.blocks_size(),
                                    " blocks; 1 to ", kMaxFramesFds,
                                    " allowed"));
    } else {
      // Misses of the batch are fetched in parallel, then granted in order.
      // Hits are what the request found in RAM: a block that the batch's
      // own fetches filled before its turn came is a miss, not a hit.
      std::vector<std::shared_ptr<const Block>> found;
      std::vector<std::shared_ptr<BlockStore::Flight>> fetches;
      std::vector<absl::Status> refused;
      found.reserve(req.blocks_size());
      refused.reserve(req.blocks_size());
      for (const v1::BlockRef& ref : req.blocks()) {
        const BlockId id = FromProto(ref);
        refused.push_back(MayRead(peer, id));
        found.push_back(refused.back().ok() ? store_->TryGetCached(id)
                                            : nullptr);
        fetches.push_back(found.back() == nullptr && refused.back().ok()
                              ? store_->StartFetch(id)
                              : nullptr);
      }
      const absl::Duration lease = LeaseDuration(req, peer);
      const absl::Time deadline = absl::Now() + options_.open_timeout;
      for (int k = 0; k < req.blocks_size(); ++k) {
        v1::ShortCircuitGrant* g = resp.add_grants();
        auto stopping = [this] { return stopping_.load(); };
        absl::StatusOr<BlockRead> r =
            !refused[k].ok() ? refused[k]
            : found[k] != nullptr
                ? BlockRead{std::move(found[k]), BlockSource::kRam}
            : fetches[k] != nullptr
                ? store_->Await(fetches[k], FromProto(req.blocks(k)), deadline,
                                stopping)
                : store_->Get(FromProto(req.blocks(k)), deadline, stopping,
                              /*count_hit=*/false);
        if (!r.ok()) {
          g->set_code(static_cast<int>(r.status().code()));
          g->set_message(RedactSecrets(r.status().message()));
          g->set_store_error(IsStoreError(r.status()));
          continue;
        }
        const Block& b = *r->block;
        if (store_->Lease(b.key(), absl::Now() + lease)) {
          g->set_lease_id(next_lease);
          leases[next_lease++] = b.key();
        }
        g->set_lease_ms(
            static_cast<uint32_t>(absl::ToInt64Milliseconds(lease)));
        g->set_offset(b.offset());
        g->set_length(b.length());
        g->set_source(std::string(BlockSourceName(r->source)));
        fds.push_back(b.fd());
        CountServed(metrics_, r->source, b.length(), ServePath::kShortCircuit);
        hold.push_back(std::move(r->block));
      }
    }
    if (!SendFrame(conn, resp.SerializeAsString(), fds).ok()) break;
  }
  for (const auto& [id, key] : leases) store_->Unlease(key);
  for (const auto& [id, e] : exports) store_->UnexportObject(e.block, e.until);
  absl::MutexLock lock(&mu_);
  connections_.erase(conn);
  ::close(conn);
  --active_;
}

}  // namespace larder
