// HeldLock: a lease renewed in the background every third of its ttl, and lost (with the
// reason) when a renewal is refused or the lease runs out before one succeeds.
#include <algorithm>
#include <chrono>
#include <thread>

#include "lock_backend.h"
#include "fencekit/common/mutex.h"
#include "fencekit/lockclient/held_lock.h"
#include "fencekit/lockclient/lock_client.h"
#include "lock_counters.h"

namespace fencekit {

using lockclient::Subject;

struct HeldLock::State {
  LockClient* client;
  Options options;
  Mutex mu;
  CondVar cv;
  Lease lease FENCEKIT_GUARDED_BY(mu);
  bool lost FENCEKIT_GUARDED_BY(mu) = false;
  Status lost_reason FENCEKIT_GUARDED_BY(mu);
  bool stopping FENCEKIT_GUARDED_BY(mu) = false;
  bool released FENCEKIT_GUARDED_BY(mu) = false;
  std::atomic<std::uint64_t> renewals{0};
  std::thread renewer;
  std::thread watchdog;  // with auto_renew: marks the lease lost when validity runs out
};

Result<std::unique_ptr<HeldLock>> HeldLock::Acquire(LockClient& client, std::string_view lock,
                                                    std::chrono::milliseconds wait,
                                                    Options options) {
  auto lease = client.Acquire(lock, wait);
  if (!lease.ok()) return lease.status();
  return std::make_unique<HeldLock>(client, std::move(lease).value(), std::move(options));
}

HeldLock::HeldLock(LockClient& client, Lease lease, Options options)
    : state_(std::make_shared<State>()) {
  state_->client = &client;
  state_->options = std::move(options);
  state_->lease = std::move(lease);
  if (state_->options.auto_renew) {
    state_->renewer = std::thread([this] { RenewLoop(); });
    state_->watchdog = std::thread([this] { WatchValidity(); });
  }
}

HeldLock::~HeldLock() { (void)Release(); }

Lease HeldLock::lease() const {
  MutexLock lock(state_->mu);
  return state_->lease;
}

bool HeldLock::lost() const {
  MutexLock lock(state_->mu);
  return state_->lost;
}

Status HeldLock::lost_reason() const {
  MutexLock lock(state_->mu);
  return state_->lost_reason;
}

std::uint64_t HeldLock::renewals() const { return state_->renewals.load(); }

void HeldLock::MarkLost(const Status& why) { Lose(why, Loss::kMarked); }

void HeldLock::Lose(const Status& why, Loss cause) {
  Lease lease;
  {
    MutexLock lock(state_->mu);
    if (state_->lost || state_->released) return;
    state_->lost = true;
    state_->lost_reason = why;
    lease = state_->lease;
  }
  LockClient::Counters& c = *state_->client->counters_;
  (cause == Loss::kRefused    ? c.lost_refused
   : cause == Loss::kValidity ? c.lost_validity
                              : c.lost_marked)
      .fetch_add(1, std::memory_order_relaxed);
  state_->cv.NotifyAll();
  if (state_->options.on_lost) state_->options.on_lost(lease, why);
}

Status HeldLock::Extend() {
  Lease lease;
  {
    MutexLock lock(state_->mu);
    if (state_->lost) return Status::NotHeld(state_->lost_reason.message());
    lease = state_->lease;
  }
  Status s = state_->client->Extend(lease);
  if (s.ok()) {
    {
      MutexLock lock(state_->mu);
      if (state_->lost) return Status::NotHeld(state_->lost_reason.message());
      state_->lease.valid_until = lease.valid_until;
      state_->renewals.fetch_add(1);
    }
    state_->cv.NotifyAll();  // the watchdog's deadline moved
  } else if (s.IsNotHeld()) {
    Lose(s, Loss::kRefused);
  }
  return s;
}

void HeldLock::RenewLoop() {
  Clock* clock = state_->client->clock();
  std::chrono::milliseconds retry(0);  // after a failed renewal: how soon to try again
  for (;;) {
    {
      MutexLock lock(state_->mu);
      const auto ttl = state_->lease.ttl;
      auto interval = std::max(std::chrono::milliseconds(1), ttl / 3);
      // On the client's clock, as validity is: a fake clock in a test paces renewals too. A
      // third of the ttl after the validity's start (its grant or last renewal; valid_until is
      // start + ttl - drift), not after this thread got to run: a thread scheduled late must
      // not push the renewal late.
      const auto started = state_->lease.valid_until - ttl + state_->client->Drift(ttl);
      const auto wake_at = retry.count() > 0 ? clock->Now() + retry : started + interval;
      while (!state_->stopping && !state_->lost &&
             clock->WaitUntil(state_->cv, state_->mu, wake_at)) {
      }
      if (state_->stopping || state_->lost) return;
      // A process that was stopped past validity must not renew what it no longer holds.
      if (clock->Now() >= state_->lease.valid_until) break;
    }
    Status s = Extend();
    if (s.ok()) {
      retry = std::chrono::milliseconds(0);
      continue;
    }
    if (s.IsNotHeld()) return;  // Extend() marked it lost
    // Transient failure: try again soon (a new connection, another member), until validity
    // runs out; the watchdog then marks it lost.
    retry = std::clamp(retry * 2, std::chrono::milliseconds(20),
                       std::max(std::chrono::milliseconds(20), lease().ttl / 6));
  }
  Lose(Status::NotHeld("could not renew " + Subject(lease().lock, state_->client->service()) +
                       " before its validity ran out; the lease is lost"),
       Loss::kValidity);
}

void HeldLock::WatchValidity() {
  Clock* clock = state_->client->clock();
  MutexLock lock(state_->mu);
  for (;;) {
    if (state_->stopping || state_->lost) return;
    if (clock->Now() >= state_->lease.valid_until) break;
    // Woken early by a renewal (which moves valid_until), a loss or a release.
    clock->WaitUntil(state_->cv, state_->mu, state_->lease.valid_until);
  }
  std::string lock_name = state_->lease.lock;
  lock.Unlock();
  Lose(Status::NotHeld("could not renew " + Subject(lock_name, state_->client->service()) +
                       " before its validity ran out; the lease is lost"),
       Loss::kValidity);
}

Status HeldLock::Release() {
  Lease lease;
  bool was_lost;
  {
    MutexLock lock(state_->mu);
    if (state_->released) return Status::Ok();
    state_->released = true;
    state_->stopping = true;
    was_lost = state_->lost;
    lease = state_->lease;
  }
  state_->cv.NotifyAll();
  for (std::thread* t : {&state_->renewer, &state_->watchdog}) {
    if (!t->joinable()) continue;
    if (t->get_id() == std::this_thread::get_id()) {
      t->detach();  // released from on_lost: the loop returns by itself
    } else {
      t->join();
    }
  }
  Status s = state_->client->Release(lease);
  if (was_lost && s.ok()) return Status::NotHeld(lost_reason().message());
  return s;
}

}  // namespace fencekit
