// Copyright 2026 The Larder Authors.
//
// The `larder` commands that read the cluster's namespace through the cache,
// as a data loader would: ls, stat, cat, cp.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "common/block_key.h"
#include "common/flags.h"
#include "common/status_macros.h"
#include "common/units.h"
#include "larder/client.h"

ABSL_DECLARE_FLAG(int,
                  parallel);  // store_command.cc: also used by `larder cp`.
ABSL_DECLARE_FLAG(bool,
                  recursive);  // store_command.cc: also used by `larder ls`.

namespace larder::cli {
namespace {

// --- ls / stat / cat --------------------------------------------------------

absl::StatusOr<std::unique_ptr<Client>> ConnectClient() {
  LARDER_ASSIGN_OR_RETURN(ClientOptions o, ClientOptionsFromFlags());
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(o);
  if (!c.ok() && c.status().code() == absl::StatusCode::kUnavailable) {
    return Rpc(
        grpc::Status(grpc::UNAVAILABLE, std::string(c.status().message())));
  }
  return c;
}

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

absl::Status RunStat(const std::vector<std::string>& args) {
  LARDER_RETURN_IF_ERROR(WantArgs(args, 1, "larder stat PATH"));
  LARDER_ASSIGN_OR_RETURN(auto stub, Stub());
  LARDER_ASSIGN_OR_RETURN(const v1::StatResponse r, StatPath(*stub, args[0]));
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

absl::Status RunCat(const std::vector<std::string>& args) {
  LARDER_RETURN_IF_ERROR(WantArgs(args, 1, "larder cat PATH"));
  LARDER_ASSIGN_OR_RETURN(auto client, ConnectClient());
  LARDER_ASSIGN_OR_RETURN(auto file, client->Open(args[0]));
  std::vector<char> buf(8 << 20);
  for (uint64_t off = 0; off < file->info().size;) {
    LARDER_ASSIGN_OR_RETURN(size_t n, file->Read(off, absl::MakeSpan(buf)));
    if (n == 0) break;
    for (size_t done = 0; done < n;) {
      ssize_t w = ::write(STDOUT_FILENO, buf.data() + done, n - done);
      if (w <= 0) return absl::InternalError("write to stdout failed");
      done += static_cast<size_t>(w);
    }
    off += n;
  }
  return absl::OkStatus();
}

// --- cp -------------------------------------------------------------------

absl::Status RunCp(const std::vector<std::string>& args) {
  LARDER_RETURN_IF_ERROR(
      WantArgs(args, 2, "larder cp PATH DEST_DIR [--parallel=8]"));
  LARDER_ASSIGN_OR_RETURN(auto client, ConnectClient());
  const absl::Time start = absl::Now();
  std::vector<FileInfo> files;
  LARDER_ASSIGN_OR_RETURN(FileInfo root, client->Stat(args[0]));
  std::string base = root.path;
  if (root.is_dir) {
    std::string token;
    do {
      LARDER_ASSIGN_OR_RETURN(
          ListResult page,
          client->List(root.path, token, 1000, /*recursive=*/true));
      for (FileInfo& f : page.entries) {
        if (!f.is_dir) files.push_back(std::move(f));
      }
      token = page.next_page_token;
    } while (!token.empty());
  } else {
    base = root.path.substr(0, root.path.rfind('/'));
    files.push_back(root);
  }
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> bytes{0};
  absl::Mutex mu;
  absl::Status first;
  std::vector<std::thread> pool;
  for (int t = 0; t < std::max(1, absl::GetFlag(FLAGS_parallel)); ++t) {
    pool.emplace_back([&] {
      std::vector<char> buf(8 << 20);
      for (size_t i = next++; i < files.size(); i = next++) {
        const FileInfo& f = files[i];
        std::string target =
            absl::StrCat(args[1], "/", f.path.substr(base.size() + 1));
        absl::Status st = [&]() -> absl::Status {
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
              rs = absl::InternalError(
                  absl::StrCat("write to ", tmp, " failed"));
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
        }();
        if (!st.ok()) {
          absl::MutexLock l(&mu);
          if (first.ok())
            first = absl::Status(st.code(),
                                 absl::StrCat(f.path, ": ", st.message()));
          next = files.size();
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  LARDER_RETURN_IF_ERROR(first);
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
    "cat", "read a file through the cache to stdout", "larder cat PATH\n",
    &RunCat, FlagList({kLogFlags, kClientFlags, kClientReadFlags, kHttpFlags})};
const Command kCpCommand = {
    "cp", "copy a cluster path to a local directory through the cache",
    "larder cp PATH DEST_DIR [--parallel=8]\n", &RunCp,
    FlagList(
        {kLogFlags, kClientFlags, kClientReadFlags, kHttpFlags, {"parallel"}})};

}  // namespace larder::cli
