// Copyright 2026 The Larder Authors.
//
// The `larder` binary: parses flags, dispatches to a subcommand, turns its
// status into one clear message and an exit code. All logic is in libraries.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "common/flags.h"
#include "common/log.h"

namespace larder::cli {
namespace {

const Command* const kCommands[] = {
    &kMasterCommand,  &kWorkerCommand, &kFuseCommand,       &kMountCommand,
    &kUnmountCommand, &kLsCommand,     &kStatCommand,       &kCatCommand,
    &kCpCommand,      &kLoadCommand,   &kInvalidateCommand, &kStatsCommand,
    &kRingCommand,    &kStoreCommand};

void PrintTopUsage() {
  std::fprintf(stderr, "usage: larder COMMAND [ARGS] [--flags]\n\ncommands:\n");
  for (const Command* c : kCommands) {
    std::fprintf(stderr, "  %-10s %.*s\n", std::string(c->name).c_str(),
                 static_cast<int>(c->summary.size()), c->summary.data());
  }
  std::fprintf(stderr,
               "\n'larder COMMAND --help' describes one command; --helpfull "
               "lists every flag.\n");
}

}  // namespace

int ExitCodeFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return 0;
    case absl::StatusCode::kInvalidArgument:
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
  if (argc < 2 || absl::string_view(argv[1]) == "--help" ||
      absl::string_view(argv[1]) == "-h" ||
      absl::string_view(argv[1]) == "help") {
    PrintTopUsage();
    return argc < 2 ? 2 : 0;
  }
  const absl::string_view name = argv[1];
  const Command* command = nullptr;
  for (const Command* c : kCommands) {
    if (c->name == name) command = c;
  }
  if (command == nullptr) {
    std::fprintf(stderr, "larder: unknown command '%s'\n\n", argv[1]);
    PrintTopUsage();
    return 2;
  }
  // Per-command help before absl sees the flags.
  for (int i = 2; i < argc; ++i) {
    absl::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fprintf(stdout, "%.*s", static_cast<int>(command->usage.size()),
                   command->usage.data());
      return 0;
    }
  }
  absl::SetProgramUsageMessage(absl::StrCat("larder ", name, " ..."));
  std::vector<char*> rest = absl::ParseCommandLine(argc - 1, argv + 1);
  std::vector<std::string> args(rest.begin() + 1, rest.end());
  if (absl::Status st = ApplyLogFlags(); !st.ok()) {
    std::fprintf(stderr, "larder: %s\n", st.ToString().c_str());
    return 2;
  }
  absl::Status status = command->run(args);
  if (!status.ok()) {
    std::fprintf(stderr, "larder %.*s: %s\n", static_cast<int>(name.size()),
                 name.data(), RedactSecrets(status.ToString()).c_str());
  }
  return ExitCodeFor(status);
}

}  // namespace larder::cli

int main(int argc, char** argv) { return larder::cli::Main(argc, argv); }
