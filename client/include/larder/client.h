// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: larder/client.h
// -----------------------------------------------------------------------------
//
// The Larder client library: what data loaders link to read datasets through
// the cluster's cache.
//
// A Client talks to the master for metadata (Stat, List) and the ring, and
// reads blocks from the workers that own them: every client maps a block to
// the same worker, so each byte is fetched from the object store once per
// cluster. A block owned by a worker on this node is read by short-circuit
// (its memory is handed over as a file descriptor); others stream over gRPC.
//
// Failover: if the owner is down or times out, the next workers on the ring
// are tried, then (by default) the under-store itself. A read never fails
// because one worker died, and never returns bytes of another object version:
// a File is pinned to the version seen at Open, and a changed object fails
// with FailedPrecondition.
//
// Thread-safe: use one Client per process, shared by every loader thread.
// Memory is bounded: the library holds no data beyond the caller's buffers
// and the ByteViews the caller keeps.
//
// Usage:
//
//   larder::ClientOptions options;
//   options.master = "larder-master:7060";
//   auto client = larder::Client::Connect(options);   // absl::StatusOr
//   auto file = (*client)->Open("/datasets/imagenet/train/n01440764/x.JPEG");
//   std::vector<char> buf((*file)->info().size);
//   auto n = (*file)->Read(0, absl::MakeSpan(buf));
//
// Errors (absl::StatusCode): NotFound (no such path, no mount), Unavailable
// (master unreachable; or every worker and the under-store failed),
// FailedPrecondition (the object changed since Open), PermissionDenied (the
// credential's role does not allow it), Unauthenticated (no or a wrong
// credential), InvalidArgument, DeadlineExceeded.
#ifndef LARDER_CLIENT_INCLUDE_LARDER_CLIENT_H_
#define LARDER_CLIENT_INCLUDE_LARDER_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/config.h"

namespace larder {

// What a client knows that another client of the same process can start
// with (Client::WarmState, ClientOptions::warm_start). Opaque.
struct ClientWarmState;

struct ClientOptions {
  // The master, host:port, or the masters of an HA cluster
  // ("a:7060,b:7060,c:7060": calls follow the leader). Default
  // 127.0.0.1:7060.
  std::string master = "127.0.0.1:7060";
  // This process's node; blocks owned by a worker with the same node name
  // are read by short-circuit. Default: the host name.
  std::string node;
  // Blocks a sequential reader asks the owners to fetch ahead. Default 16
  // (64 MiB of 4 MiB blocks): a cold shard through a store that gives each
  // connection 80 MB/s after 25 ms reads at 73% of what the store gives
  // with 8, 85-87% with 16 (bench/cold_read_bench.py --rows shard).
  int readahead_blocks = 16;
  // Workers tried for a block (owner first) before the fallback. Default 3.
  int max_workers_per_block = 3;
  // Read the under-store directly when every worker failed. Default true.
  bool under_store_fallback = true;
  // The directories a file:// mount must lie in for that direct read.
  // Unset (the default): any directory; the process reads with its own
  // permissions, for itself, as `cat` would. A process that serves others
  // (the FUSE daemon, which runs as root) sets it: it must not read whatever
  // directory a mount table names; empty: no direct file:// read.
  std::optional<std::vector<std::string>> fallback_file_roots;
  // How that direct read talks to S3, Azure and WebHDFS: timeouts, retries,
  // the CA bundle, TLS verification. Default: HttpOptions's defaults.
  HttpOptions fallback_http;
  // Limit on one block read from a worker. Default 60 s.
  absl::Duration worker_timeout = absl::Seconds(60);
  // How often the ring is refreshed from the master (it is also refreshed
  // whenever a worker fails). Default 5 s.
  absl::Duration ring_refresh = absl::Seconds(5);
  // Block reads run in parallel for one large Read. Default 8.
  int parallel_reads = 8;
  // Parts of one Writer in flight at once (each a part's bytes in memory:
  // 8 parts of 8 MiB by default, so 64 MiB a writer). Default 8.
  int parallel_writes = 8;

  // The node's metadata cache (Stat results, negative entries and whole
  // directory listings, each kept for its mount's metadata TTL): most
  // entries and bytes held, least recently used dropped first. Defaults
  // 1,000,000 entries, 256 MiB. A directory larger than a quarter of the
  // bytes is never cached whole (ListDir says ResourceExhausted).
  static constexpr size_t kDefaultMetadataCacheEntries = 1000000;
  static constexpr size_t kDefaultMetadataCacheBytes = size_t{256} << 20;
  size_t metadata_cache_entries = kDefaultMetadataCacheEntries;
  size_t metadata_cache_bytes = kDefaultMetadataCacheBytes;
  // Stale-if-error: when an entry's TTL has run out and the master (or its
  // under-store) cannot be reached, the expired entry is served for up to
  // this long past its TTL, logged once per path and counted. Versions
  // still pin bytes: a read never mixes two versions of an object. 0: off.
  // Default 1 h.
  absl::Duration metadata_stale_window = absl::Hours(1);

  // Start from what another client of this process knew
  // (Client::WarmState): its ring, mount table and metadata cache (shared,
  // not copied), so the new client sends the master nothing at Connect and
  // refreshes the ring when ring_refresh has passed since the other learnt
  // it. For a process that drops its client around fork() and connects
  // again in the parent and the child (the Python module does): each starts
  // warm, and a DataLoader worker forked from a warm process asks the master
  // nothing about the files its parent looked up. Ignored when it names
  // other masters.
  std::shared_ptr<const ClientWarmState> warm_start;

  // TLS and the bearer token for the master and the workers (the client
  // fields of SecurityOptions: tls_ca_file turns TLS on; tls_cert_file and
  // tls_key_file are the client certificate; token_file, else $LARDER_TOKEN
  // or $LARDER_TOKEN_FILE, the token). Default: plain, no token.
  SecurityOptions security;
};

struct FileInfo {
  std::string path;  // Cluster path.
  bool is_dir = false;
  uint64_t size = 0;
  std::string version;
  absl::Time mtime = absl::UnixEpoch();
  // What the mount presents (MountEntry uid/gid/mode): unset ids = the
  // reading process's own; mode 0 = 0444. own_mode: the file's own owner,
  // group and mode (a file:// mount that sets none), mode 0 included.
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
  uint32_t mode = 0;
  bool own_mode = false;
  // The mount takes writes (larder mount --writable): see Client::Create.
  bool writable = false;
};

struct ListResult {
  std::vector<FileInfo> entries;
  std::string next_page_token;  // Empty on the last page.
};

// Where block reads were served from (since the client started).
struct ClientStats {
  uint64_t blocks_short_circuit = 0;
  uint64_t blocks_grpc = 0;
  uint64_t blocks_under_store = 0;  // Fallback reads.
  uint64_t failovers = 0;  // A worker failed and the next one was tried.
  uint64_t ring_refreshes = 0;
  // The process's metadata cache: lookups answered from it, answered by
  // the node metadata cache (the local worker's, shared by every process on
  // the node), sent to the master, answered from an expired entry because
  // the master or under-store could not be reached; entries and bytes held;
  // dropped by the bounds; dropped by invalidations (`larder invalidate`,
  // mount changes, a new master).
  uint64_t metadata_hits = 0;
  uint64_t metadata_node_hits = 0;
  uint64_t metadata_misses = 0;
  uint64_t metadata_stale_served = 0;
  uint64_t metadata_entries = 0;
  uint64_t metadata_bytes = 0;
  uint64_t metadata_evictions = 0;
  uint64_t metadata_invalidated = 0;
};

// Bytes cached by a worker on this node, lent for zero-copy use:
// [offset, offset + length) of the file descriptor fd (a sealed memfd or a
// block file; never changes). `hold` keeps fd open; drop it when done.
struct LocalSlice {
  int fd = -1;
  uint64_t offset = 0;
  uint64_t length = 0;
  std::shared_ptr<const void> hold;
};

// The bytes of a read lent without a copy: `pieces`, in order, lie in memory
// the library holds until the view is dropped (gRPC's receive buffers for
// blocks streamed from a worker on another node; a buffer of its own for
// blocks read by short-circuit or from the under-store). Read-only.
struct ByteView {
  std::vector<absl::Span<const char>> pieces;
  std::vector<std::shared_ptr<const void>> holds;

  uint64_t size() const;
  // Copies the pieces out, in order (for callers that need one buffer).
  std::string ToString() const;
  // Moves `other`'s pieces to the end of this view.
  void Append(ByteView other);
};

// One piece of a read, decided once per block: bytes cached by the worker
// on this node, lent as a range of its file descriptor (`local.fd` >= 0, for
// consumers that splice: the FUSE adaptor), or bytes lent in memory (`view`:
// streamed from a worker on another node, or read after a failover).
struct ReadPiece {
  LocalSlice local;
  ByteView view;

  bool is_local() const { return local.fd >= 0; }
  uint64_t size() const { return is_local() ? local.length : view.size(); }
};

class Client;

// The whole files of one batch, held where they lie until copied out: the
// blocks of the worker on this node as leases of its memory (taken in one
// exchange per worker), blocks of other workers as the gRPC buffers they
// arrived in (fetched in parallel). A consumer that copies a file out and
// then uses it (a decoder) finds it still in the CPU's cache, which a batch
// copied out whole first would have pushed out (perf on a 2-core VM: a
// 100 KiB copy cost about 15 us that way, against 10 us for the page
// cache's copy into one reused buffer). The memory stays held until the
// batch is destroyed.
// ReadInto may be called from several threads at once.
class FileBatch {
 public:
  virtual ~FileBatch() = default;
  virtual size_t size() const = 0;
  // Copies all of file i into `out` (exactly the file's size). A block
  // whose lease was refused is read now, with failover. Errors: as
  // File::Read; InvalidArgument (a buffer of the wrong size, a file opened
  // by another client); OutOfRange (no file i).
  virtual absl::Status ReadInto(size_t i, absl::Span<char> out) = 0;
};

// An open file, pinned to the version it had at Open. Thread-safe.
class File {
 public:
  virtual ~File() = default;
  virtual const FileInfo& info() const = 0;
  // Reads up to out.size() bytes from `offset`; fewer only at the end of the
  // file. Errors: see the file comment.
  virtual absl::StatusOr<size_t> Read(uint64_t offset,
                                      absl::Span<char> out) = 0;
  // Read without the copy into a caller's buffer: the bytes of
  // Read(offset, length) as a view (empty at the end of the file). Blocks
  // that come over gRPC are lent from the buffers the socket was read into,
  // so a consumer that can take pieces (a writev, the FUSE adaptor's reply)
  // touches each byte once less. Same routing, failover and errors as Read.
  virtual absl::StatusOr<ByteView> ReadView(uint64_t offset,
                                            uint64_t length) = 0;
  // Zero-copy Read for consumers that take pieces: the bytes of
  // Read(offset, length) (none at the end of the file), each block as a
  // local slice when the worker on this node serves it, else as a view
  // (gRPC's buffers, with the same failover as Read). One call decides
  // where each block comes from; the consumer builds one reply from the
  // pieces, in order.
  virtual absl::StatusOr<std::vector<ReadPiece>> ReadPieces(
      uint64_t offset, uint64_t length) = 0;
  // The whole file as one descriptor lent by the worker on this node:
  // [0, size) of fd, a read-only memfd whose bytes never change; the
  // worker keeps every block of the file in RAM until `hold` is dropped (a
  // process running as root, as the FUSE daemon does; for others, at most
  // the worker's lease limit, 60 s, after which the fd stays valid but the
  // worker may count the blocks as freed).
  // For FUSE passthrough (the kernel reads the fd itself). FailedPrecondition
  // when the worker does not hold every block in RAM, or keeps the object block
  // by block (larger than its --object_file_max_size), or when a block's owner
  // is not on this node.
  virtual absl::StatusOr<LocalSlice> OpenLocalObject() = 0;
};

struct WriteOptions {
  // Replace an object that is at the path (default: AlreadyExists).
  bool overwrite = false;
  // About how many bytes will be written (0: unknown): picks the part
  // size, so that large objects need fewer parts.
  uint64_t size_hint = 0;
};

// A new object being written (Client::Create): sequential Writes, then
// Close, which makes the object appear whole under its final version, or
// Abort, after which nothing appears. Parts go to the workers in parallel
// (ClientOptions::parallel_writes) while the caller writes on; each worker
// uploads its parts to the under-store and keeps their blocks, so the
// object is in the cache when Close returns. Destroying a Writer that was
// neither closed nor aborted aborts it. Not thread-safe.
class Writer {
 public:
  virtual ~Writer() = default;
  // Appends `data`. Waits while parallel_writes parts are in flight. An
  // error (a part that no worker could upload) is final: Close fails too.
  virtual absl::Status Write(absl::string_view data) = 0;
  // Uploads the rest and commits. Errors: those of Write; AlreadyExists
  // (someone created the path meanwhile, without overwrite);
  // FailedPrecondition (the master no longer knows the write: it was older
  // than the master's --write_max_age, or the master restarted); the
  // under-store's. After an error nothing is visible.
  virtual absl::StatusOr<FileInfo> Close() = 0;
  // Drops everything written; nothing appears. Idempotent.
  virtual absl::Status Abort() = 0;
  // Bytes written so far.
  virtual uint64_t size() const = 0;
  virtual const std::string& path() const = 0;
};

class Client {
 public:
  // Connects and fetches the ring and mount table. Errors: Unavailable (the
  // master cannot be reached), InvalidArgument.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(ClientOptions options);
  virtual ~Client() = default;

  // Metadata comes from the node's metadata cache while fresh (see
  // ClientOptions); misses ask the master. Errors: NotFound, Unavailable
  // (master unreachable and nothing cached within the stale window),
  // InvalidArgument.
  virtual absl::StatusOr<FileInfo> Stat(absl::string_view path) = 0;
  // Stat's answer if this process's metadata cache holds it fresh (found,
  // or NotFound); else none, and nobody asked: for a caller that must not
  // wait on the network.
  virtual std::optional<absl::StatusOr<FileInfo>> CachedStat(
      absl::string_view path) = 0;
  // A whole directory, sorted by path, from the metadata cache when fresh,
  // else listed from the master page by page and cached ("/" lists the
  // mounts). Stats of its entries are then answered from it. Errors: as
  // Stat, and ResourceExhausted for a directory too large to cache (page it
  // with List).
  virtual absl::StatusOr<std::shared_ptr<const std::vector<FileInfo>>> ListDir(
      absl::string_view path) = 0;
  // Whether the cluster's mount table, as this client last polled it (every
  // ring_refresh), has a mount that takes writes (`larder mount
  // --writable`).
  virtual bool AnyWritableMount() const = 0;
  // ListDir's answer if the metadata cache holds it fresh; else null (and
  // nothing asked of the master).
  virtual std::shared_ptr<const std::vector<FileInfo>> CachedListDir(
      absl::string_view path) = 0;
  // One page of a directory ("/" lists the mounts).
  virtual absl::StatusOr<ListResult> List(absl::string_view path,
                                          absl::string_view page_token = "",
                                          int page_size = 1000,
                                          bool recursive = false) = 0;
  // Resolves the path like Stat (no RPC when its metadata is cached).
  virtual absl::StatusOr<std::unique_ptr<File>> Open(
      absl::string_view path) = 0;
  // Opens a file that the caller has already listed (a dataset built from a
  // listing), from `info`'s path, size and version, without asking the
  // master or the node's cache: the client's mount table gives its mount
  // and block size. Its bytes are read only as that version: a file changed
  // since fails its reads with FailedPrecondition, as an open File does.
  // Without a version, or in a mount this client does not know yet, it is
  // Open(info.path). Errors: InvalidArgument (a directory, a bad path).
  virtual absl::StatusOr<std::unique_ptr<File>> OpenKnown(
      const FileInfo& info) = 0;
  // Whole files for a loader that reads a batch of small files (one per
  // sample), in as few exchanges as placement allows: see FileBatch. The
  // leases are given back in one message per worker when the batch is
  // destroyed, which must be before the Client. `files` were opened by
  // this client.
  virtual std::unique_ptr<FileBatch> ReadBatch(
      absl::Span<File* const> files) = 0;
  // File::OpenLocalObject for several files at once (a FUSE daemon leasing
  // the files it expects to open): one exchange per 64 files with the
  // worker on this node, each object leased for `lease` (at most the
  // worker's limit, 60 s; InfiniteDuration, for a process running as root:
  // as long as it is held) or until its hold is dropped. One
  // result per file, in order, with OpenLocalObject's errors. `files` were
  // opened by this client.
  virtual std::vector<absl::StatusOr<LocalSlice>> OpenLocalObjects(
      absl::Span<File* const> files, absl::Duration lease) = 0;
  // ReadBatch, with every file copied into its buffer (exactly its size).
  // One status per file, in order.
  virtual std::vector<absl::Status> ReadFiles(
      absl::Span<File* const> files,
      absl::Span<const absl::Span<char>> out) = 0;
  // Asks the owners to fetch every block of these files (a loader that knows
  // its next files: a shuffled epoch order is known in advance). Returns once
  // the requests are sent.
  virtual absl::Status Prefetch(const std::vector<std::string>& paths) = 0;

  // Bytes of the file held in the cluster's cache (by the master's placement
  // index, which lags the workers by up to a heartbeat).
  virtual absl::StatusOr<uint64_t> CachedBytes(absl::string_view path) = 0;

  // Starts writing a new object at cluster path `path` (a file in a
  // writable mount; see Writer). Errors: PermissionDenied (the mount is not
  // writable, or the caller lacks the writer role), AlreadyExists (an
  // object is there and options.overwrite is false), FailedPrecondition (a
  // directory is there), NotFound (no mount), InvalidArgument.
  virtual absl::StatusOr<std::unique_ptr<Writer>> Create(
      absl::string_view path, const WriteOptions& options = {}) = 0;

  virtual ClientStats stats() const = 0;

  // Calls `hook` with every cluster path whose metadata the master
  // invalidated (`larder invalidate`, a mount change; "/" for everything,
  // after a master restart), once the node's metadata cache has dropped
  // it. For caches layered on top (the FUSE adaptor passes it on to the
  // kernel). The hook runs on whichever thread noticed the invalidation,
  // possibly inside a Stat: it must not block or call back into the
  // client.
  // A snapshot for ClientOptions::warm_start: the ring and mount table as
  // last fetched, and this client's metadata cache itself (shared).
  virtual std::shared_ptr<const ClientWarmState> WarmState() = 0;

  virtual void SetInvalidationHook(
      std::function<void(const std::string& path)> hook) = 0;
};

}  // namespace larder

#endif  // LARDER_CLIENT_INCLUDE_LARDER_CLIENT_H_
