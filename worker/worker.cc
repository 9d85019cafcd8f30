// Copyright 2026 The Larder Authors.
#include "worker/worker.h"

#include <grpcpp/server_builder.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/master_connection.h"
#include "common/status_macros.h"

namespace larder {
namespace {

// RAM blocks a worker may hold under an fd limit: the rest is kept for
// connections, NVMe and under-store files, the fds held by readers of
// evicted blocks, and two per fetch thread (the block in flight and its
// connection to the store).
size_t RamBlocksFor(uint64_t fd_limit, int fetch_threads) {
  const uint64_t reserve =
      std::min<uint64_t>(std::max<uint64_t>(fd_limit / 4, 256), 8192) +
      2 * static_cast<uint64_t>(std::max(fetch_threads, 0));
  return fd_limit > reserve + 64 ? static_cast<size_t>(fd_limit - reserve) : 64;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Worker>> Worker::Start(
    WorkerOptions options, std::unique_ptr<WorkerMounts> mounts) {
  // Every RAM block is a memfd.
  const uint64_t fd_limit = RaiseFdLimit();
  if (options.store.ram_max_blocks == 0)
    options.store.ram_max_blocks =
        RamBlocksFor(fd_limit, options.store.fetch_threads);
  LARDER_LOG(INFO, "worker.fd_limit")
      .Field("limit", fd_limit)
      .Field("ram_max_blocks", options.store.ram_max_blocks);
  std::unique_ptr<Worker> w(new Worker(std::move(options), std::move(mounts)));
  LARDER_RETURN_IF_ERROR(
      CheckExposure("worker", w->options_.listen, w->options_.security));
  LARDER_ASSIGN_OR_RETURN(w->auth_, Authorizer::Create(w->options_.security));
  LARDER_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> creds,
                          ServerCredentials(w->options_.security));
  std::shared_ptr<const ChannelFactory> channels;
  if (!w->options_.master.empty()) {
    LARDER_ASSIGN_OR_RETURN(channels,
                            ChannelFactory::Create(w->options_.security));
  }
  LARDER_ASSIGN_OR_RETURN(
      w->store_,
      BlockStore::Create(w->options_.store, w->mounts_.get(), &w->metrics_));
  w->rpc_executor_ =
      std::make_unique<ThreadPool>(w->options_.rpc_threads, "larder-rpc");
  w->service_ = std::make_unique<DataService>(
      w->store_.get(), &w->metrics_, w->rpc_executor_.get(), w->auth_.get(),
      w->mounts_.get(), &w->ring_version_);
  w->staging_ =
      std::make_unique<WriteStaging>(w->store_.get(), w->options_.writes);
  const int write_nice = std::clamp(w->options_.write_nice, 0, 19);
  w->upload_executor_ = std::make_unique<ThreadPool>(
      w->options_.upload_threads, "larder-upload", write_nice);
  // Each message is a copy of at most a few MiB: a few threads keep up with
  // many writers.
  w->intake_executor_ = std::make_unique<ThreadPool>(
      std::max(2, w->options_.upload_threads / 4), "larder-intake", write_nice);
  DataService::CommittedLookup committed;
  if (!w->options_.master.empty()) {
    // The workers that writes may send blocks to: the master's ring.
    LARDER_ASSIGN_OR_RETURN(
        std::shared_ptr<MasterConnection> master,
        MasterConnection::Create(w->options_.master, channels));
    committed =
        [master](
            const std::string& write_id) -> absl::StatusOr<v1::CommittedWrite> {
      v1::GetCommittedWriteRequest req;
      req.set_write_id(write_id);
      v1::CommittedWrite resp;
      LARDER_RETURN_IF_ERROR(
          FromGrpcStatus(master->Call(&v1::Master::Stub::GetCommittedWrite, req,
                                      &resp, absl::Seconds(10))));
      return resp;
    };
    w->peers_ = std::make_unique<PeerSet>(
        [master]() -> absl::StatusOr<v1::Ring> {
          v1::Ring ring;
          LARDER_RETURN_IF_ERROR(FromGrpcStatus(
              master->Call(&v1::Master::Stub::GetRing, v1::GetRingRequest(),
                           &ring, absl::Seconds(5))));
          return ring;
        },
        &w->ring_version_);
  }
  w->service_->EnableWrites(w->staging_.get(), w->upload_executor_.get(),
                            w->intake_executor_.get(), channels,
                            w->peers_.get(), std::move(committed));

  grpc::ServerBuilder builder;
  builder.AddListeningPort(w->options_.listen, creds, &w->grpc_port_);
  builder.RegisterService(w->service_.get());
  // Requests are small (a block reference, 16 per CacheBlocks); gRPC reads
  // one whole before the role check, so the bound is what an anonymous
  // caller can make the worker hold per call.
  builder.SetMaxReceiveMessageSize(4 << 20);
  builder.SetMaxSendMessageSize(16 << 20);
  // Block data moves in 1 MiB messages: large HTTP/2 frames cut per-frame work.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 1 << 20);
  w->server_ = builder.BuildAndStart();
  if (!w->server_ || w->grpc_port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve gRPC on ", w->options_.listen));
  }
  if (!w->options_.master.empty()) {
    LARDER_ASSIGN_OR_RETURN(
        w->metadata_,
        MetadataService::Create({.master = w->options_.master,
                                 .channels = channels,
                                 .cache = w->options_.metadata_cache},
                                w->mounts_.get(), &w->metrics_));
  }
  if (!w->options_.short_circuit_socket.empty()) {
    LARDER_ASSIGN_OR_RETURN(
        w->short_circuit_,
        ShortCircuitServer::Start(
            {.socket_path = w->options_.short_circuit_socket,
             .allowed_uids = w->options_.short_circuit_allowed_uids,
             .allowed_gids = w->options_.short_circuit_allowed_gids},
            w->store_.get(), w->mounts_.get(), &w->metrics_,
            w->metadata_.get()));
  }
  if (!w->options_.ops_listen.empty()) {
    OpsServer::Options ops;
    ops.listen = w->options_.ops_listen;
    ops.registry = w->metrics_.registry();
    BlockStore* store = w->store_.get();
    ops.before_scrape = [store] { store->UpdateGauges(); };
    LARDER_ASSIGN_OR_RETURN(w->ops_, OpsServer::Start(std::move(ops)));
  }
  if (!w->options_.master.empty()) {
    char host[256] = {0};
    ::gethostname(host, sizeof(host) - 1);
    const std::string node = w->options_.node.empty() ? host : w->options_.node;
    std::string advertise = w->options_.advertise;
    if (advertise.empty()) {
      advertise = absl::StrCat(
          w->options_.listen.substr(0, w->options_.listen.rfind(':')), ":",
          w->grpc_port_);
    }
    MasterLink::Options link;
    link.master = w->options_.master;
    link.self.set_id(w->options_.id.empty()
                         ? absl::StrCat(node, ":", w->grpc_port_)
                         : w->options_.id);
    link.self.set_address(advertise);
    link.self.set_short_circuit_socket(w->options_.short_circuit_socket);
    link.self.set_node(node);
    uint64_t capacity = w->options_.store.ram_capacity_bytes;
    if (w->options_.store.nvme) {
      for (const auto& d : w->options_.store.nvme->dirs)
        capacity += d.capacity_bytes;
    }
    link.self.set_capacity_bytes(capacity);
    link.store_options = w->options_.store_options;
    link.ring_version = &w->ring_version_;
    link.channels = channels;
    link.on_invalidations = [m = w->metadata_.get()](uint64_t epoch,
                                                     uint64_t seq) {
      m->Follow(epoch, seq);
    };
    LARDER_ASSIGN_OR_RETURN(
        w->master_link_,
        MasterLink::Start(std::move(link), w->store_.get(), w->mounts_.get()));
  }
  LARDER_LOG(INFO, "worker.started")
      .Field("grpc", absl::StrCat(w->options_.listen.substr(
                                      0, w->options_.listen.rfind(':')),
                                  ":", w->grpc_port_))
      .Field("short_circuit", w->options_.short_circuit_socket)
      .Field("ops_port", w->ops_port())
      .Field("ram", w->options_.store.ram_capacity_bytes)
      .Field("tls", !w->options_.security.tls_cert_file.empty())
      .Field("authentication", w->auth_->enabled())
      .Field("mounts", w->mounts_->List().size());
  return w;
}

Worker::~Worker() { Shutdown(); }

void Worker::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  LARDER_LOG(INFO, "worker.stopping");
  master_link_.reset();  // Stop heartbeating first: the master drops us after
                         // its timeout.
  if (server_)
    server_->Shutdown(std::chrono::system_clock::now() +
                      absl::ToChronoSeconds(options_.shutdown_grace));
  if (short_circuit_) short_circuit_->Stop();
  rpc_executor_.reset();
  upload_executor_.reset();
  intake_executor_.reset();
  if (store_) store_->Shutdown();
  ops_.reset();
  LARDER_LOG(INFO, "worker.stopped");
}

}  // namespace larder
