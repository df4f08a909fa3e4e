#include <algorithm>
#include <map>

#include "fencekit/common/text.h"
#include "fencekit/timeline/timeline.h"
#include "detail.h"

namespace fencekit::timeline {

using detail::Appendf;
using detail::Escape;
using detail::LaneIndex;

namespace {

// An upper estimate of a label's width in the page's 11px sans-serif: no font metrics here, and
// one too wide only costs a row.
int LabelWidth(const std::string& text, double px_per_char = 6.8) {
  std::size_t chars = 0;
  for (unsigned char c : text) chars += (c & 0xC0) != 0x80;  // UTF-8 lead bytes
  return static_cast<int>(static_cast<double>(chars) * px_per_char) + 4;
}

std::string Thousands(std::int64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

const char* Fill(Kind k) {
  switch (k) {
    case Kind::kAccepted:
      return "#2a9d2a";
    case Kind::kRefused:
    case Kind::kLost:
      return "#d62728";
    case Kind::kGrant:
    case Kind::kExpire:
    case Kind::kRestart:
    case Kind::kRelease:
      return "#1f77b4";
    case Kind::kPause:
    case Kind::kResume:
    case Kind::kSend:
    case Kind::kArrive:
      return "#e08000";
    case Kind::kOverwrite:
      return "#e8590c";
    case Kind::kUnknown:
      return "#999";
    default:
      return "#555";
  }
}

std::string TableHtml(const Table& table) {
  if (table.rows.empty()) return "";
  std::string html =
      "<table class=\"named\"><caption>" + Escape(table.caption) + "</caption>\n<tr>";
  for (const auto& h : table.head) html += "<th>" + Escape(h) + "</th>";
  html += "</tr>\n";
  for (const auto& row : table.rows) {
    html += "<tr>";
    for (const auto& cell : row) html += "<td>" + Escape(cell) + "</td>";
    html += "</tr>\n";
  }
  return html + "</table>\n";
}


// The drawing's measures, in pixels at type `font` high (the page's is 11; slides' larger).
struct Geometry {
  double s;  // scale: font / 11
  int font, left, top, row, time_row, lane_gap;
  explicit Geometry(int font_px)
      : s(font_px / 11.0),
        font(font_px),
        left(static_cast<int>(170 * s)),
        top(static_cast<int>(40 * s)),
        row(static_cast<int>(14 * s)),
        time_row(static_cast<int>(11 * s)),
        lane_gap(static_cast<int>(36 * s)) {}
  int operator()(double px) const { return static_cast<int>(px * s); }
};

// What a drawing holds besides its SVG: the lane titles apart (when it scrolls), and what the
// page's legend must explain.
struct Drawing {
  std::string svg, titles;
  bool flagged = false, breaks = false, leases = false, pauses = false, holds = false;
  std::vector<Kind> kinds;  // of the events drawn, each once
  std::int64_t longest_break = 0, longest_pause = 0;
};

Drawing Draw(const Timeline& t, const Geometry& g, bool separate_titles) {
  Drawing d;
  const LaneIndex lanes(t);
  const std::size_t lane_count = lanes.lanes.size();
  // The events drawn: those on a lane.
  std::vector<const Event*> events;
  std::vector<std::size_t> lane_of;
  for (const auto& e : t.events) {
    std::size_t lane = lanes.Of(e.actor);
    if (lane == lane_count) continue;
    events.push_back(&e);
    lane_of.push_back(lane);
    if (std::find(d.kinds.begin(), d.kinds.end(), e.kind) == d.kinds.end()) {
      d.kinds.push_back(e.kind);
    }
  }
  const std::size_t n = events.size();
  std::vector<std::string> labels;
  for (std::size_t i = 0; i < n; ++i) {
    labels.push_back(Label(*events[i], lanes.lanes[lane_of[i]].client));
  }
  std::vector<std::int64_t> times;
  for (const Event* e : events) times.push_back(e->time_ms);
  // The axis at this scale: LayOutTime's spacing, scaled.
  TimeAxis axis = LayOutTime(times, 0);
  for (auto& x : axis.x) x = g.left + g(20) + g(x);
  for (auto& b : axis.breaks) b.x = g.left + g(20) + g(b.x);
  axis.end = g.left + g(20) + g(axis.end);
  const int break_width = g(TimeAxis::kBreakWidth);
  auto x_at_time = [&](std::int64_t ms) {
    // XAtTime on the scaled axis; past the last event, kPxPerMs on (scaled), at most 400 px.
    if (times.empty()) return axis.end;
    auto after = std::upper_bound(times.begin(), times.end(), ms);
    if (after == times.begin()) return axis.x.front();
    const std::size_t i = static_cast<std::size_t>(after - times.begin()) - 1;
    if (after == times.end()) {
      return axis.x[i] + g(std::min<double>(
                             static_cast<double>(ms - times[i]) * TimeAxis::kPxPerMs, 400));
    }
    const double f =
        static_cast<double>(ms - times[i]) / static_cast<double>(times[i + 1] - times[i]);
    return axis.x[i] + static_cast<int>(f * (axis.x[i + 1] - axis.x[i]));
  };
  const double px_per_char = 6.8 * g.s;
  std::vector<std::vector<std::size_t>> lane_members(lane_count);
  for (std::size_t i = 0; i < n; ++i) lane_members[lane_of[i]].push_back(i);
  // Each lane's labels in rows above its line (PlaceLabels), and its events' times in rows
  // below it (once per moment: events at the same time share their place); the lane is as tall
  // as its rows need.
  std::vector<int> row(n, 0), time_row(n, 0);
  std::vector<bool> shows_time(n, false);
  std::vector<int> rows_in_lane(lane_count, 1), time_rows_in_lane(lane_count, 1);
  int right = axis.end;  // the right edge of everything drawn
  for (const Event* e : events) {
    if (e->end_ms) right = std::max(right, x_at_time(*e->end_ms));
  }
  for (std::size_t lane = 0; lane < lane_count; ++lane) {
    const std::vector<std::size_t>& members = lane_members[lane];
    std::vector<std::size_t> timed;
    std::vector<int> xs, widths;
    std::vector<std::pair<int, int>> time_spans;
    for (std::size_t k = 0; k < members.size(); ++k) {
      const std::size_t i = members[k];
      xs.push_back(axis.x[i]);
      widths.push_back(LabelWidth(labels[i], px_per_char) + (events[i]->flagged ? g(12) : 0));
      right = std::max(right, axis.x[i] + kLabelOffset + widths.back());
      if (k == 0 || axis.x[members[k - 1]] != axis.x[i]) {
        shows_time[i] = true;
        timed.push_back(i);
        int half = LabelWidth(Thousands(events[i]->time_ms) + " ms", 5.6 * g.s) / 2;
        time_spans.emplace_back(axis.x[i] - half, axis.x[i] + half);
      }
    }
    auto rows = PlaceLabels(xs, widths, g(8));
    for (std::size_t k = 0; k < members.size(); ++k) {
      row[members[k]] = rows[k];
      rows_in_lane[lane] = std::max(rows_in_lane[lane], rows[k] + 1);
    }
    auto time_rows = StackLabels(time_spans, g(4));
    for (std::size_t k = 0; k < timed.size(); ++k) {
      time_row[timed[k]] = time_rows[k];
      time_rows_in_lane[lane] = std::max(time_rows_in_lane[lane], time_rows[k] + 1);
    }
  }
  const int width = right + g(40);
  // Per lane: its line's y. Above it the label rows and the lease bar; below it the times, then
  // the pause or the hold.
  std::vector<int> line_y(lane_count), pause_y(lane_count);
  int y = g.top;
  for (std::size_t lane = 0; lane < lane_count; ++lane) {
    line_y[lane] = y + g(22) + rows_in_lane[lane] * g.row;
    pause_y[lane] = line_y[lane] + g(14) + time_rows_in_lane[lane] * g.time_row;
    y = pause_y[lane] + g.lane_gap;
  }
  const int height = y + g(10);

  std::string& svg = d.svg;
  Appendf(svg,
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
          "font-family=\"sans-serif\" font-size=\"%d\">\n",
          width, height, g.font);
  Appendf(svg,
          "<defs><pattern id=\"hatch\" width=\"%d\" height=\"%d\" patternUnits=\"userSpaceOnUse\" "
          "patternTransform=\"rotate(45)\"><rect width=\"%d\" height=\"%d\" fill=\"#f0a030\"/>"
          "</pattern></defs>\n",
          g(8), g(8), g(4), g(8));
  // The axis: a line at the top, broken where a long wait is left out. A break is marked on
  // the axis and on each lane's line, and covers nothing.
  const int axis_y = g.top - g(14);
  int axis_from = g.left;
  for (const auto& b : axis.breaks) {
    d.breaks = true;
    d.longest_break = std::max(d.longest_break, b.ms);
    Appendf(svg,
            "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#bbb\"/>\n"
            "<rect class=\"axis-break\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
            "fill=\"#eee\" stroke=\"#bbb\" stroke-dasharray=\"3 2\"/>\n"
            "<text class=\"break-label\" x=\"%d\" y=\"%d\" font-size=\"%d\" fill=\"#666\" "
            "text-anchor=\"middle\">%s ms</text>\n",
            axis_from, axis_y, b.x, axis_y, b.x, axis_y - g(4), break_width, g(8),
            b.x + break_width / 2, axis_y - g(8), g(10), Thousands(b.ms).c_str());
    axis_from = b.x + break_width;
  }
  Appendf(svg, "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#bbb\"/>\n",
          axis_from, axis_y, width - g(20), axis_y);
  if (separate_titles) {
    Appendf(d.titles,
            "<svg class=\"lane-titles\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
            "height=\"%d\" font-family=\"sans-serif\" font-size=\"%d\">\n",
            g.left, height, g.font);
  }
  for (std::size_t lane = 0; lane < lane_count; ++lane) {
    // The lane's line, interrupted at each break by two slanted strokes.
    int from = g.left;
    for (const auto& b : axis.breaks) {
      const int ly = line_y[lane], gap_from = b.x + g(20), gap_to = b.x + break_width - g(20);
      Appendf(svg,
              "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#999\"/>"
              "<path class=\"lane-break\" d=\"M%d %dL%d %dM%d %dL%d %d\" stroke=\"#999\"/>\n",
              from, ly, gap_from, ly, gap_from - g(3), ly + g(5), gap_from + g(3), ly - g(5),
              gap_to - g(3), ly + g(5), gap_to + g(3), ly - g(5));
      from = gap_to;
    }
    Appendf(svg, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#999\"/>\n", from,
            line_y[lane], width - g(20), line_y[lane]);
    Appendf(separate_titles ? d.titles : svg,
            "<text class=\"lane-label\" x=\"%d\" y=\"%d\" font-weight=\"bold\" "
            "font-size=\"%d\">%s</text>\n",
            g(10), line_y[lane] + g(4), g(12), Escape(lanes.lanes[lane].title).c_str());
  }
  if (separate_titles) d.titles += "</svg>";
  auto x_at = [&](std::size_t i) { return i < n ? axis.x[i] : axis.end + g(40); };
  auto bar = [&](const std::string& actor, std::size_t from, std::size_t to,
                 const std::string& label) {
    d.leases = true;
    int ly = line_y[lanes.Of(actor)];
    Appendf(svg,
            "<rect class=\"lease\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
            "fill=\"#7fb3e6\"/><text class=\"lease-label\" x=\"%d\" y=\"%d\" "
            "font-size=\"%d\" fill=\"#124\">%s</text>\n",
            x_at(from), ly - g(16), std::max(4, x_at(to) - x_at(from)), g(10), x_at(from) + g(3),
            ly - g(8), g(9), Escape(label).c_str());
  };
  // A pause (kPause to kResume) or a write held in the network (kSend to the kArrive naming
  // its sender): a hatched bar under the lane, as long as it lasted, saying how long.
  auto held = [&](std::size_t from, std::size_t to, std::size_t lane, bool pause) {
    const std::int64_t ms = events[to]->time_ms - events[from]->time_ms;
    if (pause) {
      d.pauses = true;
      d.longest_pause = std::max(d.longest_pause, ms);
    } else {
      d.holds = true;
    }
    Appendf(svg,
            "<rect class=\"%s\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
            "fill=\"url(#hatch)\"/><text class=\"pause-label\" x=\"%d\" y=\"%d\" "
            "font-weight=\"bold\" fill=\"#b06000\">%s %s ms%s</text>\n",
            pause ? "pause" : "hold", x_at(from), pause_y[lane], x_at(to) - x_at(from), g(14),
            x_at(from) + g(4), pause_y[lane] + g(28), pause ? "paused" : "held in the network",
            Thousands(ms).c_str(), pause ? " (stop-the-world)" : "");
  };
  // Leases start on client lanes only, so a holder always names a lane.
  std::map<std::string, std::pair<std::size_t, std::int64_t>> lease_start;  // actor: (i, token)
  std::map<std::string, std::size_t> pause_start, send_start;
  for (std::size_t i = 0; i < n; ++i) {
    const Event& e = *events[i];
    const bool client = lanes.lanes[lane_of[i]].client;
    if (e.kind == Kind::kGrant && client) {
      lease_start[e.actor] = {i, e.token.value_or(0)};
    } else if ((e.kind == Kind::kExpire && lease_start.count(e.holder)) ||
               ((e.kind == Kind::kLost || e.kind == Kind::kRelease) &&
                lease_start.count(e.actor))) {
      std::string holder = e.kind == Kind::kExpire ? e.holder : e.actor;
      auto [from, token] = lease_start[holder];
      bar(holder, from, i, "lease, token " + std::to_string(token));
      lease_start.erase(holder);
    } else if (e.kind == Kind::kPause) {
      pause_start[e.actor] = i;
    } else if (e.kind == Kind::kResume && pause_start.count(e.actor)) {
      held(pause_start[e.actor], i, lane_of[i], true);
      pause_start.erase(e.actor);
    } else if (e.kind == Kind::kSend && client) {
      send_start[e.actor] = i;
    } else if (e.kind == Kind::kArrive && send_start.count(e.holder) && lanes.Has(e.holder)) {
      held(send_start[e.holder], i, lanes.Of(e.holder), false);
      send_start.erase(e.holder);
    }
  }
  for (const auto& [holder, start] : lease_start) {
    bar(holder, start.first, n, "lease, token " + std::to_string(start.second));
  }
  for (std::size_t i = 0; i < n; ++i) {
    const Event& e = *events[i];
    int ly = line_y[lane_of[i]];
    int label_y = ly - g(22) - row[i] * g.row;
    const bool harm = e.kind == Kind::kOverwrite;
    // A flagged event: a red ring around its dot, its label bold; the first is scrolled to. A
    // write that overwrote a newer one (harm): its label bold in its colour.
    Appendf(svg,
            "<g class=\"%s\"%s><line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" "
            "stroke=\"#ccc\"/>",
            e.flagged ? "event flagged" : harm ? "event harm" : "event",
            e.flagged && !d.flagged ? " id=\"first-flagged\"" : "", x_at(i), label_y + g(3),
            x_at(i), ly - g(6));
    d.flagged = d.flagged || e.flagged;
    if (e.end_ms) {  // an operation: a bar from its start to its end
      const int to = std::max(x_at(i) + 4, x_at_time(*e.end_ms));
      Appendf(svg,
              "<rect class=\"op\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"2\" "
              "fill=\"%s\"%s/>",
              x_at(i), ly - g(4), to - x_at(i), g(8), Fill(e.kind),
              e.flagged ? " stroke=\"#d62728\" stroke-width=\"2\"" : "");
    }
    Appendf(svg, "<circle cx=\"%d\" cy=\"%d\" r=\"%d\" fill=\"%s\"/>", x_at(i), ly,
            e.end_ms ? g(3) : g(6), Fill(e.kind));
    if (e.flagged) {
      Appendf(svg,
              "<circle class=\"flag-ring\" cx=\"%d\" cy=\"%d\" r=\"%d\" fill=\"none\" "
              "stroke=\"#d62728\" stroke-width=\"3\"/>",
              x_at(i), ly, g(11));
    }
    Appendf(svg, "<text class=\"label\" x=\"%d\" y=\"%d\" fill=\"%s\"%s>%s</text>",
            x_at(i) + kLabelOffset, label_y, Fill(e.kind),
            e.flagged || harm ? " font-weight=\"bold\"" : "", Escape(labels[i]).c_str());
    if (shows_time[i]) {
      Appendf(svg,
              "<text class=\"time\" x=\"%d\" y=\"%d\" font-size=\"%d\" fill=\"#888\" "
              "text-anchor=\"middle\">%s ms</text>",
              x_at(i), ly + g(20) + time_row[i] * g.time_row, g(9), Thousands(e.time_ms).c_str());
    }
    svg += "</g>\n";
  }
  svg += "</svg>\n";
  return d;
}

// A swatch and its meaning, for what the drawing shows.
std::string LegendHtml(const Drawing& d) {
  std::string items;
  auto item = [&](const std::string& style, const std::string& text) {
    items += "<li><span class=\"swatch\" style=\"" + style + "\"></span>" + Escape(text) + "</li>";
  };
  auto dot = [](Kind k) { return std::string("background:") + Fill(k) + ";border-radius:50%"; };
  auto has = [&](Kind k) { return std::find(d.kinds.begin(), d.kinds.end(), k) != d.kinds.end(); };
  if (d.leases) item("background:#7fb3e6", "a lease, from its grant to its end");
  if (d.pauses) item("background:#f0a030", "a process paused (stop-the-world)");
  if (d.holds) item("background:#f0a030", "a write held in the network");
  if (has(Kind::kGrant) || has(Kind::kExpire)) {
    item(dot(Kind::kGrant), "the lock service: a grant, an expiry, a restart");
  }
  if (has(Kind::kAccepted)) item(dot(Kind::kAccepted), "a write the store accepted");
  if (has(Kind::kRefused)) item(dot(Kind::kRefused), "a write the store refused");
  if (has(Kind::kOverwrite)) {
    item(dot(Kind::kOverwrite),
         "harm: a write the store accepted although it overwrote a newer one (a lost update)");
  }
  if (has(Kind::kUnknown)) item(dot(Kind::kUnknown), "a write whose outcome is unknown");
  if (d.breaks) {
    std::string text =
        "a break in the axis: a stretch with no events, drawn short and labelled with its "
        "length; a bar across it lasts longer than the break by the moments on either side";
    if (d.pauses && d.longest_pause != d.longest_break) {
      text += " (here the pause, " + Thousands(d.longest_pause) + " ms, also covers the " +
              Thousands(d.longest_pause - d.longest_break) +
              " ms around the longest break, " + Thousands(d.longest_break) + " ms)";
    }
    item("background:#eee;border:1px dashed #bbb", text);
  }
  if (items.empty()) return "";
  return "<ul class=\"legend\">" + items + "</ul>\n";
}

}  // namespace

std::string RenderHtml(const Timeline& t) {
  const bool scrolls =
      std::any_of(t.events.begin(), t.events.end(), [](const Event& e) { return e.flagged; });
  const Drawing d = Draw(t, Geometry(11), scrolls);
  const std::string title = t.title.empty() ? "fencekit demo: " + t.scenario : t.title;
  const std::string heading =
      t.title.empty() ? title + (t.fencing ? " (fencing on)" : " (fencing OFF)") : t.title;
  std::string note = "Time runs left to right, in proportion, but for breaks.";
  if (!t.legend.empty()) note += "<br>\n" + Escape(t.legend);
  if (d.flagged) {
    note += "<br>\n" + Escape(t.flagged_legend.empty()
                                  ? "Circled in red: the operations the check named."
                                  : t.flagged_legend);
  }
  std::string html =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" + Escape(title) +
      "</title>\n<style>body{font-family:sans-serif;margin:24px;color:#222}"
      ".verdict{font-size:18px;font-weight:bold;white-space:pre-line;overflow-wrap:anywhere;"
      "color:" +
      std::string(t.lesson_shown && t.fencing ? "#2a7d2a" : "#c0392b") +
      "}.note{color:#666;font-size:13px}#drawing{overflow-x:auto;flex:1}"
      "ul.legend{list-style:none;padding:0;margin:6px 0 12px;font-size:13px;color:#444;"
      "display:flex;flex-wrap:wrap;gap:4px 18px}"
      "ul.legend .swatch{display:inline-block;width:12px;height:12px;margin-right:6px;"
      "vertical-align:-1px}"
      "table.named{border-collapse:collapse;font-size:13px;margin:8px 0}"
      "table.named caption{text-align:left;font-weight:bold;padding:4px 0}"
      "table.named td,table.named th{border:1px solid #ccc;padding:2px 6px;text-align:left;"
      "overflow-wrap:anywhere;max-width:320px}</style></head>\n<body>\n<h1>" +
      Escape(heading) + "</h1>\n<p class=\"verdict\">" + Escape(t.verdict) +
      "</p>\n<p class=\"note\">" + note + "</p>\n" + LegendHtml(d) + TableHtml(t.table);
  if (d.flagged) {
    // The drawing scrolls inside the page, opened at the first flagged event.
    html += "<div style=\"display:flex\">" + d.titles + "<div id=\"drawing\">\n" + d.svg +
            "</div></div>\n<script>(function(){var f=document.getElementById('first-flagged'),"
            "d=document.getElementById('drawing');if(!f||!d)return;"
            "d.scrollLeft+=f.getBoundingClientRect().left-d.getBoundingClientRect().left-"
            "Math.min(240,d.clientWidth/4);})();</script>\n";
  } else {
    html += d.svg;
  }
  // The demo always says its final value; a timeline of other lanes only when it has one.
  if (t.lanes.empty() || !t.final_value.empty()) {
    html += "<p>Final value: <code>" + Escape(JsonSafeText(t.final_value)) + "</code></p>\n";
  }
  html += "</body></html>\n";
  return html;
}

std::string RenderSvg(const Timeline& t, int font_px) {
  Drawing d = Draw(t, Geometry(std::clamp(font_px, 8, 64)), false);
  // A white background, so that the file reads the same on a dark slide.
  const auto open_end = d.svg.find(">\n") + 2;
  d.svg.insert(open_end, "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n");
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + d.svg;
}

}  // namespace fencekit::timeline
