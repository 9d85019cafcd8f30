// Copyright 2026 The Larder Authors.
#include "worker/metadata_service.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/fd_socket.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "proto/master.grpc.pb.h"
#include "understore/uri.h"

namespace larder {
namespace {

// What the master's Stat answers for a listed entry of `mount`.
v1::StatResponse StatOf(const v1::ObjectInfo& e, const Mount& mount) {
  v1::StatResponse r;
  *r.mutable_info() = e;
  r.set_mount(mount.name);
  r.set_relative(e.path().size() > mount.name.size()
                     ? e.path().substr(mount.name.size() + 1)
                     : std::string());
  r.set_block_size(mount.block_size);
  return r;
}

void SortByPath(std::vector<v1::ObjectInfo>& entries) {
  std::sort(entries.begin(), entries.end(),
            [](const v1::ObjectInfo& a, const v1::ObjectInfo& b) {
              return a.path() < b.path();
            });
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetadataService>> MetadataService::Create(
    Options options, const WorkerMounts* mounts, WorkerMetrics* metrics) {
  LARDER_ASSIGN_OR_RETURN(
      std::unique_ptr<MasterConnection> master,
      MasterConnection::Create(options.master, options.channels));
  return std::unique_ptr<MetadataService>(new MetadataService(
      std::move(options), std::move(master), mounts, metrics));
}

absl::StatusOr<MetadataService::Answer> MetadataService::Stat(
    const Caller& caller, absl::string_view path, uint64_t epoch,
    uint64_t seq) {
  auto defer = [&](absl::string_view why) {
    metrics_->metadata_deferred.Increment();
    return absl::FailedPreconditionError(
        absl::StrCat("not answered by the node metadata cache: ", why));
  };
  LARDER_ASSIGN_OR_RETURN(const std::string key, NormalizeClusterPath(path));
  absl::StatusOr<Mount> m = mounts_->GetCovering(key);
  if (!m.ok()) return defer("no mount of this worker holds it");
  if (m->metadata_ttl <= absl::ZeroDuration())
    return defer("its mount keeps no metadata");
  const BlockId id{.mount = m->name,
                   .path = key.size() > m->name.size()
                               ? key.substr(m->name.size() + 1)
                               : std::string()};
  // What the caller may see, as stat(2) would let it (a mount whose files
  // keep their own modes: search permission on the way there). No such
  // path where the way is open: answered so (not from the cache, which may
  // hold what was there), and not kept.
  if (absl::Status st =
          mounts_->MayAccess(caller, id.mount, id.path, PathAccess::kLookup);
      !st.ok()) {
    if (!absl::IsNotFound(st)) return defer("the caller may not see it");
    return Answer{std::make_shared<const NodeMetadataCache::Stat>(
                      NodeMetadataCache::Stat{st, v1::StatResponse()}),
                  absl::ZeroDuration()};
  }

  if (Behind(epoch, seq)) {
    if (absl::Status st = CatchUp(); !st.ok()) {
      metrics_->metadata_errors.Increment();
      return st;
    }
  }
  absl::StatusOr<Answer> answer;
  if (std::optional<NodeMetadataCache::Found<NodeMetadataCache::Stat>> f =
          cache_.GetStat(key);
      f && f->expires > absl::Now()) {
    metrics_->metadata_hits.Increment();
    answer = Answer{f->value, f->expires - absl::Now()};
  } else {
    answer = Fetch(key, *m);
    if (!answer.ok()) {
      metrics_->metadata_errors.Increment();
      return answer.status();
    }
  }
  return answer;
}

absl::StatusOr<MetadataService::Answer> MetadataService::Fetch(
    const std::string& key, const Mount& mount) {
  absl::Duration ttl = mount.metadata_ttl;
  std::shared_ptr<Flight> flight;
  bool leader = false;
  uint64_t generation = 0;
  {
    absl::MutexLock lock(&mu_);
    // A flight that ended since the caller's lookup kept its answer (under
    // mu_): asking the master again would be a second Stat.
    if (std::optional<NodeMetadataCache::Found<NodeMetadataCache::Stat>> f =
            cache_.GetStat(key);
        f && f->expires > absl::Now()) {
      metrics_->metadata_hits.Increment();
      return Answer{f->value, f->expires - absl::Now()};
    }
    generation = generation_;
    std::shared_ptr<Flight>& slot = flights_[key];
    if (slot == nullptr || slot->generation != generation) {
      // (One from before an invalidation goes on, unjoined, and is not kept.)
      slot = std::make_shared<Flight>();
      slot->generation = generation;
      leader = true;
    }
    flight = slot;
  }
  if (!leader) {
    // The leader's call has a deadline: the wait is bounded by it.
    flight->done.WaitForNotification();
    metrics_->metadata_hits.Increment();
    LARDER_ASSIGN_OR_RETURN(std::shared_ptr<const NodeMetadataCache::Stat> s,
                            flight->result);
    return Answer{std::move(s), flight->expires - absl::Now()};
  }
  metrics_->metadata_misses.Increment();
  absl::Status st;
  v1::StatResponse resp;
  absl::StatusOr<std::optional<Listed>> listed =
      FromDirectory(key, mount, generation);
  if (!listed.ok()) {
    // No such directory: no such path either (kept, negative); another
    // error is not kept.
    st = listed.status();
    flight->expires =
        absl::Now() + (absl::IsNotFound(st) ? ttl : absl::ZeroDuration());
  } else if (*listed) {
    st = (*listed)->status;
    resp = std::move((*listed)->response);
    flight->expires = (*listed)->expires;
    ttl = flight->expires - absl::Now();
  } else {
    v1::StatRequest req;
    req.set_path(key);
    st = FromGrpcStatus(master_->Call(&v1::Master::Stub::Stat, req, &resp,
                                      options_.rpc_timeout));
    // Fresh for what was left of it in the master's cache.
    if (st.ok()) ttl = FreshFor(ttl, resp.ttl_remaining_ms());
    flight->expires = absl::Now() + ttl;
  }
  if (st.ok() || st.code() == absl::StatusCode::kNotFound) {
    // NotFound is an answer too: kept, negative.
    flight->result =
        std::make_shared<const NodeMetadataCache::Stat>(NodeMetadataCache::Stat{
            st, st.ok() ? std::move(resp) : v1::StatResponse()});
  } else {
    flight->result = st;
  }
  {
    absl::MutexLock lock(&mu_);
    // An invalidation applied while the master answered may have dropped
    // this very path: the answer is served, not kept.
    if (flight->result.ok() && generation == generation_)
      cache_.PutStat(key, **flight->result, flight->expires);
    if (auto it = flights_.find(key);
        it != flights_.end() && it->second == flight)
      flights_.erase(it);
  }
  flight->done.Notify();
  metrics_->metadata_entries.Set(
      static_cast<double>(cache_.counters().entries));
  LARDER_ASSIGN_OR_RETURN(std::shared_ptr<const NodeMetadataCache::Stat> s,
                          flight->result);
  return Answer{std::move(s), ttl};
}

absl::StatusOr<v1::ListResponse> MetadataService::List(
    const Caller& caller, const v1::ListRequest& request) {
  LARDER_ASSIGN_OR_RETURN(const std::string dir,
                          NormalizeClusterPath(request.path()));
  absl::StatusOr<Mount> m = mounts_->GetCovering(dir);
  if (!m.ok()) {
    return absl::FailedPreconditionError(
        "not answered by the worker: no mount of this worker holds it");
  }
  const std::string relative =
      dir.size() > m->name.size() ? dir.substr(m->name.size() + 1) : "";
  if (absl::Status st =
          mounts_->MayAccess(caller, m->name, relative, PathAccess::kList);
      !st.ok()) {
    // No such directory where the way is open: so it is answered (the
    // master's cache may still list what was there).
    if (absl::IsNotFound(st)) return st;
    return absl::FailedPreconditionError(
        absl::StrCat("not answered by the worker: ", st.message()));
  }
  v1::ListRequest req = request;
  req.set_path(dir);
  req.set_page_size(std::clamp<uint32_t>(req.page_size(), 1, 1000));
  v1::ListResponse resp;
  for (;;) {
    if (absl::Status st = FromGrpcStatus(master_->Call(
            &v1::Master::Stub::List, req, &resp, options_.rpc_timeout));
        !st.ok()) {
      if (absl::IsPermissionDenied(st) || absl::IsUnauthenticated(st)) {
        return absl::FailedPreconditionError(
            absl::StrCat("not answered by the worker: the master refused it: ",
                         st.message()));
      }
      return st;
    }
    // A page must fit a short-circuit frame (1 MiB, with room to spare):
    // long paths ask for smaller ones.
    if (resp.ByteSizeLong() <= kMaxFrameBytes - (64 << 10) ||
        req.page_size() == 1) {
      break;
    }
    req.set_page_size(req.page_size() / 2);
  }
  if (req.recursive())
    FilterRecursiveListing(caller, m->name, m->access, *m->store, relative,
                           &resp);
  return resp;
}

MetadataService::~MetadataService() {
  stopping_ = true;
  list_pool_.reset();
}

absl::Status MetadataService::ListPage(const std::string& dir,
                                       std::string* token, absl::Duration* ttl,
                                       std::vector<v1::ObjectInfo>* entries) {
  v1::ListRequest req;
  req.set_path(dir);
  req.set_page_token(*token);
  req.set_page_size(1000);
  v1::ListResponse resp;
  LARDER_RETURN_IF_ERROR(FromGrpcStatus(master_->Call(
      &v1::Master::Stub::List, req, &resp, options_.rpc_timeout)));
  *ttl = FreshFor(*ttl, resp.ttl_remaining_ms());
  for (v1::ObjectInfo& e : *resp.mutable_entries())
    entries->push_back(std::move(e));
  *token = resp.next_page_token();
  return absl::OkStatus();
}

void MetadataService::Keep(const std::vector<v1::ObjectInfo>& entries,
                           const Mount& mount, absl::Time expires,
                           uint64_t generation) {
  if (generation != generation_) return;  // Served, not kept.
  // Every entry, as the master's Stat would answer it.
  for (const v1::ObjectInfo& e : entries)
    cache_.PutStat(e.path(), {absl::OkStatus(), StatOf(e, mount)}, expires);
}

void MetadataService::Finish(
    const std::string& dir, DirFlight& flight, absl::Status st,
    absl::Duration ttl, std::shared_ptr<std::vector<v1::ObjectInfo>> entries,
    const Mount& mount, uint64_t generation) {
  const absl::Time now = absl::Now();
  flight.expires = now + ttl;
  flight.status = st;
  if (st.ok() && entries != nullptr) {
    SortByPath(*entries);
    flight.entries = std::move(entries);
  }
  {
    absl::MutexLock lock(&mu_);
    if (st.ok() && flight.entries == nullptr) {
      if (unlisted_.size() >= 10000) unlisted_.clear();
      unlisted_[dir] = now + mount.metadata_ttl;
    } else if (st.ok()) {
      Keep(*flight.entries, mount, flight.expires, generation);
    }
    if (auto it = dir_flights_.find(dir);
        it != dir_flights_.end() && it->second.get() == &flight)
      dir_flights_.erase(it);
  }
  metrics_->metadata_entries.Set(
      static_cast<double>(cache_.counters().entries));
  // `done` first: a waiter woken by `first_page` then finds it.
  flight.done.Notify();
  if (!flight.first_page.HasBeenNotified()) flight.first_page.Notify();
}

void MetadataService::ListRest(
    const std::string& dir, std::shared_ptr<DirFlight> flight,
    std::string token, absl::Duration ttl,
    std::shared_ptr<std::vector<v1::ObjectInfo>> entries, Mount mount,
    uint64_t generation) {
  absl::Status st;
  for (int page = 1; st.ok() && !token.empty(); ++page) {
    if (page == kFillPages) {
      entries.reset();  // Too large: its files are Stat'ed.
      break;
    }
    if (stopping_) {
      st = absl::CancelledError("the worker is stopping");
      break;
    }
    st = ListPage(dir, &token, &ttl, entries.get());
  }
  Finish(dir, *flight, st, ttl, std::move(entries), mount, generation);
}

absl::StatusOr<std::optional<MetadataService::Listed>>
MetadataService::FromDirectory(const std::string& key, const Mount& mount,
                               uint64_t generation) {
  const size_t slash = key.rfind('/');
  if (slash == std::string::npos || slash < mount.name.size())
    return std::nullopt;
  const std::string dir = key.substr(0, slash);
  std::shared_ptr<DirFlight> flight;
  bool leader = false;
  {
    absl::MutexLock lock(&mu_);
    if (auto it = unlisted_.find(dir); it != unlisted_.end()) {
      if (it->second > absl::Now()) return std::nullopt;
      unlisted_.erase(it);
    }
    std::shared_ptr<DirFlight>& slot = dir_flights_[dir];
    if (slot == nullptr || slot->generation != generation) {
      slot = std::make_shared<DirFlight>();
      slot->generation = generation;
      leader = true;
    }
    flight = slot;
  }
  if (leader) {
    auto entries = std::make_shared<std::vector<v1::ObjectInfo>>();
    absl::Duration ttl = mount.metadata_ttl;
    std::string token;
    absl::Status st = ListPage(dir, &token, &ttl, entries.get());
    if (!st.ok() || token.empty()) {
      Finish(dir, *flight, st, ttl, std::move(entries), mount, generation);
    } else {
      // More pages: the rest in the background. The first page's entries
      // answer (and are kept) meanwhile.
      auto first = std::make_shared<std::vector<v1::ObjectInfo>>(*entries);
      SortByPath(*first);
      flight->first_expires = absl::Now() + ttl;
      flight->first = std::move(first);
      {
        absl::MutexLock lock(&mu_);
        Keep(*flight->first, mount, flight->first_expires, generation);
      }
      flight->first_page.Notify();
      list_pool_->Schedule([this, dir, flight, token = std::move(token), ttl,
                            entries = std::move(entries), mount, generation] {
        ListRest(dir, flight, token, ttl, entries, mount, generation);
      });
    }
  } else {
    flight->first_page.WaitForNotification();
  }
  // The whole listing when it is done, else its first page (then a path
  // not in it is Stat'ed: no waiting for the rest).
  const std::vector<v1::ObjectInfo>* entries = nullptr;
  absl::Time expires;
  if (flight->done.HasBeenNotified()) {
    LARDER_RETURN_IF_ERROR(flight->status);
    if (flight->entries == nullptr) return std::nullopt;
    entries = flight->entries.get();
    expires = flight->expires;
  } else {
    entries = flight->first.get();
    expires = flight->first_expires;
  }
  auto it = std::lower_bound(entries->begin(), entries->end(), key,
                             [](const v1::ObjectInfo& e, const std::string& k) {
                               return e.path() < k;
                             });
  // Not in it: created since, perhaps; the master decides (it looks at
  // the store when its own listing does not have it).
  if (it == entries->end() || it->path() != key) return std::nullopt;
  return Listed{absl::OkStatus(), StatOf(*it, mount), expires};
}

bool MetadataService::Behind(uint64_t epoch, uint64_t seq) const {
  if (epoch == 0) return false;
  absl::MutexLock lock(&mu_);
  return epoch != epoch_ || seq > seq_;
}

void MetadataService::Follow(uint64_t epoch, uint64_t seq) {
  if (!Behind(epoch, seq)) return;
  if (absl::Status st = CatchUp(); !st.ok()) {
    LARDER_LOG(WARNING, "worker.metadata_invalidations")
        .Field("master", master_->addresses())
        .Field("status", st);
  }
}

absl::Status MetadataService::CatchUp() {
  absl::MutexLock sync(&sync_mu_);
  v1::GetInvalidationsRequest req;
  {
    absl::MutexLock lock(&mu_);
    req.set_epoch(epoch_);
    req.set_after_seq(seq_);
  }
  v1::GetInvalidationsResponse resp;
  LARDER_RETURN_IF_ERROR(FromGrpcStatus(master_->Call(
      &v1::Master::Stub::GetInvalidations, req, &resp, absl::Seconds(10))));
  uint64_t dropped = 0;
  {
    absl::MutexLock lock(&mu_);
    // Nothing new.
    if (resp.epoch() == epoch_ && resp.seq() <= seq_) return absl::OkStatus();
    if (resp.reset()) {
      dropped = cache_.counters().entries;
      cache_.Clear();
    } else {
      for (const std::string& p : resp.paths()) {
        if (absl::StatusOr<std::string> key = NormalizeClusterPath(p); key.ok())
          dropped += cache_.Invalidate(*key);
      }
    }
    epoch_ = resp.epoch();
    seq_ = resp.seq();
    ++generation_;
  }
  metrics_->metadata_entries.Set(
      static_cast<double>(cache_.counters().entries));
  LARDER_LOG(INFO, "worker.metadata_invalidated")
      .Field("paths", resp.paths_size())
      .Field("all", resp.reset())
      .Field("dropped", dropped);
  return absl::OkStatus();
}

}  // namespace larder
