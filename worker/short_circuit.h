// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: short_circuit.h
// -----------------------------------------------------------------------------
//
// Short-circuit local reads: a Unix socket on which a client on the same node
// asks for a block and receives the block's sealed memfd (SCM_RIGHTS) with the
// offset and length of its bytes, then reads it with pread or mmap — no copy
// through a socket. Protocol: ShortCircuitRequest/Response in
// proto/worker.proto, framed by common/fd_socket.h.
//
// Leases: an OPEN leases the block in the RAM tier, so it is not evicted
// while the client reads it; RELEASE (or closing the connection) gives the
// lease back, and it expires by itself after its duration (capped at
// `max_lease`). Memory safety does not depend on the lease: the client's
// descriptor keeps the sealed pages alive even if the block is evicted.
//
// EXPORT lends a whole object cached in RAM as one read-only memfd (the
// local FUSE daemon hands it to the kernel: passthrough reads), leasing
// every block of it, like OPEN, until RELEASE, the connection closes or the
// lease runs out (the fd stays valid after that; the blocks become
// evictable).
//
// STAT answers metadata from the node's metadata cache (MetadataService),
// when the worker has one.
//
// Every block is lent only to a caller who may read its mount, decided as
// the FUSE view decides it (MayReadMount). One thread per connection
// (clients keep one connection per process or per loader thread), at most
// max_connections of them. Thread-safe; Stop() closes the socket and every
// connection.
#ifndef LARDER_WORKER_SHORT_CIRCUIT_H_
#define LARDER_WORKER_SHORT_CIRCUIT_H_

#include <sys/socket.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "common/security.h"
#include "proto/worker.pb.h"
#include "worker/block_store.h"
#include "worker/metadata_service.h"
#include "worker/worker_mounts.h"

namespace larder {

class ShortCircuitServer {
 public:
  struct Options {
    std::string socket_path;
    absl::Duration max_lease = absl::Seconds(60);
    // Time allowed for a miss to be fetched before OPEN fails. Default 5 min.
    absl::Duration open_timeout = absl::Minutes(5);
    // Who may connect, checked with SO_PEERCRED: root, this process's own
    // uid, the uids listed, and members (by primary or supplementary group)
    // of the gids listed; empty gids = this process's group. A refused peer
    // gets one PERMISSION_DENIED frame and reads over gRPC instead.
    std::vector<uint32_t> allowed_uids;
    std::vector<uint32_t> allowed_gids;
    // The socket file's mode; its group is the first allowed gid.
    int socket_mode = 0660;
    // Connections served at once (a thread each); more are refused with
    // RESOURCE_EXHAUSTED and read over gRPC. Default 1024.
    int max_connections = 1024;
  };

  // Errors: Unavailable (cannot bind), InvalidArgument (path too long).
  // Blocks are lent only to callers who may read their mount (MayReadMount
  // with the peer's SO_PEERCRED/SO_PEERGROUPS and the mount's owner, group
  // and mode from `mounts`); others get PERMISSION_DENIED for that block.
  // `store`, `mounts`, `metrics` and `metadata` (null: STAT is left to the
  // master) must outlive the server.
  static absl::StatusOr<std::unique_ptr<ShortCircuitServer>> Start(
      Options options, BlockStore* store, const WorkerMounts* mounts,
      WorkerMetrics* metrics, MetadataService* metadata = nullptr);
  ~ShortCircuitServer();
  void Stop();

 private:
  ShortCircuitServer(Options options, BlockStore* store,
                     const WorkerMounts* mounts, WorkerMetrics* metrics,
                     MetadataService* metadata)
      : options_(std::move(options)),
        store_(store),
        mounts_(mounts),
        metrics_(metrics),
        metadata_(metadata) {}
  // Answers a STAT request into `resp`.
  void Stat(const Caller& peer, const v1::ShortCircuitRequest& req,
            v1::ShortCircuitResponse* resp);
  // Answers a LIST request into `resp`.
  void List(const Caller& peer, const v1::ShortCircuitRequest& req,
            v1::ShortCircuitResponse* resp);
  void AcceptLoop();
  // Whether `peer` may use the socket at all.
  bool PeerAllowed(const PeerCredentials& peer) const;
  // OK if `peer` may read the mount of `id`; else PermissionDenied (or the
  // mount table's NotFound).
  absl::Status MayRead(const Caller& peer, const BlockId& id) const;
  // A request's lease: lease_ms (0 = 30 s), at most max_lease.
  // An EXPORT's until-released lease (kLeaseUntilReleased) only for a peer
  // running as root: InfiniteDuration.
  absl::Duration LeaseDuration(const v1::ShortCircuitRequest& req,
                               const Caller& peer) const;
  // Refuses `conn` with one frame of `code` and closes it.
  static void Refuse(int conn, absl::StatusCode code, std::string message);
  void Serve(int conn, PeerCredentials peer);

  const Options options_;
  BlockStore* const store_;
  const WorkerMounts* const mounts_;
  WorkerMetrics* const metrics_;
  MetadataService* const metadata_;
  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  absl::Mutex mu_;
  absl::flat_hash_set<int> connections_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> allowed_gids_;  // Resolved at Start.
  absl::Mutex refused_mu_;
  absl::flat_hash_set<uint32_t> refused_uids_ ABSL_GUARDED_BY(refused_mu_);
  int active_ ABSL_GUARDED_BY(mu_) = 0;  // Handler threads running (detached).
  absl::Time last_busy_log_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace larder

#endif  // LARDER_WORKER_SHORT_CIRCUIT_H_
