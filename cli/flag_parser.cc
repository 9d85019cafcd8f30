// Copyright 2026 The Larder Authors.
#include "cli/flag_parser.h"

#include <algorithm>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace larder::cli {
namespace {

// Optimal string alignment distance (Levenshtein plus adjacent swaps).
size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1,
                                     std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] =
          std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

std::string Normalize(absl::string_view name) {
  return absl::StrReplaceAll(absl::AsciiStrToLower(name), {{"-", "_"}});
}

bool Takes(const Command& command, absl::string_view flag) {
  return std::find(command.flags.begin(), command.flags.end(), flag) !=
         command.flags.end();
}

// The commands besides `command` that take `flag`, as "worker, master".
std::string OtherCommandsTaking(const Command& command,
                                absl::string_view flag) {
  std::vector<std::string> names;
  for (const Command* c : AllCommands()) {
    if (c != &command && Takes(*c, flag)) names.emplace_back(c->name);
  }
  return absl::StrJoin(names, ", ");
}

absl::Status UnknownFlag(const Command& command, absl::string_view word,
                         absl::string_view name) {
  const std::string prefix =
      absl::StrCat("larder ", command.name, ": unknown flag '", word, "'");
  if (absl::CommandLineFlag* f = absl::FindCommandLineFlag(name)) {
    const std::string others = OtherCommandsTaking(command, f->Name());
    if (!others.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("larder ", command.name, " does not take --", name,
                       " (a flag of: ", others, ")"));
    }
  }
  const std::string near = NearestFlag(name, command.flags);
  return absl::InvalidArgumentError(absl::StrCat(
      prefix, near.empty() ? "" : absl::StrCat(" (did you mean --", near, "?)"),
      "; 'larder ", command.name, " --help' lists its flags"));
}

// Wraps `text` to lines of at most `width` columns, each after `indent`.
std::string Wrap(absl::string_view text, size_t indent, size_t width) {
  std::string out, line;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (!line.empty() && indent + line.size() + 1 + word.size() > width) {
      absl::StrAppend(&out, std::string(indent, ' '), line, "\n");
      line.clear();
    }
    absl::StrAppend(&line, line.empty() ? "" : " ", word);
  }
  if (!line.empty())
    absl::StrAppend(&out, std::string(indent, ' '), line, "\n");
  return out;
}

}  // namespace

std::string NearestFlag(absl::string_view name,
                        absl::Span<const absl::string_view> candidates) {
  const std::string n = Normalize(name);
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (absl::string_view c : candidates) {
    size_t d = EditDistance(n, c);
    // A prefix of a flag ("--recurs") is as good as one typo.
    if (n.size() >= 3 && absl::StartsWith(c, n)) d = std::min<size_t>(d, 1);
    if (d < best_distance) {
      best_distance = d;
      best = std::string(c);
    }
  }
  const size_t limit = std::max<size_t>(2, n.size() / 3);
  return best_distance <= limit ? best : "";
}

absl::StatusOr<CommandLine> ParseCommandLine(const Command& command,
                                             absl::Span<char* const> argv) {
  CommandLine out;
  bool flags_done = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const absl::string_view word = argv[i];
    if (flags_done || word.size() < 2 || word[0] != '-') {
      out.args.emplace_back(word);
      continue;
    }
    if (word == "--") {
      flags_done = true;
      continue;
    }
    absl::string_view body = word.substr(word[1] == '-' ? 2 : 1);
    absl::string_view value;
    bool has_value = false;
    if (size_t eq = body.find('='); eq != absl::string_view::npos) {
      value = body.substr(eq + 1);
      body = body.substr(0, eq);
      has_value = true;
    }
    std::string name = Normalize(body);
    if (name == "help" || name == "h" || name == "helpfull") {
      out.help = true;
      continue;
    }
    absl::CommandLineFlag* flag =
        Takes(command, name) ? absl::FindCommandLineFlag(name) : nullptr;
    bool negated = false;
    if (flag == nullptr && absl::StartsWith(name, "no") && !has_value) {
      const std::string positive = name.substr(2);
      absl::CommandLineFlag* f = Takes(command, positive)
                                     ? absl::FindCommandLineFlag(positive)
                                     : nullptr;
      if (f != nullptr && f->IsOfType<bool>()) {
        flag = f;
        negated = true;
        name = positive;
      }
    }
    if (flag == nullptr) return UnknownFlag(command, word, name);
    std::string text;
    if (negated) {
      text = "false";
    } else if (has_value) {
      text = std::string(value);
    } else if (flag->IsOfType<bool>()) {
      text = "true";
    } else if (i + 1 < argv.size()) {
      text = argv[++i];
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("larder ", command.name, ": --", name,
                       " needs a value (--", name, "=VALUE)"));
    }
    std::string error;
    if (!flag->ParseFrom(text, &error)) {
      return absl::InvalidArgumentError(
          absl::StrCat("larder ", command.name, ": --", name, "=", text, ": ",
                       error, " (default: ", flag->DefaultValue(), ")"));
    }
  }
  return out;
}

void PrintCommandHelp(const Command& command, std::FILE* out) {
  std::fprintf(out, "%.*s", static_cast<int>(command.usage.size()),
               command.usage.data());
  if (command.flags.empty()) return;
  std::fprintf(out, "\nflags (--name=VALUE or --name-with-dashes=VALUE):\n");
  for (absl::string_view name : command.flags) {
    absl::CommandLineFlag* f = absl::FindCommandLineFlag(name);
    if (f == nullptr) continue;  // cli_test checks every listed flag exists.
    std::string help = f->Help();
    // "worker: RAM tier capacity" -> "RAM tier capacity": the command is
    // known here.
    if (size_t colon = help.find(": ");
        colon != std::string::npos && colon < 24 &&
        std::all_of(help.begin(), help.begin() + colon, [](char c) {
          return absl::ascii_islower(c) || c == ',' || c == ' ';
        })) {
      help = help.substr(colon + 2);
    }
    const std::string def = f->DefaultValue();
    std::fprintf(out, "  --%s%s\n%s", std::string(name).c_str(),
                 f->IsOfType<bool>()
                     ? absl::StrCat(" (default ", def, ")").c_str()
                     : absl::StrCat("=", def.empty() ? "\"\"" : def).c_str(),
                 Wrap(help, 6, 100).c_str());
  }
}

}  // namespace larder::cli
