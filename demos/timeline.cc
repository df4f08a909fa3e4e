#include "timeline.h"

#include <algorithm>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <cstdio>
#include <map>

#include "fencekit/common/text.h"

namespace fencekit::demo {
namespace {

const std::vector<std::string> kLanes = {"A", "B", "lock service", "store"};

std::string LaneTitle(const std::string& actor) {
  if (actor == "A" || actor == "B") return "Client " + actor;
  if (actor == "lock service") return "Lock service";
  return "Storage (fenced)";
}

const char* Colour(Kind k) {
  switch (k) {
    case Kind::kAccepted:
      return "\033[32m";
    case Kind::kRefused:
    case Kind::kLost:
      return "\033[31m";
    case Kind::kPause:
    case Kind::kResume:
    case Kind::kSend:
      return "\033[33m";
    case Kind::kGrant:
    case Kind::kExpire:
    case Kind::kRestart:
      return "\033[36m";
    default:
      return "";
  }
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

std::string Fit(const std::string& s, std::size_t width) {
  if (s.size() <= width) return s + std::string(width - s.size(), ' ');
  return s.substr(0, width - 1) + "~";
}

}  // namespace

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
  std::string out;
  auto line = [&](const std::string& time, std::size_t lane, const std::string& text, Kind kind) {
    out += Fit(time, 8);
    for (std::size_t i = 0; i < kLanes.size(); ++i) {
      std::string cell = Fit(i == lane ? text : "", kWidth) + " ";
      if (i == lane && colour && *Colour(kind) != '\0') cell = Colour(kind) + cell + "\033[0m";
      out += cell;
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    out += '\n';
  };
  out += Fit("time", 8);
  for (const auto& l : kLanes) out += Fit(LaneTitle(l), kWidth) + " ";
  out += "\n" + Fit("----", 8);
  for (std::size_t i = 0; i < kLanes.size(); ++i) out += std::string(kWidth, '-') + " ";
  out += "\n";
  while (out.find(" \n") != std::string::npos) out.replace(out.find(" \n"), 2, "\n");
  for (const auto& e : t.events) {
    auto lane =
        static_cast<std::size_t>(std::find(kLanes.begin(), kLanes.end(), e.actor) - kLanes.begin());
    std::string text = e.event;
    if (e.token) text += ", token " + std::to_string(*e.token);
    if (!e.status.empty()) text += ": " + e.status;
    auto lines = Wrap(text, kWidth);
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
    events.push_back(std::move(o));
  }
  boost::json::object root;
  root["scenario"] = t.scenario;
  root["fencing"] = t.fencing;
  root["events"] = std::move(events);
  root["final_value"] = JsonSafeText(t.final_value);
  root["verdict"] = t.verdict;
  root["lesson_shown"] = t.lesson_shown;
  return boost::json::serialize(root) + "\n";
}

std::string RenderHtml(const Timeline& t) {
  // Schematic, like Kleppmann's figure: one column per event, the real time under each marker,
  // so that events a millisecond apart stay readable after a pause of a second.
  const int n = static_cast<int>(t.events.size());
  constexpr int kLeft = 160, kStep = 64, kLaneHeight = 110, kTop = 150;
  const int width = kLeft + std::max(1, n) * kStep + 260;
  auto x = [&](int index) { return kLeft + 20 + index * kStep; };
  auto lane_y = [&](const std::string& actor) {
    auto i = std::find(kLanes.begin(), kLanes.end(), actor) - kLanes.begin();
    return kTop + static_cast<int>(i) * kLaneHeight;
  };
  std::string svg;
  char buf[768];
  int height = kTop + static_cast<int>(kLanes.size()) * kLaneHeight + 30;
  std::snprintf(buf, sizeof buf,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                "font-family=\"sans-serif\" font-size=\"12\">\n",
                width, height);
  svg += buf;
  svg +=
      "<defs><pattern id=\"hatch\" width=\"8\" height=\"8\" patternUnits=\"userSpaceOnUse\" "
      "patternTransform=\"rotate(45)\"><rect width=\"4\" height=\"8\" fill=\"#f0a030\"/>"
      "</pattern></defs>\n";
  for (const auto& lane : kLanes) {
    int y = lane_y(lane);
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#999\"/>\n"
                  "<text class=\"lane-label\" x=\"10\" y=\"%d\" font-weight=\"bold\">%s</text>\n",
                  kLeft, y + 30, width - 20, y + 30, y + 34, Escape(LaneTitle(lane)).c_str());
    svg += buf;
  }
  auto bar = [&](const std::string& actor, int from, int to, const std::string& label) {
    int y = lane_y(actor);
    std::snprintf(buf, sizeof buf,
                  "<rect class=\"lease\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"12\" "
                  "fill=\"#7fb3e6\"/><text x=\"%d\" y=\"%d\" font-size=\"11\">%s</text>\n",
                  x(from), y + 8, std::max(4, x(to) - x(from)), x(from) + 3, y + 4,
                  Escape(label).c_str());
    svg += buf;
  };
  std::map<std::string, std::pair<int, std::int64_t>> lease_start;  // actor -> (index, token)
  std::map<std::string, int> pause_start;
  for (int i = 0; i < n; ++i) {
    const Event& e = t.events[static_cast<std::size_t>(i)];
    if (e.kind == Kind::kGrant && e.actor != "lock service") {
      lease_start[e.actor] = {i, e.token.value_or(0)};
    } else if ((e.kind == Kind::kExpire && lease_start.count(e.holder)) ||
               (e.kind == Kind::kLost && lease_start.count(e.actor))) {
      std::string holder = e.kind == Kind::kLost ? e.actor : e.holder;
      auto [from, token] = lease_start[holder];
      bar(holder, from, i, "lease, token " + std::to_string(token));
      lease_start.erase(holder);
    } else if (e.kind == Kind::kPause) {
      pause_start[e.actor] = i;
    } else if (e.kind == Kind::kResume && pause_start.count(e.actor)) {
      int from = pause_start[e.actor], y = lane_y(e.actor);
      std::int64_t ms = e.time_ms - t.events[static_cast<std::size_t>(from)].time_ms;
      std::snprintf(buf, sizeof buf,
                    "<rect class=\"pause\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"16\" "
                    "fill=\"url(#hatch)\"/><text x=\"%d\" y=\"%d\" font-weight=\"bold\" "
                    "fill=\"#b06000\">paused %lld ms (stop-the-world)</text>\n",
                    x(from), y + 36, x(i) - x(from), x(from) + 4, y + 66,
                    static_cast<long long>(ms));
      svg += buf;
    }
  }
  for (const auto& [holder, start] : lease_start) {
    bar(holder, start.first, n, "lease, token " + std::to_string(start.second));
  }
  for (int i = 0; i < n; ++i) {
    const Event& e = t.events[static_cast<std::size_t>(i)];
    int y = lane_y(e.actor) + 30;
    const char* fill = "#555";
    if (e.kind == Kind::kAccepted) fill = "#2a9d2a";
    if (e.kind == Kind::kRefused || e.kind == Kind::kLost) fill = "#d62728";
    if (e.kind == Kind::kGrant || e.kind == Kind::kExpire || e.kind == Kind::kRestart)
      fill = "#1f77b4";
    if (e.kind == Kind::kPause || e.kind == Kind::kResume || e.kind == Kind::kSend)
      fill = "#e08000";
    std::string label = e.event + (e.token ? ", token " + std::to_string(*e.token) : "");
    if (!e.status.empty()) label += ": " + e.status;
    std::snprintf(buf, sizeof buf,
                  "<g class=\"event\"><line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" "
                  "stroke=\"#eee\"/><circle cx=\"%d\" cy=\"%d\" r=\"6\" fill=\"%s\"/>"
                  "<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"%s\" "
                  "transform=\"rotate(-28 %d %d)\">%s</text>"
                  "<text x=\"%d\" y=\"%d\" font-size=\"9\" fill=\"#888\" "
                  "text-anchor=\"middle\">%lld ms</text></g>\n",
                  x(i), kTop + 20, x(i), height - 40, x(i), y, fill, x(i) + 8, y - 8, fill,
                  x(i) + 8, y - 8, Escape(label).c_str(), x(i), y + 22,
                  static_cast<long long>(e.time_ms));
    svg += buf;
  }
  svg += "</svg>\n";

  std::string html =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>fencekit demo: " +
      Escape(t.scenario) +
      "</title>\n<style>body{font-family:sans-serif;margin:24px;color:#222}"
      ".verdict{font-size:18px;font-weight:bold;color:" +
      std::string(t.lesson_shown && t.fencing ? "#2a7d2a" : "#c0392b") +
      "}</style></head>\n<body>\n<h1>fencekit demo: " + Escape(t.scenario) +
      (t.fencing ? " (fencing on)" : " (fencing OFF)") + "</h1>\n<p class=\"verdict\">" +
      Escape(t.verdict) + "</p>\n" + svg + "<p>Final value: <code>" +
      Escape(JsonSafeText(t.final_value)) + "</code></p>\n</body></html>\n";
  return html;
}

}  // namespace fencekit::demo
