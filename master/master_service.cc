// Copyright 2026 The Larder Authors.
//
// The master's gRPC service: each RPC checked against the caller's role,
// counted, and answered from the master's parts (membership, mounts,
// metadata, invalidations, loads).
#include "master/master_service.h"

#include <google/protobuf/text_format.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/server_builder.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/worker_client.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/master_connection.h"
#include "common/retry.h"
#include "common/security.h"
#include "common/status_macros.h"
#include "common/thread_pool.h"
#include "master/invalidation_log.h"
#include "master/master.h"
#include "proto/master.grpc.pb.h"
#include "understore/mount_store.h"
#include "understore/uri.h"

namespace larder {
namespace {

// The block keys of a request: one per entry in `each` (the form older
// workers send) and 16 bytes each back to back in `packed`. A key of the
// wrong length is InvalidArgument, naming `field`: a report that silently
// lost keys would leave blocks unknown to the master.
absl::StatusOr<std::vector<BlockKey>> Keys(
    absl::string_view field,
    const google::protobuf::RepeatedPtrField<std::string>& each,
    absl::string_view packed = {}) {
  std::vector<BlockKey> out;
  out.reserve(each.size() + packed.size() / 16);
  for (const std::string& b : each) {
    BlockKey k;
    if (!KeyFromBytes(b, &k)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": a block key of ", b.size(),
                       " bytes (block keys are 16 bytes)"));
    }
    out.push_back(k);
  }
  if (!KeysFromBytes(packed, &out)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", packed.size(),
                     " bytes of packed block keys, not a multiple of 16"));
  }
  return out;
}

// The master's RPCs. Control-plane traffic is small, so the synchronous API
// (a gRPC-managed thread pool) keeps this simple.
class MasterService final : public v1::Master::Service {
 public:
  enum Rpc {
    kRegisterWorker,
    kHeartbeat,
    kGetRing,
    kGetMounts,
    kAddMount,
    kRemoveMount,
    kStat,
    kList,
    kInvalidate,
    kGetInvalidations,
    kStartLoad,
    kGetLoad,
    kLocate,
    kGetClusterStats,
    kBeginWrite,
    kCommitWrite,
    kAbortWrite,
    kGetCommittedWrite,
    kRpcCount
  };
  // Each RPC's name (a metric label) and the role it needs: admin changes
  // what the cluster serves or holds (mounts, loads, invalidations,
  // membership); reading needs reader.
  struct RpcInfo {
    const char* name;
    Role role;
  };
  static constexpr std::array<RpcInfo, kRpcCount> kRpcs = {{
      {"RegisterWorker", Role::kAdmin},
      {"Heartbeat", Role::kAdmin},
      {"GetRing", Role::kReader},
      {"GetMounts", Role::kReader},
      {"AddMount", Role::kAdmin},
      {"RemoveMount", Role::kAdmin},
      {"Stat", Role::kReader},
      {"List", Role::kReader},
      {"Invalidate", Role::kAdmin},
      {"GetInvalidations", Role::kReader},
      {"StartLoad", Role::kAdmin},
      {"GetLoad", Role::kReader},
      {"Locate", Role::kReader},
      {"GetClusterStats", Role::kReader},
      {"BeginWrite", Role::kWriter},
      {"CommitWrite", Role::kWriter},
      {"AbortWrite", Role::kWriter},
      {"GetCommittedWrite", Role::kAdmin},
  }};

  MasterService(const Master* master, const MasterOptions* options,
                MountRegistry* mounts, Membership* membership,
                UnderStoreMetadata* metadata, InvalidationLog* invalidations,
                LoadJobs* loads, Writes* writes, const Authorizer* auth,
                const ChannelFactory* channels, prometheus::Registry& registry)
      : master_(master),
        options_(options),
        auth_(auth),
        channels_(channels),
        mounts_(mounts),
        membership_(membership),
        metadata_(metadata),
        invalidations_(invalidations),
        loads_(loads),
        writes_(writes) {
    auto& family = prometheus::BuildCounter()
                       .Name("larder_master_rpcs_total")
                       .Help("RPCs the master has answered, by method")
                       .Register(registry);
    for (int i = 0; i < kRpcCount; ++i)
      rpcs_[i] = &family.Add({{"method", kRpcs[i].name}});
  }

  grpc::Status RegisterWorker(grpc::ServerContext* ctx,
                              const v1::RegisterWorkerRequest* req,
                              v1::RegisterWorkerResponse* resp) override {
    if (grpc::Status denied = Enter(kRegisterWorker, *ctx); !denied.ok())
      return denied;
    if (req->worker().id().empty() || req->worker().address().empty()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "worker id and address are required");
    }
    absl::StatusOr<std::vector<BlockKey>> keys =
        Keys("cached_keys", req->cached_blocks(), req->cached_keys());
    if (!keys.ok()) return ToGrpcStatus(keys.status());
    resp->set_ring_version(
        membership_->Register(req->worker(), *std::move(keys), absl::Now()));
    resp->set_heartbeat_ms(static_cast<uint32_t>(
        absl::ToInt64Milliseconds(options_->heartbeat_interval)));
    resp->set_mounts_version(mounts_->Get().version());
    return grpc::Status::OK;
  }

  grpc::Status Heartbeat(grpc::ServerContext* ctx,
                         const v1::HeartbeatRequest* req,
                         v1::HeartbeatResponse* resp) override {
    if (grpc::Status denied = Enter(kHeartbeat, *ctx); !denied.ok())
      return denied;
    absl::StatusOr<std::vector<BlockKey>> added =
        Keys("added_keys", req->added_blocks(), req->added_keys());
    if (!added.ok()) return ToGrpcStatus(added.status());
    absl::StatusOr<std::vector<BlockKey>> removed =
        Keys("removed_keys", req->removed_blocks(), req->removed_keys());
    if (!removed.ok()) return ToGrpcStatus(removed.status());
    resp->set_reregister(!membership_->Heartbeat(
        req->worker_id(), *std::move(added), *removed, absl::Now()));
    resp->set_ring_version(membership_->version());
    resp->set_mounts_version(mounts_->Get().version());
    resp->set_metadata_epoch(invalidations_->epoch());
    resp->set_invalidation_seq(invalidations_->seq());
    return grpc::Status::OK;
  }

  grpc::Status GetRing(grpc::ServerContext* ctx, const v1::GetRingRequest*,
                       v1::Ring* resp) override {
    if (grpc::Status denied = Enter(kGetRing, *ctx); !denied.ok())
      return denied;
    *resp = membership_->Ring();
    resp->set_mounts_version(mounts_->Get().version());
    resp->set_metadata_epoch(invalidations_->epoch());
    resp->set_invalidation_seq(invalidations_->seq());
    return grpc::Status::OK;
  }

  grpc::Status GetMounts(grpc::ServerContext* ctx, const v1::GetMountsRequest*,
                         v1::MountTable* resp) override {
    if (grpc::Status denied = Enter(kGetMounts, *ctx); !denied.ok())
      return denied;
    *resp = mounts_->Get();
    // A token limited to mounts sees only those.
    const Caller caller = auth_->CallerOf(*ctx);
    if (!caller.mounts.empty()) {
      auto* m = resp->mutable_mounts();
      m->erase(std::remove_if(m->begin(), m->end(),
                              [&](const v1::MountEntry& e) {
                                return !MountInScope(caller.mounts, e.path());
                              }),
               m->end());
    }
    return grpc::Status::OK;
  }

  grpc::Status AddMount(grpc::ServerContext* ctx,
                        const v1::AddMountRequest* req,
                        v1::MountTable* resp) override {
    if (grpc::Status denied = Enter(kAddMount, *ctx); !denied.ok())
      return denied;
    // A URI the under-store cannot use (bad bucket name, unknown option)
    // is refused now, not at the first read. Nothing is contacted here.
    absl::StatusOr<std::unique_ptr<UnderStore>> probe =
        OpenMountStore(req->mount(), options_->store);
    if (!probe.ok() &&
        (probe.status().code() == absl::StatusCode::kInvalidArgument ||
         probe.status().code() == absl::StatusCode::kPermissionDenied)) {
      return ToGrpcStatus(probe.status());
    }
    const uint64_t before = mounts_->Get().version();
    absl::StatusOr<v1::MountTable> t = mounts_->Add(req->mount());
    if (!t.ok()) return ToGrpcStatus(t.status());
    // The same mount again changes nothing: clients keep their caches (a
    // start-up Job may apply the table on every upgrade).
    if (t->version() != before) {
      // Clients may hold "no such path" for it.
      invalidations_->Add(req->mount().path());
      LARDER_LOG(INFO, "mount.added")
          .Field("path", req->mount().path())
          .Field("uri", req->mount().uri());
    }
    *resp = *std::move(t);
    return grpc::Status::OK;
  }

  grpc::Status RemoveMount(grpc::ServerContext* ctx,
                           const v1::RemoveMountRequest* req,
                           v1::MountTable* resp) override {
    if (grpc::Status denied = Enter(kRemoveMount, *ctx); !denied.ok())
      return denied;
    absl::StatusOr<v1::MountTable> t = mounts_->Remove(req->path());
    if (!t.ok()) return ToGrpcStatus(t.status());
    metadata_->Invalidate(req->path());
    metadata_->DropStore(req->path());
    invalidations_->Add(req->path());
    *resp = *std::move(t);
    return grpc::Status::OK;
  }

  // The master stats and lists under-stores for every client, with its
  // own credentials: a refusal for lack of them says whose they are.
  static absl::Status MetadataError(const absl::Status& st) {
    if (st.code() == absl::StatusCode::kUnauthenticated) {
      return absl::UnauthenticatedError(absl::StrCat(
          "the Larder master has no credentials for this mount's store (it "
          "lists and stats for every client): ",
          st.message(),
          ". Set them for `larder master` (its environment or home "
          "directory), or give the mount --credentials=profile:NAME of the "
          "master's credentials file"));
    }
    if (st.code() == absl::StatusCode::kPermissionDenied) {
      return absl::PermissionDeniedError(absl::StrCat(
          "the under-store refused the Larder master (its credentials, or "
          "the path): ",
          st.message()));
    }
    // The store did not answer (down, hung, throttling): its failure, not
    // the master's (a client keeps serving what it knows; see
    // MarkStoreError).
    if (IsRetryable(st) || IsStalled(st)) return MarkStoreError(st);
    return st;
  }

  grpc::Status Stat(grpc::ServerContext* ctx, const v1::StatRequest* req,
                    v1::StatResponse* resp) override {
    if (grpc::Status denied = Enter(kStat, *ctx); !denied.ok()) return denied;
    if (grpc::Status denied = CheckScope(*ctx, req->path()); !denied.ok())
      return denied;
    std::optional<Access> access;
    if (grpc::Status denied =
            CheckAccess(*ctx, req->path(), PathAccess::kLookup, &access);
        !denied.ok())
      return denied;
    absl::StatusOr<v1::StatResponse> r = metadata_->Stat(req->path());
    if (!r.ok() && r.status().code() == absl::StatusCode::kNotFound &&
        !mounts_->VirtualChildren(req->path()).empty()) {
      // A directory made of mount path prefixes ("/", "/datasets").
      absl::StatusOr<std::string> path = NormalizeClusterPath(req->path());
      resp->mutable_info()->set_path(path.ok() ? *path : req->path());
      resp->mutable_info()->set_is_dir(true);
      resp->set_ring_version(membership_->version());
      return grpc::Status::OK;
    }
    if (!r.ok()) return ToGrpcStatus(MetadataError(r.status()));
    *resp = *std::move(r);
    Present(req->path(), resp->mutable_info());
    resp->set_ring_version(membership_->version());
    return grpc::Status::OK;
  }

  grpc::Status List(grpc::ServerContext* ctx, const v1::ListRequest* req,
                    v1::ListResponse* resp) override {
    if (grpc::Status denied = Enter(kList, *ctx); !denied.ok()) return denied;
    // "/" and other prefixes of mount paths list the next path components
    // (a mount path itself lists its under-store).
    const std::string path = req->path().empty() ? "/" : req->path();
    if (grpc::Status denied = CheckScope(*ctx, path); !denied.ok())
      return denied;
    std::optional<Access> access;
    if (grpc::Status denied =
            CheckAccess(*ctx, path, PathAccess::kList, &access);
        !denied.ok())
      return denied;
    if (!mounts_->Resolve(path).ok()) {
      std::vector<std::string> children = mounts_->VirtualChildren(path);
      if (!children.empty() || path == "/") {
        const Caller caller = auth_->CallerOf(*ctx);
        for (std::string& c : children) {
          if (!LeadsIntoScope(caller.mounts, c)) continue;
          v1::ObjectInfo* e = resp->add_entries();
          // A mount's own root: a mount whose files keep their own owner
          // and mode shows its root directory's (a bind mount would).
          if (absl::StatusOr<std::pair<v1::MountEntry, std::string>> m =
                  mounts_->Resolve(c);
              m.ok() && MountAccessOf(m->first).per_file) {
            if (absl::StatusOr<v1::StatResponse> root = metadata_->Stat(c);
                root.ok()) {
              *e = root->info();
            }
          }
          Present(c, e);
          e->set_path(std::move(c));
          e->set_is_dir(true);
        }
        resp->set_ring_version(membership_->version());
        return grpc::Status::OK;
      }
    }
    absl::StatusOr<v1::ListResponse> r = metadata_->List(*req);
    if (!r.ok()) return ToGrpcStatus(MetadataError(r.status()));
    *resp = *std::move(r);
    if (access && req->recursive()) {
      // Entries below directories the caller could not list are not shown.
      FilterRecursiveListing(access->caller, access->mount_path, access->access,
                             *access->store, access->relative, resp);
    }
    // Every entry is in the listed directory's mount: resolved once.
    if (absl::StatusOr<std::pair<v1::MountEntry, std::string>> m =
            mounts_->Resolve(path);
        m.ok()) {
      const MountAccess access = MountAccessOf(m->first);
      for (v1::ObjectInfo& e : *resp->mutable_entries()) {
        PresentAccess(access, &e);
        e.set_writable(m->first.writable());
      }
    }
    resp->set_ring_version(membership_->version());
    return grpc::Status::OK;
  }

  grpc::Status Invalidate(grpc::ServerContext* ctx,
                          const v1::InvalidateRequest* req,
                          v1::InvalidateResponse* resp) override {
    if (grpc::Status denied = Enter(kInvalidate, *ctx); !denied.ok())
      return denied;
    absl::StatusOr<std::string> path = NormalizeClusterPath(req->path());
    if (!path.ok()) return ToGrpcStatus(path.status());
    resp->set_dropped(metadata_->Invalidate(*path));
    invalidations_->Add(*path);
    return grpc::Status::OK;
  }

  grpc::Status BeginWrite(grpc::ServerContext* ctx,
                          const v1::BeginWriteRequest* req,
                          v1::BeginWriteResponse* resp) override {
    if (grpc::Status denied = Enter(kBeginWrite, *ctx); !denied.ok())
      return denied;
    absl::StatusOr<v1::WriteHandle> h =
        writes_->Begin(auth_->CallerOf(*ctx), *req);
    if (!h.ok()) return ToGrpcStatus(MetadataError(h.status()));
    *resp->mutable_handle() = *std::move(h);
    return grpc::Status::OK;
  }

  grpc::Status CommitWrite(grpc::ServerContext* ctx,
                           const v1::CommitWriteRequest* req,
                           v1::CommitWriteResponse* resp) override {
    if (grpc::Status denied = Enter(kCommitWrite, *ctx); !denied.ok())
      return denied;
    absl::StatusOr<v1::CommitWriteResponse> r =
        writes_->Commit(auth_->CallerOf(*ctx), *req);
    if (!r.ok()) return ToGrpcStatus(MetadataError(r.status()));
    *resp = *std::move(r);
    Present(resp->stat().info().path(), resp->mutable_stat()->mutable_info());
    resp->mutable_stat()->set_ring_version(membership_->version());
    return grpc::Status::OK;
  }

  grpc::Status AbortWrite(grpc::ServerContext* ctx,
                          const v1::AbortWriteRequest* req,
                          v1::AbortWriteResponse*) override {
    if (grpc::Status denied = Enter(kAbortWrite, *ctx); !denied.ok())
      return denied;
    return ToGrpcStatus(writes_->Abort(auth_->CallerOf(*ctx), req->handle()));
  }

  grpc::Status GetCommittedWrite(grpc::ServerContext* ctx,
                                 const v1::GetCommittedWriteRequest* req,
                                 v1::CommittedWrite* resp) override {
    if (grpc::Status denied = Enter(kGetCommittedWrite, *ctx); !denied.ok())
      return denied;
    absl::StatusOr<v1::CommittedWrite> w = writes_->Committed(req->write_id());
    if (!w.ok()) return ToGrpcStatus(w.status());
    *resp = *std::move(w);
    return grpc::Status::OK;
  }

  grpc::Status GetInvalidations(grpc::ServerContext* ctx,
                                const v1::GetInvalidationsRequest* req,
                                v1::GetInvalidationsResponse* resp) override {
    if (grpc::Status denied = Enter(kGetInvalidations, *ctx); !denied.ok())
      return denied;
    *resp = invalidations_->Since(req->epoch(), req->after_seq());
    const Caller caller = auth_->CallerOf(*ctx);
    if (caller.role != Role::kAdmin &&
        (caller.local || !caller.mounts.empty())) {
      ShowInvalidationsTo(caller, resp);
    }
    return grpc::Status::OK;
  }

  // The log names every path written or invalidated, and every client
  // follows it: a caller held to a token's mounts or to file modes is told
  // of each path as it may see it (InvalidationSeenBy), so no name it may
  // not list reaches it, and what it cached still goes.
  void ShowInvalidationsTo(const Caller& caller,
                           v1::GetInvalidationsResponse* resp) const {
    absl::flat_hash_map<std::string, absl::flat_hash_map<std::string, bool>>
        listable;  // By mount path.
    absl::flat_hash_set<std::string> seen;
    google::protobuf::RepeatedPtrField<std::string> shown;
    for (const std::string& path : resp->paths()) {
      std::optional<std::string> told;
      absl::StatusOr<std::pair<v1::MountEntry, std::string>> m =
          mounts_->Resolve(path);
      if (!m.ok()) {
        // No mount's (one removed since, or a directory above mounts): the
        // caller's scope decides; a caller held to file modes is told only
        // of its first component, which is a mount table's (the path may
        // have been a hidden one of a mount removed since).
        absl::StatusOr<std::string> normal = NormalizeClusterPath(path);
        if (normal.ok() && LeadsIntoScope(caller.mounts, *normal)) {
          told = *std::move(normal);
          if (caller.local) told = told->substr(0, told->find('/', 1));
        }
      } else {
        const v1::MountEntry& mount = m->first;
        const MountAccess access = MountAccessOf(mount);
        absl::StatusOr<std::shared_ptr<UnderStore>> store =
            metadata_->Store(mount);
        std::optional<std::string> rel;
        if (store.ok()) {
          rel = InvalidationSeenBy(caller, mount.path(), access, **store,
                                   m->second, uid_, gid_,
                                   &listable[mount.path()]);
        } else if (MountInScope(caller.mounts, mount.path())) {
          rel = "";  // No store to ask: the mount's root, which hides all.
        }
        if (rel) {
          told = rel->empty() ? mount.path()
                              : absl::StrCat(mount.path(), "/", *rel);
        }
      }
      if (told && seen.insert(*told).second) *shown.Add() = *std::move(told);
    }
    resp->mutable_paths()->Swap(&shown);
  }

  grpc::Status StartLoad(grpc::ServerContext* ctx, const v1::LoadRequest* req,
                         v1::LoadStatus* resp) override {
    if (grpc::Status denied = Enter(kStartLoad, *ctx); !denied.ok())
      return denied;
    absl::StatusOr<v1::LoadStatus> s = loads_->Start(req->path());
    if (!s.ok()) return ToGrpcStatus(s.status());
    *resp = *std::move(s);
    return grpc::Status::OK;
  }

  grpc::Status GetLoad(grpc::ServerContext* ctx, const v1::GetLoadRequest* req,
                       v1::LoadStatus* resp) override {
    if (grpc::Status denied = Enter(kGetLoad, *ctx); !denied.ok())
      return denied;
    // Not past the caller's deadline (a poller that gave up holds no
    // thread for long).
    absl::Duration wait =
        absl::Milliseconds(std::max<int64_t>(0, req->wait_ms()));
    wait = std::min(wait, absl::FromChrono(ctx->deadline()) - absl::Now() -
                              absl::Milliseconds(50));
    absl::StatusOr<v1::LoadStatus> s = loads_->Get(req->job_id(), wait);
    if (!s.ok()) return ToGrpcStatus(s.status());
    *resp = *std::move(s);
    return grpc::Status::OK;
  }

  grpc::Status Locate(grpc::ServerContext* ctx, const v1::LocateRequest* req,
                      v1::LocateResponse* resp) override {
    if (grpc::Status denied = Enter(kLocate, *ctx); !denied.ok()) return denied;
    absl::StatusOr<std::vector<BlockKey>> keys =
        Keys("block_keys", req->block_keys());
    if (!keys.ok()) return ToGrpcStatus(keys.status());
    for (const BlockKey& k : *keys) {
      auto* loc = resp->add_locations();
      for (const std::string& id : membership_->Locate(k))
        loc->add_worker_ids(id);
    }
    return grpc::Status::OK;
  }

  grpc::Status GetClusterStats(grpc::ServerContext* ctx,
                               const v1::ClusterStatsRequest*,
                               v1::ClusterStatsResponse* resp) override {
    if (grpc::Status denied = Enter(kGetClusterStats, *ctx); !denied.ok())
      return denied;
    resp->set_ring_version(membership_->version());
    std::vector<v1::ClusterStatsResponse::Worker*> alive_workers;
    for (const auto& [info, alive] : membership_->Workers()) {
      auto* w = resp->add_workers();
      *w->mutable_info() = info;
      w->set_alive(alive);
      w->set_placement_blocks(membership_->BlocksOf(info.id()));
      if (alive) alive_workers.push_back(w);
    }
    // Every worker at once, under one deadline: one after another, a
    // thousand workers (or a few slow ones) held an RPC thread for minutes.
    const absl::Time deadline = absl::Now() + absl::Seconds(3);
    if (!alive_workers.empty()) {
      ThreadPool pool(
          static_cast<int>(std::min<size_t>(16, alive_workers.size())),
          "larder-stats");
      ParallelFor(pool, alive_workers.size(), [&](size_t i) {
        v1::ClusterStatsResponse::Worker* w = alive_workers[i];
        WorkerClient client(w->info().address(), *channels_);
        absl::StatusOr<v1::GetStatsResponse> s = client.GetStats(
            std::max(deadline - absl::Now(), absl::ZeroDuration()));
        if (s.ok()) {
          *w->mutable_stats() = *std::move(s);
        } else {
          w->set_error(std::string(s.status().message()));
        }
      });
    }
    return grpc::Status::OK;
  }

 private:
  const Master* const master_;
  const MasterOptions* const options_;
  const Authorizer* const auth_;
  const ChannelFactory* const channels_;
  MountRegistry* const mounts_;
  Membership* const membership_;
  UnderStoreMetadata* const metadata_;
  InvalidationLog* const invalidations_;
  LoadJobs* const loads_;
  Writes* const writes_;
  std::array<prometheus::Counter*, kRpcCount> rpcs_{};
  // Who the master runs as: the owner and group that stand for a mount's
  // unset ones (MayAccessPath's daemon_uid and daemon_gid).
  const uint32_t uid_ = ::geteuid();
  const uint32_t gid_ = ::getegid();

  // Sets the owner, group and mode of `path`'s mount on `info`.
  void Present(const std::string& path, v1::ObjectInfo* info) const {
    absl::StatusOr<std::pair<v1::MountEntry, std::string>> m =
        mounts_->Resolve(path);
    if (m.ok()) {
      PresentAccess(MountAccessOf(m->first), info);
      info->set_writable(m->first.writable());
    }
  }
  // The mount's owner, group and mode replace the object's own, unless the
  // mount keeps each file's own (per_file: the store set them).
  static void PresentAccess(const MountAccess& access, v1::ObjectInfo* info) {
    if (access.per_file) return;
    if (access.uid) {
      info->set_uid(*access.uid);
    } else {
      info->clear_uid();
    }
    if (access.gid) {
      info->set_gid(*access.gid);
    } else {
      info->clear_gid();
    }
    info->set_mode(access.mode);
    info->set_own_mode(false);
  }

  // A caller without credentials (the default of a server without
  // configured authentication) sees of a mount what its "other" bits show
  // (MayAccessPath), as the workers hold it to them for reads: a 0700
  // mount's names and sizes are not shown to anyone who asks. Tokens and
  // certificates are held to their role and mounts (CheckScope). A path in
  // no mount (the directories mount paths make) passes. `*checked` is set
  // for a caller so held, for the caller to filter a recursive listing.
  struct Access {
    Caller caller;
    std::string mount_path;
    MountAccess access;
    std::shared_ptr<UnderStore> store;
    std::string relative;
  };
  grpc::Status CheckAccess(const grpc::ServerContext& ctx,
                           const std::string& path, PathAccess want,
                           std::optional<Access>* checked) const {
    Caller caller = auth_->CallerOf(ctx);
    if (!caller.local || caller.role == Role::kAdmin) return grpc::Status::OK;
    absl::StatusOr<std::pair<v1::MountEntry, std::string>> m =
        mounts_->Resolve(path);
    if (!m.ok()) return grpc::Status::OK;
    const MountAccess access = MountAccessOf(m->first);
    absl::StatusOr<std::shared_ptr<UnderStore>> store =
        metadata_->Store(m->first);
    if (!store.ok()) return ToGrpcStatus(MetadataError(store.status()));
    absl::Status st = MayAccessPath(caller, m->first.path(), access, **store,
                                    m->second, want, uid_, gid_);
    // No such path (the check found none where the way is open): so it is
    // answered, not from a metadata cache that may hold what was there.
    if (!st.ok()) return ToGrpcStatus(st);
    if (access.per_file) {
      *checked = Access{std::move(caller), m->first.path(), access,
                        *std::move(store), m->second};
    }
    return grpc::Status::OK;
  }

  // A credential limited to mounts (TokenEntry::mounts) reads paths of
  // those only; paths above them (the directories that lead to them) list
  // what leads there.
  grpc::Status CheckScope(const grpc::ServerContext& ctx,
                          const std::string& path) const {
    const Caller caller = auth_->CallerOf(ctx);
    if (caller.mounts.empty()) return grpc::Status::OK;
    absl::StatusOr<std::pair<v1::MountEntry, std::string>> m =
        mounts_->Resolve(path);
    absl::StatusOr<std::string> normal = NormalizeClusterPath(path);
    const bool allowed =
        m.ok() ? MountInScope(caller.mounts, m->first.path())
               : normal.ok() && LeadsIntoScope(caller.mounts, *normal);
    if (allowed) return grpc::Status::OK;
    return grpc::Status(
        grpc::StatusCode::PERMISSION_DENIED,
        absl::StrCat("the caller's token reads ",
                     absl::StrJoin(caller.mounts, ","), " only, not ", path));
  }
  // Whether cluster path `path` is in `scope` or a directory above a part
  // of it.
  static bool LeadsIntoScope(const std::vector<std::string>& scope,
                             absl::string_view path) {
    if (scope.empty() || MountInScope(scope, path) || path == "/") return true;
    for (const std::string& s : scope) {
      if (absl::StartsWith(s, path) && s.size() > path.size() &&
          s[path.size()] == '/') {
        return true;
      }
    }
    return false;
  }

  // Counts the call, checks the caller's role, and that this master leads.
  grpc::Status Enter(Rpc rpc, grpc::ServerContext& ctx) {
    rpcs_[rpc]->Increment();
    grpc::Status s = auth_->Check(ctx, kRpcs[rpc].role, kRpcs[rpc].name);
    if (s.ok() && !master_->Serving()) return master_->NotLeader(ctx);
    return s;
  }
};

}  // namespace

std::unique_ptr<grpc::Service> NewMasterService(
    const Master* master, const MasterOptions* options, MountRegistry* mounts,
    Membership* membership, UnderStoreMetadata* metadata,
    InvalidationLog* invalidations, LoadJobs* loads, Writes* writes,
    const Authorizer* auth, const ChannelFactory* channels,
    prometheus::Registry& registry) {
  return std::make_unique<MasterService>(master, options, mounts, membership,
                                         metadata, invalidations, loads, writes,
                                         auth, channels, registry);
}

}  // namespace larder
