// Copyright 2026 The Larder Authors.
#include "master/mount_registry.h"

#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/block_key.h"
#include "common/config.h"
#include "common/status_macros.h"
#include "understore/mount_store.h"
#include "understore/uri.h"

namespace larder {

namespace {
constexpr char kMountsName[] = "mounts.textproto";
}  // namespace

absl::StatusOr<std::unique_ptr<MountRegistry>> MountRegistry::Open(
    StateStore* store) {
  std::unique_ptr<MountRegistry> r(new MountRegistry(store));
  LARDER_RETURN_IF_ERROR(r->Reload());
  return r;
}

std::unique_ptr<MountRegistry> MountRegistry::Unloaded(StateStore* store) {
  return std::unique_ptr<MountRegistry>(new MountRegistry(store));
}

absl::StatusOr<std::unique_ptr<MountRegistry>> MountRegistry::Open(
    const std::string& state_dir) {
  LARDER_ASSIGN_OR_RETURN(std::unique_ptr<LocalStateStore> store,
                          LocalStateStore::Open(state_dir));
  LARDER_ASSIGN_OR_RETURN(std::unique_ptr<MountRegistry> r, Open(store.get()));
  r->owned_store_ = std::move(store);
  return r;
}

absl::Status MountRegistry::Reload() {
  absl::StatusOr<std::string> text = store_->Get(kMountsName);
  v1::MountTable table;
  if (text.ok()) {
    if (!google::protobuf::TextFormat::ParseFromString(*text, &table)) {
      return absl::DataLossError(absl::StrCat("the mount table ", kMountsName,
                                              " in ", store_->Describe(),
                                              " is corrupt; fix or remove it"));
    }
  } else if (!absl::IsNotFound(text.status())) {
    return text.status();
  }
  absl::MutexLock lock(&mu_);
  mounts_ = MountSet(std::move(table));
  return absl::OkStatus();
}

absl::Status MountRegistry::Persist(const v1::MountTable& table) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(table, &text);
  absl::Status st = store_->Put(kMountsName, text);
  if (!st.ok()) {
    return absl::Status(
        st.code(),
        absl::StrCat("the mount table was not changed: ", st.message()));
  }
  return absl::OkStatus();
}

namespace {

// How mount `want` differs from `have` of the same path, for a refusal:
// "from 'file:///a' (asked: 'file:///b')", or the first other field.
std::string MountDifference(const v1::MountEntry& have,
                            const v1::MountEntry& want) {
  if (have.uri() != want.uri()) {
    return absl::StrCat("from '", have.uri(), "' (asked: '", want.uri(), "')");
  }
  auto field = [](absl::string_view name, const auto& a, const auto& b) {
    return absl::StrCat("from the same URI with ", name, " ", a, " (asked: ", b,
                        ")");
  };
  if (have.block_size() != want.block_size())
    return field("block size", have.block_size(), want.block_size());
  if (have.metadata_ttl_ms() != want.metadata_ttl_ms())
    return field("metadata TTL (ms)", have.metadata_ttl_ms(),
                 want.metadata_ttl_ms());
  if (have.credentials() != want.credentials())
    return field("credentials", absl::StrCat("'", have.credentials(), "'"),
                 absl::StrCat("'", want.credentials(), "'"));
  if (have.writable() != want.writable())
    return field("writable", have.writable(), want.writable());
  if (have.eviction() != want.eviction() ||
      have.epoch_window_ms() != want.epoch_window_ms())
    return field("eviction",
                 absl::StrCat("'", have.eviction(), "' (window ",
                              have.epoch_window_ms(), " ms)"),
                 absl::StrCat("'", want.eviction(), "' (window ",
                              want.epoch_window_ms(), " ms)"));
  return "from the same URI with another owner, group or file mode";
}

}  // namespace

absl::StatusOr<v1::MountTable> MountRegistry::Add(v1::MountEntry entry) {
  LARDER_ASSIGN_OR_RETURN(std::string path, NormalizeClusterPath(entry.path()));
  entry.set_path(path);
  // Not given: the default for a new mount, and whatever an existing mount
  // of the path has (a start-up script that names no block size stays
  // idempotent across a change of the default).
  const bool default_block_size = entry.block_size() == 0;
  if (default_block_size)
    entry.set_block_size(DefaultBlockSize(entry.writable()));
  if (entry.metadata_ttl_ms() == 0) {
    entry.set_metadata_ttl_ms(
        static_cast<uint64_t>(absl::ToInt64Milliseconds(kDefaultMetadataTtl)));
  }
  if (entry.eviction() == "lru") entry.clear_eviction();
  if (entry.eviction() == "epoch" && entry.epoch_window_ms() == 0) {
    entry.set_epoch_window_ms(
        static_cast<uint64_t>(absl::ToInt64Milliseconds(kDefaultEpochWindow)));
  }
  if (entry.eviction().empty()) entry.clear_epoch_window_ms();
  // The URI must parse (credentials are checked on first use by each
  // process).
  LARDER_RETURN_IF_ERROR(ValidateMountEntry(entry));
  absl::MutexLock lock(&mu_);
  for (const v1::MountEntry& m : mounts_.table().mounts()) {
    if (m.path() == path) {
      // The same mount again is done already (idempotent start-up
      // scripts); another one on its path is a conflict.
      if (default_block_size) entry.set_block_size(m.block_size());
      if (google::protobuf::util::MessageDifferencer::Equals(m, entry))
        return mounts_.table();
      return absl::AlreadyExistsError(absl::StrCat(
          "'", path, "' is already mounted ", MountDifference(m, entry),
          "; run `larder unmount ", path, "` first to change it"));
    }
    if (absl::StartsWith(path, m.path() + "/") ||
        absl::StartsWith(m.path(), path + "/")) {
      return absl::AlreadyExistsError(absl::StrCat(
          "'", path, "' overlaps the existing mount '", m.path(), "'"));
    }
  }
  v1::MountTable next = mounts_.table();
  *next.add_mounts() = entry;
  next.set_version(mounts_.version() + 1);
  LARDER_RETURN_IF_ERROR(Persist(next));
  mounts_ = MountSet(std::move(next));
  return mounts_.table();
}

absl::StatusOr<v1::MountTable> MountRegistry::Remove(const std::string& raw) {
  LARDER_ASSIGN_OR_RETURN(std::string path, NormalizeClusterPath(raw));
  absl::MutexLock lock(&mu_);
  v1::MountTable next;
  bool found = false;
  for (const v1::MountEntry& m : mounts_.table().mounts()) {
    if (m.path() == path) {
      found = true;
    } else {
      *next.add_mounts() = m;
    }
  }
  if (!found)
    return absl::NotFoundError(absl::StrCat("no mount at '", path, "'"));
  next.set_version(mounts_.version() + 1);
  LARDER_RETURN_IF_ERROR(Persist(next));
  mounts_ = MountSet(std::move(next));
  return mounts_.table();
}

v1::MountTable MountRegistry::Get() const {
  absl::MutexLock lock(&mu_);
  return mounts_.table();
}

std::vector<std::string> MountRegistry::VirtualChildren(
    absl::string_view raw) const {
  absl::StatusOr<std::string> path = NormalizeClusterPath(raw);
  if (!path.ok()) return {};
  const std::string prefix = *path == "/" ? "/" : *path + "/";
  std::vector<std::string> out;
  absl::MutexLock lock(&mu_);
  for (const v1::MountEntry& m : mounts_.table().mounts()) {
    if (!absl::StartsWith(m.path(), prefix)) continue;
    const size_t end = m.path().find('/', prefix.size());
    out.push_back(m.path().substr(0, end));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

absl::StatusOr<std::pair<v1::MountEntry, std::string>> MountRegistry::Resolve(
    absl::string_view raw) const {
  LARDER_ASSIGN_OR_RETURN(std::string path, NormalizeClusterPath(raw));
  absl::MutexLock lock(&mu_);
  if (std::optional<MountSet::Resolved> r = mounts_.Resolve(path))
    return std::make_pair(*r->entry, std::string(r->relative));
  return absl::NotFoundError(
      absl::StrCat("no mount holds '", path, "' (see larder mount)"));
}

}  // namespace larder
