// Copyright 2026 The Larder Authors.
#include "client/open_file.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "client/metadata_view.h"

namespace larder {

OpenFile::OpenFile(const FileContext* context, v1::StatResponse stat)
    : context_(context),
      stat_(std::move(stat)),
      info_(FromProto(stat_.info())) {}

void OpenFile::NoteRead(uint64_t offset, uint64_t end) {
  const uint64_t bs = stat_.block_size();
  const uint64_t last = (end - 1) / bs;
  // Sequential reader: ask the owners of the next blocks to fetch them now.
  // "Sequential" tolerates reordering within two blocks: the kernel's
  // readahead requests reach a FUSE daemon's threads in any order.
  const int ahead = context_->readahead_blocks;
  const uint64_t prev_end = next_sequential_.load();
  if (ahead > 0 && offset + 2 * bs >= prev_end && offset <= prev_end + 2 * bs) {
    const uint64_t total = BlockCount(info_.size, bs);
    // Refilled when half the window is used, so a reader of one block per
    // request asks for blocks in batches, not one at a time.
    uint64_t from = std::max(last + 1, readahead_until_.load());
    const uint64_t to = std::min(total, last + 1 + ahead);
    if (from < to &&
        ((to - from) * 2 >= static_cast<uint64_t>(ahead) || to == total)) {
      std::vector<BlockId> ids;
      for (uint64_t b = from; b < to; ++b) ids.push_back(Block(b));
      readahead_until_ = to;
      context_->readahead(ids);
    }
  }
  if (offset + 2 * bs < prev_end) {
    readahead_until_ = 0;  // A jump back: a new sequential run.
    next_sequential_ = end;
  } else if (end > prev_end) {
    next_sequential_ = end;
  }
}

absl::StatusOr<uint64_t> OpenFile::End(uint64_t offset, uint64_t length) const {
  if (offset > info_.size)
    return absl::OutOfRangeError(
        absl::StrCat("read at ", offset, " beyond ", info_.size));
  return offset + std::min<uint64_t>(info_.size - offset, length);
}

absl::StatusOr<std::vector<ReadPiece>> OpenFile::ReadPieces(uint64_t offset,
                                                            uint64_t length) {
  LARDER_ASSIGN_OR_RETURN(const uint64_t end, End(offset, length));
  if (end == offset) return std::vector<ReadPiece>{};
  NoteRead(offset, end);
  return EachBlock<ReadPiece>(
      offset, end, [&](const BlockId& id, uint64_t in_block, uint64_t n) {
        return context_->reader->Piece(id, in_block, n);
      });
}

absl::StatusOr<LocalSlice> OpenFile::OpenLocalObject() {
  if (info_.size == 0)
    return absl::FailedPreconditionError("an empty file has no memfd");
  return context_->reader->LocalObject(
      Block(0), BlockCount(info_.size, stat_.block_size()));
}

absl::Status OpenFile::ForEachPiece(
    uint64_t offset, uint64_t end,
    absl::FunctionRef<absl::Status(size_t, uint64_t, uint64_t, uint64_t,
                                   uint64_t)>
        read) {
  const uint64_t bs = stat_.block_size();
  const uint64_t first = offset / bs, last = (end - 1) / bs;
  auto piece = [&](size_t i) {
    const uint64_t b = first + i;
    const uint64_t lo = std::max(offset, b * bs),
                   hi = std::min(end, (b + 1) * bs);
    return read(i, b, lo - b * bs, lo - offset, hi - lo);
  };
  const size_t pieces = static_cast<size_t>(last - first + 1);
  if (pieces == 1) return piece(0);
  std::vector<absl::Status> results(pieces);
  std::atomic<size_t> left{pieces};
  absl::Notification done;
  for (size_t i = 1; i < pieces; ++i) {
    context_->pool->Schedule([&, i] {
      results[i] = piece(i);
      if (left.fetch_sub(1) == 1) done.Notify();
    });
  }
  results[0] = piece(0);
  if (left.fetch_sub(1) == 1) done.Notify();
  done.WaitForNotification();
  for (const absl::Status& st : results) LARDER_RETURN_IF_ERROR(st);
  return absl::OkStatus();
}

absl::StatusOr<size_t> OpenFile::Read(uint64_t offset, absl::Span<char> out) {
  LARDER_ASSIGN_OR_RETURN(const uint64_t end, End(offset, out.size()));
  if (end == offset) return 0;
  NoteRead(offset, end);
  LARDER_RETURN_IF_ERROR(ForEachPiece(
      offset, end,
      [&](size_t, uint64_t block, uint64_t in_block, uint64_t at, uint64_t n) {
        return context_->reader->Read(Block(block), in_block,
                                      out.subspan(at, n));
      }));
  return static_cast<size_t>(end - offset);
}

absl::StatusOr<ByteView> OpenFile::ReadView(uint64_t offset, uint64_t length) {
  LARDER_ASSIGN_OR_RETURN(const uint64_t end, End(offset, length));
  if (end == offset) return ByteView{};
  NoteRead(offset, end);
  LARDER_ASSIGN_OR_RETURN(
      std::vector<ByteView> views,
      EachBlock<ByteView>(
          offset, end, [&](const BlockId& id, uint64_t in_block, uint64_t n) {
            return context_->reader->View(id, in_block, n);
          }));
  ByteView out = std::move(views[0]);
  for (size_t i = 1; i < views.size(); ++i) out.Append(std::move(views[i]));
  return out;
}

}  // namespace larder
