// Copyright 2026 The Larder Authors.
//
// The block store's object memfds (blocks of one object kept in one memfd)
// and the exports that lend them whole (FUSE passthrough): block_store.h.
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "worker/block_store.h"

namespace larder {

std::shared_ptr<const ObjectFile> BlockStore::ObjectFor(const BlockId& id) {
  const uint64_t max = options_.object_file_max_bytes != 0
                           ? options_.object_file_max_bytes
                           : options_.ram_capacity_bytes / 4;
  if (id.object_size <= id.block_size || id.object_size > max ||
      id.block_size % 4096 != 0)
    return nullptr;
  const BlockKey key = ObjectKey(id);
  {
    absl::MutexLock lock(&mu_);
    if (auto it = objects_.find(key); it != objects_.end()) {
      if (std::shared_ptr<const ObjectFile> o = it->second.lock()) {
        // A memfd sized by a request that described the object wrongly (its
        // fetch will fail) is not shared: this block gets its own.
        return o->size() == id.object_size ? o : nullptr;
      }
    }
  }
  absl::StatusOr<std::shared_ptr<ObjectFile>> created =
      ObjectFile::Create(id.object_size);
  if (!created.ok()) {
    // The block gets a memfd of its own; only passthrough is lost.
    LARDER_LOG(WARNING, "ram.object_file")
        .Field("block", id.DebugString())
        .Field("status", created.status());
    return nullptr;
  }
  absl::MutexLock lock(&mu_);
  std::weak_ptr<const ObjectFile>& slot = objects_[key];
  if (std::shared_ptr<const ObjectFile> o = slot.lock())  // Raced.
    return o->size() == id.object_size ? o : nullptr;
  slot = *created;
  // Forget memfds whose blocks all left by other ways (TTL, eviction).
  if (objects_.size() >= 2 * objects_swept_ + 1024) {
    absl::erase_if(objects_,
                   [](const auto& kv) { return kv.second.expired(); });
    objects_swept_ = objects_.size();
  }
  return *std::move(created);
}

void BlockStore::RetireObjects(
    std::vector<std::shared_ptr<const Block>>* removed) {
  for (size_t i = 0; i < removed->size(); ++i) {
    std::shared_ptr<const ObjectFile> object = (*removed)[i]->object();
    if (!object) continue;
    const BlockKey key = ObjectKey((*removed)[i]->id());
    auto it = objects_.find(key);
    if (it == objects_.end() || it->second.lock() != object) continue;
    objects_.erase(it);
    BlockId sibling = (*removed)[i]->id();
    const uint64_t blocks = BlockCount(sibling.object_size, sibling.block_size);
    for (sibling.index = 0; sibling.index < blocks; ++sibling.index) {
      const BlockKey k = sibling.Key();
      auto* e = ram_.Find(k, absl::InfinitePast());
      if (e == nullptr || e->value->object() != object) continue;
      removed->push_back(*ram_.Erase(k));
    }
  }
}

absl::StatusOr<BlockStore::Export> BlockStore::ExportObject(const BlockId& id,
                                                            absl::Time until) {
  LARDER_RETURN_IF_ERROR(id.Validate());
  const absl::Time now = Touch();
  absl::MutexLock lock(&mu_);
  if (BlockCount(id.object_size, id.block_size) == 1) {
    // One block: its own memfd holds the object at offset 0 (small files
    // are read by the kernel from the worker's memory too).
    BlockId only = id;
    only.index = 0;
    std::shared_ptr<const Block> block = LookupRam(only.Key());
    if (!block || block->offset() != 0 || block->length() != id.object_size ||
        !CheckSameBlock(block->id(), only).ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(id.mount, "/", id.path, " is not in this worker's RAM"));
    }
    ram_.Lease(block->key(), until);
    metrics_->hits_ram.Increment();
    NoteReread(block, now);
    metrics_->leases.Set(++leases_);
    return Export{block->fd(), block->length(), block};
  }
  auto it = objects_.find(ObjectKey(id));
  std::shared_ptr<const ObjectFile> object =
      it == objects_.end() ? nullptr : it->second.lock();
  if (!object || object->size() != id.object_size) {
    return absl::FailedPreconditionError(absl::StrCat(
        id.mount, "/", id.path, " is not cached as one memfd on this worker"));
  }
  BlockId b = id;
  const uint64_t blocks = BlockCount(id.object_size, id.block_size);
  std::vector<std::shared_ptr<const Block>> found;
  for (b.index = 0; b.index < blocks; ++b.index) {
    std::shared_ptr<const Block> block = LookupRam(b.Key());
    if (!block || block->object() != object ||
        !CheckSameBlock(block->id(), b).ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("block ", b.index, " of ", id.mount, "/", id.path,
                       " is not in this worker's RAM"));
    }
    found.push_back(std::move(block));
  }
  for (const auto& block : found) {
    ram_.Lease(block->key(), until);
    metrics_->hits_ram.Increment();
    NoteReread(block, now);
  }
  leases_ += static_cast<int>(found.size());
  metrics_->leases.Set(leases_);
  return Export{object->fd(), object->size(), object};
}

void BlockStore::UnexportObject(const BlockId& id, absl::Time until) {
  absl::MutexLock lock(&mu_);
  BlockId b = id;
  const uint64_t blocks = BlockCount(id.object_size, id.block_size);
  for (b.index = 0; b.index < blocks; ++b.index) {
    ram_.Unlease(b.Key(), until);
    if (leases_ > 0) --leases_;
  }
  metrics_->leases.Set(leases_);
}

}  // namespace larder
