// Copyright 2026 The Larder Authors.
#include "understore/factory.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "understore/azure_store.h"
#include "understore/file_store.h"
#include "understore/hdfs_store.h"
#include "understore/s3_store.h"
#include "understore/uri.h"

namespace larder {

absl::StatusOr<std::unique_ptr<UnderStore>> OpenUnderStore(
    absl::string_view uri, const UnderStoreOptions& options) {
  LARDER_ASSIGN_OR_RETURN(StoreUri parsed, ParseStoreUri(uri));
  if (parsed.scheme == "file") {
    LARDER_ASSIGN_OR_RETURN(auto store, FileStore::Open(parsed));
    return std::unique_ptr<UnderStore>(std::move(store));
  }
  if (parsed.scheme == "az") {
    LARDER_ASSIGN_OR_RETURN(auto store, AzureStore::Open(parsed, options));
    return std::unique_ptr<UnderStore>(std::move(store));
  }
  if (parsed.scheme == "hdfs" || parsed.scheme == "webhdfs" ||
      parsed.scheme == "swebhdfs") {
    LARDER_ASSIGN_OR_RETURN(auto store, HdfsStore::Open(parsed, options));
    return std::unique_ptr<UnderStore>(std::move(store));
  }
  if (parsed.scheme == "s3") {
    LARDER_ASSIGN_OR_RETURN(auto store, S3Store::Open(parsed, options));
    return std::unique_ptr<UnderStore>(std::move(store));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown under-store scheme '", parsed.scheme, "' in '", uri,
                   "' (supported: file, s3, az, hdfs, webhdfs, swebhdfs)"));
}

}  // namespace larder
