#include "fencekit/timeline/timeline.h"

#include <algorithm>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <unordered_map>

#include "fencekit/common/text.h"
#include "detail.h"

namespace fencekit::timeline {
namespace {

using detail::Appendf;
using detail::Escape;
using detail::LaneIndex;

const std::vector<std::string> kLanes = {"A", "B", "lock service", "store"};

bool IsClient(const std::string& actor) { return actor == "A" || actor == "B"; }

const char* Colour(Kind k) {
  switch (k) {
    case Kind::kAccepted:
      return "\033[32m";
    case Kind::kRefused:
    case Kind::kLost:
      return "\033[31m";
    case Kind::kOverwrite:  // harm: bold, on red
      return "\033[1;37;41m";
    case Kind::kPause:
    case Kind::kResume:
    case Kind::kSend:
    case Kind::kArrive:
      return "\033[33m";
    case Kind::kGrant:
    case Kind::kExpire:
    case Kind::kRestart:
    case Kind::kRelease:
      return "\033[36m";
    case Kind::kUnknown:
      return "\033[90m";
    default:
      return "";
  }
}

std::string Fit(const std::string& s, std::size_t width) {
  if (s.size() <= width) return s + std::string(width - s.size(), ' ');
  return s.substr(0, width - 1) + "~";
}

}  // namespace

namespace detail {

LaneIndex::LaneIndex(const Timeline& t) : lanes(LanesOf(t)) {
  for (std::size_t i = 0; i < lanes.size(); ++i) by_id.emplace(lanes[i].id, i);
}

std::size_t LaneIndex::Of(const std::string& actor) const {
  auto it = by_id.find(actor);
  return it == by_id.end() ? lanes.size() : it->second;
}

// Appends printf's output, however long (labels are the user's text).
void Appendf(std::string& out, const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list again;
  va_copy(again, args);
  int size = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  if (size > 0) {
    std::size_t at = out.size();
    out.resize(at + static_cast<std::size_t>(size) + 1);
    std::vsnprintf(out.data() + at, static_cast<std::size_t>(size) + 1, format, again);
    out.resize(at + static_cast<std::size_t>(size));
  }
  va_end(again);
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace detail

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kNote:
      return "note";
    case Kind::kGrant:
      return "grant";
    case Kind::kExpire:
      return "expire";
    case Kind::kPause:
      return "pause";
    case Kind::kResume:
      return "resume";
    case Kind::kSend:
      return "send";
    case Kind::kAccepted:
      return "accepted";
    case Kind::kRefused:
      return "refused";
    case Kind::kRead:
      return "read";
    case Kind::kLost:
      return "lost";
    case Kind::kRestart:
      return "restart";
    case Kind::kUnknown:
      return "unknown";
    case Kind::kRelease:
      return "release";
    case Kind::kOverwrite:
      return "overwrite";
    case Kind::kArrive:
      return "arrive";
  }
  return "note";
}

const std::vector<std::string>& Lanes() { return kLanes; }

std::vector<Lane> LanesOf(const Timeline& t) {
  if (!t.lanes.empty()) return t.lanes;
  std::vector<Lane> lanes;
  for (const auto& id : kLanes) lanes.push_back({id, LaneTitle(id, t.fencing), IsClient(id)});
  return lanes;
}

std::string LaneTitle(const std::string& actor, bool fencing) {
  if (IsClient(actor)) return "Client " + actor;
  if (actor == "lock service") return "Lock service";
  return fencing ? "Storage (fenced)" : "Storage (no fencing)";
}

std::string Label(const Event& e) { return Label(e, IsClient(e.actor)); }

std::string Label(const Event& e, bool client) {
  // A client's write: the store's lane says, at the same moment, with which token and what
  // became of it.
  if (client &&
      (e.kind == Kind::kAccepted || e.kind == Kind::kRefused || e.kind == Kind::kOverwrite)) {
    return e.event;
  }
  std::string label = e.event;
  if (e.token && !client && e.kind != Kind::kRead) label += ", token " + std::to_string(*e.token);
  if (!e.status.empty()) label += ": " + e.status;
  return label;
}

// Splits `text` into lines of at most `width` characters, at spaces where possible.
std::vector<std::string> Wrap(const std::string& text, std::size_t width) {
  std::vector<std::string> lines;
  std::string rest = text;
  while (rest.size() > width) {
    auto cut = rest.rfind(' ', width);
    if (cut == std::string::npos || cut == 0) cut = width;
    lines.push_back(rest.substr(0, cut));
    rest = rest.substr(rest[cut] == ' ' ? cut + 1 : cut);
  }
  lines.push_back(rest);
  return lines;
}

std::string RenderTerminal(const Timeline& t, bool colour) {
  constexpr std::size_t kWidth = 26;
  const LaneIndex lanes(t);
  std::string out;
  auto line = [&](const std::string& time, std::size_t lane, const std::string& text, Kind kind) {
    out += Fit(time, 8);
    for (std::size_t i = 0; i < lanes.lanes.size(); ++i) {
      std::string cell = Fit(i == lane ? text : "", kWidth) + " ";
      if (i == lane && colour && *Colour(kind) != '\0') cell = Colour(kind) + cell + "\033[0m";
      out += cell;
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    out += '\n';
  };
  out += Fit("time", 8);
  for (const auto& l : lanes.lanes) out += Fit(l.title, kWidth) + " ";
  out += "\n" + Fit("----", 8);
  for (std::size_t i = 0; i < lanes.lanes.size(); ++i) out += std::string(kWidth, '-') + " ";
  out += "\n";
  while (out.find(" \n") != std::string::npos) out.replace(out.find(" \n"), 2, "\n");
  for (const auto& e : t.events) {
    const std::size_t lane = lanes.Of(e.actor);
    if (lane == lanes.lanes.size()) continue;
    auto lines = Wrap(Label(e, lanes.lanes[lane].client), kWidth);
    for (std::size_t i = 0; i < lines.size(); ++i) {
      line(i == 0 ? std::to_string(e.time_ms) + "ms" : "", lane, lines[i], e.kind);
    }
  }
  out += "\nfinal value: \"" + JsonSafeText(t.final_value) + "\"\n";
  std::string verdict = "verdict: " + t.verdict;
  if (colour) {
    verdict = std::string(t.lesson_shown && t.fencing ? "\033[1;32m" : "\033[1;31m") + verdict +
              "\033[0m";
  }
  out += verdict + "\n";
  return out;
}

std::string RenderJson(const Timeline& t) {
  boost::json::array events;
  for (const auto& e : t.events) {
    boost::json::object o;
    o["time_ms"] = e.time_ms;
    o["actor"] = e.actor;
    o["event"] = e.event;
    if (e.token) {
      o["token"] = *e.token;
    } else {
      o["token"] = nullptr;
    }
    o["status"] = e.status;
    o["kind"] = KindName(e.kind);
    if (e.flagged) o["flagged"] = true;
    events.push_back(std::move(o));
  }
  boost::json::object root;
  root["scenario"] = t.scenario;
  root["fencing"] = t.fencing;
  root["events"] = std::move(events);
  root["final_value"] = JsonSafeText(t.final_value);
  root["verdict"] = t.verdict;
  root["lesson_shown"] = t.lesson_shown;
  if (!t.title.empty()) root["title"] = t.title;
  if (!t.lanes.empty()) {
    boost::json::array lanes;
    for (const auto& l : t.lanes) {
      lanes.push_back(boost::json::object{{"id", l.id}, {"title", l.title}, {"client", l.client}});
    }
    root["lanes"] = std::move(lanes);
  }
  return boost::json::serialize(root) + "\n";
}

}  // namespace fencekit::timeline
