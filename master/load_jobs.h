// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: load_jobs.h
// -----------------------------------------------------------------------------
//
// Load (preload) jobs: `larder load PATH` warms every block below a path
// across the cluster. The master lists the path, splits each file into
// blocks, and asks each block's owner on the current ring to fetch its share
// (WorkerData.CacheBlocks, in batches, several in flight per worker).
// Progress (files, bytes, failures) is kept per job and polled by the CLI.
//
// Resumable: blocks already cached are answered at once by their owners, so
// running the same load again after an interruption only fetches what is
// missing. Each job is recorded in the master's StateStore while it runs
// (`loads/ID.textproto`) and with its outcome when it ends: a master that
// restarts, or a new leader, resumes the jobs recorded as running under
// their ids, so `larder load` polling one of them goes on to the end.
//
// Thread-safe. Each job runs on its own thread.
#ifndef LARDER_MASTER_LOAD_JOBS_H_
#define LARDER_MASTER_LOAD_JOBS_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/worker_client.h"
#include "master/membership.h"
#include "master/metadata.h"
#include "master/state_store.h"

namespace larder {

class LoadJobs {
 public:
  // `channels` (the master's credentials for workers) outlives this.
  // `store` outlives this.
  LoadJobs(UnderStoreMetadata* metadata, const Membership* membership,
           std::shared_ptr<const ChannelFactory> channels, StateStore* store)
      : metadata_(metadata),
        membership_(membership),
        channels_(std::move(channels)),
        store_(store) {}
  ~LoadJobs();

  // Starts a job. Errors: NotFound (no such path), metadata errors, and the
  // store's (the job could not be recorded; it is not started).
  absl::StatusOr<v1::LoadStatus> Start(const std::string& path);
  // The job's status; a running job's after it ends or `wait` passes,
  // whichever is first (at most kMaxWait). Errors: NotFound (unknown job id).
  absl::StatusOr<v1::LoadStatus> Get(
      const std::string& job_id, absl::Duration wait = absl::ZeroDuration());

  // Reads the recorded jobs: those that were running start again under their
  // ids, finished ones can be polled. Replaces the jobs held.
  absl::Status Resume();
  // Stops every job without recording an outcome (a master that is no
  // longer the leader: the next leader resumes them) and forgets them. The
  // batches in flight are cancelled: it returns once each job's thread saw
  // that, not after a hung worker's batch timeout (2 minutes).
  void StopAll();

  // Finished jobs kept in the store; older ones are deleted.
  static constexpr size_t kFinishedKept = 100;
  // The longest Get waits for a job to end.
  static constexpr absl::Duration kMaxWait = absl::Seconds(10);

 private:
  // Shared: a Get waiting on one outlives its removal by StopAll.
  struct Job {
    absl::Mutex mu;
    v1::LoadStatus status ABSL_GUARDED_BY(mu);
    // Set by StopAll: the job stays "running" (for the next leader), and a
    // Get waiting on it answers now.
    bool stopped ABSL_GUARDED_BY(mu) = false;
    std::thread thread;
  };
  // Stats the job's path, then runs it.
  void StatAndRun(Job* job);
  void Run(Job* job, v1::StatResponse root);
  // Records the job's status in the store (logged on failure).
  absl::Status Record(const v1::LoadStatus& status);
  Job* Launch(v1::LoadStatus status, std::optional<v1::StatResponse> root)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  WorkerClient& ClientFor(const std::string& address);

  UnderStoreMetadata* const metadata_;
  const Membership* const membership_;
  const std::shared_ptr<const ChannelFactory> channels_;
  StateStore* const store_;
  std::atomic<bool> stopping_{false};
  // The batches in flight: StopAll cancels them, so a stop (a master that
  // is deposed, on its election thread) does not wait up to a batch's
  // timeout for a worker that hangs.
  CallCancels batches_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Job>> jobs_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::unique_ptr<WorkerClient>> clients_
      ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace larder

#endif  // LARDER_MASTER_LOAD_JOBS_H_
