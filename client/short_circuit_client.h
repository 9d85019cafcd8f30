// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: short_circuit_client.h
// -----------------------------------------------------------------------------
//
// The client end of short-circuit local reads (worker/short_circuit.h): asks
// the worker on this node for a block and receives its sealed memfd, then
// reads it with pread — the bytes never cross a socket.
//
// Thread-safe: requests on one connection are serialized (a one-way release
// is not held behind them); use one instance per loader thread for
// parallelism. Leases are released by Release or when the connection closes.
//
// An exchange waits at most the connection's timeout for the worker's answer
// (a worker that is stopped or hung still accepts connections and requests:
// the kernel queues them). Past it the exchange fails with DeadlineExceeded,
// the connection is broken (a late answer would be taken for the next
// request's) and every later exchange on it fails with Unavailable at once.
#ifndef LARDER_CLIENT_SHORT_CIRCUIT_CLIENT_H_
#define LARDER_CLIENT_SHORT_CIRCUIT_CLIENT_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/block_key.h"
#include "proto/larder.pb.h"
#include "proto/worker.pb.h"

namespace larder {

class ShortCircuitClient {
 public:
  // A leased block: read [offset, offset + length) of fd.
  struct Lease {
    int fd = -1;  // Owned by the caller until Release.
    uint64_t offset = 0;
    uint64_t length = 0;
    uint64_t lease_id = 0;
    std::string source;
    // As granted: the worker keeps the block in RAM for this long, unless
    // released first (InfiniteDuration: until released).
    absl::Duration lease = absl::ZeroDuration();
  };

  // How long an exchange waits for the worker's answer by default: as long
  // as a block read over gRPC may take (ClientOptions::worker_timeout). The
  // worker's own wait for a fetch it does on an OPEN's behalf is longer; a
  // client that gives up first leaves the fetch to fill the cache.
  static constexpr absl::Duration kDefaultTimeout = absl::Seconds(60);

  // `on_silence` (may be empty) is called, on the caller's thread, when an
  // exchange got no answer within `timeout`.
  // Errors: Unavailable (no worker socket at `path`), PermissionDenied (the
  // socket's server runs neither as root nor as this process's user),
  // InvalidArgument (a timeout below 1 ms).
  static absl::StatusOr<std::unique_ptr<ShortCircuitClient>> Connect(
      const std::string& path, absl::Duration timeout = kDefaultTimeout,
      std::function<void()> on_silence = nullptr);
  ~ShortCircuitClient();

  // Errors: the worker's (as for ReadBlock), Unavailable (worker gone, or
  // the connection broken), DeadlineExceeded (no answer within the timeout).
  // The same for every call that waits for an answer (OpenBatch, OpenObject,
  // OpenObjects, Stat).
  absl::StatusOr<Lease> Open(const BlockId& id,
                             absl::Duration lease = absl::Seconds(30));
  // Opens several blocks in one exchange per 64 blocks (one request, one
  // response carrying every descriptor), so a sequential reader with
  // readahead pays one round trip per batch instead of one per block. Misses
  // of a batch are fetched in parallel by the worker. Results are in the
  // order of `ids`.
  std::vector<absl::StatusOr<Lease>> OpenBatch(
      const std::vector<BlockId>& ids,
      absl::Duration lease = absl::Seconds(30));

  // The whole object `id` belongs to, as one read-only memfd of the
  // object's length (offset 0), with every block leased until Release or
  // until this connection closes: for FUSE passthrough. Errors:
  // FailedPrecondition (not every block is in the worker's RAM, or the
  // worker keeps the object block by block), Unavailable (worker gone).
  absl::StatusOr<Lease> OpenObject(const BlockId& id);
  // OpenObject for several objects (each named by one of its blocks), in
  // one exchange per 64, leased for `lease`. Results are in the order of
  // `ids`.
  std::vector<absl::StatusOr<Lease>> OpenObjects(
      const std::vector<BlockId>& ids, absl::Duration lease);

  // The answer of the node metadata cache (the worker's) about cluster
  // path `path`: `status` OK with `response`, or NotFound (an answer too),
  // fresh for `ttl`.
  struct StatAnswer {
    absl::Status status;
    v1::StatResponse response;
    absl::Duration ttl;
  };
  // Asks the node metadata cache, telling it the invalidations this process
  // has heard of (epoch, seq). Errors: FailedPrecondition (the worker does
  // not answer for this path or caller: ask the master), Unimplemented (a
  // worker from before STAT), Unavailable (worker gone), the master's (the
  // worker asked it).
  absl::StatusOr<StatAnswer> Stat(const std::string& path, uint64_t epoch,
                                  uint64_t seq);
  // A page of the master's List, for this process by its uid and groups
  // (LIST). Errors: FailedPrecondition (not answered: the master's refusal
  // stands), InvalidArgument (also a worker from before LIST), Unavailable,
  // the master's.
  absl::StatusOr<v1::ListResponse> List(const v1::ListRequest& request);

  // Closes the fds and gives the leases back (one message, no reply).
  absl::Status Release(Lease& lease);
  absl::Status ReleaseBatch(std::vector<Lease>& leases);

  // Reads up to buffer.size() bytes of a leased block from `offset` (within
  // the block). Thread-safe for one lease.
  static absl::StatusOr<size_t> ReadLease(const Lease& lease, uint64_t offset,
                                          absl::Span<char> buffer);

  // Open + ReadLease + Release: reads up to buffer.size() bytes of the block
  // from `offset` (within the block).
  absl::StatusOr<size_t> Read(const BlockId& id, uint64_t offset,
                              absl::Span<char> buffer,
                              std::string* source = nullptr);

 private:
  ShortCircuitClient(int sock, std::function<void()> on_silence)
      : sock_(sock), on_silence_(std::move(on_silence)) {}
  // Sends `req` and receives its answer's frame and descriptors (owned by
  // the caller, on failure too). Errors: Unavailable (the worker is gone, or
  // this connection broke before), DeadlineExceeded (no answer in time: the
  // connection is broken from now on).
  absl::Status Exchange(const v1::ShortCircuitRequest& req, std::string* frame,
                        std::vector<int>* fds)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OpenBatch (or OpenObjects, `whole_object`): one exchange per
  // kMaxFramesFds.
  std::vector<absl::StatusOr<Lease>> OpenChunks(const std::vector<BlockId>& ids,
                                                absl::Duration lease,
                                                bool whole_object)
      ABSL_LOCKS_EXCLUDED(mu_);
  // One OPEN exchange for at most kMaxFramesFds blocks, appended to `out`.
  void OpenChunk(const BlockId* ids, size_t n, absl::Duration lease,
                 std::vector<absl::StatusOr<Lease>>* out,
                 bool whole_object = false) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Internal unless the granted range lies within its descriptor's file and
  // (when `asked` is given) is as long as the block asked for, or as its
  // object for a `whole_object` grant: a worker's grant is checked before a
  // byte is mapped or read through it.
  static absl::Status CheckGrant(const Lease& lease, const BlockId* asked,
                                 bool whole_object = false);
  // Sends one frame whole (a RELEASE may go out while another thread waits
  // for an answer on the connection: it has none, and the worker reads it
  // after the request before it).
  absl::Status Send(const std::string& frame) ABSL_LOCKS_EXCLUDED(send_mu_);

  const int sock_;
  const std::function<void()> on_silence_;
  // An exchange failed midway (no answer in time, a failed send or
  // receive, an answer that does not match): the stream may be out of step,
  // so nothing more is asked on it.
  std::atomic<bool> broken_{false};
  // Marks the connection broken and shuts the socket down, so the worker
  // lets go of every lease granted on it now, not when the last of them is
  // dropped here (a FUSE daemon may hold one for days).
  void Break();
  // One request awaiting its answer at a time (held across the exchange).
  absl::Mutex mu_ ABSL_ACQUIRED_BEFORE(send_mu_);
  // Frames written whole: a one-way RELEASE takes only this one, so the
  // release of a lease never waits behind an OPEN whose block the worker
  // is fetching from the store.
  absl::Mutex send_mu_;
  std::atomic<bool> refused_{false};
  std::atomic<bool> busy_{false};
  // The worker answered a batched EXPORT as one from before batches did:
  // one object per exchange on this connection from then on.
  bool no_batch_export_ ABSL_GUARDED_BY(mu_) = false;

 public:
  // Whether the worker refused this process (its uid/gid is not allowed on
  // the socket): read that worker over gRPC instead.
  bool refused() const { return refused_.load(std::memory_order_relaxed); }
  // Whether the worker refused this connection as one too many (it serves
  // at most 1,024 at once): it is well, read it over gRPC.
  bool busy() const { return busy_.load(std::memory_order_relaxed); }
  // Whether an exchange failed midway: the connection carries no more
  // requests (LocalLeases does not pool it).
  bool broken() const { return broken_.load(std::memory_order_relaxed); }
};

}  // namespace larder

#endif  // LARDER_CLIENT_SHORT_CIRCUIT_CLIENT_H_
