// Parsing of human-written durations ("250ms", "10s") and sizes ("1MiB") for command lines.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "fencekit/common/status.h"

namespace fencekit {

// Accepts an integer followed by one of ms, s, m, h (e.g. "250ms", "10s", "2m").
Result<std::chrono::milliseconds> ParseDuration(std::string_view text);
// Accepts an integer, optionally followed by B, KiB, MiB or GiB (e.g. "1048576", "1MiB").
Result<std::uint64_t> ParseSize(std::string_view text);

}  // namespace fencekit
