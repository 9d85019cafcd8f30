// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: batch.h
// -----------------------------------------------------------------------------
//
// Client::ReadBatch: the blocks of many small files read at once. Blocks
// whose first candidate is the worker on this node are leased over its
// short-circuit socket, one exchange per 64 blocks; the others are read from
// their workers in parallel as views of gRPC's buffers. A block left without
// a lease (refused, or unreadable) is read again at copy time, with
// failover. Internal to the client library.
#ifndef LARDER_CLIENT_BATCH_H_
#define LARDER_CLIENT_BATCH_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/block_reader.h"
#include "client/local_leases.h"
#include "client/router.h"
#include "common/block_key.h"
#include "common/thread_pool.h"
#include "larder/client.h"

namespace larder {

// One file of a batch: its blocks, or why it cannot be read.
struct BatchFile {
  std::string path;
  uint64_t size = 0;
  absl::Status status;
  std::vector<BlockId> blocks;
};

// Reads `files`; leases are given back, one message per worker, when the
// batch is destroyed (the router, leases, reader and pool outlive it).
std::unique_ptr<FileBatch> ReadBatch(std::vector<BatchFile> files,
                                     Router& router, LocalLeases& local,
                                     BlockReader& reader, ThreadPool& pool);

}  // namespace larder

#endif  // LARDER_CLIENT_BATCH_H_
