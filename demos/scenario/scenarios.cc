// The scenarios of fencekit-demo: each drives clients A and B through one of Kleppmann's
// failures and sets the timeline's verdict. The shared record is a balance (balance.h): A
// deposits 10 and B 20, each computing its new balance from what it read, so that a lost
// update can be read off the final value.
#include <signal.h>

#include <memory>
#include <string>

#include "scenario/balance.h"
#include "scenario/client_role.h"
#include "scenario/demo.h"
#include "fencekit/procutil/delay_proxy.h"
#include "scenario/redis_node.h"

namespace json = boost::json;

namespace fencekit::demo {
namespace {

constexpr int kDepositA = 10, kDepositB = 20;

std::string Joined(const std::vector<int>& nodes) {
  std::string out;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == nodes.size() ? " and " : ", ") + std::to_string(nodes[i]);
  }
  return out;
}

// The verdicts of a paused (or delayed) holder A and the holder after it, B.
void JudgeStaleWrite(Timeline& t, bool a_accepted, std::int64_t ta, std::int64_t tb,
                     const std::string& b_value, const std::string& a_value,
                     const std::string& what) {
  if (t.fencing) {
    t.lesson_shown = !a_accepted && t.final_value == b_value && ta < tb;
    t.verdict = t.lesson_shown
                    ? "stale write refused: " + what + ", but the store refused its token " +
                          std::to_string(ta) + " (it had seen " + std::to_string(tb) +
                          ") and kept B's deposit: \"" + b_value + "\""
                    : "unexpected: the stale write was not refused";
  } else {
    t.lesson_shown = a_accepted && t.final_value == a_value;
    t.verdict = t.lesson_shown ? "lost update: " + what +
                                     "; its balance, computed from what it read before "
                                     "B's deposit, overwrote B's: \"" +
                                     a_value + "\", B's +" + std::to_string(kDepositB) + " is gone"
                               : "unexpected: no lost update without fencing";
  }
}

}  // namespace

// gc-pause: A reads, computes, and is frozen (SIGSTOP) past its lease before it writes.
// slow-network: A reads, computes and sends its write, which the network holds past the lease.
std::string Demo::GcPause(bool slow_network) {
  std::unique_ptr<procutil::DelayProxy> proxy;
  if (slow_network) {
    auto started = procutil::DelayProxy::Start(store_port_);
    if (!started.ok()) return started.status().message();
    proxy = std::move(started).value();
    proxy->HoldWhen("PUT ");  // A's write; its read goes through
  }
  auto a = StartClient(
      "A", slow_network ? "http://127.0.0.1:" + std::to_string(proxy->port()) : store_url_);
  auto b = StartClient("B", store_url_);
  std::string error;
  std::int64_t ta = 0, tb = 0;
  if (!Acquire(*a, "A", ta, error) || !Read(*a, "A", ta, error)) return error;
  std::int64_t sent_at = 0;
  if (slow_network) {
    a->Send("deposit " + std::to_string(kDepositA));  // sent now; the network holds it
    sent_at = Now();
    if (!proxy->WaitForHeld(1, std::chrono::seconds(10)))
      return "A's write did not reach the proxy";
    Log("A", "sends its write (+" + std::to_string(kDepositA) + ")", ta, "held in the network",
        Kind::kSend);
  } else {
    a->Signal(SIGSTOP);
    Log("A", "stop-the-world pause (SIGSTOP) before it writes its +" + std::to_string(kDepositA),
        ta, "", Kind::kPause);
  }
  WaitForExpiry("A", ta);
  if (!Acquire(*b, "B", tb, error) || !Read(*b, "B", tb, error)) return error;
  auto b_answer = b->Ask("deposit " + std::to_string(kDepositB));
  const std::string b_value =
      b_answer.contains("value") ? std::string(b_answer["value"].as_string()) : "";
  LogWrite("B", b_answer);
  b->Stop();
  json::object a_answer;
  if (slow_network) {
    proxy->Release();
    a_answer = a->Answer();
    LogWrite("A", a_answer, sent_at);
  } else {
    a->Signal(SIGCONT);
    Log("A", "resumes (SIGCONT), still believes it holds the lock", ta, "", Kind::kResume);
    a_answer = a->Ask("deposit " + std::to_string(kDepositA));
    LogWrite("A", a_answer);
  }
  const bool a_accepted = a_answer["ok"].as_bool();
  const std::string a_value =
      a_answer.contains("value") ? std::string(a_answer["value"].as_string()) : "";
  a->Stop();
  if (auto err = FinalRead(); !err.empty()) return err;
  JudgeStaleWrite(timeline_, a_accepted, ta, tb, b_value, a_value,
                  slow_network ? "A's write was held in the network past its lease"
                               : "A was paused past its lease");
  return "";
}

// Redis restarted empty: its counter restarts, two clients hold the lock at once. With fencing
// the store refuses the newcomer B, whose token comes from a new lock service (the emptied
// Redis has a new identity), whatever its value; without, B's deposit is lost to A's.
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
  if (!Acquire(*a, "A", ta, error) || !Read(*a, "A", ta, error)) return error;
  LogWrite("A", a->Ask("deposit " + std::to_string(kDepositA)));
  // A's next deposit, computed from the balance as it is now.
  if (!Read(*a, "A", ta, error)) return error;
  if (auto err = RestartRedis(0); !err.empty()) return err;
  const std::int64_t restarted = Now();
  LogAt(restarted, "lock service",
        "Redis restarts without its data: the lock, its counter and its identity are gone",
        std::nullopt, "", Kind::kRestart);
  LogAt(restarted, "lock service", "A's lease is gone with them (A does not know)", ta, "",
        Kind::kExpire, "A");
  if (!Acquire(*b, "B", tb, error) || !Read(*b, "B", tb, error)) return error;
  Log("lock service", "two holders at once: A (still believing) and B", std::nullopt, "",
      Kind::kNote);
  auto b_answer = b->Ask("deposit " + std::to_string(kDepositB));
  const bool b_accepted = LogWrite("B", b_answer);
  auto a_answer = a->Ask("deposit " + std::to_string(kDepositA));
  const bool a_accepted = LogWrite("A", a_answer);
  a->Stop();
  b->Stop();
  if (auto err = FinalRead(); !err.empty()) return err;
  const bool wrong_service =
      b_answer.contains("wrong_service") && b_answer["wrong_service"].as_bool();
  if (timeline_.fencing) {
    timeline_.lesson_shown = !b_accepted && wrong_service && a_accepted;
    timeline_.verdict =
        timeline_.lesson_shown
            ? "two holders at once, but no update was lost: the store refused B's write because "
              "its token comes from another lock service (the restarted Redis has a new "
              "identity), whatever the token's value (" +
                  std::to_string(tb) +
                  "). Safety held; B, the lock service's holder now, cannot write until the "
                  "store's fence is moved to the new lock service"
            : "unexpected: the store did not refuse B's token from the new lock service";
  } else {
    timeline_.lesson_shown = b_accepted && a_accepted &&
                             timeline_.final_value == std::string(a_answer["value"].as_string());
    timeline_.verdict = timeline_.lesson_shown
                            ? "lost update: two holders both wrote; A's balance, computed before "
                              "B's deposit, overwrote B's: \"" +
                                  timeline_.final_value + "\", B's +" + std::to_string(kDepositB) +
                                  " is gone"
                            : "unexpected: a write was refused without fencing";
  }
  return "";
}

std::vector<int> Demo::LogNodeHolders(const std::string& name, const std::string& owner) {
  std::vector<int> held;
  const std::int64_t now = Now();
  for (std::size_t i = 0; i < redis_.size(); ++i) {
    auto holder = NodeHolder(redis_[i]->port(), kLock);
    if (holder.ok() && *holder == owner) {
      held.push_back(static_cast<int>(i) + 1);
      LogAt(now, NodeLane(static_cast<int>(i) + 1), "holds " + name + "'s key", std::nullopt, "",
            Kind::kGrant);
    }
  }
  return held;
}

// Redlock on 5 nodes (Kleppmann's example), each node on its own lane. A asks the nodes one at
// a time and stops at a majority, 1-3, as a client cut off from nodes 4 and 5 would; A's key on
// node 3 is deleted, as node 3's clock jumping forward would expire it; B then wins nodes 3-5.
// Two holders; the store refuses the older token.
std::string Demo::ClockJump() {
  auto a = StartClient("A", store_url_, /*sequential=*/true);
  auto b = StartClient("B", store_url_);
  std::string error, a_owner, b_owner;
  std::int64_t ta = 0, tb = 0;
  if (!Acquire(*a, "A", ta, error, /*service_lane=*/false, &a_owner)) return error;
  auto a_nodes = LogNodeHolders("A", a_owner);
  Log("A", "holds nodes " + Joined(a_nodes) + ": a majority of 5", ta,
      "it asked them one at a time and stopped there, as a client cut off from nodes 4 and 5 "
      "would",
      Kind::kNote);
  if (!Read(*a, "A", ta, error)) return error;
  if (Status s = DeleteLockKey(redis_[2]->port(), kLock); !s.ok()) return s.message();
  Log(NodeLane(3), "A's key deleted early (simulated clock jump)", std::nullopt,
      "the demo deletes it, as node 3's clock jumping forward would expire it", Kind::kExpire);
  if (!Acquire(*b, "B", tb, error, /*service_lane=*/false, &b_owner)) return error;
  auto b_nodes = LogNodeHolders("B", b_owner);
  Log("B", "holds nodes " + Joined(b_nodes) + ": a majority too", tb, "two holders at once",
      Kind::kNote);
  if (!Read(*b, "B", tb, error)) return error;
  auto b_answer = b->Ask("deposit " + std::to_string(kDepositB));
  const std::string b_value =
      b_answer.contains("value") ? std::string(b_answer["value"].as_string()) : "";
  LogWrite("B", b_answer);
  auto a_answer = a->Ask("deposit " + std::to_string(kDepositA));
  const std::string a_value =
      a_answer.contains("value") ? std::string(a_answer["value"].as_string()) : "";
  LogWrite("A", a_answer);
  a->Stop();
  b->Stop();
  if (auto err = FinalRead(); !err.empty()) return err;
  if (a_nodes != std::vector<int>{1, 2, 3} || b_nodes != std::vector<int>{3, 4, 5}) {
    timeline_.lesson_shown = false;
    timeline_.verdict = "unexpected: A held nodes " + Joined(a_nodes) + " and B nodes " +
                        Joined(b_nodes) + " (expected 1-3 and 3-5)";
    return "";
  }
  JudgeStaleWrite(timeline_, a_answer["ok"].as_bool(), ta, tb, b_value, a_value,
                  "two Redlock holders after node 3's (simulated) clock jump; A wrote last");
  return "";
}

// A store that checks the token and then writes, in two steps: A's check passes, A is paused
// between its check and its write, B takes over, checks and writes; A's write lands although
// tokens were checked. The control arm (--no-fencing) checks nothing at all.
std::string Demo::CheckThenWrite() {
  const bool checks = fencing_arm_;
  auto a = StartClient("A", store_url_);
  auto b = StartClient("B", store_url_);
  std::string error;
  std::int64_t ta = 0, tb = 0;
  auto check = [&](Client& c, const std::string& name, std::int64_t token) {
    if (!checks) return true;
    auto r = c.Ask("check");
    if (!r["ok"].as_bool()) {
      error = name + " could not check: " + std::string(r["message"].as_string());
      return false;
    }
    // The store's check, as two-step stores make it: the highest token it recorded is read,
    // compared, and the write follows in another request.
    const std::int64_t now = Now();
    const std::string highest = std::to_string(r["highest"].as_int64());
    LogAt(now, "store", "tells " + name + " the highest token it has recorded", std::nullopt,
          highest, Kind::kRead);
    LogAt(now, name, "checks its token against it", token,
          std::to_string(token) + (r["passed"].as_bool() ? " >= " : " < ") + highest +
              (r["passed"].as_bool() ? ": passes" : ": fails"),
          Kind::kNote);
    return true;
  };
  if (!Acquire(*a, "A", ta, error) || !Read(*a, "A", ta, error) || !check(*a, "A", ta)) {
    return error;
  }
  a->Signal(SIGSTOP);
  Log("A",
      std::string("stop-the-world pause (SIGSTOP) ") +
          (checks ? "after the check, before its write" : "before its write"),
      ta, "", Kind::kPause);
  WaitForExpiry("A", ta);
  if (!Acquire(*b, "B", tb, error) || !Read(*b, "B", tb, error) || !check(*b, "B", tb)) {
    return error;
  }
  auto b_answer = b->Ask("deposit " + std::to_string(kDepositB));
  LogWrite("B", b_answer);
  b->Stop();
  a->Signal(SIGCONT);
  Log("A", "resumes (SIGCONT), still believes it holds the lock", ta, "", Kind::kResume);
  auto a_answer = a->Ask("deposit " + std::to_string(kDepositA));
  const bool a_accepted = LogWrite("A", a_answer);
  a->Stop();
  if (auto err = FinalRead(); !err.empty()) return err;
  const std::string a_value =
      a_answer.contains("value") ? std::string(a_answer["value"].as_string()) : "";
  timeline_.lesson_shown = a_accepted && ta < tb && timeline_.final_value == a_value;
  if (!timeline_.lesson_shown) {
    timeline_.verdict = "unexpected: A's stale write did not land";
  } else if (checks) {
    timeline_.verdict =
        "lost update although tokens were checked: A's token " + std::to_string(ta) +
        " passed the check before the pause, and nothing checked it again when its write came, "
        "after B's (token " +
        std::to_string(tb) +
        "). The check must be in the write's own "
        "transaction, as fenced's is: \"" +
        a_value + "\", B's +" + std::to_string(kDepositB) + " is gone";
  } else {
    timeline_.verdict = "lost update: with no check at all, A's stale write overwrote B's: \"" +
                        a_value + "\", B's +" + std::to_string(kDepositB) + " is gone";
  }
  return "";
}

}  // namespace fencekit::demo
