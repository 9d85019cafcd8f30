// Copyright 2026 The Larder Authors.
//
// `larder version` and `larder completion bash`.
#include <cstdio>
#include <string>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "cli/version_info.h"
#include "common/status_macros.h"

namespace larder::cli {
namespace {

absl::Status RunVersion(const std::vector<std::string>& args) {
  if (!args.empty())
    return absl::InvalidArgumentError("usage: larder version [--output=json]");
  LARDER_ASSIGN_OR_RETURN(bool json, JsonOutput());
  if (json) {
    Json doc;
    doc["version"] = std::string(kVersion);
    doc["commit"] = std::string(kGitCommit);
    doc["build_type"] = std::string(kBuildType);
    PrintJson(doc);
  } else {
    std::printf("larder %s (commit %s, %s build)\n", kVersion, kGitCommit,
                kBuildType);
  }
  return absl::OkStatus();
}

// One `case` arm per command: its flags, "--name=" for those that take a
// value (bash then leaves the cursor after the '=').
std::string CompletionScript() {
  std::vector<std::string> names;
  std::string cases;
  for (const Command* c : AllCommands()) {
    names.emplace_back(c->name);
    std::vector<std::string> words = {"--help"};
    for (absl::string_view f : c->flags) {
      absl::CommandLineFlag* flag = absl::FindCommandLineFlag(f);
      if (flag == nullptr) continue;
      words.push_back(absl::StrCat("--", f, flag->IsOfType<bool>() ? "" : "="));
    }
    absl::StrAppend(&cases, "    ", c->name, ") flags=\"",
                    absl::StrJoin(words, " "), "\" ;;\n");
  }
  return absl::StrCat(
      R"(# bash completion for larder. Load it with
#   source <(larder completion bash)
# or install it:  larder completion bash > /etc/bash_completion.d/larder
_larder() {
  local cur="${COMP_WORDS[COMP_CWORD]}"
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W ")",
      absl::StrJoin(names, " "), R"( --help --version" -- "$cur"))
    return
  fi
  # --flag=VALUE: bash splits at '=', so the flag is two words back.
  if [ "$COMP_CWORD" -ge 3 ] && [ "${COMP_WORDS[COMP_CWORD-1]}" = "=" ]; then
    case "${COMP_WORDS[COMP_CWORD-2]}" in
      --output) COMPREPLY=($(compgen -W "table json" -- "$cur")) ;;
      --log_level) COMPREPLY=($(compgen -W "debug info warning error" -- "$cur")) ;;
      *) COMPREPLY=($(compgen -f -- "$cur")) ;;
    esac
    return
  fi
  local flags=""
  case "${COMP_WORDS[1]}" in
)",
      cases, R"(  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    if [[ "${COMPREPLY[0]}" == *= ]]; then compopt -o nospace 2>/dev/null; fi
    return
  fi
  if [ "${COMP_WORDS[1]}" = completion ]; then
    COMPREPLY=($(compgen -W "bash" -- "$cur"))
    return
  fi
  COMPREPLY=($(compgen -f -- "$cur"))
}
complete -F _larder larder
)");
}

absl::Status RunCompletion(const std::vector<std::string>& args) {
  if (args.size() != 1 || args[0] != "bash") {
    return absl::InvalidArgumentError(
        "usage: larder completion bash (only bash is supported)");
  }
  const std::string script = CompletionScript();
  std::fwrite(script.data(), 1, script.size(), stdout);
  return absl::OkStatus();
}

}  // namespace

const Command kVersionCommand = {
    "version", "the version, git commit and build type of this binary",
    "larder version [--output=json]   (also: larder --version)\n", &RunVersion,
    FlagList({{"output"}})};
const Command kCompletionCommand = {
    "completion",
    "print a bash completion script",
    "larder completion bash\n"
    "  source <(larder completion bash), or save it in "
    "/etc/bash_completion.d/larder\n",
    &RunCompletion,
    {}};

}  // namespace larder::cli
