#include "demo.h"

#include <cstdlib>
#include <iostream>
#include <thread>
#include <utility>

#include "client_role.h"
#include "fencekit/httpapi/store_client.h"

namespace json = boost::json;
using namespace std::chrono_literals;

namespace fencekit::demo {

Demo::Demo(std::string scenario, std::string locks, bool fencing, std::chrono::milliseconds ttl,
           std::string fenced_path)
    : locks_(std::move(locks)), ttl_(ttl), fenced_path_(std::move(fenced_path)) {
  timeline_.scenario = std::move(scenario);
  timeline_.fencing = fencing;
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

std::string Demo::Run() {
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
  return "unknown scenario \"" + timeline_.scenario +
         "\"; use gc-pause, slow-network, lock-service-restart or clock-jump";
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
  if (!timeline_.fencing) o.args.push_back("--no-fencing");
  if (Status s = fenced_.Start(o); !s.ok()) {
    return "fenced did not start (" + fenced_path_ + "): " + s.message();
  }
  store_url_ = fenced_.url();
  store_port_ = fenced_.port();
  return "";
}

std::string Demo::StartRedis(int n) {
  if (!locks_.empty() && !locks_.starts_with("redis://") && !locks_.starts_with("redlock://")) {
    return "the " + timeline_.scenario +
           " scenario starts its own redis-server nodes; leave "
           "out --locks";
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
  return std::make_unique<Client>(argv);
}

bool Demo::Acquire(Client& c, const std::string& name, std::int64_t& token, std::string& error) {
  auto r = c.Ask("acquire");
  if (!r["ok"].as_bool()) {
    error = name + " could not acquire: " + std::string(r["message"].as_string());
    return false;
  }
  token = r["token"].as_int64();
  const std::int64_t now = Now();
  LogAt(now, name, "acquires the lock", token, "", Kind::kGrant);
  LogAt(now, "lock service", "grants the lock to " + name, token, "", Kind::kGrant);
  return true;
}

bool Demo::LogWrite(const std::string& name, json::object r) {
  // The store's answer and the client's write are one moment, said once: on the store's lane
  // (Label() shows the client's lane only "writes").
  const std::int64_t now = Now();
  std::int64_t token = r["token"].as_int64();
  if (r["ok"].as_bool()) {
    std::string lost;
    if (token < highest_accepted_) {  // only a store without fencing takes it
      lost = "it overwrites " + highest_writer_ + "'s update (token " +
             std::to_string(highest_accepted_) + "), which is lost";
    } else {
      highest_accepted_ = token;
      highest_writer_ = name;
    }
    LogAt(now, "store", "accepts " + name + "'s write", token, lost, Kind::kAccepted);
    LogAt(now, name, "writes", token, "accepted", Kind::kAccepted);
    return true;
  }
  if (r.contains("stale") && r["stale"].as_bool()) {
    LogAt(now, "store", "refuses " + name + "'s write", token,
          "it has seen token " + std::to_string(r["highest"].as_int64()), Kind::kRefused);
    LogAt(now, name, "writes", token, "refused, stale token", Kind::kRefused);
  } else if (r.contains("wrong_service") && r["wrong_service"].as_bool()) {
    LogAt(now, "store", "refuses " + name + "'s write", token,
          "its token comes from another lock service than the fence's, so it cannot be "
          "compared with the tokens the store has seen",
          Kind::kRefused);
    LogAt(now, name, "writes", token, "refused, wrong lock service", Kind::kRefused);
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
