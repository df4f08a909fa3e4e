// fencectl's shared command-line plumbing: exit codes, errors, option parsing, JSON output.
#pragma once

#include <boost/json/object.hpp>
#include <boost/program_options.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "fencekit/common/status.h"
#include "fencekit/common/token.h"
#include "wire.h"

namespace fencekit::fencectl {

namespace po = boost::program_options;

// Exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitBusy = 2;    // acquire: busy or timed out
inline constexpr int kExitStale = 3;   // put: refused as stale
inline constexpr int kExitCheck = 4;   // pause-test: violations with fencing (or a --worker run
                                       // failed its check), or none without
inline constexpr int kExitLost = 5;    // run: the lease was lost while the command ran
inline constexpr int kExitPrecondition = 6;  // put, delete, batch: a version precondition failed
inline constexpr int kExitUsage = 64;  // a usage error (EX_USAGE, as flock's)

// Prints "fencectl: message" on stderr and returns `code`.
int Fail(int code, const std::string& message);
// Fail with the exit code that `s` calls for (busy, stale, precondition or error).
int FailStatus(const Status& s);
// A usage error: the message, and exit kExitUsage.
int FailUsage(const Status& s);
// A failure to open a lock service or a store: a malformed or unknown URI (kInvalidArgument)
// is a usage error, anything else as FailStatus.
int FailOpen(const Status& s);
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
// "fencectl put [options] --lock NAME --token N KEY [VALUE | -]": a command's usage line, its
// positional arguments by name (what `fencectl COMMAND --help` prints first).
const std::string& UsageLine(const std::string& command);
// Parses one subcommand's options; `positional` names the positional arguments in order.
// --help (the usage line, then the options) is answered before the required arguments are
// checked. Errors are usage errors.
Result<Parsed> Parse(const std::string& command, po::options_description& desc,
                     const po::positional_options_description& positional,
                     const std::vector<std::string>& args);
// The option `name` as a duration, in the one grammar of every flag (ParseDuration: "10",
// "1.5", "500ms", "2m"); kInvalidArgument names the flag.
Result<std::chrono::milliseconds> Duration(const po::variables_map& vm, const char* name);
// The option `name` as a fencing token; kInvalidArgument names the flag.
Result<FencingToken> Token(const po::variables_map& vm, const char* name);

// fencectl pause-test (fencectl_pause_test.cc).
int PauseTest(const std::vector<std::string>& args);

}  // namespace fencekit::fencectl
