#include "pg/transaction.h"

#include <utility>

namespace fencekit::fencedstore::pg {

Transaction& Transaction::Add(Command command) {
  commands_.push_back(std::move(command));
  return *this;
}

Result<std::vector<ResultPtr>> Transaction::Commit(std::string_view doing, Failure* failure) {
  Send();
  return Finish(doing, failure);
}

void Transaction::Send(bool early) {
  commands_.push_back(Command{"COMMIT"});
  deadline_ = std::chrono::steady_clock::now() + timeout_;
  // A warning left from before concerns no transaction in flight (none's commit has been read).
  if (conn_.in_flight() == 0) (void)conn_.TakeWarning();
  sent_ = conn_.Send(commands_, early);
}

Result<std::vector<ResultPtr>> Transaction::Finish(std::string_view doing, Failure* failure,
                                                   const std::function<void()>& before_commit) {
  auto results = sent_.ok() ? conn_.Receive(commands_.size(), deadline_, before_commit)
                            : Result<std::vector<ResultPtr>>(sent_);
  if (!results.ok()) {
    *failure = {results.status(), /*maybe_committed=*/true, {}};
    return failure->status;
  }
  for (const auto& r : *results) {
    ExecStatusType st = PQresultStatus(r.get());
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) continue;
    *failure = {
        Status::IoError("PostgreSQL refused " + std::string(doing) + ": " + ErrorText(r.get())),
        false, SqlState(r.get())};
    // A failed COMMIT ended the transaction (and another may be in flight behind it).
    if (&r != &results->back() && conn_.usable()) (void)conn_.Exec("ROLLBACK", timeout_);
    return failure->status;
  }
  if (conn_.TakeWarning()) {
    *failure = {Status::Unavailable("PostgreSQL warned while committing " + std::string(doing) +
                                    " (see its log): it is not known to be replicated"),
                true,
                {}};
    return failure->status;
  }
  // BEGIN's and COMMIT's results are nobody's business.
  std::vector<ResultPtr> out;
  out.reserve(results->size() - 2);
  for (std::size_t i = 1; i + 1 < results->size(); ++i) out.push_back(std::move((*results)[i]));
  return out;
}

}  // namespace fencekit::fencedstore::pg
