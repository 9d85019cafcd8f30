// Copyright 2026 The Larder Authors.
//
// The `larder` binary: parses flags, dispatches to a subcommand, turns its
// status into one clear message and an exit code. All logic is in libraries.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "cli/commands.h"
#include "cli/flag_parser.h"
#include "cli/version_info.h"
#include "common/flags.h"
#include "common/log.h"

namespace larder::cli {
namespace {

void PrintTopUsage(std::FILE* out) {
  std::fprintf(out, "usage: larder COMMAND [ARGS] [--flags]\n\ncommands:\n");
  for (const Command* c : AllCommands()) {
    std::fprintf(out, "  %-11s %.*s\n", std::string(c->name).c_str(),
                 static_cast<int>(c->summary.size()), c->summary.data());
  }
  std::fprintf(out,
               "\n'larder COMMAND --help' lists the flags of one command; "
               "'larder --helpfull' those of every command.\n"
               "Exit codes: 0 ok, 2 usage or invalid request, 3 not found, "
               "4 permission, 5 unavailable, 6 object changed, 1 other.\n");
}

void PrintEveryCommandHelp() {
  for (const Command* c : AllCommands()) {
    std::printf("=== larder %.*s ===\n", static_cast<int>(c->name.size()),
                c->name.data());
    PrintCommandHelp(*c, stdout);
    std::printf("\n");
  }
}

}  // namespace

int ExitCodeFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return 0;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kAlreadyExists:
      return 2;
    case absl::StatusCode::kNotFound:
      return 3;
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      return 4;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return 5;
    case absl::StatusCode::kFailedPrecondition:
      return 6;
    default:
      return 1;
  }
}

int Main(int argc, char** argv) {
  const absl::string_view first = argc < 2 ? "" : argv[1];
  if (argc < 2) {
    PrintTopUsage(stderr);
    return 2;
  }
  if (first == "--help" || first == "-h" || first == "help") {
    PrintTopUsage(stdout);
    return 0;
  }
  if (first == "--helpfull") {
    PrintEveryCommandHelp();
    return 0;
  }
  const Command* command =
      FindCommand(first == "--version" || first == "-V" ? "version" : first);
  if (command == nullptr) {
    std::string near;
    std::vector<absl::string_view> names;
    for (const Command* c : AllCommands()) names.push_back(c->name);
    if (!first.empty() && first[0] != '-') near = NearestFlag(first, names);
    std::fprintf(stderr, "larder: unknown command '%s'%s\n\n", argv[1],
                 near.empty()
                     ? ""
                     : absl::StrCat(" (did you mean '", near, "'?)").c_str());
    PrintTopUsage(stderr);
    return 2;
  }
  absl::StatusOr<CommandLine> line =
      ParseCommandLine(*command, absl::MakeSpan(argv + 2, argc - 2));
  if (!line.ok()) {
    std::fprintf(stderr, "%s\n", std::string(line.status().message()).c_str());
    return 2;
  }
  if (line->help) {
    PrintCommandHelp(*command, stdout);
    return 0;
  }
  if (absl::Status st = ApplyLogFlags(); !st.ok()) {
    std::fprintf(
        stderr, "larder: %s\n",
        st.ToString(absl::StatusToStringMode::kWithNoExtraData).c_str());
    return 2;
  }
  // A daemon may point stderr at --log_file; its final error still goes to
  // the terminal (or whatever stderr was) that started it.
  const int caller_stderr = ::fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
  absl::Status status = command->run(line->args);
  if (!status.ok()) {
    const std::string message = absl::StrCat(
        "larder ", command->name, ": ",
        RedactSecrets(
            status.ToString(absl::StatusToStringMode::kWithNoExtraData)),
        "\n");
    std::fflush(stderr);
    (void)!::write(STDERR_FILENO, message.data(), message.size());
    struct stat now {
    }, before{};
    if (caller_stderr >= 0 && ::fstat(STDERR_FILENO, &now) == 0 &&
        ::fstat(caller_stderr, &before) == 0 &&
        (now.st_dev != before.st_dev || now.st_ino != before.st_ino)) {
      (void)!::write(caller_stderr, message.data(), message.size());
    }
  }
  return ExitCodeFor(status);
}

}  // namespace larder::cli

int main(int argc, char** argv) {
  // Debian's Abseil is built with Mutex deadlock detection on (a debug
  // aid): every lock then records itself in one process-wide graph under a
  // global lock. That made a lock 4x dearer on one thread and 36x with two
  // threads taking mutexes of their own (2-core VM), and serialized the
  // daemons' threads. Off before any thread starts; the tests keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return larder::cli::Main(argc, argv);
}
