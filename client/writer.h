// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: writer.h
// -----------------------------------------------------------------------------
//
// The client's half of a write (Client::Create; the protocol is described
// with Master.BeginWrite in proto/master.proto):
//
//   1. BeginWrite at the master: the handle (upload id, part size).
//   2. Write cuts the bytes into parts (common/write_parts.h) and sends each,
//      as soon as it is full, to the worker that owns the part's first block
//      (a block's place on the ring leaves the version out, so its owners
//      are known now; parts spread over every worker, so one writer's
//      upload uses every worker's bandwidth), with up to parallel_writes
//      parts in flight; a worker that fails is replaced by the next. The
//      worker uploads the part, keeps the blocks it owns and sends the
//      others to their owners (WritePartHeader.forward) meanwhile.
//   3. Close: the last part, then CommitWrite at the master, which completes
//      the upload and invalidates the path everywhere; then PublishWrite to
//      every worker that kept blocks: each caches them under the committed
//      version (and sends any the ring has since given to another worker
//      there).
//
// Abort (or a failure) aborts the upload at the master and tells the workers
// to drop what they kept.
#ifndef LARDER_CLIENT_WRITER_H_
#define LARDER_CLIENT_WRITER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "client/router.h"
#include "common/master_connection.h"
#include "larder/client.h"

namespace larder {

struct WriterDeps {
  MasterConnection* master;
  Router* router;
  // Fetches the ring again (after a worker failed; after the commit, so the
  // invalidation it carries reaches this process's metadata cache).
  std::function<absl::Status()> refresh_ring;
  // The master's errors, worded for the user.
  std::function<absl::Status(const grpc::Status&)> master_error;
  int parallel_writes = 8;
};

// Errors: those of Client::Create.
absl::StatusOr<std::unique_ptr<Writer>> CreateWriter(
    const WriterDeps& deps, absl::string_view path,
    const WriteOptions& options);

}  // namespace larder

#endif  // LARDER_CLIENT_WRITER_H_
