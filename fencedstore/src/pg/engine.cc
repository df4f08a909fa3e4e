#include "pg/engine.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>

#include "refusals.h"

namespace fencekit::fencedstore {

using pg::Command;

namespace {

constexpr const char* kWriteMany = "fencekit_write_many";
constexpr const char* kWriteBatch = "fencekit_write_batch";
// Deadlocks between the batches of several fenced are resolved by PostgreSQL aborting one; the
// aborted batch stored nothing and runs again, up to this many times in all.
constexpr int kAttempts = 5;
// The keys of the advisory lock that marks a store's writer session (any constants: "fenc", 1).
constexpr const char* kWriterMark = "1717923427, 1";
// A lock's fence, locked exclusively ahead of its writes in a batch (Attempt).
constexpr const char* kLockFence =
    "SELECT 1 FROM fencekit.fences WHERE lock = $1::bytea FOR UPDATE";

}  // namespace

PostgresEngine::PostgresEngine(const StoreOptions& options, std::unique_ptr<pg::Conn> conn)
    : options_(options), conn_(std::move(conn)) {}

Status PostgresEngine::Configure(pg::Conn& conn, const StoreOptions& options) {
  auto t = options.database_timeout;
  auto settings =
      conn.Exec("SELECT current_setting('fsync'), current_setting('synchronous_commit')", t);
  if (!settings.ok()) return settings.status();
  std::string fsync = PQgetvalue(settings->get(), 0, 0);
  std::string sync = PQgetvalue(settings->get(), 0, 1);
  std::string set;
  if (options.durability == Durability::kFull) {
    if (fsync != "on") {
      return Status::InvalidArgument(
          "PostgreSQL runs with fsync=" + fsync +
          ": an acknowledged write would not survive a crash of its machine. Turn fsync on in "
          "the server's configuration (or open the store with durability normal)");
    }
    // A commit is acknowledged once durable (and, with a synchronous standby, replicated as the
    // server's synchronous_commit says): never with synchronous_commit=off.
    if (sync == "off") set = "SET synchronous_commit = on;";
  } else {
    set = "SET synchronous_commit = off;";
  }
  // The statements of the functions below find rows by their keys whatever the arguments: one
  // plan each, made once, rather than made again on every call.
  set += "SET plan_cache_mode = force_generic_plan;";
  // Marks this session as a store's writer, for the others' AnotherWriterActive: a lock in
  // shared mode, which nobody takes exclusively, held until the session ends.
  set += "SELECT pg_advisory_lock_shared(" + std::string(kWriterMark) + ")";
  if (auto r = conn.Exec(set, t); !r.ok()) return r.status();
  if (auto s = conn.Prepare(kWriteMany,
                            "SELECT o_outcome, o_highest, o_version, o_bound_lock, "
                            "o_fence_service, o_prior FROM fencekit.write_many($1::boolean[], "
                            "$2::bytea[], $3::int8[], $4::bytea[], $5::bytea[], $6::text[], "
                            "$7::bytea[], $8::int8[], $9::text[], $10::bytea[], $11::boolean[], "
                            "$12::boolean, $13::boolean, $14::int8, $15::boolean)",
                            t);
      !s.ok()) {
    return s;
  }
  return conn.Prepare(kWriteBatch,
                      "SELECT o_outcome, o_highest, o_version, o_bound_lock, o_fence_service, "
                      "o_prior, o_index FROM fencekit.write_batch($1::bytea, $2::int8, $3::text, "
                      "$4::int4, $5::text, $6::boolean, $7::boolean, $8::int8, $9::bytea, "
                      "$10::boolean, $11::boolean[], $12::bytea[], $13::bytea[], $14::bytea[], "
                      "$15::int8[])",
                      t);
}

Status PostgresEngine::Connected() {
  if (conn_ != nullptr && conn_->usable()) return Status::Ok();
  conn_.reset();
  auto c = pg::Conn::Connect(options_.path);
  if (!c.ok()) return c.status();
  if (auto s = Configure(**c, options_); !s.ok()) return s;
  conn_ = std::move(c).value();
  return Status::Ok();
}

Status PostgresEngine::CommitBatch(std::vector<Pending>& batch, std::int64_t now_ms,
                                   Verifier* verifier, const TakeNext& next) {
  std::optional<Sent> sent = std::exchange(sent_, std::nullopt);
  if (sent && sent->first != batch.data()) {
    conn_.reset();  // the sent batch's results are no batch's now
    return BatchFailure(Status::Internal("a batch was committed out of the order it was sent in"),
                        false);
  }
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    bool retry = false;
    Status s = sent ? Finish(batch, *sent, next, &retry) : Attempt(batch, now_ms, next, &retry);
    sent.reset();
    if (!retry) {
      if (!s.ok()) return s;
      break;
    }
    ++retries_;
    if (sent_) {
      // Aborted at its COMMIT, after the next batch was sent behind it: run again now, it would
      // come after that one; nothing of it was stored.
      return BatchFailure(Status::Unavailable("PostgreSQL aborted the batch at its commit"), false);
    }
    if (attempt + 1 == kAttempts) {
      return BatchFailure(
          Status::Unavailable("PostgreSQL aborted the batch " + std::to_string(kAttempts) +
                              " times to resolve deadlocks with other writers"),
          false);
    }
  }
  for (auto& p : batch) {
    if (p.outcome != Outcome::kDeferred) continue;
    // The lock service must be asked; a verdict that could not be had fails the write closed.
    if (p.verdict != nullptr && !p.verdict->ok()) {
      p.outcome = Outcome::kFailed;
      p.result = p.verdict->status();
    } else if (verifier == nullptr) {
      p.outcome = Outcome::kFailed;
      p.result = Status::Internal("the fence refused a token above it; nothing was written");
    }
  }
  return Status::Ok();
}

void PostgresEngine::AddWrite(WriteMany& many, const Pending& p, bool lock_fence) const {
  const WriteRequest& w = p.grant();
  std::string_view service;
  Status mismatch = ResolveService(p, &service);
  const bool put = w.kind == WriteRequest::Kind::kPut;
  many.deletes.push_back(!put);
  many.locks.emplace_back(w.lock);
  many.tokens.emplace_back(w.token.value());
  many.keys.emplace_back(w.key);
  many.values.push_back(put ? std::optional<std::string_view>(w.value) : std::nullopt);
  many.services.push_back(service.empty() ? std::nullopt
                                          : std::optional<std::string_view>(service));
  many.prefix_locks.push_back(p.prefix_lock(0) == nullptr
                                  ? std::nullopt
                                  : std::optional<std::string_view>(*p.prefix_lock(0)));
  many.verifies.emplace_back(VerifyCode(p));
  many.refusals.push_back(mismatch.ok()
                              ? std::nullopt
                              : std::optional<std::string_view>(StatusCodeName(mismatch.code())));
  many.principals.push_back(w.principal.empty() ? std::nullopt
                                                : std::optional<std::string_view>(w.principal));
  many.lock_fences.push_back(lock_fence);
}

pg::Command PostgresEngine::WriteMany::Take(const StoreOptions& options, std::int64_t now_ms) {
  pg::Command c{kWriteMany, true};
  c.BoolArray(deletes).BytesArray(locks).IntArray(tokens).BytesArray(keys).BytesArray(values);
  c.TextArray(services).BytesArray(prefix_locks).IntArray(verifies).TextArray(refusals);
  c.BytesArray(principals).BoolArray(lock_fences);
  c.Bool(options.strict).Bool(options.unguarded).Int(now_ms).Bool(options.history_limit > 0);
  *this = WriteMany{};
  return c;
}

pg::Command PostgresEngine::WriteCommand(const Pending& p, std::int64_t now_ms) const {
  const WriteRequest& g = p.grant();
  std::string_view service;
  Status mismatch = ResolveService(p, &service);
  const int verify = VerifyCode(p);
  pg::Command c{kWriteBatch, true};
  c.Bytes(g.lock).Int(g.token.value());
  service.empty() ? c.Null() : c.Text(service);
  c.Int(verify);
  mismatch.ok() ? c.Null() : c.Text(StatusCodeName(mismatch.code()));
  c.Bool(options_.strict).Bool(options_.unguarded).Int(now_ms);
  g.principal.empty() ? c.Null() : c.Bytes(g.principal);
  c.Bool(options_.history_limit > 0);
  std::vector<bool> deletes;
  std::vector<std::optional<std::string_view>> keys, values, prefix_locks;
  std::vector<std::optional<std::int64_t>> if_versions;
  for (std::size_t i = 0; i < p.writes.size(); ++i) {
    const WriteRequest& w = p.writes[i];
    const bool put = w.kind == WriteRequest::Kind::kPut;
    deletes.push_back(!put);
    keys.emplace_back(w.key);
    values.push_back(put ? std::optional<std::string_view>(w.value) : std::nullopt);
    prefix_locks.push_back(p.prefix_lock(i) == nullptr
                               ? std::nullopt
                               : std::optional<std::string_view>(*p.prefix_lock(i)));
    if_versions.push_back(w.if_version);
  }
  c.BoolArray(deletes).BytesArray(keys).BytesArray(values).BytesArray(prefix_locks);
  c.IntArray(if_versions);
  return c;
}

int PostgresEngine::VerifyCode(const Pending& p) const {
  if (!options_.verify) return 0;
  return p.verdict == nullptr || !p.verdict->ok() ? 1 : (Verified(p) ? 3 : 2);
}

bool PostgresEngine::MixedFenceModes(const std::vector<Pending>& batch,
                                     const std::vector<std::size_t>& order, std::size_t first,
                                     std::size_t last) const {
  const Pending& a = batch[order[first]];
  for (std::size_t j = first + 1; j < last; ++j) {
    const Pending& b = batch[order[j]];
    if (b.grant().token != a.grant().token || b.grant().service != a.grant().service ||
        VerifyCode(b) != VerifyCode(a)) {
      return true;
    }
  }
  return false;
}

Status PostgresEngine::ReadDecision(Pending& p, const PGresult* r, int row) const {
  const int rows = PQntuples(r);
  if (rows <= row || PQnfields(r) != (p.atomic() ? 7 : 6)) {
    return BatchFailure(Status::Internal("fencekit.write returned an unexpected row"), false);
  }
  std::string outcome = pg::GetBytes(r, row, 0);
  p.highest = pg::GetInt(r, row, 1);
  p.culprit = p.atomic() ? static_cast<std::size_t>(pg::GetInt(r, 0, 6)) : 0;
  if (outcome == "accepted") {
    // fencekit.write_batch's whole result is `p`'s; of fencekit.write_many's, one row.
    const int own = p.atomic() ? rows : 1;
    if (static_cast<std::size_t>(own) != p.writes.size()) {
      return BatchFailure(Status::Internal("fencekit.write_batch returned too few rows"), false);
    }
    std::vector<WriteReceipt> receipts;
    receipts.reserve(p.writes.size());
    for (int i = 0; i < own; ++i) {
      const WriteRequest& w = p.writes[i];
      const bool put = w.kind == WriteRequest::Kind::kPut;
      receipts.push_back(WriteReceipt{w.key, w.lock, w.token, pg::GetInt(r, row + i, 2),
                                      put && pg::GetInt(r, row + i, 5) == 0});
    }
    p.outcome = Outcome::kAccepted;
    p.result = std::move(receipts);
    return Status::Ok();
  }
  if (p.culprit >= p.writes.size()) {
    return BatchFailure(Status::Internal("fencekit.write_batch named no write of the batch"),
                        false);
  }
  if (outcome == "verify") {
    p.outcome = Outcome::kDeferred;
    return Status::Ok();
  }
  // The functions name a refusal as the history does: by its code's name.
  Status refusal = Status::Internal("fencekit.write returned an unknown outcome");
  switch (StatusCodeFromName(outcome).value_or(StatusCode::kOk)) {
    case StatusCode::kStaleToken:
      refusal = StaleTokenStatus(p, p.highest, options_.strict);
      break;
    case StatusCode::kWrongLock:
      refusal = WrongLockStatus(p, pg::GetBytes(r, row, 3), p.prefix_lock(p.culprit) != nullptr);
      break;
    case StatusCode::kWrongService: {
      std::string_view service;
      Status early = ResolveService(p, &service);
      refusal = !early.ok() ? early : FenceServiceStatus(p, pg::GetBytes(r, row, 4), service);
      break;
    }
    case StatusCode::kUnverifiedToken:
      refusal = UnverifiedStatus(p);
      break;
    case StatusCode::kPreconditionFailed:
      refusal = PreconditionStatus(p, pg::GetInt(r, row, 5));
      break;
    default:
      return BatchFailure(refusal, false);
  }
  p.outcome = Outcome::kRefused;
  p.result = std::move(refusal);
  return Status::Ok();
}

PostgresEngine::Sent PostgresEngine::Build(const std::vector<Pending>& batch, std::int64_t now_ms) {
  Sent sent;
  sent.first = batch.data();
  // Each write locks its lock's fence and its key's row until the commit. Taking them in one
  // order (by lock, then by key, which belongs to one lock; writes of one key keeping their
  // order) keeps the batches of several fenced from deadlocking in most cases; the rest are
  // retried.
  std::vector<std::size_t>& order = sent.order;
  order.resize(batch.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const WriteRequest& x = batch[a].grant();
    const WriteRequest& y = batch[b].grant();
    return std::tie(x.lock, x.key) < std::tie(y.lock, y.key);
  });
  sent.txn = std::make_unique<pg::Transaction>(*conn_, options_.database_timeout);
  pg::Transaction& txn = *sent.txn;
  std::vector<std::pair<std::size_t, int>>& result_of = sent.result_of;
  result_of.resize(order.size());
  // A write that leaves its fence as it is locks it shared, one that moves it exclusively. Two
  // such writes of one lock in this batch would upgrade a shared lock that another batch's
  // write may hold too, each then waiting for the other (a deadlock PostgreSQL breaks by
  // aborting a batch). So when the writes of one lock differ (token, service, verification),
  // the fence is locked exclusively before the first of them.
  std::size_t commands = 0;
  // The unconditional writes since the last other command: one call for them all.
  WriteMany many;
  auto add_many = [&] {
    if (many.size() == 0) return;
    txn.Add(many.Take(options_, now_ms));
    ++commands;
  };
  for (std::size_t first = 0; first < order.size();) {
    const std::string& lock = batch[order[first]].grant().lock;
    std::size_t last = first + 1;
    while (last < order.size() && batch[order[last]].grant().lock == lock) ++last;
    bool lock_fence = !options_.unguarded && MixedFenceModes(batch, order, first, last);
    for (std::size_t j = first; j < last; ++j) {
      const Pending& p = batch[order[j]];
      if (!p.atomic()) {
        // A key written again (sorted, its writes are adjacent) starts a new call:
        // fencekit.write_many decides a call of distinct keys set-based, else write by write.
        // Both calls take their locks in the batch's order.
        if (many.size() > 0 && many.keys.back() == p.grant().key &&
            many.locks.back() == p.grant().lock) {
          add_many();
        }
        result_of[j] = {commands, static_cast<int>(many.size())};
        AddWrite(many, p, lock_fence);
      } else {
        add_many();
        if (lock_fence) {
          txn.Add(pg::Command{kLockFence}.Bytes(lock));
          ++commands;
        }
        txn.Add(WriteCommand(p, now_ms));
        result_of[j] = {commands++, 0};
      }
      lock_fence = false;
    }
    first = last;
  }
  add_many();
  if (options_.history_limit > 0 && ++commits_ % 64 == 0) {
    // Trimming every 64 commits keeps the history bounded without a delete per commit. The
    // lower bound makes it a scan of the index over the rows to delete (about 64 batches'),
    // not of the whole table, dead rows and all. At most the 4,096 oldest rows go per trim: a
    // history far over its limit (a lower --history than before) shrinks over several trims,
    // not in one long delete. A run goes whole, once its last decision is to go.
    txn.Add(
        Command{"WITH b AS (SELECT least(greatest((SELECT max(seq) FROM fencekit.history), "
                "(SELECT max(last_seq) FROM fencekit.history_runs)) - $1::int8, "
                "o.oldest + 4095) AS upto, o.oldest FROM (SELECT least("
                "(SELECT min(seq) FROM fencekit.history), "
                "(SELECT min(last_seq) FROM fencekit.history_runs)) AS oldest) AS o), "
                "rows AS (DELETE FROM fencekit.history "
                "WHERE seq <= (SELECT upto FROM b) AND seq >= (SELECT oldest FROM b)) "
                "DELETE FROM fencekit.history_runs "
                "WHERE last_seq <= (SELECT upto FROM b) AND last_seq >= (SELECT oldest FROM b)"}
            .Int(static_cast<std::int64_t>(options_.history_limit)));
  }
  return sent;
}

Status PostgresEngine::Attempt(std::vector<Pending>& batch, std::int64_t now_ms,
                               const TakeNext& next, bool* retry) {
  if (auto s = Connected(); !s.ok()) return BatchFailure(s, false);
  Sent sent = Build(batch, now_ms);
  sent.txn->Send(/*early=*/static_cast<bool>(next));
  return Finish(batch, sent, next, retry);
}

Status PostgresEngine::Finish(std::vector<Pending>& batch, Sent& sent, const TakeNext& next,
                              bool* retry) {
  // Decided, the batch waits for its commit: the next one goes out behind it, so that the
  // server turns to it at once rather than after a round trip and this thread's answers.
  auto send_next = [&] {
    std::int64_t at = 0;
    std::vector<Pending>* following = next ? next(&at) : nullptr;
    if (following == nullptr || following->empty()) return;
    sent_ = Build(*following, at);
    sent_->txn->Send(/*early=*/true);
  };
  pg::Transaction::Failure failure;
  auto results = sent.txn->Finish("the batch", &failure, send_next);
  if (!results.ok()) {
    if (failure.sql_state == "40P01" || failure.sql_state == "40001") {
      *retry = true;
      return Status::Ok();
    }
    return BatchFailure(failure.status, failure.maybe_committed);
  }
  const std::vector<std::size_t>& order = sent.order;
  for (std::size_t j = 0; j < order.size(); ++j) {
    const auto [command, row] = sent.result_of[j];
    if (auto s = ReadDecision(batch[order[j]], (*results)[command].get(), row); !s.ok()) {
      return s;
    }
  }
  return Status::Ok();
}

// A transaction that takes an id has a commit record, which PostgreSQL flushes (and, with a
// synchronous standby, replicates) before it answers, as for a batch; an empty one has none.
Result<bool> PostgresEngine::AnotherWriterActive() {
  if (auto s = Connected(); !s.ok()) return s;
  // (The two-key form of an advisory lock shows its keys as classid and objid, objsubid 2.)
  auto r = conn_->Exec(
      "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
      "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND "
      "(l.classid::int8, l.objid::int8) = (" + std::string(kWriterMark) + ") AND "
      "l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND "
      "l.pid <> pg_backend_pid() AND a.state_change > now() - interval '500 milliseconds'",
      options_.database_timeout);
  if (!r.ok()) return r.status();
  return std::strtoll(PQgetvalue(r->get(), 0, 0), nullptr, 10) > 0;
}

Status PostgresEngine::ProbeCommit() {
  if (auto s = Connected(); !s.ok()) return s;
  pg::Transaction txn(*conn_, options_.database_timeout);
  txn.Add(Command{"SELECT pg_current_xact_id()"});
  pg::Transaction::Failure failure;
  auto results = txn.Commit("a probe commit", &failure);
  return results.ok() ? Status::Ok() : failure.status;
}

Result<Decision> PostgresEngine::SetFence(const AdminOp& op, std::int64_t now_ms) {
  Decision d = SetFenceDecision(op, now_ms);
  Status failure = Connected();
  bool maybe_stored = false;
  if (failure.ok()) {
    pg::Transaction txn(*conn_, options_.database_timeout);
    txn.Add(
        Command{"INSERT INTO fencekit.fences(lock, highest, service, confirmed) "
                "VALUES ($1::bytea, $2::int8, NULL, false) ON CONFLICT (lock) DO UPDATE SET "
                "highest = excluded.highest, confirmed = false, "
                "service = CASE WHEN $3::boolean THEN NULL ELSE fencekit.fences.service END"}
            .Bytes(op.lock)
            .Int(op.highest.value())
            .Bool(op.unbind));
    if (options_.history_limit > 0) {
      Command record{
          "INSERT INTO fencekit.history(time_ms, op, lock, token, key, accepted, highest, "
          "reason, principal) VALUES ($1::int8, 'set_fence', $2::bytea, $3::int8, ''::bytea, "
          "true, $3::int8, NULL, $4::bytea) RETURNING seq"};
      record.Int(now_ms).Bytes(op.lock).Int(op.highest.value());
      op.principal.empty() ? record.Null() : record.Bytes(op.principal);
      txn.Add(std::move(record));
    }
    pg::Transaction::Failure why;
    auto results = txn.Commit("the fence administration", &why);
    if (!results.ok()) {
      failure = why.status;
      maybe_stored = why.maybe_committed;
    } else if (options_.history_limit > 0) {
      d.seq = pg::GetInt((*results)[1].get(), 0, 0);
    }
  }
  if (failure.ok()) return d;
  std::string message = std::string(maybe_stored ? "the fence may or may not have been set: "
                                                 : "the fence was not set: ") +
                        failure.message() + ". Read it, or set it again";
  return failure.IsUnavailable() ? Status::Unavailable(message) : Status::IoError(message);
}

void PostgresEngine::Close() {
  sent_.reset();  // before the connection its transaction names
  conn_.reset();
}

}  // namespace fencekit::fencedstore
