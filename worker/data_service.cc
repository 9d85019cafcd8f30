// Copyright 2026 The Larder Authors.
#include "worker/data_service.h"

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/read_block_wire.h"

namespace larder {

// Streams one block range as raw ReadBlockResponse messages. Deletes itself
// in OnDone.
class ReadBlockReactor final
    : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  ReadBlockReactor(DataService* service, grpc::CallbackServerContext* context,
                   const grpc::ByteBuffer* request)
      : service_(service) {
    if (grpc::Status denied =
            service_->auth_->Check(*context, Role::kReader, "ReadBlock");
        !denied.ok()) {
      Finish(denied);
      return;
    }
    v1::ReadBlockRequest req;
    std::vector<grpc::Slice> slices;
    std::string bytes;
    if (request->Dump(&slices).ok()) {
      for (const grpc::Slice& sl : slices)
        bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
    }
    if (!req.ParseFromString(bytes)) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "malformed ReadBlockRequest"));
      return;
    }
    id_ = FromProto(req.block());
    if (absl::Status st = id_.Validate(); !st.ok()) {
      Finish(ToGrpcStatus(st));
      return;
    }
    if (absl::Status st = service_->mounts_->MayRead(
            service_->auth_->CallerOf(*context), id_);
        !st.ok()) {
      Finish(ToGrpcStatus(st));
      return;
    }
    // Checked here against what the request says the block is, to refuse
    // early, and again in Start against the bytes the worker holds.
    if (absl::StatusOr<ByteRange> r =
            RangeWithin(id_.length(), req.offset(), 0);
        !r.ok()) {
      Finish(ToGrpcStatus(r.status()));
      return;
    }
    offset_ = req.offset();
    length_ = req.length() == 0 ? UINT64_MAX : req.length();
    chunk_ = req.max_chunk_bytes() == 0
                 ? service_->chunk_bytes_
                 : std::clamp<size_t>(req.max_chunk_bytes(),
                                      DataService::kMinChunkBytes,
                                      DataService::kMaxChunkBytes);
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
    absl::StatusOr<ByteRange> range =
        RangeWithin(block->length(), offset_, length_);
    if (!range.ok()) {
      Finish(ToGrpcStatus(range.status()));
      return;
    }
    pos_ = range->begin;
    end_ = range->end;
    block_ = std::move(block);
    source_ = source;
    WriteNext();
  }

  // Writes the next chunk; the last one (the only one for an empty range)
  // carries the status.
  void WriteNext() {
    const size_t n =
        static_cast<size_t>(std::min<uint64_t>(chunk_, end_ - pos_));
    // ReadBlockResponse: its head, then field 1's (data) bytes, which are
    // the block's own memory.
    const std::string head = ReadBlockResponseHead(
        first_, BlockSourceName(source_),
        service_->ring_version_ ? service_->ring_version_->load() : 0, n);
    grpc::Slice slices[2] = {
        grpc::Slice(head),
        grpc::Slice(
            const_cast<char*>(block_->data().data() + pos_), n,
            [](void* ref) {
              delete static_cast<std::shared_ptr<const Block>*>(ref);
            },
            new std::shared_ptr<const Block>(block_)),
    };
    response_ = grpc::ByteBuffer(slices, n == 0 ? 1 : 2);
    first_ = false;
    CountServed(service_->metrics_, source_, n, ServePath::kGrpc);
    pos_ += n;
    if (pos_ >= end_) {
      // The status goes out with the last chunk: no separate trailers
      // message for the client to wake up for.
      StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
      return;
    }
    StartWrite(&response_);
  }

  DataService* const service_;
  BlockId id_;
  std::atomic<bool> cancelled_{false};
  std::shared_ptr<const Block> block_;
  BlockSource source_ = BlockSource::kRam;
  uint64_t offset_ = 0;  // As requested.
  uint64_t length_ = 0;  // As requested; UINT64_MAX = to the end.
  uint64_t pos_ = 0;     // Within block_, as held: pos_ <= end_ <= length.
  uint64_t end_ = 0;
  size_t chunk_ = 0;  // Data bytes per message.
  bool first_ = true;
  grpc::ByteBuffer response_;
};

grpc::ServerWriteReactor<grpc::ByteBuffer>* DataService::ReadBlock(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return new ReadBlockReactor(this, context, request);
}

grpc::ServerUnaryReactor* DataService::CacheBlocks(
    grpc::CallbackServerContext* context, const v1::CacheBlocksRequest* request,
    v1::CacheBlocksResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status denied =
          auth_->Check(*context, Role::kReader, "CacheBlocks");
      !denied.ok()) {
    reactor->Finish(denied);
    return reactor;
  }
  const Caller caller = auth_->CallerOf(*context);
  for (const v1::BlockRef& ref : request->blocks()) {
    if (absl::Status st = mounts_->MayRead(caller, FromProto(ref)); !st.ok()) {
      reactor->Finish(ToGrpcStatus(st));
      return reactor;
    }
  }
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
                            ->Get(
                                FromProto(ref), deadline,
                                [context] { return context->IsCancelled(); },
                                /*count_hit=*/false)
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
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status denied = auth_->Check(*context, Role::kAdmin, "EvictBlocks");
      !denied.ok()) {
    reactor->Finish(denied);
    return reactor;
  }
  std::vector<BlockId> ids;
  for (const v1::BlockRef& ref : request->blocks())
    ids.push_back(FromProto(ref));
  uint64_t n = store_->Evict(ids);
  if (!request->path_prefix().empty())
    n += store_->EvictPrefix(request->path_prefix());
  response->set_evicted(n);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* DataService::GetStats(
    grpc::CallbackServerContext* context, const v1::GetStatsRequest*,
    v1::GetStatsResponse* response) {
  if (grpc::Status denied = auth_->Check(*context, Role::kReader, "GetStats");
      !denied.ok()) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(denied);
    return reactor;
  }
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
    t->set_hits(d.hits);
    t->set_degraded(d.degraded);
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
