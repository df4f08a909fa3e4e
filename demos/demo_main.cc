// fencekit-demo: Kleppmann's argument with real processes, a real pause and real storage.
//
// The parent starts `fenced` and two client processes (this same binary with --role client),
// drives them step by step, freezes client A with SIGSTOP past its lease, and records a
// timeline. See docs/tutorial.md.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/program_options.hpp>
#include <condition_variable>
#include <fstream>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <thread>

#include "fencekit/common/units.h"
#include "fencekit/httpapi/store_client.h"
#include "fencekit/fencing/fenced_writes.h"
#include "fencekit/lockclient/lock_client.h"
#include "fencekit/procutil/child_process.h"
#include "fencekit/procutil/fenced_server.h"
#include "fencekit/procutil/redis_server.h"
#include "timeline.h"

namespace po = boost::program_options;
namespace json = boost::json;
using namespace std::chrono_literals;

namespace fencekit::demo {
namespace {

constexpr const char* kLock = "demo-lock";
constexpr const char* kKey = "shared-record";

// ---------------------------------------------------------------------------------------------
// The client role: reads one command per line on stdin, answers one JSON line on stdout.

void Reply(const json::object& o) { std::cout << json::serialize(o) << std::endl; }

int RunClient(const std::string& name, const std::string& locks, const std::string& store_url,
              std::chrono::milliseconds ttl, bool sequential) {
  auto client = LockClient::Open(locks, {.ttl = ttl, .redlock_sequential = sequential});
  auto store = StoreClient::Open(store_url, {.timeout = 30s});
  if (!client.ok() || !store.ok()) {
    Reply({{"ok", false},
           {"message", !client.ok() ? client.status().message() : store.status().message()}});
    return 1;
  }
  std::unique_ptr<HeldLock> held;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "acquire") {
      auto lease = (*client)->Acquire(kLock, std::chrono::steady_clock::now() + 30s);
      if (!lease.ok()) {
        Reply({{"ok", false}, {"message", lease.status().message()}});
        continue;
      }
      // No auto-renewal: a stop-the-world pause freezes a renewal thread too.
      held = std::make_unique<HeldLock>(**client, *lease, HeldLock::Options{});
      Reply({{"ok", true}, {"token", lease->token.value()}, {"owner", lease->owner}});
    } else if (line.starts_with("write ")) {
      if (!held) {
        Reply({{"ok", false}, {"message", "no lease"}});
        continue;
      }
      // The client still believes it holds the lock: it writes with the token it has.
      auto r = FencedPut(**store, *held, kKey, line.substr(6));
      json::object o{
          {"ok", r.ok()}, {"token", held->lease().token.value()}, {"lease_lost", held->lost()}};
      if (!r.ok()) {
        o["stale"] = r.status().IsStaleToken();
        o["highest"] = r.status().highest_token().value_or(0);
        o["message"] = r.status().message();
      }
      Reply(o);
    } else if (line == "read") {
      auto r = (*store)->Get(kKey);
      Reply({{"ok", r.ok()},
             {"value", r.ok() ? r->value : ""},
             {"token", r.ok() ? r->token.value() : 0}});
    } else if (line == "exit") {
      break;
    }
  }
  if (held) (void)held->Release();
  return 0;
}

// ---------------------------------------------------------------------------------------------
// The parent: processes, a delaying proxy, and the scenarios.

// A client process (this binary with --role client): one command per line on its stdin, one
// JSON answer per line on its stdout.
class Client {
 public:
  explicit Client(const std::vector<std::string>& argv)
      : started_(process_.Start({.argv = argv, .pipe_stdio = true})) {}
  void Send(const std::string& line) { process_.Send(line); }
  json::object Ask(const std::string& line) {
    Send(line);
    return Answer();
  }
  json::object Answer() {
    if (!started_.ok()) return json::object{{"ok", false}, {"message", started_.message()}};
    boost::system::error_code ec;
    auto v = json::parse(process_.ReadLine().value_or(""), ec);
    if (ec || !v.is_object()) return json::object{{"ok", false}, {"message", "client died"}};
    return v.as_object();
  }
  void Stop() {
    if (process_.pid() > 0) {
      Send("exit");
      process_.Wait();
    }
  }
  void Signal(int sig) { process_.Signal(sig); }

 private:
  procutil::ChildProcess process_;
  Status started_;
};

// Holds every connection it accepts until Release(), then forwards bytes both ways: a network
// that delays a request in flight.
class DelayProxy {
 public:
  explicit DelayProxy(std::uint16_t target) : target_(target) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    listen(listener_, 16);
    socklen_t len = sizeof addr;
    getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~DelayProxy() {
    Release();
    shutdown(listener_, SHUT_RDWR);
    close(listener_);
    if (thread_.joinable()) thread_.join();
  }
  std::uint16_t port() const { return port_; }
  void Release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  void Serve() {
    int client = accept(listener_, nullptr, nullptr);
    if (client < 0) return;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return released_; });
    }
    int server = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(target_);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      char buf[65536];
      bool open = true;
      while (open && poll(fds, 2, 30'000) > 0) {
        for (int i = 0; i < 2 && open; ++i) {
          if (fds[i].revents == 0) continue;
          ssize_t n = recv(fds[i].fd, buf, sizeof buf, 0);
          if (n <= 0 || send(fds[1 - i].fd, buf, static_cast<std::size_t>(n), MSG_NOSIGNAL) != n) {
            open = false;
          }
        }
      }
    }
    close(server);
    close(client);
  }

  std::uint16_t target_;
  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
};

class Demo {
 public:
  Demo(std::string scenario, std::string locks, bool fencing, std::chrono::milliseconds ttl,
       std::string fenced_path)
      : locks_(std::move(locks)), ttl_(ttl), fenced_path_(std::move(fenced_path)) {
    timeline_.scenario = std::move(scenario);
    timeline_.fencing = fencing;
    char tmpl[] = "/tmp/fencekit-demo-XXXXXX";
    dir_ = mkdtemp(tmpl);
    start_ = std::chrono::steady_clock::now();
  }
  ~Demo() {
    fenced_.Kill();
    redis_.clear();
    std::string cmd = "rm -rf '" + dir_ + "'";
    if (std::system(cmd.c_str()) != 0) std::cerr << "could not remove " << dir_ << "\n";
  }

  // Returns an error message, or "" when the scenario ran (the timeline says what it showed).
  std::string Run() {
    if (timeline_.scenario == "lock-service-restart") {
      if (auto err = StartRedis(1); !err.empty()) return err;
    } else if (timeline_.scenario == "clock-jump") {
      if (auto err = StartRedis(5); !err.empty()) return err;
    } else if (locks_.empty()) {
      locks_ = "sqlite://" + dir_ + "/locks.db";
    }
    if (auto err = StartFenced(); !err.empty()) return err;
    auto observer = LockClient::Open(locks_, {.ttl = ttl_});
    if (!observer.ok()) return observer.status().message();
    observer_ = std::move(observer).value();
    if (timeline_.scenario == "gc-pause") return GcPause(false);
    if (timeline_.scenario == "slow-network") return GcPause(true);
    if (timeline_.scenario == "lock-service-restart") return LockServiceRestart();
    if (timeline_.scenario == "clock-jump") return ClockJump();
    return "unknown scenario \"" + timeline_.scenario +
           "\"; use gc-pause, slow-network, lock-service-restart or clock-jump";
  }

  const Timeline& timeline() const { return timeline_; }

 private:
  std::int64_t Now() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start_)
        .count();
  }
  void Log(const std::string& actor, const std::string& event, std::optional<std::int64_t> token,
           const std::string& status, Kind kind, const std::string& holder = "") {
    timeline_.events.push_back({Now(), actor, event, token, status, kind, holder});
  }

  std::string StartFenced() {
    procutil::FencedOptions o{
        .binary = fenced_path_, .db = dir_ + "/store.db", .log_path = dir_ + "/fenced.log"};
    if (!timeline_.fencing) o.args.push_back("--no-fencing");
    if (Status s = fenced_.Start(o); !s.ok()) {
      return "fenced did not start (" + fenced_path_ + "): " + s.message();
    }
    store_url_ = fenced_.url();
    store_port_ = fenced_.port();
    return "";
  }

  // Starts `n` redis-server nodes on free loopback ports.
  std::string StartRedis(int n) {
    if (!locks_.empty() && !locks_.starts_with("redis://") && !locks_.starts_with("redlock://")) {
      return "the " + timeline_.scenario +
             " scenario starts its own redis-server nodes; leave "
             "out --locks";
    }
    for (int i = 0; i < n; ++i) {
      redis_.push_back(std::make_unique<procutil::RedisServer>());
      Status s = redis_.back()->Start({.log_path = dir_ + "/redis-" + std::to_string(i) + ".log"});
      if (!s.ok()) return RedisError(s);
    }
    if (n == 1) {
      locks_ = redis_[0]->uri();
    } else {
      locks_ = "redlock://";
      for (int i = 0; i < n; ++i) {
        locks_ += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(redis_[i]->port());
      }
    }
    return "";
  }

  // Kills node `i` and starts it again, empty, on the same port.
  std::string RestartRedis(std::size_t i) {
    Status s = redis_[i]->Restart();
    return s.ok() ? "" : RedisError(s);
  }

  static std::string RedisError(const Status& s) {
    return "redis-server could not be started (install Debian's redis-server; ./scripts/demo "
           "does): " +
           s.message();
  }

  std::unique_ptr<Client> StartClient(const std::string& name, const std::string& store_url,
                                     bool sequential = false) {
    std::vector<std::string> argv = {"/proc/self/exe",
                                     "--role",
                                     "client",
                                     "--name",
                                     name,
                                     "--locks",
                                     locks_,
                                     "--store",
                                     store_url,
                                     "--ttl",
                                     std::to_string(ttl_.count()) + "ms"};
    if (sequential) argv.push_back("--sequential");
    return std::make_unique<Client>(argv);
  }

  bool Acquire(Client& c, const std::string& name, std::int64_t& token, std::string& error) {
    auto r = c.Ask("acquire");
    if (!r["ok"].as_bool()) {
      error = name + " could not acquire: " + std::string(r["message"].as_string());
      return false;
    }
    token = r["token"].as_int64();
    Log(name, "acquires the lock", token, "", Kind::kGrant);
    Log("lock service", "grants lease to " + name, token, "", Kind::kGrant);
    return true;
  }

  // Logs a client's write answer on the client's and the store's lanes. True when accepted.
  bool LogWrite(const std::string& name, json::object r) {
    std::int64_t token = r["token"].as_int64();
    if (r["ok"].as_bool()) {
      Log("store", "accepts " + name + "'s write", token, "", Kind::kAccepted);
      Log(name, "writes", token, "accepted", Kind::kAccepted);
      return true;
    }
    if (r.contains("stale") && r["stale"].as_bool()) {
      Log("store",
          "refuses " + name + "'s write: it has seen token " +
              std::to_string(r["highest"].as_int64()),
          token, "409 Conflict", Kind::kRefused);
      Log(name, "writes", token, "refused, stale token", Kind::kRefused);
      if (r["lease_lost"].as_bool()) Log(name, "learns its lease is lost", token, "", Kind::kLost);
    } else {
      Log(name, "write failed", token, std::string(r["message"].as_string()), Kind::kNote);
    }
    return false;
  }

  // Waits (watching the lock service) until `token`'s lease is gone.
  void WaitForExpiry(const std::string& holder, std::int64_t token) {
    auto deadline = std::chrono::steady_clock::now() + ttl_ * 3 + 5s;
    while (std::chrono::steady_clock::now() < deadline) {
      auto info = observer_->Inspect(kLock);
      if (info.ok() && (!info->held || info->token->value() != token)) break;
      std::this_thread::sleep_for(5ms);
    }
    Log("lock service", "lease of " + holder + " expires", token, "", Kind::kExpire, holder);
  }

  std::string FinalRead() {
    auto store = StoreClient::Open(store_url_);
    if (!store.ok()) return store.status().message();
    auto r = (*store)->Get(kKey);
    if (!r.ok()) return r.status().message();
    timeline_.final_value = r->value;
    Log("store", "final value: \"" + r->value + "\"", r->token.value(), "", Kind::kRead);
    return "";
  }

  // gc-pause: A is frozen (SIGSTOP) past its lease. slow-network: A's write is delayed in flight.
  std::string GcPause(bool slow_network) {
    std::unique_ptr<DelayProxy> proxy;
    if (slow_network) proxy = std::make_unique<DelayProxy>(store_port_);
    auto a = StartClient(
        "A", slow_network ? "http://127.0.0.1:" + std::to_string(proxy->port()) : store_url_);
    auto b = StartClient("B", store_url_);
    std::string error;
    std::int64_t ta = 0, tb = 0;
    if (!Acquire(*a, "A", ta, error)) return error;
    Log("A", "begins its work (read-modify-write)", ta, "", Kind::kNote);
    const std::string a_value = "A's update (token " + std::to_string(ta) + ")";
    if (slow_network) {
      a->Send("write " + a_value);  // sent now; the network holds it
      Log("A", "sends its write", ta, "delayed in the network", Kind::kSend);
    } else {
      a->Signal(SIGSTOP);
      Log("A", "stop-the-world pause (SIGSTOP)", ta, "", Kind::kPause);
    }
    WaitForExpiry("A", ta);
    if (!Acquire(*b, "B", tb, error)) return error;
    const std::string b_value = "B's update (token " + std::to_string(tb) + ")";
    LogWrite("B", b->Ask("write " + b_value));
    auto read = b->Ask("read");
    Log("B", "reads back \"" + std::string(read["value"].as_string()) + "\"", tb, "", Kind::kRead);
    b->Stop();
    bool a_accepted;
    if (slow_network) {
      proxy->Release();
      Log("A", "its delayed write arrives", ta, "", Kind::kSend);
      a_accepted = LogWrite("A", a->Answer());
    } else {
      a->Signal(SIGCONT);
      Log("A", "resumes (SIGCONT), still believes it holds the lock", ta, "", Kind::kResume);
      a_accepted = LogWrite("A", a->Ask("write " + a_value));
    }
    a->Stop();
    if (auto err = FinalRead(); !err.empty()) return err;
    if (timeline_.fencing) {
      timeline_.lesson_shown = !a_accepted && timeline_.final_value == b_value && ta < tb;
      timeline_.verdict = timeline_.lesson_shown ? "stale write refused: the store kept B's value"
                                                 : "unexpected: the stale write was not refused";
    } else {
      timeline_.lesson_shown = a_accepted && timeline_.final_value == a_value;
      timeline_.verdict = timeline_.lesson_shown ? "lost update: B's write was overwritten by A"
                                                 : "unexpected: no lost update without fencing";
    }
    return "";
  }

  // Redis restarted empty: its counter restarts, two clients hold the lock at once, and the
  // store still refuses the lower token.
  std::string LockServiceRestart() {
    // Some earlier grants, so that the counter has something to lose.
    for (int i = 0; i < 4; ++i) {
      auto l = observer_->TryAcquire(kLock);
      if (l.ok()) (void)observer_->Release(*l);
    }
    auto a = StartClient("A", store_url_);
    auto b = StartClient("B", store_url_);
    std::string error;
    std::int64_t ta = 0, tb = 0;
    if (!Acquire(*a, "A", ta, error)) return error;
    LogWrite("A", a->Ask("write A's first update"));
    if (auto err = RestartRedis(0); !err.empty()) return err;
    Log("lock service", "Redis restarts empty: the lock and the counter are gone", std::nullopt, "",
        Kind::kRestart);
    if (!Acquire(*b, "B", tb, error)) return error;
    Log("lock service", "two holders at once: A and B", std::nullopt, "", Kind::kNote);
    bool b_accepted = LogWrite("B", b->Ask("write B's update"));
    bool a_accepted = LogWrite("A", a->Ask("write A's second update"));
    a->Stop();
    b->Stop();
    if (auto err = FinalRead(); !err.empty()) return err;
    if (timeline_.fencing) {
      timeline_.lesson_shown = tb < ta && !b_accepted && a_accepted;
      timeline_.verdict = timeline_.lesson_shown
                              ? "two holders at once, but the store refused the lower token (B's " +
                                    std::to_string(tb) + " < A's " + std::to_string(ta) +
                                    "): only one holder's writes reached storage"
                              : "unexpected: both holders' writes were accepted";
    } else {
      timeline_.lesson_shown = b_accepted && a_accepted;
      timeline_.verdict = timeline_.lesson_shown
                              ? "lost update: both holders wrote; B's write was overwritten by A"
                              : "unexpected: a write was refused without fencing";
    }
    return "";
  }

  // Redlock on 5 nodes (Kleppmann's example): A reaches only nodes 1-3 (it asks one node after
  // another and stops at a majority), the clock of node 3 jumps forward so A's key there expires
  // early, and B wins nodes 3-5. Two holders; the store refuses the older token.
  std::string ClockJump() {
    auto a = StartClient("A", store_url_, /*sequential=*/true);
    auto b = StartClient("B", store_url_);
    std::string error;
    std::int64_t ta = 0, tb = 0;
    if (!Acquire(*a, "A", ta, error)) return error;
    Log("lock service", "A holds nodes 1, 2, 3 (a majority of 5)", ta, "", Kind::kNote);
    std::string cmd = "redis-cli -p " + std::to_string(redis_[2]->port()) + " DEL 'fencekit:{" +
                      std::string(kLock) + "}:lock' >/dev/null";
    if (std::system(cmd.c_str()) != 0) return "redis-cli failed (install redis-tools)";
    Log("lock service", "clock of node 3 jumps forward: A's key there expires early", ta, "",
        Kind::kExpire, "");
    if (!Acquire(*b, "B", tb, error)) return error;
    Log("lock service", "B holds nodes 3, 4, 5: two holders at once", tb, "", Kind::kNote);
    bool b_accepted = LogWrite("B", b->Ask("write B's update (token " + std::to_string(tb) + ")"));
    bool a_accepted = LogWrite("A", a->Ask("write A's update (token " + std::to_string(ta) + ")"));
    a->Stop();
    b->Stop();
    if (auto err = FinalRead(); !err.empty()) return err;
    if (timeline_.fencing) {
      timeline_.lesson_shown = ta < tb && b_accepted && !a_accepted;
      timeline_.verdict = timeline_.lesson_shown
                              ? "two Redlock holders after a clock jump, but the store refused "
                                "A's older token: it kept B's value"
                              : "unexpected: the older holder's write was not refused";
    } else {
      timeline_.lesson_shown = b_accepted && a_accepted;
      timeline_.verdict = timeline_.lesson_shown
                              ? "lost update: two Redlock holders both wrote; B's write was "
                                "overwritten by A"
                              : "unexpected: a write was refused without fencing";
    }
    return "";
  }

  Timeline timeline_;
  std::string locks_;
  std::chrono::milliseconds ttl_;
  std::string fenced_path_;
  std::string dir_;
  std::string store_url_;
  std::uint16_t store_port_ = 0;
  std::vector<std::unique_ptr<procutil::RedisServer>> redis_;
  procutil::FencedServer fenced_;
  std::unique_ptr<LockClient> observer_;
  std::chrono::steady_clock::time_point start_;
};

bool WriteFile(const std::string& path, const std::string& content) {
  std::ofstream f(path);
  f << content;
  return static_cast<bool>(f);
}

}  // namespace
}  // namespace fencekit::demo

// An installed demo finds fenced beside it (both in bin/); in the build tree, the one CMake
// built (FENCED_PATH).
static std::string DefaultFenced() {
  std::error_code ec;
  auto beside = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "fenced";
  if (!ec && ::access(beside.c_str(), X_OK) == 0) return beside.string();
  return FENCED_PATH;
}

int main(int argc, char** argv) {
  using namespace fencekit;
  using namespace fencekit::demo;
  std::string role, name, locks, store, ttl_text, scenario, json_path, html_path, fenced, colour;
  po::options_description desc(
      "fencekit-demo: a client paused past its lease writes with a stale token; the fenced store "
      "refuses it.\n\nUsage: fencekit-demo [options]\n\nOptions");
  desc.add_options()("help,h", "print this help")(
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
      "built beside it)")(
      "role", po::value(&role), "internal: 'client' runs one client process")(
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
