// Copyright 2026 The Larder Authors.
#include "understore/under_store.h"

#include <openssl/rand.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "understore/uri.h"

namespace larder {
namespace {

absl::Status CannotWrite(absl::string_view scheme) {
  return absl::UnimplementedError(
      absl::StrCat(scheme, ": this under-store cannot write"));
}

}  // namespace

absl::StatusOr<std::string> UnderStore::CreateUpload(absl::string_view path) {
  (void)path;
  return CannotWrite(scheme());
}

absl::StatusOr<UploadedPart> UnderStore::UploadPart(absl::string_view path,
                                                    absl::string_view upload_id,
                                                    uint32_t number,
                                                    uint64_t offset,
                                                    absl::string_view data) {
  (void)path;
  (void)upload_id;
  (void)number;
  (void)offset;
  (void)data;
  return CannotWrite(scheme());
}

absl::StatusOr<ObjectInfo> UnderStore::CompleteUpload(
    absl::string_view path, absl::string_view upload_id,
    const std::vector<UploadedPart>& parts) {
  (void)path;
  (void)upload_id;
  (void)parts;
  return CannotWrite(scheme());
}

absl::Status UnderStore::AbortUpload(absl::string_view path,
                                     absl::string_view upload_id) {
  (void)path;
  (void)upload_id;
  return CannotWrite(scheme());
}

absl::Status ListAll(UnderStore& store, absl::string_view dir, bool recursive,
                     absl::FunctionRef<absl::Status(const ObjectInfo&)> fn,
                     size_t page_size) {
  ListOptions options;
  options.recursive = recursive;
  options.page_size = page_size;
  do {
    LARDER_ASSIGN_OR_RETURN(ListPage page, store.List(dir, options));
    for (const ObjectInfo& entry : page.entries)
      LARDER_RETURN_IF_ERROR(fn(entry));
    if (!page.next_page_token.empty() &&
        page.next_page_token == options.page_token) {
      return absl::InternalError(
          absl::StrCat(store.DebugString(), ": the listing of '", dir,
                       "' returned the page token it was given; stopped"));
    }
    options.page_token = std::move(page.next_page_token);
  } while (!options.page_token.empty());
  return absl::OkStatus();
}

absl::StatusOr<ObjectInfo> StatAsDirectory(UnderStore& store,
                                           const std::string& rel,
                                           absl::string_view what) {
  ObjectInfo info;
  info.path = rel;
  info.is_dir = true;
  // A folder's marker object ("dir/", as consoles and s3a make) sorts first
  // under the prefix and is no entry: a page can come back empty with more
  // to follow, so a few pages are looked at before "no such prefix".
  ListOptions probe;
  probe.page_size = 2;
  for (int pages = 0; pages < kStatAsDirectoryPages; ++pages) {
    LARDER_ASSIGN_OR_RETURN(ListPage page, store.List(rel, probe));
    if (rel.empty() || !page.entries.empty()) return info;
    if (page.next_page_token.empty()) break;
    probe.page_token = std::move(page.next_page_token);
  }
  return absl::NotFoundError(
      absl::StrCat("stat of ", what, ": no such object or prefix"));
}

bool IsUploadTempName(absl::string_view name) {
  return absl::StartsWith(name, kUploadTempPrefix);
}

bool HasUploadTempComponent(absl::string_view rel) {
  for (absl::string_view part : absl::StrSplit(rel, '/')) {
    if (IsUploadTempName(part)) return true;
  }
  return false;
}

absl::StatusOr<std::string> NormalizeUploadPath(absl::string_view scheme,
                                                absl::string_view path) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeStorePath(path));
  if (rel.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(scheme, ": cannot upload to the store root"));
  }
  if (HasUploadTempComponent(rel)) {
    return absl::InvalidArgumentError(absl::StrCat(
        scheme, ": cannot upload to '", rel, "': names starting with '",
        kUploadTempPrefix, "' are reserved for uploads in progress"));
  }
  return rel;
}

std::string NewUploadId() {
  unsigned char bytes[8];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    // OpenSSL's generator is seeded from the kernel; it does not fail on
    // Linux. Should it, the time and address still keep ids apart.
    const uint64_t t = static_cast<uint64_t>(absl::GetCurrentTimeNanos()) ^
                       reinterpret_cast<uintptr_t>(&bytes);
    for (size_t i = 0; i < sizeof(bytes); ++i)
      bytes[i] = static_cast<unsigned char>(t >> (8 * i));
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

absl::Status CheckLocalUploadId(absl::string_view scheme,
                                absl::string_view id) {
  bool ok = id.size() == 16;
  for (char c : id) {
    ok = ok && (absl::ascii_isdigit(static_cast<unsigned char>(c)) ||
                (c >= 'a' && c <= 'f'));
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(scheme, ": '", absl::CHexEscape(id.substr(0, 64)),
                   "' is no upload id of this store (16 hex digits)"));
}

absl::Status CheckUploadPart(absl::string_view scheme, uint32_t number,
                             uint64_t offset, uint64_t size) {
  if (number < 1 || number > kMaxUploadParts) {
    return absl::InvalidArgumentError(absl::StrCat(
        scheme, ": part number ", number, " is outside 1..", kMaxUploadParts));
  }
  if (offset + size < offset) {
    return absl::InvalidArgumentError(absl::StrCat(
        scheme, ": part ", number, " at offset ", offset, " overflows"));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> CheckUploadParts(
    absl::string_view scheme, const std::vector<UploadedPart>& parts) {
  if (parts.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(scheme,
                     ": an upload is completed with one part or more (an empty "
                     "object is one part of 0 bytes)"));
  }
  if (parts.size() > kMaxUploadParts) {
    return absl::InvalidArgumentError(absl::StrCat(
        scheme, ": ", parts.size(), " parts, more than ", kMaxUploadParts));
  }
  uint64_t end = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const UploadedPart& p = parts[i];
    if (p.number != i + 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(scheme, ": part ", i + 1, " of the list is numbered ",
                       p.number, "; parts must be numbered 1..n in order"));
    }
    if (p.offset != end) {
      return absl::InvalidArgumentError(absl::StrCat(
          scheme, ": part ", p.number, " starts at offset ", p.offset,
          " where the parts before it end at ", end, " (a gap or an overlap)"));
    }
    if (i + 1 < parts.size() && p.size < kMinUploadPartBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(scheme, ": part ", p.number, " has ", p.size,
                       " bytes; every part but the last needs at least ",
                       kMinUploadPartBytes));
    }
    if (end + p.size < end) {
      return absl::InvalidArgumentError(
          absl::StrCat(scheme, ": part ", p.number, " overflows"));
    }
    end += p.size;
  }
  return end;
}

absl::Status MayAccessPath(const Caller& caller, absl::string_view mount_path,
                           const MountAccess& access, UnderStore& store,
                           absl::string_view relative, PathAccess want,
                           uint32_t daemon_uid, uint32_t daemon_gid) {
  if (want == PathAccess::kLookup && relative.empty() && caller.local) {
    // The mount's root, as the directory it is mounted in shows it: the
    // role and the token's mounts decide, not the mount's mode.
    Caller mount_point = caller;
    mount_point.local.reset();
    return MayReadMount(mount_point, mount_path, access, daemon_uid,
                        daemon_gid);
  }
  LARDER_RETURN_IF_ERROR(
      MayReadMount(caller, mount_path, access, daemon_uid, daemon_gid));
  if (!HeldToFileModes(caller, access)) return absl::OkStatus();
  switch (want) {
    case PathAccess::kLookup:
      return store.MayLookup(relative, *caller.local);
    case PathAccess::kList:
      return store.MayList(relative, *caller.local);
    case PathAccess::kRead:
      break;
  }
  return store.MayRead(relative, *caller.local);
}

void FilterRecursiveListing(const Caller& caller, absl::string_view mount_path,
                            const MountAccess& access, UnderStore& store,
                            absl::string_view dir, v1::ListResponse* page) {
  if (!HeldToFileModes(caller, access)) return;
  absl::flat_hash_map<std::string, bool> listable;
  // The first directory below `dir` on the way to mount-relative path
  // `relative` that the caller may not list; empty if none.
  auto hidden_by = [&](absl::string_view relative) -> std::string {
    const size_t from = dir.empty() ? 0 : dir.size() + 1;
    for (size_t slash = relative.find('/', from);
         slash != absl::string_view::npos;
         slash = relative.find('/', slash + 1)) {
      const std::string between(relative.substr(0, slash));
      auto [it, added] = listable.try_emplace(between, false);
      if (added) it->second = store.MayList(between, *caller.local).ok();
      if (!it->second) return between;
    }
    return "";
  };
  const size_t cut = mount_path.size() + 1;
  std::string last_hidden;
  auto* entries = page->mutable_entries();
  int kept = 0;
  for (int i = 0; i < entries->size(); ++i) {
    const std::string& path = entries->Get(i).path();
    const absl::string_view relative =
        path.size() > cut ? absl::string_view(path).substr(cut) : "";
    std::string hidden = path.size() > cut && absl::StartsWith(relative, dir)
                             ? hidden_by(relative)
                             : std::string(relative);
    if (hidden.empty() && !relative.empty()) {
      if (kept != i) entries->SwapElements(kept, i);
      ++kept;
      last_hidden.clear();
    } else {
      last_hidden = hidden.empty() ? std::string(relative) : std::move(hidden);
    }
  }
  entries->DeleteSubrange(kept, entries->size() - kept);
  if (!last_hidden.empty() && !page->next_page_token().empty()) {
    // The token named the page's last entry, which is hidden: it names the
    // directory that hides it instead (relative to `dir`, as the token).
    absl::string_view token = last_hidden;
    if (!dir.empty())
      token.remove_prefix(std::min(token.size(), dir.size() + 1));
    page->set_next_page_token(std::string(token));
  }
}

bool HeldToFileModes(const Caller& caller, const MountAccess& access) {
  return access.per_file && caller.role != Role::kAdmin && caller.local &&
         caller.local->uid != 0;
}

std::optional<std::string> InvalidationSeenBy(
    const Caller& caller, absl::string_view mount_path,
    const MountAccess& access, UnderStore& store, absl::string_view relative,
    uint32_t daemon_uid, uint32_t daemon_gid,
    absl::flat_hash_map<std::string, bool>* listable) {
  if (!MayReadMount(caller, mount_path, access, daemon_uid, daemon_gid).ok()) {
    // A mount outside a token's mounts: nothing. One the caller may not
    // read by its mode: its root (mount paths are no secret from it, and a
    // process of its user may have cached paths there through its worker,
    // which knows its uid and groups).
    if (!MountInScope(caller.mounts, mount_path)) return std::nullopt;
    return std::string();
  }
  if (!HeldToFileModes(caller, access) || relative.empty())
    return std::string(relative);
  // Each directory on the way, from the root ("") down to the parent.
  for (size_t end = 0; end != absl::string_view::npos;
       end = relative.find('/', end + 1)) {
    const std::string dir(relative.substr(0, end));
    auto [it, added] = listable->try_emplace(dir, false);
    if (added) it->second = store.MayList(dir, *caller.local).ok();
    if (!it->second) return dir;
  }
  return std::string(relative);
}

}  // namespace larder
