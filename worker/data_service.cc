// Copyright 2026 The Larder Authors.
#include "worker/data_service.h"

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <thread>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/worker_client.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/read_block_wire.h"
#include "common/status_macros.h"
#include "common/write_part_wire.h"
#include "common/write_parts.h"

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
    ThreadPool* waits = service_->store_->OnNvme(id_)
                            ? service_->nvme_waits_.get()
                            : service_->executor_;
    waits->Schedule([this, deadline] {
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

// Receives one part of a write (worker/writes.h), keeps the blocks the
// writer asks this worker to keep, and uploads it when asked. Deletes itself
// in OnDone.
class WritePartReactor final
    : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  WritePartReactor(DataService* service, grpc::CallbackServerContext* context,
                   grpc::ByteBuffer* response)
      : service_(service), response_(response) {
    if (service_->staging_ == nullptr || service_->uploads_ == nullptr ||
        service_->intake_ == nullptr) {
      Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                          "this worker takes no writes"));
      return;
    }
    if (grpc::Status denied =
            service_->auth_->Check(*context, Role::kWriter, "WritePart");
        !denied.ok()) {
      Finish(denied);
      return;
    }
    caller_ = service_->auth_->CallerOf(*context);
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Complete();
      return;
    }
    // The message is parsed and its data copied into the part on the
    // writes' own threads, which run at a lower priority than gRPC's: those
    // serve the reads too, and a save's bytes must not delay them.
    service_->intake_->Schedule([this] {
      if (grpc::Status st = Take(); !st.ok()) {
        Done(st);
        return;
      }
      request_.Clear();
      StartRead(&request_);
    });
  }

  void OnDone() override {
    ReleaseBudget();
    delete this;
  }

 private:
  // One message of the stream: the header (first message only), then data,
  // appended to the part without protobuf's copy (write_part_wire.h).
  grpc::Status Take() {
    std::vector<grpc::Slice> slices;
    if (!request_.Dump(&slices).ok()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "WritePart: an undecodable message");
    }
    WritePartMessage m;
    if (absl::Status st = ParseWritePartRequest(slices, &m); !st.ok())
      return ToGrpcStatus(st);
    if (!have_header_) {
      if (!m.has_header) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            "WritePart: the first message has no header");
      }
      header_ = std::move(m.header);
      if (absl::Status st = Accept(); !st.ok()) return ToGrpcStatus(st);
      have_header_ = true;
    } else if (m.has_header) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "WritePart: a second header");
    }
    if (m.data_size > header_.size() - data_->size()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("WritePart: more data than the part's ",
                                       header_.size(), " bytes"));
    }
    for (absl::string_view piece : m.data)
      data_->append(piece.data(), piece.size());
    return grpc::Status::OK;
  }

  // Checks the header against the worker's mount and the caller's rights,
  // and reserves the part's bytes.
  absl::Status Accept() {
    const v1::WriteHandle& h = header_.handle();
    if (h.write_id().empty() || h.write_id().size() > 128) {
      return absl::InvalidArgumentError("WritePart: a bad write id");
    }
    LARDER_ASSIGN_OR_RETURN(Mount m, service_->mounts_->Get(h.mount()));
    LARDER_RETURN_IF_ERROR(MayWriteMount(caller_, h.mount(), m.writable));
    if (m.block_size != h.block_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "WritePart: block size ", h.block_size(), " differs from mount '",
          h.mount(), "' (", m.block_size, "): stale mount table"));
    }
    const uint64_t bs = h.block_size();
    if (header_.number() < 1 || header_.number() > kMaxWriteParts ||
        header_.offset() % bs != 0 || header_.size() > kMaxWritePartBytes ||
        header_.offset() > UINT64_MAX - header_.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "WritePart: part ", header_.number(), " at ", header_.offset(),
          " of ", header_.size(), " bytes is not a part (numbered 1 to ",
          kMaxWriteParts, ", at a multiple of the block size, at most ",
          kMaxWritePartBytes, " bytes)"));
    }
    auto in_part = [&](uint64_t index) {
      return index <= UINT64_MAX / bs && index * bs >= header_.offset() &&
             index * bs - header_.offset() <
                 std::max<uint64_t>(header_.size(), 1);
    };
    for (uint64_t index : header_.keep_blocks()) {
      if (!in_part(index)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "WritePart: block ", index, " is not in part ", header_.number()));
      }
    }
    for (const auto& [index, address] : header_.forward()) {
      if (!in_part(index) || address.empty() || address.size() > 256 ||
          absl::c_linear_search(header_.keep_blocks(), index)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "WritePart: block ", index, " of part ", header_.number(),
            " cannot be forwarded to '", address.substr(0, 256), "'"));
      }
    }
    if (header_.upload() && h.upload_id().empty()) {
      return absl::InvalidArgumentError("WritePart: no upload id");
    }
    // Blocks kept without an upload are those a peer that uploads their
    // part sends: only a worker (the admin role) may, or a writer could keep
    // bytes here that no upload ever carried.
    if (!header_.upload() && caller_.role != Role::kAdmin) {
      return absl::PermissionDeniedError(
          "WritePart: only a worker (the admin role) keeps blocks without "
          "uploading their part");
    }
    // An uploaded part is where its number puts it (as the master's commit
    // checks): a part numbered for one place whose blocks are kept for
    // another would be replaced in the store and not here.
    if (header_.upload() &&
        (h.part_size() == 0 || h.part_size() % bs != 0 ||
         h.part_size() > kMaxWritePartBytes ||
         header_.offset() != WritePartOffset(h.part_size(), header_.number()) ||
         header_.size() > WritePartBytes(h.part_size(), header_.number()))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "WritePart: part ", header_.number(), " at ", header_.offset(),
          " of ", header_.size(), " bytes is not where part ", header_.number(),
          " of parts of ", h.part_size(), " bytes goes"));
    }
    if (absl::Status st = service_->staging_->Reserve(header_.size());
        !st.ok()) {
      return absl::Status(st.code(), absl::StrCat("part ", header_.number(),
                                                  ": ", st.message()));
    }
    reserved_ = header_.size();
    data_->reserve(header_.size());
    store_ = m.store;
    return absl::OkStatus();
  }

  void Complete() {
    if (!have_header_) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "WritePart: no header"));
      return;
    }
    if (data_->size() != header_.size()) {
      Done(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("WritePart: the stream ended after ", data_->size(),
                       " of the part's ", header_.size(), " bytes")));
      return;
    }
    // A part that only keeps blocks (one a peer forwards) waits on no store
    // and no peer: done here. Work that waits on a peer runs on uploads_,
    // and never needs a peer's uploads_ thread in turn, so two workers'
    // forwards to each other cannot leave both pools waiting.
    if (!header_.upload() && header_.forward().empty()) {
      Done(ToGrpcStatus(Work()));
      return;
    }
    service_->uploads_->Schedule([this] { Done(ToGrpcStatus(Work())); });
  }

  // Gives the part's budget back before the answer leaves, so the writer's
  // next part finds it free (OnDone runs after the client has the answer).
  void Done(const grpc::Status& status) {
    ReleaseBudget();
    bool own_buffer;
    Finish(status.ok()
               ? grpc::SerializationTraits<v1::WritePartResponse>::Serialize(
                     out_, response_, &own_buffer)
               : status);
  }
  void ReleaseBudget() {
    if (reserved_ != 0) service_->staging_->Release(reserved_);
    reserved_ = 0;
  }

  absl::Status Work() {
    const v1::WriteHandle& h = header_.handle();
    // The blocks are kept as slices of the part (no copy), once the part is
    // in the store: bytes whose upload failed are no version's.
    auto keep = [&]() -> uint32_t {
      return header_.keep_blocks().empty()
                 ? 0
                 : service_->staging_->Keep(h, data_, header_.offset(),
                                            header_.keep_blocks(), &reserved_);
    };
    // The blocks other workers own go to them while the part uploads, one
    // thread per owner.
    std::map<std::string, std::vector<std::pair<uint64_t, WriteStaging::Block>>>
        by_owner;
    const uint64_t bs = h.block_size();
    for (const auto& [index, address] : header_.forward()) {
      const size_t begin = static_cast<size_t>(index * bs - header_.offset());
      by_owner[address].emplace_back(
          index, WriteStaging::Block{data_, begin,
                                     static_cast<size_t>(std::min<uint64_t>(
                                         bs, data_->size() - begin))});
    }
    absl::Mutex kept_mu;
    std::vector<std::thread> forwards;
    for (const auto& [address, blocks] : by_owner) {
      forwards.emplace_back([&, address = &address, blocks = &blocks] {
        std::vector<uint64_t> done = service_->SendKept(*address, h, *blocks);
        absl::MutexLock lock(&kept_mu);
        for (uint64_t index : done)
          (*out_.mutable_kept_elsewhere())[index] = *address;
      });
    }
    absl::StatusOr<UploadedPart> p = UploadedPart{};
    if (header_.upload()) {
      p = store_->UploadPart(h.relative(), h.upload_id(), header_.number(),
                             header_.offset(), *data_);
    }
    const uint32_t kept = p.ok() ? keep() : 0;
    for (std::thread& t : forwards) t.join();
    if (!p.ok()) {
      LARDER_LOG(WARNING, "write.upload_part")
          .Field("path", absl::StrCat(h.mount(), "/", h.relative()))
          .Field("part", header_.number())
          .Field("status", p.status());
      // The store's failure (already retried): another worker would meet
      // the same store.
      return MarkStoreError(p.status());
    }
    if (header_.upload()) {
      service_->metrics_->write_bytes.Increment(
          static_cast<double>(data_->size()));
      v1::UploadedPart* out = out_.mutable_part();
      out->set_number(p->number);
      out->set_offset(p->offset);
      out->set_size(p->size);
      out->set_token(std::move(p->token));
    }
    out_.set_kept_blocks(kept);
    return absl::OkStatus();
  }

  DataService* const service_;
  grpc::ByteBuffer* const response_;
  v1::WritePartResponse out_;
  Caller caller_;
  grpc::ByteBuffer request_;
  v1::WritePartHeader header_;
  bool have_header_ = false;
  // The part's bytes; its kept blocks share it (WriteStaging::Block).
  std::shared_ptr<std::string> data_ = std::make_shared<std::string>();
  uint64_t reserved_ = 0;
  std::shared_ptr<UnderStore> store_;
};

grpc::ServerReadReactor<grpc::ByteBuffer>* DataService::WritePart(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response) {
  return new WritePartReactor(this, context, response);
}

grpc::ServerUnaryReactor* DataService::PublishWrite(
    grpc::CallbackServerContext* context,
    const v1::PublishWriteRequest* request,
    v1::PublishWriteResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (staging_ == nullptr || uploads_ == nullptr || intake_ == nullptr) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                 "this worker takes no writes"));
    return reactor;
  }
  if (grpc::Status denied =
          auth_->Check(*context, Role::kWriter, "PublishWrite");
      !denied.ok()) {
    reactor->Finish(denied);
    return reactor;
  }
  const v1::WriteHandle& h = request->handle();
  absl::StatusOr<Mount> m = mounts_->Get(h.mount());
  absl::Status allowed =
      m.ok() ? MayWriteMount(auth_->CallerOf(*context), h.mount(), m->writable)
             : m.status();
  if (!allowed.ok()) {
    reactor->Finish(ToGrpcStatus(allowed));
    return reactor;
  }
  if (request->discard()) {
    staging_->Discard(h.write_id());
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  // A publish that forwards nothing (as every forwarded one) waits on no
  // peer, only on the master: on a pool of its own, so that publishes
  // forwarded between two workers never wait for each other's upload
  // threads, and a slow master holds up no part.
  ThreadPool* pool = request->forward().empty() ? publishes_.get() : uploads_;
  pool->Schedule([this, reactor, request, response, store = m->store] {
    const std::string& write_id = request->handle().write_id();
    if (!staging_->Has(write_id)) {
      reactor->Finish(grpc::Status::OK);  // Nothing kept: nothing to publish.
      return;
    }
    // What the master committed under this write id, not what the writer
    // says it did.
    absl::StatusOr<v1::CommittedWrite> committed =
        committed_ != nullptr
            ? committed_(write_id)
            : absl::FailedPreconditionError("no master to ask");
    if (!committed.ok()) {
      staging_->Discard(write_id);
      LARDER_LOG(WARNING, "write.publish_unconfirmed")
          .Field("write_id", write_id.substr(0, 64))
          .Field("status", committed.status());
      reactor->Finish(ToGrpcStatus(absl::FailedPreconditionError(absl::StrCat(
          "the master does not confirm write ", write_id.substr(0, 64), " (",
          committed.status().message(), "): its kept blocks are dropped"))));
      return;
    }
    const std::map<uint64_t, std::string> forward(request->forward().begin(),
                                                  request->forward().end());
    WriteStaging::Forwarded forwarded;
    absl::StatusOr<uint32_t> n = staging_->Publish(
        request->handle(), request->version(), request->object_size(),
        *committed, *store, forward, &forwarded);
    if (n.ok()) {
      response->set_published_blocks(*n);
      response->set_forwarded_blocks(Forward(*request, forwarded));
    }
    reactor->Finish(ToGrpcStatus(n.status()));
  });
  return reactor;
}

std::vector<uint64_t> DataService::SendKept(
    const std::string& address, const v1::WriteHandle& handle,
    const std::vector<std::pair<uint64_t, WriteStaging::Block>>& blocks) {
  std::vector<uint64_t> kept;
  if (channels_ == nullptr || peers_ == nullptr) {
    LARDER_LOG(WARNING, "write.forward")
        .Field("to", address)
        .Field("status", "a standalone worker has no peers to send blocks to");
    return kept;
  }
  if (!peers_->Contains(address)) {
    LARDER_LOG(WARNING, "write.forward")
        .Field("to", address.substr(0, 256))
        .Field("status", "not a worker of the ring: nothing sent");
    return kept;
  }
  WorkerClient peer(address, *channels_);
  for (const auto& [index, block] : blocks) {
    v1::WritePartHeader header;
    *header.mutable_handle() = handle;
    header.set_number(1);
    header.set_offset(index * handle.block_size());
    header.set_size(block.size);
    header.add_keep_blocks(index);
    absl::StatusOr<v1::WritePartResponse> r =
        peer.WritePart(header, block.bytes(), block.part);
    if (!r.ok()) {
      LARDER_LOG(WARNING, "write.forward")
          .Field("to", address)
          .Field("block", index)
          .Field("status", r.status());
      break;
    }
    if (r->kept_blocks() == 1) kept.push_back(index);
  }
  return kept;
}

uint32_t DataService::Forward(const v1::PublishWriteRequest& request,
                              WriteStaging::Forwarded& forwarded) {
  if (forwarded.empty()) return 0;
  // One thread per owner: each sends its blocks, then publishes them.
  std::atomic<uint32_t> sent{0};
  std::vector<std::thread> threads;
  for (auto& [address, blocks] : forwarded) {
    threads.emplace_back([&, address = address, blocks = &blocks] {
      const v1::WriteHandle& h = request.handle();
      if (SendKept(address, h, *blocks).empty()) return;
      WorkerClient peer(address, *channels_);
      v1::PublishWriteRequest publish;
      *publish.mutable_handle() = h;
      publish.set_version(request.version());
      publish.set_object_size(request.object_size());
      absl::StatusOr<v1::PublishWriteResponse> p = peer.PublishWrite(publish);
      if (!p.ok()) {
        LARDER_LOG(WARNING, "write.forward")
            .Field("to", address)
            .Field("status", p.status());
        return;
      }
      sent += p->published_blocks();
    });
  }
  for (std::thread& t : threads) t.join();
  return sent.load();
}

}  // namespace larder
