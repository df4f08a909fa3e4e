// fencectl's shared command-line plumbing: exit codes, errors, option parsing, JSON output.
#pragma once

#include <boost/json/object.hpp>
#include <boost/program_options.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "fencekit/common/status.h"
#include "wire.h"

namespace fencekit::fencectl {

namespace po = boost::program_options;

// Exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitBusy = 2;   // acquire: busy or timed out
inline constexpr int kExitStale = 3;  // put: refused as stale
inline constexpr int kExitCheck = 4;  // pause-test: violations with fencing, or none without

// Prints "fencectl: message" on stderr and returns `code`.
int Fail(int code, const std::string& message);
// Fail with the exit code that `s` calls for (busy, stale or error).
int FailStatus(const Status& s);
// $name when set and not empty, else `fallback`.
std::string EnvOr(const char* name, const char* fallback);
// One JSON object on one line of stdout.
void Print(const boost::json::object& o);
// Names in fencectl's JSON follow fenced's rule (percent-encoded when not UTF-8).
using wire::PutName;

struct Parsed {
  po::variables_map vm;
  bool help = false;  // --help was given and printed: the command should exit 0
};
// Parses one subcommand's options; `positional` names the positional arguments in order.
Result<Parsed> Parse(const std::string& command, po::options_description& desc,
                     const po::positional_options_description& positional,
                     const std::vector<std::string>& args);
// The option `name` as a duration ("10s", "250ms").
Result<std::chrono::milliseconds> Duration(const po::variables_map& vm, const char* name);

// fencectl pause-test (fencectl_pause_test.cc).
int PauseTest(const std::vector<std::string>& args);

}  // namespace fencekit::fencectl
