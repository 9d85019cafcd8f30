// Copyright 2026 The Larder Authors.
//
// The WebHDFS stand-in (tests/servers/webhdfs_server.py) as a test fixture: a
// namenode port and a datanode port on loopback serving a temp directory as
// the HDFS namespace. It is a stand-in for a real namenode, written from the
// WebHDFS REST specification; no HDFS runs on the test machine.
#ifndef LARDER_TESTS_TESTING_WEBHDFS_H_
#define LARDER_TESTS_TESTING_WEBHDFS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "tests/testing/process.h"

namespace larder::testing {

class WebHdfs {
 public:
  // How LISTSTATUS_BATCH misbehaves (the server's --list-fault).
  enum class ListFault {
    kNone,
    kRepeatBatch,  // Ignores startAfter: the first batch again and again.
    kEmptyBatch,   // After the first batch: no entries, remainingEntries > 0.
    kEndless,      // One new file per batch, remainingEntries 1, forever.
  };
  struct Options {
    std::string user = "larder";    // Required user.name ("" = none needed).
    std::string token;              // Also accepted: delegation=TOKEN.
    int batch = 1000;               // Entries per LISTSTATUS_BATCH answer.
    std::vector<std::string> deny;  // HDFS path prefixes answered 403.
    // The IPv4 address both ports listen on, which Uri() and the datanode
    // redirect name. Default loopback.
    std::string host = "127.0.0.1";
    // Non-empty: OPEN answers 307 with this Location instead of the
    // datanode's.
    std::string open_redirect;
    ListFault list_fault = ListFault::kNone;
    // No LISTSTATUS_BATCH: answered as Hadoop before 2.8 answers an op it
    // does not know.
    bool old_namenode = false;
    // The first `standby` namenode requests are answered 403
    // StandbyException.
    int standby = 0;
  };
  static absl::StatusOr<std::unique_ptr<WebHdfs>> Start(Options options);
  static absl::StatusOr<std::unique_ptr<WebHdfs>> Start() {
    return Start(Options());
  }
  ~WebHdfs() { process_.Stop(9); }

  void Kill() { process_.Stop(9); }
  absl::Status Restart();

  int port() const { return port_; }
  int datanode_port() const { return datanode_port_; }
  // hdfs://HOST:PORT/PATH?user=USER
  std::string Uri(const std::string& path) const;
  // Creates or replaces HDFS file `path` (write + rename; the modification
  // time always moves forward, so the version changes).
  absl::Status Put(const std::string& path, const std::string& data);
  const std::string& root() const { return root_; }

 private:
  WebHdfs() = default;
  absl::Status Launch();
  TempDir dir_;
  Options options_;
  std::string root_;
  int port_ = 0, datanode_port_ = 0;
  absl::Mutex mu_;  // Put may be called from many threads.
  int64_t last_mtime_ns_ = 0;
  int next_tmp_ = 0;
  Subprocess process_;
};

}  // namespace larder::testing

#endif  // LARDER_TESTS_TESTING_WEBHDFS_H_
