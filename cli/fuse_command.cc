// Copyright 2026 The Larder Authors.
//
// `larder fuse MOUNTPOINT`: the FUSE adaptor daemon.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/units.h"
#include "fuse/fuse_mount.h"
#include "larder/client.h"

ABSL_DECLARE_FLAG(std::vector<std::string>, allowed_file_roots);

// A flag with a struct's field behind it takes its default from that field:
// one home per default (flag_defaults_test checks).
ABSL_FLAG(bool, daemon, false,
          "fuse: detach and run in the background once mounted (the command "
          "returns when the mount is ready, or fails with its error).");
ABSL_FLAG(absl::Duration, attr_timeout, larder::FuseOptions().attr_timeout,
          "fuse: how long the kernel trusts file attributes.");
ABSL_FLAG(absl::Duration, entry_timeout, larder::FuseOptions().entry_timeout,
          "fuse: how long the kernel trusts name lookups.");
ABSL_FLAG(absl::Duration, negative_timeout,
          larder::FuseOptions().negative_timeout,
          "fuse: how long the kernel remembers a missing name (0 = not).");
ABSL_FLAG(bool, keep_cache, larder::FuseOptions().keep_cache,
          "fuse: keep the kernel page cache across opens while a file's "
          "version is unchanged.");
ABSL_FLAG(std::string, max_read,
          larder::BytesFlagText(larder::FuseOptions().max_read),
          "fuse: largest read request (above 1 MiB the daemon raises "
          "fs.fuse.max_pages_limit, where the kernel has it).");
ABSL_FLAG(std::string, direct_io_min_size,
          larder::BytesFlagText(larder::FuseOptions().direct_io_min_size),
          "fuse: files at least this large bypass the kernel page cache "
          "(direct_io: one copy, from the worker's memory into the reader's "
          "buffer); 0 = every file, off = none.");
ABSL_FLAG(bool, passthrough, larder::FuseOptions().passthrough,
          "fuse: hand files the worker on this node holds whole in RAM to "
          "the kernel as its memfd (FUSE passthrough, Linux 6.9+): reads "
          "then bypass this daemon, and nothing is cached twice.");
ABSL_FLAG(std::string, passthrough_min_size,
          larder::BytesFlagText(larder::FuseOptions().passthrough_min_size),
          "fuse: passthrough only for files at least this large (0 = every "
          "file; smaller ones are cached by the kernel's page cache, beside "
          "the worker's RAM).");
ABSL_FLAG(absl::Duration, passthrough_keep,
          larder::FuseOptions().passthrough_keep,
          "fuse: how long a passthrough file's memfd is kept after its last "
          "close for the next open (at most 25s, under the worker's lease; "
          "0 = closed at once).");
ABSL_FLAG(int, lease_ahead, static_cast<int>(larder::FuseOptions().lease_ahead),
          "fuse: passthrough files leased from the local worker ahead of "
          "their opens, in batches of a directory's files (an open then "
          "costs no exchange with the worker): at most this many held "
          "(0 = off).");
ABSL_FLAG(absl::Duration, lease_ahead_keep,
          larder::FuseOptions().lease_ahead_keep,
          "fuse: how long a file leased ahead waits for its open before it "
          "is given back (at most 30s).");
ABSL_FLAG(std::string, kernel_read_ahead,
          larder::BytesFlagText(larder::FuseOptions().read_ahead),
          "fuse: kernel readahead window of the mount (0 = kernel default).");
ABSL_FLAG(std::string, fuse_channel, larder::FuseOptions().channel,
          "fuse: how requests reach the daemon: classic (/dev/fuse) or uring "
          "(FUSE over io_uring where the kernel allows it: Linux 6.14+ with "
          "/sys/module/fuse/parameters/enable_uring Y; else /dev/fuse).");
ABSL_FLAG(int, fuse_threads, larder::FuseOptions().max_threads,
          "fuse: most requests served at once (those that may wait on the "
          "network, a cold read say, on threads of their own).");
ABSL_FLAG(int, fuse_channel_threads, larder::FuseOptions().channel_threads,
          "fuse: threads taking requests from /dev/fuse and serving the "
          "quick ones (few: more cost warm files CPU and speed).");
ABSL_FLAG(std::string, writes, larder::FuseOptions().writes,
          "fuse: whether the mount takes writes: auto (read-only while no "
          "mount of the table is writable, remounted read-write when one "
          "is), on, or off (read-only).");
ABSL_FLAG(std::string, opens, larder::FuseOptions().opens,
          "fuse: daemon (every open and close is a request: passthrough, "
          "per-open versions, direct_io) or kernel (no request per open or "
          "close; warm files read from the kernel page cache, held beside "
          "the worker's RAM tier; needs --writes=off).");
ABSL_FLAG(bool, allow_other, larder::FuseOptions().allow_other,
          "fuse: let every user read the mount (pods run as non-root).");
ABSL_FLAG(bool, auto_unmount, larder::FuseOptions().auto_unmount,
          "fuse: unmount (by fusermount3) if the daemon dies.");
ABSL_FLAG(std::string, fuse_metrics_listen, larder::FuseOptions().ops_listen,
          "fuse: address of /metrics and /healthz (empty = disabled).");
ABSL_FLAG(int, list_page_size, larder::FuseOptions().list_page_size,
          "fuse: directory entries fetched per master call (the daemon holds "
          "one page per open directory).");
ABSL_FLAG(int, readahead_blocks, larder::FuseOptions::kReadaheadBlocks,
          "fuse: blocks a sequential reader asks the owners to fetch ahead "
          "(the worker fetches consecutive ones with one request).");

namespace larder::cli {
namespace {

constexpr absl::string_view kUsage =
    R"(larder fuse: mount the cluster namespace with FUSE.

  larder fuse MOUNTPOINT [--master=HOST:PORT] [--daemon [--log_file=FILE]] [--flags below]

Every mount of the master's mount table appears under MOUNTPOINT as a directory tree
(/datasets/imagenet -> MOUNTPOINT/datasets/imagenet). Reads go through the cache: blocks
owned by the worker on this node (--node, default the host name) by short-circuit, others
over gRPC. Files of at least --direct_io_min_size bypass the page cache (direct_io); smaller
ones use it. A large file the worker on this node holds whole in RAM is read by the kernel
straight from the worker's memory (--passthrough). Stats and listings are kept in the
node's metadata cache for each mount's metadata TTL, so a warm open asks the master
nothing; past the TTL, while the master or the under-store is unreachable, they are
served for --metadata_stale_window. New files and whole replacements (O_TRUNC) of
files in a writable mount (larder mount --writable) are uploaded on close; other writes
fail with EROFS, and while no mount is writable the kernel mount is read-only
(--writes=auto; it is remounted read-write when one becomes writable). SIGTERM/SIGINT
unmount after in-flight reads finish; if the daemon dies, fusermount3 unmounts
(--auto_unmount). --daemon returns once the mount is ready (exit 0) or has failed (its
exit code); the daemon's stdin and stdout are /dev/null, its log goes to
--log_file (else /dev/null). Exit codes: 3 the mount point does not exist,
6 it is busy (already mounted, or a dead mount), 5 the master is unreachable.
)";

absl::StatusOr<FuseOptions> OptionsFromFlags(const std::string& mountpoint) {
  FuseOptions o;
  o.mountpoint = mountpoint;
  o.attr_timeout = absl::GetFlag(FLAGS_attr_timeout);
  o.entry_timeout = absl::GetFlag(FLAGS_entry_timeout);
  o.negative_timeout = absl::GetFlag(FLAGS_negative_timeout);
  o.keep_cache = absl::GetFlag(FLAGS_keep_cache);
  LARDER_ASSIGN_OR_RETURN(uint64_t max_read,
                          ParseBytes(absl::GetFlag(FLAGS_max_read)));
  o.max_read = static_cast<uint32_t>(std::min<uint64_t>(max_read, 1ull << 30));
  const std::string direct = absl::GetFlag(FLAGS_direct_io_min_size);
  if (direct == "off") {
    o.direct_io_min_size = FuseOptions::kNoDirectIo;
  } else {
    LARDER_ASSIGN_OR_RETURN(o.direct_io_min_size, ParseBytes(direct));
  }
  LARDER_ASSIGN_OR_RETURN(o.read_ahead,
                          ParseBytes(absl::GetFlag(FLAGS_kernel_read_ahead)));
  o.passthrough = absl::GetFlag(FLAGS_passthrough);
  o.channel = absl::GetFlag(FLAGS_fuse_channel);
  if (o.channel != "uring" && o.channel != "classic") {
    return absl::InvalidArgumentError(
        absl::StrCat("--fuse_channel=", o.channel, ": classic or uring"));
  }
  LARDER_ASSIGN_OR_RETURN(
      o.passthrough_min_size,
      ParseBytes(absl::GetFlag(FLAGS_passthrough_min_size)));
  o.passthrough_keep = std::clamp(absl::GetFlag(FLAGS_passthrough_keep),
                                  absl::ZeroDuration(), absl::Seconds(25));
  o.lease_ahead =
      static_cast<size_t>(std::max(0, absl::GetFlag(FLAGS_lease_ahead)));
  o.lease_ahead_keep = std::clamp(absl::GetFlag(FLAGS_lease_ahead_keep),
                                  absl::Milliseconds(100), absl::Seconds(30));
  o.writes = absl::GetFlag(FLAGS_writes);
  if (o.writes != "auto" && o.writes != "on" && o.writes != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("--writes=", o.writes, ": auto, on or off"));
  }
  o.opens = absl::GetFlag(FLAGS_opens);
  if (o.opens != "daemon" && o.opens != "kernel") {
    return absl::InvalidArgumentError(
        absl::StrCat("--opens=", o.opens, ": daemon or kernel"));
  }
  if (o.opens == "kernel" && o.writes != "off") {
    return absl::InvalidArgumentError(
        "--opens=kernel needs --writes=off: a write goes through its open");
  }
  o.max_threads = std::max(1, absl::GetFlag(FLAGS_fuse_threads));
  o.channel_threads = std::max(1, absl::GetFlag(FLAGS_fuse_channel_threads));
  o.allow_other = absl::GetFlag(FLAGS_allow_other);
  o.auto_unmount = absl::GetFlag(FLAGS_auto_unmount);
  o.ops_listen = absl::GetFlag(FLAGS_fuse_metrics_listen);
  o.list_page_size = std::max(1, absl::GetFlag(FLAGS_list_page_size));
  return o;
}

// Mounts and serves; `ready` is called once mounted (or with the error).
absl::Status MountAndServe(
    const FuseOptions& options,
    const std::function<void(const absl::Status&, int ops_port)>& ready) {
  // SIGTERM/SIGINT/SIGHUP reach only the thread that runs the FUSE loop:
  // every thread started from here on (client, gRPC, metrics) blocks them.
  sigset_t signals;
  sigemptyset(&signals);
  for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&signals, s);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  absl::StatusOr<ClientOptions> co = ClientOptionsFromFlags();
  if (!co.ok()) {
    ready(co.status(), 0);
    return co.status();
  }
  co->readahead_blocks = absl::GetFlag(FLAGS_readahead_blocks);
  // When every worker fails, a file:// mount is read directly only inside
  // these roots (none by default): the daemon runs as root and serves every
  // user (ClientOptions::fallback_file_roots).
  co->fallback_file_roots = absl::GetFlag(FLAGS_allowed_file_roots);
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect(*std::move(co));
  if (!client.ok()) {
    ready(client.status(), 0);
    return client.status();
  }
  absl::StatusOr<std::unique_ptr<FuseMount>> mount =
      FuseMount::Mount(options, std::move(*client));
  if (!mount.ok()) {
    ready(mount.status(), 0);
    return mount.status();
  }
  ready(absl::OkStatus(), (*mount)->ops_port());
  return (*mount)->Serve();
}

void PrintReady(const FuseOptions& options, int ops_port) {
  std::printf("larder fuse: mounted %s, metrics port %d\n",
              options.mountpoint.c_str(), ops_port);
  std::fflush(stdout);
}

// --daemon: the child mounts and serves; the parent waits for its first
// word (mounted, or the error) so the command's exit code tells the truth.
absl::Status RunDaemon(const FuseOptions& options) {
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0)
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  const pid_t pid = ::fork();
  if (pid < 0)
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid > 0) {
    ::close(pipefd[1]);
    std::string msg;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(pipefd[0], buf, sizeof(buf))) > 0) msg.append(buf, n);
    ::close(pipefd[0]);
    if (msg.empty()) {
      int wstatus = 0;
      ::waitpid(pid, &wstatus, 0);
      return absl::InternalError("the FUSE daemon exited before mounting");
    }
    // "0 PORT" or "CODE message".
    const int code = std::atoi(msg.c_str());
    if (code == 0) {
      std::printf("larder fuse: mounted %s (daemon pid %d), metrics port %s\n",
                  options.mountpoint.c_str(), pid,
                  msg.substr(msg.find(' ') + 1).c_str());
      return absl::OkStatus();
    }
    return absl::Status(static_cast<absl::StatusCode>(code),
                        msg.substr(msg.find(' ') + 1));
  }
  ::close(pipefd[0]);
  const int report = pipefd[1];
  auto tell_parent = [report](const absl::Status& s, int port) {
    const std::string msg =
        s.ok() ? absl::StrCat("0 ", port)
               : absl::StrCat(static_cast<int>(s.code()), " ", s.message());
    (void)!::write(report, msg.data(), msg.size());
    ::close(report);
  };
  // Detach the way daemons do: a session of its own, and none of the
  // caller's stdio kept open (`out=$(larder fuse ... --daemon)` or a pipe
  // into `tee` would otherwise wait for the daemon to exit).
  ::setsid();
  // Every other descriptor the caller gave us (a copy of its stderr kept
  // by main() for the final error, whatever its shell or test runner left
  // open) is closed: a daemon holding one keeps the caller's pipe open.
  if (report > 3) ::close_range(3, static_cast<unsigned>(report - 1), 0);
  ::close_range(static_cast<unsigned>(report + 1), ~0u, 0);
  if (int null = ::open("/dev/null", O_RDWR); null >= 0) {
    ::dup2(null, STDIN_FILENO);
    ::dup2(null, STDOUT_FILENO);
    ::close(null);
  }
  if (absl::Status st = RedirectStderrToLogFile(/*or_dev_null=*/true);
      !st.ok()) {
    tell_parent(st, 0);
    std::_Exit(1);
  }
  absl::Status st = MountAndServe(options, tell_parent);
  std::_Exit(st.ok() ? 0 : 1);
}

absl::Status RunFuse(const std::vector<std::string>& args) {
  if (args.size() != 1)
    return absl::InvalidArgumentError(
        "usage: larder fuse MOUNTPOINT [--flags] (larder fuse --help)");
  LARDER_ASSIGN_OR_RETURN(FuseOptions options, OptionsFromFlags(args[0]));
  if (absl::GetFlag(FLAGS_daemon)) return RunDaemon(options);
  LARDER_RETURN_IF_ERROR(RedirectStderrToLogFile(/*or_dev_null=*/false));
  return MountAndServe(options, [&](const absl::Status& s, int port) {
    if (s.ok()) PrintReady(options, port);
  });
}

}  // namespace

const Command kFuseCommand = {"fuse", "mount the cluster namespace with FUSE",
                              kUsage, &RunFuse,
                              FlagList({kLogFlags,
                                        kClientFlags,
                                        kClientReadFlags,
                                        kClientWriteFlags,
                                        kHttpFlags,
                                        {"log_file",
                                         "daemon",
                                         "attr_timeout",
                                         "entry_timeout",
                                         "negative_timeout",
                                         "keep_cache",
                                         "max_read",
                                         "kernel_read_ahead",
                                         "direct_io_min_size",
                                         "passthrough",
                                         "passthrough_min_size",
                                         "passthrough_keep",
                                         "lease_ahead",
                                         "lease_ahead_keep",
                                         "fuse_channel",
                                         "fuse_threads",
                                         "fuse_channel_threads",
                                         "writes",
                                         "opens",
                                         "allow_other",
                                         "auto_unmount",
                                         "fuse_metrics_listen",
                                         "readahead_blocks",
                                         "list_page_size",
                                         "allowed_file_roots"}})};

}  // namespace larder::cli
