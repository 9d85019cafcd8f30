// Copyright 2026 The Larder Authors.
#include "client/local_leases.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/block_proto.h"
#include "common/grpc_status.h"
#include "common/log.h"

namespace larder {

bool WorkerFailure(const absl::Status& s) {
  // The under-store failed behind the worker: another worker would wait on
  // the same store.
  if (IsStoreError(s)) return false;
  switch (s.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kAborted:
      return true;
    default:
      return false;  // NotFound, FailedPrecondition...: the object, not the
                     // worker.
  }
}

bool LocalLeases::Refused(const std::string& socket) const {
  if (!any_refused_.load(std::memory_order_acquire)) return false;
  absl::MutexLock lock(&refused_mu_);
  return refused_.contains(socket);
}

void LocalLeases::NoteRefused(const std::string& socket,
                              const absl::Status& why) {
  {
    absl::MutexLock lock(&refused_mu_);
    if (!refused_.insert(socket).second) return;
    any_refused_.store(true, std::memory_order_release);
  }
  LARDER_LOG(WARNING, "client.short_circuit_refused")
      .Field("socket", socket)
      .Field("status", why)
      .Field("detail", "reading this worker over gRPC");
}

absl::StatusOr<std::shared_ptr<ShortCircuitClient>> LocalLeases::Take(
    const std::string& socket, bool* reused) {
  if (reused != nullptr) *reused = false;
  {
    absl::MutexLock lock(&pool_mu_);
    if (auto q = quiet_until_.find(socket); q != quiet_until_.end()) {
      if (absl::Now() < q->second) {
        return absl::UnavailableError(absl::StrCat(
            "the worker at ", socket,
            " left a short-circuit request "
            "unanswered for ",
            absl::FormatDuration(timeout_), "; not asked again until ",
            absl::FormatTime(q->second)));
      }
      quiet_until_.erase(q);
    }
    auto& idle = idle_[socket];
    if (!idle.empty()) {
      auto c = std::move(idle.back());
      idle.pop_back();
      if (reused != nullptr) *reused = true;
      return c;
    }
  }
  absl::StatusOr<std::unique_ptr<ShortCircuitClient>> c =
      ShortCircuitClient::Connect(socket, timeout_, [this, socket] {
        {
          absl::MutexLock lock(&pool_mu_);
          quiet_until_[socket] = absl::Now() + kQuietAfterSilence;
          // Idle connections to it would wait the whole timeout too.
          idle_.erase(socket);
        }
        LARDER_LOG(WARNING, "client.short_circuit_silent")
            .Field("socket", socket)
            .Field("timeout", timeout_)
            .Field("detail",
                   absl::StrCat("reading elsewhere for ",
                                absl::FormatDuration(kQuietAfterSilence)));
      });
  if (!c.ok()) {
    // A socket served by an untrusted user: read that worker over gRPC.
    if (c.status().code() == absl::StatusCode::kPermissionDenied)
      NoteRefused(socket, c.status());
    return c.status();
  }
  return std::shared_ptr<ShortCircuitClient>(*std::move(c));
}

void LocalLeases::Give(const std::string& socket,
                       std::shared_ptr<ShortCircuitClient> c) {
  if (c->broken()) return;
  absl::MutexLock lock(&pool_mu_);
  auto& idle = idle_[socket];
  if (idle.size() < 16) idle.push_back(std::move(c));
}

std::optional<LocalLeases::Opened> LocalLeases::OpenOn(
    const std::string& socket, const std::vector<BlockId>& ids) {
  absl::StatusOr<std::shared_ptr<ShortCircuitClient>> sc = Take(socket);
  if (!sc.ok()) return std::nullopt;
  Opened o{*std::move(sc), {}};
  o.leases = o.conn->OpenBatch(ids);
  if (o.conn->refused()) {
    NoteRefused(socket,
                o.leases.empty() ? absl::Status() : o.leases[0].status());
    return std::nullopt;
  }
  return o;
}

void LocalLeases::LeaseAhead(const std::string& socket,
                             const std::vector<BlockId>& ids) {
  std::optional<Opened> o = OpenOn(socket, ids);
  if (!o) return;
  bool failed = false;
  for (size_t i = 0; i < o->leases.size() && i < ids.size(); ++i) {
    if (o->leases[i].ok()) {
      Keep(socket, ids[i],
           std::make_shared<Lease>(o->conn, std::move(*o->leases[i])));
    } else {
      failed = failed || WorkerFailure(o->leases[i].status());
    }
  }
  if (!failed) Give(socket, std::move(o->conn));
}

absl::StatusOr<std::shared_ptr<LocalLeases::Lease>> LocalLeases::From(
    const std::string& socket, const BlockId& id) {
  if (std::shared_ptr<Lease> kept = Find(socket, id)) return kept;
  for (int attempt = 0;; ++attempt) {
    bool reused = false;
    absl::StatusOr<std::shared_ptr<ShortCircuitClient>> sc =
        Take(socket, &reused);
    if (!sc.ok()) return std::shared_ptr<Lease>();
    absl::StatusOr<ShortCircuitClient::Lease> opened = (*sc)->Open(id);
    if (!opened.ok() && (*sc)->refused()) {
      NoteRefused(socket, opened.status());
      return std::shared_ptr<Lease>();
    }
    // One connection too many for the worker, which is well: over gRPC.
    if (!opened.ok() && (*sc)->busy()) return std::shared_ptr<Lease>();
    if (opened.ok() || !WorkerFailure(opened.status())) Give(socket, *sc);
    if (opened.ok()) {
      auto lease = std::make_shared<Lease>(*sc, std::move(*opened));
      Keep(socket, id, lease);
      return lease;
    }
    // A pooled connection the worker closed: it restarted (closing every
    // connection) since the connection was pooled, and the others pooled
    // with it are as dead. Whether the worker is down, a new one tells.
    if (reused && attempt == 0 &&
        opened.status().code() == absl::StatusCode::kUnavailable &&
        !IsStoreError(opened.status())) {
      absl::MutexLock lock(&pool_mu_);
      idle_.erase(socket);
      continue;
    }
    return opened.status();
  }
}

std::string LocalLeases::Key(const std::string& socket, const BlockId& id) {
  return absl::StrCat(socket, "|", KeyToBytes(id.Key()));
}

std::shared_ptr<LocalLeases::Lease> LocalLeases::Find(const std::string& socket,
                                                      const BlockId& id) {
  absl::MutexLock lock(&lease_mu_);
  auto it = leases_.find(Key(socket, id));
  if (it == leases_.end() || it->second->expires < absl::Now()) return nullptr;
  return it->second;
}

void LocalLeases::Keep(const std::string& socket, const BlockId& id,
                       std::shared_ptr<Lease> lease) {
  // Dropped leases are released by their destructors, after the lock.
  std::vector<std::shared_ptr<Lease>> dropped;
  absl::MutexLock lock(&lease_mu_);
  const absl::Time now = absl::Now();
  while (!order_.empty() && (leases_.size() >= kKept || FrontExpired(now))) {
    auto it = leases_.find(order_.front());
    order_.pop_front();
    if (it == leases_.end()) continue;
    dropped.push_back(std::move(it->second));
    leases_.erase(it);
  }
  // A concurrent reader may have kept one first; ours then goes with its
  // last reader.
  const std::string key = Key(socket, id);
  if (leases_.try_emplace(key, std::move(lease)).second) order_.push_back(key);
}

bool LocalLeases::FrontExpired(absl::Time now) {
  auto it = leases_.find(order_.front());
  return it == leases_.end() || it->second->expires < now;
}

}  // namespace larder
