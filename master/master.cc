// Copyright 2026 The Larder Authors.
#include "master/master.h"

#include <google/protobuf/text_format.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/server_builder.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <unistd.h>

#include <algorithm>
#include <array>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/worker_client.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/master_connection.h"
#include "common/security.h"
#include "common/status_macros.h"
#include "common/thread_pool.h"
#include "master/invalidation_log.h"
#include "proto/master.grpc.pb.h"
#include "understore/mount_store.h"
#include "understore/uri.h"

namespace larder {
namespace {

constexpr char kRingName[] = "ring.textproto";

// The address the other masters give out for this one: --advertise, or the
// listen address with this host's name for a wildcard host.
absl::StatusOr<std::string> AdvertisedAddress(const MasterOptions& o) {
  if (!o.advertise.empty()) return o.advertise;
  const size_t colon = o.listen.rfind(':');
  int port = 0;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(o.listen.substr(colon + 1), &port) || port == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("with --etcd, --master_listen needs a fixed port (it is ",
                     o.listen, "), or set --advertise"));
  }
  std::string host = o.listen.substr(0, colon);
  if (host.empty() || host == "0.0.0.0" || host == "[::]" || host == "::") {
    char name[256] = {0};
    ::gethostname(name, sizeof(name) - 1);
    host = name;
  }
  return absl::StrCat(host, ":", port);
}

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
  }};

  MasterService(const Master* master, const MasterOptions* options,
                MountRegistry* mounts, Membership* membership,
                UnderStoreMetadata* metadata, InvalidationLog* invalidations,
                LoadJobs* loads, const Authorizer* auth,
                const ChannelFactory* channels, prometheus::Registry& registry)
      : master_(master),
        options_(options),
        auth_(auth),
        channels_(channels),
        mounts_(mounts),
        membership_(membership),
        metadata_(metadata),
        invalidations_(invalidations),
        loads_(loads) {
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
    return st;
  }

  grpc::Status Stat(grpc::ServerContext* ctx, const v1::StatRequest* req,
                    v1::StatResponse* resp) override {
    if (grpc::Status denied = Enter(kStat, *ctx); !denied.ok()) return denied;
    if (grpc::Status denied = CheckScope(*ctx, req->path()); !denied.ok())
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
    // Every entry is in the listed directory's mount: resolved once.
    if (absl::StatusOr<std::pair<v1::MountEntry, std::string>> m =
            mounts_->Resolve(path);
        m.ok()) {
      const MountAccess access = MountAccessOf(m->first);
      for (v1::ObjectInfo& e : *resp->mutable_entries())
        PresentAccess(access, &e);
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

  grpc::Status GetInvalidations(grpc::ServerContext* ctx,
                                const v1::GetInvalidationsRequest* req,
                                v1::GetInvalidationsResponse* resp) override {
    if (grpc::Status denied = Enter(kGetInvalidations, *ctx); !denied.ok())
      return denied;
    *resp = invalidations_->Since(req->epoch(), req->after_seq());
    return grpc::Status::OK;
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
    absl::StatusOr<v1::LoadStatus> s = loads_->Get(req->job_id());
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
  std::array<prometheus::Counter*, kRpcCount> rpcs_{};

  // Sets the owner, group and mode of `path`'s mount on `info`.
  void Present(const std::string& path, v1::ObjectInfo* info) const {
    absl::StatusOr<std::pair<v1::MountEntry, std::string>> m =
        mounts_->Resolve(path);
    if (m.ok()) PresentAccess(MountAccessOf(m->first), info);
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

absl::StatusOr<std::unique_ptr<Master>> Master::Start(MasterOptions options) {
  std::unique_ptr<Master> m(new Master(std::move(options)));
  LARDER_RETURN_IF_ERROR(
      CheckExposure("master", m->options_.listen, m->options_.security));
  LARDER_ASSIGN_OR_RETURN(m->auth_, Authorizer::Create(m->options_.security));
  LARDER_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> creds,
                          ServerCredentials(m->options_.security));
  LARDER_ASSIGN_OR_RETURN(m->channels_,
                          ChannelFactory::Create(m->options_.security));
  const bool ha = !m->options_.etcd.empty();
  if (ha) {
    EtcdOptions etcd;
    LARDER_ASSIGN_OR_RETURN(etcd.endpoints,
                            ParseEtcdEndpoints(m->options_.etcd));
    etcd.ca_file = m->options_.etcd_ca_file;
    etcd.cert_file = m->options_.etcd_cert_file;
    etcd.key_file = m->options_.etcd_key_file;
    LARDER_ASSIGN_OR_RETURN(m->etcd_, EtcdClient::Create(std::move(etcd)));
    if (m->options_.leader_lease < absl::Seconds(2)) {
      return absl::InvalidArgumentError(
          "--leader_lease must be at least 2s (etcd's shortest lease)");
    }
    LARDER_ASSIGN_OR_RETURN(m->options_.advertise,
                            AdvertisedAddress(m->options_));
    EtcdLeadership::Options lo;
    lo.prefix = m->options_.etcd_prefix;
    if (lo.prefix.empty() || lo.prefix.back() != '/') lo.prefix += '/';
    lo.advertise = m->options_.advertise;
    lo.lease_ttl = m->options_.leader_lease;
    Master* self = m.get();
    lo.on_elected = [self](int64_t term) { return self->OnElected(term); };
    lo.on_deposed = [self] { self->OnDeposed(); };
    auto leadership =
        std::make_unique<EtcdLeadership>(m->etcd_.get(), std::move(lo));
    auto store =
        std::make_unique<EtcdStateStore>(m->etcd_.get(), leadership.get());
    m->etcd_store_ = store.get();
    m->store_ = std::move(store);
    m->election_ = leadership.get();
    m->leadership_ = std::move(leadership);
  } else {
    LARDER_ASSIGN_OR_RETURN(m->store_,
                            LocalStateStore::Open(m->options_.state_dir));
    m->leadership_ = std::make_unique<SoleLeadership>(m->options_.listen);
  }
  // Read when this master becomes the leader (OnElected).
  m->mounts_ = MountRegistry::Unloaded(m->store_.get());
  m->membership_ = std::make_unique<Membership>(m->options_.heartbeat_timeout,
                                                m->options_.vnodes);
  m->metadata_ =
      std::make_unique<UnderStoreMetadata>(m->mounts_.get(), m->options_.store);
  m->invalidations_ = std::make_unique<InvalidationLog>();
  m->loads_ = std::make_unique<LoadJobs>(
      m->metadata_.get(), m->membership_.get(), m->channels_, m->store_.get());
  m->registry_ = std::make_shared<prometheus::Registry>();
  m->service_ = std::make_unique<MasterService>(
      m.get(), &m->options_, m->mounts_.get(), m->membership_.get(),
      m->metadata_.get(), m->invalidations_.get(), m->loads_.get(),
      m->auth_.get(), m->channels_.get(), *m->registry_);
  // The embedded master leads from the start.
  if (!ha) LARDER_RETURN_IF_ERROR(m->OnElected(1));
  grpc::ServerBuilder builder;
  builder.AddListeningPort(m->options_.listen, creds, &m->port_);
  builder.RegisterService(m->service_.get());
  // See MasterOptions::max_request_bytes: 20 unauthenticated 60 MB
  // requests grew the master by 1.38 GB under a 64 MiB limit.
  builder.SetMaxReceiveMessageSize(m->options_.max_request_bytes);
  // The size limit alone is not enough: gRPC reads a request whole before
  // checking its size, and 20 anonymous 60 MB requests still grew the
  // master by 0.9 GB under a 4 MiB limit. A memory quota on the transport
  // makes it stop reading (and, past the quota, cancel streams) instead:
  // with four largest requests' worth, the same attack grew it by < 100 MB.
  grpc::ResourceQuota quota("larder-master");
  quota.Resize(4 * static_cast<size_t>(m->options_.max_request_bytes));
  builder.SetResourceQuota(quota);
  m->server_ = builder.BuildAndStart();
  if (!m->server_ || m->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve gRPC on ", m->options_.listen));
  }
  auto& ring_version = prometheus::BuildGauge()
                           .Name("larder_master_ring_version")
                           .Help("Ring version.")
                           .Register(*m->registry_)
                           .Add({});
  auto& live = prometheus::BuildGauge()
                   .Name("larder_master_live_workers")
                   .Help("Workers in the ring.")
                   .Register(*m->registry_)
                   .Add({});
  auto& mounts = prometheus::BuildGauge()
                     .Name("larder_master_mounts")
                     .Help("Mounts in the table.")
                     .Register(*m->registry_)
                     .Add({});
  auto& store_requests =
      prometheus::BuildGauge()
          .Name("larder_master_under_store_metadata_requests")
          .Help(
              "Metadata requests the master has made to under-stores, by "
              "kind (stat: one object, e.g. an S3 HEAD; list: one page)")
          .Register(*m->registry_);
  auto& cache_entries = prometheus::BuildGauge()
                            .Name("larder_master_metadata_cache_entries")
                            .Help("Stat and List entries in the metadata cache")
                            .Register(*m->registry_)
                            .Add({});
  auto& leading = prometheus::BuildGauge()
                      .Name("larder_master_leader")
                      .Help("1 while this master leads and serves, else 0")
                      .Register(*m->registry_)
                      .Add({});
  auto& refused =
      prometheus::BuildGauge()
          .Name("larder_master_etcd_writes_refused")
          .Help(
              "Writes to etcd refused because this master's term as "
              "leader was over")
          .Register(*m->registry_)
          .Add({});
  auto& replicas = prometheus::BuildGauge()
                       .Name("larder_master_block_replicas")
                       .Help(
                           "Block replicas in the placement index (a block "
                           "cached by two workers counts twice)")
                       .Register(*m->registry_)
                       .Add({});
  auto& index_bytes =
      prometheus::BuildGauge()
          .Name("larder_master_placement_index_bytes")
          .Help(
              "Bytes the placement index takes: its tables and the workers' "
              "reported block lists")
          .Register(*m->registry_)
          .Add({});
  auto& stat_requests = store_requests.Add({{"op", "stat"}});
  auto& list_requests = store_requests.Add({{"op", "list"}});
  if (!m->options_.ops_listen.empty()) {
    OpsServer::Options ops;
    ops.listen = m->options_.ops_listen;
    ops.registry = m->registry_;
    Master* self = m.get();
    ops.before_scrape = [self, &ring_version, &live, &mounts, &stat_requests,
                         &list_requests, &cache_entries, &leading, &refused,
                         &replicas, &index_bytes] {
      leading.Set(self->Serving() ? 1 : 0);
      if (self->etcd_store_)
        refused.Set(static_cast<double>(self->etcd_store_->refused()));
      v1::Ring r = self->membership_->Ring();
      ring_version.Set(static_cast<double>(r.version()));
      live.Set(r.workers_size());
      mounts.Set(self->mounts_->Get().mounts_size());
      const UnderStoreMetadata::Requests req = self->metadata_->requests();
      stat_requests.Set(static_cast<double>(req.stats));
      list_requests.Set(static_cast<double>(req.lists));
      cache_entries.Set(static_cast<double>(self->metadata_->CachedEntries()));
      replicas.Set(static_cast<double>(self->membership_->replicas()));
      index_bytes.Set(static_cast<double>(self->membership_->IndexBytes()));
    };
    LARDER_ASSIGN_OR_RETURN(m->ops_, OpsServer::Start(std::move(ops)));
  }
  if (m->election_) m->election_->Start();
  m->reaper_ = std::thread([p = m.get()] { p->ReapLoop(); });
  LARDER_LOG(INFO, "master.started")
      .Field("port", m->port_)
      .Field("tls", !m->options_.security.tls_cert_file.empty())
      .Field("authentication", m->auth_->enabled())
      .Field("state", m->store_->Describe())
      .Field("advertise", ha ? m->options_.advertise : "")
      .Field("mounts", m->mounts_->Get().mounts_size());
  return m;
}

v1::MountTable Master::Mounts() const { return mounts_->Get(); }

bool Master::Serving() const {
  const int64_t term = leadership_ ? leadership_->Term() : 0;
  return term != 0 && term == serving_term_.load();
}

grpc::Status Master::NotLeader(grpc::ServerContext& ctx) const {
  std::string leader = leadership_ ? leadership_->Leader() : "";
  if (leader == options_.advertise) leader.clear();  // Taking over.
  ctx.AddTrailingMetadata(std::string(kLeaderTrailer),
                          leader.empty() ? "none" : leader);
  if (leader.empty()) {
    const std::string why = leadership_ ? leadership_->Why() : "";
    return ToGrpcStatus(absl::UnavailableError(
        absl::StrCat("no Larder master leads right now (",
                     why.empty() ? "an election is under way" : why, ")")));
  }
  return ToGrpcStatus(absl::UnavailableError(
      absl::StrCat("this master (", options_.advertise,
                   ") is not the leader; the leader is ", leader)));
}

absl::Status Master::OnElected(int64_t term) {
  // The same term again (this master stopped leading only because it could
  // not reach etcd, and nobody else led): its state is still current.
  if (term != last_term_) {
    LARDER_RETURN_IF_ERROR(mounts_->Reload());
    absl::StatusOr<std::string> text = store_->Get(kRingName);
    if (text.ok()) {
      v1::Ring ring;
      if (google::protobuf::TextFormat::ParseFromString(*text, &ring)) {
        membership_->Restore(ring, absl::Now());
      } else {
        LARDER_LOG(WARNING, "master.ring_corrupt")
            .Field("store", store_->Describe());
      }
    } else if (!absl::IsNotFound(text.status())) {
      return text.status();
    }
    if (last_term_ != 0) {
      // Another leader may have had invalidations and mount changes.
      invalidations_->NewEpoch();
      metadata_->Invalidate("/");
    }
  }
  // Stepping down stopped the jobs, whatever the term.
  LARDER_RETURN_IF_ERROR(loads_->Resume());
  last_term_ = term;
  serving_term_ = term;
  LARDER_LOG(INFO, "master.leading")
      .Field("term", term)
      .Field("mounts", mounts_->Get().mounts_size())
      .Field("ring_version", membership_->version());
  return absl::OkStatus();
}

void Master::OnDeposed() {
  serving_term_ = 0;
  loads_->StopAll();  // The next leader resumes them.
}

void Master::ReapLoop() {
  while (!stopping_) {
    absl::SleepFor(
        std::min(absl::Milliseconds(200), options_.heartbeat_timeout / 4));
    if (!Serving()) continue;
    membership_->Expire(absl::Now());
    // The ring goes to the store whenever it changed: the next leader (or
    // this master after a restart) starts from it.
    const v1::Ring ring = membership_->Ring();
    if (ring.version() != stored_ring_version_) {
      std::string text;
      google::protobuf::TextFormat::PrintToString(ring, &text);
      absl::Status st = store_->Put(kRingName, text);
      if (st.ok()) {
        stored_ring_version_ = ring.version();
      } else {
        LARDER_LOG(WARNING, "master.store_ring").Field("status", st);
      }
    }
  }
}

Master::~Master() { Shutdown(); }

void Master::Shutdown() {
  if (stopping_.exchange(true)) return;
  // A leader hands over first (its lease is revoked: another master takes
  // over at once).
  if (election_) election_->Stop();
  if (server_)
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(5));
  if (reaper_.joinable()) reaper_.join();
  ops_.reset();
  loads_.reset();
  LARDER_LOG(INFO, "master.stopped");
}

}  // namespace larder
