// Copyright 2026 The Larder Authors.
#include "client/writer.h"

#include <algorithm>
#include <map>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/metadata_view.h"
#include "client/worker_client.h"
#include "common/block_key.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/retry.h"
#include "common/status_macros.h"
#include "common/thread_pool.h"
#include "common/write_parts.h"

namespace larder {
namespace {

// Whether another worker may succeed where this one failed: a retryable
// error, or one a worker that died mid-call leaves; not an error of the
// store behind it (retried there already), which another would meet too.
bool TryAnother(const absl::Status& st) {
  if (IsStoreError(st)) return false;
  return IsRetryable(st) || st.code() == absl::StatusCode::kAborted ||
         st.code() == absl::StatusCode::kInternal ||
         st.code() == absl::StatusCode::kUnknown ||
         st.code() == absl::StatusCode::kCancelled;
}

class WriterImpl final : public Writer {
 public:
  WriterImpl(WriterDeps deps, std::string path, v1::WriteHandle handle)
      : deps_(std::move(deps)),
        path_(std::move(path)),
        handle_(std::move(handle)),
        pool_(std::make_unique<ThreadPool>(std::max(1, deps_.parallel_writes),
                                           "larder-write")) {}

  ~WriterImpl() override {
    if (!done_) Abort().IgnoreError();
    pool_.reset();
  }

  absl::Status Write(absl::string_view data) override {
    if (done_) return Finished();
    LARDER_RETURN_IF_ERROR(error());
    while (!data.empty()) {
      const uint64_t want = WritePartBytes(handle_.part_size(), next_number_);
      if (buf_.capacity() < want) buf_.reserve(want);
      const size_t n = static_cast<size_t>(
          std::min<uint64_t>(want - buf_.size(), data.size()));
      buf_.append(data.data(), n);
      data.remove_prefix(n);
      size_ += n;
      if (buf_.size() == want) LARDER_RETURN_IF_ERROR(SendPart());
    }
    return absl::OkStatus();
  }

  absl::StatusOr<FileInfo> Close() override {
    if (done_) return Finished();
    const absl::Time close_start = absl::Now();
    // The last part (an empty object is one part of 0 bytes).
    absl::Status st = error();
    if (st.ok() && (!buf_.empty() || next_number_ == 1)) st = SendPart();
    WaitForParts();
    const absl::Time parts_done = absl::Now();
    if (st.ok()) st = error();
    if (!st.ok()) {
      Abort().IgnoreError();
      return st;
    }
    v1::CommitWriteRequest req;
    *req.mutable_handle() = handle_;
    {
      absl::MutexLock lock(&mu_);
      for (auto& [number, part] : parts_) *req.add_parts() = part;
    }
    v1::CommitWriteResponse resp;
    st = deps_.master_error(deps_.master->Call(&v1::Master::Stub::CommitWrite,
                                               req, &resp, absl::Minutes(10)));
    if (!st.ok()) {
      Abort().IgnoreError();
      return st;
    }
    done_ = true;
    const absl::Time committed = absl::Now();
    Publish(resp.stat());
    // The commit's invalidation, into this process's metadata cache.
    deps_.refresh_ring().IgnoreError();
    const absl::Time end = absl::Now();
    // Where a write's time went: from Close until the last parts were
    // uploaded, the commit at the master (the store's Complete), the
    // publish (the workers check the version and cache what they kept).
    LARDER_LOG(INFO, "write.closed")
        .Field("path", path_)
        .Field("bytes", size_)
        .Field("parts", next_number_ - 1)
        .Field("seconds", absl::ToDoubleSeconds(end - created_))
        .Field("last_parts_ms",
               absl::ToDoubleMilliseconds(parts_done - close_start))
        .Field("commit_ms", absl::ToDoubleMilliseconds(committed - parts_done))
        .Field("publish_ms", absl::ToDoubleMilliseconds(end - committed));
    return FromProto(resp.stat().info());
  }

  absl::Status Abort() override {
    if (done_) return absl::OkStatus();
    done_ = true;
    WaitForParts();
    v1::AbortWriteRequest req;
    *req.mutable_handle() = handle_;
    v1::AbortWriteResponse resp;
    absl::Status st = deps_.master_error(deps_.master->Call(
        &v1::Master::Stub::AbortWrite, req, &resp, absl::Seconds(60)));
    v1::PublishWriteRequest discard;
    *discard.mutable_handle() = handle_;
    discard.set_discard(true);
    // Every worker of the ring: a part that failed may have left blocks
    // with the workers it was forwarded to, which no answer named.
    std::map<std::string, std::shared_ptr<WorkerClient>> all;
    for (auto& [address, kept] : Kept()) all[address] = kept.client;
    std::shared_ptr<const RingSnapshot> ring = deps_.router->snapshot();
    for (const std::shared_ptr<WorkerClient>& c : ring->clients)
      all.emplace(c->address(), c);
    for (auto& [address, client] : all)
      client->PublishWrite(discard, absl::Seconds(10)).IgnoreError();
    return st;
  }

  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }

 private:
  struct KeptAt {
    std::shared_ptr<WorkerClient> client;
    std::vector<uint64_t> blocks;
  };

  absl::Status Finished() const {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, ": the writer is closed"));
  }

  absl::Status error() const {
    absl::MutexLock lock(&mu_);
    return error_;
  }

  // Hands buf_ to a thread as the next part, waiting while parallel_writes
  // parts are in flight.
  absl::Status SendPart() {
    if (next_number_ > kMaxWriteParts) {
      return absl::ResourceExhaustedError(absl::StrCat(
          path_, ": more than ", kMaxWriteParts,
          " parts; give WriteOptions::size_hint for objects this large"));
    }
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &WriterImpl::HasRoom));
      ++in_flight_;
    }
    auto data = std::make_shared<std::string>(std::move(buf_));
    buf_ = std::string();
    const uint32_t number = next_number_++;
    const uint64_t offset = offset_;
    offset_ += data->size();
    pool_->Schedule([this, number, offset, data] {
      absl::Status st = RunPart(number, offset, data);
      absl::MutexLock lock(&mu_);
      if (!st.ok() && error_.ok()) error_ = st;
      --in_flight_;
    });
    return absl::OkStatus();
  }

  bool HasRoom() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return in_flight_ <
           static_cast<uint32_t>(std::max(1, deps_.parallel_writes));
  }
  bool NoneInFlight() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return in_flight_ == 0;
  }

  void WaitForParts() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &WriterImpl::NoneInFlight));
  }

  // Sends one part to the worker that owns its first block (placement
  // leaves the version out, so the owners are known before the commit),
  // which uploads it, keeps the blocks it owns and sends the others to
  // their owners; so at the commit every block is at its owner. While
  // workers fail with errors another may not have, the part goes on to the
  // next worker of the ring. When all of them failed, the ring is asked for
  // again and the round repeated after a pause (250 ms, 500 ms, 1 s): a
  // worker that has not yet learnt a new mount while the master restarts
  // answers Unavailable for that long.
  absl::Status RunPart(uint32_t number, uint64_t offset,
                       const std::shared_ptr<const std::string>& part) {
    const std::string& data = *part;
    const uint64_t bs = handle_.block_size();
    std::vector<uint64_t> blocks;
    for (uint64_t at = 0; at < data.size(); at += bs)
      blocks.push_back((offset + at) / bs);
    absl::Status last = absl::UnavailableError("no worker in the ring");
    constexpr int kRounds = 4;
    for (int round = 0; round < kRounds; ++round) {
      std::shared_ptr<const RingSnapshot> ring = deps_.router->snapshot();
      const size_t n = ring->clients.size();
      // The owner of each block on this ring, as an index into it.
      std::vector<size_t> owner(blocks.size(), n);
      for (size_t b = 0; b < blocks.size(); ++b) {
        const BlockId id{
            handle_.mount(), handle_.relative(), "", blocks[b], bs, 0};
        Router::Route r = deps_.router->Owners(ring, id, 1);
        if (!r.empty())
          owner[b] =
              static_cast<size_t>(r.front().worker - ring->workers.data());
      }
      const size_t start =
          !blocks.empty() && owner[0] < n
              ? owner[0]
              : next_worker_.fetch_add(1) % std::max<size_t>(n, 1);
      for (size_t i = 0; i < n; ++i) {
        const size_t at = (start + i) % n;
        const std::shared_ptr<WorkerClient>& w = ring->clients[at];
        v1::WritePartHeader header;
        *header.mutable_handle() = handle_;
        header.set_number(number);
        header.set_offset(offset);
        header.set_size(data.size());
        header.set_upload(true);
        std::vector<uint64_t> own;
        for (size_t b = 0; b < blocks.size(); ++b) {
          if (owner[b] == at) {
            own.push_back(blocks[b]);
            header.add_keep_blocks(blocks[b]);
          } else if (owner[b] < n) {
            (*header.mutable_forward())[blocks[b]] =
                ring->workers[owner[b]].address();
          }
        }
        absl::StatusOr<v1::WritePartResponse> r =
            w->WritePart(header, data, part);
        // A worker whose write buffer is full: wait for it a little.
        for (int wait = 0;
             !r.ok() &&
             r.status().code() == absl::StatusCode::kResourceExhausted &&
             wait < 8;
             ++wait) {
          absl::SleepFor(absl::Milliseconds(50 << std::min(wait, 4)));
          r = w->WritePart(header, data, part);
        }
        if (r.ok()) {
          absl::MutexLock lock(&mu_);
          parts_[number] = r->part();
          if (r->kept_blocks() > 0) NoteKept(w, own);
          for (const auto& [index, address] : r->kept_elsewhere()) {
            for (size_t k = 0; k < n; ++k) {
              if (ring->workers[k].address() == address)
                NoteKept(ring->clients[k], {index});
            }
          }
          return absl::OkStatus();
        }
        last = r.status();
        LARDER_LOG(WARNING, "write.part")
            .Field("path", path_)
            .Field("part", number)
            .Field("worker", w->address())
            .Field("status", last);
        if (!TryAnother(last)) return last;
      }
      if (round + 1 < kRounds) {
        absl::SleepFor(absl::Milliseconds(250 << round));
        deps_.refresh_ring().IgnoreError();
      }
    }
    return absl::Status(
        last.code(),
        absl::StrCat(path_, ": part ", number,
                     ": no worker could upload it: ", last.message()));
  }

  // Notes that `w` keeps `blocks` until the publish.
  void NoteKept(const std::shared_ptr<WorkerClient>& w,
                const std::vector<uint64_t>& blocks)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    KeptAt& k = kept_[w->address()];
    k.client = w;
    k.blocks.insert(k.blocks.end(), blocks.begin(), blocks.end());
  }

  std::map<std::string, KeptAt> Kept() {
    absl::MutexLock lock(&mu_);
    return kept_;
  }

  // Tells each worker that kept blocks the committed version and the
  // owners of its blocks; they cache or forward them. Failures only cost
  // a later miss.
  void Publish(const v1::StatResponse& stat) {
    std::map<std::string, KeptAt> kept = Kept();
    std::vector<std::thread> threads;
    for (auto& [address, k] : kept) {
      v1::PublishWriteRequest req;
      *req.mutable_handle() = handle_;
      req.set_version(stat.info().version());
      req.set_object_size(stat.info().size());
      for (uint64_t index : k.blocks) {
        BlockId id{stat.mount(), stat.relative(),   stat.info().version(),
                   index,        stat.block_size(), stat.info().size()};
        Router::Route owners = deps_.router->Owners(id, 1);
        if (owners.empty()) continue;
        const std::string& owner = owners.front().worker->address();
        if (owner != address) (*req.mutable_forward())[index] = owner;
      }
      threads.emplace_back([this, req = std::move(req), client = k.client] {
        absl::StatusOr<v1::PublishWriteResponse> r = client->PublishWrite(req);
        if (!r.ok()) {
          LARDER_LOG(WARNING, "write.publish")
              .Field("path", path_)
              .Field("worker", client->address())
              .Field("status", r.status());
        }
      });
    }
    for (std::thread& t : threads) t.join();
  }

  const WriterDeps deps_;
  const std::string path_;
  const v1::WriteHandle handle_;
  const absl::Time created_ = absl::Now();
  std::string buf_;
  uint64_t size_ = 0;
  uint64_t offset_ = 0;
  uint32_t next_number_ = 1;
  bool done_ = false;
  std::atomic<size_t> next_worker_{0};
  mutable absl::Mutex mu_;
  uint32_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  std::map<uint32_t, v1::UploadedPart> parts_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, KeptAt> kept_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<ThreadPool> pool_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Writer>> CreateWriter(
    const WriterDeps& deps, absl::string_view path,
    const WriteOptions& options) {
  v1::BeginWriteRequest req;
  req.set_path(std::string(path));
  req.set_overwrite(options.overwrite);
  req.set_size_hint(options.size_hint);
  v1::BeginWriteResponse resp;
  LARDER_RETURN_IF_ERROR(deps.master_error(deps.master->Call(
      &v1::Master::Stub::BeginWrite, req, &resp, absl::Seconds(60))));
  if (resp.handle().part_size() == 0 || resp.handle().block_size() == 0 ||
      resp.handle().part_size() % resp.handle().block_size() != 0) {
    return absl::InternalError(
        absl::StrCat("the master answered BeginWrite with part size ",
                     resp.handle().part_size(), " for block size ",
                     resp.handle().block_size()));
  }
  return std::unique_ptr<Writer>(
      new WriterImpl(deps, std::string(path), resp.handle()));
}

}  // namespace larder
