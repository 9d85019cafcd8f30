// Copyright 2026 The Larder Authors.
#include "client/metadata_view.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "understore/uri.h"

namespace larder {
namespace {

// The master or its under-store could not be reached: an expired entry may
// be served instead (stale-if-error).
bool Unreachable(const absl::Status& s) {
  return s.code() == absl::StatusCode::kUnavailable ||
         s.code() == absl::StatusCode::kDeadlineExceeded;
}

absl::StatusOr<v1::StatResponse> Answer(const NodeMetadataCache::Stat& s) {
  if (!s.status.ok()) return s.status;
  return s.response;
}

}  // namespace

FileInfo FromProto(const v1::ObjectInfo& o) {
  FileInfo f{o.path(), o.is_dir(), o.size(), o.version(),
             absl::FromUnixNanos(o.mtime_ns())};
  if (o.has_uid()) f.uid = o.uid();
  if (o.has_gid()) f.gid = o.gid();
  f.mode = o.mode();
  f.own_mode = o.own_mode();
  f.writable = o.writable();
  return f;
}

void ToProto(const FileInfo& f, v1::ObjectInfo* o) {
  o->set_path(f.path);
  o->set_is_dir(f.is_dir);
  o->set_size(f.size);
  o->set_version(f.version);
  o->set_mtime_ns(absl::ToUnixNanos(f.mtime));
  if (f.uid) o->set_uid(*f.uid);
  if (f.gid) o->set_gid(*f.gid);
  o->set_mode(f.mode);
  o->set_own_mode(f.own_mode);
  o->set_writable(f.writable);
}

std::shared_ptr<const NodeMetadataCache::Stat> MetadataView::Fresh(
    const std::string& key, absl::Time now,
    std::shared_ptr<const NodeMetadataCache::Stat>* stale,
    absl::Time* stale_expires) {
  if (auto f = cache_->GetStat(key)) {
    if (f->expires > now) {
      ++hits_;
      return f->value;
    }
    *stale = f->value;
    *stale_expires = f->expires;
  }
  if (key != "/") {
    if (auto l = cache_->GetListing(ParentClusterPath(key))) {
      std::optional<NodeMetadataCache::Stat> s = FromListing(key, *l->value);
      if (s && l->expires > now) {
        ++hits_;
        return std::make_shared<const NodeMetadataCache::Stat>(*std::move(s));
      }
      if (s && l->expires > *stale_expires) {
        *stale = std::make_shared<const NodeMetadataCache::Stat>(*std::move(s));
        *stale_expires = l->expires;
      }
    }
  }
  return nullptr;
}

std::optional<absl::StatusOr<v1::StatResponse>> MetadataView::CachedStat(
    absl::string_view path) {
  absl::StatusOr<std::string> key = NormalizeClusterPath(path);
  if (!key.ok()) return key.status();
  std::shared_ptr<const NodeMetadataCache::Stat> stale;
  absl::Time stale_expires = absl::InfinitePast();
  std::shared_ptr<const NodeMetadataCache::Stat> s =
      Fresh(*key, absl::Now(), &stale, &stale_expires);
  if (s == nullptr) return std::nullopt;
  return Answer(*s);
}

absl::StatusOr<v1::StatResponse> MetadataView::Stat(absl::string_view path) {
  LARDER_ASSIGN_OR_RETURN(const std::string key, NormalizeClusterPath(path));
  const absl::Time now = absl::Now();
  using Ptr = std::shared_ptr<const NodeMetadataCache::Stat>;
  Ptr stale_answer;
  absl::Time stale_expires = absl::InfinitePast();
  if (Ptr s = Fresh(key, now, &stale_answer, &stale_expires)) return Answer(*s);
  std::optional<Ptr> stale;
  if (stale_answer) stale = std::move(stale_answer);
  LARDER_ASSIGN_OR_RETURN(
      Ptr answer, FetchOrStale<Ptr>(key, std::move(stale), stale_expires, now,
                                    [&] { return Fetch(key, now); }));
  return Answer(*answer);
}

absl::StatusOr<std::shared_ptr<const NodeMetadataCache::Stat>>
MetadataView::Fetch(const std::string& key, absl::Time now) {
  const auto [epoch, seq] = invalidations();
  // Only paths in this client's mounts: the master gave it those for its
  // token, and the worker applies the mount's owner and mode to this
  // process.
  if (std::optional<v1::MountEntry> m = backend_->MountOf(key)) {
    if (std::optional<Backend::NodeAnswer> n =
            backend_->NodeStat(key, epoch, seq)) {
      // The worker asked the master, whose store did not answer: asking
      // the master here would wait on the same store again.
      if (IsStoreError(n->stat.status)) return n->stat.status;
      ++node_hits_;
      auto s =
          std::make_shared<const NodeMetadataCache::Stat>(std::move(n->stat));
      cache_->PutStat(
          key, *s,
          absl::Now() +
              std::min(n->ttl, absl::Milliseconds(m->metadata_ttl_ms())));
      return s;
    }
  }
  ++misses_;
  absl::StatusOr<v1::StatResponse> r = backend_->MasterStat(key);
  if (!r.ok() && r.status().code() != absl::StatusCode::kNotFound)
    return r.status();
  // NotFound is an answer too: kept, negative.
  const absl::Duration ttl =
      FreshFor(TtlOf(key), r.ok() ? r->ttl_remaining_ms() : 0);
  auto s =
      std::make_shared<const NodeMetadataCache::Stat>(NodeMetadataCache::Stat{
          r.status(), r.ok() ? *std::move(r) : v1::StatResponse()});
  cache_->PutStat(key, *s, now + ttl);
  return s;
}

absl::StatusOr<std::shared_ptr<const NodeMetadataCache::Listing>>
MetadataView::ListDir(absl::string_view path) {
  LARDER_ASSIGN_OR_RETURN(const std::string key, NormalizeClusterPath(path));
  const absl::Time now = absl::Now();
  std::optional<NodeMetadataCache::Found<NodeMetadataCache::Listing>> cached =
      cache_->GetListing(key);
  if (cached && cached->expires > now) {
    ++hits_;
    return cached->value;
  }
  ++misses_;
  using Listing = std::shared_ptr<const NodeMetadataCache::Listing>;
  return FetchOrStale<Listing>(
      key, cached ? std::optional<Listing>(cached->value) : std::nullopt,
      cached ? cached->expires : absl::InfinitePast(), now,
      [&]() -> absl::StatusOr<Listing> {
        auto listing = std::make_shared<NodeMetadataCache::Listing>();
        size_t bytes = 0;
        std::string token;
        // Fresh as long as its stalest page.
        absl::Duration ttl = TtlOf(key);
        do {
          LARDER_ASSIGN_OR_RETURN(v1::ListResponse page,
                                  backend_->MasterList(key, token));
          ttl = FreshFor(ttl, page.ttl_remaining_ms());
          for (const v1::ObjectInfo& e : page.entries()) {
            listing->push_back(FromProto(e));
            bytes += NodeMetadataCache::EntryBytes(listing->back());
          }
          if (bytes > cache_->ListingLimitBytes()) {
            return absl::ResourceExhaustedError(absl::StrCat(
                "directory ", key, " is larger than the metadata cache ",
                "takes (", cache_->ListingLimitBytes(),
                " bytes); page it with List"));
          }
          token = page.next_page_token();
        } while (!token.empty());
        std::sort(listing->begin(), listing->end(),
                  [](const FileInfo& a, const FileInfo& b) {
                    return a.path < b.path;
                  });
        cache_->PutListing(key, listing, now + ttl);
        return listing;
      });
}

std::shared_ptr<const NodeMetadataCache::Listing> MetadataView::CachedListDir(
    absl::string_view path) {
  absl::StatusOr<std::string> key = NormalizeClusterPath(path);
  if (!key.ok()) return nullptr;
  std::optional<NodeMetadataCache::Found<NodeMetadataCache::Listing>> cached =
      cache_->GetListing(*key);
  if (!cached || cached->expires <= absl::Now()) return nullptr;
  return cached->value;
}

template <typename T>
absl::StatusOr<T> MetadataView::FetchOrStale(
    const std::string& key, std::optional<T> stale, absl::Time expired,
    absl::Time now, absl::FunctionRef<absl::StatusOr<T>()> fetch) {
  const bool can_stale =
      stale.has_value() && now - expired < options_.stale_window;
  std::optional<v1::MountEntry> m = backend_->MountOf(key);
  const std::string mount = m ? m->path() : std::string();
  std::optional<absl::Status> down;
  if (can_stale) {
    if (MasterDown(now)) {
      down = MasterDownError();
    } else if (!mount.empty()) {
      down = StoreDown(mount, now);
    }
  }
  absl::StatusOr<T> r = down ? absl::StatusOr<T>(*std::move(down)) : fetch();
  if (r.ok() || !Unreachable(r.status())) {
    if (!down && !mount.empty()) store_pause_.Succeeded(mount);
    return r;
  }
  if (!down) {
    // The master answered that the store did not: the master is up.
    if (!IsStoreError(r.status())) {
      NoteMasterDown(now);
      // Nothing learnt of the store: if this was its try, another tries.
      if (!mount.empty()) store_pause_.Abandoned(mount, now);
    } else if (!mount.empty()) {
      store_pause_.Failed(mount, now, absl::Now(), r.status());
    }
  }
  if (!can_stale) return r;
  NoteStale(key, r.status());
  return *std::move(stale);
}

std::optional<NodeMetadataCache::Stat> MetadataView::FromListing(
    const std::string& key, const NodeMetadataCache::Listing& listing) {
  auto it = std::lower_bound(
      listing.begin(), listing.end(), key,
      [](const FileInfo& f, const std::string& k) { return f.path < k; });
  if (it == listing.end() || it->path != key) {
    return NodeMetadataCache::Stat{
        absl::NotFoundError(absl::StrCat("no such file: ", key)), {}};
  }
  NodeMetadataCache::Stat s;
  ToProto(*it, s.response.mutable_info());
  if (!it->is_dir) {
    std::optional<v1::MountEntry> m = backend_->MountOf(key);
    if (!m) return std::nullopt;
    s.response.set_mount(m->path());
    s.response.set_relative(
        key.size() > m->path().size() ? key.substr(m->path().size() + 1) : "");
    s.response.set_block_size(m->block_size());
  }
  return s;
}

absl::Duration MetadataView::TtlOf(const std::string& key) {
  std::optional<v1::MountEntry> m = backend_->MountOf(key);
  return m ? absl::Milliseconds(m->metadata_ttl_ms()) : absl::Seconds(5);
}

bool MetadataView::MasterDown(absl::Time now) {
  absl::MutexLock lock(&mu_);
  return now < master_down_until_;
}

void MetadataView::NoteMasterDown(absl::Time now) {
  absl::MutexLock lock(&mu_);
  master_down_until_ = now + kMasterDownPause;
}

absl::Status MetadataView::MasterDownError() const {
  return absl::UnavailableError(absl::StrCat(
      "the Larder master at ", options_.master,
      " did not answer within the last second; serving cached metadata"));
}

std::optional<absl::Status> MetadataView::StoreDown(const std::string& mount,
                                                    absl::Time now) {
  std::optional<OutagePause::Outage> o = store_pause_.Check(mount, now);
  if (!o) return std::nullopt;
  return absl::UnavailableError(absl::StrCat(
      "the under-store of ", mount, " did not answer (", o->why.message(),
      "); serving cached metadata, ",
      o->left > absl::ZeroDuration()
          ? absl::StrCat("asking again in ", absl::FormatDuration(o->left))
          : std::string("while another request asks")));
}

void MetadataView::NoteStale(const std::string& key, const absl::Status& why) {
  ++stale_;
  {
    absl::MutexLock lock(&mu_);
    if (stale_logged_.size() >= 10000) stale_logged_.clear();
    if (!stale_logged_.insert(key).second) return;
  }
  LARDER_LOG(WARNING, "client.metadata_stale")
      .Field("path", key)
      .Field("why", why)
      .Field("stale_window", options_.stale_window);
}

void MetadataView::SyncInvalidations(uint64_t epoch, uint64_t seq) {
  uint64_t from_epoch = 0, from_seq = 0;
  {
    absl::MutexLock lock(&mu_);
    if (epoch == epoch_ && seq == seq_) return;
    if (epoch_ == 0) {  // The first ring: nothing to drop yet.
      epoch_ = epoch;
      seq_ = seq;
      return;
    }
    from_epoch = epoch_;
    from_seq = seq_;
  }
  absl::StatusOr<v1::GetInvalidationsResponse> resp =
      backend_->MasterInvalidations(from_epoch, from_seq);
  if (!resp.ok()) return;  // The next ring poll tries again.
  std::vector<std::string> dropped;
  if (resp->reset()) {
    cache_->Clear();
    dropped.push_back("/");
  } else {
    for (const std::string& p : resp->paths()) {
      if (absl::StatusOr<std::string> key = NormalizeClusterPath(p); key.ok()) {
        cache_->Invalidate(*key);
        dropped.push_back(*std::move(key));
      }
    }
  }
  std::function<void(const std::string&)> hook;
  {
    absl::MutexLock lock(&mu_);
    epoch_ = resp->epoch();
    seq_ = resp->seq();
    stale_logged_.clear();
    hook = hook_;
  }
  if (hook) {
    for (const std::string& p : dropped) hook(p);
  }
  LARDER_LOG(INFO, "client.metadata_invalidated")
      .Field("paths", resp->paths_size())
      .Field("all", resp->reset());
}

void MetadataView::SetInvalidationHook(
    std::function<void(const std::string&)> hook) {
  absl::MutexLock lock(&mu_);
  hook_ = std::move(hook);
}

std::pair<uint64_t, uint64_t> MetadataView::invalidations() const {
  absl::MutexLock lock(&mu_);
  return {epoch_, seq_};
}

void MetadataView::StartFrom(uint64_t epoch, uint64_t seq) {
  absl::MutexLock lock(&mu_);
  epoch_ = epoch;
  seq_ = seq;
}

MetadataView::Counters MetadataView::counters() const {
  return {hits_.load(), node_hits_.load(), misses_.load(), stale_.load()};
}

}  // namespace larder
