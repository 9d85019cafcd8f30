// Copyright 2026 The Larder Authors.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "cli/commands.h"
#include "common/flags.h"
#include "common/hash.h"
#include "common/status_macros.h"
#include "understore/factory.h"

ABSL_FLAG(bool, recursive, false,
          "store ls: list every file below the directory.");
ABSL_FLAG(int, parallel, 8, "store copy: files copied at once.");
ABSL_FLAG(int64_t, chunk_size, 8 << 20,
          "store copy/cat: bytes per ranged read.");

namespace larder::cli {
namespace {

constexpr absl::string_view kUsage =
    R"(larder store: direct access to an under-store (no cache involved).

  larder store ls   URI [PATH] [--recursive]   list a directory
  larder store stat URI PATH                   size, version and mtime of a file
  larder store cat  URI PATH                   write a file to stdout
  larder store copy URI DEST_DIR [--parallel=8] [--chunk_size=8388608]
                                               copy every file below URI into DEST_DIR,
                                               with ranged reads pinned to the version
                                               seen in the listing, and report throughput

URI is the store root: file:///data, or
  s3://bucket/prefix?endpoint=http://127.0.0.1:9000&region=us-east-1&path_style=true
S3 credentials come from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY[/AWS_SESSION_TOKEN]
or ~/.aws/credentials (profile=NAME in the URI). Transport flags: --http_*, --retry_*.
)";

UnderStoreOptions StoreOptions() {
  UnderStoreOptions o;
  o.http = HttpOptionsFromFlags();
  return o;
}

std::string FormatMtime(absl::Time t) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", t, absl::LocalTimeZone());
}

absl::Status Ls(UnderStore& store, absl::string_view path) {
  return ListAll(
      store, path, absl::GetFlag(FLAGS_recursive), [](const ObjectInfo& e) {
        if (e.is_dir) {
          std::printf("%12s  %-19s  %s/\n", "DIR", "", e.path.c_str());
        } else {
          std::printf("%12llu  %s  %s\n",
                      static_cast<unsigned long long>(e.size),
                      FormatMtime(e.mtime).c_str(), e.path.c_str());
        }
        return absl::OkStatus();
      });
}

absl::Status Stat(UnderStore& store, absl::string_view path) {
  LARDER_ASSIGN_OR_RETURN(ObjectInfo info, store.Stat(path));
  std::printf(
      "path:    %s\ntype:    %s\nsize:    %llu\nversion: %s\nmtime:   %s\n",
      info.path.c_str(), info.is_dir ? "directory" : "file",
      static_cast<unsigned long long>(info.size), info.version.c_str(),
      FormatMtime(info.mtime).c_str());
  return absl::OkStatus();
}

absl::Status WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(
          absl::StrCat("write failed: ", std::strerror(errno)));
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

// Copies one object, chunk by chunk, pinned to `info.version`. Writes to a
// temporary name and renames, so DEST never holds a torn file.
absl::Status CopyOne(UnderStore& store, const ObjectInfo& info,
                     const std::string& dest, std::vector<char>& buffer,
                     uint64_t* digest) {
  std::filesystem::path target = std::filesystem::path(dest) / info.path;
  std::error_code ec;
  std::filesystem::create_directories(target.parent_path(), ec);
  if (ec)
    return absl::InternalError(absl::StrCat(
        "cannot create ", target.parent_path().string(), ": ", ec.message()));
  std::string tmp = target.string() + ".larder-tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return absl::InternalError(
        absl::StrCat("cannot create ", tmp, ": ", std::strerror(errno)));
  Hasher hasher;
  uint64_t offset = 0;
  absl::Status st;
  while (offset < info.size) {
    absl::StatusOr<size_t> n = store.ReadRange(
        info.path, offset, absl::MakeSpan(buffer), info.version);
    if (!n.ok()) {
      st = n.status();
      break;
    }
    if (*n == 0) {
      st = absl::FailedPreconditionError(
          absl::StrCat(info.path, " shrank during the copy"));
      break;
    }
    hasher.Add(absl::string_view(buffer.data(), *n));
    st = WriteAll(fd, buffer.data(), *n);
    if (!st.ok()) break;
    offset += *n;
  }
  if (::close(fd) != 0 && st.ok())
    st = absl::InternalError(
        absl::StrCat("close ", tmp, ": ", std::strerror(errno)));
  if (st.ok() && ::rename(tmp.c_str(), target.c_str()) != 0) {
    st = absl::InternalError(
        absl::StrCat("rename ", tmp, ": ", std::strerror(errno)));
  }
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  *digest = hasher.Finish64();
  return absl::OkStatus();
}

absl::Status Copy(UnderStore& store, const std::string& dest) {
  const absl::Time start = absl::Now();
  std::vector<ObjectInfo> files;
  LARDER_RETURN_IF_ERROR(
      ListAll(store, "", /*recursive=*/true, [&](const ObjectInfo& e) {
        files.push_back(e);
        return absl::OkStatus();
      }));
  const absl::Duration list_time = absl::Now() - start;
  std::fprintf(stderr, "listed %zu files in %s\n", files.size(),
               absl::FormatDuration(list_time).c_str());

  const int threads = std::max(1, absl::GetFlag(FLAGS_parallel));
  const size_t chunk = static_cast<size_t>(
      std::max<int64_t>(4096, absl::GetFlag(FLAGS_chunk_size)));
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> bytes{0};
  absl::Mutex mu;
  absl::Status first_error;
  uint64_t combined =
      0;  // Order-independent digest of all files (sum of per-file xxh3).
  std::vector<std::thread> pool;
  const absl::Time copy_start = absl::Now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      std::vector<char> buffer(chunk);
      for (size_t i = next++; i < files.size(); i = next++) {
        uint64_t digest = 0;
        absl::Status st = CopyOne(store, files[i], dest, buffer, &digest);
        absl::MutexLock lock(&mu);
        if (!st.ok()) {
          if (first_error.ok()) first_error = st;
          next = files.size();
          return;
        }
        combined += Hash64(files[i].path) ^ digest;
        bytes += files[i].size;
      }
    });
  }
  for (auto& t : pool) t.join();
  LARDER_RETURN_IF_ERROR(first_error);
  const double secs = absl::ToDoubleSeconds(absl::Now() - copy_start);
  std::printf("copied %zu files, %llu bytes from %s to %s\n", files.size(),
              static_cast<unsigned long long>(bytes.load()),
              store.DebugString().c_str(), dest.c_str());
  std::printf(
      "listing %.3f s, copy %.3f s, %.1f MB/s with %d parallel readers, "
      "%zu-byte ranges\n",
      absl::ToDoubleSeconds(list_time), secs,
      secs > 0 ? bytes.load() / secs / 1e6 : 0.0, threads, chunk);
  std::printf("content digest (xxh3, order-independent): %016llx\n",
              static_cast<unsigned long long>(combined));
  return absl::OkStatus();
}

absl::Status Cat(UnderStore& store, absl::string_view path) {
  LARDER_ASSIGN_OR_RETURN(ObjectInfo info, store.Stat(path));
  if (info.is_dir)
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' is a directory"));
  std::vector<char> buffer(static_cast<size_t>(
      std::max<int64_t>(4096, absl::GetFlag(FLAGS_chunk_size))));
  uint64_t offset = 0;
  while (offset < info.size) {
    LARDER_ASSIGN_OR_RETURN(
        size_t n, store.ReadRange(info.path, offset, absl::MakeSpan(buffer),
                                  info.version));
    if (n == 0)
      return absl::FailedPreconditionError(
          absl::StrCat(info.path, " shrank during the read"));
    LARDER_RETURN_IF_ERROR(WriteAll(STDOUT_FILENO, buffer.data(), n));
    offset += n;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunStore(const std::vector<std::string>& args) {
  if (args.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("missing arguments\n\n", kUsage));
  }
  const std::string& verb = args[0];
  LARDER_ASSIGN_OR_RETURN(std::unique_ptr<UnderStore> store,
                          OpenUnderStore(args[1], StoreOptions()));
  const std::string path = args.size() > 2 ? args[2] : "";
  if (verb == "ls" && args.size() <= 3) return Ls(*store, path);
  if (verb == "stat" && args.size() == 3) return Stat(*store, path);
  if (verb == "cat" && args.size() == 3) return Cat(*store, path);
  if (verb == "copy" && args.size() == 3) return Copy(*store, path);
  return absl::InvalidArgumentError(
      absl::StrCat("bad use of 'larder store ", verb, "'\n\n", kUsage));
}

const Command kStoreCommand = {
    "store", "read an under-store directly (ls, stat, cat, copy)", kUsage,
    &RunStore,
    FlagList({kLogFlags, kHttpFlags, {"recursive", "parallel", "chunk_size"}})};

}  // namespace larder::cli
