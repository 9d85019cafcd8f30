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
#include "master/master_service.h"
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
    // etcd's leases are whole seconds: 2.5s would be granted as 2s while
    // this master counted on leading for 2.5s (another could lead by then).
    if (m->options_.leader_lease % absl::Seconds(1) != absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--leader_lease must be whole seconds (etcd's leases are), not ",
          absl::FormatDuration(m->options_.leader_lease)));
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
  m->writes_ = std::make_unique<Writes>(
      m->mounts_.get(), m->metadata_.get(), m->invalidations_.get(),
      m->store_.get(), m->options_.write_max_age);
  m->registry_ = std::make_shared<prometheus::Registry>();
  m->service_ = NewMasterService(
      m.get(), &m->options_, m->mounts_.get(), m->membership_.get(),
      m->metadata_.get(), m->invalidations_.get(), m->loads_.get(),
      m->writes_.get(), m->auth_.get(), m->channels_.get(), *m->registry_);
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
              "kind (stat: one object, e.g. an S3 HEAD; list: one page; "
              "paused: answered with the store's outage without asking)")
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
  auto& paused_requests = store_requests.Add({{"op", "paused"}});
  if (!m->options_.ops_listen.empty()) {
    OpsServer::Options ops;
    ops.listen = m->options_.ops_listen;
    ops.registry = m->registry_;
    Master* self = m.get();
    ops.before_scrape = [self, &ring_version, &live, &mounts, &stat_requests,
                         &list_requests, &paused_requests, &cache_entries,
                         &leading, &refused, &replicas, &index_bytes] {
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
      paused_requests.Set(static_cast<double>(req.paused));
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
    // Uploads begun by the last leader (or by this master before it
    // restarted) are committed and swept by this one.
    LARDER_RETURN_IF_ERROR(writes_->Reload());
    if (last_term_ != 0) {
      // Another leader may have had invalidations and mount changes.
      invalidations_->NewEpoch();
      metadata_->Invalidate("/");
    }
  } else {
    // Heartbeats were refused while deposed: every worker's last one may be
    // older than the timeout by now.
    membership_->Grace(absl::Now());
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
    writes_->AbortExpired(absl::Now());
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
