#include "scenario/demo.h"

#include <cstdlib>
#include <iostream>
#include <thread>
#include <utility>

#include "scenario/balance.h"
#include "scenario/client_role.h"
#include "fencekit/httpapi/store_client.h"

namespace json = boost::json;
using namespace std::chrono_literals;

namespace fencekit::demo {

Demo::Demo(std::string scenario, std::string locks, bool fencing, std::chrono::milliseconds ttl,
           std::string fenced_path)
    : locks_(std::move(locks)), ttl_(ttl), fenced_path_(std::move(fenced_path)) {
  fencing_arm_ = fencing;
  two_step_ = scenario == "check-then-write";
  store_fences_ = fencing && !two_step_;
  timeline_.scenario = std::move(scenario);
  // What the timeline calls fencing: a store that checks the token in the write's transaction.
  timeline_.fencing = store_fences_;
  timeline_.lanes = ScenarioLanes(timeline_.scenario, fencing);
  if (two_step_) {
    timeline_.title = std::string("fencekit demo: check-then-write (") +
                      (fencing ? "the token checked, then the write: two steps" : "no check") +
                      ")";
  }
  char tmpl[] = "/tmp/fencekit-demo-XXXXXX";
  dir_ = mkdtemp(tmpl);
  start_ = std::chrono::steady_clock::now();
}

Demo::~Demo() {
  fenced_.Kill();
  redis_.clear();
  std::string cmd = "rm -rf '" + dir_ + "'";
  if (std::system(cmd.c_str()) != 0) std::cerr << "could not remove " << dir_ << "\n";
}

std::string Demo::Headline() const {
  if (two_step_) {
    return "Scenario check-then-write, " +
           std::string(fencing_arm_ ? "the store checks the token, then writes (two steps)"
                                    : "no check");
  }
  return "Scenario " + timeline_.scenario + ", fencing " + (store_fences_ ? "on" : "OFF");
}

std::string Demo::Run() {
  if (!IsScenario(timeline_.scenario)) {
    return "unknown scenario \"" + timeline_.scenario + "\"; use " + ScenarioNames();
  }
  if (timeline_.scenario == "lock-service-restart") {
    if (auto err = StartRedis(1); !err.empty()) return err;
  } else if (timeline_.scenario == "clock-jump") {
    if (auto err = StartRedis(5); !err.empty()) return err;
  } else if (locks_.empty()) {
    locks_ = "sqlite://" + dir_ + "/locks.db";
  }
  if (auto err = StartFenced(); !err.empty()) return err;
  auto observer = LockClient::Open(locks_, {.ttl = ttl_});
  if (!observer.ok()) return observer.status().message();
  observer_ = std::move(observer).value();
  // The clock starts when the scenario does, not when a viewer of --serve arrived.
  if (before_scenario_ && !before_scenario_(store_url_)) return "stopped before the scenario";
  start_ = std::chrono::steady_clock::now();
  if (timeline_.scenario == "gc-pause") return GcPause(false);
  if (timeline_.scenario == "slow-network") return GcPause(true);
  if (timeline_.scenario == "lock-service-restart") return LockServiceRestart();
  if (timeline_.scenario == "clock-jump") return ClockJump();
  return CheckThenWrite();
}

std::int64_t Demo::Viewers() const {
  return fenced_.Metric("fenced_event_streams_open").value_or(-1);
}

std::int64_t Demo::Now() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start_)
      .count();
}

void Demo::Log(const std::string& actor, const std::string& event,
               std::optional<std::int64_t> token, const std::string& status, Kind kind,
               const std::string& holder) {
  LogAt(Now(), actor, event, token, status, kind, holder);
}

void Demo::LogAt(std::int64_t time_ms, const std::string& actor, const std::string& event,
                 std::optional<std::int64_t> token, const std::string& status, Kind kind,
                 const std::string& holder) {
  timeline_.events.push_back({time_ms, actor, event, token, status, kind, holder});
  if (on_event_) on_event_(timeline_.events.back());
}

std::string Demo::StartFenced() {
  procutil::FencedOptions o{
      .binary = fenced_path_, .db = dir_ + "/store.db", .log_path = dir_ + "/fenced.log"};
  if (!store_fences_) o.args.push_back("--no-fencing");
  if (Status s = fenced_.Start(o); !s.ok()) {
    return "fenced did not start (" + fenced_path_ + "): " + s.message();
  }
  store_url_ = fenced_.url();
  store_port_ = fenced_.port();
  return "";
}

std::string Demo::StartRedis(int n) {
  if (!locks_.empty()) {
    return "--scenario " + timeline_.scenario + " starts its own redis-server " +
           (n == 1 ? "(it restarts it empty mid-run)" : "nodes (it deletes a key on one)") +
           ", so it takes no --locks; leave it out";
  }
  for (int i = 0; i < n; ++i) {
    redis_.push_back(std::make_unique<procutil::RedisServer>());
    Status s = redis_.back()->Start({.log_path = dir_ + "/redis-" + std::to_string(i) + ".log"});
    if (!s.ok()) return RedisError(s);
  }
  if (n == 1) {
    locks_ = redis_[0]->uri();
  } else {
    locks_ = "redlock://";
    for (int i = 0; i < n; ++i) {
      locks_ += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(redis_[i]->port());
    }
  }
  return "";
}

std::string Demo::RestartRedis(std::size_t i) {
  Status s = redis_[i]->Restart();
  return s.ok() ? "" : RedisError(s);
}

std::string Demo::RedisError(const Status& s) {
  return "redis-server could not be started (install Debian's redis-server; ./scripts/demo "
         "does): " +
         s.message();
}

std::unique_ptr<Client> Demo::StartClient(const std::string& name, const std::string& store_url,
                                          bool sequential) {
  std::vector<std::string> argv = {"/proc/self/exe",
                                   "--role",
                                   "client",
                                   "--name",
                                   name,
                                   "--locks",
                                   locks_,
                                   "--store",
                                   store_url,
                                   "--ttl",
                                   std::to_string(ttl_.count()) + "ms"};
  if (sequential) argv.push_back("--sequential");
  if (two_step_) argv.push_back("--two-step");
  return std::make_unique<Client>(argv);
}

bool Demo::Acquire(Client& c, const std::string& name, std::int64_t& token, std::string& error,
                   bool service_lane, std::string* owner) {
  auto r = c.Ask("acquire");
  if (!r["ok"].as_bool()) {
    error = name + " could not acquire: " + std::string(r["message"].as_string());
    return false;
  }
  token = r["token"].as_int64();
  if (owner != nullptr) *owner = std::string(r["owner"].as_string());
  const std::int64_t now = Now();
  if (service_lane) LogAt(now, "lock service", "grants the lock to " + name, token, "", Kind::kGrant);
  LogAt(now, name, "acquires the lock", token, "", Kind::kGrant);
  return true;
}

bool Demo::Read(Client& c, const std::string& name, std::int64_t token, std::string& error) {
  auto r = c.Ask("read");
  if (!r["ok"].as_bool()) {
    error = name + " could not read: " + std::string(r["message"].as_string());
    return false;
  }
  const std::string value(r["value"].as_string());
  Log(name, r["found"].as_bool() ? "reads \"" + value + "\"" : "reads: no record yet (balance 0)",
      token, "", Kind::kRead);
  return true;
}

bool Demo::LogWrite(const std::string& name, json::object r,
                    std::optional<std::int64_t> held_since) {
  // The client's write, then the store's answer: one moment, said once, on the store's lane
  // (Label() shows the client's lane only "writes"). A write held in the network was sent
  // earlier: what happens now is its arrival, the store's answer, and the client getting it.
  const std::int64_t now = Now();
  const std::int64_t token = r["token"].as_int64();
  const std::string value = r.contains("value") ? std::string(r["value"].as_string()) : "";
  auto store = [&](const std::string& event, const std::string& status, Kind kind) {
    LogAt(now, "store", event, token, status, kind);
  };
  auto client = [&](const std::string& status, Kind kind, auto&& decision) {
    if (held_since) {
      LogAt(now, "store", name + "'s write arrives", token,
            "held " + std::to_string(now - *held_since) + " ms in the network", Kind::kArrive,
            name);
      decision();
      LogAt(now, name, "gets the answer to its write", token, status, kind);
    } else {
      LogAt(now, name, "writes", token, status, kind);
      decision();
    }
  };
  if (r["ok"].as_bool()) {
    // Harm: a value computed without the record's last update (only a store without fencing,
    // or one whose check is not part of the write, takes it).
    if (!stored_.value.empty() && !Extends(value, stored_.value)) {
      client("accepted", Kind::kOverwrite, [&] {
        store("accepts " + name + "'s write",
              "it overwrites " + stored_.writer + "'s update (token " +
                  std::to_string(stored_.token) + "), which is lost",
              Kind::kOverwrite);
      });
    } else {
      client("accepted", Kind::kAccepted,
             [&] { store("accepts " + name + "'s write", "\"" + value + "\"", Kind::kAccepted); });
    }
    stored_ = {value, name, token};
    return true;
  }
  if (r.contains("stale") && r["stale"].as_bool()) {
    client("refused, stale token", Kind::kRefused, [&] {
      store("refuses " + name + "'s write",
            "it has seen token " + std::to_string(r["highest"].as_int64()), Kind::kRefused);
    });
  } else if (r.contains("wrong_service") && r["wrong_service"].as_bool()) {
    client("refused, wrong lock service", Kind::kRefused, [&] {
      store("refuses " + name + "'s write",
            "its token comes from another lock service (Fencing-Service) than the fence's, so "
            "it cannot be compared with the tokens the store has seen",
            Kind::kRefused);
    });
    // The refused client may well be the lock service's holder (a new lock service's): its
    // lease is not lost, the store just cannot take its tokens.
    return false;
  } else {
    LogAt(now, name, "write failed", token, std::string(r["message"].as_string()), Kind::kNote);
    return false;
  }
  if (r["lease_lost"].as_bool()) {
    LogAt(now, name, "learns its lease is lost", token, "", Kind::kLost);
  }
  return false;
}

void Demo::WaitForExpiry(const std::string& holder, std::int64_t token) {
  auto deadline = std::chrono::steady_clock::now() + ttl_ * 3 + 5s;
  while (std::chrono::steady_clock::now() < deadline) {
    auto info = observer_->Inspect(kLock);
    if (info.ok() && (!info->held || info->token->value() != token)) break;
    std::this_thread::sleep_for(5ms);
  }
  Log("lock service", "lease of " + holder + " expires", token, "", Kind::kExpire, holder);
}

std::string Demo::FinalRead() {
  auto store = StoreClient::Open(store_url_);
  if (!store.ok()) return store.status().message();
  auto r = (*store)->Get(kKey);
  if (!r.ok()) return r.status().message();
  timeline_.final_value = r->value;
  Log("store", "final value: \"" + r->value + "\"", r->token.value(), "", Kind::kRead);
  return "";
}

}  // namespace fencekit::demo
