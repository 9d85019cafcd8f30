// Copyright 2026 The Larder Authors.
#include "master/load_jobs.h"

#include <google/protobuf/text_format.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <iterator>

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
// Threads of a load's runners at most: a cluster of 1,000 workers would
// otherwise start 8,000 for one job. The runners are queued round-robin
// (each worker's first, then each one's second, ...), so each worker has
// batches in flight as soon as threads free up.
constexpr int kMaxLoadThreads = 256;
// Entries of a load's first listing page, and of each page after it: the
// first is small so that fetching starts after one short listing request
// (a store's page of 1,000 keys can take a few hundred ms), the rest are
// listed while the first pages' blocks are fetched.
constexpr size_t kLoadFirstPageEntries = 100;
constexpr size_t kLoadPageEntries = 1000;

// The request for the first page of a load's listing of `path`.
v1::ListRequest FirstPageOf(const std::string& path) {
  v1::ListRequest req;
  req.set_path(path);
  req.set_recursive(true);
  req.set_page_size(kLoadFirstPageEntries);
  return req;
}
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
  batches_.Cancel();
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
  batches_.Reset();
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
  // The first page of the job's listing is asked for beside the Stat (a
  // directory's Stat takes the store two round trips), so the job finds it
  // in the metadata cache. For a file it is one wasted listing request.
  std::thread first_page(
      [&] { metadata_->List(FirstPageOf(path)).IgnoreError(); });
  absl::StatusOr<v1::StatResponse> stat = metadata_->Stat(path);
  first_page.join();
  LARDER_ASSIGN_OR_RETURN(v1::StatResponse root, std::move(stat));
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
  // Blocks go to their owners on the ring as it is now.
  // (Named, not a structured binding: lambdas below capture `workers`.)
  auto snapshot = membership_->Snapshot();
  const auto& ring = snapshot.first;
  const auto& workers = snapshot.second;
  if (ring.empty()) return fail(absl::UnavailableError("no live workers"));
  const std::string& mount = root.mount();
  const uint64_t block_size = root.block_size();

  // The listing (this thread) hands each page's blocks to the batches of
  // their owners as the page comes; each worker's runners (kInFlightPerWorker
  // threads of the pool) send its batches. So fetching starts after the
  // first page, not after the whole listing, and every worker has its own
  // batches in flight whatever the order of the pages.
  struct Item {
    BlockId id;
    size_t file;
  };
  struct WorkerQueue {
    std::deque<std::vector<Item>> batches;
    const bool* listed;
    bool Ready() const { return !batches.empty() || *listed; }
  };
  absl::Mutex mu;
  bool listed = false;               // The listing ended (or stopped).
  std::deque<uint64_t> blocks_left;  // Per file listed.
  std::vector<WorkerQueue> queues(workers.size(), WorkerQueue{{}, &listed});
  int files_done = 0;
  std::vector<std::atomic<bool>> unreachable(workers.size());  // All false.

  auto send = [&](size_t w, const std::vector<Item>& batch) {
    std::vector<BlockId> ids;
    ids.reserve(batch.size());
    for (const Item& item : batch) ids.push_back(item.id);
    // A worker that already made one batch run out of retries gets one
    // attempt per batch until it answers again: a worker that stays away
    // costs the load one retry period, not one per batch.
    RetryOptions retry = kBatchRetry;
    if (unreachable[w]) retry.max_attempts = 1;
    int attempts = 0;
    absl::Status st =
        RetryWithBackoff(retry, "load.batch", [&]() -> absl::Status {
          if (stopping_) return absl::CancelledError("load stopped");
          if (attempts++ > 0) {
            absl::MutexLock l(&job->mu);
            job->status.set_batch_retries(job->status.batch_retries() + 1);
          }
          return ClientFor(workers[w].address())
              .CacheBlocks(ids, /*wait=*/true, kBatchTimeout, &batches_);
        });
    unreachable[w] = IsRetryable(st);
    absl::MutexLock l(&mu);
    uint64_t bytes = 0;
    for (const Item& item : batch) {
      bytes += item.id.length();
      if (--blocks_left[item.file] == 0) ++files_done;
    }
    absl::MutexLock jl(&job->mu);
    if (st.ok()) {
      job->status.set_bytes_done(job->status.bytes_done() + bytes);
    } else {
      job->status.set_blocks_failed(job->status.blocks_failed() + batch.size());
      job->status.set_last_error(
          absl::StrCat(workers[w].id(), ": ", st.message()));
    }
    job->status.set_files_done(files_done);
  };

  absl::Status listing;
  {
    ThreadPool pool(
        std::min(static_cast<int>(workers.size()) * kInFlightPerWorker,
                 kMaxLoadThreads),
        "larder-load");
    for (int r = 0; r < kInFlightPerWorker; ++r) {
      for (size_t w = 0; w < workers.size(); ++w) {
        pool.Schedule([&, w] {
          for (;;) {
            std::vector<Item> batch;
            {
              absl::MutexLock l(&mu);
              mu.Await(absl::Condition(&queues[w], &WorkerQueue::Ready));
              if (queues[w].batches.empty() || stopping_) return;
              batch = std::move(queues[w].batches.front());
              queues[w].batches.pop_front();
            }
            send(w, batch);
          }
        });
      }
    }

    // The listing: one version per file (from its page), so a file
    // replaced mid-load is loaded whole at one version.
    std::vector<std::vector<Item>> pending(workers.size());
    uint64_t files_total = 0, bytes_total = 0, blocks_total = 0;
    auto add = [&](const v1::ObjectInfo& f) {
      const std::string rel = f.path().size() > mount.size()
                                  ? f.path().substr(mount.size() + 1)
                                  : "";
      const uint64_t n = BlockCount(f.size(), block_size);
      size_t index;
      {
        absl::MutexLock l(&mu);
        index = blocks_left.size();
        blocks_left.push_back(n);
        if (n == 0) ++files_done;  // Empty files.
      }
      for (uint64_t b = 0; b < n; ++b) {
        BlockId id{mount, rel, f.version(), b, block_size, f.size()};
        pending[ring.Owner(id.Placement())].push_back({std::move(id), index});
      }
      ++files_total;
      bytes_total += f.size();
      blocks_total += n;
    };
    // Whole batches to the runners (and, with `all`, the rest too).
    auto dispatch = [&](bool all) {
      absl::MutexLock l(&mu);
      for (size_t w = 0; w < workers.size(); ++w) {
        std::vector<Item>& p = pending[w];
        size_t at = 0;
        while (p.size() - at >= kBatchBlocks || (all && at < p.size())) {
          const size_t end = std::min(p.size(), at + kBatchBlocks);
          queues[w].batches.emplace_back(
              std::make_move_iterator(p.begin() + at),
              std::make_move_iterator(p.begin() + end));
          at = end;
        }
        p.erase(p.begin(), p.begin() + at);
      }
    };
    auto publish = [&] {
      absl::MutexLock l(&job->mu);
      job->status.set_files_total(files_total);
      job->status.set_bytes_total(bytes_total);
      job->status.set_blocks_total(blocks_total);
    };
    if (!root.info().is_dir()) {
      add(root.info());
    } else {
      v1::ListRequest req = FirstPageOf(root.info().path());
      do {
        absl::StatusOr<v1::ListResponse> page = metadata_->List(req);
        if (!page.ok()) {
          listing = page.status();
          break;
        }
        for (const auto& e : page->entries()) {
          if (!e.is_dir()) add(e);
        }
        dispatch(/*all=*/false);
        publish();
        req.set_page_token(page->next_page_token());
        req.set_page_size(kLoadPageEntries);
      } while (!req.page_token().empty() && !stopping_);
    }
    dispatch(/*all=*/true);
    publish();
    {
      absl::MutexLock l(&mu);
      listed = true;
    }
    absl::MutexLock jl(&job->mu);
    job->status.set_listing_done(true);
  }  // Waits for the runners.
  if (!listing.ok()) return fail(listing);
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
