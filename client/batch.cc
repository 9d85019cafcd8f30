// Copyright 2026 The Larder Authors.
#include "client/batch.h"

#include <cstring>
#include <deque>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "client/short_circuit_client.h"
#include "common/status_macros.h"

namespace larder {
namespace {

class Batch final : public FileBatch {
 public:
  struct Part {
    BlockId id;
    const ShortCircuitClient::Lease* lease = nullptr;
    ByteView view;
    absl::Status status;
  };
  struct FileParts {
    std::string path;
    uint64_t size = 0;
    absl::Status status;
    std::vector<Part> parts;
  };

  Batch(LocalLeases& local, BlockReader& reader, std::vector<BatchFile> files)
      : local_(local), reader_(reader) {
    files_.reserve(files.size());
    for (BatchFile& f : files) {
      FileParts& fp = files_.emplace_back();
      fp.path = std::move(f.path);
      fp.size = f.size;
      fp.status = std::move(f.status);
      for (BlockId& id : f.blocks) fp.parts.push_back(Part{std::move(id)});
    }
  }
  ~Batch() override {
    for (Held& h : held_) {
      h.conn->ReleaseBatch(h.leases).IgnoreError();
      if (!h.worker_failed) local_.Give(h.socket, std::move(h.conn));
    }
  }
  size_t size() const override { return files_.size(); }

  absl::Status ReadInto(size_t i, absl::Span<char> out) override;

  // Leases or reads every block.
  void Fill(Router& router, ThreadPool& pool);

 private:
  // The leases taken on one short-circuit connection.
  struct Held {
    std::string socket;
    std::shared_ptr<ShortCircuitClient> conn;
    std::vector<ShortCircuitClient::Lease> leases;
    bool worker_failed = false;
  };
  // Leases `parts` (blocks of the worker at `socket`) in one exchange per
  // 64 blocks. A part left without a lease is read at copy time.
  void Lease(const std::string& socket, const std::vector<Part*>& parts);

  LocalLeases& local_;
  BlockReader& reader_;
  std::vector<FileParts> files_;
  std::deque<Held> held_;  // A deque: the parts point into its leases.
};

void Batch::Fill(Router& router, ThreadPool& pool) {
  std::vector<Part*> parts;
  for (FileParts& fp : files_)
    for (Part& p : fp.parts) parts.push_back(&p);
  std::vector<const BlockId*> ids(parts.size());
  for (size_t k = 0; k < parts.size(); ++k) ids[k] = &parts[k]->id;
  router.LocateAhead(ids);
  absl::flat_hash_map<std::string, std::vector<Part*>> local;
  std::vector<Part*> remote;
  for (Part* p : parts) {
    const Router::Route route = router.Candidates(p->id, 1);
    if (!route.empty() && route.front().local) {
      local[route.front().worker->short_circuit_socket()].push_back(p);
    } else {
      remote.push_back(p);
    }
  }
  for (auto& [socket, held] : local) Lease(socket, held);
  ParallelFor(pool, remote.size(), [&](size_t k) {
    Part& p = *remote[k];
    absl::StatusOr<ByteView> v = reader_.View(p.id, 0, p.id.length());
    if (v.ok()) {
      p.view = *std::move(v);
    } else {
      p.status = v.status();
    }
  });
}

void Batch::Lease(const std::string& socket, const std::vector<Part*>& parts) {
  std::vector<BlockId> ids;
  ids.reserve(parts.size());
  for (const Part* p : parts) ids.push_back(p->id);
  std::optional<LocalLeases::Opened> o = local_.OpenOn(socket, ids);
  if (!o) return;
  std::vector<absl::StatusOr<ShortCircuitClient::Lease>>& leases = o->leases;
  Held& held = held_.emplace_back();
  held.socket = socket;
  held.conn = std::move(o->conn);
  held.leases.reserve(parts.size());
  std::vector<int> index(parts.size(), -1);
  for (size_t k = 0; k < parts.size() && k < leases.size(); ++k) {
    if (leases[k].ok()) {
      index[k] = static_cast<int>(held.leases.size());
      held.leases.push_back(*std::move(leases[k]));
    } else {
      held.worker_failed =
          held.worker_failed || WorkerFailure(leases[k].status());
    }
  }
  for (size_t k = 0; k < parts.size(); ++k)
    if (index[k] >= 0) parts[k]->lease = &held.leases[index[k]];
}

absl::Status Batch::ReadInto(size_t i, absl::Span<char> out) {
  if (i >= files_.size())
    return absl::OutOfRangeError(
        absl::StrCat("file ", i, " of a batch of ", files_.size()));
  const FileParts& f = files_[i];
  LARDER_RETURN_IF_ERROR(f.status);
  if (out.size() != f.size) {
    return absl::InvalidArgumentError(absl::StrCat("a buffer of ", out.size(),
                                                   " bytes for ", f.path,
                                                   " of ", f.size, " bytes"));
  }
  for (const Part& p : f.parts) {
    const absl::Span<char> dst = out.subspan(p.id.offset(), p.id.length());
    if (p.lease != nullptr) {
      absl::StatusOr<size_t> n =
          ShortCircuitClient::ReadLease(*p.lease, 0, dst);
      if (n.ok() && *n == dst.size()) {
        reader_.CountShortCircuit();
        continue;
      }
    } else if (!p.status.ok()) {
      return p.status;
    } else if (p.view.size() == dst.size()) {
      char* at = dst.data();
      for (absl::Span<const char> piece : p.view.pieces) {
        std::memcpy(at, piece.data(), piece.size());
        at += piece.size();
      }
      continue;
    }
    // Not leased (refused, or the lease could not be read): read now.
    LARDER_RETURN_IF_ERROR(reader_.Read(p.id, 0, dst));
  }
  return absl::OkStatus();
}

}  // namespace

std::unique_ptr<FileBatch> ReadBatch(std::vector<BatchFile> files,
                                     Router& router, LocalLeases& local,
                                     BlockReader& reader, ThreadPool& pool) {
  auto batch = std::make_unique<Batch>(local, reader, std::move(files));
  batch->Fill(router, pool);
  return batch;
}

}  // namespace larder
