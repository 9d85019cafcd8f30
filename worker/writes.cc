// Copyright 2026 The Larder Authors.
#include "worker/writes.h"

#include <pthread.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/block_key.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace larder {
namespace {

// Whether two handles name one upload of one object.
bool SameUpload(const v1::WriteHandle& a, const v1::WriteHandle& b) {
  return a.write_id() == b.write_id() && a.mount() == b.mount() &&
         a.relative() == b.relative() && a.upload_id() == b.upload_id() &&
         a.block_size() == b.block_size();
}

}  // namespace

WriteStaging::WriteStaging(BlockStore* store, WriteStagingOptions options)
    : store_(store), options_(options) {
  const absl::Duration period = std::clamp(
      options_.max_age / 4, absl::Milliseconds(10), absl::Minutes(1));
  expiry_ = std::thread([this, period] { ExpireEvery(period); });
}

WriteStaging::~WriteStaging() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  expiry_.join();
}

void WriteStaging::ExpireEvery(absl::Duration period) {
  ::pthread_setname_np(::pthread_self(), "larder-writeage");
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stop_), period)) return;
    }
    Expire(absl::Now());
  }
}

absl::Status WriteStaging::Reserve(uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  if (bytes > options_.max_bytes) {
    return absl::FailedPreconditionError(absl::StrCat(
        "a part of ", bytes,
        " bytes is larger than the worker's whole "
        "write buffer (--write_buffer, ",
        options_.max_bytes, " bytes): raise it to at least the part size"));
  }
  if (receiving_ + bytes > options_.max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the worker's write buffer (--write_buffer, ", options_.max_bytes,
        " bytes) is held by parts being received; a part of ", bytes,
        " bytes must wait (retry)"));
  }
  if (bytes_ + bytes > options_.max_bytes) DropKeptFor(bytes);
  bytes_ += bytes;
  receiving_ += bytes;
  return absl::OkStatus();
}

void WriteStaging::Release(uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  bytes = std::min(receiving_, bytes);
  receiving_ -= bytes;
  bytes_ -= std::min(bytes_, bytes);
}

void WriteStaging::DropKeptFor(uint64_t needed) {
  uint64_t dropped = 0;
  while (bytes_ + needed > options_.max_bytes && !writes_.empty()) {
    auto oldest = writes_.begin();
    for (auto it = writes_.begin(); it != writes_.end(); ++it) {
      if (it->second.first < oldest->second.first) oldest = it;
    }
    auto& blocks = oldest->second.blocks;
    while (bytes_ + needed > options_.max_bytes && !blocks.empty()) {
      bytes_ -= std::min<uint64_t>(bytes_, blocks.begin()->second.size);
      blocks.erase(blocks.begin());
      ++dropped;
    }
    if (blocks.empty()) writes_.erase(oldest);
  }
  dropped_blocks_ += dropped;
  if (dropped > 0) {
    LARDER_LOG(INFO, "write.kept_dropped")
        .Field("blocks", dropped)
        .Field("why", "room for a part being received (--write_buffer)");
  }
}

uint32_t WriteStaging::Keep(const v1::WriteHandle& handle,
                            std::shared_ptr<const std::string> part,
                            uint64_t part_offset,
                            absl::Span<const uint64_t> indexes,
                            uint64_t* reservation) {
  const uint64_t bs = handle.block_size();
  std::vector<std::pair<uint64_t, Block>> blocks;
  blocks.reserve(indexes.size());
  uint64_t adding = 0;
  for (uint64_t index : indexes) {
    if (bs == 0 || index > UINT64_MAX / bs || index * bs < part_offset)
      return 0;
    const uint64_t begin = index * bs - part_offset;
    // A 0-byte part holds one block of 0 bytes (an empty object).
    if (begin > part->size() || (begin == part->size() && begin != 0)) return 0;
    const size_t size =
        static_cast<size_t>(std::min<uint64_t>(bs, part->size() - begin));
    blocks.emplace_back(index, Block{part, static_cast<size_t>(begin), size});
    adding += size;
  }
  absl::MutexLock lock(&mu_);
  auto [it, added] = writes_.try_emplace(handle.write_id());
  Kept& k = it->second;
  if (added) {
    k.handle = handle;
    k.first = absl::Now();
  } else if (!SameUpload(k.handle, handle)) {
    // One write id, two handles: the blocks of one object version come
    // with one upload (Publish checks that one against the master's).
    return 0;
  }
  uint64_t replacing = 0;
  for (const auto& [index, block] : blocks) {
    if (auto old = k.blocks.find(index); old != k.blocks.end())
      replacing += old->second.size;
  }
  // The kept bytes come out of the part's reservation where there is one.
  const uint64_t moved =
      reservation == nullptr ? 0 : std::min({adding, *reservation, receiving_});
  if (bytes_ - replacing - moved + adding > options_.max_bytes) {
    if (k.blocks.empty()) writes_.erase(it);
    return 0;
  }
  bytes_ = bytes_ - replacing - moved + adding;
  receiving_ -= moved;
  if (reservation != nullptr) *reservation -= moved;
  for (auto& [index, block] : blocks) k.blocks[index] = std::move(block);
  return static_cast<uint32_t>(blocks.size());
}

absl::StatusOr<uint32_t> WriteStaging::Publish(
    const v1::WriteHandle& handle, const std::string& version,
    uint64_t object_size, const v1::CommittedWrite& committed,
    UnderStore& store, const std::map<uint64_t, std::string>& forward,
    Forwarded* forwarded) {
  Kept kept;
  {
    absl::MutexLock lock(&mu_);
    auto it = writes_.find(handle.write_id());
    if (it == writes_.end()) return 0;
    kept = Take(it);
  }
  // The handle must be the one the blocks came with: a writer cannot move
  // another path's blocks.
  const v1::WriteHandle& h = kept.handle;
  if (h.mount() != handle.mount() || h.relative() != handle.relative() ||
      h.block_size() != handle.block_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "write ", handle.write_id(), ": the handle differs from its parts'"));
  }
  // The master must have committed this very upload as this version: on a
  // writer's word one could keep bytes under a write id the master never
  // began and publish them as the object's current version.
  if (!SameUpload(committed.handle(), h) || committed.version() != version ||
      committed.object_size() != object_size) {
    return absl::FailedPreconditionError(absl::StrCat(
        h.mount(), "/", h.relative(), ": the master did not commit write ",
        h.write_id().substr(0, 64), " as version ", version.substr(0, 256),
        " (", object_size, " bytes): the kept blocks are dropped"));
  }
  // The store must hold this version with this size now: otherwise the
  // bytes kept are not (or no longer) the object's, and are dropped.
  LARDER_ASSIGN_OR_RETURN(ObjectInfo info, store.Stat(h.relative()));
  if (info.version != version || info.size != object_size) {
    return absl::FailedPreconditionError(absl::StrCat(
        h.mount(), "/", h.relative(), ": the under-store holds version ",
        info.version, " (", info.size, " bytes), not ", version, " (",
        object_size, " bytes): the kept blocks are dropped"));
  }
  uint32_t published = 0;
  for (auto& [index, block] : kept.blocks) {
    BlockId id;
    id.mount = h.mount();
    id.path = h.relative();
    id.version = version;
    id.index = index;
    id.block_size = h.block_size();
    id.object_size = object_size;
    if (absl::Status st = id.Validate();
        !st.ok() || block.size != id.length()) {
      LARDER_LOG(WARNING, "write.kept_block_mismatch")
          .Field("block", id.DebugString())
          .Field("kept_bytes", block.size)
          .Field("status", st);
      continue;
    }
    if (auto f = forward.find(index);
        f != forward.end() && !f->second.empty()) {
      (*forwarded)[f->second].emplace_back(index, std::move(block));
      continue;
    }
    if (absl::Status st = store_->Put(id, block.bytes()); !st.ok()) {
      LARDER_LOG(WARNING, "write.publish_block")
          .Field("block", id.DebugString())
          .Field("status", st);
      continue;
    }
    ++published;
  }
  return published;
}

bool WriteStaging::Has(const std::string& write_id) const {
  absl::MutexLock lock(&mu_);
  return writes_.contains(write_id);
}

void WriteStaging::Discard(const std::string& write_id) {
  absl::MutexLock lock(&mu_);
  auto it = writes_.find(write_id);
  if (it != writes_.end()) Take(it);
}

void WriteStaging::Expire(absl::Time now) {
  std::vector<Kept> expired;  // Freed after the lock.
  {
    absl::MutexLock lock(&mu_);
    for (auto it = writes_.begin(); it != writes_.end();) {
      if (now - it->second.first > options_.max_age) {
        expired.push_back(Take(it++));
      } else {
        ++it;
      }
    }
  }
  for (const Kept& k : expired) {
    LARDER_LOG(INFO, "write.kept_expired")
        .Field("path", absl::StrCat(k.handle.mount(), "/", k.handle.relative()))
        .Field("blocks", k.blocks.size())
        .Field("max_age", options_.max_age);
  }
}

WriteStaging::Kept WriteStaging::Take(WriteMap::iterator it) {
  for (const auto& [index, block] : it->second.blocks)
    bytes_ -= std::min<uint64_t>(bytes_, block.size);
  Kept kept = std::move(it->second);
  writes_.erase(it);
  return kept;
}

uint64_t WriteStaging::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

uint64_t WriteStaging::receiving() const {
  absl::MutexLock lock(&mu_);
  return receiving_;
}

uint64_t WriteStaging::dropped_blocks() const {
  absl::MutexLock lock(&mu_);
  return dropped_blocks_;
}

size_t WriteStaging::writes() const {
  absl::MutexLock lock(&mu_);
  return writes_.size();
}

}  // namespace larder
