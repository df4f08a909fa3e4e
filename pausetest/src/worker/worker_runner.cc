#include "fencekit/pausetest/worker_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "fencekit/lockclient/lock_client.h"
#include "fencekit/pausetest/history.h"
#include "fencekit/procutil/etcd_cluster.h"
#include "fencekit/procutil/redis_server.h"
#include "run/run_schedule.h"
#include "run/run_timeline.h"
#include "check/run_verdict.h"
#include "worker/shell_command.h"
#include "run/work_dir.h"
#include "worker/worker_client.h"
#include "run/children.h"

namespace fencekit::pausetest {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
// Real time (not Clock) in this file: it plays schedules on, and reaps, real processes.
using SteadyClock = std::chrono::steady_clock;

bool Blank(const std::string& s) { return s.find_first_not_of(" \t\r\n") == std::string::npos; }

// FENCEKIT_PROXY_<NAME>, NAME upper-cased: what names a proxy to the workers.
std::string ProxyVariable(const WorkerProxy& p) {
  std::string name = "FENCEKIT_PROXY_";
  for (char ch : p.name) name += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return name;
}

Status CheckOptions(const WorkerTestOptions& o) {
  if (Blank(o.worker)) {
    return Status::InvalidArgument(
        "--worker is empty: give the command each client runs under the lock (an unset "
        "variable in a script?)");
  }
  // Not a usage error: the command could not be started, as one the shell does not find.
  for (auto [name, command] : {std::pair{"--check", &o.check}, std::pair{"--setup", &o.setup}}) {
    if (!command->empty() && Blank(*command)) {
      return Status::Unavailable(std::string(name) +
                                 " is an empty command, so it cannot be started (an unset "
                                 "variable in a script?); give the command, or leave " +
                                 name + " out");
    }
  }
  if (o.min_operations < -1) return Status::InvalidArgument("--min-operations must be >= 0");
  if (o.runs < 1) return Status::InvalidArgument("--runs must be at least 1");
  if (o.clients < 2) {
    return Status::InvalidArgument(
        "--clients must be at least 2: pauses matter only when another client can take the "
        "lock");
  }
  if (o.ttl < milliseconds(10)) return Status::InvalidArgument("--ttl must be >= 10ms");
  if (o.run_length < o.ttl) return Status::InvalidArgument("--run-length must be >= --ttl");
  if (o.pauses_per_run < 0) return Status::InvalidArgument("--pauses must be >= 0");
  if (o.holds_per_run < 0) return Status::InvalidArgument("--holds must be >= 0");
  if (o.holds_per_run > 0 && o.proxies.empty()) {
    return Status::InvalidArgument(
        "--holds needs --proxy NAME=HOST:PORT: the kit holds the traffic your workers send "
        "through its proxies (FENCEKIT_PROXY_NAME), and yours sends none");
  }
  std::set<std::string> names;
  for (const WorkerProxy& p : o.proxies) {
    if (!names.insert(ProxyVariable(p)).second) {
      return Status::InvalidArgument("--proxy " + p.name +
                                     "= is given twice (names are compared upper-cased)");
    }
  }
  if (o.lock.empty()) return Status::InvalidArgument("--lock must not be empty");
  const bool etcd =
      o.locks_uri.starts_with("etcd://") || o.locks_uri.starts_with("etcds://") || o.start_etcd > 0;
  if (etcd && o.ttl < milliseconds(1'000)) {
    return Status::InvalidArgument(
        "ttl " + std::to_string(o.ttl.count()) +
        "ms is too short for etcd: its leases are whole seconds; use --ttl 1s or more (and a "
        "--run-length of several seconds)");
  }
  if ((o.start_redis ? 1 : 0) + (o.start_etcd > 0 ? 1 : 0) + (o.locks_uri.empty() ? 0 : 1) > 1) {
    return Status::InvalidArgument(
        "--locks, --start-redis and --start-etcd each name the lock service; give one");
  }
  if (o.start_etcd < 0) return Status::InvalidArgument("--start-etcd must be >= 0");
  if (o.restart_locks && !o.start_redis) {
    return Status::InvalidArgument(
        "--restart-locks needs a lock service this command owns: add --start-redis");
  }
  if (o.failover_locks && !o.start_redis) {
    return Status::InvalidArgument(
        "--failover-locks needs a lock service this command owns: add --start-redis");
  }
  if (o.failover_locks && o.restart_locks) {
    return Status::InvalidArgument(
        "--failover-locks and --restart-locks are two faults of the same Redis; give one");
  }
  if (o.kill_etcd_leader && o.start_etcd < 3) {
    return Status::InvalidArgument(
        "--kill-etcd-leader needs an etcd cluster of 3 or more members this command owns: add "
        "--start-etcd 3 (with fewer, the others have no majority without the leader)");
  }
  for (auto [name, d] :
       {std::pair{"--worker-timeout", o.worker_timeout}, std::pair{"--kill-grace", o.kill_grace},
        std::pair{"--check-timeout", o.check_timeout}}) {
    if (d <= milliseconds(0)) return Status::InvalidArgument(std::string(name) + " must be > 0");
  }
  return Status::Ok();
}

// The lock service of the whole command (its Redis or etcd in `servers`, which the runs'
// faults restart), and each run's proxies.
struct LockService {
  RunServers servers;
  std::string uri;
};

Status StartLocks(const WorkerTestOptions& o, const std::string& work, LockService& locks) {
  locks.uri = o.locks_uri;
  locks.servers.lock = o.lock;
  if (o.start_redis && o.failover_locks) {
    std::error_code error;
    std::filesystem::create_directories(work + "/redis", error);
    if (Status s = locks.servers.redis_pair.Start(work + "/redis"); !s.ok()) return s;
    locks.uri = locks.servers.redis_pair.uri();
  } else if (o.start_redis) {
    if (Status s = locks.servers.redis.Start({.log_path = work + "/redis.log"}); !s.ok()) {
      return s;
    }
    locks.uri = locks.servers.redis.uri();
  } else if (o.start_etcd > 0) {
    if (Status s = locks.servers.etcd.Start({.members = o.start_etcd, .dir = work + "/etcd"});
        !s.ok()) {
      return s;
    }
    locks.uri = "etcd://";
    for (int m = 0; m < o.start_etcd; ++m) {
      locks.uri += (m ? ",127.0.0.1:" : "127.0.0.1:") +
                   std::to_string(locks.servers.etcd.client_port(m));
    }
  } else if (locks.uri.empty()) {
    locks.uri = "sqlite://" + work + "/locks.db";
  }
  auto probe = LockClient::Open(locks.uri);  // fail fast, before forking
  if (!probe.ok()) return probe.status();
  auto info = (*probe)->Inspect(o.lock);
  return info.ok() ? Status::Ok() : info.status();
}

// Per client, a proxy in front of each of `proxies`, and the variables naming them.
Status StartProxies(const std::vector<WorkerProxy>& proxies, int clients, RunServers& servers,
                    std::vector<std::vector<std::pair<std::string, std::string>>>& env) {
  servers.proxies.resize(clients);
  env.resize(clients);
  for (int c = 0; c < clients; ++c) {
    for (const WorkerProxy& p : proxies) {
      auto proxy = procutil::DelayProxy::Start(p.host, p.port);
      if (!proxy.ok()) {
        return Status::Unavailable("--proxy " + p.name + "=" + p.host + ":" +
                                   std::to_string(p.port) + ": " + proxy.status().message());
      }
      env[c].push_back({ProxyVariable(p), "127.0.0.1:" + std::to_string((*proxy)->port())});
      servers.proxies[c].push_back(std::move(*proxy));
    }
  }
  return Status::Ok();
}

// Starts the clients of one run, each a fresh run of this program (kWorkerClientCommand) leading
// its own process group. Everything the child needs is made before the fork: between fork and
// exec it makes only async-signal-safe calls.
std::vector<pid_t> ForkClients(const WorkerClientPlan& base, int count, int stop_write_fd,
                               const std::vector<std::vector<std::pair<std::string, std::string>>>&
                                   env) {
  std::vector<pid_t> clients;
  for (int c = 0; c < count; ++c) {
    WorkerClientPlan plan = base;
    plan.index = c;
    if (c < static_cast<int>(env.size())) plan.env = env[c];
    plan.history_path = base.run_dir + "/client-" + std::to_string(c) + ".history.jsonl";
    plan.events_path = base.run_dir + "/client-" + std::to_string(c) + ".events.jsonl";
    plan.log_path = base.run_dir + "/client-" + std::to_string(c) + ".log";
    std::string self = "/proc/self/exe", command = kWorkerClientCommand,
                encoded = EncodeWorkerClientPlan(plan);
    char* argv[] = {self.data(), command.data(), encoded.data(), nullptr};
    pid_t pid = ::fork();
    if (pid < 0) break;
    if (pid == 0) {
      ::setpgid(0, 0);
      ::close(stop_write_fd);
      // The stop pipe's read end and the ready pipe's write end stay open across exec.
      ::fcntl(plan.stop_fd, F_SETFD, 0);
      ::fcntl(plan.ready_fd, F_SETFD, 0);
      ::execv(argv[0], argv);
      ::_exit(127);
    }
    ::setpgid(pid, pid);  // both sides, so that it is set before a pause relies on it
    clients.push_back(pid);
  }
  return clients;
}

// Waits until `count` clients have said they run (a byte each on `fd`), all have exited or
// closed the pipe, or 30 s have passed: the run's schedule starts then, not while the clients
// are still being loaded.
void WaitUntilReady(int fd, int count) {
  const auto until = SteadyClock::now() + std::chrono::seconds(30);
  for (int ready = 0; ready < count;) {
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(until - SteadyClock::now()).count();
    if (left <= 0) return;
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    const int n = ::poll(&p, 1, static_cast<int>(left));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    char bytes[64];
    const ssize_t got = ::read(fd, bytes, sizeof bytes);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return;  // every client has closed its end
    ready += static_cast<int>(got);
  }
}

struct RunResult {
  Judgement judgement;
  int expired_leases = 0;
  int holds = 0;
  int lock_faults = 0;
  int invocations = 0;
  int worker_failures = 0;
};

// Writes the run's report.txt, and its timeline.html unless it passed.
void Report(const Judgement& j, std::uint64_t run_seed, const std::string& dir,
            RunRecord& record) {
  std::ofstream report(dir + "/report.txt");
  report << "run " << record.run << " seed " << run_seed << ": "
         << (j.verdict == RunVerdict::kPassed   ? std::string("passed")
             : j.verdict == RunVerdict::kFailed ? "FAILED\n" + j.why
                                                : "NOT JUDGED (the harness could not judge it)\n" +
                                                      j.why)
         << "\n";
  if (j.verdict == RunVerdict::kPassed) return;
  record.judged = j.verdict == RunVerdict::kFailed;
  record.verdict = record.judged ? j.why : "Not judged: " + j.why;
  std::ofstream(dir + "/timeline.html") << RenderRunTimeline(record);
}

// One seeded run in `dir`; `ok_before` invocations of earlier runs exited 0.
Result<RunResult> RunOnce(const WorkerTestOptions& o, LockService& locks, int run,
                          std::uint64_t run_seed, const std::string& dir, int ok_before) {
  const std::string& locks_uri = locks.uri;
  RunServers& servers = locks.servers;
  const std::vector<std::pair<std::string, std::string>> env = {
      {"FENCING_LOCK", o.lock}, {"FENCEKIT_RUN", std::to_string(run)}, {"FENCEKIT_RUN_DIR", dir}};
  RunWindow window{.from_us = NowMicros()};
  RunRecord record{.run = run, .seed = run_seed, .lock = o.lock, .origin_us = NowMicros()};
  if (!o.setup.empty()) {
    auto setup_env = env;
    setup_env.push_back({"FENCEKIT_CLIENT", "setup"});
    setup_env.push_back({"FENCEKIT_HISTORY", dir + "/setup.history.jsonl"});
    auto set = RunShell(o.setup, ShellEnvironment(setup_env), o.check_timeout, dir + "/setup.log");
    if (!set.ok()) return set.status();
    if (!set->ok()) {
      const int code = WIFEXITED(set->wait_status) ? WEXITSTATUS(set->wait_status) : 0;
      const std::string why =
          "--setup " + set->Describe() + " in run " + std::to_string(run) +
          (code == 127   ? " (the shell found no such command; fix the command)"
           : code == 126 ? " (the command is not executable; fix the command)"
                         : "") +
          " (see " + dir + "/setup.log)" + (set->output.empty() ? "" : ":\n" + Quote(set->output));
      std::ofstream(dir + "/report.txt") << "run " << run << " seed " << run_seed
                                         << ": NOT JUDGED (the harness could not judge it)\n"
                                         << why << "\n";
      return Status::Unavailable(why);
    }
    record.origin_us = NowMicros();
  }
  WorkerClientPlan base{.run = run,
                        .locks_uri = locks_uri,
                        .lock = o.lock,
                        .worker = o.worker,
                        .run_dir = dir,
                        .ttl = o.ttl,
                        .worker_timeout = o.worker_timeout,
                        .kill_grace = o.kill_grace};
  // The proxies of this run: a connection a worker left open in the last run's is gone.
  servers.proxies.clear();
  std::vector<std::vector<std::pair<std::string, std::string>>> proxy_env;
  if (Status s = StartProxies(o.proxies, o.clients, servers, proxy_env); !s.ok()) return s;
  int stop[2];
  if (::pipe2(stop, O_CLOEXEC) != 0) return Status::Unavailable("pipe failed");
  base.stop_fd = stop[0];
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) {
    ::close(stop[0]);
    ::close(stop[1]);
    return Status::Unavailable("pipe failed");
  }
  base.ready_fd = ready[1];
  const std::vector<pid_t> clients = ForkClients(base, o.clients, stop[1], proxy_env);
  ::close(stop[0]);
  ::close(ready[1]);
  WaitUntilReady(ready[0], static_cast<int>(clients.size()));
  ::close(ready[0]);
  std::vector<pid_t> groups;
  for (pid_t pid : clients) groups.push_back(-pid);  // a pause stops a client's whole group
  PauseTestOptions schedule{.restart_locks = o.restart_locks,
                            .kill_etcd_leader = o.kill_etcd_leader,
                            .ttl = o.ttl,
                            .run_length = o.run_length,
                            .pauses_per_run = o.pauses_per_run};
  auto played = PlaySchedule(
      ScheduleOf(schedule, run_seed, static_cast<int>(clients.size()), o.holds_per_run,
                 o.failover_locks),
      o.run_length, groups, servers, dir);
  ::close(stop[1]);  // clients let their worker finish (within kill_grace) and exit
  (void)ReapClients(
      clients, SteadyClock::now() + o.worker_timeout + 3 * o.kill_grace + std::chrono::seconds(5),
      /*whole_groups=*/true);
  window.to_us = NowMicros();
  servers.proxies.clear();
  if (!played.ok()) return played.status();
  // The next run starts with a primary and a replica again.
  if (o.failover_locks) {
    if (Status s = servers.redis_pair.Rejoin(); !s.ok()) return s;
  }
  if (static_cast<int>(clients.size()) < o.clients) return Status::Unavailable("fork failed");
  record.pauses = played->pauses;
  record.holds = played->holds;
  record.lock_faults = played->lock_faults;

  RunResult result;
  result.holds = static_cast<int>(played->holds.size());
  result.lock_faults = static_cast<int>(played->lock_faults.size());
  for (int c = 0; c < o.clients; ++c) {
    record.kit.push_back(ReadKitEvents(dir + "/client-" + std::to_string(c) + ".events.jsonl"));
    std::map<std::int64_t, std::int64_t> worker_end;  // token: when its invocation ended
    for (const auto& e : record.kit.back()) {
      if (e.event == "worker") {
        result.invocations += 1;
        result.worker_failures += e.failed;
        worker_end[e.token] = e.at_us;
      } else if (e.event == "expired") {
        auto it = worker_end.find(e.token);
        // Expired while in use: its worker was still running when the lease ran out.
        if (it != worker_end.end() && e.at_us < it->second) result.expired_leases += 1;
      }
    }
  }
  if (std::string why = WorkerCannotRun(record, ok_before, dir); !why.empty()) {
    result.judgement = {.verdict = RunVerdict::kNotJudged, .why = why};
  } else {
    result.judgement = JudgeRun(o, env, dir, window, record);
  }
  Report(result.judgement, run_seed, dir, record);
  return result;
}

}  // namespace

Result<WorkerProxy> ParseWorkerProxy(const std::string& text) {
  const auto usage = [&](const std::string& why) {
    return Status::InvalidArgument("--proxy " + text + ": " + why +
                                   "; give NAME=HOST:PORT, e.g. --proxy store=127.0.0.1:8080");
  };
  const std::size_t eq = text.find('=');
  if (eq == std::string::npos) return usage("no '='");
  WorkerProxy p;
  p.name = text.substr(0, eq);
  if (p.name.empty() || !std::isalpha(static_cast<unsigned char>(p.name[0])) ||
      p.name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") !=
          std::string::npos) {
    return usage("NAME must be a letter, then letters, digits or '_' (it names a variable)");
  }
  const std::string address = text.substr(eq + 1);
  const std::size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) return usage("no HOST:PORT after '='");
  p.host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  int value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value < 1 ||
      value > 65535) {
    return usage("PORT must be a number from 1 to 65535");
  }
  p.port = static_cast<std::uint16_t>(value);
  return p;
}

std::string WorkerTestSummary::Line() const {
  return "pause-runs: runs=" + std::to_string(runs) +
         " failed_runs=" + std::to_string(failed_runs) +
         " expired_leases=" + std::to_string(expired_leases) +
         " operations=" + std::to_string(operations);
}

Result<WorkerTestSummary> RunWorkerPauseTests(const WorkerTestOptions& o) {
  if (Status s = CheckOptions(o); !s.ok()) return s;
  auto work = MakeWorkDir(o.work_dir);
  if (!work.ok()) return work.status();
  WorkerTestSummary summary;
  summary.work_dir = *work;
  LockService locks;
  if (Status s = StartLocks(o, *work, locks); !s.ok()) return s;
  std::error_code ec;
  for (int run = 0; run < o.runs; ++run) {
    const std::uint64_t run_seed = o.seed * 1'000'003ULL + static_cast<std::uint64_t>(run);
    const std::string dir = *work + "/run-" + std::to_string(run);
    fs::remove_all(dir, ec);
    fs::create_directories(dir, ec);
    if (ec) return Status::Unavailable("cannot create " + dir + ": " + ec.message());
    auto result = RunOnce(o, locks, run, run_seed, dir,
                          summary.worker_invocations - summary.worker_failures);
    if (!result.ok()) return result.status();
    const Judgement& j = result->judgement;
    if (j.verdict == RunVerdict::kNotJudged) {  // its folder stays, for its logs and report
      return Status::Unavailable(j.why + " (run " + std::to_string(run) + "'s files: " + dir +
                                 ")");
    }
    summary.runs += 1;
    summary.failed_runs += j.verdict == RunVerdict::kFailed;
    summary.expired_leases += result->expired_leases;
    summary.holds += result->holds;
    summary.lock_faults += result->lock_faults;
    summary.runs_with_expired_leases += result->expired_leases > 0;
    summary.worker_invocations += result->invocations;
    summary.worker_failures += result->worker_failures;
    summary.operations += j.operations;
    if (o.on_run) {
      std::string line = "invocations=" + std::to_string(result->invocations) +
                         " failed_invocations=" + std::to_string(result->worker_failures) +
                         " expired_leases=" + std::to_string(result->expired_leases) +
                         " operations=" + std::to_string(j.operations);
      if (j.verdict == RunVerdict::kFailed) {
        line += "\n  " + j.why + "\n  timeline: " + dir + "/timeline.html";
      }
      o.on_run(run, run_seed, j.verdict == RunVerdict::kFailed, line);
    }
    if (j.verdict == RunVerdict::kPassed && !o.keep_all) fs::remove_all(dir, ec);
  }
  if (!o.keep_all && o.work_dir.empty() && summary.failed_runs == 0) {
    fs::remove_all(*work, ec);
    if (!ec) summary.work_dir.clear();
  }
  return summary;
}

}  // namespace fencekit::pausetest
