// Copyright 2026 The Larder Authors.
#include "client/worker_client.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"

namespace larder {
namespace {

void ToRef(const BlockId& id, v1::BlockRef* ref) {
  ref->set_mount(id.mount);
  ref->set_path(id.path);
  ref->set_version(id.version);
  ref->set_index(id.index);
  ref->set_block_size(id.block_size);
  ref->set_object_size(id.object_size);
}

void SetDeadline(grpc::ClientContext* ctx, absl::Duration timeout) {
  ctx->set_deadline(std::chrono::system_clock::now() +
                    absl::ToChronoMilliseconds(timeout));
}

}  // namespace

WorkerClient::WorkerClient(const std::string& address, int connections)
    : address_(address) {
  for (int i = 0; i < std::max(1, connections); ++i) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(16 << 20);
    // Distinct arguments keep gRPC from sharing one connection between them.
    args.SetInt("larder.connection_index", i);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    stubs_.push_back(v1::WorkerData::NewStub(grpc::CreateCustomChannel(
        address, grpc::InsecureChannelCredentials(), args)));
  }
}

v1::WorkerData::Stub& WorkerClient::NextStub() {
  return *stubs_[next_++ % stubs_.size()];
}

absl::StatusOr<size_t> WorkerClient::ReadBlock(const BlockId& id,
                                               uint64_t offset,
                                               absl::Span<char> buffer,
                                               absl::Duration timeout,
                                               std::string* source) {
  v1::ReadBlockRequest req;
  ToRef(id, req.mutable_block());
  req.set_offset(offset);
  req.set_length(buffer.size());
  grpc::ClientContext ctx;
  SetDeadline(&ctx, timeout);
  std::unique_ptr<grpc::ClientReader<v1::ReadBlockResponse>> reader =
      NextStub().ReadBlock(&ctx, req);
  v1::ReadBlockResponse resp;
  size_t done = 0;
  bool overflow = false;
  while (reader->Read(&resp)) {
    if (!resp.source().empty() && source != nullptr) *source = resp.source();
    const std::string& d = resp.data();
    if (d.size() > buffer.size() - done) {
      overflow = true;
      ctx.TryCancel();
      break;
    }
    std::memcpy(buffer.data() + done, d.data(), d.size());
    done += d.size();
  }
  grpc::Status st = reader->Finish();
  if (overflow)
    return absl::InternalError(
        absl::StrCat("worker ", address_, " sent more than requested"));
  if (!st.ok()) return FromGrpcStatus(st);
  return done;
}

absl::Status WorkerClient::CacheBlocks(const std::vector<BlockId>& ids,
                                       bool wait, absl::Duration timeout) {
  v1::CacheBlocksRequest req;
  for (const BlockId& id : ids) ToRef(id, req.add_blocks());
  req.set_wait(wait);
  v1::CacheBlocksResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(&ctx, timeout);
  grpc::Status st = NextStub().CacheBlocks(&ctx, req, &resp);
  if (!st.ok()) return FromGrpcStatus(st);
  for (const v1::BlockResult& r : resp.results()) {
    if (r.code() != 0)
      return absl::Status(static_cast<absl::StatusCode>(r.code()), r.message());
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::GetStatsResponse> WorkerClient::GetStats(
    absl::Duration timeout) {
  v1::GetStatsResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(&ctx, timeout);
  grpc::Status st = NextStub().GetStats(&ctx, v1::GetStatsRequest(), &resp);
  if (!st.ok()) return FromGrpcStatus(st);
  return resp;
}

absl::StatusOr<uint64_t> WorkerClient::EvictPrefix(const std::string& prefix) {
  v1::EvictBlocksRequest req;
  req.set_path_prefix(prefix);
  v1::EvictBlocksResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(&ctx, absl::Seconds(30));
  grpc::Status st = NextStub().EvictBlocks(&ctx, req, &resp);
  if (!st.ok()) return FromGrpcStatus(st);
  return resp.evicted();
}

}  // namespace larder
