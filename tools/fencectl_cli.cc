#include "fencectl_cli.h"

#include <boost/json/serialize.hpp>
#include <cstdlib>
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
  return Fail(kExitError, s.message());
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
  if (p.vm.count("help")) {
    std::cout << "fencectl " << command << "\n" << desc << "\n";
    p.help = true;
  }
  return p;
}

Result<std::chrono::milliseconds> Duration(const po::variables_map& vm, const char* name) {
  return ParseDuration(vm[name].as<std::string>());
}

}  // namespace fencekit::fencectl
