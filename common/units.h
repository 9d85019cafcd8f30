// Copyright 2026 The Larder Authors.
//
// Byte sizes in flags and configuration: "4194304", "4MiB", "512KiB", "10GiB",
// "1.5TiB" (binary units; "KB"/"MB"/"GB" are read as binary too, as most
// storage tools do).
#ifndef LARDER_COMMON_UNITS_H_
#define LARDER_COMMON_UNITS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace larder {

// Errors: InvalidArgument, naming the bad value.
absl::StatusOr<uint64_t> ParseBytes(absl::string_view text);
// "4.0 MiB" style, for humans.
std::string FormatBytes(uint64_t bytes);
// Exactly, as a flag is written: "4MiB", "256MiB", "1GiB", "4097" (the
// largest binary unit that divides it); ParseBytes reads it back as is.
std::string BytesFlagText(uint64_t bytes);

}  // namespace larder

#endif  // LARDER_COMMON_UNITS_H_
