// Copyright 2026 The Larder Authors.
#include "tests/testing/webhdfs.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace larder::testing {
namespace {

// True once something accepts TCP connections on host:port (IPv4).
bool Accepts(const std::string& host, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok =
      ::inet_pton(AF_INET, host.c_str(), &a.sin_addr) == 1 &&
      ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

absl::StatusOr<std::unique_ptr<WebHdfs>> WebHdfs::Start(Options options) {
  std::unique_ptr<WebHdfs> w(new WebHdfs);
  w->options_ = std::move(options);
  w->root_ = w->dir_.path() + "/hdfs";
  std::filesystem::create_directories(w->root_);
  absl::Status st = w->Launch();
  if (!st.ok()) return st;
  return w;
}

absl::Status WebHdfs::Launch() {
  absl::Status st;
  for (int attempt = 0; attempt < 5; ++attempt) {
    port_ = PickFreePort();
    datanode_port_ = PickFreePort();
    std::vector<std::string> argv = {
        "/usr/bin/python3", SourceDir() + "/tests/servers/webhdfs_server.py",
        "--root",           root_,
        "--port",           absl::StrCat(port_),
        "--datanode-port",  absl::StrCat(datanode_port_),
        "--batch",          absl::StrCat(options_.batch),
        "--host",           options_.host};
    if (!options_.open_redirect.empty()) {
      argv.push_back("--open-redirect");
      argv.push_back(options_.open_redirect);
    }
    switch (options_.list_fault) {
      case ListFault::kNone:
        break;
      case ListFault::kRepeatBatch:
        argv.insert(argv.end(), {"--list-fault", "repeat"});
        break;
      case ListFault::kEmptyBatch:
        argv.insert(argv.end(), {"--list-fault", "empty"});
        break;
      case ListFault::kEndless:
        argv.insert(argv.end(), {"--list-fault", "endless"});
        break;
    }
    if (options_.old_namenode) argv.push_back("--old-namenode");
    if (options_.standby > 0) {
      argv.push_back("--standby");
      argv.push_back(absl::StrCat(options_.standby));
    }
    if (!options_.user.empty()) {
      argv.push_back("--user");
      argv.push_back(options_.user);
    }
    if (!options_.token.empty()) {
      argv.push_back("--token");
      argv.push_back(options_.token);
    }
    for (const std::string& d : options_.deny) {
      argv.push_back("--deny");
      argv.push_back(d);
    }
    const std::string log = dir_.path() + "/webhdfs.log";
    st = process_.Start(argv, log);
    if (!st.ok()) return st;
    const int a = port_, b = datanode_port_;
    const std::string host = options_.host;
    bool exited = false;
    if (WaitFor(
            [&] {
              if (process_.Exited()) {
                exited = true;
                return true;
              }
              return Accepts(host, a) && Accepts(host, b);
            },
            absl::Seconds(20)) &&
        !exited) {
      return absl::OkStatus();
    }
    auto text = ReadFile(log);
    st = absl::DeadlineExceededError(absl::StrCat(
        "the WebHDFS stand-in did not start; log:\n", text.value_or("")));
    if (!exited) return st;  // A taken port makes it exit: try new ones.
  }
  return st;
}

absl::Status WebHdfs::Restart() {
  process_.Stop(9);
  return Launch();
}

std::string WebHdfs::Uri(const std::string& path) const {
  return absl::StrCat("hdfs://", options_.host, ":", port_, "/", path,
                      options_.user.empty() ? "" : "?user=", options_.user);
}

absl::Status WebHdfs::Put(const std::string& path, const std::string& data) {
  absl::MutexLock lock(&mu_);
  const std::string tmp = absl::StrCat(dir_.path(), "/staging-", next_tmp_++);
  if (auto st = WriteFile(tmp, data); !st.ok()) return st;
  // HDFS versions are mtime (ms) + length: keep every write's mtime apart.
  int64_t now = absl::ToUnixNanos(absl::Now());
  if (now < last_mtime_ns_ + 2000000) now = last_mtime_ns_ + 2000000;
  last_mtime_ns_ = now;
  struct timespec times[2] = {{now / 1000000000, now % 1000000000},
                              {now / 1000000000, now % 1000000000}};
  ::utimensat(AT_FDCWD, tmp.c_str(), times, 0);
  const std::string target = root_ + "/" + path;
  std::filesystem::create_directories(
      std::filesystem::path(target).parent_path());
  if (::rename(tmp.c_str(), target.c_str()) != 0)
    return absl::InternalError(absl::StrCat("rename to ", target));
  return absl::OkStatus();
}

}  // namespace larder::testing
