// fencectl run: a command under a held lock, renewed while it runs, stopped when it is lost.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "fencectl_cli.h"
#include "fencectl_commands.h"
#include "fencekit/common/mutex.h"
#include "fencekit/lockclient/held_lock.h"
#include "fencekit/lockclient/lock_client.h"

namespace fencekit::fencectl {
namespace {

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
    MutexLock lock(mu_);
    if (lost_) return;
    lost_ = true;
    std::cerr << "fencectl: the lease on lock \"" << lease.lock << "\" (token "
              << lease.token.value() << ") was lost: " << why.message()
              << (terminate_ ? "; terminating the command" : "; the command goes on unprotected")
              << std::endl;
    if (!terminate_ || exited_) return;
    ForwardSignal(SIGTERM);
    killer_ = std::thread([this] {
      const auto deadline = std::chrono::steady_clock::now() + grace_;
      MutexLock lock(mu_);
      while (!exited_ && cv_.WaitUntil(mu_, deadline)) {
      }
      if (!exited_) {
        std::cerr << "fencectl: the command outlived --kill-grace; killing it" << std::endl;
        ForwardSignal(SIGKILL);
      }
    });
  }
  // The command has exited.
  void Exited() {
    {
      MutexLock lock(mu_);
      exited_ = true;
    }
    cv_.NotifyAll();
  }
  bool lost() {
    MutexLock lock(mu_);
    return lost_;
  }

 private:
  const bool terminate_;
  const std::chrono::milliseconds grace_;
  Mutex mu_;
  CondVar cv_;
  bool lost_ FENCEKIT_GUARDED_BY(mu_) = false;
  bool exited_ FENCEKIT_GUARDED_BY(mu_) = false;
  std::thread killer_;
};

}  // namespace

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
                     : (*client)->Acquire(name, *wait, *ttl);
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

}  // namespace fencekit::fencectl
