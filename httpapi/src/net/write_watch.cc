#include "net/write_watch.h"

#include "fencekit/common/mutex.h"
#include "fencekit/fencedstore/refusal.h"
#include "wire.h"

namespace fencekit::httpapi {

namespace {

wire::Error ErrorOf(const Status* refusal) {
  return refusal == nullptr ? wire::Error::kStaleToken : wire::ErrorForStoreStatus(*refusal);
}

}  // namespace

bool WriteWatch::Record(const WriteFacts& w, const Status* refusal) {
  const wire::Error error = ErrorOf(refusal);
  const bool decided = refusal == nullptr || error == wire::Error::kStaleToken ||
                       error == wire::Error::kWrongLock || error == wire::Error::kWrongService ||
                       error == wire::Error::kUnverifiedToken ||
                       error == wire::Error::kPreconditionFailed;
  if (decided && events_ != nullptr && events_->listening()) {
    WriteEvent e{.op = w.is_put ? "put" : "delete",
                 .lock = w.lock,
                 .key = w.key,
                 .token = w.token,
                 .accepted = refusal == nullptr,
                 .reason = refusal == nullptr ? std::string_view() : wire::Info(error).name,
                 // Accepted: the fence is at the token now (under --no-fencing, at least there).
                 .highest = refusal == nullptr ? w.token : HighestToken(*refusal).value_or(0),
                 .principal = w.principal,
                 .time = std::chrono::system_clock::now()};
    events_->Publish(e);
  }
  if (decided) {
    if (failing_.load(std::memory_order_relaxed)) failing_.store(false, std::memory_order_relaxed);
  } else if (error == wire::Error::kStorageError) {
    MutexLock lock(mu_);
    failure_ = refusal->message();
    failures_.fetch_add(1, std::memory_order_relaxed);
    failing_.store(true, std::memory_order_relaxed);
  }
  return decided;
}

void WriteWatch::LogRefusal(const WriteFacts& w, const Status& s, bool decided,
                            std::size_t batch_size) {
  const wire::Error error = ErrorOf(&s);
  std::string line = LogTime(std::chrono::system_clock::now());
  line += decided ? " fenced: refused " : " fenced: failed ";
  line.append(batch_size > 0 ? "batch" : (w.is_put ? "put" : "delete"));
  line.append(" lock=").append(Quote(w.lock));
  line.append(" token=").append(std::to_string(w.token));
  if (auto highest = HighestToken(s)) line.append(" highest=").append(std::to_string(*highest));
  if (auto bound = BoundLock(s)) line.append(" bound_lock=").append(Quote(*bound));
  line.append(decided ? " reason=" : " error=").append(wire::Info(error).name);
  line.append(" key=").append(Quote(w.key));
  if (batch_size > 0) line.append(" writes=").append(std::to_string(batch_size));
  if (!w.principal.empty()) line.append(" principal=").append(Quote(w.principal));
  if (!decided) line.append(" message=").append(Quote(s.message()));
  log_->Log(std::move(line));
}

void WriteWatch::Decided(const WriteFacts& w, const Result<WriteReceipt>& r) {
  if (r.ok()) {
    Record(w, nullptr);
    return;
  }
  const Status s = r.status();
  LogRefusal(w, s, Record(w, &s), 0);
}

void WriteWatch::BatchDecided(const std::vector<WriteFacts>& writes,
                              const Result<std::vector<WriteReceipt>>& r) {
  if (writes.empty()) return;
  if (r.ok()) {
    for (const WriteFacts& w : writes) Record(w, nullptr);
    return;
  }
  const Status s = r.status();
  LogRefusal(writes.front(), s, Record(writes.front(), &s), writes.size());
}

Status WriteWatch::WriteState() const {
  if (!failing_.load(std::memory_order_relaxed)) return Status::Ok();
  MutexLock lock(mu_);
  return Status::Unavailable("the last write could not be committed (" + failure_ + ")");
}

void WriteWatch::ClearFailure(std::uint64_t seen) {
  MutexLock lock(mu_);
  if (failures_.load(std::memory_order_relaxed) == seen) {
    failing_.store(false, std::memory_order_relaxed);
  }
}

}  // namespace fencekit::httpapi
