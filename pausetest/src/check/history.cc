#include "fencekit/pausetest/history.h"

#include <fcntl.h>
#include <unistd.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>

namespace fencekit::pausetest {

namespace json = boost::json;

std::int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string ToJsonLine(const HistoryOp& op) {
  json::object o;
  o["client"] = op.client;
  o["op"] = op.op;
  o["lock"] = op.lock;
  o["token"] = op.token;
  o["key"] = op.key;
  o["value"] = op.value;
  o["start_us"] = op.start_us;
  o["end_us"] = op.end_us;
  o["outcome"] = op.outcome;
  o["lease_expired"] = op.lease_expired;
  if (!op.detail.empty()) o["detail"] = op.detail;
  return json::serialize(o);
}

Result<HistoryOp> FromJsonLine(std::string_view line) {
  boost::system::error_code ec;
  json::value v = json::parse(line, ec);
  if (ec || !v.is_object()) return Status::InvalidArgument("not a JSON object");
  const json::object& o = v.as_object();
  HistoryOp op;
  auto num = [&](const char* f, std::int64_t* out) -> Status {
    auto* x = o.if_contains(f);
    if (x == nullptr || !x->is_int64()) {
      return Status::InvalidArgument(std::string("field \"") + f +
                                     "\" is missing or not an integer");
    }
    *out = x->as_int64();
    return Status::Ok();
  };
  auto str = [&](const char* f, std::string* out, bool required) -> Status {
    auto* x = o.if_contains(f);
    if (x == nullptr && !required) return Status::Ok();
    if (x == nullptr || !x->is_string()) {
      return Status::InvalidArgument(std::string("field \"") + f + "\" is missing or not a string");
    }
    *out = std::string(x->as_string());
    return Status::Ok();
  };
  std::int64_t client = 0;
  for (Status s : {num("client", &client), str("op", &op.op, true), str("lock", &op.lock, true),
                   num("token", &op.token), str("key", &op.key, true), num("value", &op.value),
                   num("start_us", &op.start_us), num("end_us", &op.end_us),
                   str("outcome", &op.outcome, true), str("detail", &op.detail, false)}) {
    if (!s.ok()) return s;
  }
  op.client = static_cast<int>(client);
  if (auto* x = o.if_contains("lease_expired"); x != nullptr && x->is_bool()) {
    op.lease_expired = x->as_bool();
  }
  return op;
}

Result<HistoryWriter> HistoryWriter::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::Unavailable("cannot open history file " + path + ": " + std::strerror(errno));
  }
  return HistoryWriter(fd);
}

HistoryWriter::HistoryWriter(HistoryWriter&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

HistoryWriter& HistoryWriter::operator=(HistoryWriter&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

HistoryWriter::~HistoryWriter() {
  if (fd_ >= 0) ::close(fd_);
}

Status HistoryWriter::Append(const HistoryOp& op) {
  std::string line = ToJsonLine(op) + "\n";
  for (;;) {
    ssize_t n = ::write(fd_, line.data(), line.size());
    if (n == static_cast<ssize_t>(line.size())) return Status::Ok();
    if (n < 0 && errno == EINTR) continue;
    return Status::Unavailable(std::string("cannot append to the history: ") +
                               (n < 0 ? std::strerror(errno) : "short write"));
  }
}

Result<std::vector<HistoryOp>> ReadHistory(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read history file " + path);
  std::vector<HistoryOp> ops;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    auto op = FromJsonLine(line);
    if (!op.ok()) {
      return Status::InvalidArgument(path + " line " + std::to_string(n) + ": " +
                                     op.status().message());
    }
    ops.push_back(std::move(op).value());
  }
  return ops;
}

}  // namespace fencekit::pausetest
