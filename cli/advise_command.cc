// Copyright 2026 The Larder Authors.
//
// `larder advise PATH`: how much cache a dataset wants and what an epoch of
// it will take at each cache size, from a short measurement of this cluster
// (cli/advise_model.h has the model).
//
// It lists the dataset, reads a sample of its files with the job's number of
// readers twice (the first time from the under-store: with --measure_store
// the sample's blocks are evicted first; the second from the cache), takes
// the two rates (the cached sample is read for a second or more) and the
// accelerators' (--gpu_rate, or --samples_per_second
// times the mean file) and prints the predicted epoch for a range of cache
// sizes and the cache to have. --epoch then reads the whole dataset once
// with the same readers and prints the measured epoch beside the predicted
// one.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "cli/advise_model.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "common/block_key.h"
#include "common/block_proto.h"
#include "common/status_macros.h"
#include "common/units.h"
#include "larder/client.h"
#include "proto/master.grpc.pb.h"
#include "proto/worker.pb.h"

ABSL_FLAG(int, readers, 16,
          "advise: files read at once, as the job's loader workers do.");
ABSL_FLAG(int, sample_files, 256, "advise: files in the measured sample.");
ABSL_FLAG(std::string, sample_bytes, "1GiB",
          "advise: the sample's bytes at most.");
ABSL_FLAG(bool, measure_store, true,
          "advise: evict the sample's blocks first, so that its first read "
          "measures the under-store (the sample is cached again after).");
ABSL_FLAG(std::string, store_rate, "",
          "advise: the under-store's rate (e.g. 200MB/s) when the sample "
          "cannot measure it (--nomeasure_store and a cached sample).");
ABSL_FLAG(std::string, gpu_rate, "",
          "advise: bytes per second the job's accelerators consume (e.g. "
          "820MB/s); empty: I/O alone.");
ABSL_FLAG(double, samples_per_second, 0,
          "advise: the accelerators' rate in files per second (one sample a "
          "file), instead of --gpu_rate.");
ABSL_FLAG(double, max_gpu_wait, 0.05,
          "advise: the share of an epoch the accelerators may wait for data "
          "in the recommendation.");
ABSL_FLAG(bool, epoch, false,
          "advise: then read the whole dataset once and print the measured "
          "epoch against the predicted one.");

namespace larder::cli {
namespace {

struct DatasetFile {
  std::string path;
  uint64_t size = 0;
};

// "200MB/s", "1.5GB/s" (decimal, as rates are quoted), "800MiB/s"
// (binary); "/s" may be left out.
absl::StatusOr<double> ParseRate(absl::string_view flag,
                                 absl::string_view text) {
  std::string t = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  if (absl::EndsWith(t, "/s")) t.resize(t.size() - 2);
  static constexpr std::pair<absl::string_view, double> kDecimal[] = {
      {"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12}};
  double scale = 1;
  for (const auto& [unit, mult] : kDecimal) {
    if (absl::EndsWith(t, unit)) {
      t.resize(t.size() - unit.size());
      scale = mult;
      break;
    }
  }
  absl::StatusOr<uint64_t> b = ParseBytes(t);
  if (!b.ok() || *b == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, ": '", text, "' is not a rate such as 800MB/s"));
  }
  return static_cast<double>(*b) * scale;
}

std::string Rate(double bytes_per_second) {
  return absl::StrFormat("%.1f MB/s", bytes_per_second / 1e6);
}

std::string Seconds(double s) {
  return s >= 100 ? absl::StrFormat("%.0f s", s) : absl::StrFormat("%.2f s", s);
}

struct ReadTimes {
  double seconds = 0;  // All of it.
  // After the first `readers` files were done (the readers started, their
  // connections made): what a long epoch runs at.
  double steady_seconds = 0;
  uint64_t steady_bytes = 0;
  double steady_rate() const {
    return steady_seconds > 0
               ? static_cast<double>(steady_bytes) / steady_seconds
               : 0;
  }
};

// The job's readers, as a DataLoader's persistent workers are: started once,
// each with its own buffer, and given one list of files at a time, each file
// read whole; the first error ends a list. With readers started per list, a
// pass over 242 cached files took 39 ms on a 2-core VM, against 14 ms with
// them kept: every pass over the cached sample paid the start and an epoch
// paid it once, so whole-cache epochs came out 17-38% shorter than advised.
class Readers {
 public:
  Readers(Client& client, int readers, size_t buf_size) : client_(client) {
    for (int t = 0; t < std::max(1, readers); ++t) {
      threads_.emplace_back([this, buf_size] {
        // Not zeroed: a reader touches what its files fill.
        std::unique_ptr<char[]> buf(new char[buf_size]);
        Loop(absl::MakeSpan(buf.get(), buf_size));
      });
    }
  }
  ~Readers() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    for (std::thread& t : threads_) t.join();
  }
  Readers(const Readers&) = delete;
  Readers& operator=(const Readers&) = delete;

  // metadata_only: looks each file up (Stat) instead of reading it.
  absl::StatusOr<ReadTimes> Read(const std::vector<DatasetFile>& files,
                                 bool metadata_only = false) {
    absl::MutexLock lock(&mu_);
    files_ = &files;
    metadata_only_ = metadata_only;
    next_ = 0;
    first_ = absl::OkStatus();
    done_ = 0;
    steady_bytes_ = 0;
    warmup_ = std::min(threads_.size(), files.size() / 4);
    const absl::Time start = absl::Now();
    steady_from_ = warmup_ == 0 ? start : absl::InfiniteFuture();
    busy_ = threads_.size();
    ++generation_;
    auto idle = [this]()
                    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return busy_ == 0; };
    mu_.Await(absl::Condition(&idle));
    files_ = nullptr;
    if (!first_.ok()) return first_;
    const absl::Time end = absl::Now();
    ReadTimes r;
    r.seconds = absl::ToDoubleSeconds(end - start);
    if (steady_from_ < end) {
      r.steady_seconds = absl::ToDoubleSeconds(end - steady_from_);
      r.steady_bytes = steady_bytes_;
    }
    return r;
  }

 private:
  void Loop(absl::Span<char> buf) {
    uint64_t seen = 0;
    for (;;) {
      const std::vector<DatasetFile>* files;
      bool metadata_only;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [this, &seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stop_ || generation_ != seen;
        };
        mu_.Await(absl::Condition(&ready));
        if (stop_) return;
        seen = generation_;
        files = files_;
        metadata_only = metadata_only_;
      }
      for (size_t i = next_++; i < files->size(); i = next_++) {
        const absl::Status st = metadata_only
                                    ? client_.Stat((*files)[i].path).status()
                                    : ReadFile((*files)[i], buf);
        absl::MutexLock lock(&mu_);
        if (!st.ok()) {
          if (first_.ok()) first_ = st;
          next_ = files->size();
        } else if (++done_ > warmup_) {
          steady_bytes_ += (*files)[i].size;
        } else if (done_ == warmup_) {
          // After the first `readers` files were done (the readers
          // started, their connections made): what a long epoch runs at.
          steady_from_ = absl::Now();
        }
      }
      absl::MutexLock lock(&mu_);
      --busy_;
    }
  }

  absl::Status ReadFile(const DatasetFile& file, absl::Span<char> buf) {
    LARDER_ASSIGN_OR_RETURN(std::unique_ptr<File> f, client_.Open(file.path));
    for (uint64_t off = 0; off < file.size;) {
      LARDER_ASSIGN_OR_RETURN(const size_t n, f->Read(off, buf));
      if (n == 0) {
        return absl::DataLossError(absl::StrCat(file.path, ": ended at ", off,
                                                " of ", file.size, " bytes"));
      }
      off += n;
    }
    return absl::OkStatus();
  }

  Client& client_;
  std::vector<std::thread> threads_;
  std::atomic<size_t> next_{0};
  absl::Mutex mu_;
  const std::vector<DatasetFile>* files_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool metadata_only_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  size_t busy_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status first_ ABSL_GUARDED_BY(mu_);
  size_t done_ ABSL_GUARDED_BY(mu_) = 0;
  size_t warmup_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time steady_from_ ABSL_GUARDED_BY(mu_);
  uint64_t steady_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

struct ClusterCache {
  int workers = 0;
  uint64_t ram = 0, nvme = 0, under_store_bytes = 0;
};

absl::StatusOr<ClusterCache> GetCache(MasterConnection& master) {
  v1::ClusterStatsResponse r;
  LARDER_RETURN_IF_ERROR(
      Rpc(master.Call(&v1::Master::Stub::GetClusterStats,
                      v1::ClusterStatsRequest(), &r, absl::Seconds(30))));
  ClusterCache c;
  for (const auto& w : r.workers()) {
    if (!w.alive()) continue;
    ++c.workers;
    c.under_store_bytes += w.stats().under_store_bytes();
    for (const auto& t : w.stats().tiers()) {
      (t.name() == "ram" ? c.ram : c.nvme) += t.capacity_bytes();
    }
  }
  return c;
}

// Evicts every block of `files` on every worker.
absl::Status EvictFiles(MasterConnection& master,
                        const std::vector<DatasetFile>& files) {
  v1::EvictBlocksRequest req;
  for (const DatasetFile& f : files) {
    LARDER_ASSIGN_OR_RETURN(const v1::StatResponse st,
                            StatPath(master, f.path));
    if (st.info().is_dir() || st.block_size() == 0) continue;
    const uint64_t blocks = BlockCount(st.info().size(), st.block_size());
    for (uint64_t b = 0; b < blocks; ++b) {
      ToProto(BlockId{st.mount(), st.relative(), st.info().version(), b,
                      st.block_size(), st.info().size()},
              req.add_blocks());
    }
  }
  return EvictOnEveryWorker(master, req).status();
}

Json PredictionJson(const EpochPrediction& p) {
  Json j;
  j["cache_bytes"] = p.cache_bytes;
  j["hit_fraction"] = p.hit_fraction;
  j["io_seconds"] = p.io_seconds;
  j["epoch_seconds"] = p.epoch_seconds;
  j["gpu_wait_seconds"] = p.gpu_wait_seconds;
  return j;
}

absl::Status RunAdvise(const std::vector<std::string>& args) {
  LARDER_RETURN_IF_ERROR(WantArgs(args, 1, "larder advise PATH"));
  LARDER_ASSIGN_OR_RETURN(bool json, JsonOutput());
  const int readers = absl::GetFlag(FLAGS_readers);
  if (readers < 1 || readers > 1024)
    return absl::InvalidArgumentError("--readers: 1 to 1024");
  LARDER_ASSIGN_OR_RETURN(const uint64_t sample_cap,
                          ParseBytes(absl::GetFlag(FLAGS_sample_bytes)));
  const double max_wait = absl::GetFlag(FLAGS_max_gpu_wait);
  if (!(max_wait >= 0 && max_wait < 1))
    return absl::InvalidArgumentError("--max_gpu_wait: a share, 0 to 0.99");
  LARDER_ASSIGN_OR_RETURN(auto client, ConnectClient());
  LARDER_ASSIGN_OR_RETURN(auto master, Stub());

  // The dataset.
  std::vector<DatasetFile> files;
  LARDER_ASSIGN_OR_RETURN(const FileInfo top, client->Stat(args[0]));
  if (top.is_dir) {
    std::string token;
    do {
      LARDER_ASSIGN_OR_RETURN(ListResult page,
                              client->List(args[0], token, 1000, true));
      for (const FileInfo& e : page.entries) {
        if (!e.is_dir) files.push_back({e.path, e.size});
      }
      token = page.next_page_token;
    } while (!token.empty());
  } else {
    files.push_back({top.path, top.size});
  }
  double dataset = 0;
  uint64_t in_ram = 0;  // Each block is a memfd, or a part of one: pages.
  for (const DatasetFile& f : files) {
    dataset += static_cast<double>(f.size);
    in_ram += (f.size + 4095) / 4096 * 4096;
  }
  if (files.empty() || dataset == 0) {
    return absl::NotFoundError(
        absl::StrCat(args[0], " holds no file with data to measure"));
  }
  // On NVMe each block is a file with a header of its own (a few KiB at
  // most; counted as 4 KiB).
  LARDER_ASSIGN_OR_RETURN(const v1::StatResponse first,
                          StatPath(*master, files.front().path));
  const uint64_t block = std::max<uint64_t>(first.block_size(), 4096);
  uint64_t on_nvme = 0;
  for (const DatasetFile& f : files)
    on_nvme += f.size + BlockCount(f.size, block) * 4096;
  LARDER_ASSIGN_OR_RETURN(const ClusterCache cache, GetCache(*master));
  uint64_t largest = 1;
  for (const DatasetFile& f : files) largest = std::max(largest, f.size);
  Readers pool(*client, readers,
               static_cast<size_t>(std::min<uint64_t>(largest, 8 << 20)));

  // The sample, seeded: the same files every run.
  std::vector<DatasetFile> sample = files;
  std::shuffle(sample.begin(), sample.end(), std::mt19937(1));
  size_t keep = 0;
  uint64_t sample_bytes = 0;
  while (keep < sample.size() &&
         keep < static_cast<size_t>(
                    std::max(1, absl::GetFlag(FLAGS_sample_files))) &&
         (keep == 0 || sample_bytes + sample[keep].size <= sample_cap)) {
    sample_bytes += sample[keep++].size;
  }
  sample.resize(keep);
  if (absl::GetFlag(FLAGS_measure_store)) {
    LARDER_RETURN_IF_ERROR(EvictFiles(*master, sample));
  }
  LARDER_ASSIGN_OR_RETURN(const ClusterCache before, GetCache(*master));
  LARDER_ASSIGN_OR_RETURN(const ReadTimes cold, pool.Read(sample));
  LARDER_ASSIGN_OR_RETURN(const ClusterCache after, GetCache(*master));
  // The cache's rate: the part of the sample that fits in half the cache
  // (read once more to be sure it is there), then again for a second at
  // least (a few passes), at the fastest pass: what else runs on the node
  // only adds time (right after the cold read, passes of 15 ms took up to
  // 28 ms on the 2-core VM, and the epoch read at the fastest's rate).
  std::vector<DatasetFile> cached;
  uint64_t cached_bytes = 0;
  const double cache_room = static_cast<double>(cache.ram + cache.nvme) / 2;
  for (const DatasetFile& f : sample) {
    if (!cached.empty() &&
        static_cast<double>(cached_bytes + f.size) > cache_room)
      break;
    cached.push_back(f);
    cached_bytes += f.size;
  }
  LARDER_RETURN_IF_ERROR(pool.Read(cached).status());
  double warm = 0, fastest = 0;
  uint64_t warm_bytes = 0;
  std::vector<double> passes;
  for (int pass = 0; pass < 8 && (pass < 2 || warm < 1.0); ++pass) {
    LARDER_ASSIGN_OR_RETURN(const ReadTimes w, pool.Read(cached));
    passes.push_back(w.seconds);
    fastest = pass == 0 ? w.seconds : std::min(fastest, w.seconds);
    warm += w.seconds;
    warm_bytes += cached_bytes;
  }
  const double from_store =
      static_cast<double>(after.under_store_bytes - before.under_store_bytes);
  AdviseRates rates;
  rates.dataset_bytes = dataset;
  rates.cache_rate =
      static_cast<double>(cached_bytes) / std::max(fastest, 1e-6);
  if (const std::string s = absl::GetFlag(FLAGS_store_rate); !s.empty()) {
    LARDER_ASSIGN_OR_RETURN(rates.store_rate, ParseRate("store_rate", s));
  } else if (from_store >= 0.9 * static_cast<double>(sample_bytes) &&
             cold.steady_rate() > 0) {
    rates.store_rate = cold.steady_rate();  // All of it from the store.
  } else if (from_store >= 0.5 * static_cast<double>(sample_bytes)) {
    // The cold pass: its cached part at the cache's rate, the rest the
    // store's.
    const double cached_part = static_cast<double>(sample_bytes) - from_store;
    const double store_seconds =
        std::max(cold.seconds - cached_part / rates.cache_rate, 1e-6);
    rates.store_rate = from_store / store_seconds;
  } else {
    return absl::FailedPreconditionError(absl::StrCat(
        "the sample was already cached (",
        FormatBytes(static_cast<uint64_t>(from_store)), " of ",
        FormatBytes(sample_bytes),
        " came from the under-store), so its rate is unknown: leave "
        "--measure_store on or give --store_rate"));
  }
  const double mean_file = dataset / static_cast<double>(files.size());
  if (const std::string g = absl::GetFlag(FLAGS_gpu_rate); !g.empty()) {
    LARDER_ASSIGN_OR_RETURN(rates.gpu_rate, ParseRate("gpu_rate", g));
  } else if (const double sps = absl::GetFlag(FLAGS_samples_per_second);
             sps > 0) {
    rates.gpu_rate = sps * mean_file;
  }

  // Predictions: a range of cache sizes, and this cluster's.
  const double cluster_cache = static_cast<double>(cache.ram + cache.nvme);
  std::vector<EpochPrediction> rows;
  for (double share : {0.0, 0.25, 0.5, 0.75, 1.0})
    rows.push_back(PredictEpoch(rates, share * dataset));
  const EpochPrediction now = PredictEpoch(rates, cluster_cache);
  const double want = CacheForWaitShare(rates, max_wait);
  std::string advice;
  const EpochPrediction full = PredictEpoch(rates, dataset);
  if (want < 0) {
    advice = absl::StrCat(
        "even with all of it cached the accelerators wait ",
        absl::StrFormat("%.0f%%",
                        100 * full.gpu_wait_seconds / full.epoch_seconds),
        " of each epoch: the cache serves ", Rate(rates.cache_rate), " to ",
        readers, " readers against the ", Rate(rates.gpu_rate),
        " they consume; add readers (loader workers) or nodes");
  } else if (want == 0) {
    advice = absl::StrCat(
        "the under-store alone keeps the accelerators fed (",
        Rate(rates.store_rate), " against ", Rate(rates.gpu_rate),
        "); a cache still saves its requests after the first epoch");
  } else {
    advice = absl::StrCat(
        "a cache of ", FormatBytes(static_cast<uint64_t>(want)), " (",
        absl::StrFormat("%.0f%%", 100 * want / dataset), " of the dataset) ",
        rates.gpu_rate > 0
            ? absl::StrFormat("keeps the accelerators' wait within %.0f%%",
                              100 * max_wait)
            : std::string("holds all of it"),
        cluster_cache >= want
            ? absl::StrCat("; this cluster has ",
                           FormatBytes(cache.ram + cache.nvme))
            : absl::StrCat(
                  "; this cluster has ", FormatBytes(cache.ram + cache.nvme),
                  ": add ",
                  FormatBytes(static_cast<uint64_t>(want - cluster_cache)),
                  " of RAM or NVMe across its workers"));
  }
  if (cluster_cache < dataset) {
    v1::MountTable mounts;
    LARDER_RETURN_IF_ERROR(
        Rpc(master->Call(&v1::Master::Stub::GetMounts, v1::GetMountsRequest(),
                         &mounts, absl::Seconds(10))));
    bool epoch = false;
    for (const v1::MountEntry& m : mounts.mounts())
      epoch |= m.path() == first.mount() && m.eviction() == "epoch";
    absl::StrAppend(
        &advice, ". The dataset is larger than the cache: ",
        epoch ? "its mount keeps the part that fits every epoch "
                "(--eviction=epoch), as the table assumes"
              : "mount it with --eviction=epoch so that the part that fits "
                "is kept every epoch, as the table assumes (LRU keeps less)");
  }

  // --epoch: the whole dataset once, with the same readers.
  Json epoch_json;
  std::string epoch_text;
  if (absl::GetFlag(FLAGS_epoch)) {
    std::vector<DatasetFile> order = files;
    std::shuffle(order.begin(), order.end(),
                 std::mt19937(std::random_device()()));
    // The files' metadata first, off the clock: the sample's files were
    // looked up by their first read, so the cache's rate has none of it,
    // and the epoch's other files would each add a lookup this process had
    // not made yet (8 ms of a 30 ms whole-cache epoch on the 2-core VM).
    LARDER_RETURN_IF_ERROR(pool.Read(order, /*metadata_only=*/true).status());
    LARDER_ASSIGN_OR_RETURN(const ClusterCache b, GetCache(*master));
    LARDER_ASSIGN_OR_RETURN(const ReadTimes times, pool.Read(order));
    const double seconds = times.seconds;
    LARDER_ASSIGN_OR_RETURN(const ClusterCache a, GetCache(*master));
    const double fetched =
        static_cast<double>(a.under_store_bytes - b.under_store_bytes);
    const double hits = std::clamp(1 - fetched / dataset, 0.0, 1.0);
    // The model at the hits this epoch had (what the cache held), and at
    // the cluster's size.
    const EpochPrediction at_hits = PredictEpoch(rates, hits * dataset);
    epoch_json["seconds"] = seconds;
    epoch_json["hit_fraction"] = hits;
    epoch_json["predicted_io_seconds"] = at_hits.io_seconds;
    epoch_json["predicted_io_seconds_at_cluster_cache"] = now.io_seconds;
    epoch_text = absl::StrFormat(
        "measured epoch (I/O only): %s with %.0f%% hits; predicted at those "
        "hits %s (%+.0f%%), at this cluster's cache %s\n",
        Seconds(seconds), 100 * hits, Seconds(at_hits.io_seconds),
        100 * (at_hits.io_seconds - seconds) / seconds,
        Seconds(now.io_seconds));
  }

  if (json) {
    Json doc;
    doc["path"] = args[0];
    doc["files"] = files.size();
    doc["dataset_bytes"] = dataset;
    doc["ram_bytes"] = in_ram;
    doc["nvme_bytes"] = on_nvme;
    doc["cluster"] = {{"workers", cache.workers},
                      {"ram_bytes", cache.ram},
                      {"nvme_bytes", cache.nvme}};
    doc["readers"] = readers;
    doc["sample"] = {
        {"files", sample.size()},         {"bytes", sample_bytes},
        {"from_store_bytes", from_store}, {"cold_seconds", cold.seconds},
        {"cached_files", cached.size()},  {"warm_seconds", warm},
        {"warm_bytes", warm_bytes},       {"warm_passes_seconds", passes}};
    doc["rates"] = {{"cache", rates.cache_rate},
                    {"store", rates.store_rate},
                    {"gpu", rates.gpu_rate}};
    doc["predictions"] = Json::array();
    for (const EpochPrediction& p : rows)
      doc["predictions"].push_back(PredictionJson(p));
    doc["cluster_prediction"] = PredictionJson(now);
    doc["recommended_cache_bytes"] = want;
    doc["recommendation"] = advice;
    if (absl::GetFlag(FLAGS_epoch)) doc["epoch"] = epoch_json;
    PrintJson(doc);
    return absl::OkStatus();
  }
  std::printf(
      "dataset %s: %zu files, %s (cached it takes %s of RAM or %s of NVMe)\n"
      "cluster: %d worker%s, RAM %s, NVMe %s\n"
      "measured with %d readers on %zu files (%s):\n"
      "  from the cache        %s\n"
      "  from the under-store  %s\n",
      args[0].c_str(), files.size(),
      FormatBytes(static_cast<uint64_t>(dataset)).c_str(),
      FormatBytes(in_ram).c_str(), FormatBytes(on_nvme).c_str(), cache.workers,
      cache.workers == 1 ? "" : "s", FormatBytes(cache.ram).c_str(),
      FormatBytes(cache.nvme).c_str(), readers, sample.size(),
      FormatBytes(sample_bytes).c_str(), Rate(rates.cache_rate).c_str(),
      Rate(rates.store_rate).c_str());
  if (rates.gpu_rate > 0)
    std::printf("  accelerators consume  %s\n", Rate(rates.gpu_rate).c_str());
  std::printf("\n%-22s %6s %10s %10s %10s\n", "cache", "hits", "I/O", "epoch",
              "GPU wait");
  auto row = [&](const std::string& name, const EpochPrediction& p) {
    std::printf("%-22s %5.0f%% %10s %10s %10s\n", name.c_str(),
                100 * p.hit_fraction, Seconds(p.io_seconds).c_str(),
                Seconds(p.epoch_seconds).c_str(),
                rates.gpu_rate > 0 ? Seconds(p.gpu_wait_seconds).c_str() : "-");
  };
  for (const EpochPrediction& p : rows) {
    row(absl::StrFormat("%s (%.0f%%)",
                        FormatBytes(static_cast<uint64_t>(p.cache_bytes)),
                        100 * p.cache_bytes / dataset),
        p);
  }
  row(absl::StrCat("this cluster: ",
                   FormatBytes(static_cast<uint64_t>(cluster_cache))),
      now);
  std::printf("\n%s%s.\n",
              epoch_text.empty() ? "" : (epoch_text + "\n").c_str(),
              advice.c_str());
  return absl::OkStatus();
}

}  // namespace

const Command kAdviseCommand = {
    "advise", "how much cache a dataset wants, and what an epoch will take",
    "larder advise PATH [--readers=16] [--gpu_rate=820MB/s | "
    "--samples_per_second=N]\n"
    "  [--epoch] [--measure_store] [--sample_files=256]\n"
    "Measures reading a sample of PATH's files from the under-store and from "
    "the cache\n(with --measure_store, its blocks are evicted first), and "
    "prints the predicted epoch\ntime and accelerator wait for a range of "
    "cache sizes, and the cache to have.\n--epoch then reads the whole "
    "dataset once and prints the measured epoch beside.\n",
    &RunAdvise,
    FlagList({kLogFlags,
              kClientFlags,
              kClientReadFlags,
              {"output", "readers", "sample_files", "sample_bytes",
               "measure_store", "store_rate", "gpu_rate", "samples_per_second",
               "max_gpu_wait", "epoch"}})};

}  // namespace larder::cli
