// Copyright 2026 The Larder Authors.
//
// WebHDFS REST client. See hdfs_store.h.
#include "understore/hdfs_store.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/log.h"
#include "common/retry.h"
#include "common/status_macros.h"

namespace larder {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

absl::StatusOr<Struct> ParseJson(const std::string& body) {
  Struct s;
  google::protobuf::util::JsonParseOptions o;
  o.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(body, &s, o).ok())
    return absl::InternalError("WebHDFS answered with a body that is not JSON");
  return s;
}

const Value* Field(const Struct& s, const char* name) {
  auto it = s.fields().find(name);
  return it == s.fields().end() ? nullptr : &it->second;
}

const Struct* Object(const Struct& s, const char* name) {
  const Value* v = Field(s, name);
  return v != nullptr && v->has_struct_value() ? &v->struct_value() : nullptr;
}

std::string Text(const Struct& s, const char* name) {
  const Value* v = Field(s, name);
  return v != nullptr ? v->string_value() : "";
}

uint64_t Number(const Struct& s, const char* name) {
  const Value* v = Field(s, name);
  // Negative, NaN or beyond 2^63 (no real size or time): 0.
  return v != nullptr && v->number_value() > 0 && v->number_value() < 9.2e18
             ? static_cast<uint64_t>(std::llround(v->number_value()))
             : 0;
}

// A FileStatus object as an ObjectInfo at store path `rel`.
ObjectInfo FromFileStatus(const Struct& fs, std::string rel) {
  ObjectInfo info;
  info.path = std::move(rel);
  info.is_dir = Text(fs, "type") == "DIRECTORY";
  const uint64_t mtime_ms = Number(fs, "modificationTime");
  info.mtime = absl::FromUnixMillis(static_cast<int64_t>(mtime_ms));
  if (!info.is_dir) {
    info.size = Number(fs, "length");
    info.version = absl::StrCat(mtime_ms, "-", info.size);
  }
  return info;
}

}  // namespace

namespace webhdfs {

bool NameAfter(absl::string_view name, absl::string_view after) {
  return std::lexicographical_compare(
      after.begin(), after.end(), name.begin(), name.end(), [](char a, char b) {
        return static_cast<signed char>(a) < static_cast<signed char>(b);
      });
}

absl::StatusOr<ObjectInfo> ParseFileStatus(const std::string& body,
                                           const std::string& rel,
                                           const std::string& shown) {
  LARDER_ASSIGN_OR_RETURN(Struct doc, ParseJson(body));
  const Struct* fs = Object(doc, "FileStatus");
  if (fs == nullptr)
    return absl::InternalError(absl::StrCat("WebHDFS stat of ", shown,
                                            ": no FileStatus in the answer"));
  return FromFileStatus(*fs, rel);
}

absl::StatusOr<std::pair<std::vector<ObjectInfo>, bool>> ParseListing(
    const std::string& body, const std::string& rel, const std::string& shown,
    const std::string& after, bool batch) {
  LARDER_ASSIGN_OR_RETURN(Struct doc, ParseJson(body));
  const Struct* statuses = nullptr;
  bool more = false;
  if (batch) {
    const Struct* listing = Object(doc, "DirectoryListing");
    const Struct* partial =
        listing ? Object(*listing, "partialListing") : nullptr;
    statuses = partial ? Object(*partial, "FileStatuses") : nullptr;
    more = listing && Number(*listing, "remainingEntries") > 0;
  } else {
    statuses = Object(doc, "FileStatuses");
  }
  std::vector<ObjectInfo> out;
  const Value* list = statuses ? Field(*statuses, "FileStatus") : nullptr;
  if (list == nullptr || !list->has_list_value())
    return std::make_pair(out, false);
  for (const Value& v : list->list_value().values()) {
    if (!v.has_struct_value()) continue;
    const std::string name = Text(v.struct_value(), "pathSuffix");
    if (name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "WebHDFS list of ", shown, ": it is a file, not a directory"));
    }
    // One path component: a name that climbs or descends would put an
    // entry outside the directory listed.
    if (name == "." || name == ".." ||
        name.find_first_of(std::string("/\0", 2)) != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("WebHDFS list of ", shown,
                       ": the namenode answered with an entry name that is "
                       "not one path component"));
    }
    if (!after.empty() && !NameAfter(name, after))
      continue;  // LISTSTATUS fallback.
    out.push_back(FromFileStatus(v.struct_value(), JoinStorePath(rel, name)));
  }
  return std::make_pair(std::move(out), more);
}

}  // namespace webhdfs

absl::StatusOr<std::unique_ptr<HdfsStore>> HdfsStore::Open(
    const StoreUri& uri, const UnderStoreOptions& options) {
  if (uri.authority.empty()) {
    return absl::InvalidArgumentError(
        "hdfs:// URI needs the namenode's HTTP address: "
        "hdfs://NAMENODE:9870/path");
  }
  bool tls = false;
  std::string user;
  std::string datanodes;
  for (const auto& [name, value] : uri.options) {
    if (name == "user") {
      user = value;
    } else if (name == "tls") {
      LARDER_ASSIGN_OR_RETURN(tls, ParseBoolOption(name, value));
    } else if (name == "datanodes") {
      if (value.empty())
        return absl::InvalidArgumentError(
            "hdfs:// option datanodes= lists no host");
      datanodes = value;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown hdfs:// option '", name,
                       "' (supported: user, tls, datanodes)"));
    }
  }
  if (user.empty()) user = options.env("HADOOP_USER_NAME").value_or("");
  std::string token = options.env("HDFS_DELEGATION_TOKEN").value_or("");
  if (!token.empty()) RegisterSecret(token);
  std::string root;
  if (!uri.path.empty()) root = absl::StrCat("/", uri.path);
  std::string base_url = absl::StrCat(
      tls || uri.scheme == "swebhdfs" ? "https://" : "http://", uri.authority);
  LARDER_ASSIGN_OR_RETURN(RedirectPolicy redirects,
                          RedirectPolicy::Create(base_url, datanodes));
  return std::unique_ptr<HdfsStore>(new HdfsStore(
      std::move(base_url), std::move(root), std::move(user), std::move(token),
      options.http, std::move(redirects), options.list_deadline));
}

std::string HdfsStore::DebugString() const {
  return absl::StrCat(
      "hdfs://",
      absl::StripPrefix(absl::StripPrefix(base_url_, "http://"), "https://"),
      root_.empty() ? "/" : root_);
}

std::string HdfsStore::HdfsPath(const std::string& rel) const {
  if (rel.empty()) return root_.empty() ? "/" : root_;
  return absl::StrCat(root_, "/", rel);
}

std::string HdfsStore::Url(
    const std::string& rel, absl::string_view op,
    const std::vector<std::pair<std::string, std::string>>& extra) const {
  std::vector<std::string> q = {absl::StrCat("op=", op)};
  if (!user_.empty())
    q.push_back(absl::StrCat("user.name=", UriEncode(user_, false)));
  if (!token_.empty())
    q.push_back(absl::StrCat("delegation=", UriEncode(token_, false)));
  for (const auto& [k, v] : extra)
    q.push_back(absl::StrCat(k, "=", UriEncode(v, false)));
  return absl::StrCat(base_url_, "/webhdfs/v1", UriEncode(HdfsPath(rel), true),
                      "?", absl::StrJoin(q, "&"));
}

absl::Status HdfsStore::ErrorStatus(absl::string_view op,
                                    const std::string& rel,
                                    const HttpResponse& response) const {
  std::string exception, message;
  if (absl::StatusOr<Struct> doc = ParseJson(response.body); doc.ok()) {
    if (const Struct* e = Object(*doc, "RemoteException")) {
      exception = Text(*e, "exception");
      message = Text(*e, "message");
    }
  }
  const std::string msg = RedactSecrets(
      absl::StrCat("WebHDFS ", op, " of ", HdfsPath(rel), " at ", base_url_,
                   ": HTTP ", response.status, exception.empty() ? "" : " ",
                   exception, message.empty() ? "" : ": ", message));
  const long s = response.status;
  if (exception == "FileNotFoundException" || s == 404)
    return absl::NotFoundError(msg);
  // WebHDFS answers every IOException with 403, a standby namenode's and
  // one in safe mode included: those are named, and may be retried.
  if (exception == "StandbyException" || exception == "RetriableException" ||
      exception == "SafeModeException")
    return absl::UnavailableError(msg);
  if (exception == "AccessControlException" || s == 403)
    return absl::PermissionDeniedError(msg);
  if (exception == "SecurityException" || s == 401)
    return absl::PermissionDeniedError(
        absl::StrCat(msg,
                     " (set ?user= or HADOOP_USER_NAME, or "
                     "HDFS_DELEGATION_TOKEN)"));
  if (s >= 500) return absl::UnavailableError(msg);
  if (s == 429) return absl::ResourceExhaustedError(msg);
  if (exception == "UnsupportedOperationException")
    return absl::UnimplementedError(msg);
  if (s == 400) return absl::InvalidArgumentError(msg);
  return absl::UnknownError(msg);
}

absl::StatusOr<HttpResponse> HdfsStore::Send(
    absl::string_view method, const std::string& url, absl::string_view op,
    const std::string& rel, absl::string_view body, absl::Span<char> sink,
    const std::vector<std::string>& resolve, absl::Time deadline) {
  HttpResponse r;
  LARDER_RETURN_IF_ERROR(RetryWithBackoff(
      http_.options().retry, absl::StrCat("hdfs.", op), [&]() -> absl::Status {
        HttpRequest req;
        req.method = std::string(method);
        req.url = url;
        req.body = body;
        req.resolve = resolve;
        if (deadline != absl::InfiniteFuture()) {
          req.timeout = deadline - absl::Now();
          if (req.timeout <= absl::ZeroDuration()) {
            return absl::DeadlineExceededError(absl::StrCat(
                "WebHDFS ", op, " of ", HdfsPath(rel), " at ", base_url_,
                ": the listing did not finish within its deadline "
                "(list_deadline ",
                absl::FormatDuration(list_deadline_), ")"));
          }
        }
        LARDER_ASSIGN_OR_RETURN(r, http_.Send(req, sink));
        if (r.status >= 200 && r.status < 400) return absl::OkStatus();
        return ErrorStatus(op, rel, r);
      }));
  return r;
}

absl::StatusOr<ObjectInfo> HdfsStore::Stat(absl::string_view path) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeStorePath(path));
  if (HasUploadTempComponent(rel)) {
    return absl::NotFoundError(absl::StrCat("WebHDFS stat of ", HdfsPath(rel),
                                            ": no such file (an upload's)"));
  }
  return StatAny(rel);
}

absl::StatusOr<ObjectInfo> HdfsStore::StatAny(const std::string& rel) {
  LARDER_ASSIGN_OR_RETURN(HttpResponse r,
                          Get(Url(rel, "GETFILESTATUS"), "stat", rel));
  return webhdfs::ParseFileStatus(r.body, rel, HdfsPath(rel));
}

absl::StatusOr<std::pair<std::vector<ObjectInfo>, bool>> HdfsStore::ListBatch(
    const std::string& rel, const std::string& after, absl::Time deadline) {
  std::vector<std::pair<std::string, std::string>> extra;
  if (!after.empty()) extra.emplace_back("startAfter", after);
  absl::StatusOr<HttpResponse> r =
      Get(Url(rel, "LISTSTATUS_BATCH", extra), "list", rel, {}, {}, deadline);
  if (!r.ok()) {
    // Before Hadoop 2.8 the op does not exist: the namenode answers 400
    // IllegalArgumentException ("No enum constant ...LISTSTATUS_BATCH");
    // stand-ins may say UnsupportedOperationException.
    const bool no_batch_op =
        r.status().code() == absl::StatusCode::kUnimplemented ||
        (r.status().code() == absl::StatusCode::kInvalidArgument &&
         absl::StrContains(r.status().message(), "LISTSTATUS_BATCH"));
    if (!no_batch_op) return r.status();
    // Then: one LISTSTATUS of the whole directory.
    LARDER_ASSIGN_OR_RETURN(
        HttpResponse all,
        Get(Url(rel, "LISTSTATUS"), "list", rel, {}, {}, deadline));
    return webhdfs::ParseListing(all.body, rel, HdfsPath(rel), after, false);
  }
  LARDER_ASSIGN_OR_RETURN(
      auto batch,
      webhdfs::ParseListing(r->body, rel, HdfsPath(rel), after, true));
  if (!batch.second) return batch;
  // More remain: the next batch starts after this one's last name, which
  // must lie after `after`. ParseListing drops names up to `after`, so a
  // namenode that repeats a batch (ignoring startAfter) or sends an empty
  // one leaves nothing here; following it would ask for the same batch
  // forever.
  const std::string last =
      batch.first.empty()
          ? std::string()
          : std::string(absl::string_view(batch.first.back().path)
                            .substr(rel.empty() ? 0 : rel.size() + 1));
  if (batch.first.empty() || !webhdfs::NameAfter(last, after)) {
    return absl::UnavailableError(absl::StrCat(
        "WebHDFS list of ", HdfsPath(rel), " at ", base_url_,
        ": the namenode's LISTSTATUS_BATCH after '", after,
        "' brought no entry after it but reported remainingEntries > 0 (a "
        "repeated or empty batch); the listing cannot advance, stopped"));
  }
  return batch;
}

absl::Status HdfsStore::Walk(const std::string& rel, const std::string& after,
                             size_t limit, absl::Time deadline,
                             std::vector<ObjectInfo>* out) {
  // One frame per directory being listed, deepest last: an explicit stack,
  // so a namenode (or a tree) of any depth costs at most
  // kMaxRecursiveListDepth frames, never the thread's stack.
  struct Frame {
    std::string dir;     // Store path.
    int depth;           // `rel` is 0.
    std::string cursor;  // The last child handled; the next batch follows it.
    std::vector<ObjectInfo> batch;
    size_t next = 0;
    bool more = true;  // Another batch to ask for.
  };
  auto too_deep = [&](const std::string& dir) {
    return absl::InvalidArgumentError(absl::StrCat(
        "WebHDFS recursive listing of ", HdfsPath(rel), " stopped at ",
        HdfsPath(dir), ": the tree is deeper than ", kMaxRecursiveListDepth,
        " levels below the directory listed; list a deeper directory "
        "instead"));
  };
  std::vector<Frame> stack;
  // `after` lies below `rel` (or is empty): each directory on its path
  // resumes after the component of `after` in it.
  std::vector<std::string> parts;
  if (!after.empty()) {
    absl::string_view below = after;
    if (!rel.empty()) below.remove_prefix(rel.size() + 1);
    parts = absl::StrSplit(below, '/');
  }
  stack.push_back(Frame{rel, 0, parts.empty() ? "" : parts[0], {}});
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    std::string dir = JoinStorePath(stack.back().dir, parts[i]);
    const int depth = stack.back().depth + 1;
    if (depth > kMaxRecursiveListDepth) return too_deep(dir);
    stack.push_back(Frame{std::move(dir), depth, parts[i + 1], {}});
  }
  while (!stack.empty()) {
    Frame& f = stack.back();
    if (f.next == f.batch.size()) {
      if (!f.more) {
        stack.pop_back();
        continue;
      }
      LARDER_ASSIGN_OR_RETURN(auto batch, ListBatch(f.dir, f.cursor, deadline));
      f.batch = std::move(batch.first);
      f.next = 0;
      f.more = batch.second;
      continue;
    }
    ObjectInfo& e = f.batch[f.next++];
    f.cursor = std::string(
        absl::string_view(e.path).substr(f.dir.empty() ? 0 : f.dir.size() + 1));
    if (IsUploadTempName(f.cursor)) continue;  // An upload in progress.
    if (!e.is_dir) {
      out->push_back(std::move(e));
      if (out->size() >= limit) return absl::OkStatus();
      continue;
    }
    if (f.depth + 1 > kMaxRecursiveListDepth) return too_deep(e.path);
    Frame child{std::move(e.path), f.depth + 1, "", {}};
    stack.push_back(std::move(child));  // `f` dangles from here.
  }
  return absl::OkStatus();
}

absl::StatusOr<ListPage> HdfsStore::List(absl::string_view dir,
                                         const ListOptions& options) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeStorePath(dir));
  if (HasUploadTempComponent(rel)) {
    return absl::NotFoundError(
        absl::StrCat("WebHDFS list of ", HdfsPath(rel),
                     ": no such directory (an upload's)"));
  }
  const size_t limit = std::max<size_t>(1, options.page_size);
  const absl::Time deadline = absl::Now() + list_deadline_;
  ListPage page;
  if (options.recursive) {
    // Token: the last file returned (a path below `dir`).
    if (!options.page_token.empty()) {
      absl::StatusOr<std::string> token =
          NormalizeStorePath(options.page_token);
      if (!token.ok() || *token != options.page_token ||
          !(rel.empty() || absl::StartsWith(*token, rel + "/"))) {
        return absl::InvalidArgumentError(
            absl::StrCat("bad page token for a listing of ", HdfsPath(rel)));
      }
    }
    LARDER_RETURN_IF_ERROR(
        Walk(rel, options.page_token, limit, deadline, &page.entries));
    if (page.entries.size() >= limit)
      page.next_page_token = page.entries.back().path;
    return page;
  }
  // Token: the name of the last child returned.
  auto name = [&](const ObjectInfo& e) {
    return std::string(
        absl::string_view(e.path).substr(rel.empty() ? 0 : rel.size() + 1));
  };
  std::string after = options.page_token;
  for (;;) {
    LARDER_ASSIGN_OR_RETURN(auto batch, ListBatch(rel, after, deadline));
    // ListBatch saw to it that a batch with more to come was not empty.
    if (batch.first.empty()) return page;
    const std::string last = name(batch.first.back());
    for (ObjectInfo& e : batch.first) {
      if (IsUploadTempName(name(e))) continue;  // An upload in progress.
      if (page.entries.size() == limit) {
        page.next_page_token = name(page.entries.back());
        return page;
      }
      page.entries.push_back(std::move(e));
    }
    if (!batch.second) return page;
    after = last;
  }
}

absl::StatusOr<size_t> HdfsStore::ReadRange(absl::string_view path,
                                            uint64_t offset,
                                            absl::Span<char> buffer,
                                            absl::string_view expected_version,
                                            uint64_t* object_size) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeStorePath(path));
  if (rel.empty() && root_.empty())
    return absl::InvalidArgumentError(
        "cannot read the store root: it is a directory");
  auto check = [&](const ObjectInfo& info) -> absl::Status {
    if (info.is_dir)
      return absl::InvalidArgumentError(
          absl::StrCat(HdfsPath(rel), " is a directory"));
    if (!expected_version.empty() && info.version != expected_version) {
      return absl::FailedPreconditionError(absl::StrCat(
          "WebHDFS read of ", HdfsPath(rel), ": the file changed (version ",
          info.version, ", expected ", expected_version, ")"));
    }
    return absl::OkStatus();
  };
  LARDER_ASSIGN_OR_RETURN(ObjectInfo before, Stat(rel));
  LARDER_RETURN_IF_ERROR(check(before));
  if (offset > before.size)
    return absl::OutOfRangeError(
        absl::StrCat("read at ", offset, " beyond the end of ", HdfsPath(rel),
                     " (", before.size, " bytes)"));
  if (object_size != nullptr) *object_size = before.size;
  const uint64_t want = std::min<uint64_t>(buffer.size(), before.size - offset);
  if (want == 0) return 0;
  absl::Span<char> sink = buffer.subspan(0, want);
  const std::string url =
      Url(rel, "OPEN",
          {{"offset", absl::StrCat(offset)}, {"length", absl::StrCat(want)}});
  LARDER_ASSIGN_OR_RETURN(HttpResponse r, Get(url, "read", rel, sink));
  if (r.status == 301 || r.status == 302 || r.status == 303 ||
      r.status == 307 || r.status == 308) {
    // The namenode points at a datanode that holds the data: followed once,
    // if the policy allows that place, to the addresses it checked.
    const std::string location(r.Header("location"));
    if (location.empty())
      return absl::InternalError(absl::StrCat("WebHDFS read of ", HdfsPath(rel),
                                              ": redirect without Location"));
    absl::StatusOr<RedirectTarget> to = redirects_.Check(url, location);
    if (!to.ok()) {
      absl::Status st(to.status().code(),
                      absl::StrCat("WebHDFS read of ", HdfsPath(rel), " at ",
                                   base_url_, ": ", to.status().message()));
      LARDER_LOG(WARNING, "hdfs.redirect.refused").Field("status", st);
      return st;
    }
    LARDER_ASSIGN_OR_RETURN(r, Get(to->url, "read", rel, sink, to->resolve));
  }
  if (r.status != 200 || r.sink_bytes != want) {
    return absl::UnavailableError(
        absl::StrCat("WebHDFS read of ", HdfsPath(rel), ": got ", r.sink_bytes,
                     " of ", want, " bytes (HTTP ", r.status, ")"));
  }
  // The bytes belong to `before` only if the file is still that version.
  LARDER_ASSIGN_OR_RETURN(ObjectInfo after, Stat(rel));
  if (after.version != before.version) {
    return absl::FailedPreconditionError(
        absl::StrCat("WebHDFS read of ", HdfsPath(rel),
                     ": the file changed during the read"));
  }
  return static_cast<size_t>(want);
}

namespace {

// The part files of an upload: `<dir of rel>/.larder-upload-<id>.<number>`.
std::string PartPrefix(const std::string& rel, absl::string_view id) {
  const size_t slash = rel.rfind('/');
  return JoinStorePath(
      slash == std::string::npos ? "" : absl::string_view(rel).substr(0, slash),
      absl::StrCat(kUploadTempPrefix, id, "."));
}

// The value of a {"boolean": ...} answer; nullopt when it is not one.
std::optional<bool> ParseBoolean(const std::string& body) {
  absl::StatusOr<Struct> doc = ParseJson(body);
  if (!doc.ok()) return std::nullopt;
  const Value* v = Field(*doc, "boolean");
  if (v == nullptr || v->kind_case() != Value::kBoolValue) return std::nullopt;
  return v->bool_value();
}

}  // namespace

absl::Status HdfsStore::CreateFile(const std::string& rel,
                                   absl::string_view data) {
  const std::string url = Url(rel, "CREATE", {{"overwrite", "true"}});
  // Both steps in each attempt: the namenode may send a retry elsewhere.
  return RetryWithBackoff(
      http_.options().retry, "hdfs.create", [&]() -> absl::Status {
        HttpRequest req;
        req.method = "PUT";
        req.url = url;
        LARDER_ASSIGN_OR_RETURN(HttpResponse r, http_.Send(req));
        if (r.status >= 400) return ErrorStatus("create", rel, r);
        if (r.status != 301 && r.status != 302 && r.status != 303 &&
            r.status != 307 && r.status != 308) {
          return absl::InternalError(
              absl::StrCat("WebHDFS create of ", HdfsPath(rel), " at ",
                           base_url_, ": the namenode answered HTTP ", r.status,
                           " instead of a redirect to a datanode"));
        }
        const std::string location(r.Header("location"));
        if (location.empty()) {
          return absl::InternalError(
              absl::StrCat("WebHDFS create of ", HdfsPath(rel),
                           ": redirect without Location"));
        }
        absl::StatusOr<RedirectTarget> to = redirects_.Check(url, location);
        if (!to.ok()) {
          absl::Status st(
              to.status().code(),
              absl::StrCat("WebHDFS create of ", HdfsPath(rel), " at ",
                           base_url_, ": ", to.status().message()));
          LARDER_LOG(WARNING, "hdfs.redirect.refused").Field("status", st);
          return st;
        }
        HttpRequest put;
        put.method = "PUT";
        put.url = to->url;
        put.resolve = to->resolve;
        put.body = data;
        LARDER_ASSIGN_OR_RETURN(HttpResponse w, http_.Send(put));
        if (w.status == 201 || w.status == 200) return absl::OkStatus();
        return ErrorStatus("create", rel, w);
      });
}

absl::Status HdfsStore::DeleteFile(const std::string& rel) {
  absl::StatusOr<HttpResponse> r =
      Send("DELETE", Url(rel, "DELETE", {{"recursive", "false"}}), "delete",
           rel, {});
  // {"boolean": false}: there was nothing to delete.
  if (r.ok() || r.status().code() == absl::StatusCode::kNotFound)
    return absl::OkStatus();
  return r.status();
}

absl::StatusOr<std::string> HdfsStore::CreateUpload(absl::string_view path) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeUploadPath("hdfs", path));
  (void)rel;
  return NewUploadId();  // The parts' names are made of it; nothing to call.
}

absl::StatusOr<UploadedPart> HdfsStore::UploadPart(absl::string_view path,
                                                   absl::string_view upload_id,
                                                   uint32_t number,
                                                   uint64_t offset,
                                                   absl::string_view data) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeUploadPath("hdfs", path));
  LARDER_RETURN_IF_ERROR(CheckLocalUploadId("hdfs", upload_id));
  LARDER_RETURN_IF_ERROR(CheckUploadPart("hdfs", number, offset, data.size()));
  const std::string part = absl::StrCat(PartPrefix(rel, upload_id), number);
  LARDER_RETURN_IF_ERROR(CreateFile(part, data));
  const size_t slash = part.rfind('/');
  return UploadedPart{number, offset, data.size(),
                      part.substr(slash == std::string::npos ? 0 : slash + 1)};
}

absl::StatusOr<ObjectInfo> HdfsStore::CompleteUpload(
    absl::string_view path, absl::string_view upload_id,
    const std::vector<UploadedPart>& parts) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeUploadPath("hdfs", path));
  LARDER_RETURN_IF_ERROR(CheckLocalUploadId("hdfs", upload_id));
  LARDER_ASSIGN_OR_RETURN(const uint64_t total,
                          CheckUploadParts("hdfs", parts));
  const std::string prefix = PartPrefix(rel, upload_id);
  const std::string first = absl::StrCat(prefix, 1);
  absl::StatusOr<ObjectInfo> head = StatAny(first);
  if (head.status().code() == absl::StatusCode::kNotFound) {
    return absl::NotFoundError(absl::StrCat(
        "WebHDFS complete of upload ", upload_id, " of ", HdfsPath(rel),
        ": its part 1 is not there (never uploaded, or the upload was "
        "completed or aborted)"));
  }
  if (!head.ok()) return head.status();

  // 1. Parts 2..n appended to part 1, in one CONCAT. A part 1 that holds the
  // total already was concatenated by an earlier attempt.
  if (parts.size() > 1 && head->size != total) {
    std::vector<std::string> sources;
    for (size_t i = 1; i < parts.size(); ++i) {
      if (parts[i].size == 0) continue;  // HDFS refuses empty sources.
      sources.push_back(HdfsPath(absl::StrCat(prefix, parts[i].number)));
    }
    absl::StatusOr<HttpResponse> r =
        Send("POST",
             Url(first, "CONCAT", {{"sources", absl::StrJoin(sources, ",")}}),
             "concat", first, {});
    if (!r.ok()) {
      // A retried CONCAT whose first attempt went through finds its sources
      // gone; the size of part 1 says whether that is what happened.
      absl::StatusOr<ObjectInfo> again = StatAny(first);
      if (!again.ok() || again->size != total) return r.status();
    }
    LARDER_ASSIGN_OR_RETURN(head, StatAny(first));
  }
  if (head->is_dir || head->size != total) {
    return absl::InvalidArgumentError(
        absl::StrCat("WebHDFS complete of upload ", upload_id, " of ",
                     HdfsPath(rel), ": the parts on the store hold ",
                     head->size, " bytes where the list says ", total,
                     " (a part missing, or of another size than listed)"));
  }

  // 2. Part 1 becomes the target. The RENAME that WebHDFS documents does
  // not replace a file, so one at the target is deleted first: on HDFS an
  // overwrite is NOT atomic (readers find no file in between).
  absl::StatusOr<ObjectInfo> existing = StatAny(rel);
  if (existing.ok()) {
    if (existing->is_dir) {
      return absl::FailedPreconditionError(
          absl::StrCat("WebHDFS complete of ", HdfsPath(rel),
                       ": a directory has that name"));
    }
    LARDER_RETURN_IF_ERROR(DeleteFile(rel));
  } else if (existing.status().code() != absl::StatusCode::kNotFound) {
    return existing.status();
  }
  absl::StatusOr<HttpResponse> r =
      Send("PUT", Url(first, "RENAME", {{"destination", HdfsPath(rel)}}),
           "rename", first, {});
  if (!r.ok() || ParseBoolean(r->body) != true) {
    // Done by an attempt whose answer was lost: part 1 is gone and the
    // target holds its bytes.
    absl::StatusOr<ObjectInfo> part = StatAny(first);
    absl::StatusOr<ObjectInfo> target = StatAny(rel);
    const bool done = part.status().code() == absl::StatusCode::kNotFound &&
                      target.ok() && !target->is_dir && target->size == total;
    if (!done) {
      if (!r.ok()) return r.status();
      return absl::FailedPreconditionError(absl::StrCat(
          "WebHDFS rename of upload ", upload_id, " to ", HdfsPath(rel), " at ",
          base_url_,
          ": the namenode refused (false: was a file created there "
          "meanwhile?)"));
    }
  }
  // The version is part 1's, which the rename keeps (an HDFS rename changes
  // no file's modification time): a Stat now could return another writer's
  // file committed meanwhile, and lend ours its version.
  ObjectInfo info = *std::move(head);
  info.path = rel;
  return info;
}

absl::Status HdfsStore::AbortUpload(absl::string_view path,
                                    absl::string_view upload_id) {
  LARDER_ASSIGN_OR_RETURN(std::string rel, NormalizeUploadPath("hdfs", path));
  LARDER_RETURN_IF_ERROR(CheckLocalUploadId("hdfs", upload_id));
  const size_t slash = rel.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "" : rel.substr(0, slash);
  const std::string parts = absl::StrCat(kUploadTempPrefix, upload_id, ".");
  // Names sort bytewise: the parts follow ".larder-upload-<id>" at once, and
  // the listing stops at the first name that is not one.
  std::string after = absl::StrCat(kUploadTempPrefix, upload_id);
  const absl::Time deadline = absl::Now() + list_deadline_;
  for (;;) {
    absl::StatusOr<std::pair<std::vector<ObjectInfo>, bool>> batch =
        ListBatch(dir, after, deadline);
    if (batch.status().code() == absl::StatusCode::kNotFound)
      return absl::OkStatus();  // No directory, no parts.
    if (!batch.ok()) return batch.status();
    for (const ObjectInfo& e : batch->first) {
      const std::string name(
          absl::string_view(e.path).substr(dir.empty() ? 0 : dir.size() + 1));
      if (!absl::StartsWith(name, parts)) return absl::OkStatus();
      LARDER_RETURN_IF_ERROR(DeleteFile(e.path));
      after = name;
    }
    if (!batch->second || batch->first.empty()) return absl::OkStatus();
  }
}

}  // namespace larder
