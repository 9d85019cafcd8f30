// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: factory.h
// -----------------------------------------------------------------------------
//
// Opens an under-store from its URI:
//
//   file:///data/imagenet                       local or NFS directory
//   s3://bucket/prefix?endpoint=...&region=...  S3 or S3-compatible
//
// Usage:
//
//   LARDER_ASSIGN_OR_RETURN(std::unique_ptr<UnderStore> store,
//                           OpenUnderStore("s3://data/imagenet", {}));
#ifndef LARDER_UNDERSTORE_FACTORY_H_
#define LARDER_UNDERSTORE_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "understore/options.h"
#include "understore/under_store.h"

namespace larder {

// Errors: InvalidArgument (malformed URI, unknown scheme or option), NotFound
// (file:// root missing), Unauthenticated (S3 without credentials). Object
// stores are not contacted here; the first Stat/List/Read is.
absl::StatusOr<std::unique_ptr<UnderStore>> OpenUnderStore(
    absl::string_view uri, const UnderStoreOptions& options = {});

}  // namespace larder

#endif  // LARDER_UNDERSTORE_FACTORY_H_
