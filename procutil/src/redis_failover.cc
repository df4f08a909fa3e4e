#include "fencekit/procutil/redis_failover.h"

#include <filesystem>
#include <system_error>
#include <thread>

namespace fencekit::procutil {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

Status RedisFailoverPair::Start(const std::string& dir) {
  dir_ = dir;
  for (int i = 0; i < 2; ++i) {
    const std::string name = "redis-" + std::string(1, static_cast<char>('a' + i));
    // Each saves the snapshot a full synchronisation sends it in a folder of its own.
    Status s = servers_[i].Start(
        {.log_path = dir + "/" + name + ".log",
         .extra_args = {"--dir", dir, "--dbfilename", name + ".rdb",
                        "--repl-diskless-sync-delay", "0"}});
    if (!s.ok()) return s;
  }
  auto link = DelayProxy::Start(primary().port());
  if (!link.ok()) return link.status();
  link_ = std::move(*link);
  auto address = DelayProxy::Start(primary().port());
  if (!address.ok()) return address.status();
  address_ = std::move(*address);
  return Replicate();
}

std::string RedisFailoverPair::uri() const {
  return "redis://127.0.0.1:" + std::to_string(address_ ? address_->port() : 0);
}

void RedisFailoverPair::CutReplication() { link_->HoldAll(); }

Status RedisFailoverPair::Failover() {
  primary().Stop();
  auto promoted = replica().Command({"REPLICAOF", "NO", "ONE"});
  if (!promoted.ok()) {
    return Status::Unavailable("the replica could not be promoted: " +
                               promoted.status().message());
  }
  primary_ = 1 - primary_;
  address_->Retarget(primary().port());
  return Status::Ok();
}

Status RedisFailoverPair::Rejoin() {
  // The held link's connection went with the old primary's replica role; new ones go to the
  // new primary.
  link_->Retarget(primary().port());
  link_->Release();
  // Empty: the snapshot it kept as a replica once would otherwise load at start.
  std::error_code ignored;
  std::filesystem::remove(dir_ + "/redis-" + std::string(1, static_cast<char>('a' + 1 - primary_)) +
                              ".rdb",
                          ignored);
  if (Status s = replica().Restart(); !s.ok()) return s;
  return Replicate();
}

Status RedisFailoverPair::Replicate() {
  auto told = replica().Command({"REPLICAOF", "127.0.0.1", std::to_string(link_->port())});
  if (!told.ok()) return Status::Unavailable("REPLICAOF failed: " + told.status().message());
  const auto deadline = SteadyClock::now() + std::chrono::seconds(10);
  while (SteadyClock::now() < deadline) {
    auto info = replica().Command({"INFO", "replication"});
    if (info.ok() && info->find("master_link_status:up") != std::string::npos) {
      return Status::Ok();
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  return Status::Unavailable("the replica on port " + std::to_string(replica().port()) +
                             " did not synchronise with the primary within 10s; see " + dir_ +
                             "/redis-a.log and redis-b.log");
}

}  // namespace fencekit::procutil
