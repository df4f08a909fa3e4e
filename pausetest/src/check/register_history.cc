#include "fencekit/pausetest/register_history.h"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

namespace fencekit::pausetest {

namespace json = boost::json;

namespace {

constexpr std::size_t kQuoteBytes = 80;

// At most `limit` bytes of `text`, control and non-ASCII bytes escaped, "..." when cut: safe to
// put in a message whatever a worker wrote.
std::string Quote(std::string_view text, std::size_t limit = kQuoteBytes) {
  std::string out;
  for (std::size_t i = 0; i < text.size() && i < limit; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > limit) out += "...";
  return out;
}

const char* TypeName(const json::value& v) {
  switch (v.kind()) {
    case json::kind::double_:
      return "a float";
    case json::kind::bool_:
      return "a boolean";
    case json::kind::object:
      return "an object";
    case json::kind::array:
      return "an array";
    case json::kind::string:
      return "a string";
    case json::kind::null:
      return "null";
    default:
      return "an integer";
  }
}

// A register value: a string, an integer (as its text) or null (absent).
Status ParseValue(const json::object& o, const char* field, std::optional<std::string>* out) {
  const json::value* v = o.if_contains(field);
  if (v == nullptr)
    return Status::InvalidArgument(std::string("field \"") + field + "\" is missing");
  if (v->is_null()) {
    *out = std::nullopt;
  } else if (v->is_string()) {
    *out = std::string(v->as_string());
  } else if (v->is_int64()) {
    *out = std::to_string(v->as_int64());
  } else if (v->is_uint64()) {
    *out = std::to_string(v->as_uint64());
  } else {
    return Status::InvalidArgument(std::string("field \"") + field +
                                   "\" must be a string, an integer or null, not " + TypeName(*v));
  }
  return Status::Ok();
}

Status ParseInt(const json::object& o, const char* field, std::int64_t* out) {
  const json::value* v = o.if_contains(field);
  if (v == nullptr)
    return Status::InvalidArgument(std::string("field \"") + field + "\" is missing");
  if (!v->is_int64()) {
    return Status::InvalidArgument(std::string("field \"") + field +
                                   "\" must be an integer (microseconds), not " + TypeName(*v));
  }
  *out = v->as_int64();
  return Status::Ok();
}

Status ParseString(const json::object& o, const char* field, std::string* out) {
  const json::value* v = o.if_contains(field);
  if (v == nullptr)
    return Status::InvalidArgument(std::string("field \"") + field + "\" is missing");
  if (!v->is_string()) {
    return Status::InvalidArgument(std::string("field \"") + field + "\" must be a string, not " +
                                   TypeName(*v));
  }
  *out = std::string(v->as_string());
  return Status::Ok();
}

std::string ShowValue(const std::optional<std::string>& v) {
  return v.has_value() ? Quote(*v, 40) : std::string("null");
}

std::string Seconds(std::int64_t us) {
  // Milliseconds, rounded toward minus infinity so that 12.3456 s shows as 12.345.
  std::int64_t ms = us >= 0 ? us / 1000 : -((-us + 999) / 1000);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s%" PRId64 ".%03" PRId64, ms < 0 ? "-" : "",
                (ms < 0 ? -ms : ms) / 1000, (ms < 0 ? -ms : ms) % 1000);
  return buf;
}

}  // namespace

Result<RegisterOp> ParseRegisterOp(std::string_view line_text, int client) {
  boost::system::error_code ec;
  json::value v = json::parse(line_text, ec);
  if (ec || !v.is_object()) {
    return Status::InvalidArgument("not a JSON object: \"" + Quote(line_text) + "\"");
  }
  const json::object& o = v.as_object();
  RegisterOp op;
  op.client = client;

  std::string kind;
  if (Status s = ParseString(o, "op", &kind); !s.ok()) return s;
  if (kind == "read") {
    op.kind = RegisterOp::Kind::kRead;
  } else if (kind == "write") {
    op.kind = RegisterOp::Kind::kWrite;
  } else if (kind == "cas") {
    op.kind = RegisterOp::Kind::kCas;
  } else {
    return Status::InvalidArgument("field \"op\" must be \"read\", \"write\" or \"cas\", not \"" +
                                   Quote(kind) + "\"");
  }
  if (Status s = ParseString(o, "key", &op.key); !s.ok()) return s;
  if (op.key.empty()) return Status::InvalidArgument("field \"key\" is empty");
  if (Status s = ParseValue(o, "value", &op.value); !s.ok()) return s;
  if (op.kind == RegisterOp::Kind::kCas) {
    if (Status s = ParseValue(o, "from", &op.from); !s.ok()) return s;
  }
  if (Status s = ParseInt(o, "start_us", &op.start_us); !s.ok()) return s;
  if (Status s = ParseInt(o, "end_us", &op.end_us); !s.ok()) return s;
  if (op.start_us > op.end_us) {
    return Status::InvalidArgument("start_us " + std::to_string(op.start_us) + " is after end_us " +
                                   std::to_string(op.end_us));
  }
  std::string outcome;
  if (Status s = ParseString(o, "outcome", &outcome); !s.ok()) return s;
  if (outcome == "ok") {
    op.outcome = RegisterOp::Outcome::kOk;
  } else if (outcome == "fail") {
    op.outcome = RegisterOp::Outcome::kFail;
  } else if (outcome == "unknown") {
    op.outcome = RegisterOp::Outcome::kUnknown;
  } else {
    return Status::InvalidArgument(
        "field \"outcome\" must be \"ok\", \"fail\" or \"unknown\", not \"" + Quote(outcome) +
        "\"");
  }
  if (const json::value* c = o.if_contains("client"); c != nullptr) {
    if (!c->is_int64() || c->as_int64() < std::numeric_limits<int>::min() ||
        c->as_int64() > std::numeric_limits<int>::max()) {
      return Status::InvalidArgument("field \"client\" must be an integer, not " +
                                     std::string(TypeName(*c)));
    }
    op.client = static_cast<int>(c->as_int64());
  }
  return op;
}

Result<std::vector<RegisterOp>> ReadRegisterHistory(const std::string& path, int client,
                                                    std::size_t max_ops) {
  std::vector<RegisterOp> ops;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec) && !ec) return ops;  // the worker never wrote one
  std::ifstream in(path);
  if (!in) return Status::IoError("cannot read history file " + path);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto op = ParseRegisterOp(line, client);
    if (!op.ok()) {
      return Status::InvalidArgument(path + " line " + std::to_string(n) + ": " +
                                     op.status().message());
    }
    if (ops.size() >= max_ops) {
      return Status::InvalidArgument(path + " line " + std::to_string(n) + ": more than " +
                                     std::to_string(max_ops) + " operations");
    }
    op->line = n;
    ops.push_back(std::move(op).value());
  }
  if (in.bad()) return Status::IoError("cannot read history file " + path);
  return ops;
}

std::string Describe(const RegisterOp& op, std::int64_t origin_us, std::string_view file) {
  std::string s = "client " + std::to_string(op.client) + " ";
  switch (op.kind) {
    case RegisterOp::Kind::kRead:
      s += "read " + Quote(op.key, 40) + " -> " + ShowValue(op.value);
      break;
    case RegisterOp::Kind::kWrite:
      s += "write " + Quote(op.key, 40) + " " + ShowValue(op.value);
      break;
    case RegisterOp::Kind::kCas:
      s += "cas " + Quote(op.key, 40) + " " + ShowValue(op.from) + " -> " + ShowValue(op.value);
      break;
  }
  switch (op.outcome) {
    case RegisterOp::Outcome::kOk:
      s += " (ok) ";
      break;
    case RegisterOp::Outcome::kFail:
      s += " (fail) ";
      break;
    case RegisterOp::Outcome::kUnknown:
      s += " (unknown) ";
      break;
  }
  s += Seconds(op.start_us - origin_us) + "-" + Seconds(op.end_us - origin_us) + " s";
  if (op.line > 0) {
    s += " [" + (file.empty() ? std::string() : Quote(file) + " ") + "line " +
         std::to_string(op.line) + "]";
  }
  return s;
}

}  // namespace fencekit::pausetest
