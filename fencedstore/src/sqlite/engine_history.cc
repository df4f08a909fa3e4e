// The SQLite engine's history (engine.h): a transaction's decisions gathered in one run
// (history_run.h) and inserted as one row of history_runs before its commit.
#include <sqlite3.h>

#include "sqlite/engine.h"

namespace fencekit::fencedstore {

Status SqliteEngine::Record(const WriteRequest& w, bool accepted, std::int64_t highest,
                            StatusCode why, std::int64_t& last_seq) {
  return AddToRun(w.kind == WriteRequest::Kind::kPut ? "put" : "delete", w.lock, w.token.value(),
                  w.key, accepted, highest, accepted ? std::string_view() : StatusCodeName(why),
                  w.principal, &last_seq);
}

Status SqliteEngine::AddToRun(std::string_view op, std::string_view lock, std::int64_t token,
                              std::string_view key, bool accepted, std::int64_t highest,
                              std::string_view reason, std::string_view principal,
                              std::int64_t* seq) {
  if (options_.history_limit == 0) return Status::Ok();
  if (run_.size() == 0) {
    sqlite::ResetOnExit reset(read_last_seq_);
    int rc = read_last_seq_.Step();
    if (rc != SQLITE_ROW) return sqlite::Error(db_.get(), rc, "reading the history's last seq");
    run_start_ = read_last_seq_.ColumnInt(0);
  }
  run_.Add(op, lock, token, key, accepted, highest, reason, principal);
  *seq = run_start_ + static_cast<std::int64_t>(run_.size());
  ++untrimmed_;
  return Status::Ok();
}

Status SqliteEngine::InsertRun(std::int64_t now_ms, std::int64_t last_seq) {
  if (run_.size() == 0) return Status::Ok();
  insert_run_.BindInt(1, last_seq);
  insert_run_.BindInt(2, now_ms);
  insert_run_.BindBlob(3, run_.bytes());
  return Run(insert_run_, "recording the decisions");
}

}  // namespace fencekit::fencedstore
