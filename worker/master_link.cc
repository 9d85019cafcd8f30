// Copyright 2026 The Larder Authors.
#include "worker/master_link.h"

#include <grpcpp/create_channel.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/block_proto.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "understore/mount_store.h"

namespace larder {

absl::StatusOr<std::unique_ptr<MasterLink>> MasterLink::Start(
    Options options, BlockStore* store, WorkerMounts* mounts) {
  std::unique_ptr<MasterLink> link(
      new MasterLink(std::move(options), store, mounts));
  LARDER_ASSIGN_OR_RETURN(
      link->master_,
      MasterConnection::Create(link->options_.master, link->options_.channels));
  MasterLink* self = link.get();
  // A request for an unknown mount pulls the master's table at once (at most
  // every 200 ms), instead of failing until the next heartbeat.
  // Every request that misses sees a table pulled after it arrived: a pull
  // that began after it covers it (requests that wait for one in flight do
  // not pull again); otherwise it pulls, waiting until 200 ms have passed
  // since the last pull, so that requests for unknown mounts cannot make the
  // worker ask the master more than five times a second.
  mounts->SetMissHook([self] {
    const absl::Time asked = absl::Now();
    absl::MutexLock lock(&self->sync_mu_);
    if (self->last_forced_sync_ >= asked) return self->last_forced_status_;
    const absl::Duration wait =
        self->last_forced_sync_ + absl::Milliseconds(200) - absl::Now();
    if (wait > absl::ZeroDuration()) absl::SleepFor(wait);
    self->last_forced_sync_ = absl::Now();
    self->SyncMountsLocked(0, &self->last_forced_status_).IgnoreError();
    return self->last_forced_status_;
  });
  link->thread_ = std::thread([self] { self->Loop(); });
  return link;
}

MasterLink::~MasterLink() {
  mounts_->SetMissHook(nullptr);
  stopping_ = true;
  thread_.join();
}

absl::Status MasterLink::Register() {
  v1::RegisterWorkerRequest req;
  *req.mutable_worker() = options_.self;
  store_->DrainJournal(nullptr, nullptr);  // The full report supersedes it.
  const std::vector<BlockKey> keys = store_->CachedKeys();
  const absl::Span<const BlockKey> all(keys);
  const size_t per = std::max<size_t>(1, options_.keys_per_request);
  const size_t first = std::min(keys.size(), per);
  req.set_cached_keys(KeysToBytes(all.first(first)));
  v1::RegisterWorkerResponse resp;
  LARDER_RETURN_IF_ERROR(FromGrpcStatus(master_->Call(
      &v1::Master::Stub::RegisterWorker, req, &resp, absl::Seconds(10))));
  if (first < keys.size()) {
    // The rest of a large report.
    v1::HeartbeatResponse rest;
    LARDER_RETURN_IF_ERROR(Heartbeat(all.subspan(first), {}, &rest));
    if (rest.reregister()) {
      return absl::UnavailableError(
          "the master forgot this worker while it sent its block report");
    }
  }
  interval_ = absl::Milliseconds(std::max<uint32_t>(100, resp.heartbeat_ms()));
  if (options_.ring_version) options_.ring_version->store(resp.ring_version());
  registered_ = true;
  LARDER_LOG(INFO, "worker.registered")
      .Field("master", master_->current())
      .Field("blocks", keys.size())
      .Field("requests", 1 + (keys.size() - first + per - 1) / per)
      .Field("ring_version", resp.ring_version());
  return SyncMounts(resp.mounts_version());
}

absl::Status MasterLink::Heartbeat(absl::Span<const BlockKey> added,
                                   absl::Span<const BlockKey> removed,
                                   v1::HeartbeatResponse* resp) {
  const size_t per = std::max<size_t>(1, options_.keys_per_request);
  do {
    const size_t a = std::min(added.size(), per);
    const size_t r = std::min(removed.size(), per - a);
    v1::HeartbeatRequest req;
    req.set_worker_id(options_.self.id());
    req.set_added_keys(KeysToBytes(added.first(a)));
    req.set_removed_keys(KeysToBytes(removed.first(r)));
    LARDER_RETURN_IF_ERROR(FromGrpcStatus(master_->Call(
        &v1::Master::Stub::Heartbeat, req, resp, absl::Seconds(5))));
    if (resp->reregister()) return absl::OkStatus();
    added.remove_prefix(a);
    removed.remove_prefix(r);
  } while (!added.empty() || !removed.empty());
  return absl::OkStatus();
}

absl::Status MasterLink::SyncMounts(uint64_t version) {
  absl::MutexLock lock(&sync_mu_);
  return SyncMountsLocked(version);
}

absl::Status MasterLink::SyncMountsLocked(uint64_t version,
                                          absl::Status* pulled) {
  if (pulled != nullptr) *pulled = absl::OkStatus();
  if (version != 0 && version == mounts_version_) return absl::OkStatus();
  v1::MountTable table;
  absl::Status asked = FromGrpcStatus(
      master_->Call(&v1::Master::Stub::GetMounts, v1::GetMountsRequest(),
                    &table, absl::Seconds(10)));
  if (pulled != nullptr) *pulled = asked;
  LARDER_RETURN_IF_ERROR(asked);
  absl::Status first;
  for (const v1::MountEntry& m : table.mounts()) {
    absl::StatusOr<Mount> have = mounts_->Find(m.path());
    if (have.ok() && have->uri == m.uri() &&
        have->credentials == m.credentials() &&
        have->block_size == m.block_size())
      continue;
    absl::StatusOr<std::unique_ptr<UnderStore>> opened =
        OpenMountStore(m, options_.store_options);
    absl::Status st =
        opened.ok()
            ? mounts_->Add(m, std::shared_ptr<UnderStore>(*std::move(opened)))
            : opened.status();
    if (!st.ok()) {
      LARDER_LOG(ERROR, "worker.mount")
          .Field("path", m.path())
          .Field("status", st);
      first.Update(st);
    }
  }
  mounts_->RetainOnly(table);
  if (first.ok()) mounts_version_ = table.version();
  return first;
}

void MasterLink::Loop() {
  while (!stopping_) {
    absl::Status st;
    if (!registered_) {
      st = Register();
    } else {
      std::vector<BlockKey> added, removed;
      store_->DrainJournal(&added, &removed);
      v1::HeartbeatResponse resp;
      st = Heartbeat(added, removed, &resp);
      if (st.ok() && options_.ring_version)
        options_.ring_version->store(resp.ring_version());
      if (st.ok() && resp.reregister()) {
        registered_ = false;
        st = Register();
      } else if (st.ok()) {
        st = SyncMounts(resp.mounts_version());
        // A master from before the field sends epoch 0: nothing to follow.
        if (options_.on_invalidations && resp.metadata_epoch() != 0)
          options_.on_invalidations(resp.metadata_epoch(),
                                    resp.invalidation_seq());
      } else {
        registered_ = false;  // Re-register with a full report when it is back.
      }
    }
    if (!st.ok())
      LARDER_LOG(WARNING, "worker.master")
          .Field("master", options_.master)
          .Field("status", st);
    const absl::Time until = absl::Now() + interval_;
    while (!stopping_ && absl::Now() < until)
      absl::SleepFor(absl::Milliseconds(20));
  }
}

}  // namespace larder
