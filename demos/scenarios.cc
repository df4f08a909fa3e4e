// The scenarios of fencekit-demo: each drives clients A and B through one of Kleppmann's
// failures and sets the timeline's verdict.
#include <signal.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "client_role.h"
#include "demo.h"
#include "fencekit/procutil/delay_proxy.h"

namespace fencekit::demo {

// gc-pause: A is frozen (SIGSTOP) past its lease. slow-network: A's write is delayed in flight.
std::string Demo::GcPause(bool slow_network) {
  std::unique_ptr<procutil::DelayProxy> proxy;
  if (slow_network) {
    auto started = procutil::DelayProxy::Start(store_port_);
    if (!started.ok()) return started.status().message();
    proxy = std::move(started).value();
    proxy->HoldWhen("");  // A's write, the first thing sent through it
  }
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
// store still refuses the newcomer: the emptied Redis has a new lock-service identity, and the
// fence is bound to the old one (its token is lower too).
std::string Demo::LockServiceRestart() {
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
    timeline_.verdict =
        timeline_.lesson_shown
            ? "two holders at once, but the store refused B's token (" + std::to_string(tb) +
                  ", below A's " + std::to_string(ta) +
                  "): the emptied Redis is a new lock service, whose tokens the fence does not "
                  "take. Only one holder's writes reached storage"
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
std::string Demo::ClockJump() {
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

}  // namespace fencekit::demo
