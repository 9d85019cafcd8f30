// Copyright 2026 The Larder Authors.
#include "client/block_reader.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "client/short_circuit_client.h"
#include "common/status_macros.h"

namespace larder {

BlockReader::BlockReader(Options options, Router& router, LocalLeases& local,
                         Hooks hooks)
    : options_(std::move(options)),
      router_(router),
      local_(local),
      hooks_(std::move(hooks)),
      fallback_stores_(options_.fallback) {}

BlockReader::Counters BlockReader::counters() const {
  return {sc_blocks_.load(), grpc_blocks_.load(), under_store_blocks_.load(),
          failovers_.load()};
}

absl::Status BlockReader::Read(const BlockId& id, uint64_t offset,
                               absl::Span<char> out) {
  return Failover(
      id, out.size(),
      [&](const Router::Candidate& c) {
        return FromWorker(c, id, offset, out);
      },
      [&] { return FromUnderStore(id, offset, out); });
}

absl::StatusOr<ByteView> BlockReader::View(const BlockId& id, uint64_t offset,
                                           uint64_t length) {
  ByteView view;
  auto into_buffer = [&] {
    std::shared_ptr<char[]> buf(new char[length]);
    view = ByteView{{absl::Span<const char>(buf.get(), length)}, {buf}};
    return absl::Span<char>(buf.get(), length);
  };
  LARDER_RETURN_IF_ERROR(Failover(
      id, length,
      [&](const Router::Candidate& c) -> absl::StatusOr<size_t> {
        if (c.local) return FromWorker(c, id, offset, into_buffer());
        uint64_t ring = 0;
        absl::StatusOr<ByteView> v = c.client->ReadBlockView(
            id, offset, length, options_.worker_timeout, nullptr, &ring);
        hooks_.note_ring_version(ring);
        if (!v.ok()) return v.status();
        ++grpc_blocks_;
        view = *std::move(v);
        return view.size();
      },
      [&] { return FromUnderStore(id, offset, into_buffer()); }));
  return view;
}

absl::StatusOr<ReadPiece> BlockReader::Piece(const BlockId& id, uint64_t offset,
                                             uint64_t length) {
  auto slice = [&](std::shared_ptr<LocalLeases::Lease> lease)
      -> absl::StatusOr<ReadPiece> {
    if (lease->lease.length < offset + length)
      return absl::InternalError("short block from the local worker");
    ++sc_blocks_;
    ReadPiece piece;
    piece.local =
        LocalSlice{lease->lease.fd, lease->lease.offset + offset, length,
                   std::shared_ptr<const void>(lease, lease.get())};
    return piece;
  };
  Router::Route owners = router_.Owners(id, 1);
  if (!owners.empty() && owners.front().local) {
    if (std::shared_ptr<LocalLeases::Lease> kept =
            local_.Find(owners.front().worker->short_circuit_socket(), id))
      return slice(std::move(kept));
  }
  const Router::Route route = router_.Order(id, std::move(owners));
  if (!route.empty() && route.front().local) {
    absl::StatusOr<std::shared_ptr<LocalLeases::Lease>> lease =
        local_.From(route.front().worker->short_circuit_socket(), id);
    if (lease.ok() && *lease) return slice(*std::move(lease));
    if (!lease.ok()) {
      if (!WorkerFailure(lease.status())) return lease.status();
      router_.MarkSuspect(route.front(), lease.status());  // Fail over below.
    }
  }
  ReadPiece piece;
  LARDER_ASSIGN_OR_RETURN(piece.view, View(id, offset, length));
  return piece;
}

absl::StatusOr<std::string> BlockReader::LocalOwner(const BlockId& first) {
  std::string socket;
  BlockId id = first;
  const uint64_t blocks = BlockCount(first.object_size, first.block_size);
  for (id.index = 0; id.index < blocks; ++id.index) {
    const Router::Route owners = router_.Owners(id, 1);
    if (owners.empty() || !owners.front().local ||
        (!socket.empty() &&
         owners.front().worker->short_circuit_socket() != socket))
      return absl::FailedPreconditionError(
          "the file's blocks are not all owned by the worker on this node");
    socket = owners.front().worker->short_circuit_socket();
  }
  if (socket.empty())
    return absl::FailedPreconditionError("an empty file has no memfd");
  return socket;
}

std::vector<absl::StatusOr<LocalSlice>> BlockReader::ObjectSlices(
    const std::string& socket, const std::vector<BlockId>& firsts,
    absl::Duration lease) {
  std::vector<absl::StatusOr<LocalSlice>> out;
  out.reserve(firsts.size());
  absl::StatusOr<std::shared_ptr<ShortCircuitClient>> sc = local_.Take(socket);
  if (!sc.ok()) {
    out.assign(firsts.size(), sc.status());
    return out;
  }
  std::vector<absl::StatusOr<ShortCircuitClient::Lease>> leases =
      (*sc)->OpenObjects(firsts, lease);
  bool healthy = true;
  for (absl::StatusOr<ShortCircuitClient::Lease>& l : leases) {
    if (!l.ok()) {
      if ((*sc)->refused()) {
        local_.NoteRefused(socket, l.status());
        out.push_back(absl::FailedPreconditionError(
            "the worker on this node refused short-circuit to this process"));
        healthy = false;
        continue;
      }
      if (WorkerFailure(l.status())) healthy = false;
      out.push_back(l.status());
      continue;
    }
    auto held = std::make_shared<LocalLeases::Lease>(*sc, *l);
    out.push_back(LocalSlice{l->fd, 0, l->length,
                             std::shared_ptr<const void>(held, held.get())});
  }
  if (healthy) local_.Give(socket, *std::move(sc));
  return out;
}

absl::StatusOr<LocalSlice> BlockReader::LocalObject(const BlockId& first,
                                                    uint64_t blocks) {
  BlockId id = first;
  id.index = 0;
  if (BlockCount(id.object_size, id.block_size) != blocks)
    return absl::InvalidArgumentError("the object's block count is wrong");
  LARDER_ASSIGN_OR_RETURN(const std::string socket, LocalOwner(id));
  // As long as it is held (a root process: the FUSE daemon, whose kernel
  // reads it for as long as the file stays open).
  return std::move(ObjectSlices(socket, {id}, absl::InfiniteDuration())[0]);
}

std::vector<absl::StatusOr<LocalSlice>> BlockReader::LocalObjects(
    const std::vector<BlockId>& firsts, absl::Duration lease) {
  std::vector<absl::StatusOr<LocalSlice>> out(
      firsts.size(), absl::FailedPreconditionError("not leased"));
  // By socket: the objects, and where their results go.
  absl::flat_hash_map<std::string,
                      std::pair<std::vector<BlockId>, std::vector<size_t>>>
      by_socket;
  for (size_t i = 0; i < firsts.size(); ++i) {
    absl::StatusOr<std::string> socket = LocalOwner(firsts[i]);
    if (!socket.ok()) {
      out[i] = socket.status();
      continue;
    }
    auto& [ids, at] = by_socket[*socket];
    ids.push_back(firsts[i]);
    ids.back().index = 0;
    at.push_back(i);
  }
  for (auto& [socket, group] : by_socket) {
    std::vector<absl::StatusOr<LocalSlice>> slices =
        ObjectSlices(socket, group.first, lease);
    for (size_t k = 0; k < slices.size(); ++k)
      out[group.second[k]] = std::move(slices[k]);
  }
  return out;
}

absl::Status BlockReader::Failover(
    const BlockId& id, uint64_t want,
    absl::FunctionRef<absl::StatusOr<size_t>(const Router::Candidate&)>
        from_worker,
    absl::FunctionRef<absl::Status()> from_under_store) {
  absl::Status last;
  for (int attempt = 0; attempt < 2; ++attempt) {  // Second: a new ring.
    const Router::Route route =
        router_.Candidates(id, options_.max_workers_per_block);
    for (const Router::Candidate& c : route.candidates) {
      absl::StatusOr<size_t> n = from_worker(c);
      if (n.ok() && *n == want) {
        router_.Answered(c);
        return absl::OkStatus();
      }
      if (n.ok()) {
        last = absl::InternalError(absl::StrCat("worker ", c.worker->id(),
                                                " returned ", *n, " of ", want,
                                                " bytes"));
      } else {
        last = n.status();
        if (!WorkerFailure(last)) return last;
      }
      ++failovers_;
      router_.MarkSuspect(c, last);
    }
    if (attempt == 0 && !hooks_.refresh_ring().ok()) break;
  }
  if (!options_.under_store_fallback) {
    return last.ok() ? absl::UnavailableError("no live worker for the block")
                     : last;
  }
  absl::Status st = from_under_store();
  if (st.ok()) ++under_store_blocks_;
  return st;
}

absl::StatusOr<size_t> BlockReader::FromWorker(const Router::Candidate& c,
                                               const BlockId& id,
                                               uint64_t offset,
                                               absl::Span<char> out) {
  if (c.local) {
    LARDER_ASSIGN_OR_RETURN(std::shared_ptr<LocalLeases::Lease> lease,
                            local_.From(c.worker->short_circuit_socket(), id));
    // No lease without an error: the socket cannot be reached; the same
    // worker is read over gRPC.
    if (lease) {
      absl::StatusOr<size_t> n =
          ShortCircuitClient::ReadLease(lease->lease, offset, out);
      if (n.ok()) ++sc_blocks_;
      return n;
    }
  }
  uint64_t ring = 0;
  absl::StatusOr<size_t> n = c.client->ReadBlock(
      id, offset, out, options_.worker_timeout, nullptr, &ring);
  if (n.ok()) ++grpc_blocks_;
  hooks_.note_ring_version(ring);
  return n;
}

absl::Status BlockReader::FromUnderStore(const BlockId& id, uint64_t offset,
                                         absl::Span<char> out) {
  std::optional<v1::MountEntry> mount = hooks_.mount(id.mount);
  if (!mount || mount->path() != id.mount)
    return absl::NotFoundError(absl::StrCat("unknown mount ", id.mount));
  LARDER_ASSIGN_OR_RETURN(std::shared_ptr<UnderStore> store,
                          fallback_stores_.Get(*mount));
  LARDER_ASSIGN_OR_RETURN(
      size_t n,
      store->ReadRange(id.path, id.offset() + offset, out, id.version));
  if (n != out.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat(id.DebugString(), ": the object is shorter than at Open"));
  }
  return absl::OkStatus();
}

}  // namespace larder
