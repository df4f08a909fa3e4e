#include "builtin/client.h"

#include <poll.h>

#include <random>
#include <thread>

#include "fencekit/httpapi/store_client.h"
#include "fencekit/lockclient/lock_client.h"
#include "fencekit/pausetest/history.h"
#include "run/children.h"

namespace fencekit::pausetest {
namespace {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

}  // namespace

int ClientMain(const ClientPlan& plan) {
  auto history = HistoryWriter::Open(plan.history_path);
  if (!history.ok()) return 3;
  LockOptions lock_options;
  lock_options.ttl = plan.ttl;
  auto locks = LockClient::Open(plan.locks_uri, lock_options);
  auto store = StoreClient::Open(plan.store_url, {.timeout = milliseconds(2'000)});
  if (!locks.ok() || !store.ok()) {
    HistoryOp op{plan.index, "acquire", plan.lock};
    op.outcome = "error";
    op.detail = !locks.ok() ? locks.status().ToString() : store.status().ToString();
    op.start_us = op.end_us = NowMicros();
    (void)history->Append(op);
    return 3;
  }
  std::mt19937_64 rng(plan.seed);
  while (!StopRequested(plan.stop_fd)) {
    HistoryOp op{plan.index, "acquire", plan.lock};
    op.start_us = NowMicros();
    auto lease = (*locks)->Acquire(plan.lock, std::chrono::seconds(2));
    op.end_us = NowMicros();
    if (!lease.ok()) {
      op.outcome = lease.status().IsTimeout() ? "timeout" : "error";
      op.detail = lease.status().ToString();
      (void)history->Append(op);
      continue;
    }
    const FencingToken token = lease->token;
    op.token = token.value();
    op.outcome = "ok";
    (void)history->Append(op);
    auto record = [&](HistoryOp& o, const Status& s) {
      o.end_us = NowMicros();
      o.token = token.value();
      // Refused for its token: stale, or granted by another lock service (one that lost its
      // state and counts again from an older token).
      o.outcome = s.ok() ? "ok" : s.IsStaleToken() || s.IsWrongService() ? "stale" : "error";
      if (!s.ok()) o.detail = s.ToString();
      o.lease_expired = lease->Expired(*(*locks)->clock());
      (void)history->Append(o);
      return s.ok();
    };
    bool done = false;
    // The claim raises the lock's fence to this token before the read, so a write by an older
    // holder that read before this one cannot land afterwards.
    HistoryOp claim{plan.index, "claim", plan.lock, 0, plan.claim_key, plan.index};
    claim.start_us = NowMicros();
    done = !record(claim, (*store)
                              ->Put(plan.lock, token, plan.claim_key, std::to_string(plan.index),
                                    lease->service)
                              .status());
    std::int64_t value = 0;
    if (!done) {
      HistoryOp read{plan.index, "read", plan.lock, 0, plan.key};
      read.start_us = NowMicros();
      auto got = (*store)->Get(plan.key);
      Status s = got.status();
      if (got.ok()) {
        value = std::atoll(got->value.c_str());
      } else if (got.status().IsNotFound()) {
        s = Status::Ok();
      }
      read.value = value;
      done = !record(read, s);
    }
    if (!done && plan.max_delay.count() > 0) {
      std::uniform_int_distribution<long long> delay(0, plan.max_delay.count());
      (*locks)->clock()->SleepFor(milliseconds(delay(rng)));  // the lease's clock
    }
    if (!done) {
      HistoryOp write{plan.index, "write", plan.lock, 0, plan.key, value + 1};
      write.start_us = NowMicros();
      Status s = (*store)
                     ->Put(plan.lock, token, plan.key, std::to_string(value + 1), lease->service)
                     .status();
      record(write, s);
      // A refusal as stale means the lease is lost; it is released below all the same, to record
      // what the service says.
    }
    HistoryOp release{plan.index, "release", plan.lock};
    release.start_us = NowMicros();
    Status s = (*locks)->Release(*lease);
    release.end_us = NowMicros();
    release.token = token.value();
    release.outcome = s.ok() ? "ok" : s.IsNotHeld() ? "not_held" : "error";
    if (!s.ok()) release.detail = s.ToString();
    release.lease_expired = lease->Expired(*(*locks)->clock());
    (void)history->Append(release);
  }
  return 0;
}

}  // namespace fencekit::pausetest
