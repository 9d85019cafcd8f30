// Copyright 2026 The Larder Authors.
#include "understore/under_store.h"

#include "common/status_macros.h"

namespace larder {

absl::Status ListAll(UnderStore& store, absl::string_view dir, bool recursive,
                     absl::FunctionRef<absl::Status(const ObjectInfo&)> fn,
                     size_t page_size) {
  ListOptions options;
  options.recursive = recursive;
  options.page_size = page_size;
  do {
    LARDER_ASSIGN_OR_RETURN(ListPage page, store.List(dir, options));
    for (const ObjectInfo& entry : page.entries)
      LARDER_RETURN_IF_ERROR(fn(entry));
    options.page_token = std::move(page.next_page_token);
  } while (!options.page_token.empty());
  return absl::OkStatus();
}

}  // namespace larder
