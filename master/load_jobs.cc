// Copyright 2026 The Larder Authors.
#include "master/load_jobs.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/thread_pool.h"

namespace larder {
namespace {

constexpr size_t kBatchBlocks = 16;  // Blocks per CacheBlocks call.
constexpr int kInFlightPerWorker = 4;

}  // namespace

LoadJobs::~LoadJobs() {
  stopping_ = true;
  absl::MutexLock lock(&mu_);
  for (auto& [id, job] : jobs_) {
    if (job->thread.joinable()) job->thread.join();
  }
}

WorkerClient& LoadJobs::ClientFor(const std::string& address) {
  absl::MutexLock lock(&mu_);
  auto& c = clients_[address];
  if (!c) c = std::make_unique<WorkerClient>(address, *channels_);
  return *c;
}

absl::StatusOr<v1::LoadStatus> LoadJobs::Start(const std::string& path) {
  LARDER_ASSIGN_OR_RETURN(v1::StatResponse root, metadata_->Stat(path));
  absl::MutexLock lock(&mu_);
  auto job = std::make_unique<Job>();
  Job* j = job.get();
  v1::LoadStatus status;
  status.set_job_id(absl::StrCat("load-", next_id_++));
  status.set_path(root.info().path());
  status.set_started_unix_ms(absl::ToUnixMillis(absl::Now()));
  {
    absl::MutexLock jl(&j->mu);
    j->status = status;
  }
  jobs_[status.job_id()] = std::move(job);
  j->thread = std::thread([this, j, root] { Run(j, root); });
  return status;
}

absl::StatusOr<v1::LoadStatus> LoadJobs::Get(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end())
    return absl::NotFoundError(absl::StrCat("no load job '", job_id, "'"));
  absl::MutexLock jl(&it->second->mu);
  return it->second->status;
}

void LoadJobs::Run(Job* job, v1::StatResponse root) {
  auto fail = [&](const absl::Status& st) {
    absl::MutexLock l(&job->mu);
    job->status.set_state(v1::LoadStatus::FAILED);
    job->status.set_last_error(std::string(st.message()));
    job->status.set_finished_unix_ms(absl::ToUnixMillis(absl::Now()));
    LARDER_LOG(WARNING, "load.failed")
        .Field("job", job->status.job_id())
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
      per_worker[ring.Owner(id.Key().low)].push_back({std::move(id), i});
    }
  }
  absl::Mutex progress_mu;
  int files_done = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    if (blocks_left[i] == 0) ++files_done;  // Empty files.
  }

  // 3. Batches, several in flight per worker.
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
          absl::Status st =
              ClientFor(workers[w].address()).CacheBlocks(ids, /*wait=*/true);
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
  absl::MutexLock l(&job->mu);
  job->status.set_files_done(files_done);
  job->status.set_state(job->status.blocks_failed() == 0
                            ? v1::LoadStatus::DONE
                            : v1::LoadStatus::FAILED);
  job->status.set_finished_unix_ms(absl::ToUnixMillis(absl::Now()));
  LARDER_LOG(INFO, "load.finished")
      .Field("job", job->status.job_id())
      .Field("files", job->status.files_done())
      .Field("bytes", job->status.bytes_done())
      .Field("failed_blocks", job->status.blocks_failed());
}

}  // namespace larder
