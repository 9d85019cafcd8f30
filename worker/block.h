// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: block.h
// -----------------------------------------------------------------------------
//
// A cached block in memory. Its bytes live in a memfd, so the worker can hand
// a local client the file descriptor (short-circuit read) instead of copying
// the bytes through a socket. Once filled, the memfd is sealed (no write,
// grow or shrink by anyone, the client included), so a block is immutable
// for its whole life.
//
// Blocks of an object of several blocks may instead live in one memfd for
// the whole object (ObjectFile), each at its offset in the object, so that a
// fully cached object is one file the kernel can read directly (FUSE
// passthrough). Such a memfd is sealed against writes, growth and shrinking
// from the start: only the worker's own mapping, made before sealing, writes
// the blocks in, and bytes once written never change.
//
// Lifetime: blocks are shared (std::shared_ptr<const Block>); the memory is
// released when the last holder (cache tier, in-flight read, pending NVMe
// write) lets go; an object memfd when the last block of it goes. A client
// that received the fd keeps the pages alive by itself until it closes it.
//
// Usage:
//
//   LARDER_ASSIGN_OR_RETURN(BlockWriter w, BlockWriter::Create(id));
//   fill(w.buffer());
//   LARDER_ASSIGN_OR_RETURN(std::shared_ptr<const Block> block,
//   std::move(w).Finish());
#ifndef LARDER_WORKER_BLOCK_H_
#define LARDER_WORKER_BLOCK_H_

#include <atomic>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/block_key.h"

namespace larder {

// One memfd sized to a whole object, mapped once read-write (2 MiB-aligned)
// by the worker and sealed (F_SEAL_FUTURE_WRITE, no shrink or grow) before
// any block is written: holders of the fd can only read it. Thread-safe.
class ObjectFile {
 public:
  // Errors: ResourceExhausted (out of memory, address space or fds),
  // Internal (sealing failed).
  static absl::StatusOr<std::shared_ptr<ObjectFile>> Create(uint64_t size);
  ~ObjectFile();
  ObjectFile(const ObjectFile&) = delete;
  ObjectFile& operator=(const ObjectFile&) = delete;

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }
  char* data() const { return data_; }

 private:
  ObjectFile(int fd, char* data, uint64_t size)
      : fd_(fd), data_(data), size_(size) {}
  const int fd_;
  char* const data_;
  const uint64_t size_;
};

class Block {
 public:
  // The size of a transparent huge page (x86-64, arm64 with 4 KiB pages).
  static constexpr uint64_t kHugePageSize = 2u << 20;

  ~Block();
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

  const BlockId& id() const { return id_; }
  const BlockKey& key() const { return key_; }
  uint64_t length() const { return length_; }
  absl::string_view data() const { return {data_, length_}; }
  // The sealed memfd holding the bytes at offset(): the block's own, or its
  // object's. Owned by the block (or its object). Dup it to pass it on.
  int fd() const { return object_ ? object_->fd() : fd_; }
  uint64_t offset() const { return object_ ? id_.offset() : 0; }
  // The object memfd this block lives in; null for a memfd of its own.
  const std::shared_ptr<const ObjectFile>& object() const { return object_; }

  // Moves the block's memory into 2 MiB pages (MADV_COLLAPSE; the tail short
  // of 2 MiB stays in 4 KiB pages). The bytes do not change and readers may
  // go on reading meanwhile. Blocks are filled into 4 KiB pages, which the
  // kernel hands out faster than zeroed 2 MiB ones; reads of 2 MiB pages are
  // faster (one page to look up, pin or splice instead of 512). Works with
  // any transparent_hugepage/shmem_enabled setting but deny.
  // Errors: Unimplemented (the kernel cannot: before Linux 6.1, or deny),
  // Unavailable (pages busy, e.g. in a pipe: try later), ResourceExhausted
  // (no free 2 MiB page).
  absl::Status CollapseToHugePages() const;
  // When the block was filled.
  absl::Time filled_at() const { return filled_at_; }
  // True the first time only: the caller queues the block for collapse.
  bool MarkForCollapse() const { return !collapse_marked_.exchange(true); }

 private:
  friend class BlockWriter;
  Block(BlockId id, BlockKey key, int fd, char* data, uint64_t length,
        std::shared_ptr<const ObjectFile> object)
      : id_(std::move(id)),
        key_(key),
        fd_(fd),
        data_(data),
        length_(length),
        object_(std::move(object)) {}

  const BlockId id_;
  const BlockKey key_;
  const int fd_;  // -1 when the block lives in object_.
  // Shared mapping, length_ bytes; 2 MiB-aligned when it spans a 2 MiB page
  // (and, in an object, its offset is a multiple of 2 MiB).
  char* const data_;
  const uint64_t length_;
  const std::shared_ptr<const ObjectFile> object_;
  const absl::Time filled_at_ = absl::Now();
  mutable std::atomic<bool> collapse_marked_{false};
};

// Builds one block. Move-only; not thread-safe, but buffer() may be filled by
// several threads at disjoint offsets.
class BlockWriter {
 public:
  // A block in a memfd of its own, or at its offset in `object` (which
  // must be sized to the block's object). Errors: ResourceExhausted (out of
  // memory or file descriptors), InvalidArgument.
  static absl::StatusOr<BlockWriter> Create(
      BlockId id, std::shared_ptr<const ObjectFile> object = nullptr);

  BlockWriter(BlockWriter&& other) noexcept;
  BlockWriter& operator=(BlockWriter&&) = delete;
  ~BlockWriter();

  absl::Span<char> buffer() { return {data_, length_}; }

  // Seals the memfd and returns the immutable block. Errors: Internal.
  absl::StatusOr<std::shared_ptr<const Block>> Finish() &&;

 private:
  BlockWriter(BlockId id, int fd, char* data, uint64_t length,
              std::shared_ptr<const ObjectFile> object)
      : id_(std::move(id)),
        fd_(fd),
        data_(data),
        length_(length),
        object_(std::move(object)) {}

  BlockId id_;
  int fd_ = -1;
  char* data_ = nullptr;
  uint64_t length_ = 0;
  std::shared_ptr<const ObjectFile> object_;
};

}  // namespace larder

#endif  // LARDER_WORKER_BLOCK_H_
