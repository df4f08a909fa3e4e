#include "live/visitor_writes.h"

#include <algorithm>

namespace json = boost::json;

namespace fencekit::demo {
namespace {

std::string StringField(const json::object& o, const char* name) {
  const auto* v = o.if_contains(name);
  return v != nullptr && v->is_string() ? std::string(v->as_string()) : "";
}

std::optional<std::int64_t> IntField(const json::object& o, const char* name) {
  const auto* v = o.if_contains(name);
  return v != nullptr && v->is_int64() ? std::optional(v->as_int64()) : std::nullopt;
}

// A name as the feed sends it (PutName: percent-encoded when it is not UTF-8), cut to `max`
// bytes at a character boundary.
std::string Name(const json::object& o, const char* field, std::size_t max) {
  std::string name = StringField(o, field);
  if (name.size() > max) {
    std::size_t end = max;
    while (end > 0 && (static_cast<unsigned char>(name[end]) & 0xC0) == 0x80) --end;
    name = name.substr(0, end) + "\u2026";
  }
  if (StringField(o, (std::string(field) + "_encoding").c_str()) == "percent") {
    name += " (percent-encoded)";
  }
  return name;
}

}  // namespace

VisitorWrites::VisitorWrites(std::chrono::system_clock::time_point start, std::string lock,
                             bool fencing, std::int64_t highest)
    : start_(start), lock_(std::move(lock)), fencing_(fencing), highest_(highest) {}

std::optional<Event> VisitorWrites::ToEvent(const json::object& decision) {
  const std::string op = StringField(decision, "op");
  const auto token = IntField(decision, "token");
  const auto time_ms = IntField(decision, "time_ms");
  const std::string verdict = StringField(decision, "decision");
  if ((op != "put" && op != "delete") || !token || !time_ms ||
      (verdict != "accepted" && verdict != "refused")) {
    return std::nullopt;
  }
  const bool accepted = verdict == "accepted";
  const std::string key = Name(decision, "key", kMaxNameBytes);
  const std::string lock = Name(decision, "lock", kMaxNameBytes);
  Event e;
  const std::int64_t start_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(start_.time_since_epoch()).count();
  e.time_ms = last_ms_ = std::max(last_ms_, *time_ms - start_ms);
  e.actor = "store";
  e.kind = accepted ? Kind::kAccepted : Kind::kRefused;
  e.token = token;
  e.event = std::string(accepted ? "accepts" : "refuses") +
            (op == "put" ? " a write to " : " a delete of ") + key;
  if (lock != lock_ && lock != key) e.event += " under lock " + lock;
  const bool demo_lock = lock == lock_;
  if (!accepted) {
    const std::string reason = StringField(decision, "reason");
    e.status =
        reason == "stale_token"
            ? "it has seen token " + std::to_string(IntField(decision, "highest").value_or(0))
            : reason;
  } else if (demo_lock && !fencing_ && *token < highest_) {
    e.status = "below token " + std::to_string(highest_) +
               ", yet accepted: without fencing it overwrites newer data";
  }
  if (accepted && demo_lock) highest_ = std::max(highest_, *token);
  return e;
}

}  // namespace fencekit::demo
