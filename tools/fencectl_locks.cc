// fencectl's lock commands: acquire, release, extend, inspect, check-token.
#include <boost/json/object.hpp>
#include <boost/program_options.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "fencectl_cli.h"
#include "fencectl_commands.h"
#include "fencekit/lockclient/lock_client.h"

namespace fencekit::fencectl {
namespace {

namespace json = boost::json;

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

}  // namespace

Result<std::unique_ptr<LockClient>> OpenLocks(const po::variables_map& vm,
                                              std::chrono::milliseconds ttl) {
  LockOptions options;
  options.ttl = ttl;
  return LockClient::Open(vm["locks"].as<std::string>(), options);
}

void AddLockOptions(po::options_description& desc) {
  desc.add_options()("locks", po::value<std::string>()->default_value(DefaultLockUri()),
                     "lock service URI: sqlite:///path/locks.db, redis://host:port[/db], "
                     "redlock://h1:p1,h2:p2,h3:p3, etcd://h1:p1[,h2:p2,...], "
                     "etcds://[user:password@]h1:p1[,...]?cacert=FILE[&prefix=P] or "
                     "zk://[user:password@]h1:p1[,...][/prefix]")(
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
                   : (*client)->Acquire(name, *wait, *ttl);
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

}  // namespace fencekit::fencectl
