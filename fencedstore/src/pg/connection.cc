#include "pg/connection.h"

#include <endian.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace fencekit::fencedstore::pg {
namespace {

void OnNotice(void* arg, const PGresult* r) {
  const char* severity = PQresultErrorField(r, PG_DIAG_SEVERITY_NONLOCALIZED);
  if (severity != nullptr && std::strcmp(severity, "WARNING") == 0) {
    *static_cast<bool*>(arg) = true;
  }
}

std::string Trimmed(const char* message) {
  std::string s = message != nullptr ? message : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

Command& Command::Text(std::string_view v) {
  values.emplace_back(std::string(v));
  formats.push_back(0);
  return *this;
}
Command& Command::Int(std::int64_t v) { return Text(std::to_string(v)); }
Command& Command::Bool(bool v) { return Text(v ? "t" : "f"); }
Command& Command::Bytes(std::string_view v) {
  values.emplace_back(std::string(v));
  formats.push_back(1);
  return *this;
}
Command& Command::Null() {
  values.emplace_back(std::nullopt);
  formats.push_back(0);
  return *this;
}

namespace {

// PostgreSQL's binary array format (array_recv): dimensions, a null flag, the element type,
// each dimension's length and lower bound, then each element as a length (-1: NULL) and bytes.
class ArrayWriter {
 public:
  ArrayWriter(std::uint32_t element_oid, std::size_t n, bool has_null) {
    Put(1);
    Put(has_null ? 1 : 0);
    Put(element_oid);
    Put(static_cast<std::uint32_t>(n));
    Put(1);
  }
  void Element(std::optional<std::string_view> bytes) {
    if (!bytes) {
      Put(0xFFFFFFFFu);
      return;
    }
    Put(static_cast<std::uint32_t>(bytes->size()));
    out_.append(*bytes);
  }
  std::string Take() { return std::move(out_); }

 private:
  void Put(std::uint32_t v) {
    std::uint32_t be = htobe32(v);
    out_.append(reinterpret_cast<const char*>(&be), 4);
  }
  std::string out_;
};

constexpr std::uint32_t kBoolOid = 16, kByteaOid = 17, kInt8Oid = 20, kTextOid = 25;

// A binary array of elements sent as their bytes (bytea, and text, whose binary form is its
// text).
std::string BytesElements(std::uint32_t oid,
                          const std::vector<std::optional<std::string_view>>& v) {
  bool has_null = std::any_of(v.begin(), v.end(), [](const auto& e) { return !e; });
  ArrayWriter a(oid, v.size(), has_null);
  for (const auto& e : v) a.Element(e);
  return a.Take();
}

}  // namespace

Command& Command::BytesArray(const std::vector<std::optional<std::string_view>>& v) {
  return Bytes(BytesElements(kByteaOid, v));
}

Command& Command::TextArray(const std::vector<std::optional<std::string_view>>& v) {
  return Bytes(BytesElements(kTextOid, v));
}

Command& Command::IntArray(const std::vector<std::optional<std::int64_t>>& v) {
  bool has_null = std::any_of(v.begin(), v.end(), [](const auto& e) { return !e; });
  ArrayWriter a(kInt8Oid, v.size(), has_null);
  for (const auto& e : v) {
    if (!e) {
      a.Element(std::nullopt);
      continue;
    }
    std::uint64_t be = htobe64(static_cast<std::uint64_t>(*e));
    a.Element(std::string_view(reinterpret_cast<const char*>(&be), 8));
  }
  return Bytes(a.Take());
}

Command& Command::BoolArray(const std::vector<bool>& v) {
  ArrayWriter a(kBoolOid, v.size(), false);
  for (bool e : v) a.Element(e ? std::string_view("\1", 1) : std::string_view("\0", 1));
  return Bytes(a.Take());
}

std::int64_t GetInt(const PGresult* r, int row, int col) {
  if (PQgetisnull(r, row, col)) return 0;
  const char* v = PQgetvalue(r, row, col);
  if (PQgetlength(r, row, col) == 4) {
    std::uint32_t x;
    std::memcpy(&x, v, 4);
    return static_cast<std::int32_t>(be32toh(x));
  }
  std::uint64_t x = 0;
  std::memcpy(&x, v, 8);
  return static_cast<std::int64_t>(be64toh(x));
}

bool GetBool(const PGresult* r, int row, int col) {
  return !PQgetisnull(r, row, col) && PQgetvalue(r, row, col)[0] != 0;
}

std::string GetBytes(const PGresult* r, int row, int col) {
  if (PQgetisnull(r, row, col)) return {};
  return std::string(PQgetvalue(r, row, col), PQgetlength(r, row, col));
}

std::string SqlState(const PGresult* r) {
  const char* s = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  return s != nullptr ? s : "";
}

std::string ErrorText(const PGresult* r) {
  std::string message = Trimmed(PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY));
  if (message.empty()) message = Trimmed(PQresultErrorMessage(r));
  if (message.empty()) message = PQresStatus(PQresultStatus(r));
  std::string state = SqlState(r);
  return state.empty() ? message : message + " (SQLSTATE " + state + ")";
}

std::string RedactUri(std::string_view uri) {
  std::string out(uri);
  auto scheme = out.find("://");
  if (scheme != std::string::npos) {
    auto start = scheme + 3;
    auto end = out.find_first_of("/?", start);
    if (end == std::string::npos) end = out.size();
    auto at = out.rfind('@', end);
    if (at != std::string::npos && at >= start) {
      auto colon = out.find(':', start);
      if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
    }
  }
  for (auto p = out.find("password="); p != std::string::npos; p = out.find("password=", p + 1)) {
    auto value = p + 9;
    auto end = out.find('&', value);
    out.replace(value, (end == std::string::npos ? out.size() : end) - value, "***");
  }
  return out;
}

Result<std::unique_ptr<Conn>> Conn::Connect(const std::string& uri) {
  // Defaults first: the URI's own settings override them.
  const char* keys[] = {"connect_timeout", "application_name", "dbname", nullptr};
  const char* values[] = {"5", "fencekit", uri.c_str(), nullptr};
  PGconn* c = PQconnectdbParams(keys, values, 1);
  if (c == nullptr) return Status::Unavailable("libpq could not allocate a connection");
  if (PQstatus(c) != CONNECTION_OK) {
    std::string why = Trimmed(PQerrorMessage(c));
    PQfinish(c);
    return Status::Unavailable("cannot connect to the PostgreSQL database " + RedactUri(uri) +
                               ": " + why);
  }
  std::unique_ptr<Conn> conn(new Conn(c));
  if (PQsetnonblocking(c, 1) != 0) return conn->Lost("switching to non-blocking mode");
  return conn;
}

Conn::Conn(PGconn* c) : conn_(c) { PQsetNoticeReceiver(c, &OnNotice, &warned_); }

Conn::~Conn() { PQfinish(conn_); }

bool Conn::usable() const { return !broken_ && PQstatus(conn_) == CONNECTION_OK; }

bool Conn::TakeWarning() { return std::exchange(warned_, false); }

Status Conn::Lost(std::string_view doing) {
  broken_ = true;
  return Status::Unavailable("the connection to PostgreSQL failed while " + std::string(doing) +
                             ": " + Trimmed(PQerrorMessage(conn_)));
}

template <typename Done>
Status Conn::Wait(Done done, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    int pending = PQflush(conn_);
    if (pending < 0) return Lost("sending");
    if (pending == 0 && done()) return Status::Ok();
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());  // real time: poll(2)'s
    if (left.count() <= 0) {
      broken_ = true;
      return Status::Unavailable("PostgreSQL did not answer in time; the connection is dropped");
    }
    pollfd p{PQsocket(conn_), static_cast<short>(POLLIN | (pending == 1 ? POLLOUT : 0)), 0};
    int n = poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count() + 1, 60'000)));
    if (n < 0 && errno != EINTR) return Lost("waiting");
    if (n > 0 && (p.revents & (POLLIN | POLLERR | POLLHUP)) != 0 && PQconsumeInput(conn_) == 0) {
      return Lost("reading");
    }
  }
}

// Every deadline below is the socket's, in real time (not Clock): poll(2) measures it.
Result<ResultPtr> Conn::Exec(const std::string& sql, std::chrono::milliseconds timeout) {
  if (!usable()) return Lost("starting a query");
  if (in_flight_ > 0) return Status::Internal("a query was started while a pipeline is in flight");
  auto deadline = std::chrono::steady_clock::now() + timeout;
  if (PQsendQuery(conn_, sql.c_str()) == 0) return Lost("sending a query");
  ResultPtr last, error;
  for (;;) {
    if (auto s = Wait([&] { return PQisBusy(conn_) == 0; }, deadline); !s.ok()) return s;
    ResultPtr r(PQgetResult(conn_));
    if (r == nullptr) break;
    ExecStatusType st = PQresultStatus(r.get());
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && error == nullptr) {
      error = std::move(r);
    } else {
      last = std::move(r);
    }
  }
  if (PQstatus(conn_) != CONNECTION_OK) return Lost("running a query");
  if (error != nullptr) return Status::IoError(ErrorText(error.get()));
  if (last == nullptr) return Status::IoError("PostgreSQL returned no result");
  return last;
}

Status Conn::Prepare(const std::string& name, const std::string& sql,
                     std::chrono::milliseconds timeout) {
  if (!usable()) return Lost("preparing a statement");
  if (in_flight_ > 0) {
    return Status::Internal("a statement was prepared while a pipeline is in flight");
  }
  auto deadline = std::chrono::steady_clock::now() + timeout;
  if (PQsendPrepare(conn_, name.c_str(), sql.c_str(), 0, nullptr) == 0) {
    return Lost("preparing a statement");
  }
  Status status = Status::Ok();
  for (;;) {
    if (auto s = Wait([&] { return PQisBusy(conn_) == 0; }, deadline); !s.ok()) return s;
    ResultPtr r(PQgetResult(conn_));
    if (r == nullptr) break;
    if (PQresultStatus(r.get()) != PGRES_COMMAND_OK && status.ok()) {
      status = Status::IoError("preparing a statement: " + ErrorText(r.get()));
    }
  }
  return status;
}

Result<std::vector<ResultPtr>> Conn::Pipeline(const std::vector<Command>& commands,
                                              std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  if (auto s = Send(commands); !s.ok()) return s;
  return Receive(commands.size(), deadline);
}

Status Conn::Send(const std::vector<Command>& commands, bool flush_before_last) {
  if (!usable()) return Lost("starting a pipeline");
  if (in_flight_ == 0 && PQenterPipelineMode(conn_) == 0) return Lost("entering pipeline mode");
  std::vector<const char*> values;
  std::vector<int> lengths;
  for (const Command& c : commands) {
    if (flush_before_last && &c == &commands.back() && commands.size() > 1 &&
        PQsendFlushRequest(conn_) == 0) {
      return Lost("sending a pipeline");
    }
    values.clear();
    lengths.clear();
    for (const auto& v : c.values) {
      values.push_back(v ? v->data() : nullptr);
      lengths.push_back(v ? static_cast<int>(v->size()) : 0);
    }
    int n = static_cast<int>(values.size());
    int sent = c.prepared ? PQsendQueryPrepared(conn_, c.sql.c_str(), n, values.data(),
                                                lengths.data(), c.formats.data(), 1)
                          : PQsendQueryParams(conn_, c.sql.c_str(), n, nullptr, values.data(),
                                              lengths.data(), c.formats.data(), 1);
    if (sent == 0) return Lost("sending a pipeline");
  }
  if (PQpipelineSync(conn_) == 0) return Lost("sending a pipeline");
  ++in_flight_;
  // Out now, not when its results are first waited for: the server may be idle.
  if (PQflush(conn_) < 0) return Lost("sending a pipeline");
  return Status::Ok();
}

Result<std::vector<ResultPtr>> Conn::Receive(std::size_t count,
                                             std::chrono::steady_clock::time_point deadline,
                                             const std::function<void()>& before_last) {
  if (in_flight_ == 0 || !usable()) return Lost("reading a pipeline");
  std::vector<ResultPtr> out;
  out.reserve(count);
  bool failed = false;
  auto ready = [&] { return PQisBusy(conn_) == 0; };
  for (std::size_t i = 0; i < count; ++i) {
    if (i + 1 == count && !failed && before_last) before_last();
    ResultPtr first;
    for (;;) {
      if (auto s = Wait(ready, deadline); !s.ok()) return s;
      ResultPtr r(PQgetResult(conn_));
      if (r == nullptr) break;
      if (first == nullptr) first = std::move(r);
    }
    if (first == nullptr || PQstatus(conn_) != CONNECTION_OK) return Lost("reading a pipeline");
    ExecStatusType st = PQresultStatus(first.get());
    failed = failed || (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK);
    out.push_back(std::move(first));
  }
  if (auto s = Wait(ready, deadline); !s.ok()) return s;
  ResultPtr sync(PQgetResult(conn_));
  if (sync == nullptr || PQresultStatus(sync.get()) != PGRES_PIPELINE_SYNC) {
    return Lost("ending a pipeline");
  }
  if (--in_flight_ == 0 && PQexitPipelineMode(conn_) == 0) return Lost("ending a pipeline");
  return out;
}

}  // namespace fencekit::fencedstore::pg
