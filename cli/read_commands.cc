// Copyright 2026 The Larder Authors.
//
// The `larder` commands that read the cluster's namespace through the cache,
// as a data loader would: ls, stat, cat, cp.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "common/block_key.h"
#include "common/flags.h"
#include "common/mount_set.h"
#include "common/status_macros.h"
#include "common/units.h"
#include "larder/client.h"

ABSL_DECLARE_FLAG(int,
                  parallel);  // store_command.cc: also used by `larder cp`.
ABSL_DECLARE_FLAG(bool,
                  recursive);  // store_command.cc: also used by `larder ls`.
ABSL_FLAG(bool, overwrite, false,
          "cp into the cluster: replace objects that exist (default: an "
          "object already there is an error).");

namespace larder::cli {

absl::StatusOr<std::unique_ptr<Client>> ConnectClient() {
  LARDER_ASSIGN_OR_RETURN(ClientOptions o, ClientOptionsFromFlags());
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(o);
  if (!c.ok() && c.status().code() == absl::StatusCode::kUnavailable) {
    return Rpc(
        grpc::Status(grpc::UNAVAILABLE, std::string(c.status().message())));
  }
  return c;
}

namespace {

// --- ls / stat / cat --------------------------------------------------------

// --output=json: {"path": P, "entries": [{"path", "type" ("file" or
// "directory"), "size", "version", "mtime" (RFC 3339), "mtime_unix_ms"}]},
// written entry by entry (a listing can be long).
absl::Status RunLs(const std::vector<std::string>& args) {
  if (args.size() > 1)
    return absl::InvalidArgumentError("usage: larder ls [PATH] [--recursive]");
  LARDER_ASSIGN_OR_RETURN(bool json, JsonOutput());
  LARDER_ASSIGN_OR_RETURN(auto client, ConnectClient());
  const std::string path = args.empty() ? "/" : args[0];
  if (json)
    std::printf("{\"path\": %s, \"entries\": [", DumpJson(Json(path)).c_str());
  std::string token;
  const char* separator = "\n  ";
  do {
    LARDER_ASSIGN_OR_RETURN(
        ListResult page,
        client->List(path, token, 1000, absl::GetFlag(FLAGS_recursive)));
    for (const FileInfo& e : page.entries) {
      if (json) {
        std::printf("%s%s", separator,
                    DumpJson(FileJson(e.path, e.is_dir, e.size, e.version,
                                      absl::ToUnixNanos(e.mtime)))
                        .c_str());
        separator = ",\n  ";
      } else if (e.is_dir) {
        std::printf("%12s  %-19s  %s/\n", "DIR", "", e.path.c_str());
      } else {
        std::printf("%12llu  %s  %s\n", static_cast<unsigned long long>(e.size),
                    absl::FormatTime("%Y-%m-%d %H:%M:%S", e.mtime,
                                     absl::LocalTimeZone())
                        .c_str(),
                    e.path.c_str());
      }
    }
    token = page.next_page_token;
  } while (!token.empty());
  if (json) std::printf("\n]}\n");
  return absl::OkStatus();
}

// The Stat of `path` as the client library answers it (the local worker's
// node metadata cache first), with the mount and block size from the
// master's mount table.
absl::StatusOr<v1::StatResponse> StatThroughClient(MasterConnection& master,
                                                   const std::string& path) {
  LARDER_ASSIGN_OR_RETURN(auto client, ConnectClient());
  LARDER_ASSIGN_OR_RETURN(const FileInfo info, client->Stat(path));
  v1::MountTable table;
  LARDER_RETURN_IF_ERROR(
      Rpc(master.Call(&v1::Master::Stub::GetMounts, v1::GetMountsRequest(),
                      &table, absl::Seconds(10))));
  const MountSet mounts(std::move(table));
  std::optional<MountSet::Resolved> m = mounts.Resolve(info.path);
  if (!m) return absl::NotFoundError(absl::StrCat("no mount holds ", path));
  v1::StatResponse r;
  r.mutable_info()->set_path(info.path);
  r.mutable_info()->set_is_dir(info.is_dir);
  r.mutable_info()->set_size(info.size);
  r.mutable_info()->set_version(info.version);
  r.mutable_info()->set_mtime_ns(absl::ToUnixNanos(info.mtime));
  r.set_mount(m->entry->path());
  r.set_relative(std::string(m->relative));
  r.set_block_size(m->entry->block_size());
  return r;
}

absl::Status RunStat(const std::vector<std::string>& args) {
  LARDER_RETURN_IF_ERROR(WantArgs(args, 1, "larder stat PATH"));
  LARDER_ASSIGN_OR_RETURN(auto stub, Stub());
  absl::StatusOr<v1::StatResponse> stat = StatPath(*stub, args[0]);
  if (absl::IsPermissionDenied(stat.status()) &&
      absl::StrContains(stat.status().message(),
                        "a caller without credentials")) {
    // The master shows a caller without credentials what anyone may see;
    // the local worker answers by this process's uid, as it reads for it.
    if (absl::StatusOr<v1::StatResponse> local =
            StatThroughClient(*stub, args[0]);
        local.ok()) {
      stat = std::move(local);
    }
  }
  LARDER_RETURN_IF_ERROR(stat.status());
  const v1::StatResponse& r = *stat;
  const uint64_t blocks =
      BlockCount(r.info().size(), std::max<uint64_t>(1, r.block_size()));
  LARDER_ASSIGN_OR_RETURN(bool json, JsonOutput());
  if (json) {
    Json doc = FileJson(r.info().path(), r.info().is_dir(), r.info().size(),
                        r.info().version(), r.info().mtime_ns());
    doc["mount"] = r.mount();
    doc["block_size"] = r.block_size();
    doc["blocks"] = blocks;
    PrintJson(doc);
    return absl::OkStatus();
  }
  std::printf(
      "path:       %s\ntype:       %s\nsize:       %llu\nversion:    "
      "%s\nmtime:      %s\nmount:      %s\n"
      "block size: %s\nblocks:     %llu\n",
      r.info().path().c_str(), r.info().is_dir() ? "directory" : "file",
      static_cast<unsigned long long>(r.info().size()),
      r.info().version().c_str(), FormatTime(r.info().mtime_ns()).c_str(),
      r.mount().c_str(), FormatBytes(r.block_size()).c_str(),
      static_cast<unsigned long long>(blocks));
  return absl::OkStatus();
}

// Like cat(1): the files one after another; the first that cannot be read
// ends the command with its error.
absl::Status RunCat(const std::vector<std::string>& args) {
  if (args.empty())
    return absl::InvalidArgumentError("usage: larder cat PATH [PATH...]");
  LARDER_ASSIGN_OR_RETURN(auto client, ConnectClient());
  std::vector<char> buf(8 << 20);
  for (const std::string& path : args) {
    LARDER_ASSIGN_OR_RETURN(auto file, client->Open(path));
    for (uint64_t off = 0; off < file->info().size;) {
      LARDER_ASSIGN_OR_RETURN(size_t n, file->Read(off, absl::MakeSpan(buf)));
      if (n == 0) break;
      for (size_t done = 0; done < n;) {
        ssize_t w = ::write(STDOUT_FILENO, buf.data() + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
          return absl::InternalError(
              absl::StrCat("write to stdout failed: ", std::strerror(errno)));
        }
        done += static_cast<size_t>(w);
      }
      off += n;
    }
  }
  return absl::OkStatus();
}

// --- cp -------------------------------------------------------------------

// Runs fn(i) for i in [0, n) on --parallel threads; the first error stops
// the rest and is returned, prefixed with name(i).
absl::Status ForEachParallel(size_t n,
                             const std::function<absl::Status(size_t)>& fn,
                             const std::function<std::string(size_t)>& name) {
  std::atomic<size_t> next{0};
  absl::Mutex mu;
  absl::Status first;
  std::vector<std::thread> pool;
  for (int t = 0; t < std::max(1, absl::GetFlag(FLAGS_parallel)); ++t) {
    pool.emplace_back([&] {
      for (size_t i = next++; i < n; i = next++) {
        absl::Status st = fn(i);
        if (!st.ok()) {
          absl::MutexLock l(&mu);
          if (first.ok())
            first = absl::Status(st.code(),
                                 absl::StrCat(name(i), ": ", st.message()));
          next = n;
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  return first;
}

// `larder cp LOCAL CLUSTER_PATH`: a local file, or every file below a local
// directory, written into a writable mount (each a new object that appears
// whole when its upload is committed).
absl::Status Upload(Client& client, const std::string& source,
                    const std::string& dest) {
  namespace fs = std::filesystem;
  const absl::Time start = absl::Now();
  std::vector<std::pair<std::string, std::string>> files;  // local, cluster
  std::error_code ec;
  std::string target = dest;
  while (target.size() > 1 && target.back() == '/') target.pop_back();
  if (fs::is_directory(source, ec)) {
    // Symbolic links are followed, to files and to directories, as `aws s3
    // cp` does (an object store has no links); each file is named by its
    // own path under the source, never by its link's target. A link to one
    // of its own parent directories is not walked again (a loop).
    using DirId = std::pair<dev_t, ino_t>;
    auto id_of = [](const fs::path& dir) -> DirId {
      struct stat st {};
      if (::stat(dir.c_str(), &st) != 0) return {0, 0};
      return {st.st_dev, st.st_ino};
    };
    const fs::path root(source);
    std::vector<DirId> ancestors = {id_of(root)};
    for (auto it = fs::recursive_directory_iterator(
             root, fs::directory_options::follow_directory_symlink, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      std::error_code entry_ec;
      const fs::file_status st = it->status(entry_ec);  // Through links.
      if (fs::is_directory(st)) {
        ancestors.resize(static_cast<size_t>(it.depth()) + 1);
        const DirId dir = id_of(it->path());
        if (std::find(ancestors.begin(), ancestors.end(), dir) !=
            ancestors.end()) {
          it.disable_recursion_pending();
          continue;
        }
        ancestors.push_back(dir);
        continue;
      }
      if (!fs::exists(st)) {
        std::error_code link_ec;
        const fs::path to = fs::read_symlink(it->path(), link_ec);
        return absl::NotFoundError(
            absl::StrCat(it->path().string(), ": a symbolic link to nothing (",
                         link_ec ? entry_ec.message() : to.string(),
                         "); nothing was copied"));
      }
      if (!fs::is_regular_file(st)) continue;  // FIFOs, sockets, devices.
      files.emplace_back(
          it->path().string(),
          absl::StrCat(target, "/",
                       it->path().lexically_relative(root).generic_string()));
    }
    if (ec) {
      return absl::NotFoundError(
          absl::StrCat("cannot list ", source, ": ", ec.message()));
    }
  } else {
    // Into a cluster directory that exists: under the source's name.
    if (absl::StatusOr<FileInfo> d = client.Stat(target); d.ok() && d->is_dir)
      target = absl::StrCat(target, "/", fs::path(source).filename().string());
    files.emplace_back(source, target);
  }
  const bool overwrite = absl::GetFlag(FLAGS_overwrite);
  std::atomic<uint64_t> bytes{0};
  LARDER_RETURN_IF_ERROR(ForEachParallel(
      files.size(),
      [&](size_t i) -> absl::Status {
        const auto& [local, cluster] = files[i];
        std::FILE* in = std::fopen(local.c_str(), "rb");
        if (in == nullptr) {
          return absl::NotFoundError(
              absl::StrCat("cannot open ", local, ": ", std::strerror(errno)));
        }
        WriteOptions wo;
        wo.overwrite = overwrite;
        wo.size_hint = fs::file_size(local, ec);
        absl::StatusOr<std::unique_ptr<Writer>> w = client.Create(cluster, wo);
        if (!w.ok()) {
          std::fclose(in);
          return w.status();
        }
        std::vector<char> buf(8 << 20);
        absl::Status st;
        for (size_t n;
             st.ok() && (n = std::fread(buf.data(), 1, buf.size(), in)) > 0;) {
          st = (*w)->Write(absl::string_view(buf.data(), n));
        }
        if (st.ok() && std::ferror(in))
          st = absl::DataLossError(absl::StrCat("read of ", local, " failed"));
        std::fclose(in);
        if (!st.ok()) {
          (*w)->Abort().IgnoreError();
          return st;
        }
        LARDER_ASSIGN_OR_RETURN(FileInfo info, (*w)->Close());
        bytes += info.size;
        return absl::OkStatus();
      },
      [&](size_t i) { return files[i].first; }));
  const double secs = absl::ToDoubleSeconds(absl::Now() - start);
  std::printf("wrote %zu files, %s in %.2f s (%.1f MB/s) to %s\n", files.size(),
              FormatBytes(bytes.load()).c_str(), secs,
              bytes.load() / std::max(secs, 1e-9) / 1e6, dest.c_str());
  return absl::OkStatus();
}

absl::Status RunCp(const std::vector<std::string>& args) {
  LARDER_RETURN_IF_ERROR(WantArgs(
      args, 2,
      "larder cp PATH DEST_DIR [--parallel=8]  (from the cluster), or\n"
      "       larder cp LOCAL_PATH CLUSTER_PATH [--overwrite]  (into a "
      "writable mount)"));
  LARDER_ASSIGN_OR_RETURN(auto client, ConnectClient());
  // A cluster path is read; a local path that the cluster does not have is
  // written into the cluster.
  absl::StatusOr<FileInfo> source = client->Stat(args[0]);
  std::error_code ec;
  if (!source.ok() && std::filesystem::exists(args[0], ec))
    return Upload(*client, args[0], args[1]);
  const absl::Time start = absl::Now();
  std::vector<FileInfo> files;
  LARDER_ASSIGN_OR_RETURN(FileInfo root, std::move(source));
  std::string base = root.path;
  if (root.is_dir) {
    // A recursive listing of a mount holds files only; one of a directory
    // of mounts ("/", "/datasets") holds the mounts (or the next level of
    // their paths), each then listed in turn.
    std::vector<std::string> dirs = {root.path};
    while (!dirs.empty()) {
      const std::string dir = std::move(dirs.back());
      dirs.pop_back();
      const std::string below = dir == "/" ? dir : absl::StrCat(dir, "/");
      std::string token;
      do {
        LARDER_ASSIGN_OR_RETURN(
            ListResult page,
            client->List(dir, token, 1000, /*recursive=*/true));
        for (FileInfo& f : page.entries) {
          if (!f.is_dir) {
            files.push_back(std::move(f));
          } else if (f.path.size() > below.size() &&
                     absl::StartsWith(f.path, below)) {
            dirs.push_back(f.path);
          }
        }
        token = page.next_page_token;
      } while (!token.empty());
    }
  } else {
    base = root.path.substr(0, root.path.rfind('/'));
    files.push_back(root);
  }
  std::atomic<uint64_t> bytes{0};
  LARDER_RETURN_IF_ERROR(ForEachParallel(
      files.size(),
      [&](size_t i) -> absl::Status {
        thread_local std::vector<char> buf(8 << 20);
        const FileInfo& f = files[i];
        std::string target = absl::StrCat(
            args[1], "/", f.path.substr(base == "/" ? 1 : base.size() + 1));
        std::error_code ec;
        std::filesystem::create_directories(
            std::filesystem::path(target).parent_path(), ec);
        LARDER_ASSIGN_OR_RETURN(auto file, client->Open(f.path));
        const std::string tmp = target + ".larder-tmp";
        std::FILE* out = std::fopen(tmp.c_str(), "wb");
        if (out == nullptr)
          return absl::InternalError(absl::StrCat("cannot create ", tmp));
        absl::Status rs;
        for (uint64_t off = 0; off < file->info().size && rs.ok();) {
          absl::StatusOr<size_t> n = file->Read(off, absl::MakeSpan(buf));
          if (!n.ok()) {
            rs = n.status();
          } else if (std::fwrite(buf.data(), 1, *n, out) != *n) {
            rs = absl::InternalError(absl::StrCat("write to ", tmp, " failed"));
          } else {
            off += *n;
          }
        }
        if (std::fclose(out) != 0 && rs.ok())
          rs = absl::InternalError("close failed");
        if (rs.ok() && std::rename(tmp.c_str(), target.c_str()) != 0)
          rs = absl::InternalError("rename failed");
        if (!rs.ok()) std::remove(tmp.c_str());
        bytes += rs.ok() ? file->info().size : 0;
        return rs;
      },
      [&](size_t i) { return files[i].path; }));
  const double secs = absl::ToDoubleSeconds(absl::Now() - start);
  ClientStats cs = client->stats();
  std::printf(
      "copied %zu files, %s in %.2f s (%.1f MB/s); blocks: %llu short-circuit, "
      "%llu gRPC, %llu under-store\n",
      files.size(), FormatBytes(bytes.load()).c_str(), secs,
      bytes.load() / secs / 1e6,
      static_cast<unsigned long long>(cs.blocks_short_circuit),
      static_cast<unsigned long long>(cs.blocks_grpc),
      static_cast<unsigned long long>(cs.blocks_under_store));
  return absl::OkStatus();
}
}  // namespace

const Command kLsCommand = {"ls", "list a cluster directory",
                            "larder ls [PATH] [--recursive]\n", &RunLs,
                            FlagList({kLogFlags,
                                      kClientFlags,
                                      kClientReadFlags,
                                      kHttpFlags,
                                      {"output", "recursive"}})};
const Command kStatCommand = {
    "stat", "size, version and blocks of a cluster path", "larder stat PATH\n",
    &RunStat,
    FlagList(
        {kLogFlags, kClientFlags, kClientReadFlags, kHttpFlags, {"output"}})};
const Command kCatCommand = {
    "cat", "read files through the cache to stdout, one after another",
    "larder cat PATH [PATH...]\n", &RunCat,
    FlagList({kLogFlags, kClientFlags, kClientReadFlags, kHttpFlags})};
const Command kCpCommand = {
    "cp",
    "copy a cluster path to a local directory through the cache, or a local "
    "file or directory into a writable mount",
    "larder cp PATH DEST_DIR [--parallel=8]\n"
    "larder cp LOCAL_PATH CLUSTER_PATH [--parallel=8] [--overwrite]\n",
    &RunCp,
    FlagList({kLogFlags,
              kClientFlags,
              kClientReadFlags,
              kClientWriteFlags,
              kHttpFlags,
              {"parallel", "overwrite"}})};

}  // namespace larder::cli
