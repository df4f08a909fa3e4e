#include "fencekit/pausetest/runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "builtin/client.h"
#include "fencekit/httpapi/store_client.h"
#include "fencekit/lockclient/lock_client.h"
#include "run/run_schedule.h"
#include "run/work_dir.h"
#include "run/children.h"

namespace fencekit::pausetest {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
// Real time (not Clock) in this file: it plays schedules on, and reaps, real processes.
using SteadyClock = std::chrono::steady_clock;

// Every refusal of `options` that needs no process or file: before anything is made, so that
// nothing is left behind.
Status CheckOptions(const PauseTestOptions& options) {
  if (options.runs < 1) return Status::InvalidArgument("--runs must be at least 1");
  if (options.clients < 2) {
    return Status::InvalidArgument(
        "--clients must be at least 2: pauses matter only when "
        "another client can take the lock");
  }
  if (options.ttl < milliseconds(10)) return Status::InvalidArgument("ttl must be >= 10ms");
  const bool etcd = options.locks_uri.starts_with("etcd://") ||
                    options.locks_uri.starts_with("etcds://") || options.start_etcd > 0;
  if (etcd && options.ttl < milliseconds(1'000)) {
    return Status::InvalidArgument(
        "ttl " + std::to_string(options.ttl.count()) +
        "ms is too short for etcd: its leases are whole seconds, so etcd would keep each lock "
        "for at least 1s while the clients count " +
        std::to_string(options.ttl.count()) +
        "ms, and the pauses (0.5-3x the ttl) would not outlive a lease; use a ttl of 1s or "
        "more, e.g. --ttl 1s --run-length 5s --pauses 10 --max-delay 300ms (fencectl's "
        "defaults for etcd://)");
  }
  if (options.start_redis && !options.locks_uri.empty()) {
    return Status::InvalidArgument(
        "--start-redis and --locks both name the lock service; "
        "give one");
  }
  if (options.restart_locks && !options.start_redis) {
    return Status::InvalidArgument(
        "--restart-locks needs a lock service this command owns: add "
        "--start-redis");
  }
  if (options.start_etcd < 0) return Status::InvalidArgument("--start-etcd must be >= 0");
  if (options.start_etcd > 0 && (options.start_redis || !options.locks_uri.empty())) {
    return Status::InvalidArgument(std::string("--start-etcd and ") +
                                   (options.start_redis ? "--start-redis" : "--locks") +
                                   " both name the lock service; give one");
  }
  if (options.kill_etcd_leader && options.start_etcd < 3) {
    return Status::InvalidArgument(
        options.start_etcd == 0
            ? "--kill-etcd-leader needs an etcd cluster this command owns: add --start-etcd 3"
            : "--kill-etcd-leader needs --start-etcd 3 or more: with " +
                  std::to_string(options.start_etcd) +
                  " members the others have no majority without the leader, and the runs "
                  "would test an outage, not a leader change");
  }
  return Status::Ok();
}

Result<std::string> FindFenced(const std::string& given) {
  if (!given.empty()) {
    if (::access(given.c_str(), X_OK) == 0) return given;
    return Status::InvalidArgument("fenced binary " + given +
                                   " is not executable; pass the "
                                   "path of a built fenced");
  }
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  std::vector<fs::path> candidates;
  if (!ec) {
    candidates.push_back(self.parent_path() / "fenced");
  }
  if (const char* path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    for (std::string d; std::getline(dirs, d, ':');) candidates.push_back(fs::path(d) / "fenced");
  }
  for (const auto& c : candidates) {
    if (::access(c.c_str(), X_OK) == 0) return fs::weakly_canonical(c).string();
  }
  return Status::NotFound(
      "cannot find the fenced binary next to this program "
      "or on PATH; pass its path (--fenced PATH)");
}

// fenced for one run, keeping every decision of the run in its history.
procutil::FencedOptions FencedFor(const std::string& binary, const std::string& dir, bool fencing) {
  procutil::FencedOptions o{.binary = binary,
                            .db = dir + "/store.db",
                            .log_path = dir + "/fenced.log",
                            .args = {"--history", "1000000"}};
  if (!fencing) o.args.push_back("--no-fencing");
  return o;
}

// Starts the servers `options` asks for, in the run's folder `dir`.
Status StartServers(const PauseTestOptions& options, const std::string& fenced,
                    const std::string& dir, RunServers& servers) {
  if (Status s = servers.store.Start(FencedFor(fenced, dir, options.fencing)); !s.ok()) return s;
  // Without persistence: a restart loses every key, counters included.
  if (options.start_redis) {
    if (Status s = servers.redis.Start({.log_path = dir + "/redis.log"}); !s.ok()) return s;
  }
  if (options.start_etcd > 0) {
    return servers.etcd.Start({.members = options.start_etcd, .dir = dir + "/etcd"});
  }
  return Status::Ok();
}

// What every client of run `run` shares; `faults` gets the line on the etcd endpoints' order.
ClientPlan BasePlan(const PauseTestOptions& options, int run, std::uint64_t run_seed,
                    const std::string& dir, const RunServers& servers, std::string& faults) {
  ClientPlan base;
  base.locks_uri = options.locks_uri;
  if (options.start_redis) base.locks_uri = servers.redis.uri();
  if (options.start_etcd > 0) {
    // Clients try the members in this order: from a seeded one on, so that the leader killed
    // is in some runs the member they talk to and in others one behind it.
    const int first = static_cast<int>(run_seed % static_cast<std::uint64_t>(options.start_etcd));
    base.locks_uri = "etcd://";
    for (int i = 0; i < options.start_etcd; ++i) {
      int m = (first + i) % options.start_etcd;
      base.locks_uri +=
          (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(servers.etcd.client_port(m));
    }
    faults += "clients' first etcd endpoint: m" + std::to_string(first) + "\n";
  }
  if (base.locks_uri.empty()) base.locks_uri = "sqlite://" + dir + "/locks.db";
  base.lock = "pause-test-" + std::to_string(options.seed) + "-" + std::to_string(run);
  base.key = base.lock + "/counter";
  base.claim_key = base.lock + "/claim";
  base.store_url = servers.store.url();
  base.history_path = dir + "/history.jsonl";
  base.ttl = options.ttl;
  base.max_delay = options.max_delay;
  return base;
}

// Forks `count` clients of `base`, each told to stop when `stop_fd` (a pipe's read end) closes.
std::vector<pid_t> ForkClients(const ClientPlan& base, int count, std::uint64_t run_seed,
                               int stop_fd, int stop_write_fd) {
  std::vector<pid_t> clients;
  for (int c = 0; c < count; ++c) {
    ClientPlan plan = base;
    plan.index = c;
    plan.seed = run_seed * 31 + static_cast<std::uint64_t>(c) + 1;
    plan.stop_fd = stop_fd;
    pid_t pid = ::fork();
    if (pid < 0) break;
    if (pid == 0) {
      ::close(stop_write_fd);
      ::_exit(ClientMain(plan));
    }
    clients.push_back(pid);
  }
  return clients;
}

// What the checker reads of run `run`: the store's decisions and final counter (while `store`
// runs), then the clients' history.
Result<CheckInput> ReadBack(const std::string& store_url, const ClientPlan& base, int run) {
  CheckInput input;
  auto client = StoreClient::Open(store_url);
  if (!client.ok()) return client.status();
  auto log = (*client)->History(10'000);
  if (!log.ok()) return log.status();
  if (log->size() >= 10'000) {
    return Status::Internal("run " + std::to_string(run) +
                            " made over 10,000 store decisions, more than the checker can read "
                            "back; shorten --run-length");
  }
  input.store_log = std::move(log).value();
  auto final_value = (*client)->Get(base.key);
  if (final_value.ok()) {
    input.final_counters[base.key] = std::atoll(final_value->value.c_str());
  } else if (!final_value.status().IsNotFound()) {
    return final_value.status();
  }
  return input;
}

struct RunOutcome {
  CheckReport report;
  bool etcd_leader_killed_and_back = false;
};

// One seeded run in `dir`: its servers and clients, its schedule played, its history checked
// and the report written to dir/report.txt.
Result<RunOutcome> RunOnce(const PauseTestOptions& options, const std::string& fenced, int run,
                           std::uint64_t run_seed, const std::string& dir) {
  RunServers servers;
  if (Status s = StartServers(options, fenced, dir, servers); !s.ok()) return s;
  std::string faults;  // what was done to the lock service, for report.txt
  const ClientPlan base = BasePlan(options, run, run_seed, dir, servers, faults);

  int stop[2];
  if (::pipe2(stop, O_CLOEXEC) != 0) return Status::Unavailable("pipe failed");
  const std::vector<pid_t> clients = ForkClients(base, options.clients, run_seed, stop[0], stop[1]);
  ::close(stop[0]);
  auto played = PlaySchedule(ScheduleOf(options, run_seed, static_cast<int>(clients.size())),
                             options.run_length, clients, servers, dir);
  ::close(stop[1]);  // clients finish their iteration and exit
  Status reaped = ReapClients(clients, SteadyClock::now() + std::chrono::seconds(15), false);
  if (!played.ok()) return played.status();
  if (!reaped.ok()) return reaped;
  faults += played->faults;

  auto input = ReadBack(servers.store.url(), base, run);
  if (!input.ok()) return input.status();
  servers.store.Stop();
  auto history = ReadHistory(base.history_path);
  if (!history.ok()) return history.status();
  input->history = std::move(history).value();

  RunOutcome outcome{CheckHistory(*input), played->etcd_leader_killed_and_back};
  std::ofstream out(dir + "/report.txt");
  out << "seed " << run_seed << "\n" << faults;
  for (const auto& v : outcome.report.violations) out << v << "\n";
  return outcome;
}

}  // namespace

std::string PauseTestSummary::Line() const {
  return "pause-runs: runs=" + std::to_string(runs) +
         " stale_accepted=" + std::to_string(stale_accepted) +
         " lost_updates=" + std::to_string(lost_updates) +
         " expired_leases=" + std::to_string(expired_leases);
}

Result<PauseTestSummary> RunPauseTests(const PauseTestOptions& options) {
  if (Status s = CheckOptions(options); !s.ok()) return s;
  auto fenced = FindFenced(options.fenced_path);
  if (!fenced.ok()) return fenced.status();
  if (!options.locks_uri.empty()) {  // fail fast, before forking, if the service is unusable
    auto probe = LockClient::Open(options.locks_uri);
    if (!probe.ok()) return probe.status();
    auto info = (*probe)->Inspect("pause-test-probe");
    if (!info.ok()) return info.status();
  }

  auto work = MakeWorkDir(options.work_dir);
  if (!work.ok()) return work.status();
  PauseTestSummary summary;
  summary.work_dir = *work;
  std::error_code ec;
  for (int run = 0; run < options.runs; ++run) {
    const std::uint64_t run_seed = options.seed * 1'000'003ULL + static_cast<std::uint64_t>(run);
    const std::string dir = *work + "/run-" + std::to_string(run);
    fs::remove_all(dir, ec);
    fs::create_directories(dir, ec);
    if (ec) return Status::Unavailable("cannot create " + dir + ": " + ec.message());
    auto outcome = RunOnce(options, *fenced, run, run_seed, dir);
    if (!outcome.ok()) {  // the run's files stay, for its logs: say where
      const Status& s = outcome.status();
      return Status::WithDetail(
          s.code(), s.message() + " (run " + std::to_string(run) + "'s files: " + dir + ")",
          nullptr);
    }
    const CheckReport& report = outcome->report;
    summary.runs += 1;
    summary.stale_accepted += report.stale_accepted;
    summary.lost_updates += report.lost_updates;
    summary.missing_acknowledged += report.missing_acknowledged;
    summary.expired_leases += report.expired_leases;
    summary.runs_with_expired_leases += report.expired_leases > 0;
    summary.acknowledged_writes += report.acknowledged_writes;
    summary.etcd_leader_kills += outcome->etcd_leader_killed_and_back;
    if (options.on_run) options.on_run(run, run_seed, report);
    if (report.ok() && !options.keep_all) fs::remove_all(dir, ec);
  }
  if (!options.keep_all && options.work_dir.empty() && summary.lost_updates == 0 &&
      summary.stale_accepted == 0 && summary.missing_acknowledged == 0) {
    fs::remove_all(*work, ec);
    if (!ec) summary.work_dir.clear();  // nothing left to show
  }
  return summary;
}

}  // namespace fencekit::pausetest
