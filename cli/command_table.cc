// Copyright 2026 The Larder Authors.
//
// The table of `larder` commands.
#include <algorithm>

#include "cli/commands.h"

namespace larder::cli {

std::vector<absl::string_view> FlagList(
    std::initializer_list<absl::Span<const absl::string_view>> groups) {
  std::vector<absl::string_view> out;
  for (absl::Span<const absl::string_view> g : groups) {
    for (absl::string_view f : g) {
      if (std::find(out.begin(), out.end(), f) == out.end()) out.push_back(f);
    }
  }
  return out;
}

absl::Span<const Command* const> AllCommands() {
  static const Command* const kCommands[] = {
      &kMasterCommand,    &kWorkerCommand, &kFuseCommand,
      &kCsiCommand,       &kMountCommand,  &kUnmountCommand,
      &kLsCommand,        &kStatCommand,   &kCatCommand,
      &kCpCommand,        &kLoadCommand,   &kInvalidateCommand,
      &kEvictCommand,     &kStatsCommand,  &kRingCommand,
      &kAdviseCommand,    &kStoreCommand,  &kVersionCommand,
      &kCompletionCommand};
  return kCommands;
}

const Command* FindCommand(absl::string_view name) {
  for (const Command* c : AllCommands()) {
    if (c->name == name) return c;
  }
  return nullptr;
}

}  // namespace larder::cli
