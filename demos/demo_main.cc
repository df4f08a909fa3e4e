// fencekit-demo: Kleppmann's argument with real processes, a real pause and real storage.
//
// The parent starts `fenced` and two client processes (this same binary with --role client),
// drives them step by step, freezes client A with SIGSTOP past its lease, and records a
// timeline. See docs/tutorial.md. This file holds the command line; demo.h runs a scenario and
// client_role.h is a client process.
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "client_role.h"
#include "demo.h"
#include "fencekit/common/units.h"
#include "timeline.h"

namespace po = boost::program_options;

namespace {

bool WriteFile(const std::string& path, const std::string& content) {
  std::ofstream f(path);
  f << content;
  return static_cast<bool>(f);
}

// An installed demo finds fenced beside it (both in bin/); in the build tree, the one CMake
// built (FENCED_PATH).
std::string DefaultFenced() {
  std::error_code ec;
  auto beside = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "fenced";
  if (!ec && ::access(beside.c_str(), X_OK) == 0) return beside.string();
  return FENCED_PATH;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace fencekit;
  using namespace fencekit::demo;
  std::string role, name, locks, store, ttl_text, scenario, json_path, html_path, fenced, colour;
  po::options_description desc(
      "fencekit-demo: a client paused past its lease writes with a stale token; the fenced store "
      "refuses it.\n\nUsage: fencekit-demo [options]\n\nOptions");
  desc.add_options()("help,h", "print this help")("version", "print the version")(
      "scenario", po::value(&scenario)->default_value("gc-pause"),
      "gc-pause (A is frozen with SIGSTOP), slow-network (A's write is delayed in flight), "
      "lock-service-restart (Redis restarted empty: two holders), clock-jump (Redlock on 5 nodes: "
      "a node's clock jumps, two holders)")(
      "no-fencing", po::bool_switch(),
      "run the store unguarded (demonstration only) to show the lost update")(
      "locks", po::value(&locks),
      "lock service URI: sqlite:///path/locks.db, redis://host:port, redlock://h1:p1,h2:p2,h3:p3 "
      "or etcd://h1:p1[,...] (default: an embedded sqlite:// file in a temporary folder)")(
      "ttl", po::value(&ttl_text)->default_value("1s"), "lease length of the clients")(
      "json", po::value(&json_path), "write the events and the final value as JSON to FILE")(
      "html", po::value(&html_path), "write a standalone timeline page (SVG) to FILE")(
      "color", po::value(&colour)->default_value("auto"), "auto, always or never")(
      "fenced", po::value(&fenced)->default_value(DefaultFenced()),
      "path of the fenced binary (default: next to this program when installed, else the one "
      "built beside it)")("role", po::value(&role), "internal: 'client' runs one client process")(
      "name", po::value(&name), "internal: client name")("store", po::value(&store),
                                                         "internal: store URL for a client")(
      "sequential", po::bool_switch(), "internal: the client asks Redlock nodes one at a time");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const std::exception& e) {
    std::cerr << "fencekit-demo: " << e.what() << "; see --help\n";
    return 1;
  }
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  if (vm.count("version")) {
    std::cout << "fencekit-demo " << FENCEKIT_VERSION << "\n";
    return 0;
  }
  auto ttl = ParseDuration(ttl_text);
  if (!ttl.ok()) {
    std::cerr << "fencekit-demo: " << ttl.status().message() << "\n";
    return 1;
  }
  if (role == "client") return RunClient(name, locks, store, *ttl, vm["sequential"].as<bool>());

  bool fencing = !vm["no-fencing"].as<bool>();
  Demo demo(scenario, locks, fencing, *ttl, fenced);
  std::string error = demo.Run();
  if (!error.empty()) {
    std::cerr << "fencekit-demo: " << error << "\n";
    return 2;
  }
  const Timeline& t = demo.timeline();
  bool use_colour =
      colour == "always" || (colour == "auto" && isatty(1) && !std::getenv("NO_COLOR"));
  std::cout << "Scenario " << t.scenario << ", fencing " << (fencing ? "on" : "OFF") << "\n\n"
            << RenderTerminal(t, use_colour);
  if (!json_path.empty() && !WriteFile(json_path, RenderJson(t))) {
    std::cerr << "fencekit-demo: cannot write " << json_path << "\n";
    return 1;
  }
  if (!html_path.empty()) {
    if (!WriteFile(html_path, RenderHtml(t))) {
      std::cerr << "fencekit-demo: cannot write " << html_path << "\n";
      return 1;
    }
    std::cout << "timeline written to " << html_path << "\n";
  }
  return t.lesson_shown ? 0 : 1;
}
