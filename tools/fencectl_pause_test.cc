// fencectl pause-test: seeded runs of paused clients against a real fenced, checked.
#include <iostream>
#include <vector>

#include "fencectl_cli.h"
#include "fencekit/common/text.h"
#include "fencekit/lockclient/lock_client.h"
#include "fencekit/pausetest/runner.h"
#include "fencekit/pausetest/worker_runner.h"

namespace fencekit::fencectl {
namespace {

// The options only the built-in workload takes, and those only --worker takes.
constexpr const char* kBuiltInOnly[] = {"no-fencing", "kill-store", "max-delay", "fenced"};
constexpr const char* kWorkerOnly[] = {"check",         "setup",          "lock",  "worker-timeout",
                                       "kill-grace",    "check-timeout",  "proxy", "holds",
                                       "min-operations", "failover-locks"};

// The harness's errors: a usage error exits 64, anything else that stopped the runs 1 (never 2
// or 4: those say something about locks or runs).
int FailHarness(const Status& s) {
  return s.IsInvalidArgument() ? FailUsage(s) : Fail(kExitError, s.message());
}

// Whether the option was on the command line (not its default, nor absent).
bool Given(const po::variables_map& vm, const char* name) {
  return vm.count(name) > 0 && !vm[name].defaulted();
}

using fencekit::Plural;

// fencectl pause-test --worker CMD: the user's own worker under the kit's pauses.
int WorkerPauseTest(const po::variables_map& vm) {
  for (const char* name : kBuiltInOnly) {
    if (Given(vm, name)) {
      return Fail(kExitUsage, std::string("--") + name +
                                  " is for the built-in workload, not with --worker: the kit "
                                  "does not own your store (see fencectl pause-test --help)");
    }
  }
  for (const char* name : {"check", "setup"}) {
    // Given but empty (an unset variable): not the built-in check, nor no setup.
    if (Given(vm, name) && vm[name].as<std::string>().empty()) {
      return Fail(kExitError, std::string("--") + name +
                                  " is an empty command, so it cannot be started (an unset "
                                  "variable in a script?); give the command, or leave --" +
                                  name + " out");
    }
  }
  pausetest::WorkerTestOptions o;
  o.worker = vm["worker"].as<std::string>();
  o.check = vm["check"].as<std::string>();
  o.setup = vm["setup"].as<std::string>();
  o.lock = vm["lock"].as<std::string>();
  o.locks_uri = vm["locks"].as<std::string>();
  o.start_redis = vm["start-redis"].as<bool>();
  o.start_etcd = vm["start-etcd"].as<int>();
  o.runs = vm["runs"].as<int>();
  o.clients = vm["clients"].as<int>();
  o.seed = vm["seed"].as<std::uint64_t>();
  o.pauses_per_run = vm["pauses"].as<int>();
  o.holds_per_run = vm["holds"].as<int>();
  o.restart_locks = vm["restart-locks"].as<bool>();
  o.kill_etcd_leader = vm["kill-etcd-leader"].as<bool>();
  o.failover_locks = vm["failover-locks"].as<bool>();
  if (vm.count("proxy")) {
    for (const std::string& text : vm["proxy"].as<std::vector<std::string>>()) {
      auto proxy = pausetest::ParseWorkerProxy(text);
      if (!proxy.ok()) return FailUsage(proxy.status());
      o.proxies.push_back(*proxy);
    }
  }
  o.work_dir = vm["work-dir"].as<std::string>();
  o.keep_all = vm["keep"].as<bool>();
  if (vm.count("min-operations")) {
    o.min_operations = vm["min-operations"].as<int>();
    if (o.min_operations < 0) return Fail(kExitUsage, "--min-operations must be >= 0");
  }
  for (auto [name, out] :
       {std::pair{"ttl", &o.ttl}, std::pair{"run-length", &o.run_length},
        std::pair{"worker-timeout", &o.worker_timeout}, std::pair{"kill-grace", &o.kill_grace},
        std::pair{"check-timeout", &o.check_timeout}}) {
    auto d = Duration(vm, name);
    if (!d.ok()) return FailUsage(d.status());
    *out = *d;
  }
  // ZooKeeper too: a lease is a session, at least 2 ticks long (4s on a default ensemble).
  if (o.locks_uri.starts_with("etcd://") || o.locks_uri.starts_with("etcds://") ||
      o.locks_uri.starts_with("zk://") ||
      o.start_etcd > 0) {
    if (vm["ttl"].defaulted()) o.ttl = std::chrono::seconds(1);
    if (vm["run-length"].defaulted()) o.run_length = std::chrono::seconds(5);
  }
  if (!vm["quiet"].as<bool>()) {
    o.on_run = [](int run, std::uint64_t seed, bool failed, const std::string& line) {
      std::cerr << "run " << run << " seed " << seed << (failed ? ": FAILED " : ": ") << line
                << "\n";
    };
  }
  auto summary = pausetest::RunWorkerPauseTests(o);
  if (!summary.ok()) return FailHarness(summary.status());
  const auto& s = *summary;
  std::cerr << "pause-test: " << Plural(s.runs, "run") << " of --worker, "
            << Plural(s.worker_invocations, "invocation") << " (" << s.worker_failures
            << " did not exit 0), " << Plural(s.operations, "operation") << " checked; "
            << (o.holds_per_run > 0 ? Plural(s.holds, "hold") + " of a client's traffic; " : "")
            << (o.restart_locks || o.kill_etcd_leader || o.failover_locks
                    ? Plural(s.lock_faults, "lock-service fault") + " (" +
                          (o.restart_locks    ? "Redis restarted empty"
                           : o.failover_locks ? "replication cut, Redis failed over"
                                              : "etcd leader killed, back") +
                          "); "
                    : "")
            << Plural(s.runs_with_expired_leases, "run")
            << " with a lease that expired while in use; "
            << (s.work_dir.empty() ? "files: none kept (no run failed; --keep keeps them)"
                                   : "files: " + s.work_dir)
            << "\n";
  std::cout << s.Line() << std::endl;
  return s.failed_runs > 0 ? kExitCheck : kExitOk;
}

}  // namespace

int PauseTest(const std::vector<std::string>& args) {
  po::options_description desc("Options");
  desc.add_options()("runs", po::value<int>()->default_value(50), "seeded runs")(
      "locks", po::value<std::string>()->default_value(""),
      "lock service URI (default: a fresh embedded SQLite file per run)")(
      "clients", po::value<int>()->default_value(3), "client processes per run")(
      "seed", po::value<std::uint64_t>()->default_value(1), "seed of the first run's schedule")(
      "no-fencing", po::bool_switch(), "control arm: the store accepts every token")(
      "ttl", po::value<std::string>()->default_value("150ms"),
      "lease ttl (etcd:// or --start-etcd: 1s)")("run-length",
                                                 po::value<std::string>()->default_value("1200ms"),
                                                 "length of one run (etcd:// or --start-etcd: 5s)")(
      "pauses", po::value<int>()->default_value(10), "pauses per run, each 0.5-3x the ttl")(
      "max-delay", po::value<std::string>()->default_value("0ms"),
      "delay each write by a random 0..max before sending it (etcd:// or --start-etcd: 300ms)")(
      "kill-store", po::bool_switch(), "SIGKILL and restart the store once per run")(
      "start-redis", po::bool_switch(),
      "start a redis-server per run (loopback, no persistence) as the lock service")(
      "restart-locks", po::bool_switch(),
      "with --start-redis: SIGKILL it once per run and restart it empty")(
      "failover-locks", po::bool_switch(),
      "with --worker and --start-redis: a Redis primary with a replica; once per run, "
      "replication cut, then the primary SIGKILLed and the replica, missing the last grants, "
      "promoted in its place")(
      "start-etcd", po::value<int>()->default_value(0),
      "start an etcd cluster of N members per run (loopback) as the lock service")(
      "kill-etcd-leader", po::bool_switch(),
      "with --start-etcd 3 or more: SIGKILL the etcd leader once per run and restart it later "
      "in the run")("fenced", po::value<std::string>()->default_value(""),
                    "the fenced binary (default: next to fencectl, or on PATH)")(
      "work-dir", po::value<std::string>()->default_value(""),
      "where histories go (default: a new temp directory; failing runs are kept)")(
      "keep", po::bool_switch(), "keep every run's files, not only failing runs'")(
      "quiet,q", po::bool_switch(), "no line per run on stderr")(
      "worker", po::value<std::string>()->default_value(""),
      "your own worker: CMD (through sh -c) run under the lock by each client, with "
      "FENCING_TOKEN etc. set (docs/testing-with-pauses.md, \"Your own workers\")")(
      "check", po::value<std::string>()->default_value(""),
      "with --worker: CMD judging each run (non-zero: a violation); default: the recorded "
      "operations must be linearizable")(
      "setup", po::value<std::string>()->default_value(""),
      "with --worker: CMD run before each run (to reset your storage)")(
      "lock", po::value<std::string>()->default_value("pause-test"),
      "with --worker: the lock the clients take")(
      "worker-timeout", po::value<std::string>()->default_value("30s"),
      "with --worker: an invocation's limit, then SIGTERM, then SIGKILL after --kill-grace")(
      "kill-grace", po::value<std::string>()->default_value("2s"),
      "with --worker: how long a worker still running at the run's end may finish, and "
      "between SIGTERM and SIGKILL")(
      "check-timeout", po::value<std::string>()->default_value("60s"),
      "with --worker: the limit of --setup, --check and the built-in check")(
      "proxy", po::value<std::vector<std::string>>()->composing(),
      "with --worker: NAME=HOST:PORT (repeatable): each client gets a proxy of its own in front "
      "of HOST:PORT, named to its workers by FENCEKIT_PROXY_NAME=127.0.0.1:PORT (NAME "
      "upper-cased); any TCP protocol")(
      "holds", po::value<int>()->default_value(0),
      "with --worker and --proxy: holds of a client's traffic per run, both ways, each 0.5-3x "
      "the ttl (a request sent under the lease arrives after it)")(
      "min-operations", po::value<int>(),
      "with --worker: a run is judged only when its check had at least N operations (default: "
      "1 with the built-in check; with --check, 0, else lines of the merged history)");
  auto p = Parse("pause-test", desc, {}, args);
  if (!p.ok()) return FailUsage(p.status());
  if (p->help) return kExitOk;
  const auto& vm = p->vm;
  // Given, even empty (an unset variable), --worker means the user's worker, never the
  // built-in workload.
  if (Given(vm, "worker")) return WorkerPauseTest(vm);
  for (const char* name : kWorkerOnly) {
    if (Given(vm, name)) {
      return Fail(kExitUsage, std::string("--") + name + " needs --worker CMD");
    }
  }
  pausetest::PauseTestOptions o;
  o.runs = vm["runs"].as<int>();
  o.locks_uri = vm["locks"].as<std::string>();
  o.clients = vm["clients"].as<int>();
  o.seed = vm["seed"].as<std::uint64_t>();
  o.fencing = !vm["no-fencing"].as<bool>();
  o.pauses_per_run = vm["pauses"].as<int>();
  o.kill_store = vm["kill-store"].as<bool>();
  o.start_redis = vm["start-redis"].as<bool>();
  o.restart_locks = vm["restart-locks"].as<bool>();
  o.start_etcd = vm["start-etcd"].as<int>();
  o.kill_etcd_leader = vm["kill-etcd-leader"].as<bool>();
  o.fenced_path = vm["fenced"].as<std::string>();
  o.work_dir = vm["work-dir"].as<std::string>();
  o.keep_all = vm["keep"].as<bool>();
  for (auto [name, out] : {std::pair{"ttl", &o.ttl}, std::pair{"run-length", &o.run_length},
                           std::pair{"max-delay", &o.max_delay}}) {
    auto d = Duration(vm, name);
    if (!d.ok()) return FailUsage(d.status());
    *out = *d;
  }
  // ZooKeeper too: a lease is a session, at least 2 ticks long (4s on a default ensemble).
  if (o.locks_uri.starts_with("etcd://") || o.locks_uri.starts_with("etcds://") ||
      o.locks_uri.starts_with("zk://") ||
      o.start_etcd > 0) {
    // etcd leases are whole seconds; holders hold a while, so that pauses land on them rather
    // than on waiters (a paused waiter holds up etcd's line). See docs/testing-with-pauses.md.
    if (vm["ttl"].defaulted()) o.ttl = std::chrono::seconds(1);
    if (vm["run-length"].defaulted()) o.run_length = std::chrono::seconds(5);
    if (vm["max-delay"].defaulted()) o.max_delay = std::chrono::milliseconds(300);
  }
  if (!vm["quiet"].as<bool>()) {
    o.on_run = [](int run, std::uint64_t seed, const pausetest::CheckReport& r) {
      std::cerr << "run " << run << " seed " << seed << ": acknowledged=" << r.acknowledged_writes
                << " stale_accepted=" << r.stale_accepted << " lost_updates=" << r.lost_updates
                << " missing=" << r.missing_acknowledged << " expired_leases=" << r.expired_leases
                << "\n";
    };
  }
  auto summary = pausetest::RunPauseTests(o);
  // kInvalidArgument: options that cannot go together, or a malformed --locks (usage errors).
  if (!summary.ok()) return FailHarness(summary.status());
  const auto& s = *summary;
  std::cerr << "pause-test: " << Plural(s.runs, "run") << " (" << (o.fencing ? "fencing on" : "no fencing")
            << ", locks "
            << (o.start_redis      ? "own redis-server"
                : o.start_etcd > 0 ? "own etcd cluster of " + std::to_string(o.start_etcd) +
                                         (o.start_etcd == 1 ? " member" : " members")
                : o.locks_uri.empty() ? "embedded sqlite"
                                      : LockUriWithoutPassword(o.locks_uri))
            << (o.restart_locks ? ", restarted empty each run" : "") << "); "
            << (o.kill_etcd_leader ? "etcd leader SIGKILLed and restarted in " +
                                         std::to_string(s.etcd_leader_kills) + " of " +
                                         std::to_string(s.runs) + " runs; "
                                   : "")
            << s.runs_with_expired_leases << " with a lease that expired while in use; "
            << Plural(s.acknowledged_writes, "acknowledged write") << "; missing_acknowledged=" << s.missing_acknowledged << "; "
            << (s.work_dir.empty() ? "files: none kept (no run failed; --keep keeps them)"
                                   : "files: " + s.work_dir)
            << "\n";
  std::cout << s.Line() << std::endl;
  bool violated = s.stale_accepted > 0 || s.lost_updates > 0 || s.missing_acknowledged > 0;
  if (o.fencing) return violated ? kExitCheck : kExitOk;
  if (s.lost_updates == 0) {
    std::cerr << "fencectl: the control arm saw no lost update: pauses did not land inside a "
                 "read-modify-write; use more --runs or --pauses\n";
    return kExitCheck;
  }
  return kExitOk;
}

}  // namespace fencekit::fencectl
