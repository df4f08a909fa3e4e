#include "fencekit/pausetest/runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "fencekit/httpapi/store_client.h"
#include "fencekit/lockclient/lock_client.h"
#include "fencekit/pausetest/pauser.h"
#include "fencekit/procutil/etcd_cluster.h"
#include "fencekit/procutil/fenced_server.h"
#include "fencekit/procutil/redis_server.h"

namespace fencekit::pausetest {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

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

bool StopRequested(int stop_fd) {
  pollfd p{stop_fd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

struct ClientPlan {
  int index = 0;
  std::string locks_uri, lock, key, claim_key, store_url, history_path;
  milliseconds ttl{0}, max_delay{0};
  std::uint64_t seed = 0;
  int stop_fd = -1;
};

// The body of one client process: acquire, claim, read, write counter + 1, release; until the
// stop pipe closes. Every operation is recorded as it ends.
int ClientMain(const ClientPlan& plan) {
  auto history = HistoryWriter::Open(plan.history_path);
  if (!history.ok()) return 3;
  LockOptions lock_options;
  lock_options.ttl = plan.ttl;
  auto locks = LockClient::Open(plan.locks_uri, lock_options);
  auto store = StoreClient::Open(plan.store_url, {.timeout = milliseconds(2'000)});
  if (!locks.ok() || !store.ok()) {
    HistoryOp op{plan.index, "acquire", plan.lock};
    op.outcome = "error";
    op.detail = !locks.ok() ? locks.status().ToString() : store.status().ToString();
    op.start_us = op.end_us = NowMicros();
    (void)history->Append(op);
    return 3;
  }
  std::mt19937_64 rng(plan.seed);
  while (!StopRequested(plan.stop_fd)) {
    HistoryOp op{plan.index, "acquire", plan.lock};
    op.start_us = NowMicros();
    auto lease = (*locks)->Acquire(plan.lock, SteadyClock::now() + std::chrono::seconds(2));
    op.end_us = NowMicros();
    if (!lease.ok()) {
      op.outcome = lease.status().IsTimeout() ? "timeout" : "error";
      op.detail = lease.status().ToString();
      (void)history->Append(op);
      continue;
    }
    const FencingToken token = lease->token;
    op.token = token.value();
    op.outcome = "ok";
    (void)history->Append(op);
    auto record = [&](HistoryOp& o, const Status& s) {
      o.end_us = NowMicros();
      o.token = token.value();
      o.outcome = s.ok() ? "ok" : s.IsStaleToken() ? "stale" : "error";
      if (!s.ok()) o.detail = s.ToString();
      o.lease_expired = SteadyClock::now() > lease->valid_until;
      (void)history->Append(o);
      return s.ok();
    };
    bool done = false;
    // The claim raises the lock's fence to this token before the read, so a write by an older
    // holder that read before this one cannot land afterwards.
    HistoryOp claim{plan.index, "claim", plan.lock, 0, plan.claim_key, plan.index};
    claim.start_us = NowMicros();
    done = !record(
        claim,
        (*store)->Put(plan.lock, token, plan.claim_key, std::to_string(plan.index)).status());
    std::int64_t value = 0;
    if (!done) {
      HistoryOp read{plan.index, "read", plan.lock, 0, plan.key};
      read.start_us = NowMicros();
      auto got = (*store)->Get(plan.key);
      Status s = got.status();
      if (got.ok()) {
        value = std::atoll(got->value.c_str());
      } else if (got.status().IsNotFound()) {
        s = Status::Ok();
      }
      read.value = value;
      done = !record(read, s);
    }
    if (!done && plan.max_delay.count() > 0) {
      std::uniform_int_distribution<long long> delay(0, plan.max_delay.count());
      std::this_thread::sleep_for(milliseconds(delay(rng)));
    }
    if (!done) {
      HistoryOp write{plan.index, "write", plan.lock, 0, plan.key, value + 1};
      write.start_us = NowMicros();
      Status s = (*store)->Put(plan.lock, token, plan.key, std::to_string(value + 1)).status();
      record(write, s);
      if (s.IsStaleToken()) {
        // Told by the store: this lease is lost. Release anyway, to record what the service says.
      }
    }
    HistoryOp release{plan.index, "release", plan.lock};
    release.start_us = NowMicros();
    Status s = (*locks)->Release(*lease);
    release.end_us = NowMicros();
    release.token = token.value();
    release.outcome = s.ok() ? "ok" : s.IsNotHeld() ? "not_held" : "error";
    if (!s.ok()) release.detail = s.ToString();
    release.lease_expired = SteadyClock::now() > lease->valid_until;
    (void)history->Append(release);
  }
  return 0;
}

struct Event {
  milliseconds at;
  enum Kind {
    kPause,
    kResume,
    kKillStore,
    kRestartLocks,
    kKillEtcdLeader,
    kRestartEtcdMember
  } kind;
  int target = 0;
};

}  // namespace

std::string PauseTestSummary::Line() const {
  return "pause-runs: runs=" + std::to_string(runs) +
         " stale_accepted=" + std::to_string(stale_accepted) +
         " lost_updates=" + std::to_string(lost_updates) +
         " expired_leases=" + std::to_string(expired_leases);
}

Result<PauseTestSummary> RunPauseTests(const PauseTestOptions& options) {
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
  auto fenced = FindFenced(options.fenced_path);
  if (!fenced.ok()) return fenced.status();

  // Every refusal comes before the work directory is made, so that none is left behind.
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
  if (!options.locks_uri.empty()) {  // fail fast, before forking, if the service is unusable
    auto probe = LockClient::Open(options.locks_uri);
    if (!probe.ok()) return probe.status();
    auto info = (*probe)->Inspect("pause-test-probe");
    if (!info.ok()) return info.status();
  }

  PauseTestSummary summary;
  std::string work = options.work_dir;
  if (work.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/fencekit-pause-test-XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) {
      return Status::Unavailable("cannot create a work directory under " + templ);
    }
    work = templ;
  }
  std::error_code ec;
  fs::create_directories(work, ec);
  if (ec) return Status::Unavailable("cannot create " + work + ": " + ec.message());
  summary.work_dir = work;

  for (int run = 0; run < options.runs; ++run) {
    const std::uint64_t run_seed = options.seed * 1'000'003ULL + static_cast<std::uint64_t>(run);
    const std::string dir = work + "/run-" + std::to_string(run);
    fs::remove_all(dir, ec);
    fs::create_directories(dir, ec);
    if (ec) return Status::Unavailable("cannot create " + dir + ": " + ec.message());

    procutil::FencedServer store;
    if (Status s = store.Start(FencedFor(*fenced, dir, options.fencing)); !s.ok()) return s;
    const std::string url = store.url();

    // Without persistence: a restart loses every key, counters included.
    procutil::RedisServer redis;
    if (options.start_redis) {
      if (Status s = redis.Start({.log_path = dir + "/redis.log"}); !s.ok()) return s;
    }

    procutil::EtcdCluster etcd_cluster;
    if (options.start_etcd > 0) {
      if (Status s = etcd_cluster.Start({.members = options.start_etcd, .dir = dir + "/etcd"});
          !s.ok()) {
        return s;
      }
    }

    ClientPlan base;
    base.locks_uri = options.locks_uri;
    if (options.start_redis) base.locks_uri = redis.uri();
    std::string faults;  // what was done to the lock service, for report.txt
    if (options.start_etcd > 0) {
      // Clients try the members in this order: from a seeded one on, so that the leader killed
      // is in some runs the member they talk to and in others one behind it.
      const int first = static_cast<int>(run_seed % static_cast<std::uint64_t>(options.start_etcd));
      base.locks_uri = "etcd://";
      for (int i = 0; i < options.start_etcd; ++i) {
        int m = (first + i) % options.start_etcd;
        base.locks_uri +=
            (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(etcd_cluster.client_port(m));
      }
      faults += "clients' first etcd endpoint: m" + std::to_string(first) + "\n";
    }
    if (base.locks_uri.empty()) base.locks_uri = "sqlite://" + dir + "/locks.db";
    base.lock = "pause-test-" + std::to_string(options.seed) + "-" + std::to_string(run);
    base.key = base.lock + "/counter";
    base.claim_key = base.lock + "/claim";
    base.store_url = url;
    base.history_path = dir + "/history.jsonl";
    base.ttl = options.ttl;
    base.max_delay = options.max_delay;

    int stop[2];
    if (::pipe2(stop, O_CLOEXEC) != 0) return Status::Unavailable("pipe failed");
    std::vector<pid_t> clients;
    for (int c = 0; c < options.clients; ++c) {
      ClientPlan plan = base;
      plan.index = c;
      plan.seed = run_seed * 31 + static_cast<std::uint64_t>(c) + 1;
      plan.stop_fd = stop[0];
      pid_t pid = ::fork();
      if (pid < 0) break;
      if (pid == 0) {
        ::close(stop[1]);
        ::_exit(ClientMain(plan));
      }
      clients.push_back(pid);
    }
    ::close(stop[0]);

    std::vector<Event> events;
    for (const auto& p :
         MakePauseSchedule(run_seed, static_cast<int>(clients.size()), options.pauses_per_run,
                           options.run_length, options.ttl)) {
      events.push_back({p.at, Event::kPause, p.target});
      events.push_back({p.at + p.length, Event::kResume, p.target});
    }
    if (options.kill_store) {
      std::mt19937_64 rng(run_seed ^ 0x5bd1e995);
      auto quarter = options.run_length.count() / 4;
      events.push_back({milliseconds(quarter + static_cast<long long>(rng() % (2 * quarter + 1))),
                        Event::kKillStore, 0});
    }
    if (options.restart_locks) {
      std::mt19937_64 rng(run_seed ^ 0x27d4eb2f);
      auto quarter = options.run_length.count() / 4;
      events.push_back({milliseconds(quarter + static_cast<long long>(rng() % (2 * quarter + 1))),
                        Event::kRestartLocks, 0});
    }
    if (options.kill_etcd_leader) {
      std::mt19937_64 rng(run_seed ^ 0x165667b1);
      const long long eighth = options.run_length.count() / 8;
      const long long kill = 2 * eighth + static_cast<long long>(rng() % (2 * eighth + 1));
      const long long down = eighth + static_cast<long long>(rng() % (2 * eighth + 1));
      events.push_back({milliseconds(kill), Event::kKillEtcdLeader, 0});
      events.push_back({milliseconds(kill + down), Event::kRestartEtcdMember, 0});
    }
    std::stable_sort(events.begin(), events.end(),
                     [](const Event& a, const Event& b) { return a.at < b.at; });

    ProcessPauser pauser;
    std::vector<int> depth(clients.size(), 0);  // overlapping pauses of one client nest
    Status harness = Status::Ok();
    int killed_leader = -1;
    bool leader_killed_and_back = false;
    const auto start = SteadyClock::now();
    auto since_start = [&] {
      return std::to_string(
                 std::chrono::duration_cast<milliseconds>(SteadyClock::now() - start).count()) +
             "ms";
    };
    for (const Event& e : events) {
      if (e.at >= options.run_length) break;  // ResumeAll below ends the pauses still on
      std::this_thread::sleep_until(start + e.at);
      switch (e.kind) {
        case Event::kPause:
          if (depth[e.target]++ == 0) pauser.Pause(clients[e.target]);
          break;
        case Event::kResume:
          if (--depth[e.target] == 0) pauser.Resume(clients[e.target]);
          break;
        case Event::kKillStore:  // SIGKILL, then the same database on the same port
          if (Status s = store.Restart(); !s.ok()) harness = s;
          break;
        case Event::kRestartLocks:
          if (Status s = redis.Restart(); !s.ok()) harness = s;
          break;
        case Event::kKillEtcdLeader:
          killed_leader = etcd_cluster.Leader();
          if (killed_leader < 0) {
            harness = Status::Unavailable("the etcd cluster had no leader to kill for 10s; see " +
                                          dir + "/etcd/*.log");
          } else {
            etcd_cluster.Kill(killed_leader);
            faults += "etcd leader m" + std::to_string(killed_leader) + " SIGKILLed at " +
                      since_start() + "\n";
          }
          break;
        case Event::kRestartEtcdMember: {
          if (killed_leader < 0) break;
          // The survivors must have elected another leader meanwhile.
          int next = etcd_cluster.Leader();
          if (next < 0 || next == killed_leader) {
            harness = Status::Unavailable(
                "after the etcd leader was killed, the other members elected no leader within "
                "10s; see " +
                dir + "/etcd/*.log");
          } else {
            faults += "m" + std::to_string(next) + " leader meanwhile; m" +
                      std::to_string(killed_leader) + " restarted at " + since_start();
            if (Status s = etcd_cluster.Restart(killed_leader); !s.ok()) {
              harness = s;
            } else {
              leader_killed_and_back = true;
              faults += ", back with a leader at " + since_start() + "\n";
            }
          }
          break;
        }
      }
    }
    std::this_thread::sleep_until(start + options.run_length);
    pauser.ResumeAll();
    ::close(stop[1]);  // clients finish their iteration and exit
    auto wait_deadline = SteadyClock::now() + std::chrono::seconds(15);
    for (pid_t pid : clients) {
      for (;;) {
        int status = 0;
        pid_t r = ::waitpid(pid, &status, WNOHANG);
        if (r == pid || r < 0) break;
        if (SteadyClock::now() > wait_deadline) {
          ::kill(pid, SIGKILL);
          ::waitpid(pid, nullptr, 0);
          if (harness.ok()) harness = Status::Unavailable("a client did not stop within 15s");
          break;
        }
        std::this_thread::sleep_for(milliseconds(2));
      }
    }
    if (!harness.ok()) return harness;

    CheckInput input;
    {
      auto client = StoreClient::Open(url);
      if (!client.ok()) return client.status();
      auto log = (*client)->History(10'000);
      if (!log.ok()) return log.status();
      if (log->size() >= 10'000) {
        return Status::Internal("run " + std::to_string(run) +
                                " made over 10,000 store "
                                "decisions, more than the checker can read back; shorten "
                                "--run-length");
      }
      input.store_log = std::move(log).value();
      auto final_value = (*client)->Get(base.key);
      if (final_value.ok()) {
        input.final_counters[base.key] = std::atoll(final_value->value.c_str());
      } else if (!final_value.status().IsNotFound()) {
        return final_value.status();
      }
    }
    store.Stop();
    auto history = ReadHistory(base.history_path);
    if (!history.ok()) return history.status();
    input.history = std::move(history).value();

    CheckReport report = CheckHistory(input);
    {
      std::ofstream out(dir + "/report.txt");
      out << "seed " << run_seed << "\n" << faults;
      for (const auto& v : report.violations) out << v << "\n";
    }
    summary.runs += 1;
    summary.stale_accepted += report.stale_accepted;
    summary.lost_updates += report.lost_updates;
    summary.missing_acknowledged += report.missing_acknowledged;
    summary.expired_leases += report.expired_leases;
    summary.runs_with_expired_leases += report.expired_leases > 0;
    summary.acknowledged_writes += report.acknowledged_writes;
    summary.etcd_leader_kills += leader_killed_and_back;
    if (options.on_run) options.on_run(run, run_seed, report);
    if (report.ok() && !options.keep_all) fs::remove_all(dir, ec);
  }
  if (!options.keep_all && options.work_dir.empty() && summary.lost_updates == 0 &&
      summary.stale_accepted == 0 && summary.missing_acknowledged == 0) {
    fs::remove_all(work, ec);
    if (!ec) summary.work_dir.clear();  // nothing left to show
  }
  return summary;
}

}  // namespace fencekit::pausetest
