// Helpers shared by the fuzz targets: a checked assertion that libFuzzer reports as a crash, a
// temporary folder for a target's lifetime, and a private network namespace for targets whose
// inputs would otherwise reach real hosts.
#pragma once

#include <string>
#include <string_view>

namespace fencekit::fuzz {

// Prints "fuzz check failed: <what>" (with `detail` made printable) and aborts, which libFuzzer
// reports as a crash with the input that caused it.
[[noreturn]] void Fail(std::string_view what, std::string_view detail = {});

// `bytes` with every byte outside printable ASCII as \xNN, cut to `max` bytes: safe to print.
std::string Printable(std::string_view bytes, std::size_t max = 400);

// A fresh folder under $TMPDIR (or /tmp) that lives as long as the process and is removed at a
// normal exit. Dies when it cannot be made.
const std::string& ProcessTempDir();

// Moves the process into a new network namespace, where only a loopback interface that is
// down exists: every connect fails at once and no name lookup leaves the machine. Tries a plain
// network namespace (root), then one inside a new user namespace. Dies when neither is allowed,
// saying so: such a target must not run where its inputs could reach real hosts.
void EnterPrivateNetwork();

}  // namespace fencekit::fuzz

#define FUZZ_CHECK(cond, detail)                                                            \
  do {                                                                                      \
    if (!(cond)) ::fencekit::fuzz::Fail(#cond " at " __FILE__ ":" FUZZ_LINE_STR, (detail)); \
  } while (0)
#define FUZZ_STR2(x) #x
#define FUZZ_STR1(x) FUZZ_STR2(x)
#define FUZZ_LINE_STR FUZZ_STR1(__LINE__)
