// Copyright 2026 The Larder Authors.
#include "master/load_jobs.h"

#include <google/protobuf/text_format.h>

#include <algorithm>
#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "common/retry.h"
#include "common/status_macros.h"
#include "common/thread_pool.h"

namespace larder {
namespace {

constexpr size_t kBatchBlocks = 16;  // Blocks per CacheBlocks call.
constexpr int kInFlightPerWorker = 8;
// A batch whose worker is slow or unreachable (restarting, out of memory,
// briefly partitioned) is retried for 8 to 16 s (backoff ceilings 0.25, 0.5,
// 1, 2, 4, 4, 4 s, equal jitter) before its blocks count as failed; a rerun
// of the load then fetches only what is still missing.
constexpr RetryOptions kBatchRetry = {
    .max_attempts = 8,
    .initial_backoff = absl::Milliseconds(250),
    .max_backoff = absl::Seconds(4)};
constexpr absl::Duration kBatchTimeout = absl::Minutes(2);

std::string RecordName(const std::string& job_id) {
  return absl::StrCat("loads/", job_id, ".textproto");
}

}  // namespace

LoadJobs::~LoadJobs() { StopAll(); }

void LoadJobs::StopAll() {
  stopping_ = true;
  absl::flat_hash_map<std::string, std::shared_ptr<Job>> jobs;
  {
    absl::MutexLock lock(&mu_);
    jobs.swap(jobs_);
  }
  for (auto& [id, job] : jobs) {
    {
      absl::MutexLock jl(&job->mu);
      job->stopped = true;
    }
    if (job->thread.joinable()) job->thread.join();
  }
  stopping_ = false;
}

absl::Status LoadJobs::Record(const v1::LoadStatus& status) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(status, &text);
  absl::Status st = store_->Put(RecordName(status.job_id()), text);
  if (!st.ok()) {
    LARDER_LOG(WARNING, "load.record")
        .Field("job", status.job_id())
        .Field("status", st);
  }
  return st;
}

LoadJobs::Job* LoadJobs::Launch(v1::LoadStatus status,
                                std::optional<v1::StatResponse> root) {
  auto job = std::make_shared<Job>();
  Job* j = job.get();
  const bool running = status.state() == v1::LoadStatus::RUNNING;
  {
    absl::MutexLock jl(&j->mu);
    j->status = std::move(status);
    jobs_[j->status.job_id()] = std::move(job);
  }
  if (running) {
    if (root) {
      j->thread = std::thread([this, j, r = *std::move(root)] { Run(j, r); });
    } else {
      j->thread = std::thread([this, j] { StatAndRun(j); });
    }
  }
  return j;
}

absl::Status LoadJobs::Resume() {
  StopAll();
  LARDER_ASSIGN_OR_RETURN(auto records, store_->List("loads/"));
  std::vector<v1::LoadStatus> finished;
  absl::MutexLock lock(&mu_);
  for (const auto& [name, text] : records) {
    v1::LoadStatus s;
    if (!google::protobuf::TextFormat::ParseFromString(text, &s) ||
        s.job_id().empty()) {
      LARDER_LOG(WARNING, "load.record_corrupt").Field("name", name);
      continue;
    }
    if (s.state() == v1::LoadStatus::RUNNING) {
      LARDER_LOG(INFO, "load.resumed")
          .Field("job", s.job_id())
          .Field("path", s.path());
      v1::LoadStatus fresh;  // Progress is counted again from the start.
      fresh.set_job_id(s.job_id());
      fresh.set_path(s.path());
      fresh.set_started_unix_ms(s.started_unix_ms());
      Launch(std::move(fresh), std::nullopt);
    } else {
      finished.push_back(std::move(s));
    }
  }
  // The newest finished jobs stay pollable; older records are deleted.
  std::sort(finished.begin(), finished.end(), [](const auto& a, const auto& b) {
    return a.finished_unix_ms() > b.finished_unix_ms();
  });
  for (size_t i = 0; i < finished.size(); ++i) {
    if (i >= kFinishedKept) {
      store_->Delete(RecordName(finished[i].job_id())).IgnoreError();
    } else {
      Launch(std::move(finished[i]), std::nullopt);
    }
  }
  return absl::OkStatus();
}

void LoadJobs::StatAndRun(Job* job) {
  std::string path;
  {
    absl::MutexLock l(&job->mu);
    path = job->status.path();
  }
  // The metadata may still be unreachable right after an election.
  absl::StatusOr<v1::StatResponse> root;
  for (int attempt = 0; attempt < 50 && !stopping_; ++attempt) {
    root = metadata_->Stat(path);
    if (root.ok() || absl::IsNotFound(root.status())) break;
    absl::SleepFor(absl::Milliseconds(200));
  }
  if (stopping_) return;
  if (root.ok()) return Run(job, *std::move(root));
  v1::LoadStatus s;
  {
    absl::MutexLock l(&job->mu);
    job->status.set_state(v1::LoadStatus::FAILED);
    job->status.set_last_error(std::string(root.status().message()));
    job->status.set_finished_unix_ms(absl::ToUnixMillis(absl::Now()));
    s = job->status;
  }
  Record(s).IgnoreError();
}

WorkerClient& LoadJobs::ClientFor(const std::string& address) {
  absl::MutexLock lock(&mu_);
  auto& c = clients_[address];
  if (!c) c = std::make_unique<WorkerClient>(address, *channels_);
  return *c;
}

absl::StatusOr<v1::LoadStatus> LoadJobs::Start(const std::string& path) {
  LARDER_ASSIGN_OR_RETURN(v1::StatResponse root, metadata_->Stat(path));
  v1::LoadStatus status;
  {
    absl::MutexLock lock(&mu_);
    // Unique across restarts and leaders: the start time and a counter.
    status.set_job_id(absl::StrCat("load-", absl::ToUnixMillis(absl::Now()),
                                   "-", next_id_++));
  }
  status.set_path(root.info().path());
  status.set_started_unix_ms(absl::ToUnixMillis(absl::Now()));
  if (absl::Status st = Record(status); !st.ok()) {
    return absl::Status(
        st.code(), absl::StrCat("the load was not started: ", st.message()));
  }
  absl::MutexLock lock(&mu_);
  Launch(status, std::move(root));
  return status;
}

absl::StatusOr<v1::LoadStatus> LoadJobs::Get(const std::string& job_id,
                                             absl::Duration wait) {
  std::shared_ptr<Job> job;
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(job_id);
    if (it == jobs_.end())
      return absl::NotFoundError(absl::StrCat("no load job '", job_id, "'"));
    job = it->second;
  }
  absl::MutexLock jl(&job->mu);
  if (wait > absl::ZeroDuration()) {
    job->mu.AwaitWithTimeout(
        absl::Condition(
            +[](Job* j) ABSL_EXCLUSIVE_LOCKS_REQUIRED(j->mu) {
              return j->stopped || j->status.state() != v1::LoadStatus::RUNNING;
            },
            job.get()),
        std::min(wait, kMaxWait));
  }
  return job->status;
}

void LoadJobs::Run(Job* job, v1::StatResponse root) {
  auto fail = [&](const absl::Status& st) {
    if (stopping_) return;
    v1::LoadStatus outcome;
    {
      absl::MutexLock l(&job->mu);
      job->status.set_state(v1::LoadStatus::FAILED);
      job->status.set_last_error(std::string(st.message()));
      job->status.set_finished_unix_ms(absl::ToUnixMillis(absl::Now()));
      outcome = job->status;
    }
    Record(outcome).IgnoreError();
    LARDER_LOG(WARNING, "load.failed")
        .Field("job", outcome.job_id())
        .Field("status", st);
  };
  // 1. The files, with their versions (from the listing: one version per
  //    file, so a file replaced mid-load is loaded whole at one version).
  std::vector<v1::ObjectInfo> files;
  if (!root.info().is_dir()) {
    files.push_back(root.info());
  } else {
    v1::ListRequest req;
    req.set_path(root.info().path());
    req.set_recursive(true);
    do {
      absl::StatusOr<v1::ListResponse> page = metadata_->List(req);
      if (!page.ok()) return fail(page.status());
      for (const auto& e : page->entries()) {
        if (!e.is_dir()) files.push_back(e);
      }
      req.set_page_token(page->next_page_token());
    } while (!req.page_token().empty() && !stopping_);
  }
  uint64_t total = 0;
  for (const auto& f : files) total += f.size();
  {
    absl::MutexLock l(&job->mu);
    job->status.set_listing_done(true);
    job->status.set_files_total(files.size());
    job->status.set_bytes_total(total);
  }

  // 2. Blocks grouped by owner on the current ring.
  // (Named, not a structured binding: lambdas below capture `workers`.)
  auto snapshot = membership_->Snapshot();
  const auto& ring = snapshot.first;
  const auto& workers = snapshot.second;
  if (ring.empty()) return fail(absl::UnavailableError("no live workers"));
  const std::string& mount = root.mount();
  const uint64_t block_size = root.block_size();
  struct Item {
    BlockId id;
    size_t file;
  };
  std::vector<std::vector<Item>> per_worker(workers.size());
  std::vector<uint64_t> blocks_left(files.size(), 0);
  for (size_t i = 0; i < files.size(); ++i) {
    const auto& f = files[i];
    std::string rel =
        f.path().size() > mount.size() ? f.path().substr(mount.size() + 1) : "";
    const uint64_t n = BlockCount(f.size(), block_size);
    blocks_left[i] = n;
    for (uint64_t b = 0; b < n; ++b) {
      BlockId id{mount, rel, f.version(), b, block_size, f.size()};
      per_worker[ring.Owner(id.Placement())].push_back({std::move(id), i});
    }
  }
  {
    uint64_t blocks = 0;
    for (const auto& v : per_worker) blocks += v.size();
    absl::MutexLock l(&job->mu);
    job->status.set_blocks_total(blocks);
  }
  absl::Mutex progress_mu;
  int files_done = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    if (blocks_left[i] == 0) ++files_done;  // Empty files.
  }

  // 3. Batches, several in flight per worker.
  std::vector<std::atomic<bool>> unreachable(workers.size());  // All false.
  {
    ThreadPool pool(static_cast<int>(workers.size()) * kInFlightPerWorker,
                    "larder-load");
    for (size_t w = 0; w < workers.size(); ++w) {
      for (size_t start = 0; start < per_worker[w].size();
           start += kBatchBlocks) {
        pool.Schedule([&, w, start] {
          if (stopping_) return;
          const size_t end =
              std::min(per_worker[w].size(), start + kBatchBlocks);
          std::vector<BlockId> ids;
          for (size_t k = start; k < end; ++k)
            ids.push_back(per_worker[w][k].id);
          // A worker that already made one batch run out of retries gets
          // one attempt per batch until it answers again: a worker that
          // stays away costs the load one retry period, not one per batch.
          RetryOptions retry = kBatchRetry;
          if (unreachable[w]) retry.max_attempts = 1;
          int attempts = 0;
          absl::Status st =
              RetryWithBackoff(retry, "load.batch", [&]() -> absl::Status {
                if (stopping_) return absl::CancelledError("load stopped");
                if (attempts++ > 0) {
                  absl::MutexLock l(&job->mu);
                  job->status.set_batch_retries(job->status.batch_retries() +
                                                1);
                }
                return ClientFor(workers[w].address())
                    .CacheBlocks(ids, /*wait=*/true, kBatchTimeout);
              });
          unreachable[w] = IsRetryable(st);
          absl::MutexLock pl(&progress_mu);
          uint64_t bytes = 0;
          for (size_t k = start; k < end; ++k) {
            bytes += per_worker[w][k].id.length();
            if (--blocks_left[per_worker[w][k].file] == 0) ++files_done;
          }
          absl::MutexLock l(&job->mu);
          if (st.ok()) {
            job->status.set_bytes_done(job->status.bytes_done() + bytes);
          } else {
            job->status.set_blocks_failed(job->status.blocks_failed() +
                                          (end - start));
            job->status.set_last_error(
                absl::StrCat(workers[w].id(), ": ", st.message()));
          }
          job->status.set_files_done(files_done);
        });
      }
    }
  }
  // Stopped (shutdown, or no longer the leader): the record stays "running"
  // for the next leader to resume.
  if (stopping_) return;
  v1::LoadStatus outcome;
  {
    absl::MutexLock l(&job->mu);
    job->status.set_files_done(files_done);
    job->status.set_state(job->status.blocks_failed() == 0
                              ? v1::LoadStatus::DONE
                              : v1::LoadStatus::FAILED);
    job->status.set_finished_unix_ms(absl::ToUnixMillis(absl::Now()));
    outcome = job->status;
  }
  Record(outcome).IgnoreError();
  LARDER_LOG(INFO, "load.finished")
      .Field("job", outcome.job_id())
      .Field("files", outcome.files_done())
      .Field("bytes", outcome.bytes_done())
      .Field("failed_blocks", outcome.blocks_failed());
}

}  // namespace larder
