#include "fencectl_cli.h"

#include <unistd.h>

#include <boost/json/serialize.hpp>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "fencekit/common/units.h"

namespace fencekit::fencectl {

int Fail(int code, const std::string& message) {
  std::cerr << "fencectl: " << message << "\n";
  return code;
}

int FailStatus(const Status& s) {
  if (s.IsBusy() || s.IsTimeout()) return Fail(kExitBusy, s.message());
  if (s.IsStaleToken()) return Fail(kExitStale, s.message());
  if (s.IsPreconditionFailed()) return Fail(kExitPrecondition, s.message());
  return Fail(kExitError, s.message());
}

int FailUsage(const Status& s) { return Fail(kExitUsage, s.message()); }

std::string DefaultLocks() {
  if (const char* v = std::getenv("FENCEKIT_LOCKS"); v != nullptr && *v != '\0') return v;
  std::string state;
  if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg != nullptr && *xdg == '/') {
    state = xdg;
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home == '/') {
    state = std::string(home) + "/.local/state";
  } else {
    state = "/tmp/fencekit-" + std::to_string(::getuid());
  }
  std::string dir = state + "/fencekit";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);  // a failure shows when the file is opened
  return "sqlite://" + dir + "/locks.db";
}

std::string EnvOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

void Print(const boost::json::object& o) { std::cout << boost::json::serialize(o) << std::endl; }

Result<Parsed> Parse(const std::string& command, po::options_description& desc,
                     const po::positional_options_description& positional,
                     const std::vector<std::string>& args) {
  desc.add_options()("help,h", "show this command's options");
  Parsed p;
  try {
    po::store(po::command_line_parser(args).options(desc).positional(positional).run(), p.vm);
    if (p.vm.count("help")) {
      std::cout << "fencectl " << command << "\n" << desc << "\n";
      p.help = true;
      return p;
    }
    po::notify(p.vm);
  } catch (const po::required_option& e) {
    std::string name = e.get_option_name();  // "--name", "--owner", ...
    if (name == "--name" || name == "--key") {
      return Status::InvalidArgument("no " + name.substr(2) + " given; see fencectl " + command +
                                     " --help");
    }
    return Status::InvalidArgument(name + " is required; see fencectl " + command + " --help");
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string(e.what()) + "; see fencectl " + command + " --help");
  }
  return p;
}

Result<std::chrono::milliseconds> Duration(const po::variables_map& vm, const char* name) {
  return ParseDuration(vm[name].as<std::string>());
}

}  // namespace fencekit::fencectl
