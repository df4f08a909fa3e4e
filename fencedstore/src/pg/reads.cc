#include "pg/reads.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <utility>

#include "fencekit/common/mutex.h"

namespace fencekit::fencedstore {

Result<pg::ResultPtr> PostgresReads::Run(const pg::Command& command) {
  for (int attempt = 0;; ++attempt) {
    std::unique_ptr<pg::Conn> conn;
    {
      MutexLock lock(mu_);
      if (closed_) return Status::Unavailable("the store is closed");
      if (!idle_.empty()) {
        conn = std::move(idle_.back());
        idle_.pop_back();
      }
    }
    const bool pooled = conn != nullptr;
    if (!pooled) {
      auto made = pg::Conn::Connect(options_.path);
      if (!made.ok()) return made.status();
      conn = std::move(made).value();
    }
    auto results = conn->Pipeline({command}, options_.database_timeout);
    if (!results.ok()) {
      if (pooled && attempt == 0) continue;  // lost while idle: once more on a new connection
      return results.status();
    }
    pg::ResultPtr r = std::move(results->front());
    {
      MutexLock lock(mu_);
      if (!closed_ && idle_.size() < 8) idle_.push_back(std::move(conn));
    }
    if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) {
      return Status::IoError("reading from PostgreSQL: " + pg::ErrorText(r.get()));
    }
    return r;
  }
}

Result<StoredObject> PostgresReads::Get(std::string_view key) {
  auto r =
      Run(pg::Command{"SELECT value, lock, token, version FROM fencekit.objects "
                      "WHERE key = $1::bytea"}
              .Bytes(key));
  if (!r.ok()) return r.status();
  const PGresult* res = r->get();
  if (PQntuples(res) == 0) return Status::NotFound("no object is stored under this key");
  auto token = FencingToken::FromInt(pg::GetInt(res, 0, 2));
  if (!token.ok()) {
    return Status::Internal("stored token is invalid: " + token.status().message());
  }
  return StoredObject{pg::GetBytes(res, 0, 0), pg::GetBytes(res, 0, 1), *token,
                      pg::GetInt(res, 0, 3)};
}

Result<ObjectPage> PostgresReads::List(const KeyRange& range, std::size_t limit) {
  // bytea compares byte by byte, as the listing's order is defined.
  pg::Command c{std::string("SELECT key, lock, token, version FROM fencekit.objects WHERE key ") +
                (range.inclusive ? ">=" : ">") + " $1::bytea" +
                (range.to ? " AND key < $3::bytea" : "") + " ORDER BY key LIMIT $2::int8"};
  c.Bytes(range.from).Int(static_cast<std::int64_t>(limit) + 1);
  if (range.to) c.Bytes(*range.to);
  auto r = Run(c);
  if (!r.ok()) return r.status();
  const PGresult* res = r->get();
  ObjectPage page;
  const int rows = PQntuples(res);
  for (int i = 0; i < rows; ++i) {
    if (page.objects.size() == limit) {
      page.next = page.objects.back().key;
      break;
    }
    auto token = FencingToken::FromInt(pg::GetInt(res, i, 2));
    if (!token.ok()) {
      return Status::Internal("stored token is invalid: " + token.status().message());
    }
    page.objects.push_back(ObjectInfo{pg::GetBytes(res, i, 0), pg::GetBytes(res, i, 1), *token,
                                      pg::GetInt(res, i, 3)});
  }
  return page;
}

Result<std::optional<FenceState>> PostgresReads::Fence(std::string_view lock) {
  auto r =
      Run(pg::Command{"SELECT highest, service FROM fencekit.fences WHERE lock = $1::bytea"}.Bytes(
          lock));
  if (!r.ok()) return r.status();
  const PGresult* res = r->get();
  if (PQntuples(res) == 0) return std::optional<FenceState>();
  auto token = FencingToken::FromInt(pg::GetInt(res, 0, 0));
  if (!token.ok()) return token.status();
  return std::optional<FenceState>(FenceState{*token, pg::GetBytes(res, 0, 1)});
}

Result<std::vector<Decision>> PostgresReads::History(std::size_t limit) {
  // The latest of each table: every run holds a decision above those of the runs below its
  // last_seq, so the `limit` latest runs hold the `limit` latest decisions of runs.
  auto r =
      Run(pg::Command{"SELECT seq, time_ms, op, lock, token, key, accepted, highest, reason, "
                      "principal FROM ("
                      "(SELECT seq, time_ms, op, lock, token, key, accepted, highest, reason, "
                      "principal FROM fencekit.history ORDER BY seq DESC LIMIT $1::int8) "
                      "UNION ALL "
                      "(SELECT u.seq, r.time_ms, 'put', u.lock, u.token, u.key, "
                      "u.outcome = 'accepted', u.highest, nullif(u.outcome, 'accepted'), "
                      "u.principal FROM (SELECT * FROM fencekit.history_runs "
                      "ORDER BY last_seq DESC LIMIT $1::int8) AS r, "
                      "unnest(r.seqs, r.locks, r.tokens, r.keys, r.outcomes, r.highests, "
                      "r.principals) AS u(seq, lock, token, key, outcome, highest, principal) "
                      "WHERE u.seq IS NOT NULL)) AS h ORDER BY seq DESC LIMIT $1::int8"}
              .Int(static_cast<std::int64_t>(std::min<std::size_t>(limit, INT64_MAX))));
  if (!r.ok()) return r.status();
  const PGresult* res = r->get();
  std::vector<Decision> out;
  for (int i = PQntuples(res) - 1; i >= 0; --i) {
    Decision d;
    d.seq = pg::GetInt(res, i, 0);
    d.time =
        std::chrono::system_clock::time_point(std::chrono::milliseconds(pg::GetInt(res, i, 1)));
    d.op = pg::GetBytes(res, i, 2);
    d.lock = pg::GetBytes(res, i, 3);
    d.token = pg::GetInt(res, i, 4);
    d.key = pg::GetBytes(res, i, 5);
    d.accepted = pg::GetBool(res, i, 6);
    d.highest = pg::GetInt(res, i, 7);
    d.reason = pg::GetBytes(res, i, 8);
    d.principal = pg::GetBytes(res, i, 9);
    out.push_back(std::move(d));
  }
  return out;
}

void PostgresReads::Close() {
  MutexLock lock(mu_);
  closed_ = true;
  idle_.clear();
}

}  // namespace fencekit::fencedstore
