// Copyright 2026 The Larder Authors.
#include "master/metadata.h"

#include <algorithm>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "understore/factory.h"

namespace larder {
namespace {

std::string Join(const std::string& mount, const std::string& rel) {
  return rel.empty() ? mount : absl::StrCat(mount, "/", rel);
}

// A store down or not answering (a stalled request is DeadlineExceeded
// too), after its retries. Throttling (ResourceExhausted) is not an outage:
// some requests still get through, and failing them all for a pause would
// fail reads that the store's retries would have carried.
bool IsOutage(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable ||
         status.code() == absl::StatusCode::kDeadlineExceeded;
}

// The key of a mount's store in the outage pause: a mount added again with
// another URI is another store.
std::string PauseKey(const v1::MountEntry& mount) {
  return absl::StrCat(mount.path(), "\n", mount.uri());
}

}  // namespace

void ToProto(const ObjectInfo& info, const std::string& cluster_path,
             v1::ObjectInfo* out) {
  out->set_path(cluster_path);
  out->set_is_dir(info.is_dir);
  out->set_size(info.size);
  out->set_version(info.version);
  out->set_mtime_ns(absl::ToUnixNanos(info.mtime));
  if (info.uid) {  // file://: the file's own; the master's Present decides.
    out->set_uid(*info.uid);
    if (info.gid) out->set_gid(*info.gid);
    out->set_mode(info.mode);
    out->set_own_mode(true);
  }
}

// How long an answer cached until `expires` stays fresh: at least 1 ms
// (0 on the wire means "not said", from a master before the field).
static uint64_t RemainingMs(absl::Time expires, absl::Time now) {
  return static_cast<uint64_t>(
      std::max<int64_t>(1, absl::ToInt64Milliseconds(expires - now)));
}

absl::StatusOr<v1::StatResponse> UnderStoreMetadata::Stat(
    absl::string_view path) {
  LARDER_ASSIGN_OR_RETURN(auto resolved, mounts_->Resolve(path));
  const auto& [mount, rel] = resolved;
  const std::string cluster_path = Join(mount.path(), rel);
  const absl::Time now = absl::Now();
  auto cached = [&]() -> std::optional<v1::StatResponse> {
    absl::MutexLock lock(&mu_);
    if (auto it = stats_.find(cluster_path);
        it != stats_.end() && it->second.expires > now) {
      v1::StatResponse r = it->second.value;
      r.set_ttl_remaining_ms(RemainingMs(it->second.expires, now));
      return r;
    }
    return std::nullopt;
  };
  if (auto hit = cached()) return *hit;
  if (ListDirectoryForStat(mount, rel, now)) {
    if (auto hit = cached()) return *hit;
  }
  LARDER_ASSIGN_OR_RETURN(std::shared_ptr<UnderStore> store, Store(mount));
  LARDER_RETURN_IF_ERROR(StorePaused(mount, now));
  ++stat_requests_;
  const uint64_t generation = this->generation();
  absl::StatusOr<ObjectInfo> found = store->Stat(rel);
  NoteStoreAnswer(mount, now, found.status());
  LARDER_ASSIGN_OR_RETURN(ObjectInfo info, std::move(found));
  v1::StatResponse resp;
  ToProto(info, cluster_path, resp.mutable_info());
  resp.set_mount(mount.path());
  resp.set_relative(rel);
  resp.set_block_size(mount.block_size());
  absl::MutexLock lock(&mu_);
  if (generation == generation_) {
    stats_[cluster_path] = {resp,
                            now + absl::Milliseconds(mount.metadata_ttl_ms())};
    Inserted(now);
  }
  resp.set_ttl_remaining_ms(std::max<uint64_t>(1, mount.metadata_ttl_ms()));
  return resp;
}

UnderStoreMetadata::~UnderStoreMetadata() {
  stopping_ = true;
  list_pool_.reset();
}

bool UnderStoreMetadata::ListDirectoryForStat(const v1::MountEntry& mount,
                                              const std::string& rel,
                                              absl::Time now) {
  if (rel.empty()) return false;  // The mount's root has no directory.
  const size_t slash = rel.rfind('/');
  const std::string dir_rel =
      slash == std::string::npos ? "" : rel.substr(0, slash);
  const std::string dir_key = Join(mount.path(), dir_rel);
  const absl::Duration ttl = absl::Milliseconds(mount.metadata_ttl_ms());
  std::shared_ptr<StatListing> wait, mine;
  {
    absl::MutexLock lock(&mu_);
    DirState& d = dirs_[dir_key];
    if (d.expires <= now && !d.listing) d = DirState{now + ttl};
    if (d.listed) return false;  // Listed, and `rel` was not in it.
    if (d.listing) {
      wait = d.listing;
    } else if (++d.misses >= 2) {
      mine = d.listing = std::make_shared<StatListing>();
    }
  }
  if (wait) {
    return wait->first_page.WaitForNotificationWithTimeout(absl::Seconds(60));
  }
  if (!mine) return false;

  // The first page here; more in the background, every entry cached for
  // Stat as its page comes.
  std::string token;
  int listed = 0;
  absl::Status status = StatListingPage(mount, dir_rel, &token, &listed);
  if (status.ok() && !token.empty() && listed < kStatListingLimit) {
    mine->first_page.Notify();
    list_pool_->Schedule([this, mount, dir_rel, dir_key, token, listed, mine] {
      ListRestForStat(mount, dir_rel, dir_key, token, listed, mine);
    });
    return true;
  }
  EndStatListing(dir_key, *mine, status);
  return status.ok();
}

absl::Status UnderStoreMetadata::StatListingPage(const v1::MountEntry& mount,
                                                 const std::string& dir_rel,
                                                 std::string* token,
                                                 int* listed) {
  const uint64_t generation = this->generation();
  LARDER_ASSIGN_OR_RETURN(
      v1::ListResponse page,
      ListingPage(mount, dir_rel, /*recursive=*/false, 1000, *token));
  const absl::Time now = absl::Now();
  // No longer than the page itself (it may come from the cache).
  const absl::Time expires = now + absl::Milliseconds(page.ttl_remaining_ms());
  const std::string prefix = absl::StrCat(mount.path(), "/");
  absl::MutexLock lock(&mu_);
  // Invalidated meanwhile: the listing goes on, its entries not kept.
  if (generation != generation_) {
    *token = page.next_page_token();
    return absl::OkStatus();
  }
  for (v1::ObjectInfo& e : *page.mutable_entries()) {
    if (!absl::StartsWith(e.path(), prefix)) continue;
    v1::StatResponse resp;
    resp.set_mount(mount.path());
    resp.set_relative(e.path().substr(prefix.size()));
    resp.set_block_size(mount.block_size());
    const std::string path = e.path();
    *resp.mutable_info() = std::move(e);
    stats_[path] = {std::move(resp), expires};
    Inserted(now);
    ++*listed;
  }
  *token = page.next_page_token();
  return absl::OkStatus();
}

void UnderStoreMetadata::ListRestForStat(v1::MountEntry mount,
                                         std::string dir_rel,
                                         std::string dir_key, std::string token,
                                         int listed,
                                         std::shared_ptr<StatListing> mine) {
  absl::Status status;
  while (status.ok() && !token.empty() && listed < kStatListingLimit) {
    if (stopping_) {
      status = absl::CancelledError("the master is stopping");
      break;
    }
    status = StatListingPage(mount, dir_rel, &token, &listed);
  }
  EndStatListing(dir_key, *mine, status);
}

void UnderStoreMetadata::EndStatListing(const std::string& dir_key,
                                        StatListing& mine,
                                        const absl::Status& status) {
  bool log = !status.ok();
  {
    absl::MutexLock lock(&mu_);
    DirState& d = dirs_[dir_key];
    d.listing.reset();
    if (IsOutage(status)) {
      // The store is down: the next misses list again (a try per pause at
      // most, the others answered at once), so that once it is back the
      // directory costs one listing, not a Stat per file for a TTL.
      d.misses = 0;
      log = !d.outage_logged;
      d.outage_logged = true;
    } else {
      // Listed; or a listing refused: it is not tried again until the TTL
      // passes, misses go to Stat one by one meanwhile.
      d.listed = true;
    }
  }
  if (log) {
    LARDER_LOG(WARNING, "metadata.list_for_stat_failed")
        .Field("dir", dir_key)
        .Field("status", status);
  }
  if (!mine.first_page.HasBeenNotified()) mine.first_page.Notify();
}

absl::StatusOr<v1::ListResponse> UnderStoreMetadata::List(
    const v1::ListRequest& request) {
  LARDER_ASSIGN_OR_RETURN(auto resolved, mounts_->Resolve(request.path()));
  const auto& [mount, rel] = resolved;
  // Bounded: a page is one message, and every distinct page is cached.
  const size_t page_size =
      request.page_size() == 0
          ? 1000
          : std::min<size_t>(request.page_size(), kMaxListPageSize);
  return ListingPage(mount, rel, request.recursive(), page_size,
                     request.page_token());
}

absl::StatusOr<v1::ListResponse> UnderStoreMetadata::ListingPage(
    const v1::MountEntry& mount, const std::string& rel, bool recursive,
    size_t page_size, const std::string& token) {
  const std::string cluster_path = Join(mount.path(), rel);
  const std::string key =
      absl::StrCat(cluster_path, "\x01", recursive, "|", page_size, "|", token);
  std::shared_ptr<PageFlight> flight;
  bool leader = false;
  uint64_t generation = 0;
  {
    const absl::Time now = absl::Now();
    absl::MutexLock lock(&mu_);
    if (auto it = lists_.find(key);
        it != lists_.end() && it->second.expires > now) {
      v1::ListResponse r = it->second.value;
      r.set_ttl_remaining_ms(RemainingMs(it->second.expires, now));
      return r;
    }
    generation = generation_;
    std::shared_ptr<PageFlight>& slot = page_flights_[key];
    if (slot == nullptr || slot->generation != generation) {
      slot = std::make_shared<PageFlight>();
      slot->generation = generation;
      leader = true;
    }
    flight = slot;
  }
  if (!leader) {
    // The leader's request has the store's deadlines: the wait is bounded.
    flight->done.WaitForNotification();
    return flight->result;
  }
  auto fetch = [&]() -> absl::StatusOr<v1::ListResponse> {
    LARDER_ASSIGN_OR_RETURN(std::shared_ptr<UnderStore> store, Store(mount));
    ListOptions o;
    o.recursive = recursive;
    o.page_size = page_size;
    o.page_token = token;
    const absl::Time now = absl::Now();
    LARDER_RETURN_IF_ERROR(StorePaused(mount, now));
    ++list_requests_;
    absl::StatusOr<ListPage> listed = store->List(rel, o);
    NoteStoreAnswer(mount, now, listed.status());
    LARDER_ASSIGN_OR_RETURN(ListPage page, std::move(listed));
    v1::ListResponse resp;
    for (const ObjectInfo& e : page.entries)
      ToProto(e, Join(mount.path(), e.path), resp.add_entries());
    resp.set_next_page_token(page.next_page_token);
    absl::MutexLock lock(&mu_);
    const absl::Time expires = EarliestLook(
        resp, now + absl::Milliseconds(mount.metadata_ttl_ms()), now);
    if (generation == generation_) {
      lists_[key] = {resp, expires};
      Inserted(now);
    }
    resp.set_ttl_remaining_ms(RemainingMs(expires, absl::Now()));
    return resp;
  };
  flight->result = fetch();
  {
    absl::MutexLock lock(&mu_);
    if (auto it = page_flights_.find(key);
        it != page_flights_.end() && it->second == flight)
      page_flights_.erase(it);
  }
  flight->done.Notify();
  return flight->result;
}

absl::Status UnderStoreMetadata::StorePaused(const v1::MountEntry& mount,
                                             absl::Time now) {
  std::optional<OutagePause::Outage> o =
      store_pause_.Check(PauseKey(mount), now);
  if (!o) return absl::OkStatus();
  ++paused_;
  return absl::Status(
      o->why.code(),
      absl::StrCat("the under-store of ", mount.path(), " is down (",
                   o->why.message(), "); the master asks it again ",
                   o->left > absl::ZeroDuration()
                       ? absl::StrCat("in ", absl::FormatDuration(o->left))
                       : std::string("with a request in flight now")));
}

void UnderStoreMetadata::NoteStoreAnswer(const v1::MountEntry& mount,
                                         absl::Time started,
                                         const absl::Status& status) {
  if (IsOutage(status)) {
    store_pause_.Failed(PauseKey(mount), started, absl::Now(), status);
  } else {
    store_pause_.Succeeded(PauseKey(mount));  // An answer, NotFound too.
  }
}

absl::Time UnderStoreMetadata::EarliestLook(const v1::ListResponse& page,
                                            absl::Time expires,
                                            absl::Time now) {
  for (const v1::ObjectInfo& e : page.entries()) {
    if (auto it = stats_.find(e.path());
        it != stats_.end() && it->second.expires > now)
      expires = std::min(expires, it->second.expires);
  }
  return expires;
}

void UnderStoreMetadata::Inserted(absl::Time now) {
  if (++inserts_since_sweep_ <
      std::max<size_t>(4096, (stats_.size() + lists_.size()) / 4))
    return;
  inserts_since_sweep_ = 0;
  auto sweep = [now](auto& map) {
    for (auto it = map.begin(); it != map.end();)
      it = it->second.expires <= now ? map.erase(it) : std::next(it);
  };
  sweep(stats_);
  sweep(lists_);
  for (auto it = dirs_.begin(); it != dirs_.end();) {
    it = it->second.expires <= now && !it->second.listing ? dirs_.erase(it)
                                                          : std::next(it);
  }
}

uint64_t UnderStoreMetadata::Invalidate(absl::string_view raw) {
  absl::StatusOr<std::string> path = NormalizeClusterPath(raw);
  if (!path.ok()) return 0;
  uint64_t n = 0;
  absl::MutexLock lock(&mu_);
  ++generation_;
  if (*path == "/") {
    // Everything ("/" + "/" would be no key's prefix): a new leader's
    // first act, and `larder invalidate /`.
    n = stats_.size() + lists_.size();
    stats_.clear();
    lists_.clear();
    dirs_.clear();
    return n;
  }
  // Two key ranges: the path itself with its listing keys ("PATH\x01..."),
  // and everything below it ("PATH/..." up to "PATH0", '0' being '/' + 1).
  // One scan would stop early at siblings like "PATH-b", which sort between.
  auto drop = [&](auto& map) {
    for (const auto& [lo, hi] : {std::make_pair(*path, *path + "\x02"),
                                 std::make_pair(*path + "/", *path + "0")}) {
      for (auto it = map.lower_bound(lo); it != map.end() && it->first < hi;) {
        it = map.erase(it);
        ++n;
      }
    }
  };
  drop(stats_);
  drop(lists_);
  // Every directory above it: the parent's listing holds the path's entry
  // too, and a path created below directories that did not exist (a
  // committed write) creates them, so their listings go as well, and with
  // their DirState the NotFound a listing of their parent implied. Not
  // what lies below them.
  for (std::string at = *path; at != "/";) {
    at = ParentClusterPath(at);
    for (auto it = lists_.lower_bound(at + "\x01");
         it != lists_.end() && it->first < at + "\x02";) {
      it = lists_.erase(it);
      ++n;
    }
    dirs_.erase(at);
  }
  const uint64_t entries = n;
  drop(dirs_);  // Directories listed for Stat are listed again.
  return entries;
}

}  // namespace larder
