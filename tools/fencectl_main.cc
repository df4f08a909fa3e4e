// fencectl: locks with fencing tokens, and fenced writes, from a shell. See docs/lock-client.md.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/program_options.hpp>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>

#include "fencectl_cli.h"
#include "fencekit/common/text.h"
#include "fencekit/common/units.h"
#include "fencekit/httpapi/store_client.h"
#include "fencekit/lockclient/lock_client.h"

namespace po = boost::program_options;
namespace json = boost::json;
using namespace fencekit;
using namespace fencekit::fencectl;

namespace {

constexpr const char* kUsage =
    R"(fencectl: locks with fencing tokens, and fenced writes, from a shell.

Usage:
  fencectl acquire [--locks URI] [--ttl 10s] [--wait 0s] NAME
  fencectl release [--locks URI] --owner ID [--token N] NAME
  fencectl extend  [--locks URI] --owner ID [--token N] [--ttl 10s] NAME
  fencectl inspect [--locks URI] NAME
  fencectl check-token [--locks URI] --token N NAME
  fencectl run     [--locks URI] [--ttl 10s] [-w 0 | -n] [-E 2] [--on-loss term|warn]
                   [--kill-grace 5s] NAME -- CMD [ARGS...]
  fencectl put     [--store URL] --lock NAME --token N [--service ID]
                   [--if-version N | --if-absent] KEY [VALUE | -]
  fencectl get     [--store URL] [--raw] KEY
  fencectl delete  [--store URL] --lock NAME --token N [--service ID] [--if-version N] KEY
  fencectl batch   [--store URL] [--lock NAME --token N] [--service ID] FILE | -
  fencectl list    [--store URL] [--prefix P] [--after KEY] [--limit 100] [--all]
  fencectl fence   [--store URL] [--set N [--unbind-service]] LOCK
  fencectl history [--store URL] [--limit 100]
  fencectl pause-test [--runs 50] [--locks URI] [--clients 3] [--seed 1] [--no-fencing] [...]

Options may come before the command too: fencectl --locks URI acquire NAME.
Durations, in every flag: seconds (10, 1.5) or a number with ms, s, m or h (500ms, 2m).

Lock service URIs (--locks):
  sqlite:///path/locks.db              one machine; the default is one file per user:
                                       $FENCEKIT_LOCKS, else $XDG_STATE_HOME/fencekit/locks.db
                                       (~/.local/state/fencekit/locks.db)
  redis://[:password@]host:port[/db]   one Redis node
  redlock://h1:p1,h2:p2,h3:p3          Redlock over independent Redis nodes
  etcd://h1:p1[,h2:p2,...]             an etcd cluster (its gRPC gateway)
  etcds://h1:p1[,...]?cacert=FILE      the same over HTTPS, verified with that CA (default: the
                                       system's); &cert=FILE&key=FILE for a client certificate
  etcd[s]://user:password@h1:p1,...    as an etcd user (percent-encode / ? # @ : in a password)
  etcd[s]://...?prefix=app/locks/      keys under that prefix (default fencekit/): the one
                                       an etcd user's role must grant readwrite on
--store defaults to $FENCEKIT_STORE, else http://127.0.0.1:8080 (https:// URLs too); the
store commands take --token-file FILE (default: the token in $FENCEKIT_STORE_TOKEN) and
--ca-file FILE (for https; default: the system's certificate authorities)
--service defaults to $FENCING_SERVICE (set by fencectl run), else none is sent.
Exit codes: 0 success; 1 error; 2 lock busy or wait timed out (run: -E CODE); 3 write refused
as stale, or check-token: the token is not the current holder's; 4 pause-test: the expectation
failed (see docs/testing-with-pauses.md); 5 run: the lease was lost while the command ran
(whatever the command returned); 6 put, delete, batch: a version precondition failed; 64 usage
error. run otherwise exits with the command's code.

Examples:
  fencectl acquire --ttl 30s backup
  fencectl run -w 2 -E 7 nightly-report -- ./report.sh
  fencectl put --lock backup --token 12 config/primary db-1
Results are JSON on stdout; errors are one line on stderr.
Run 'fencectl COMMAND --help' for a command's options.
)";

Result<std::unique_ptr<LockClient>> OpenLocks(const po::variables_map& vm,
                                              std::chrono::milliseconds ttl) {
  LockOptions options;
  options.ttl = ttl;
  return LockClient::Open(vm["locks"].as<std::string>(), options);
}

void AddLockOptions(po::options_description& desc) {
  desc.add_options()("locks", po::value<std::string>()->default_value(DefaultLockUri()),
                     "lock service URI: sqlite:///path/locks.db, redis://host:port[/db], "
                     "redlock://h1:p1,h2:p2,h3:p3, etcd://h1:p1[,h2:p2,...] or "
                     "etcds://[user:password@]h1:p1[,...]?cacert=FILE[&prefix=P]")(
      "name", po::value<std::string>()->required(), "lock name");
}

json::object LeaseJson(const Lease& lease) {
  json::object o;
  PutName(o, "lock", lease.lock);
  o["owner"] = lease.owner;
  o["token"] = lease.token.value();
  o["ttl_ms"] = lease.ttl.count();
  if (!lease.service.empty()) o["service"] = lease.service;
  return o;
}

struct Granted {
  std::unique_ptr<LockClient> client;
  Lease lease;
};

// Opens the lock service and acquires lock NAME for --ttl, waiting up to --wait (0s: one
// attempt): what acquire and run share.
Result<Granted> AcquireFromOptions(const po::variables_map& vm) {
  auto ttl = Duration(vm, "ttl");
  if (!ttl.ok()) return ttl.status();
  auto wait = Duration(vm, "wait");
  if (!wait.ok()) return wait.status();
  auto client = OpenLocks(vm, *ttl);
  if (!client.ok()) return client.status();
  const auto& name = vm["name"].as<std::string>();
  auto lease = wait->count() == 0
                   ? (*client)->TryAcquire(name, *ttl)
                   : (*client)->Acquire(name, std::chrono::steady_clock::now() + *wait, *ttl);
  if (!lease.ok()) return lease.status();
  return Granted{std::move(client).value(), std::move(lease).value()};
}

int Acquire(const std::vector<std::string>& args) {
  po::options_description desc("Options");
  AddLockOptions(desc);
  desc.add_options()("ttl", po::value<std::string>()->default_value("10s"), "lease length")(
      "wait", po::value<std::string>()->default_value("0s"),
      "how long to wait while the lock is held (0s: one attempt)");
  po::positional_options_description pos;
  pos.add("name", 1);
  auto p = Parse("acquire", desc, pos, args);
  if (!p.ok()) return FailUsage(p.status());
  if (p->help) return kExitOk;
  for (const char* d : {"ttl", "wait"}) {
    if (auto v = Duration(p->vm, d); !v.ok()) return FailUsage(v.status());
  }
  auto granted = AcquireFromOptions(p->vm);
  if (!granted.ok()) return FailOpen(granted.status());
  json::object o = LeaseJson(granted->lease);
  o["locks"] = LockUriWithoutPassword(p->vm["locks"].as<std::string>());
  Print(o);
  return kExitOk;
}

// Rebuilds the lease of `owner` from --token, or from the service when --token is absent.
Result<Lease> LeaseOf(LockClient& client, const po::variables_map& vm) {
  Lease lease;
  lease.lock = vm["name"].as<std::string>();
  lease.owner = vm["owner"].as<std::string>();
  if (vm.count("token")) {
    lease.token = *Token(vm, "token");  // checked by the caller
    return lease;
  }
  auto info = client.Inspect(lease.lock);
  if (!info.ok()) return info.status();
  if (info->held && info->owner == lease.owner && info->token) {
    lease.token = *info->token;
    return lease;
  }
  if (info->held || !info->last_token) {
    return Status::NotHeld("lock \"" + lease.lock + "\" on " + client.service() +
                           " is not held by owner " + lease.owner +
                           (info->held ? " (another owner holds it)" : " (it was never granted)"));
  }
  // Not held: the last lease granted may be this owner's, released or expired. The service
  // tells which when asked to release (or extend) it: "already released", or not held.
  lease.token = *info->last_token;
  return lease;
}

int ReleaseOrExtend(const std::string& command, const std::vector<std::string>& args) {
  bool extend = command == "extend";
  po::options_description desc("Options");
  AddLockOptions(desc);
  desc.add_options()("owner", po::value<std::string>()->required(), "owner id printed by acquire")(
      "token", po::value<std::string>(), "token printed by acquire (looked up when omitted)");
  if (extend) {
    desc.add_options()("ttl", po::value<std::string>()->default_value("10s"), "new lease length");
  }
  po::positional_options_description pos;
  pos.add("name", 1);
  auto p = Parse(command, desc, pos, args);
  if (!p.ok()) return FailUsage(p.status());
  if (p->help) return kExitOk;
  std::chrono::milliseconds ttl(10'000);
  if (extend) {
    auto t = Duration(p->vm, "ttl");
    if (!t.ok()) return FailUsage(t.status());
    ttl = *t;
  }
  if (p->vm.count("token")) {
    if (auto t = Token(p->vm, "token"); !t.ok()) return FailUsage(t.status());
  }
  auto client = OpenLocks(p->vm, ttl);
  if (!client.ok()) return FailOpen(client.status());
  auto lease = LeaseOf(**client, p->vm);
  if (!lease.ok()) return FailStatus(lease.status());
  Status s = extend ? (*client)->Extend(*lease, ttl) : (*client)->Release(*lease);
  if (!s.ok()) return FailStatus(s);
  json::object o = LeaseJson(*lease);
  if (!extend) o.erase("ttl_ms");
  o[extend ? "extended" : "released"] = true;
  Print(o);
  return kExitOk;
}

int Inspect(const std::vector<std::string>& args) {
  po::options_description desc("Options");
  AddLockOptions(desc);
  po::positional_options_description pos;
  pos.add("name", 1);
  auto p = Parse("inspect", desc, pos, args);
  if (!p.ok()) return FailUsage(p.status());
  if (p->help) return kExitOk;
  auto client = OpenLocks(p->vm, std::chrono::seconds(10));
  if (!client.ok()) return FailOpen(client.status());
  auto info = (*client)->Inspect(p->vm["name"].as<std::string>());
  if (!info.ok()) return FailStatus(info.status());
  json::object o;
  PutName(o, "lock", info->lock);
  o["held"] = info->held;
  if (info->held) {
    o["owner"] = info->owner;
    o["token"] = info->token ? info->token->value() : 0;
    o["remaining_ms"] = info->remaining.count();
  }
  o["last_token"] = info->last_token ? info->last_token->value() : 0;
  Print(o);
  return kExitOk;
}

// Asks the lock service whether --token is the current holder's: exit 0 if so, 3 if not.
int CheckToken(const std::vector<std::string>& args) {
  po::options_description desc("Options");
  AddLockOptions(desc);
  desc.add_options()("token", po::value<std::string>()->required(), "the fencing token to check");
  po::positional_options_description pos;
  pos.add("name", 1);
  auto p = Parse("check-token", desc, pos, args);
  if (!p.ok()) return FailUsage(p.status());
  if (p->help) return kExitOk;
  auto token = Token(p->vm, "token");
  if (!token.ok()) return FailUsage(token.status());
  auto client = OpenLocks(p->vm, std::chrono::seconds(10));
  if (!client.ok()) return FailOpen(client.status());
  const std::string name = p->vm["name"].as<std::string>();
  auto check = (*client)->CheckToken(name, *token);
  if (!check.ok()) return FailStatus(check.status());
  json::object o;
  PutName(o, "lock", name);
  o["token"] = token->value();
  o["current"] = check->current;
  if (check->holder) o["holder"] = check->holder->value();
  o["service"] = check->service;
  Print(o);
  return check->current ? kExitOk : kExitStale;
}

// The command's process group (its pid), while it runs; signals to fencectl go to all of it.
std::atomic<pid_t> g_group{0};

void ForwardSignal(int sig) {
  pid_t group = g_group.load();
  if (group > 0) kill(-group, sig);
}

// What happens to the command when the lease is lost (--on-loss).
class LossPolicy {
 public:
  LossPolicy(bool terminate, std::chrono::milliseconds grace)
      : terminate_(terminate), grace_(grace) {}
  ~LossPolicy() {
    Exited();
    if (killer_.joinable()) killer_.join();
  }

  // From the renewal thread: the lease is gone. `term`: SIGTERM to the command's process group
  // now, SIGKILL after the grace period unless it has exited by then.
  void Lost(const Lease& lease, const Status& why) {
    std::lock_guard lock(mu_);
    if (lost_) return;
    lost_ = true;
    std::cerr << "fencectl: the lease on lock \"" << lease.lock << "\" (token "
              << lease.token.value() << ") was lost: " << why.message()
              << (terminate_ ? "; terminating the command" : "; the command goes on unprotected")
              << std::endl;
    if (!terminate_ || exited_) return;
    ForwardSignal(SIGTERM);
    killer_ = std::thread([this] {
      std::unique_lock lock(mu_);
      if (!cv_.wait_for(lock, grace_, [&] { return exited_; })) {
        std::cerr << "fencectl: the command outlived --kill-grace; killing it" << std::endl;
        ForwardSignal(SIGKILL);
      }
    });
  }
  // The command has exited.
  void Exited() {
    {
      std::lock_guard lock(mu_);
      exited_ = true;
    }
    cv_.notify_all();
  }
  bool lost() {
    std::lock_guard lock(mu_);
    return lost_;
  }

 private:
  const bool terminate_;
  const std::chrono::milliseconds grace_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool lost_ = false;    // GUARDED_BY(mu_)
  bool exited_ = false;  // GUARDED_BY(mu_)
  std::thread killer_;
};

int Run(const std::vector<std::string>& args) {
  auto dashes = std::find(args.begin(), args.end(), "--");
  std::vector<std::string> own(args.begin(), dashes);
  std::vector<std::string> command(dashes == args.end() ? dashes : dashes + 1, args.end());
  po::options_description desc("Options");
  AddLockOptions(desc);
  desc.add_options()("ttl", po::value<std::string>()->default_value("10s"),
                     "lease length; renewed every ttl/3 while CMD runs")(
      "wait,w", po::value<std::string>()->default_value("0"),
      "how long to wait for the lock, in seconds (2, 0.5) or with a unit (500ms); 0: one "
      "attempt")("nonblock,n", po::bool_switch(),
                 "fail at once if the lock is held (--wait 0); not with --wait")(
      "conflict-exit-code,E", po::value<int>()->default_value(kExitBusy),
      "exit code when the lock is held (after --wait)")(
      "on-loss", po::value<std::string>()->default_value("term"),
      "when the lease is lost while CMD runs: term (SIGTERM to CMD's whole process group, then "
      "SIGKILL after --kill-grace) or warn (a line on stderr); fencectl then exits 5 either way")(
      "kill-grace", po::value<std::string>()->default_value("5s"),
      "time between SIGTERM and SIGKILL under --on-loss term")(
      "kill-on-loss", po::bool_switch(), "the same as --on-loss term (kept for old scripts)");
  po::positional_options_description pos;
  pos.add("name", 1);
  auto p = Parse("run", desc, pos, own);
  if (!p.ok()) return FailUsage(p.status());
  if (p->help) return kExitOk;
  if (command.empty()) {
    return Fail(kExitUsage, "no command given; use fencectl run NAME -- CMD [ARGS...]");
  }
  const std::string on_loss = p->vm["on-loss"].as<std::string>();
  if (on_loss != "term" && on_loss != "warn") {
    return Fail(kExitUsage, "--on-loss is term or warn, not \"" + on_loss + "\"");
  }
  auto grace = Duration(p->vm, "kill-grace");
  if (!grace.ok()) return FailUsage(grace.status());
  int conflict_code = p->vm["conflict-exit-code"].as<int>();
  if (conflict_code < 0 || conflict_code > 255) {
    return Fail(kExitUsage, "--conflict-exit-code must be 0 to 255");
  }
  auto wait = Duration(p->vm, "wait");
  if (!wait.ok()) return FailUsage(wait.status());
  if (p->vm["nonblock"].as<bool>() && !p->vm["wait"].defaulted()) {
    return Fail(kExitUsage,
                "-n (--nonblock) and -w (--wait) contradict each other: give one; "
                "see fencectl run --help");
  }
  auto ttl = Duration(p->vm, "ttl");
  if (!ttl.ok()) return FailUsage(ttl.status());
  auto client = OpenLocks(p->vm, *ttl);
  if (!client.ok()) return FailOpen(client.status());
  const auto& name = p->vm["name"].as<std::string>();
  auto granted = wait->count() == 0
                     ? (*client)->TryAcquire(name, *ttl)
                     : (*client)->Acquire(name, std::chrono::steady_clock::now() + *wait, *ttl);
  if (!granted.ok()) {
    if (granted.status().IsBusy() || granted.status().IsTimeout()) {
      return Fail(conflict_code, granted.status().message());
    }
    return FailStatus(granted.status());
  }
  const Lease& lease = *granted;

  LossPolicy policy(on_loss == "term" || p->vm["kill-on-loss"].as<bool>(), *grace);
  HeldLock held(**client, lease,
                {.auto_renew = true,
                 .on_lost = [&policy](const Lease& l, const Status& why) { policy.Lost(l, why); }});
  // Signals that arrive before the command's group exists are forwarded once it does.
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  sigprocmask(SIG_BLOCK, &block, &old);
  pid_t child = fork();
  if (child < 0) return Fail(kExitError, "fork failed");
  if (child == 0) {
    sigprocmask(SIG_SETMASK, &old, nullptr);
    setpgid(0, 0);  // its own process group, so that a loss reaches its children too
    setenv("FENCING_LOCK", lease.lock.c_str(), 1);
    setenv("FENCING_OWNER", lease.owner.c_str(), 1);
    setenv("FENCING_TOKEN", lease.token.ToString().c_str(), 1);
    setenv("FENCING_SERVICE", lease.service.c_str(), 1);
    std::vector<char*> argv;
    for (auto& a : command) argv.push_back(a.data());
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    std::cerr << "fencectl: cannot run \"" << command[0] << "\": " << strerror(errno) << "\n";
    _exit(127);
  }
  setpgid(child, child);  // both sides set it, so it is set before either relies on it
  g_group = child;
  signal(SIGINT, ForwardSignal);
  signal(SIGTERM, ForwardSignal);
  sigprocmask(SIG_SETMASK, &old, nullptr);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  policy.Exited();
  g_group = 0;
  Status released = held.Release();
  if (!released.ok() && !held.lost()) {
    std::cerr << "fencectl: releasing the lock failed: " << released.message() << "\n";
  }
  if (policy.lost() || held.lost()) return kExitLost;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return kExitError;
}

// The bearer token: the first line of --token-file, else $FENCEKIT_STORE_TOKEN, else none.
Result<std::string> StoreToken(const po::variables_map& vm) {
  if (!vm.count("token-file")) return EnvOr("FENCEKIT_STORE_TOKEN", "");
  const auto& path = vm["token-file"].as<std::string>();
  std::ifstream in(path);
  std::string token;
  if (!in || !std::getline(in, token)) {  // a file that is not there: no usage error
    return Status::NotFound("cannot read a token from --token-file \"" + path +
                            "\"; put the bearer token on its first line");
  }
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  return token;
}

Result<std::unique_ptr<StoreClient>> OpenStore(const po::variables_map& vm) {
  StoreClientOptions options;
  auto token = StoreToken(vm);
  if (!token.ok()) return token.status();
  options.bearer_token = std::move(*token);
  if (vm.count("ca-file")) options.ca_file = vm["ca-file"].as<std::string>();
  return StoreClient::Open(vm["store"].as<std::string>(), std::move(options));
}

// --store, --token-file and --ca-file; with `key`, the KEY argument too.
void AddStoreOptions(po::options_description& desc, bool key = true) {
  desc.add_options()(
      "store",
      po::value<std::string>()->default_value(EnvOr("FENCEKIT_STORE", "http://127.0.0.1:8080")),
      "fenced store URL, http:// or https://")(
      "token-file", po::value<std::string>(),
      "file whose first line is the bearer token (fenced --auth); default: the token in "
      "$FENCEKIT_STORE_TOKEN")("ca-file", po::value<std::string>(),
                               "PEM certificate authorities to trust for https (default: the "
                               "system's)");
  if (key) desc.add_options()("key", po::value<std::string>()->required(), "key");
}

// The options of a fenced write: the lease's lock, token and lock service (`required`: --lock
// and --token must be given).
void AddLeaseOptions(po::options_description& desc, bool required = true) {
  auto value = [required] {
    auto v = po::value<std::string>();
    return required ? v->required() : v;
  };
  desc.add_options()("lock", value(), "lock name (the fence)")("token", value(),
                                                               "fencing token of your lease")(
      "service", po::value<std::string>()->default_value(EnvOr("FENCING_SERVICE", "")),
      "lock service id of your lease (Fencing-Service); empty sends none");
}

// --if-version N and --if-absent (puts only): the write's precondition.
void AddPreconditionOptions(po::options_description& desc, bool if_absent) {
  desc.add_options()("if-version", po::value<std::string>(),
                     "write only if the key is at this version (its ETag; If-Match)");
  if (if_absent) {
    desc.add_options()("if-absent", po::bool_switch(),
                       "write only if the key does not exist (If-None-Match: *)");
  }
}

Result<IfVersion> PreconditionOption(const po::variables_map& vm) {
  bool absent = vm.count("if-absent") && vm["if-absent"].as<bool>();
  if (vm.count("if-version")) {
    if (absent) return Status::InvalidArgument("give --if-version or --if-absent, not both");
    auto v = wire::ParseCount(vm["if-version"].as<std::string>(), 1);
    if (!v) {
      return Status::InvalidArgument("--if-version \"" + vm["if-version"].as<std::string>() +
                                     "\" is not a version (a whole number >= 1)");
    }
    return IfVersion(*v);
  }
  return absent ? IfVersion(kIfAbsent) : IfVersion();
}

// Prints a refusal that carries data as JSON before failing: the store's fence for a stale
// token, the key's version for a failed precondition.
int FailWrite(const Status& s) {
  if (s.IsStaleToken() || s.IsPreconditionFailed()) {
    json::object o;
    o["error"] = StatusCodeName(s.code());  // the name fenced answers it by
    o["message"] = JsonSafeText(s.message());
    if (s.IsStaleToken()) {
      o["highest"] = s.highest_token().value_or(0);
    } else {
      o["version"] = s.current_version().value_or(0);
      PutName(o, "key", s.key().value_or(std::string()));
    }
    Print(o);
  }
  return FailStatus(s);
}

// A put of `value`, or a delete when there is none, under the lease named in `vm`. Prints the
// receipt; refused as stale or by its precondition, also what the store holds (FailWrite).
int FencedWrite(const po::variables_map& vm, const std::optional<std::string>& value) {
  auto token = Token(vm, "token");
  if (!token.ok()) return FailUsage(token.status());
  auto if_version = PreconditionOption(vm);
  if (!if_version.ok()) return FailUsage(if_version.status());
  auto store = OpenStore(vm);
  if (!store.ok()) return FailOpen(store.status());
  const auto& lock = vm["lock"].as<std::string>();
  const auto& service = vm["service"].as<std::string>();
  ObjectWrite write{!value, vm["key"].as<std::string>(), value.value_or(""), *if_version};
  auto r = (*store)->Write(lock, *token, write, service);
  if (!r.ok()) return FailWrite(r.status());
  json::object o = wire::ReceiptToJson(*r, /*is_delete=*/!value);
  if (value) o["created"] = r->created;
  Print(o);
  return kExitOk;
}

int Put(const std::vector<std::string>& args) {
  po::options_description desc("Options");
  AddStoreOptions(desc);
  AddLeaseOptions(desc);
  AddPreconditionOptions(desc, /*if_absent=*/true);
  desc.add_options()("value", po::value<std::string>(),
                     "the value; '-' or absent reads standard input");
  po::positional_options_description pos;
  pos.add("key", 1).add("value", 1);
  auto p = Parse("put", desc, pos, args);
  if (!p.ok()) return FailUsage(p.status());
  if (p->help) return kExitOk;
  std::string value;
  if (!p->vm.count("value") || p->vm["value"].as<std::string>() == "-") {
    value.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    value = p->vm["value"].as<std::string>();
  }
  return FencedWrite(p->vm, value);
}

int Get(const std::vector<std::string>& args) {
  po::options_description desc("Options");
  AddStoreOptions(desc);
  desc.add_options()("raw", po::bool_switch(),
                     "print the value's bytes as they are, nothing else (no JSON, no newline)");
  po::positional_options_description pos;
  pos.add("key", 1);
  auto p = Parse("get", desc, pos, args);
  if (!p.ok()) return FailUsage(p.status());
  if (p->help) return kExitOk;
  auto store = OpenStore(p->vm);
  if (!store.ok()) return FailOpen(store.status());
  std::string key = p->vm["key"].as<std::string>();
  auto r = (*store)->Get(key);
  if (!r.ok()) return FailStatus(r.status());
  if (p->vm["raw"].as<bool>()) {
    std::cout.write(r->value.data(), static_cast<std::streamsize>(r->value.size()));
    std::cout.flush();
    return std::cout ? kExitOk : kExitError;
  }
  json::object o;
  PutName(o, "key", key);
  PutName(o, "value", r->value);
  PutName(o, "lock", r->lock);
  o["token"] = r->token.value();
  o["version"] = r->version;
  Print(o);
  return kExitOk;
}

int Delete(const std::vector<std::string>& args) {
  po::options_description desc("Options");
  AddStoreOptions(desc);
  AddLeaseOptions(desc);
  AddPreconditionOptions(desc, /*if_absent=*/false);
  po::positional_options_description pos;
  pos.add("key", 1);
  auto p = Parse("delete", desc, pos, args);
  if (!p.ok()) return FailUsage(p.status());
  if (p->help) return kExitOk;
  return FencedWrite(p->vm, std::nullopt);
}

// Reads FILE ('-': standard input) whole.
Result<std::string> ReadInput(const std::string& path) {
  std::string text;
  if (path == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    return text;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot read the batch file \"" + path + "\"");
  text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return text;
}

// The batch FILE holds: the body of POST /v1/batch, or its "writes" list alone; --lock, --token
// and --service fill in what the body leaves out, and must agree with what it gives.
Result<wire::BatchBody> BatchFromFile(const std::string& path, const std::string& text,
                                      const po::variables_map& vm) {
  const std::string expected =
      "the batch file \"" + path +
      "\" must hold the body of POST /v1/batch, {\"lock\": \"L\", \"token\": N, \"writes\": "
      "[{\"op\": \"put\", \"key\": \"a\", \"value\": \"1\"}, ...]}, whose lock and token may come "
      "from --lock and --token instead, or its list of writes alone with --lock and --token "
      "(docs/http-api.md); ";
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec) return Status::InvalidArgument(expected + "it is not JSON (" + ec.message() + ")");
  if (v.is_array()) v = json::object{{"writes", std::move(v)}};
  if (!v.is_object()) return Status::InvalidArgument(expected + "it holds neither");
  json::object& o = v.as_object();
  const std::string service = vm["service"].as<std::string>();
  if (vm.count("lock") && !o.contains("lock")) PutName(o, "lock", vm["lock"].as<std::string>());
  if (vm.count("token") && !o.contains("token")) o["token"] = vm["token"].as<std::string>();
  if (!service.empty() && !o.contains("service")) o["service"] = service;
  bool too_many = false;
  auto batch = wire::BatchFromJson(json::serialize(o), wire::kMaxBatchWrites, &too_many);
  if (!batch.ok()) return Status::InvalidArgument(expected + batch.status().message());
  auto disagree = [&](const char* what, const std::string& file, const std::string& option) {
    return Status::InvalidArgument("the batch file \"" + path + "\" gives the " + what + " \"" +
                                   file + "\" and --" + what + " \"" + option +
                                   "\": give one, or the same");
  };
  if (vm.count("lock") && batch->lock != vm["lock"].as<std::string>()) {
    return disagree("lock", JsonSafeText(batch->lock), JsonSafeText(vm["lock"].as<std::string>()));
  }
  if (vm.count("token") && batch->token.ToString() != vm["token"].as<std::string>()) {
    return disagree("token", batch->token.ToString(), vm["token"].as<std::string>());
  }
  if (!vm["service"].defaulted() && batch->service != service) {
    return disagree("service", batch->service, service);
  }
  return batch;
}

// Several writes under one lease, all or none (POST /v1/batch).
int Batch(const std::vector<std::string>& args) {
  po::options_description desc("Options");
  AddStoreOptions(desc, /*key=*/false);
  AddLeaseOptions(desc, /*required=*/false);
  desc.add_options()("file", po::value<std::string>()->required(),
                     "the body of POST /v1/batch ({\"lock\", \"token\", \"writes\"}; "
                     "docs/http-api.md), or its \"writes\" list alone with --lock and --token; "
                     "'-' reads standard input");
  po::positional_options_description pos;
  pos.add("file", 1);
  auto p = Parse("batch", desc, pos, args);
  if (!p.ok()) return FailUsage(p.status());
  if (p->help) return kExitOk;
  if (p->vm.count("token")) {
    if (auto t = Token(p->vm, "token"); !t.ok()) return FailUsage(t.status());
  }
  const std::string path = p->vm["file"].as<std::string>();
  auto text = ReadInput(path);
  if (!text.ok()) return Fail(kExitError, text.status().message());
  auto batch = BatchFromFile(path, *text, p->vm);
  if (!batch.ok()) return FailUsage(batch.status());
  auto store = OpenStore(p->vm);
  if (!store.ok()) return FailOpen(store.status());
  auto r = (*store)->Batch(batch->lock, batch->token, batch->writes, batch->service);
  if (!r.ok()) return FailWrite(r.status());
  std::vector<bool> is_delete;
  for (const auto& w : batch->writes) is_delete.push_back(w.is_delete);
  Print(wire::BatchReceiptsToJson(batch->lock, batch->token, *r, is_delete));
  return kExitOk;
}

// The keys under a prefix, one JSON line per page (or, with --all, every page).
int List(const std::vector<std::string>& args) {
  po::options_description desc("Options");
  AddStoreOptions(desc, /*key=*/false);
  desc.add_options()("prefix", po::value<std::string>()->default_value(""),
                     "list the keys starting with this")(
      "after", po::value<std::string>()->default_value(""),
      "list the keys after this one (a page's \"next\")")(
      "limit", po::value<std::size_t>()->default_value(100), "keys per page (1 to 1000)")(
      "all", po::bool_switch(), "follow \"next\" to the last page, printing each");
  auto p = Parse("list", desc, {}, args);
  if (!p.ok()) return FailUsage(p.status());
  if (p->help) return kExitOk;
  const std::size_t limit = p->vm["limit"].as<std::size_t>();
  if (limit < 1 || limit > wire::kMaxListLimit) {
    return Fail(kExitUsage, "--limit must be 1 to " + std::to_string(wire::kMaxListLimit));
  }
  auto store = OpenStore(p->vm);
  if (!store.ok()) return FailOpen(store.status());
  const auto& prefix = p->vm["prefix"].as<std::string>();
  std::string after = p->vm["after"].as<std::string>();
  for (;;) {
    auto page = (*store)->List(prefix, after, limit);
    if (!page.ok()) return FailStatus(page.status());
    Print(wire::ObjectPageToJson(*page));
    if (!p->vm["all"].as<bool>() || !page->next) return kExitOk;
    if (*page->next <= after) {  // a store that does not move on would loop forever
      return Fail(kExitError, "the store's listing did not move past \"" + after + "\"");
    }
    after = *page->next;
  }
}

// Reads a fence, or with --set administers it (fenced --auth, admin token).
int Fence(const std::vector<std::string>& args) {
  po::options_description desc("Options");
  AddStoreOptions(desc, /*key=*/false);
  desc.add_options()("lock", po::value<std::string>()->required(), "lock name")(
      "set", po::value<std::string>(),
      "set the fence to this token, up or down (admin only; recorded in the history)")(
      "unbind-service", po::bool_switch(),
      "with --set: also unbind the fence from its lock service");
  po::positional_options_description pos;
  pos.add("lock", 1);
  auto p = Parse("fence", desc, pos, args);
  if (!p.ok()) return FailUsage(p.status());
  if (p->help) return kExitOk;
  bool unbind = p->vm["unbind-service"].as<bool>();
  if (unbind && !p->vm.count("set")) {
    return Fail(kExitUsage, "--unbind-service needs --set N; see fencectl fence --help");
  }
  auto store = OpenStore(p->vm);
  if (!store.ok()) return FailOpen(store.status());
  std::string lock = p->vm["lock"].as<std::string>();
  if (p->vm.count("set")) {
    auto highest = Token(p->vm, "set");
    if (!highest.ok()) return FailUsage(highest.status());
    auto d = (*store)->SetFence(lock, *highest, unbind);
    if (!d.ok()) return FailStatus(d.status());
    Print(wire::DecisionToJson(*d));
    return kExitOk;
  }
  auto fence = (*store)->Fence(lock);
  if (!fence.ok()) return FailStatus(fence.status());
  json::object o;
  PutName(o, "lock", lock);
  o["highest"] = fence->has_value() ? (*fence)->highest.value() : 0;
  if (fence->has_value() && !(*fence)->service.empty()) o["service"] = (*fence)->service;
  Print(o);
  return kExitOk;
}

// The store's recent decisions (admin only under fenced --auth), one JSON line each.
int History(const std::vector<std::string>& args) {
  po::options_description desc("Options");
  AddStoreOptions(desc, /*key=*/false);
  desc.add_options()("limit", po::value<std::size_t>()->default_value(100),
                     "most decisions to print, oldest first (1 to 10000)");
  auto p = Parse("history", desc, {}, args);
  if (!p.ok()) return FailUsage(p.status());
  if (p->help) return kExitOk;
  auto store = OpenStore(p->vm);
  if (!store.ok()) return FailOpen(store.status());
  auto decisions = (*store)->History(p->vm["limit"].as<std::size_t>());
  if (!decisions.ok()) return FailStatus(decisions.status());
  for (const auto& d : *decisions) Print(wire::DecisionToJson(d));
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  // Options before the command go to it: fencectl --locks URI acquire NAME.
  std::vector<std::string> globals;
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; ++i) {
    std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return kExitOk;
    }
    if (a == "--version") {
      std::cout << "fencectl " << FENCEKIT_VERSION << "\n";
      return kExitOk;
    }
    globals.emplace_back(a);
    bool takes_value = a == "--locks" || a == "--store" || a == "--token-file" || a == "--ca-file";
    if (takes_value && i + 1 < argc) globals.emplace_back(argv[++i]);
  }
  if (i >= argc) {
    std::cerr << kUsage;
    return kExitUsage;
  }
  std::string command = argv[i];
  if (command == "help") {
    std::cout << kUsage;
    return kExitOk;
  }
  std::vector<std::string> args = globals;
  args.insert(args.end(), argv + i + 1, argv + argc);
  if (command == "acquire") return Acquire(args);
  if (command == "release" || command == "extend") return ReleaseOrExtend(command, args);
  if (command == "inspect") return Inspect(args);
  if (command == "check-token") return CheckToken(args);
  if (command == "run") return Run(args);
  if (command == "put") return Put(args);
  if (command == "get") return Get(args);
  if (command == "delete") return Delete(args);
  if (command == "batch") return Batch(args);
  if (command == "list") return List(args);
  if (command == "fence") return Fence(args);
  if (command == "history") return History(args);
  if (command == "pause-test") return PauseTest(args);
  return Fail(kExitUsage, "unknown command \"" + command + "\"; run fencectl --help");
}
