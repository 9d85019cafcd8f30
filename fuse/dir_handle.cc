// Copyright 2026 The Larder Authors.
#include "fuse/dir_handle.h"

#include "common/status_macros.h"

namespace larder {

absl::StatusOr<bool> DirHandle::Seek(Client& client, int page_size,
                                     uint64_t index) {
  if (!loaded_ && !paged_) {
    absl::StatusOr<std::shared_ptr<const std::vector<FileInfo>>> all =
        client.ListDir(path);
    if (all.ok()) {
      loaded_ = true;
      all_ = *std::move(all);
    } else if (all.status().code() == absl::StatusCode::kResourceExhausted) {
      paged_ = true;
    } else {
      return all.status();
    }
  }
  if (all_) {
    if (index >= all_->size()) return false;
    return true;
  }
  if (!loaded_ || index < page_start_) {  // (Re)start the listing.
    LARDER_ASSIGN_OR_RETURN(ListResult r, client.List(path, "", page_size));
    loaded_ = true;
    page_start_ = 0;
    page_ = std::move(r.entries);
    next_token_ = std::move(r.next_page_token);
  }
  while (index >= page_start_ + page_.size()) {
    if (next_token_.empty()) return false;
    LARDER_ASSIGN_OR_RETURN(ListResult r,
                            client.List(path, next_token_, page_size));
    page_start_ += page_.size();
    page_ = std::move(r.entries);
    next_token_ = std::move(r.next_page_token);
    if (page_.empty() && next_token_.empty()) return false;
  }
  return true;
}

}  // namespace larder
