// Copyright 2026 The Larder Authors.
//
// -----------------------------------------------------------------------------
// File: flag_parser.h
// -----------------------------------------------------------------------------
//
// The command line of one `larder` command: its flags (Abseil flags, looked up
// by name) and its positional arguments. Unlike absl::ParseCommandLine, it
//
//   * accepts --flag_name and --flag-name (and -flag_name), --flag=value and
//     --flag value, --bool, --nobool and --bool=false;
//   * accepts only the flags the command lists (Command::flags), so a flag
//     meant for another command is named as such, not silently ignored;
//   * returns InvalidArgument (exit 2) for every mistake, with the nearest
//     flag of the command on a typo ("did you mean --log_level?"), instead of
//     printing and exiting 1 itself;
//   * prints help without the flags' source files.
//
// `--` ends the flags: what follows is positional even if it starts with a
// dash. Not thread-safe (it sets process-wide flags): main() calls it once.
#ifndef LARDER_CLI_FLAG_PARSER_H_
#define LARDER_CLI_FLAG_PARSER_H_

#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "cli/commands.h"

namespace larder::cli {

struct CommandLine {
  std::vector<std::string> args;  // Positional arguments.
  bool help = false;              // --help, -h or --helpfull was given.
};

// Parses `argv` (the words after the command name) for `command`, setting
// the flags it names. Errors: InvalidArgument naming the word at fault.
absl::StatusOr<CommandLine> ParseCommandLine(const Command& command,
                                             absl::Span<char* const> argv);

// The flag of `candidates` nearest to `name` (edit distance, '-' and '_'
// alike), or "" if none is near enough to be a likely typo.
std::string NearestFlag(absl::string_view name,
                        absl::Span<const absl::string_view> candidates);

// `command`'s usage text followed by every flag it takes, with its default
// and help, one flag per line.
void PrintCommandHelp(const Command& command, std::FILE* out);

}  // namespace larder::cli

#endif  // LARDER_CLI_FLAG_PARSER_H_
