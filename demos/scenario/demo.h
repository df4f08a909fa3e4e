// Demo: one run of a fencekit-demo scenario. It starts fenced (and redis-server nodes) through
// procutil in a temporary folder, starts two client processes, drives them step by step, and
// records what happened in a Timeline.
#pragma once

#include <boost/json/object.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "scenario/client_process.h"
#include "fencekit/lockclient/lock_client.h"
#include "fencekit/procutil/fenced_server.h"
#include "fencekit/procutil/redis_server.h"
#include "live/scenario_lanes.h"
#include "scenario/timeline_names.h"

namespace fencekit::demo {

// Thread safety: one thread at a time.
class Demo {
 public:
  // `scenario`: one of ScenarioNames(). `locks`: a lock service URI, or "" for an embedded
  // SQLite one (lock-service-restart and clock-jump start their own Redis nodes and refuse
  // one). `fencing` false runs the store unguarded (the control arm). `fenced_path`: the fenced
  // binary.
  Demo(std::string scenario, std::string locks, bool fencing, std::chrono::milliseconds ttl,
       std::string fenced_path);
  // Stops every process it started and removes its temporary folder.
  ~Demo();

  // Returns an error message, or "" when the scenario ran (the timeline says what it showed).
  std::string Run();

  const Timeline& timeline() const { return timeline_; }
  // The terminal's first line: "Scenario gc-pause, fencing on".
  std::string Headline() const;

  // Called once fenced listens, before the scenario, with fenced's address (fencekit-demo
  // --serve prints where its page is and waits for a viewer there). False stops the run.
  void set_before_scenario(std::function<bool(const std::string& url)> f) {
    before_scenario_ = std::move(f);
  }
  // Called with each event as it is logged (fencekit-demo --serve shows it live).
  void set_on_event(std::function<void(const Event&)> f) { on_event_ = std::move(f); }
  // fenced's open event streams (viewers of its /ui page); -1 when it cannot be asked.
  std::int64_t Viewers() const;
  // fenced's address, once started; it runs until the Demo is destroyed.
  const std::string& store_url() const { return store_url_; }
  std::uint16_t store_port() const { return store_port_; }

 private:
  // The scenarios (scenarios.cc); each returns as Run() does.
  std::string GcPause(bool slow_network);
  std::string LockServiceRestart();
  std::string ClockJump();
  std::string CheckThenWrite();

  // Milliseconds since the demo began.
  std::int64_t Now() const;
  void Log(const std::string& actor, const std::string& event, std::optional<std::int64_t> token,
           const std::string& status, Kind kind, const std::string& holder = "");
  // At `time_ms`: the events of one moment (a grant and its acquisition, a write and the
  // store's answer) share their time, so that the timelines draw them at one place. They are
  // logged cause first: the grant before the acquisition, the write before the answer.
  void LogAt(std::int64_t time_ms, const std::string& actor, const std::string& event,
             std::optional<std::int64_t> token, const std::string& status, Kind kind,
             const std::string& holder = "");

  // The processes. Each returns an error message, or "" on success.
  std::string StartFenced();
  // Starts `n` redis-server nodes on free loopback ports.
  std::string StartRedis(int n);
  // Kills node `i` and starts it again, empty, on the same port.
  std::string RestartRedis(std::size_t i);
  static std::string RedisError(const Status& s);
  std::unique_ptr<Client> StartClient(const std::string& name, const std::string& store_url,
                                      bool sequential = false);

  // The steps the scenarios share.
  // The grant (on the lock service's lane, unless `service_lane` is false) then the
  // acquisition. `owner` gets the grant's owner id.
  bool Acquire(Client& c, const std::string& name, std::int64_t& token, std::string& error,
               bool service_lane = true, std::string* owner = nullptr);
  // The client reads the record (and keeps it for its deposit); false, with `error`, when it
  // could not.
  bool Read(Client& c, const std::string& name, std::int64_t token, std::string& error);
  // Logs a client's write and the store's answer, in that order, from the answer `r` to a
  // deposit. `held_since`: the write was sent then and held in the network until now. True when
  // accepted.
  bool LogWrite(const std::string& name, boost::json::object r,
                std::optional<std::int64_t> held_since = std::nullopt);
  // Waits (watching the lock service) until `token`'s lease is gone.
  void WaitForExpiry(const std::string& holder, std::int64_t token);
  std::string FinalRead();
  // clock-jump: logs, on each node's lane, whose key it holds (read from the node itself).
  // Returns the nodes (1-based) holding `owner`'s key.
  std::vector<int> LogNodeHolders(const std::string& name, const std::string& owner);

  Timeline timeline_;
  std::string locks_;
  std::chrono::milliseconds ttl_;
  std::string fenced_path_;
  // Whether fenced guards its writes: off for the control arm and for check-then-write, whose
  // store checks apart from the write (two_step_).
  bool store_fences_ = true;
  bool two_step_ = false;
  bool fencing_arm_ = true;  // the user's arm: false with --no-fencing
  std::string dir_;
  std::string store_url_;
  std::uint16_t store_port_ = 0;
  std::vector<std::unique_ptr<procutil::RedisServer>> redis_;
  procutil::FencedServer fenced_;
  std::unique_ptr<LockClient> observer_;
  std::function<bool(const std::string& url)> before_scenario_;
  std::function<void(const Event&)> on_event_;
  // The record as the last accepted write left it: a write that does not extend it overwrote
  // it.
  struct {
    std::string value, writer;
    std::int64_t token = 0;
  } stored_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace fencekit::demo
