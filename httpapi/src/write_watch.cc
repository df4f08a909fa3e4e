#include "write_watch.h"

#include "wire.h"

namespace fencekit {

void WriteWatch::Decided(const WriteFacts& w, const Result<WriteReceipt>& r) {
  const std::string_view op = w.is_put ? "put" : "delete";
  wire::Error error = r.ok() ? wire::Error::kStaleToken : wire::ErrorForStoreStatus(r.status());
  const bool decided = r.ok() || error == wire::Error::kStaleToken ||
                       error == wire::Error::kWrongLock || error == wire::Error::kWrongService ||
                       error == wire::Error::kUnverifiedToken;
  if (decided && events_ != nullptr && events_->listening()) {
    WriteEvent e{.op = op,
                 .lock = w.lock,
                 .key = w.key,
                 .token = w.token,
                 .accepted = r.ok(),
                 .reason = r.ok() ? std::string_view() : wire::Info(error).name,
                 // Accepted: the fence is at the token now (under --no-fencing, at least there).
                 .highest = r.ok() ? w.token : r.status().highest_token().value_or(0),
                 .principal = w.principal,
                 .time = std::chrono::system_clock::now()};
    events_->Publish(e);
  }
  if (decided) {
    if (failing_.load(std::memory_order_relaxed)) failing_.store(false, std::memory_order_relaxed);
  } else if (error == wire::Error::kStorageError) {
    std::lock_guard lock(mu_);
    failure_ = r.status().message();
    failing_.store(true, std::memory_order_relaxed);
  }
  if (r.ok()) return;
  const Status& s = r.status();
  std::string line = LogTime(std::chrono::system_clock::now());
  line += decided ? " fenced: refused " : " fenced: failed ";
  line.append(op).append(" lock=").append(Quote(w.lock));
  line.append(" token=").append(std::to_string(w.token));
  if (s.highest_token()) line.append(" highest=").append(std::to_string(*s.highest_token()));
  if (s.bound_lock()) line.append(" bound_lock=").append(Quote(*s.bound_lock()));
  line.append(decided ? " reason=" : " error=").append(wire::Info(error).name);
  line.append(" key=").append(Quote(w.key));
  if (!w.principal.empty()) line.append(" principal=").append(Quote(w.principal));
  if (!decided) line.append(" message=").append(Quote(s.message()));
  log_->Log(std::move(line));
}

Status WriteWatch::WriteState() const {
  if (!failing_.load(std::memory_order_relaxed)) return Status::Ok();
  std::lock_guard lock(mu_);
  return Status::Unavailable("the last write could not be committed (" + failure_ +
                             "); fenced retries the database with the next write and is ready "
                             "again once a commit succeeds");
}

}  // namespace fencekit
