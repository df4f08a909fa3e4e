#include "zookeeper/leases.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace fencekit::lockclient::zk {

Leases::Leases(Clock* clock, EndFn end)
    : clock_(clock), end_(std::move(end)), reaper_([this] { Reap(); }) {}

Leases::~Leases() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
    reap_cv_.NotifyAll();
  }
  reaper_.join();
}

std::optional<HeldNode> Leases::Known(std::string_view owner) const {
  MutexLock lock(mu_);
  auto it = held_.find(owner);
  if (it == held_.end()) return std::nullopt;
  return it->second;
}

void Leases::Forget(std::string_view owner) {
  MutexLock lock(mu_);
  if (auto it = held_.find(owner); it != held_.end()) held_.erase(it);
  if (auto it = ends_.find(owner); it != ends_.end()) ends_.erase(it);
}

void Leases::InLine(HeldNode node) {
  MutexLock lock(mu_);
  if (auto it = ends_.find(node.owner); it != ends_.end()) ends_.erase(it);
  std::string owner = node.owner;
  held_.insert_or_assign(std::move(owner), std::move(node));
}

void Leases::Unsettled(HeldNode node, SteadyTime until) {
  MutexLock lock(mu_);
  ends_.insert_or_assign(node.owner, until);
  std::string owner = node.owner;
  held_.insert_or_assign(std::move(owner), std::move(node));
  WakeReaperFor(until);
}

void Leases::Renewed(std::string_view owner, SteadyTime until) {
  MutexLock lock(mu_);
  ends_.insert_or_assign(std::string(owner), until);
  WakeReaperFor(until);
}

void Leases::WakeReaperFor(SteadyTime until) {
  if (until < reaper_wakes_) reap_cv_.NotifyAll();
}

void Leases::Reap() {
  MutexLock lock(mu_);
  while (!stopping_) {
    SteadyTime next = SteadyTime::max();
    for (const auto& [owner, until] : ends_) next = std::min(next, until);
    if (next == SteadyTime::max()) {
      reaper_wakes_ = next;
      reap_cv_.Wait(mu_);
      reaper_wakes_ = SteadyTime::min();
      continue;
    }
    if (clock_->Now() < next) {
      reaper_wakes_ = next;
      clock_->WaitUntil(reap_cv_, mu_, next);
      reaper_wakes_ = SteadyTime::min();
      continue;
    }
    std::vector<HeldNode> ended;
    for (auto it = ends_.begin(); it != ends_.end();) {
      if (it->second > clock_->Now()) {
        ++it;
        continue;
      }
      if (auto h = held_.find(it->first); h != held_.end()) {
        ended.push_back(std::move(h->second));
        held_.erase(h);
      }
      it = ends_.erase(it);
    }
    lock.Unlock();
    for (const HeldNode& h : ended) end_(h);
    lock.Lock();
  }
}

}  // namespace fencekit::lockclient::zk
