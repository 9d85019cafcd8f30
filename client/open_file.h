// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: open_file.h
// -----------------------------------------------------------------------------
//
// larder::File as the client library opens it: a file pinned to the version
// it had at Open, read block by block through the block reader (the first
// block of a large read by the calling thread, the others in parallel on
// the client's pool), with readahead for a sequential reader. Internal to the
// client library.
#ifndef LARDER_CLIENT_OPEN_FILE_H_
#define LARDER_CLIENT_OPEN_FILE_H_

#include <atomic>
#include <functional>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "client/block_reader.h"
#include "common/block_key.h"
#include "common/status_macros.h"
#include "common/thread_pool.h"
#include "larder/client.h"
#include "proto/larder.pb.h"

namespace larder {

// What the files of one client read with; the client owns it and outlives
// its files.
struct FileContext {
  const Client* client;  // A batch takes only files of its own client.
  BlockReader* reader;
  ThreadPool* pool;
  // Blocks a sequential reader asks for ahead (ClientOptions).
  int readahead_blocks;
  // Asks for `ids` ahead (Client's readahead).
  std::function<void(const std::vector<BlockId>&)> readahead;
};

class OpenFile final : public File {
 public:
  OpenFile(const FileContext* context, v1::StatResponse stat);

  const FileInfo& info() const override { return info_; }
  absl::StatusOr<size_t> Read(uint64_t offset, absl::Span<char> out) override;
  absl::StatusOr<std::vector<ReadPiece>> ReadPieces(uint64_t offset,
                                                    uint64_t length) override;
  absl::StatusOr<ByteView> ReadView(uint64_t offset, uint64_t length) override;
  absl::StatusOr<LocalSlice> OpenLocalObject() override;

  // Block `index` of the file.
  BlockId Block(uint64_t index) const {
    return BlockId{stat_.mount(), stat_.relative(),   info_.version,
                   index,         stat_.block_size(), info_.size};
  }
  uint64_t blocks() const { return BlockCount(info_.size, stat_.block_size()); }
  const Client* client() const { return context_->client; }

 private:
  // The end of a read of `length` bytes at `offset`: clipped to the file,
  // `offset` when there is nothing to read; OutOfRange beyond the end.
  absl::StatusOr<uint64_t> End(uint64_t offset, uint64_t length) const;
  // Calls `read(i, block, in_block, at, n)` for the i-th block piece of
  // [offset, end): n bytes at `in_block` of `block`, `at` bytes into the
  // read. The first piece is read by this thread, the others in parallel on
  // the client's pool; returns the first error.
  absl::Status ForEachPiece(
      uint64_t offset, uint64_t end,
      absl::FunctionRef<absl::Status(
          size_t i, uint64_t block, uint64_t in_block, uint64_t at, uint64_t n)>
          read);
  // One result per block piece of [offset, end), in order, each from
  // `read(block, offset in the block, length)`; read as ForEachPiece does.
  template <typename T>
  absl::StatusOr<std::vector<T>> EachBlock(
      uint64_t offset, uint64_t end,
      absl::FunctionRef<absl::StatusOr<T>(const BlockId&, uint64_t, uint64_t)>
          read) {
    const uint64_t bs = stat_.block_size();
    std::vector<T> out((end - 1) / bs - offset / bs + 1);
    LARDER_RETURN_IF_ERROR(ForEachPiece(
        offset, end,
        [&](size_t i, uint64_t block, uint64_t in_block, uint64_t,
            uint64_t n) -> absl::Status {
          LARDER_ASSIGN_OR_RETURN(out[i], read(Block(block), in_block, n));
          return absl::OkStatus();
        }));
    return out;
  }
  // Starts readahead for a sequential reader of [offset, end).
  void NoteRead(uint64_t offset, uint64_t end);

  const FileContext* const context_;
  const v1::StatResponse stat_;
  const FileInfo info_;
  std::atomic<uint64_t> next_sequential_{0};
  // Blocks [.., until) already requested.
  std::atomic<uint64_t> readahead_until_{0};
};

}  // namespace larder

#endif  // LARDER_CLIENT_OPEN_FILE_H_
