#include "fencectl_cli.h"

#include <boost/json/serialize.hpp>
#include <cstdlib>
#include <iostream>
#include <map>

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

int FailOpen(const Status& s) { return s.IsInvalidArgument() ? FailUsage(s) : FailStatus(s); }

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
      std::cout << "Usage: " << UsageLine(command) << "\n\n" << desc << "\n";
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
  auto d = ParseDuration(vm[name].as<std::string>());
  if (d.ok()) return d;
  return Status::InvalidArgument(std::string("--") + name + ": " + d.status().message());
}

Result<FencingToken> Token(const po::variables_map& vm, const char* name) {
  auto t = FencingToken::Parse(vm[name].as<std::string>());
  if (t.ok()) return t;
  return Status::InvalidArgument(std::string("--") + name + ": " + t.status().message());
}

const std::string& UsageLine(const std::string& command) {
  static const std::map<std::string, std::string> kLines = {
      {"acquire", "fencectl acquire [options] NAME"},
      {"release", "fencectl release [options] --owner ID [--token N] NAME"},
      {"extend", "fencectl extend [options] --owner ID [--token N] NAME"},
      {"inspect", "fencectl inspect [options] NAME"},
      {"check-token", "fencectl check-token [options] --token N NAME"},
      {"run", "fencectl run [options] NAME -- CMD [ARGS...]"},
      {"put", "fencectl put [options] --lock NAME --token N KEY [VALUE | -]"},
      {"get", "fencectl get [options] KEY"},
      {"delete", "fencectl delete [options] --lock NAME --token N KEY"},
      {"batch", "fencectl batch [options] [--lock NAME --token N] FILE | -"},
      {"list", "fencectl list [options]"},
      {"fence", "fencectl fence [options] LOCK"},
      {"history", "fencectl history [options]"},
      {"pause-test", "fencectl pause-test [options]"},
  };
  static const std::string kNone = "fencectl COMMAND [options]";
  auto it = kLines.find(command);
  return it == kLines.end() ? kNone : it->second;
}

}  // namespace fencekit::fencectl
