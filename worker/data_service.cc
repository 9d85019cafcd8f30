// Copyright 2026 The Larder Authors.
#include "worker/data_service.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/log.h"

namespace larder {

BlockId FromProto(const v1::BlockRef& ref) {
  return BlockId{ref.mount(), ref.path(),       ref.version(),
                 ref.index(), ref.block_size(), ref.object_size()};
}

void ToProto(const BlockId& id, v1::BlockRef* ref) {
  ref->set_mount(id.mount);
  ref->set_path(id.path);
  ref->set_version(id.version);
  ref->set_index(id.index);
  ref->set_block_size(id.block_size);
  ref->set_object_size(id.object_size);
}

namespace {

void CountServed(WorkerMetrics* m, BlockSource source, uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  switch (source) {
    case BlockSource::kRam:
      m->served_ram.Increment(b);
      break;
    case BlockSource::kNvme:
      m->served_nvme.Increment(b);
      break;
    case BlockSource::kUnderStore:
      m->served_under_store.Increment(b);
      break;
  }
  m->served_grpc.Increment(b);
}

}  // namespace

// Streams one block range. Deletes itself in OnDone.
class ReadBlockReactor final
    : public grpc::ServerWriteReactor<v1::ReadBlockResponse> {
 public:
  ReadBlockReactor(DataService* service, grpc::CallbackServerContext* context,
                   const v1::ReadBlockRequest* request)
      : service_(service), id_(FromProto(request->block())) {
    if (absl::Status st = id_.Validate(); !st.ok()) {
      Finish(ToGrpcStatus(st));
      return;
    }
    const uint64_t length = id_.length();
    if (request->offset() > length) {
      Finish(ToGrpcStatus(absl::OutOfRangeError(
          absl::StrCat("offset ", request->offset(), " beyond block ",
                       id_.DebugString(), " of ", length, " bytes"))));
      return;
    }
    pos_ = request->offset();
    end_ = request->length() == 0 ? length
                                  : std::min(length, pos_ + request->length());
    if (std::shared_ptr<const Block> b = service_->store_->TryGetCached(id_)) {
      Start(std::move(b), BlockSource::kRam);
      return;
    }
    const absl::Time deadline = absl::FromChrono(context->deadline());
    service_->executor_->Schedule([this, deadline] {
      absl::StatusOr<BlockRead> r = service_->store_->Get(
          id_, deadline, [this] { return cancelled_.load(); });
      if (!r.ok()) {
        Finish(ToGrpcStatus(r.status()));
        return;
      }
      Start(std::move(r->block), r->source);
    });
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
      return;
    }
    WriteNext();
  }
  void OnCancel() override { cancelled_ = true; }
  void OnDone() override { delete this; }

 private:
  void Start(std::shared_ptr<const Block> block, BlockSource source) {
    block_ = std::move(block);
    source_ = source;
    response_.set_source(std::string(BlockSourceName(source)));
    WriteNext();
  }

  void WriteNext() {
    if (pos_ >= end_ && !first_) {
      Finish(grpc::Status::OK);
      return;
    }
    const size_t n = static_cast<size_t>(
        std::min<uint64_t>(service_->chunk_bytes_, end_ - pos_));
    response_.set_data(block_->data().data() + pos_, n);
    if (!first_) response_.clear_source();
    first_ = false;
    CountServed(service_->metrics_, source_, n);
    pos_ += n;
    StartWrite(&response_);
  }

  DataService* const service_;
  const BlockId id_;
  std::atomic<bool> cancelled_{false};
  std::shared_ptr<const Block> block_;
  BlockSource source_ = BlockSource::kRam;
  uint64_t pos_ = 0;
  uint64_t end_ = 0;
  bool first_ = true;
  v1::ReadBlockResponse response_;
};

grpc::ServerWriteReactor<v1::ReadBlockResponse>* DataService::ReadBlock(
    grpc::CallbackServerContext* context, const v1::ReadBlockRequest* request) {
  return new ReadBlockReactor(this, context, request);
}

grpc::ServerUnaryReactor* DataService::CacheBlocks(
    grpc::CallbackServerContext* context, const v1::CacheBlocksRequest* request,
    v1::CacheBlocksResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  for (const v1::BlockRef& ref : request->blocks())
    store_->Prefetch(FromProto(ref));
  if (!request->wait()) {
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  const absl::Time deadline = absl::FromChrono(context->deadline());
  executor_->Schedule([this, reactor, request, response, deadline, context] {
    for (const v1::BlockRef& ref : request->blocks()) {
      absl::Status st = store_
                            ->Get(FromProto(ref), deadline,
                                  [context] { return context->IsCancelled(); })
                            .status();
      v1::BlockResult* r = response->add_results();
      *r->mutable_block() = ref;
      r->set_code(static_cast<int>(st.code()));
      r->set_message(RedactSecrets(st.message()));
    }
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* DataService::EvictBlocks(
    grpc::CallbackServerContext* context, const v1::EvictBlocksRequest* request,
    v1::EvictBlocksResponse* response) {
  std::vector<BlockId> ids;
  for (const v1::BlockRef& ref : request->blocks())
    ids.push_back(FromProto(ref));
  uint64_t n = store_->Evict(ids);
  if (!request->path_prefix().empty())
    n += store_->EvictPrefix(request->path_prefix());
  response->set_evicted(n);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* DataService::GetStats(
    grpc::CallbackServerContext* context, const v1::GetStatsRequest*,
    v1::GetStatsResponse* response) {
  BlockStore::Stats s = store_->GetStats();
  v1::TierStats* ram = response->add_tiers();
  ram->set_name("ram");
  ram->set_capacity_bytes(s.ram_capacity);
  ram->set_used_bytes(s.ram_used);
  ram->set_blocks(s.ram_blocks);
  ram->set_hits(static_cast<uint64_t>(metrics_->hits_ram.Value()));
  ram->set_evictions(s.ram_evictions);
  for (const NvmeTier::DirStats& d : s.nvme.dirs) {
    v1::TierStats* t = response->add_tiers();
    t->set_name(absl::StrCat("nvme:", d.path));
    t->set_capacity_bytes(d.capacity);
    t->set_used_bytes(d.used);
    t->set_blocks(d.blocks);
    t->set_evictions(d.evictions);
    t->set_degraded(d.degraded);
  }
  if (s.has_nvme && response->tiers_size() > 1) {
    response->mutable_tiers(1)->set_hits(
        static_cast<uint64_t>(metrics_->hits_nvme.Value()));
  }
  response->set_misses(static_cast<uint64_t>(metrics_->misses.Value()));
  response->set_single_flight_joins(
      static_cast<uint64_t>(metrics_->single_flight_joins.Value()));
  response->set_under_store_bytes(
      static_cast<uint64_t>(metrics_->under_store_bytes.Value()));
  response->set_checksum_failures(
      static_cast<uint64_t>(metrics_->checksum_failures.Value()));
  response->set_bytes_served_grpc(
      static_cast<uint64_t>(metrics_->served_grpc.Value()));
  response->set_bytes_served_short_circuit(
      static_cast<uint64_t>(metrics_->served_short_circuit.Value()));
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace larder
