// Copyright 2026 The Larder Authors.
#include "master/writes.h"

#include <vector>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/write_parts.h"
#include "google/protobuf/text_format.h"
#include "understore/uri.h"

namespace larder {
namespace {

std::string NewWriteId() {
  static absl::Mutex mu;
  static absl::BitGen gen ABSL_GUARDED_BY(mu);
  absl::MutexLock lock(&mu);
  return absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(gen),
                         absl::Uniform<uint64_t>(gen));
}

bool SameHandle(const v1::WriteHandle& a, const v1::WriteHandle& b) {
  return a.write_id() == b.write_id() && a.mount() == b.mount() &&
         a.relative() == b.relative() && a.upload_id() == b.upload_id() &&
         a.block_size() == b.block_size() && a.part_size() == b.part_size() &&
         a.overwrite() == b.overwrite();
}

std::string Join(const std::string& mount, const std::string& rel) {
  return rel.empty() ? mount : absl::StrCat(mount, "/", rel);
}

constexpr absl::string_view kRecordFolder = "writes/";

std::string RecordName(const std::string& write_id) {
  return absl::StrCat(kRecordFolder, write_id, ".textproto");
}

// An abort whose upload is gone for good: done, or nothing to abort, or a
// store that cannot abort (s3rver; nothing is visible either way).
bool AbortDone(const absl::Status& st) {
  return st.ok() || absl::IsNotFound(st) ||
         st.code() == absl::StatusCode::kUnimplemented;
}

// NewWriteId's form: the only ids a record may name (they become names in
// the state store).
bool IsWriteId(absl::string_view id) {
  return id.size() == 32 &&
         id.find_first_not_of("0123456789abcdef") == absl::string_view::npos;
}

}  // namespace

absl::StatusOr<v1::WriteHandle> Writes::Begin(
    const Caller& caller, const v1::BeginWriteRequest& request) {
  LARDER_ASSIGN_OR_RETURN(std::string path,
                          NormalizeClusterPath(request.path()));
  LARDER_ASSIGN_OR_RETURN(auto resolved, mounts_->Resolve(path));
  const auto& [mount, rel] = resolved;
  if (rel.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is the root of a mount: name a file inside it"));
  }
  for (absl::string_view part : absl::StrSplit(rel, '/')) {
    if (absl::StartsWith(part, kUploadTempPrefix)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": names starting with '", kUploadTempPrefix,
                       "' are Larder's uploads in progress"));
    }
  }
  LARDER_RETURN_IF_ERROR(MayWriteMount(caller, mount.path(), mount.writable()));
  LARDER_ASSIGN_OR_RETURN(std::shared_ptr<UnderStore> store,
                          metadata_->Store(mount));
  // Asked of the store itself: the metadata cache may be a TTL behind.
  absl::StatusOr<ObjectInfo> there = store->Stat(rel);
  if (there.ok() && there->is_dir) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is a directory"));
  }
  if (there.ok() && !request.overwrite()) {
    return absl::AlreadyExistsError(
        absl::StrCat(path, " exists (", there->size,
                     " bytes); overwrite it only by asking to (overwrite)"));
  }
  if (!there.ok() && there.status().code() != absl::StatusCode::kNotFound)
    return there.status();
  LARDER_ASSIGN_OR_RETURN(std::string upload_id, store->CreateUpload(rel));
  v1::WriteHandle h;
  h.set_write_id(NewWriteId());
  h.set_mount(mount.path());
  h.set_relative(rel);
  h.set_upload_id(std::move(upload_id));
  h.set_block_size(mount.block_size());
  h.set_part_size(FirstWritePartBytes(mount.block_size(), request.size_hint()));
  h.set_overwrite(request.overwrite());
  const absl::Time started = absl::Now();
  v1::StoredWrite record;
  *record.mutable_handle() = h;
  record.set_started_unix_ms(absl::ToUnixMillis(started));
  std::string text;
  google::protobuf::TextFormat::PrintToString(record, &text);
  if (absl::Status st = store_->Put(RecordName(h.write_id()), text); !st.ok()) {
    (void)store->AbortUpload(rel, h.upload_id());
    return absl::Status(st.code(),
                        absl::StrCat(path,
                                     ": the upload could not be recorded "
                                     "in the master's state store (",
                                     store_->Describe(), "): ", st.message()));
  }
  absl::MutexLock lock(&mu_);
  uploads_[h.write_id()] = Upload{h, started};
  LARDER_LOG(INFO, "master.write_begun")
      .Field("path", path)
      .Field("write_id", h.write_id())
      .Field("part_size", h.part_size());
  return h;
}

absl::StatusOr<Writes::Upload> Writes::Find(
    const v1::WriteHandle& handle) const {
  absl::MutexLock lock(&mu_);
  auto it = uploads_.find(handle.write_id());
  if (it == uploads_.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "write ", handle.write_id(), " of ",
        Join(handle.mount(), handle.relative()),
        " is not in progress at this master: it was committed or aborted, "
        "it is older than --write_max_age (",
        absl::FormatDuration(max_age_),
        ") and was aborted; write the object again"));
  }
  if (!SameHandle(it->second.handle, handle)) {
    return absl::InvalidArgumentError(
        absl::StrCat("write ", handle.write_id(),
                     ": the handle differs from the one BeginWrite gave"));
  }
  return it->second;
}

void Writes::Forget(const std::string& write_id) {
  {
    absl::MutexLock lock(&mu_);
    uploads_.erase(write_id);
  }
  if (absl::Status st = store_->Delete(RecordName(write_id));
      !st.ok() && !absl::IsNotFound(st)) {
    // The next leader finds the record and aborts an upload that is gone,
    // which the stores answer with OK or NotFound.
    LARDER_LOG(WARNING, "master.write_record_delete")
        .Field("write_id", write_id)
        .Field("status", st);
  }
}

absl::Status Writes::Reload() {
  LARDER_ASSIGN_OR_RETURN(auto records,
                          store_->List(std::string(kRecordFolder)));
  absl::flat_hash_map<std::string, Upload> uploads;
  for (const auto& [name, text] : records) {
    v1::StoredWrite r;
    if (!google::protobuf::TextFormat::ParseFromString(text, &r) ||
        !IsWriteId(r.handle().write_id()) ||
        name != RecordName(r.handle().write_id())) {
      LARDER_LOG(WARNING, "master.write_record_corrupt")
          .Field("name", name)
          .Field("store", store_->Describe());
      continue;
    }
    uploads[r.handle().write_id()] =
        Upload{r.handle(), absl::FromUnixMillis(r.started_unix_ms())};
  }
  LARDER_LOG(INFO, "master.writes_reloaded").Field("uploads", uploads.size());
  absl::MutexLock lock(&mu_);
  uploads_ = std::move(uploads);
  return absl::OkStatus();
}

absl::StatusOr<v1::CommitWriteResponse> Writes::Commit(
    const Caller& caller, const v1::CommitWriteRequest& request) {
  LARDER_ASSIGN_OR_RETURN(Upload up, Find(request.handle()));
  const v1::WriteHandle& h = up.handle;
  const std::string path = Join(h.mount(), h.relative());
  LARDER_ASSIGN_OR_RETURN(auto resolved, mounts_->Resolve(path));
  const v1::MountEntry& mount = resolved.first;
  if (mount.path() != h.mount() || mount.block_size() != h.block_size()) {
    // The upload is aborted where it can be (the same mount, re-made with
    // another block size); a mount that is gone leaves it to the store's
    // own cleanup, named here.
    absl::Status aborted =
        absl::FailedPreconditionError("the mount is gone or moved");
    if (mount.path() == h.mount()) {
      absl::StatusOr<std::shared_ptr<UnderStore>> store =
          metadata_->Store(mount);
      aborted = store.ok() ? (*store)->AbortUpload(h.relative(), h.upload_id())
                           : store.status();
    }
    if (!AbortDone(aborted)) {
      LARDER_LOG(WARNING, "master.write_orphaned")
          .Field("path", path)
          .Field("write_id", h.write_id())
          .Field("upload_id", h.upload_id())
          .Field("abort", aborted);
    }
    Forget(h.write_id());
    return absl::FailedPreconditionError(absl::StrCat(
        path,
        ": the mount changed while the object was written; write it "
        "again"));
  }
  LARDER_RETURN_IF_ERROR(MayWriteMount(caller, mount.path(), mount.writable()));
  // The parts: numbered 1..n, contiguous, each but the last as the part
  // size rule says (so the blocks a worker kept are the object's).
  std::vector<UploadedPart> parts;
  parts.reserve(request.parts_size());
  uint64_t offset = 0;
  for (int i = 0; i < request.parts_size(); ++i) {
    const v1::UploadedPart& p = request.parts(i);
    const bool last = i + 1 == request.parts_size();
    const uint64_t want = WritePartBytes(h.part_size(), i + 1);
    if (p.number() != static_cast<uint32_t>(i + 1) || p.offset() != offset ||
        (last ? p.size() > want : p.size() != want)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: part %u (offset %u, %u bytes) is not part %d of the object "
          "(offset %u, %s%u bytes)",
          path, p.number(), p.offset(), p.size(), i + 1, offset,
          last ? "at most " : "", want));
    }
    offset += p.size();
    parts.push_back(UploadedPart{p.number(), p.offset(), p.size(), p.token()});
  }
  if (parts.empty() || parts.size() > kMaxWriteParts) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": an upload has 1 to ", kMaxWriteParts,
                     " parts, not ", parts.size()));
  }
  LARDER_ASSIGN_OR_RETURN(std::shared_ptr<UnderStore> store,
                          metadata_->Store(mount));
  if (!h.overwrite()) {
    absl::StatusOr<ObjectInfo> there = store->Stat(h.relative());
    if (there.ok()) {
      (void)store->AbortUpload(h.relative(), h.upload_id());
      Forget(h.write_id());
      return absl::AlreadyExistsError(absl::StrCat(
          path,
          " was created by someone else while this write was in "
          "progress; nothing was written (overwrite to replace it)"));
    }
  }
  absl::StatusOr<ObjectInfo> completed =
      store->CompleteUpload(h.relative(), h.upload_id(), parts);
  if (!completed.ok()) {
    // An attempt may have gone through with its answer lost: the path may
    // hold a new object, so every node asks again.
    metadata_->Invalidate(path);
    invalidations_->Add(path);
    return completed.status();
  }
  ObjectInfo info = *std::move(completed);
  Forget(h.write_id());
  {
    v1::CommittedWrite done;
    *done.mutable_handle() = h;
    done.set_version(info.version);
    done.set_object_size(info.size);
    Remember(std::move(done));
  }
  if (info.size != offset) {
    LARDER_LOG(ERROR, "master.write_size")
        .Field("path", path)
        .Field("parts_bytes", offset)
        .Field("stored_bytes", info.size);
  }
  metadata_->Invalidate(path);
  invalidations_->Add(path);
  v1::CommitWriteResponse resp;
  v1::StatResponse* st = resp.mutable_stat();
  ToProto(info, path, st->mutable_info());
  st->set_mount(mount.path());
  st->set_relative(h.relative());
  st->set_block_size(mount.block_size());
  resp.set_invalidation_seq(invalidations_->seq());
  LARDER_LOG(INFO, "master.write_committed")
      .Field("path", path)
      .Field("write_id", h.write_id())
      .Field("bytes", info.size)
      .Field("parts", parts.size());
  return resp;
}

absl::Status Writes::Abort(const Caller& caller,
                           const v1::WriteHandle& handle) {
  absl::StatusOr<Upload> up = Find(handle);
  if (!up.ok() && up.status().code() == absl::StatusCode::kFailedPrecondition)
    return absl::OkStatus();
  LARDER_RETURN_IF_ERROR(up.status());
  const std::string path = Join(handle.mount(), handle.relative());
  LARDER_ASSIGN_OR_RETURN(auto resolved, mounts_->Resolve(path));
  LARDER_RETURN_IF_ERROR(
      MayWriteMount(caller, resolved.first.path(), resolved.first.writable()));
  LARDER_ASSIGN_OR_RETURN(std::shared_ptr<UnderStore> store,
                          metadata_->Store(resolved.first));
  absl::Status st = store->AbortUpload(handle.relative(), handle.upload_id());
  if (!AbortDone(st)) {
    // Kept: the --write_max_age sweep tries again.
    return st;
  }
  Forget(handle.write_id());
  if (st.code() == absl::StatusCode::kUnimplemented) {
    // A store that cannot abort (s3rver): nothing is visible either way.
    LARDER_LOG(WARNING, "master.write_abort")
        .Field("path", path)
        .Field("status", st);
  }
  return absl::OkStatus();
}

size_t Writes::AbortExpired(absl::Time now) {
  std::vector<Upload> expired;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = uploads_.begin(); it != uploads_.end();) {
      if (now - it->second.started > max_age_) {
        expired.push_back(std::move(it->second));
        uploads_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  for (const Upload& u : expired) {
    const std::string path = Join(u.handle.mount(), u.handle.relative());
    absl::Status st;
    absl::StatusOr<std::pair<v1::MountEntry, std::string>> m =
        mounts_->Resolve(path);
    if (!m.ok()) {
      st = m.status();
    } else if (absl::StatusOr<std::shared_ptr<UnderStore>> store =
                   metadata_->Store(m->first);
               !store.ok()) {
      st = store.status();
    } else {
      st = (*store)->AbortUpload(u.handle.relative(), u.handle.upload_id());
    }
    LARDER_LOG(WARNING, "master.write_expired")
        .Field("path", path)
        .Field("write_id", u.handle.write_id())
        .Field("age", absl::FormatDuration(now - u.started))
        .Field("abort", st);
    if (AbortDone(st)) {
      Forget(u.handle.write_id());
    } else {
      // The store could not abort it now: kept (in memory and in the state
      // store), and tried again a minute later.
      absl::MutexLock lock(&mu_);
      uploads_[u.handle.write_id()] =
          Upload{u.handle, now - max_age_ + absl::Minutes(1)};
    }
  }
  return expired.size();
}

void Writes::Remember(v1::CommittedWrite write) {
  const absl::Time now = absl::Now();
  const std::string id = write.handle().write_id();
  absl::MutexLock lock(&mu_);
  while (!committed_order_.empty()) {
    auto oldest = committed_.find(committed_order_.front());
    if (oldest != committed_.end() && committed_order_.size() < kMaxCommitted &&
        now - oldest->second.at <= kCommittedMemory) {
      break;
    }
    if (oldest != committed_.end()) committed_.erase(oldest);
    committed_order_.pop_front();
  }
  // Write ids are the master's own, new for each upload: never seen twice.
  if (committed_.try_emplace(id, Done{std::move(write), now}).second)
    committed_order_.push_back(id);
}

absl::StatusOr<v1::CommittedWrite> Writes::Committed(
    const std::string& write_id) const {
  absl::MutexLock lock(&mu_);
  auto it = committed_.find(write_id);
  if (it == committed_.end() ||
      absl::Now() - it->second.at > kCommittedMemory) {
    return absl::NotFoundError(
        absl::StrCat("write ", write_id.substr(0, 64),
                     " is no write this master committed in the last ",
                     absl::FormatDuration(kCommittedMemory)));
  }
  return it->second.write;
}

size_t Writes::in_progress() const {
  absl::MutexLock lock(&mu_);
  return uploads_.size();
}

}  // namespace larder
