// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: commands.h
// -----------------------------------------------------------------------------
//
// Subcommands of the `larder` binary. Each takes its positional arguments
// (flags are already parsed) and returns a status; main() turns that into one
// message on stderr and an exit code (cli/exit_codes.h).
#ifndef LARDER_CLI_COMMANDS_H_
#define LARDER_CLI_COMMANDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace larder::cli {

struct Command {
  absl::string_view name;
  absl::string_view summary;
  absl::string_view
      usage;  // Full help text: synopsis, arguments, relevant flags.
  absl::Status (*run)(const std::vector<std::string>& args);
};

// `larder store ls|stat|cat|copy ...`: direct access to an under-store.
absl::Status RunStore(const std::vector<std::string>& args);
extern const Command kStoreCommand;
// `larder worker ...`: a cache worker.
extern const Command kWorkerCommand;
// `larder fuse MOUNTPOINT`: the FUSE adaptor.
extern const Command kFuseCommand;
// Cluster commands (cluster_commands.cc).
extern const Command kMasterCommand, kMountCommand, kUnmountCommand, kLsCommand,
    kStatCommand, kCatCommand, kCpCommand, kLoadCommand, kInvalidateCommand,
    kStatsCommand, kRingCommand;

// The master address: --master, else $LARDER_MASTER, else "" (standalone).
std::string MasterAddress();

// A uid (or, with `group`, a gid) given as a number or a name of the user
// (group) database. Error: InvalidArgument naming `flag`.
absl::StatusOr<uint32_t> ParseAccountId(absl::string_view flag,
                                        const std::string& name, bool group);

// Exit code for a status: 0 OK, 2 usage (InvalidArgument), 3 NotFound,
// 4 PermissionDenied/Unauthenticated, 5 Unavailable/DeadlineExceeded,
// 6 FailedPrecondition (changed data), 1 anything else.
int ExitCodeFor(const absl::Status& status);

}  // namespace larder::cli

#endif  // LARDER_CLI_COMMANDS_H_
