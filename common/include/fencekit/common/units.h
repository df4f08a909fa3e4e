// Parsing of human-written durations ("250ms", "10s", "300us") and sizes ("1MiB") for command
// lines.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "fencekit/common/status.h"

namespace fencekit {

// The one duration grammar of every command-line flag: a number of seconds ("10", "1.5"), or a
// number followed by ms, s, m or h ("500ms", "2m", "0.5s"); rounded to the nearest millisecond.
// kInvalidArgument says what to write.
Result<std::chrono::milliseconds> ParseDuration(std::string_view text);
// The same grammar with microseconds too ("300us"), rounded to the nearest microsecond: for the
// flags whose useful values are under a millisecond.
Result<std::chrono::microseconds> ParseFineDuration(std::string_view text);
// Accepts an integer, optionally followed by B, KiB, MiB or GiB (e.g. "1048576", "1MiB").
Result<std::uint64_t> ParseSize(std::string_view text);

}  // namespace fencekit
