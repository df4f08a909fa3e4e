#include "worker/worker_client.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <cstdlib>
#include <fstream>

#include "fencekit/lockclient/held_lock.h"
#include "fencekit/lockclient/lock_client.h"
#include "fencekit/pausetest/history.h"
#include "fencekit/procutil/child_process.h"
#include "worker/shell_command.h"
#include "run/children.h"

namespace fencekit::pausetest {
namespace {

using std::chrono::milliseconds;
// Real time (not Clock) in this file: it plays schedules on, and reaps, real processes.
using SteadyClock = std::chrono::steady_clock;

// Appends KitEvent lines, each in one write(2).
// Thread safety: not safe for concurrent use.
class EventLog {
 public:
  explicit EventLog(const std::string& path)
      : fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) {}
  ~EventLog() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  void Append(const KitEvent& e) {
    boost::json::object o{{"event", e.event},   {"token", e.token},       {"start_us", e.start_us},
                          {"at_us", e.at_us},   {"detail", e.detail},     {"failed", e.failed},
                          {"exit_code", e.exit_code}};
    std::string line = boost::json::serialize(o) + "\n";
    (void)!::write(fd_, line.data(), line.size());
  }

 private:
  int fd_;
};

// Wall-clock microseconds of a moment on the steady clock.
std::int64_t WallAt(SteadyClock::time_point t) {
  return NowMicros() -
         std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now() - t).count();
}

// SIGKILLs every other process of this process's group (the worker and what it started), which
// a SIGKILL of the group would do to this one too. Repeated, since they may still be forking.
void KillOthersInGroup() {
  const pid_t self = ::getpid(), group = ::getpgrp();
  for (int round = 0; round < 10; ++round) {
    int found = 0;
    if (DIR* proc = ::opendir("/proc")) {
      while (dirent* d = ::readdir(proc)) {
        const pid_t pid = static_cast<pid_t>(std::atoi(d->d_name));
        if (pid <= 0 || pid == self || ::getpgid(pid) != group) continue;
        ::kill(pid, SIGKILL);
        ++found;
      }
      ::closedir(proc);
    }
    if (found == 0) return;
  }
}

// Runs the worker (forked, in this process's group, so that a pause stops it with the
// renewer) and waits for it: at most plan.worker_timeout, and plan.kill_grace once the run is
// over; then SIGTERM to the group (this process ignores it), then SIGKILL after kill_grace.
// Returns how it ended; `failed` when it did not exit 0 (unless stopped at the run's end),
// `exit_code` its exit code (-1: a signal ended it).
std::string RunWorker(const WorkerClientPlan& plan, const ShellEnvironment& env, int log_fd,
                      bool& failed, int& exit_code) {
  const pid_t pid = ::fork();
  if (pid < 0) {
    failed = true;
    return "not started: fork failed";
  }
  if (pid == 0) ExecShell(plan.worker.c_str(), env.envp(), log_fd);
  const int pidfd = procutil::OpenExitFd(pid);
  auto deadline = SteadyClock::now() + plan.worker_timeout;
  int stage = 0;  // 0 running, 1 sent SIGTERM, 2 sent SIGKILL
  bool stop_seen = false;
  bool at_run_end = false;  // SIGTERM because the run was over, not for its timeout
  std::string why;
  int status = -1;  // stays -1, a failure, if waitpid cannot reap it
  bool reaped = false;
  for (;;) {
    const auto now = SteadyClock::now();
    if (now >= deadline) {
      if (stage == 0) {
        at_run_end = stop_seen;
        why = stop_seen ? "the run was over" : "it outran --worker-timeout";
        ::kill(-::getpgrp(), SIGTERM);
        stage = 1;
      } else {
        KillOthersInGroup();
        stage = 2;
      }
      deadline = now + plan.kill_grace;
    }
    pollfd fds[2] = {{pidfd, POLLIN, 0}, {plan.stop_fd, POLLIN, 0}};
    const int nfds = stop_seen ? 1 : 2;
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - now).count();
    if (pidfd < 0) {  // no pidfd: look at the child every few milliseconds
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        reaped = true;
        break;
      }
      fds[0].fd = -1;
    }
    const int timeout = static_cast<int>(std::clamp<long long>(left, 0, pidfd < 0 ? 5 : 60'000));
    if (::poll(fds, nfds, timeout) > 0) {
      if (fds[0].revents != 0) break;
      if (nfds == 2 && fds[1].revents != 0) {
        stop_seen = true;
        if (stage == 0) deadline = std::min(deadline, SteadyClock::now() + plan.kill_grace);
      }
    }
  }
  if (pidfd >= 0) ::close(pidfd);
  if (!reaped) ::waitpid(pid, &status, 0);
  // Stopped because the run was over is the kit's doing, not a failure of the worker.
  failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0) && !at_run_end;
  exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::string how = DescribeWaitStatus(status);
  if (stage > 0)
    how += std::string(stage == 1 ? " after SIGTERM" : " after SIGKILL") + " (" + why + ")";
  return how;
}

// Waits until the stop pipe says so or `wait` has passed.
void WaitForStop(int stop_fd, milliseconds wait) {
  pollfd p{stop_fd, POLLIN, 0};
  ::poll(&p, 1, static_cast<int>(wait.count()));
}

}  // namespace

int WorkerClientMain(const WorkerClientPlan& plan) {
  ::signal(SIGTERM, SIG_IGN);  // sent to the group for the worker's sake
  if (plan.ready_fd >= 0) {
    ssize_t ignored = ::write(plan.ready_fd, "r", 1);
    (void)ignored;
    ::close(plan.ready_fd);
  }
  EventLog events(plan.events_path);
  const int log_fd = ::open(plan.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (!events.ok() || log_fd < 0) return 3;
  LockOptions lock_options;
  lock_options.ttl = plan.ttl;
  auto locks = LockClient::Open(plan.locks_uri, lock_options);
  if (!locks.ok()) {
    events.Append({.event = "error", .at_us = NowMicros(), .detail = locks.status().ToString()});
    return 3;
  }
  while (!StopRequested(plan.stop_fd)) {
    auto lease = (*locks)->Acquire(plan.lock, milliseconds(500));
    if (!lease.ok()) {
      if (!lease.status().IsTimeout()) {
        events.Append(
            {.event = "error", .at_us = NowMicros(), .detail = lease.status().ToString()});
        WaitForStop(plan.stop_fd, milliseconds(100));  // not a busy loop on a failing service
      }
      continue;
    }
    const std::int64_t token = lease->token.value();
    events.Append({.event = "grant", .token = token, .at_us = NowMicros()});
    std::atomic<std::int64_t> lost_until_us{0};  // set by the renewal thread
    HeldLock held(**locks, *lease,
                  {.auto_renew = true, .on_lost = [&lost_until_us](const Lease& l, const Status&) {
                     lost_until_us = WallAt(l.valid_until);
                   }});
    std::vector<std::pair<std::string, std::string>> vars = {
        {"FENCING_LOCK", lease->lock},
        {"FENCING_TOKEN", lease->token.ToString()},
        {"FENCING_OWNER", lease->owner},
        {"FENCING_SERVICE", lease->service},
        {"FENCEKIT_RUN", std::to_string(plan.run)},
        {"FENCEKIT_CLIENT", std::to_string(plan.index)},
        {"FENCEKIT_RUN_DIR", plan.run_dir},
        {"FENCEKIT_HISTORY", plan.history_path}};
    vars.insert(vars.end(), plan.env.begin(), plan.env.end());
    const ShellEnvironment env(vars);
    const std::string header =
        "--- client " + std::to_string(plan.index) + ", token " + std::to_string(token) + "\n";
    (void)!::write(log_fd, header.data(), header.size());
    const std::int64_t start_us = NowMicros();
    bool failed = false;
    int exit_code = -1;
    std::string how = RunWorker(plan, env, log_fd, failed, exit_code);
    events.Append({.event = "worker",
                   .token = token,
                   .start_us = start_us,
                   .at_us = NowMicros(),
                   .detail = how,
                   .failed = failed,
                   .exit_code = exit_code});
    Status released = held.Release();
    std::int64_t expired_at = lost_until_us.load();
    if (expired_at == 0 && (released.IsNotHeld() || held.lost())) {
      expired_at = WallAt(held.lease().valid_until);
    }
    if (expired_at != 0) events.Append({.event = "expired", .token = token, .at_us = expired_at});
    events.Append({.event = "release",
                   .token = token,
                   .at_us = NowMicros(),
                   .detail = released.ok()          ? "ok"
                             : released.IsNotHeld() ? "not_held"
                                                    : released.ToString()});
  }
  ::close(log_fd);
  return 0;
}

std::string EncodeWorkerClientPlan(const WorkerClientPlan& plan) {
  boost::json::array env;
  for (const auto& [name, value] : plan.env) env.push_back(boost::json::array{name, value});
  boost::json::object o{{"index", plan.index},
                        {"run", plan.run},
                        {"locks_uri", plan.locks_uri},
                        {"lock", plan.lock},
                        {"worker", plan.worker},
                        {"run_dir", plan.run_dir},
                        {"history_path", plan.history_path},
                        {"events_path", plan.events_path},
                        {"log_path", plan.log_path},
                        {"ttl_ms", plan.ttl.count()},
                        {"worker_timeout_ms", plan.worker_timeout.count()},
                        {"kill_grace_ms", plan.kill_grace.count()},
                        {"stop_fd", plan.stop_fd},
                        {"ready_fd", plan.ready_fd},
                        {"env", std::move(env)}};
  return boost::json::serialize(o);
}

Result<WorkerClientPlan> DecodeWorkerClientPlan(std::string_view text) {
  boost::system::error_code ec;
  auto v = boost::json::parse(text, ec);
  auto bad = [] { return Status::InvalidArgument("not a pause-test client's plan"); };
  if (ec || !v.is_object()) return bad();
  const auto& o = v.as_object();
  WorkerClientPlan plan;
  try {
    plan.index = static_cast<int>(o.at("index").as_int64());
    plan.run = static_cast<int>(o.at("run").as_int64());
    for (auto [key, field] : {std::pair{"locks_uri", &plan.locks_uri}, {"lock", &plan.lock},
                              {"worker", &plan.worker}, {"run_dir", &plan.run_dir},
                              {"history_path", &plan.history_path},
                              {"events_path", &plan.events_path}, {"log_path", &plan.log_path}}) {
      *field = std::string(o.at(key).as_string());
    }
    plan.ttl = std::chrono::milliseconds(o.at("ttl_ms").as_int64());
    plan.worker_timeout = std::chrono::milliseconds(o.at("worker_timeout_ms").as_int64());
    plan.kill_grace = std::chrono::milliseconds(o.at("kill_grace_ms").as_int64());
    plan.stop_fd = static_cast<int>(o.at("stop_fd").as_int64());
    plan.ready_fd = static_cast<int>(o.at("ready_fd").as_int64());
    for (const auto& pair : o.at("env").as_array()) {
      const auto& a = pair.as_array();
      plan.env.emplace_back(std::string(a.at(0).as_string()), std::string(a.at(1).as_string()));
    }
  } catch (const std::exception&) {
    return bad();
  }
  return plan;
}

int WorkerClientEntry(int argc, char** argv) {
  if (argc != 3) return 70;
  auto plan = DecodeWorkerClientPlan(argv[2]);
  if (!plan.ok()) return 70;
  return WorkerClientMain(*plan);
}

std::vector<KitEvent> ReadKitEvents(const std::string& path) {
  std::vector<KitEvent> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    boost::system::error_code ec;
    auto v = boost::json::parse(line, ec);
    if (ec || !v.is_object()) continue;
    const auto& o = v.as_object();
    KitEvent e;
    auto str = [&](const char* k) {
      auto* p = o.if_contains(k);
      return p && p->is_string() ? std::string(p->as_string()) : std::string();
    };
    auto num = [&](const char* k) {
      auto* p = o.if_contains(k);
      return p && p->is_int64() ? p->as_int64() : std::int64_t{0};
    };
    e.event = str("event");
    e.detail = str("detail");
    e.token = num("token");
    e.start_us = num("start_us");
    e.at_us = num("at_us");
    auto* f = o.if_contains("failed");
    e.failed = f && f->is_bool() && f->as_bool();
    auto* code = o.if_contains("exit_code");
    e.exit_code = code && code->is_int64() ? static_cast<int>(code->as_int64()) : -1;
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace fencekit::pausetest
