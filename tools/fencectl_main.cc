// fencectl: locks with fencing tokens, and fenced writes, from a shell. See docs/lock-client.md.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <boost/json/object.hpp>
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
  fencectl run     [--locks URI] [--ttl 10s] [--wait 0s] [--kill-on-loss] NAME -- CMD [ARGS...]
  fencectl put     [--store URL] --lock NAME --token N [--service ID] KEY [VALUE | -]
  fencectl get     [--store URL] KEY
  fencectl delete  [--store URL] --lock NAME --token N [--service ID] KEY
  fencectl fence   [--store URL] [--set N [--unbind-service]] LOCK
  fencectl history [--store URL] [--limit 100]
  fencectl pause-test --runs R [--locks URI] [--clients N] [--seed S] [--no-fencing] [...]

--locks defaults to $FENCEKIT_LOCKS, else sqlite://./fencekit-locks.db
--store defaults to $FENCEKIT_STORE, else http://127.0.0.1:8080 (https:// URLs too); the
store commands take --token-file FILE (default: the token in $FENCEKIT_STORE_TOKEN) and
--ca-file FILE (for https; default: the system's certificate authorities)
--service defaults to $FENCING_SERVICE (set by fencectl run), else none is sent.
Exit codes: 0 success; 1 error; 2 lock busy or wait timed out; 3 write refused as stale, or
check-token: the token is not the current holder's; 4 pause-test: the expectation failed (see docs/testing-with-pauses.md).
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
  desc.add_options()("locks",
                     po::value<std::string>()->default_value(
                         EnvOr("FENCEKIT_LOCKS", "sqlite://./fencekit-locks.db")),
                     "lock service URI: sqlite:///path/locks.db, redis://host:port[/db], "
                     "redlock://h1:p1,h2:p2,h3:p3 or etcd://h1:p1[,h2:p2,...]")(
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
  if (!p.ok()) return FailStatus(p.status());
  if (p->help) return kExitOk;
  auto granted = AcquireFromOptions(p->vm);
  if (!granted.ok()) return FailStatus(granted.status());
  Print(LeaseJson(granted->lease));
  return kExitOk;
}

// Rebuilds the lease of `owner` from --token, or from the service when --token is absent.
Result<Lease> LeaseOf(LockClient& client, const po::variables_map& vm) {
  Lease lease;
  lease.lock = vm["name"].as<std::string>();
  lease.owner = vm["owner"].as<std::string>();
  if (vm.count("token")) {
    auto t = FencingToken::Parse(vm["token"].as<std::string>());
    if (!t.ok()) return t.status();
    lease.token = *t;
    return lease;
  }
  auto info = client.Inspect(lease.lock);
  if (!info.ok()) return info.status();
  if (!info->held || info->owner != lease.owner || !info->token) {
    return Status::NotHeld("lock \"" + lease.lock + "\" on " + client.service() +
                           " is not held by owner " + lease.owner +
                           (info->held ? " (another owner holds it)" : " (it expired)"));
  }
  lease.token = *info->token;
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
  if (!p.ok()) return FailStatus(p.status());
  if (p->help) return kExitOk;
  std::chrono::milliseconds ttl(10'000);
  if (extend) {
    auto t = Duration(p->vm, "ttl");
    if (!t.ok()) return FailStatus(t.status());
    ttl = *t;
  }
  auto client = OpenLocks(p->vm, ttl);
  if (!client.ok()) return FailStatus(client.status());
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
  if (!p.ok()) return FailStatus(p.status());
  if (p->help) return kExitOk;
  auto client = OpenLocks(p->vm, std::chrono::seconds(10));
  if (!client.ok()) return FailStatus(client.status());
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
  if (!p.ok()) return FailStatus(p.status());
  if (p->help) return kExitOk;
  auto token = FencingToken::Parse(p->vm["token"].as<std::string>());
  if (!token.ok()) return FailStatus(token.status());
  auto client = OpenLocks(p->vm, std::chrono::seconds(10));
  if (!client.ok()) return FailStatus(client.status());
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

std::atomic<pid_t> g_child{0};

void ForwardSignal(int sig) {
  pid_t child = g_child.load();
  if (child > 0) kill(child, sig);
}

int Run(const std::vector<std::string>& args) {
  auto dashes = std::find(args.begin(), args.end(), "--");
  std::vector<std::string> own(args.begin(), dashes);
  std::vector<std::string> command(dashes == args.end() ? dashes : dashes + 1, args.end());
  po::options_description desc("Options");
  AddLockOptions(desc);
  desc.add_options()("ttl", po::value<std::string>()->default_value("10s"),
                     "lease length; renewed every ttl/3 while CMD runs")(
      "wait", po::value<std::string>()->default_value("0s"), "how long to wait for the lock")(
      "kill-on-loss", po::bool_switch(), "send SIGTERM to CMD if the lease is lost");
  po::positional_options_description pos;
  pos.add("name", 1);
  auto p = Parse("run", desc, pos, own);
  if (!p.ok()) return FailStatus(p.status());
  if (p->help) return kExitOk;
  if (command.empty()) {
    return Fail(kExitError, "no command given; use fencectl run NAME -- CMD [ARGS...]");
  }
  auto granted = AcquireFromOptions(p->vm);
  if (!granted.ok()) return FailStatus(granted.status());
  LockClient& client = *granted->client;
  const Lease& lease = granted->lease;

  bool kill_on_loss = p->vm["kill-on-loss"].as<bool>();
  HeldLock held(client, lease,
                {.auto_renew = true, .on_lost = [kill_on_loss](const Lease& l, const Status& why) {
                   std::cerr << "fencectl: the lease on lock \"" << l.lock << "\" (token "
                             << l.token.value() << ") was lost: " << why.message()
                             << (kill_on_loss ? "; terminating the command" : "") << std::endl;
                   if (kill_on_loss) ForwardSignal(SIGTERM);
                 }});
  pid_t child = fork();
  if (child < 0) return Fail(kExitError, "fork failed");
  if (child == 0) {
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
  g_child = child;
  signal(SIGINT, ForwardSignal);
  signal(SIGTERM, ForwardSignal);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  g_child = 0;
  Status released = held.Release();
  if (!released.ok() && !held.lost()) {
    std::cerr << "fencectl: releasing the lock failed: " << released.message() << "\n";
  }
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
  if (!in || !std::getline(in, token)) {
    return Status::InvalidArgument("cannot read a token from --token-file \"" + path +
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

// The options of a fenced write: the lease's lock, token and lock service.
void AddLeaseOptions(po::options_description& desc) {
  desc.add_options()("lock", po::value<std::string>()->required(), "lock name (the fence)")(
      "token", po::value<std::string>()->required(), "fencing token of your lease")(
      "service", po::value<std::string>()->default_value(EnvOr("FENCING_SERVICE", "")),
      "lock service id of your lease (Fencing-Service); empty sends none");
}

// A put of `value`, or a delete when there is none, under the lease named in `vm`. Prints the
// receipt; refused as stale, also the store's fence as JSON before failing.
int FencedWrite(const po::variables_map& vm, const std::optional<std::string>& value) {
  auto token = FencingToken::Parse(vm["token"].as<std::string>());
  if (!token.ok()) return FailStatus(token.status());
  auto store = OpenStore(vm);
  if (!store.ok()) return FailStatus(store.status());
  const auto& lock = vm["lock"].as<std::string>();
  const auto& key = vm["key"].as<std::string>();
  const auto& service = vm["service"].as<std::string>();
  auto r = value ? (*store)->Put(lock, *token, key, *value, service)
                 : (*store)->Delete(lock, *token, key, service);
  if (!r.ok()) {
    if (r.status().IsStaleToken()) {
      json::object o;
      o["error"] = "stale_token";
      o["message"] = JsonSafeText(r.status().message());
      o["highest"] = r.status().highest_token().value_or(0);
      Print(o);
    }
    return FailStatus(r.status());
  }
  json::object o = wire::ReceiptToJson(*r, /*is_delete=*/!value);
  if (value) o["created"] = r->created;
  Print(o);
  return kExitOk;
}

int Put(const std::vector<std::string>& args) {
  po::options_description desc("Options");
  AddStoreOptions(desc);
  AddLeaseOptions(desc);
  desc.add_options()("value", po::value<std::string>(),
                     "the value; '-' or absent reads standard input");
  po::positional_options_description pos;
  pos.add("key", 1).add("value", 1);
  auto p = Parse("put", desc, pos, args);
  if (!p.ok()) return FailStatus(p.status());
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
  po::positional_options_description pos;
  pos.add("key", 1);
  auto p = Parse("get", desc, pos, args);
  if (!p.ok()) return FailStatus(p.status());
  if (p->help) return kExitOk;
  auto store = OpenStore(p->vm);
  if (!store.ok()) return FailStatus(store.status());
  std::string key = p->vm["key"].as<std::string>();
  auto r = (*store)->Get(key);
  if (!r.ok()) return FailStatus(r.status());
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
  po::positional_options_description pos;
  pos.add("key", 1);
  auto p = Parse("delete", desc, pos, args);
  if (!p.ok()) return FailStatus(p.status());
  if (p->help) return kExitOk;
  return FencedWrite(p->vm, std::nullopt);
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
  if (!p.ok()) return FailStatus(p.status());
  if (p->help) return kExitOk;
  bool unbind = p->vm["unbind-service"].as<bool>();
  if (unbind && !p->vm.count("set")) {
    return Fail(kExitError, "--unbind-service needs --set N; see fencectl fence --help");
  }
  auto store = OpenStore(p->vm);
  if (!store.ok()) return FailStatus(store.status());
  std::string lock = p->vm["lock"].as<std::string>();
  if (p->vm.count("set")) {
    auto highest = FencingToken::Parse(p->vm["set"].as<std::string>());
    if (!highest.ok()) return FailStatus(highest.status());
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
  if (!p.ok()) return FailStatus(p.status());
  if (p->help) return kExitOk;
  auto store = OpenStore(p->vm);
  if (!store.ok()) return FailStatus(store.status());
  auto decisions = (*store)->History(p->vm["limit"].as<std::size_t>());
  if (!decisions.ok()) return FailStatus(decisions.status());
  for (const auto& d : *decisions) Print(wire::DecisionToJson(d));
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string_view(argv[1]) == "--help" || std::string_view(argv[1]) == "-h" ||
      std::string_view(argv[1]) == "help") {
    std::cout << kUsage;
    return argc < 2 ? kExitError : kExitOk;
  }
  std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "acquire") return Acquire(args);
  if (command == "release" || command == "extend") return ReleaseOrExtend(command, args);
  if (command == "inspect") return Inspect(args);
  if (command == "check-token") return CheckToken(args);
  if (command == "run") return Run(args);
  if (command == "put") return Put(args);
  if (command == "get") return Get(args);
  if (command == "delete") return Delete(args);
  if (command == "fence") return Fence(args);
  if (command == "history") return History(args);
  if (command == "pause-test") return PauseTest(args);
  return Fail(kExitError, "unknown command \"" + command + "\"; run fencectl --help");
}
