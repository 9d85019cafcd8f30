// Copyright 2026 The Larder Authors.
#include "fuse/lease_ahead.h"

#include <algorithm>
#include <memory>

#include "absl/container/flat_hash_set.h"
#include "common/log.h"
#include "fuse/inode_table.h"
#include "understore/uri.h"

namespace larder {
namespace {

// Requests waiting for the background thread at most: more are dropped (an
// open that finds nothing leased still asks the worker itself).
constexpr size_t kMaxQueued = 8;
// Entries a request looks at past its start for files to lease, in batches:
// a directory whose files are mostly held already costs a bounded walk.
constexpr size_t kScanPerBatch = 4;
// Entries given back per Take (the background thread gives back the rest).
constexpr int kExpirePerTake = 4;
// Files leased beside an open that found none leased: one exchange.
constexpr size_t kSyncBatch = 63;
// Directories remembered as not worth batching, at most.
constexpr size_t kMaxFutile = 1024;
// How long a directory that could not be listed is not batched.
constexpr absl::Duration kUnlistedFor = absl::Seconds(30);

absl::string_view BaseName(absl::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

LeaseAhead::LeaseAhead(Options options, Client& client)
    : options_(std::move(options)), client_(client) {
  if (enabled()) thread_ = std::thread([this] { Loop(); });
}

LeaseAhead::~LeaseAhead() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  std::vector<LocalSlice> drop;
  absl::MutexLock lock(&mu_);
  for (auto& [path, e] : entries_) {
    if (e.object) drop.push_back(*std::move(e.object));
  }
  entries_.clear();
  held_bytes_ = 0;
  // `drop` gives the leases back after the lock is released (declared
  // before the lock, destroyed after it).
}

std::optional<LocalSlice> LeaseAhead::Take(const std::string& path,
                                           absl::string_view version) {
  if (!enabled()) return std::nullopt;
  std::vector<LocalSlice> drop;  // Destroyed after the lock is released.
  std::optional<LocalSlice> out;
  std::string next;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    auto it = entries_.find(path);
    if (it != entries_.end() && it->second.object) {
      Entry& e = it->second;
      if (e.version == version && e.until > now) {
        out = std::move(e.object);
        next = std::move(e.next);
        ++counters_.used;
      } else {
        ++counters_.expired;  // Its time was up, or the file changed.
      }
      Erase(it, drop);
    }
    int n = 0;
    while (n++ < kExpirePerTake && !order_.empty() &&
           order_.front().first <= now) {
      Expire(now, drop);
    }
  }
  if (!next.empty()) Enqueue(Want{ParentClusterPath(next), next, false});
  return out;
}

absl::StatusOr<LocalSlice> LeaseAhead::LeaseAround(const std::string& path,
                                                   File& file) {
  if (!enabled()) return file.OpenLocalObject();
  Want want{ParentClusterPath(path), path, true};
  bool futile;
  {
    absl::MutexLock lock(&mu_);
    futile = Futile(want.dir, absl::Now());
  }
  if (futile) return file.OpenLocalObject();
  std::optional<absl::StatusOr<LocalSlice>> self =
      Serve(want, kSyncBatch, &file);
  if (!self) {
    Enqueue(std::move(want));  // Listed in the background.
    return file.OpenLocalObject();
  }
  if (self->ok()) return *std::move(self);
  const absl::StatusCode code = self->status().code();
  if (code == absl::StatusCode::kFailedPrecondition ||
      code == absl::StatusCode::kPermissionDenied) {
    // Not lent: its directory's files most likely are not either.
    absl::MutexLock lock(&mu_);
    NoteFutile(want.dir, absl::Now() + options_.keep);
    return *std::move(self);
  }
  return file.OpenLocalObject();  // The batch failed: once more alone.
}

bool LeaseAhead::Futile(const std::string& dir, absl::Time now) {
  auto it = futile_.find(dir);
  if (it == futile_.end()) return false;
  if (it->second > now) return true;
  futile_.erase(it);
  return false;
}

void LeaseAhead::NoteFutile(const std::string& dir, absl::Time until) {
  if (futile_.size() >= kMaxFutile) {
    const absl::Time now = absl::Now();
    absl::erase_if(futile_, [&](const auto& e) { return e.second <= now; });
    if (futile_.size() >= kMaxFutile) futile_.clear();
  }
  futile_[dir] = until;
}

void LeaseAhead::WantDir(const std::string& dir) {
  if (enabled()) Enqueue(Want{dir, "", false});
}

void LeaseAhead::Enqueue(Want want) {
  absl::MutexLock lock(&mu_);
  if (stopping_ || queue_.size() >= kMaxQueued) return;
  if (entries_.size() >= options_.capacity || held_bytes_ >= options_.max_bytes)
    return;
  queue_.push_back(std::move(want));
}

LeaseAhead::Counters LeaseAhead::counters() const {
  absl::MutexLock lock(&mu_);
  return counters_;
}

size_t LeaseAhead::held() const {
  absl::MutexLock lock(&mu_);
  // Granted ones: not those still being asked for.
  return static_cast<size_t>(
      std::count_if(entries_.begin(), entries_.end(),
                    [](const auto& e) { return e.second.object.has_value(); }));
}

void LeaseAhead::Drain() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](LeaseAhead* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
        return self->queue_.empty() && !self->serving_;
      },
      this));
}

void LeaseAhead::Erase(absl::flat_hash_map<std::string, Entry>::iterator it,
                       std::vector<LocalSlice>& drop) {
  if (it->second.object) drop.push_back(*std::move(it->second.object));
  held_bytes_ -= it->second.size;
  entries_.erase(it);
}

void LeaseAhead::Expire(absl::Time now, std::vector<LocalSlice>& drop) {
  const std::string path = std::move(order_.front().second);
  order_.pop_front();
  auto it = entries_.find(path);
  if (it == entries_.end() || !it->second.object || it->second.until > now)
    return;  // Taken, being leased again, or added again since.
  Erase(it, drop);
  ++counters_.expired;
}

void LeaseAhead::Loop() {
  for (;;) {
    std::vector<LocalSlice> drop;  // Given back outside the lock.
    Want want;
    {
      absl::MutexLock lock(&mu_);
      serving_ = false;
      mu_.AwaitWithTimeout(
          absl::Condition(
              +[](LeaseAhead* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
                return self->stopping_ || !self->queue_.empty();
              },
              this),
          std::max(absl::Milliseconds(100), options_.keep / 4));
      const absl::Time now = absl::Now();
      while (!order_.empty() && order_.front().first <= now) Expire(now, drop);
      if (stopping_) return;
      if (queue_.empty()) continue;
      want = std::move(queue_.front());
      queue_.pop_front();
      serving_ = true;
    }
    drop.clear();
    Serve(want, options_.batch);
  }
}

std::optional<absl::StatusOr<LocalSlice>> LeaseAhead::Serve(const Want& want,
                                                            size_t batch,
                                                            File* self) {
  std::vector<std::unique_ptr<File>> files;
  std::vector<File*> opened;
  if (self != nullptr) opened.push_back(self);
  // An open takes only a cached listing; the background thread lists.
  std::shared_ptr<const std::vector<FileInfo>> listing;
  if (self != nullptr) {
    listing = client_.CachedListDir(want.dir);
    if (listing == nullptr) return std::nullopt;
  } else {
    {
      absl::MutexLock lock(&mu_);
      if (Futile(want.dir, absl::Now())) return std::nullopt;
    }
    absl::StatusOr<std::shared_ptr<const std::vector<FileInfo>>> listed =
        client_.ListDir(want.dir);
    if (!listed.ok()) {
      // A directory too large to cache (ResourceExhausted), gone, or the
      // master unreachable: its opens ask the worker one by one for a while.
      LARDER_LOG(DEBUG, "fuse.lease_ahead.no_listing")
          .Field("dir", want.dir)
          .Field("status", listed.status());
      absl::MutexLock lock(&mu_);
      NoteFutile(want.dir, absl::Now() + kUnlistedFor);
      return std::nullopt;
    }
    listing = *std::move(listed);
  }
  const std::vector<FileInfo>& all = *listing;
  // Sorted by path, all in one directory: by name.
  size_t start = 0;
  if (!want.after.empty()) {
    const absl::string_view name = BaseName(want.after);
    start = static_cast<size_t>(
        std::upper_bound(all.begin(), all.end(), name,
                         [](absl::string_view n, const FileInfo& e) {
                           return n < BaseName(e.path);
                         }) -
        all.begin());
  }
  // Candidates, in listing order from `start` (wrapping if asked), not
  // held or being leased.
  struct Candidate {
    const FileInfo* info;
    std::string path;
  };
  std::vector<Candidate> picked;
  batch = std::max<size_t>(batch, 1);
  const size_t scan =
      all.empty() ? 0
                  : std::min(want.wrap ? all.size() : all.size() - start,
                             batch * kScanPerBatch);
  {
    absl::MutexLock lock(&mu_);
    for (size_t k = 0; k < scan && picked.size() < batch; ++k) {
      const FileInfo& e = all[(start + k) % all.size()];
      if (e.is_dir || e.size == 0 || e.size < options_.min_size ||
          e.size > options_.max_size || e.version.empty())
        continue;
      std::string path = InodeTable::Child(want.dir, BaseName(e.path));
      if (path == want.after || entries_.contains(path)) continue;
      picked.push_back(Candidate{&e, std::move(path)});
    }
  }
  // Not those open (or kept) for passthrough already.
  if (options_.has_backing) {
    std::erase_if(picked, [&](const Candidate& c) {
      return options_.has_backing(c.path);
    });
  }
  {
    // Marked as being leased (an open meanwhile asks the worker itself),
    // within the bounds.
    absl::MutexLock lock(&mu_);
    bool full = false;
    std::erase_if(
        picked, [&](const Candidate& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          full = full || stopping_ || entries_.size() >= options_.capacity ||
                 held_bytes_ + c.info->size > options_.max_bytes;
          if (full) return true;
          auto [it, added] = entries_.try_emplace(c.path);
          if (!added) return true;  // Leased meanwhile.
          it->second.version = c.info->version;
          it->second.size = c.info->size;
          held_bytes_ += c.info->size;
          return false;
        });
  }
  std::vector<std::string> leasing;  // Of opened[first..], in order.
  for (const Candidate& c : picked) {
    FileInfo info = *c.info;
    info.path = c.path;
    absl::StatusOr<std::unique_ptr<File>> f = client_.OpenKnown(info);
    if (!f.ok()) continue;
    files.push_back(*std::move(f));
    opened.push_back(files.back().get());
    leasing.push_back(c.path);
  }
  // Leased for as long as held (the daemon runs as root): an object not
  // taken within `keep` is given back, one taken is a backing file's for as
  // long as the file stays open, and the worker counts its blocks as held
  // all that time.
  std::vector<absl::StatusOr<LocalSlice>> objects =
      opened.empty()
          ? std::vector<absl::StatusOr<LocalSlice>>{}
          : client_.OpenLocalObjects(opened, absl::InfiniteDuration());
  std::optional<absl::StatusOr<LocalSlice>> out;
  const size_t first = self != nullptr ? 1 : 0;
  if (self != nullptr) out = std::move(objects[0]);
  std::vector<LocalSlice> drop;  // Destroyed after the lock is released.
  absl::MutexLock lock(&mu_);
  const absl::Time until = absl::Now() + options_.keep;
  absl::flat_hash_set<std::string> granted;
  std::string last;
  for (size_t k = first; k < objects.size(); ++k) {
    const std::string& path = leasing[k - first];
    auto it = entries_.find(path);
    if (!objects[k].ok()) continue;
    if (it == entries_.end() || it->second.object || stopping_) {
      drop.push_back(*std::move(objects[k]));  // Stopping: given back.
      continue;
    }
    it->second.object = *std::move(objects[k]);
    it->second.until = until;
    order_.emplace_back(until, path);
    granted.insert(path);
    last = path;
    ++counters_.leased;
  }
  // Taken entries keep their place in order_ until their time: compacted
  // when it outgrows the table.
  if (order_.size() > 2 * options_.capacity + 64) {
    std::erase_if(order_, [&](const std::pair<absl::Time, std::string>& o)
                              ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                                auto e = entries_.find(o.second);
                                return e == entries_.end() ||
                                       e->second.until != o.first;
                              });
  }
  // Marked, not granted (or not asked for): no longer being leased.
  for (const Candidate& c : picked) {
    if (granted.contains(c.path)) continue;
    if (auto it = entries_.find(c.path);
        it != entries_.end() && !it->second.object)
      Erase(it, drop);
    ++counters_.refused;
  }
  // Taking the middle granted file asks for the batch after the last (not
  // for a batch that wrapped: the files after its last were leased).
  const bool wrapped =
      !picked.empty() &&
      static_cast<size_t>(picked.back().info - all.data()) < start;
  size_t seen = 0;
  for (const std::string& path : leasing) {
    if (wrapped) break;
    if (granted.contains(path) && seen++ == granted.size() / 2) {
      entries_[path].next = last;
      break;
    }
  }
  return out;
}

}  // namespace larder
