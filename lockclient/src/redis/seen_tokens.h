// SeenTokens: the highest token a Redis or Redlock client has seen per lock. Private to
// lockclient.
#pragma once

#include <algorithm>
#include <cstdint>
#include <list>
#include <string>
#include <string_view>
#include <unordered_map>

#include "fencekit/common/mutex.h"

namespace fencekit::lockclient {

// The highest token this client has seen per lock, for the `capacity` locks it used most
// recently (the least recently used is forgotten first, so a client that touches many lock
// names does not grow without bound). Thread safety: safe for concurrent use.
class SeenTokens {
 public:
  explicit SeenTokens(std::size_t capacity) : capacity_(std::max<std::size_t>(capacity, 1)) {}

  // 0 when the lock is not remembered.
  std::int64_t Floor(std::string_view lock) {
    MutexLock guard(mu_);
    auto it = tokens_.find(std::string(lock));
    if (it == tokens_.end()) return 0;
    order_.splice(order_.begin(), order_, it->second.second);
    return it->second.first;
  }

  void Raise(std::string_view lock, std::int64_t token) {
    MutexLock guard(mu_);
    auto [it, added] = tokens_.try_emplace(std::string(lock));
    if (added) {
      order_.push_front(it->first);
      it->second = {token, order_.begin()};
      if (tokens_.size() > capacity_) {
        tokens_.erase(order_.back());
        order_.pop_back();
      }
      return;
    }
    it->second.first = std::max(it->second.first, token);
    order_.splice(order_.begin(), order_, it->second.second);
  }

 private:
  const std::size_t capacity_;
  Mutex mu_;
  std::list<std::string> order_ FENCEKIT_GUARDED_BY(mu_);  // most recently used first
  std::unordered_map<std::string, std::pair<std::int64_t, std::list<std::string>::iterator>> tokens_
      FENCEKIT_GUARDED_BY(mu_);
};

}  // namespace fencekit::lockclient
