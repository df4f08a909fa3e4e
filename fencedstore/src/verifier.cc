#include "verifier.h"

#include "fencekit/common/mutex.h"
#include "fencekit/common/names.h"

namespace fencekit::fencedstore {

Verifier::Verifier(const TokenVerifier& verify, unsigned threads, std::size_t max_queued)
    : verify_(verify), max_queued_(max_queued) {
  for (unsigned i = 0; i < std::max(threads, 1u); ++i) threads_.emplace_back([this] { Work(); });
}

Verifier::~Verifier() { Stop(); }

SharedVerdict Verifier::Answer(const std::string& lock, FencingToken token) {
  MutexLock guard(mu_);
  auto it = flights_.find(Key(lock, token.value()));
  return it == flights_.end() ? nullptr : it->second.answer;
}

SharedVerdict Verifier::Join(const std::string& lock, FencingToken token, Continuation then) {
  Key key(lock, token.value());
  {
    MutexLock guard(mu_);
    auto it = flights_.find(key);
    if (it != flights_.end()) {
      if (it->second.answer != nullptr) return it->second.answer;
      it->second.waiters.push_back(std::move(then));
      return nullptr;
    }
    if (!stopping_ && queue_.size() < max_queued_) {
      flights_[key].waiters.push_back(std::move(then));
      queue_.push_back(std::move(key));
      cv_.NotifyOne();
      return nullptr;
    }
  }
  return std::make_shared<const Result<TokenVerdict>>(
      Status::Timeout("the lock service could not be asked to confirm the token: too many "
                      "verifications are waiting (or the store is closing); retry in a moment"));
}

void Verifier::Resumed(const std::string& lock, FencingToken token) {
  MutexLock guard(mu_);
  auto it = flights_.find(Key(lock, token.value()));
  if (it != flights_.end() && it->second.answer != nullptr && --it->second.unprocessed == 0) {
    flights_.erase(it);
  }
}

void Verifier::BeginStop() {
  // Calls not started yet are answered here, not when a busy thread frees up.
  std::vector<std::pair<SharedVerdict, std::vector<Continuation>>> answered;
  {
    MutexLock guard(mu_);
    stopping_ = true;
    for (Key& key : queue_) {
      Flight& f = flights_[key];
      f.answer = Closing();
      f.unprocessed = f.waiters.size();
      answered.emplace_back(f.answer, std::move(f.waiters));
    }
    queue_.clear();
  }
  cv_.NotifyAll();
  for (auto& [answer, waiters] : answered) {
    for (auto& then : waiters) then(answer);
  }
}

SharedVerdict Verifier::Closing() {
  return std::make_shared<const Result<TokenVerdict>>(
      Status::Timeout("the store is closing: the token was not confirmed and nothing was "
                      "written; retry against the store once it is back"));
}

void Verifier::Stop() {
  BeginStop();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void Verifier::Work() {
  for (;;) {
    Key key;
    {
      MutexLock lock(mu_);
      while (queue_.empty() && !stopping_) cv_.Wait(mu_);
      if (queue_.empty()) return;  // BeginStop empties the queue
      key = std::move(queue_.front());
      queue_.pop_front();
    }
    SharedVerdict answer = Ask(key);
    std::vector<Continuation> waiters;
    {
      MutexLock guard(mu_);
      Flight& f = flights_[key];
      f.answer = answer;
      waiters = std::move(f.waiters);
      f.unprocessed = waiters.size();
    }
    for (auto& then : waiters) then(answer);
  }
}

SharedVerdict Verifier::Ask(const Key& key) {
  calls_.fetch_add(1, std::memory_order_relaxed);
  auto token = FencingToken::FromInt(key.second);
  Result<TokenVerdict> verdict = token.ok() ? verify_(key.first, *token) : token.status();
  if (verdict.ok() && !verdict->service.empty()) {
    if (Status bad = CheckServiceId(verdict->service); !bad.ok()) {
      verdict = Status::Unavailable("the lock service named itself with a malformed id: " +
                                    bad.message());
    }
  }
  if (verdict.ok()) return std::make_shared<const Result<TokenVerdict>>(std::move(verdict));
  failures_.fetch_add(1, std::memory_order_relaxed);
  // A request the lock service can never take (e.g. a lock name it refuses) is no outage: say
  // so, rather than "retry".
  if (verdict.status().IsInvalidArgument()) {
    return std::make_shared<const Result<TokenVerdict>>(Status::InvalidArgument(
        "the lock service refused to check this token: " + verdict.status().message()));
  }
  return std::make_shared<const Result<TokenVerdict>>(Status::Timeout(
      "the lock service could not be asked to confirm the token (" + verdict.status().ToString() +
      "); nothing was written. Retry once the lock service answers"));
}

}  // namespace fencekit::fencedstore
