// Copyright 2026 The Larder Authors.
#include "common/units.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace larder {

absl::StatusOr<uint64_t> ParseBytes(absl::string_view text) {
  absl::string_view t = absl::StripAsciiWhitespace(text);
  size_t i = 0;
  while (i < t.size() &&
         (absl::ascii_isdigit(static_cast<unsigned char>(t[i])) || t[i] == '.'))
    ++i;
  double number;
  if (i == 0 || !absl::SimpleAtod(t.substr(0, i), &number)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad size '", text, "': want e.g. 4194304, 4MiB, 10GiB"));
  }
  std::string unit =
      absl::AsciiStrToLower(absl::StripAsciiWhitespace(t.substr(i)));
  double mult;
  if (unit.empty() || unit == "b") {
    mult = 1;
  } else if (unit == "k" || unit == "kb" || unit == "ki" || unit == "kib") {
    mult = 1024.0;
  } else if (unit == "m" || unit == "mb" || unit == "mi" || unit == "mib") {
    mult = 1024.0 * 1024;
  } else if (unit == "g" || unit == "gb" || unit == "gi" || unit == "gib") {
    mult = 1024.0 * 1024 * 1024;
  } else if (unit == "t" || unit == "tb" || unit == "ti" || unit == "tib") {
    mult = 1024.0 * 1024 * 1024 * 1024;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("bad size unit in '", text,
                     "' (B, KiB, MiB, GiB, TiB; Ki, Mi, Gi, Ti as Kubernetes "
                     "writes them)"));
  }
  double v = number * mult;
  if (v > 1.8e19)
    return absl::InvalidArgumentError(
        absl::StrCat("size '", text, "' too large"));
  return static_cast<uint64_t>(std::llround(v));
}

std::string FormatBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? absl::StrCat(bytes, " B")
                : absl::StrFormat("%.1f %s", v, kUnits[u]);
}

std::string BytesFlagText(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes == 0) return "0";
  int u = -1;
  while (u < 3 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++u;
  }
  return u < 0 ? absl::StrCat(bytes) : absl::StrCat(bytes, kUnits[u]);
}

}  // namespace larder
