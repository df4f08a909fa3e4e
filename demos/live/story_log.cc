#include "live/story_log.h"

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>

namespace json = boost::json;

namespace fencekit::demo {
namespace {

// One Server-Sent Events block. serialize() escapes every control character, so the JSON is
// one line and no text in it can end the block or forge a field.
std::string Block(const char* event, const json::object& data, std::uint64_t id = 0) {
  std::string text = id != 0 ? "id: " + std::to_string(id) + "\n" : "";
  text.append("event: ").append(event).append("\ndata: ").append(json::serialize(data));
  text += "\n\n";
  return text;
}

// `s` cut to at most `max` bytes at a character boundary, with an ellipsis when cut.
std::string Cut(const std::string& s, std::size_t max) {
  if (s.size() <= max) return s;
  std::size_t end = max - 3;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
  return s.substr(0, end) + "\u2026";
}

}  // namespace

const char* FeedKind(Kind k) {
  return k == Kind::kUnknown || k == Kind::kRelease ? "note" : timeline::KindName(k);
}

StoryLog::StoryLog(std::string scenario, bool fencing, std::chrono::milliseconds ttl,
                   std::vector<timeline::Lane> lanes)
    : scenario_(std::move(scenario)),
      fencing_(fencing),
      ttl_(ttl),
      lanes_(lanes.empty() ? ScenarioLanes(scenario_, fencing) : std::move(lanes)) {}

std::string StoryLog::Hello(std::chrono::steady_clock::time_point now) const {
  json::array lanes;
  for (const auto& lane : lanes_) {
    lanes.push_back(json::object{{"id", lane.id}, {"title", lane.title}, {"client", lane.client}});
  }
  const char* state = !begun_ ? "waiting" : end_.empty() ? "running" : "ended";
  std::int64_t now_ms =
      begun_ ? std::chrono::duration_cast<std::chrono::milliseconds>(now - start_).count() : 0;
  // "retry": how long a page's EventSource waits before it reconnects (and is replayed to).
  return "retry: 2000\n\n" + Block("hello", json::object{{"scenario", scenario_},
                                                         {"fencing", fencing_},
                                                         {"ttl_ms", ttl_.count()},
                                                         {"lanes", std::move(lanes)},
                                                         {"state", state},
                                                         {"now_ms", now_ms}});
}

std::string StoryLog::Begin(std::chrono::steady_clock::time_point now) {
  begun_ = true;
  start_ = now;
  return Hello(now);
}

std::string StoryLog::Add(const Event& e, bool after) {
  if (!after && scenario_events_.size() >= kMaxScenarioEvents) return "";
  json::object o{{"id", next_id_},
                 {"t", e.time_ms},
                 {"lane", e.actor},
                 {"kind", FeedKind(e.kind)},
                 {"label", Cut(Label(e), kMaxLabelBytes)}};
  if (e.token) {
    o["token"] = *e.token;
  } else {
    o["token"] = nullptr;
  }
  if (!e.holder.empty()) o["holder"] = e.holder;
  if (after) o["after"] = true;
  std::string text = Block("step", o, next_id_++);
  if (!after) {
    scenario_events_.push_back(text);
    return text;
  }
  visitor_events_.push_back(text);
  if (visitor_events_.size() > kMaxVisitorEvents) {
    visitor_events_.pop_front();
    ++forgotten_;
  }
  return text;
}

std::string StoryLog::End(json::object outcome) {
  end_ = Block("end", outcome);
  return end_;
}

std::string StoryLog::Replay(std::chrono::steady_clock::time_point now) const {
  std::string text = Hello(now);
  for (const auto& e : scenario_events_) text += e;
  text += end_;
  if (forgotten_ != 0) {
    text += Block("forgotten", json::object{{"writes", forgotten_}});
  }
  for (const auto& e : visitor_events_) text += e;
  return text;
}

}  // namespace fencekit::demo
