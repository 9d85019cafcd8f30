// Copyright 2026 The Larder Authors.
#include "understore/under_store.h"

#include "absl/strings/str_cat.h"
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
    if (!page.next_page_token.empty() &&
        page.next_page_token == options.page_token) {
      return absl::InternalError(
          absl::StrCat(store.DebugString(), ": the listing of '", dir,
                       "' returned the page token it was given; stopped"));
    }
    options.page_token = std::move(page.next_page_token);
  } while (!options.page_token.empty());
  return absl::OkStatus();
}

absl::StatusOr<ObjectInfo> StatAsDirectory(UnderStore& store,
                                           const std::string& rel,
                                           absl::string_view what) {
  ListOptions probe;
  probe.page_size = 1;
  LARDER_ASSIGN_OR_RETURN(ListPage page, store.List(rel, probe));
  if (!rel.empty() && page.entries.empty()) {
    return absl::NotFoundError(
        absl::StrCat("stat of ", what, ": no such object or prefix"));
  }
  ObjectInfo info;
  info.path = rel;
  info.is_dir = true;
  return info;
}

}  // namespace larder
