#include "writer.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "fencekit/common/mutex.h"
#include "fencekit/common/names.h"

namespace fencekit::fencedstore {

Writer::Writer(const StoreOptions& options, Clock* clock)
    : options_(options), clock_(clock), batch_buckets_(10) {}

void Writer::Start(std::unique_ptr<Engine> engine) {
  engine_ = std::move(engine);
  if (options_.verify) {
    verifier_ = std::make_unique<Verifier>(options_.verify, options_.verify_threads,
                                           options_.max_queued_verifications);
  }
  writer_ = std::thread([this] { WriterLoop(); });
}

void Writer::Submit(WriteRequest request, FencedStore::WriteCallback done) {
  Pending p;
  p.writes.push_back(std::move(request));
  p.done_one = std::move(done);
  Enqueue(std::move(p));
}

void Writer::SubmitBatch(BatchRequest batch, FencedStore::BatchCallback done) {
  Pending p;
  p.done = std::move(done);
  std::size_t bytes = 0;
  for (const auto& w : batch.writes) bytes += w.key.size() + w.value.size();
  Status bad = Status::Ok();
  if (batch.writes.empty()) {
    bad = Status::InvalidArgument("the batch has no writes; send at least one");
  } else if (batch.writes.size() > options_.max_batch_writes) {
    bad = Status::InvalidArgument("the batch has " + std::to_string(batch.writes.size()) +
                                  " writes, more than the " +
                                  std::to_string(options_.max_batch_writes) +
                                  " one batch may have; split it under the same grant");
  } else if (bytes > options_.max_batch_bytes) {
    bad = Status::InvalidArgument("the batch's keys and values have " + std::to_string(bytes) +
                                  " bytes, more than the " +
                                  std::to_string(options_.max_batch_bytes) +
                                  " one batch may have; split it under the same grant");
  }
  if (!bad.ok()) return p.done(bad);
  p.writes.reserve(batch.writes.size());
  for (auto& w : batch.writes) {
    p.writes.push_back(WriteRequest{
        w.is_delete ? WriteRequest::Kind::kDelete : WriteRequest::Kind::kPut, batch.lock,
        batch.token, std::move(w.key), w.is_delete ? std::string() : std::move(w.value),
        batch.service, batch.principal, w.if_version});
  }
  Enqueue(std::move(p));
}

void Writer::Enqueue(Pending p) {
  const WriteRequest& grant = p.grant();
  Status bad = CheckName("lock name", grant.lock, options_.max_key_bytes);
  if (bad.ok() && !grant.service.empty()) bad = CheckServiceId(grant.service);
  if (bad.ok() && grant.service.empty() && options_.require_service) {
    bad = Status::InvalidArgument(
        "this store requires the identity of the lock service that granted the token with "
        "every write; send the lease's service (the Fencing-Service header)");
  }
  for (std::size_t i = 0; bad.ok() && i < p.writes.size(); ++i) {
    const WriteRequest& w = p.writes[i];
    bad = CheckName(p.writes.size() == 1 ? "key" : "key of write " + std::to_string(i), w.key,
                    options_.max_key_bytes);
    if (bad.ok() && w.if_version && *w.if_version < 0) {
      bad = Status::InvalidArgument("a write's version precondition is " +
                                    std::to_string(*w.if_version) +
                                    "; versions are >= 1 (0 asks for an absent key)");
    }
  }
  if (!bad.ok()) return p.Answer(bad);
  if (!options_.lock_for.empty()) {  // without it, no vector per write
    p.prefix_locks.assign(p.writes.size(), nullptr);
    for (std::size_t i = 0; i < p.writes.size(); ++i) {
      std::size_t longest = 0;
      for (const auto& [prefix, lock] : options_.lock_for) {
        if (p.writes[i].key.starts_with(prefix) &&
            (p.prefix_locks[i] == nullptr || prefix.size() > longest)) {
          p.prefix_locks[i] = &lock;
          longest = prefix.size();
        }
      }
    }
  }
  {
    MutexLock lock(mu_);
    if (!closing_) {
      const std::size_t writes = p.writes.size();
      queue_.push_back(std::move(p));
      queued_writes_ += writes;
      // The writer waits for a first write, or lingers until a full batch (batch_linger).
      if (queue_.size() == 1 ||
          (queued_writes_ >= options_.max_batch && queued_writes_ - writes < options_.max_batch)) {
        cv_.NotifyOne();
      }
      return;
    }
  }
  p.Answer(Status::Unavailable("the store is closed; writes are no longer accepted"));
}

void Writer::SetFence(std::string lock, FencingToken highest, std::string principal, bool unbind,
                      std::function<void(Result<Decision>)> done) {
  {
    MutexLock guard(mu_);
    if (!closing_) {
      admin_.push_back(
          AdminOp{std::move(lock), highest, std::move(principal), unbind, std::move(done)});
      cv_.NotifyOne();
      return;
    }
  }
  done(Status::Unavailable("the store is closed; the fence was not set"));
}

void Writer::ProbeCommit(std::function<void(Status)> done) {
  {
    MutexLock guard(mu_);
    if (!closing_) {
      probes_.push_back(std::move(done));
      cv_.NotifyOne();
      return;
    }
  }
  done(Status::Unavailable("the store is closed"));
}

void Writer::Resume(Pending p) {
  MutexLock lock(mu_);
  --awaiting_;
  queued_writes_ += p.writes.size();
  queue_.push_back(std::move(p));
  cv_.NotifyOne();
}

void Writer::Defer(Pending& p) {
  {
    MutexLock lock(mu_);
    ++awaiting_;
  }
  auto held = std::make_shared<Pending>(std::move(p));
  std::string lock = held->grant().lock;
  FencingToken token = held->grant().token;
  SharedVerdict known = verifier_->Join(lock, token, [this, held](SharedVerdict answer) {
    held->verdict = std::move(answer);
    held->resumed = true;
    Resume(std::move(*held));
  });
  if (known != nullptr) {  // answered meanwhile, or refused at once: back to the queue with it
    held->verdict = std::move(known);
    Resume(std::move(*held));
  }
}

StoreStats Writer::Stats() const {
  StoreStats s;
  s.accepted = accepted_.load(std::memory_order_relaxed);
  for (std::size_t i = 0; i < refused_.size(); ++i) {
    s.refused_by_code[i] = refused_[i].load(std::memory_order_relaxed);
  }
  if (verifier_ != nullptr) {
    s.verifications = verifier_->calls();
    s.verify_failures = verifier_->failures();
  }
  s.failed = failed_.load(std::memory_order_relaxed);
  s.commits = commits_.load(std::memory_order_relaxed);
  s.recoveries = recoveries_.load(std::memory_order_relaxed);
  s.retries = retries_.load(std::memory_order_relaxed);
  s.database_shared = shared_.load(std::memory_order_relaxed);
  for (const auto& b : batch_buckets_) s.batch_size_buckets.push_back(b.load());
  return s;
}

bool Writer::Stop() {
  {
    MutexLock lock(mu_);
    if (closing_ && !writer_.joinable()) return false;
    closing_ = true;
  }
  cv_.NotifyOne();
  // Writes waiting for a call that has not started fail at once rather than each waiting for
  // the lock service. The writer thread leaves once no write waits for the verifier, so no
  // continuation runs after this.
  if (verifier_ != nullptr) verifier_->BeginStop();
  if (writer_.joinable()) writer_.join();
  if (verifier_ != nullptr) verifier_->Stop();
  if (engine_ != nullptr) engine_->Close();
  return true;
}

std::int64_t Writer::NowMs() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock_->WallNow().time_since_epoch())
      .count();
}

std::size_t Writer::TakeWrites(std::vector<Pending>& batch) {
  // Client batches are never split: take them while the transaction holds fewer writes.
  std::size_t writes = 0;
  while (!queue_.empty() && writes < options_.max_batch) {
    writes += queue_.front().writes.size();
    batch.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  queued_writes_ -= writes;
  return writes;
}

void Writer::WriterLoop() {
  std::vector<Pending> batch, next;
  batch.reserve(options_.max_batch);
  next.reserve(options_.max_batch);
  std::vector<AdminOp> admin;
  std::vector<std::function<void(Status)>> probes;
  std::size_t last_writes = 0;  // in the last transaction
  // While a batch commits, the engine may send the queued writes behind it (never an
  // administration or a probe: those wait for a turn with nothing in flight).
  const Engine::TakeNext take_next = [&](std::int64_t* now_ms) -> std::vector<Pending>* {
    {
      // Nor, after a batch of several writes, while the shared linger applies or its look is
      // due: the loop's turn does both.
      if (last_writes > 1 && SharedTurnDue()) return nullptr;
      MutexLock lock(mu_);
      if (queue_.empty() || !admin_.empty() || !probes_.empty()) return nullptr;
      last_writes = TakeWrites(next);
    }
    *now_ms = NowMs();
    return &next;
  };
  for (;;) {
    if (!next.empty()) {
      batch.swap(next);  // already sent behind the last commit: finished first
    } else {
      const std::chrono::microseconds linger =
          last_writes > 1 ? Linger() : std::chrono::microseconds(0);
      MutexLock lock(mu_);
      while (queue_.empty() && admin_.empty() && probes_.empty() && !(closing_ && awaiting_ == 0)) {
        cv_.Wait(mu_);
      }
      if (queue_.empty() && admin_.empty() && probes_.empty()) break;
      // After a transaction of several writes, more are likely on their way: with a linger, wait
      // for them until the batch is full or the linger is over (StoreOptions::batch_linger).
      if (linger.count() > 0 && last_writes > 1 && !queue_.empty()) {
        const auto until = clock_->Now() + linger;
        while (!closing_ && queued_writes_ < options_.max_batch &&
               clock_->WaitUntil(cv_, mu_, until)) {
        }
      }
      for (auto& op : admin_) admin.push_back(std::move(op));
      admin_.clear();
      for (auto& p : probes_) probes.push_back(std::move(p));
      probes_.clear();
      const std::size_t writes = TakeWrites(batch);
      if (writes > 0) last_writes = writes;
    }
    for (auto& op : admin) op.done(engine_->SetFence(op, NowMs()));
    admin.clear();
    if (!probes.empty()) {
      // One probe answers every caller waiting now.
      Status probed = engine_->ProbeCommit();
      for (auto& done : probes) done(probed);
      probes.clear();
    }
    recoveries_.store(engine_->recoveries(), std::memory_order_relaxed);
    if (batch.empty()) continue;
    CommitBatch(batch, take_next);
    recoveries_.store(engine_->recoveries(), std::memory_order_relaxed);
    retries_.store(engine_->retries(), std::memory_order_relaxed);
    for (auto& p : batch) {
      if (p.resumed) verifier_->Resumed(p.grant().lock, p.grant().token);
      if (p.outcome == Outcome::kDeferred) {
        Defer(p);
      } else {
        p.Answer(std::move(p.result));
      }
    }
    batch.clear();
  }
}

bool Writer::SharedTurnDue() const {
  if (options_.batch_linger.count() > 0 || options_.shared_linger.count() == 0) return false;
  return shared_.load(std::memory_order_relaxed) || clock_->Now() - shared_checked_ >= kSharedLook;
}

std::chrono::microseconds Writer::Linger() {
  if (options_.batch_linger.count() > 0) return options_.batch_linger;
  if (options_.shared_linger.count() == 0) return options_.shared_linger;
  const auto now = clock_->Now();
  if (now - shared_checked_ >= kSharedLook) {
    shared_checked_ = now;
    // A failed look changes nothing: the next commit reports the database's trouble.
    auto shared = engine_->AnotherWriterActive();
    if (shared.ok()) shared_.store(*shared, std::memory_order_relaxed);
  }
  return shared_.load(std::memory_order_relaxed) ? options_.shared_linger
                                                 : std::chrono::microseconds(0);
}

// Decides and applies every write of `batch` in one transaction. On any storage error every
// write of the batch fails: nothing is acknowledged.
void Writer::CommitBatch(std::vector<Pending>& batch, const Engine::TakeNext& next) {
  Status failure = engine_->CommitBatch(batch, NowMs(), verifier_.get(), next);
  if (!failure.ok()) {
    for (auto& p : batch) {
      p.result = failure;
      p.outcome = Outcome::kFailed;
    }
    for (const auto& p : batch) failed_.fetch_add(p.writes.size(), std::memory_order_relaxed);
    return;
  }
  commits_.fetch_add(1, std::memory_order_relaxed);
  std::size_t writes = 0;
  for (const auto& p : batch) writes += p.writes.size();
  std::size_t bucket = 0;
  while ((std::size_t{1} << bucket) < writes && bucket + 1 < batch_buckets_.size()) {
    ++bucket;
  }
  batch_buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  for (const auto& p : batch) {
    if (p.outcome == Outcome::kAccepted) {
      accepted_.fetch_add(p.writes.size(), std::memory_order_relaxed);
    } else if (p.outcome == Outcome::kRefused) {
      refused_[static_cast<std::size_t>(p.result.status().code())].fetch_add(
          1, std::memory_order_relaxed);
    }
  }
}

}  // namespace fencekit::fencedstore
