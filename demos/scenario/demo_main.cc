// fencekit-demo: Kleppmann's argument with real processes, a real pause and real storage.
//
// The parent starts `fenced` and two client processes (this same binary with --role client),
// drives them step by step, freezes client A with SIGSTOP past its lease, and records a
// timeline. See docs/tutorial.md. This file holds the command line; demo.h runs a scenario and
// client_role.h is a client process.
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "scenario/client_role.h"
#include "scenario/demo.h"
#include "fencekit/common/units.h"
#include "live/live_page.h"
#include "scenario/timeline_names.h"

namespace po = boost::program_options;

namespace {

bool WriteFile(const std::string& path, const std::string& content) {
  std::ofstream f(path);
  f << content;
  return static_cast<bool>(f);
}

// --serve waits for Ctrl-C (or SIGTERM): the handler writes to a pipe that the waits poll.
int stop_pipe[2] = {-1, -1};

void OnStopSignal(int) {
  char c = 0;
  (void)!::write(stop_pipe[1], &c, 1);
}

void CatchStopSignals() {
  if (::pipe(stop_pipe) != 0) return;
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

// True once a stop signal came; waits up to `timeout` for one (-1: forever).
bool StopRequested(int timeout_ms) {
  pollfd p{stop_pipe[0], POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) > 0;
}

// --serve, before the scenario: where to watch, then wait until a page is open (the demo's, or
// fenced's own).
bool WaitForViewer(fencekit::demo::Demo& demo, fencekit::demo::LivePage& page,
                   const std::string& url, bool fencing) {
  std::cout << "Open " << page.url()
            << " in a browser to watch the story as it happens: the clients, the lock service,\n"
               "the pause and the store. fenced (the store) listens at "
            << url << "; its own page: " << url
            << "/ui.\nThe scenario starts once a page is open (Ctrl-C stops).\n"
            << (fencing ? ""
                        : "Fencing is OFF in this run (--no-fencing): this fenced accepts every "
                          "token, so the stale write will land.\n")
            << std::flush;
  while (page.viewers() < 1 && demo.Viewers() < 1) {
    if (StopRequested(100)) return false;
  }
  page.Begin();
  std::cout << "A page is watching: the scenario starts.\n\n" << std::flush;
  return true;
}

// --serve, after the scenario: how to make one's own writes (and what fenced will answer),
// then wait for Ctrl-C.
void KeepServing(const fencekit::demo::Timeline& t, const std::string& url, bool fencing) {
  std::int64_t highest = 0;
  for (const auto& e : t.events) highest = std::max(highest, e.token.value_or(0));
  const std::string put = "curl -i -X PUT -H 'Fencing-Lock: " +
                          std::string(fencekit::demo::kLock) + "' --data mine " + url +
                          "/v1/objects/" + fencekit::demo::kKey + " -H 'Fencing-Token: ";
  std::cout << "\nfenced keeps running at " << url << " (its page: " << url << "/ui). ";
  if (fencing) {
    std::cout << "Make your own writes and watch them land or bounce:\n  " << put << highest + 5
              << "'   # accepted: at least the highest token so far (" << highest << ")\n  " << put
              << 1 << "'   # refused: below it (409 stale_token)\n";
  } else {
    std::cout << "It runs with --no-fencing, so every write lands, whatever its token:\n  " << put
              << highest + 5 << "'   # accepted\n  " << put << 1
              << "'   # accepted too: fencing is off (with fencing: 409 stale_token)\n";
  }
  std::cout << "Ctrl-C stops it.\n" << std::flush;
  StopRequested(-1);
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
  std::string role, name, locks, store, ttl_text, scenario, json_path, html_path, svg_path, fenced,
      colour;
  po::options_description desc(
      "fencekit-demo: a client paused past its lease writes with a stale token; the fenced store "
      "refuses it.\n\nUsage: fencekit-demo [options]\n\nOptions");
  desc.add_options()("help,h", "print this help")("version", "print the version")(
      "scenario", po::value(&scenario)->default_value("gc-pause"),
      "gc-pause (A is frozen with SIGSTOP before it writes), slow-network (A's write is held in "
      "the network by a delaying proxy), lock-service-restart (Redis restarted without its "
      "data: two holders), clock-jump (Redlock on 5 nodes: A's key on node 3 deleted as a clock "
      "jump would expire it, two holders), check-then-write (a store that checks the token, "
      "then writes, in two steps)")(
      "no-fencing", po::bool_switch(),
      "the control arm: run the store unguarded (demonstration only) to show the lost update; "
      "in check-then-write, a store with no check at all")(
      "locks", po::value(&locks),
      "lock service URI: sqlite:///path/locks.db, redis://host:port, redlock://h1:p1,h2:p2,h3:p3, "
      "etcd://h1:p1[,...] or zk://h1:p1[,...] (default: an embedded sqlite:// file in a temporary "
      "folder). lock-service-restart and clock-jump start their own Redis and refuse it")(
      "ttl", po::value(&ttl_text)->default_value("1s"), "lease length of the clients")(
      "json", po::value(&json_path), "write the events and the final value as JSON to FILE")(
      "html", po::value(&html_path), "write a standalone timeline page (SVG) to FILE")(
      "svg", po::value(&svg_path),
      "write the timeline alone as an SVG file with large type, for slides, to FILE")(
      "color", po::value(&colour)->default_value("auto"), "auto, always or never")(
      "serve", po::bool_switch(),
      "watch it live: serve a page on 127.0.0.1 that tells the story as it happens (the clients, "
      "the lock service, the pause, the store), start the scenario once it is open, then keep "
      "fenced running so that you can make your own writes with curl and see them there "
      "(Ctrl-C stops)")(
      "fenced", po::value(&fenced)->default_value(DefaultFenced()),
      "path of the fenced binary (default: next to this program when installed, else the one "
      "built beside it)")("role", po::value(&role), "internal: 'client' runs one client process")(
      "name", po::value(&name), "internal: client name")("store", po::value(&store),
                                                         "internal: store URL for a client")(
      "sequential", po::bool_switch(), "internal: the client asks Redlock nodes one at a time")(
      "two-step", po::bool_switch(), "internal: the client checks its token apart from its write");
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
  if (role == "client") {
    return RunClient({.name = name,
                      .locks = locks,
                      .store_url = store,
                      .ttl = *ttl,
                      .sequential = vm["sequential"].as<bool>(),
                      .two_step = vm["two-step"].as<bool>()});
  }
  if (!IsScenario(scenario)) {
    std::cerr << "fencekit-demo: unknown scenario \"" << scenario << "\"; use "
              << ScenarioNames() << "\n";
    return 2;
  }

  bool fencing = !vm["no-fencing"].as<bool>();
  const bool serve = vm["serve"].as<bool>();
  Demo demo(scenario, locks, fencing, *ttl, fenced);
  std::unique_ptr<LivePage> page;
  if (serve) {
    // check-then-write's store does not fence (its check is apart from the write).
    auto started = LivePage::Start(scenario, fencing && scenario != "check-then-write", *ttl, 0,
                                   ScenarioLanes(scenario, fencing));
    if (!started.ok()) {
      std::cerr << "fencekit-demo: " << started.status().message() << "\n";
      return 2;
    }
    page = std::move(started).value();
    CatchStopSignals();
    demo.set_before_scenario(
        [&demo, &page, fencing](const std::string& url) {
          return WaitForViewer(demo, *page, url, fencing);
        });
    demo.set_on_event([&page](const Event& e) { page->Add(e); });
  }
  std::string error = demo.Run();
  if (!error.empty()) {
    std::cerr << "fencekit-demo: " << error << "\n";
    return 2;
  }
  const Timeline& t = demo.timeline();
  bool use_colour =
      colour == "always" || (colour == "auto" && isatty(1) && !std::getenv("NO_COLOR"));
  std::cout << demo.Headline() << "\n\n" << RenderTerminal(t, use_colour);
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
  if (!svg_path.empty()) {
    if (!WriteFile(svg_path, timeline::RenderSvg(t))) {
      std::cerr << "fencekit-demo: cannot write " << svg_path << "\n";
      return 1;
    }
    std::cout << "timeline (SVG, for slides) written to " << svg_path << "\n";
  }
  if (serve) {
    using namespace std::chrono_literals;
    if (page->Finish(t, demo.store_url(), demo.store_port(), 10s)) {
      std::cout << "\nThe page (" << page->url() << ") shows your writes too, on the store's lane.";
    }
    KeepServing(t, demo.store_url(), t.fencing);
  }
  return t.lesson_shown ? 0 : 1;
}
