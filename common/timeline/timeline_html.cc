#include <algorithm>
#include <map>

#include "fencekit/common/text.h"
#include "timeline/timeline.h"
#include "timeline/timeline_detail.h"

namespace fencekit::timeline {

using detail::Appendf;
using detail::Escape;
using detail::LaneIndex;

TimeAxis LayOutTime(const std::vector<std::int64_t>& times_ms, int left) {
  TimeAxis axis;
  int x = left;
  for (std::size_t i = 0; i < times_ms.size(); ++i) {
    if (i > 0 && times_ms[i] != times_ms[i - 1]) {
      std::int64_t gap = times_ms[i] - times_ms[i - 1];
      if (gap > TimeAxis::kBreakMs) {
        axis.breaks.push_back({x + TimeAxis::kMinStep / 2, gap});
        x += TimeAxis::kMinStep + TimeAxis::kBreakWidth;
      } else {
        x += std::max(TimeAxis::kMinStep,
                      static_cast<int>(static_cast<double>(gap) * TimeAxis::kPxPerMs));
      }
    }
    axis.x.push_back(x);
  }
  axis.end = x;
  return axis;
}

std::vector<int> StackLabels(const std::vector<std::pair<int, int>>& spans, int gap) {
  std::vector<int> rows;
  std::vector<int> row_end;  // where each row's last label ends
  for (const auto& [from, to] : spans) {
    std::size_t row = 0;
    while (row < row_end.size() && row_end[row] + gap > from) ++row;
    if (row == row_end.size()) row_end.push_back(to);
    row_end[row] = to;
    rows.push_back(static_cast<int>(row));
  }
  return rows;
}

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
      return "#e08000";
    case Kind::kUnknown:
      return "#999";
    default:
      return "#555";
  }
}

// The x of time `ms` on `axis` (laid out for `times`, in order): an event's own x, else
// interpolated between the events around it (past the last, kPxPerMs on from it).
int XAtTime(const TimeAxis& axis, const std::vector<std::int64_t>& times, std::int64_t ms) {
  if (times.empty()) return axis.end;
  auto after = std::upper_bound(times.begin(), times.end(), ms);
  if (after == times.begin()) return axis.x.front();
  const std::size_t i = static_cast<std::size_t>(after - times.begin()) - 1;
  if (after == times.end()) {
    return axis.x[i] + static_cast<int>(std::min<double>(
                           static_cast<double>(ms - times[i]) * TimeAxis::kPxPerMs, 400));
  }
  const std::size_t j = i + 1;
  const double f = static_cast<double>(ms - times[i]) / static_cast<double>(times[j] - times[i]);
  return axis.x[i] + static_cast<int>(f * (axis.x[j] - axis.x[i]));
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

}  // namespace

std::string RenderHtml(const Timeline& t) {
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
  }
  const std::size_t n = events.size();
  std::vector<std::string> labels;
  for (std::size_t i = 0; i < n; ++i) {
    labels.push_back(Label(*events[i], lanes.lanes[lane_of[i]].client));
  }
  constexpr int kLeft = 170, kTop = 40, kRowHeight = 14;
  std::vector<std::int64_t> times;
  for (const Event* e : events) times.push_back(e->time_ms);
  const TimeAxis axis = LayOutTime(times, kLeft + 20);
  int last_end = axis.end;
  for (const Event* e : events) {
    if (e->end_ms) last_end = std::max(last_end, XAtTime(axis, times, *e->end_ms));
  }
  const int width = last_end + 360;
  std::vector<std::vector<std::size_t>> lane_members(lane_count);
  for (std::size_t i = 0; i < n; ++i) lane_members[lane_of[i]].push_back(i);
  // Each lane's labels in rows above its line, and its events' times in rows below it (once
  // per moment: events at the same time share their place); the lane is as tall as its rows
  // need.
  std::vector<int> row(n, 0), time_row(n, 0);
  std::vector<bool> shows_time(n, false);
  std::vector<int> rows_in_lane(lane_count, 1), time_rows_in_lane(lane_count, 1);
  for (std::size_t lane = 0; lane < lane_count; ++lane) {
    const std::vector<std::size_t>& members = lane_members[lane];
    std::vector<std::size_t> timed;
    std::vector<std::pair<int, int>> spans, time_spans;
    for (std::size_t k = 0; k < members.size(); ++k) {
      const std::size_t i = members[k];
      int from = axis.x[i] - 4;
      spans.emplace_back(from, from + LabelWidth(labels[i]));
      if (k == 0 || axis.x[members[k - 1]] != axis.x[i]) {
        shows_time[i] = true;
        timed.push_back(i);
        int half = LabelWidth(Thousands(events[i]->time_ms) + " ms", 5.6) / 2;
        time_spans.emplace_back(axis.x[i] - half, axis.x[i] + half);
      }
    }
    auto rows = StackLabels(spans, 8);
    for (std::size_t k = 0; k < members.size(); ++k) {
      row[members[k]] = rows[k];
      rows_in_lane[lane] = std::max(rows_in_lane[lane], rows[k] + 1);
    }
    auto time_rows = StackLabels(time_spans, 4);
    for (std::size_t k = 0; k < timed.size(); ++k) {
      time_row[timed[k]] = time_rows[k];
      time_rows_in_lane[lane] = std::max(time_rows_in_lane[lane], time_rows[k] + 1);
    }
  }
  // Per lane: its line's y. Above it the label rows and the lease bar; below it the times, then
  // the pause.
  constexpr int kTimeRowHeight = 11;
  std::vector<int> line_y(lane_count), pause_y(lane_count);
  int y = kTop;
  for (std::size_t lane = 0; lane < lane_count; ++lane) {
    line_y[lane] = y + 22 + rows_in_lane[lane] * kRowHeight;
    pause_y[lane] = line_y[lane] + 14 + time_rows_in_lane[lane] * kTimeRowHeight;
    y = pause_y[lane] + 36;
  }
  const int height = y + 10;

  std::string svg;
  Appendf(svg,
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
          "font-family=\"sans-serif\" font-size=\"11\">\n",
          width, height);
  svg +=
      "<defs><pattern id=\"hatch\" width=\"8\" height=\"8\" patternUnits=\"userSpaceOnUse\" "
      "patternTransform=\"rotate(45)\"><rect width=\"4\" height=\"8\" fill=\"#f0a030\"/>"
      "</pattern></defs>\n";
  // The axis: a line at the top, broken where a long wait is left out.
  int axis_from = kLeft;
  for (const auto& b : axis.breaks) {
    Appendf(svg,
            "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#bbb\"/>\n"
            "<rect class=\"axis-break\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
            "fill=\"#f4f4f4\" stroke=\"#ccc\" stroke-dasharray=\"4 3\"/>\n"
            "<text class=\"break-label\" x=\"%d\" y=\"%d\" font-size=\"10\" fill=\"#777\" "
            "text-anchor=\"middle\">%s ms</text>\n",
            axis_from, kTop - 14, b.x, kTop - 14, b.x, kTop - 10, TimeAxis::kBreakWidth,
            height - kTop, b.x + TimeAxis::kBreakWidth / 2, kTop - 18, Thousands(b.ms).c_str());
    axis_from = b.x + TimeAxis::kBreakWidth;
  }
  Appendf(svg, "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#bbb\"/>\n",
          axis_from, kTop - 14, width - 20, kTop - 14);
  // When the drawing scrolls (something is flagged), the lanes' titles stay put beside it.
  const bool scrolls =
      std::any_of(events.begin(), events.end(), [](const Event* e) { return e->flagged; });
  std::string titles;
  if (scrolls) {
    Appendf(titles,
            "<svg class=\"lane-titles\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
            "height=\"%d\" font-family=\"sans-serif\" font-size=\"11\">\n",
            kLeft, height);
  }
  for (std::size_t lane = 0; lane < lane_count; ++lane) {
    Appendf(svg, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#999\"/>\n", kLeft,
            line_y[lane], width - 20, line_y[lane]);
    Appendf(scrolls ? titles : svg,
            "<text class=\"lane-label\" x=\"10\" y=\"%d\" font-weight=\"bold\" "
            "font-size=\"12\">%s</text>\n",
            line_y[lane] + 4, Escape(lanes.lanes[lane].title).c_str());
  }
  if (scrolls) titles += "</svg>";
  auto x_at = [&](std::size_t i) { return i < n ? axis.x[i] : axis.end + 40; };
  auto bar = [&](const std::string& actor, std::size_t from, std::size_t to,
                 const std::string& label) {
    int ly = line_y[lanes.Of(actor)];
    Appendf(svg,
            "<rect class=\"lease\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"10\" "
            "fill=\"#7fb3e6\"/><text class=\"lease-label\" x=\"%d\" y=\"%d\" "
            "font-size=\"9\" fill=\"#124\">%s</text>\n",
            x_at(from), ly - 16, std::max(4, x_at(to) - x_at(from)), x_at(from) + 3, ly - 8,
            Escape(label).c_str());
  };
  // Leases start on client lanes only, so a holder always names a lane.
  std::map<std::string, std::pair<std::size_t, std::int64_t>> lease_start;  // actor: (i, token)
  std::map<std::string, std::size_t> pause_start;
  for (std::size_t i = 0; i < n; ++i) {
    const Event& e = *events[i];
    if (e.kind == Kind::kGrant && lanes.lanes[lane_of[i]].client) {
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
      std::size_t from = pause_start[e.actor];
      Appendf(svg,
              "<rect class=\"pause\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"14\" "
              "fill=\"url(#hatch)\"/><text class=\"pause-label\" x=\"%d\" y=\"%d\" "
              "font-weight=\"bold\" fill=\"#b06000\">paused %s ms (stop-the-world)</text>\n",
              x_at(from), pause_y[lane_of[i]], x_at(i) - x_at(from), x_at(from) + 4,
              pause_y[lane_of[i]] + 28, Thousands(e.time_ms - events[from]->time_ms).c_str());
    }
  }
  for (const auto& [holder, start] : lease_start) {
    bar(holder, start.first, n, "lease, token " + std::to_string(start.second));
  }
  bool any_flagged = false;
  for (std::size_t i = 0; i < n; ++i) {
    const Event& e = *events[i];
    int ly = line_y[lane_of[i]];
    int label_y = ly - 22 - row[i] * kRowHeight;
    // A flagged event: a red ring around its dot, its label bold; the first is scrolled to.
    Appendf(svg,
            "<g class=\"%s\"%s><line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" "
            "stroke=\"#ccc\"/>",
            e.flagged ? "event flagged" : "event",
            e.flagged && !any_flagged ? " id=\"first-flagged\"" : "", x_at(i), label_y + 3, x_at(i),
            ly - 6);
    any_flagged = any_flagged || e.flagged;
    if (e.end_ms) {  // an operation: a bar from its start to its end
      const int to = std::max(x_at(i) + 4, XAtTime(axis, times, *e.end_ms));
      Appendf(svg,
              "<rect class=\"op\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"8\" rx=\"2\" "
              "fill=\"%s\"%s/>",
              x_at(i), ly - 4, to - x_at(i), Fill(e.kind),
              e.flagged ? " stroke=\"#d62728\" stroke-width=\"2\"" : "");
    }
    Appendf(svg, "<circle cx=\"%d\" cy=\"%d\" r=\"%d\" fill=\"%s\"/>", x_at(i), ly,
            e.end_ms ? 3 : 6, Fill(e.kind));
    if (e.flagged) {
      Appendf(svg,
              "<circle class=\"flag-ring\" cx=\"%d\" cy=\"%d\" r=\"11\" fill=\"none\" "
              "stroke=\"#d62728\" stroke-width=\"3\"/>",
              x_at(i), ly);
    }
    Appendf(svg, "<text class=\"label\" x=\"%d\" y=\"%d\" fill=\"%s\"%s>%s</text>", x_at(i) - 4,
            label_y, Fill(e.kind), e.flagged ? " font-weight=\"bold\"" : "",
            Escape(labels[i]).c_str());
    if (shows_time[i]) {
      Appendf(svg,
              "<text class=\"time\" x=\"%d\" y=\"%d\" font-size=\"9\" fill=\"#888\" "
              "text-anchor=\"middle\">%s ms</text>",
              x_at(i), ly + 20 + time_row[i] * kTimeRowHeight, Thousands(e.time_ms).c_str());
    }
    svg += "</g>\n";
  }
  svg += "</svg>\n";

  const std::string title = t.title.empty() ? "fencekit demo: " + t.scenario : t.title;
  const std::string heading =
      t.title.empty() ? title + (t.fencing ? " (fencing on)" : " (fencing OFF)") : t.title;
  std::string note = "Time runs left to right, in proportion; a wait longer than " +
                     std::to_string(TimeAxis::kBreakMs) +
                     " ms is drawn as a grey break labelled with its length.";
  if (!t.legend.empty()) note += "<br>\n" + Escape(t.legend);
  if (any_flagged) {
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
      "table.named{border-collapse:collapse;font-size:13px;margin:8px 0}"
      "table.named caption{text-align:left;font-weight:bold;padding:4px 0}"
      "table.named td,table.named th{border:1px solid #ccc;padding:2px 6px;text-align:left;"
      "overflow-wrap:anywhere;max-width:320px}</style></head>\n<body>\n<h1>" +
      Escape(heading) + "</h1>\n<p class=\"verdict\">" + Escape(t.verdict) +
      "</p>\n<p class=\"note\">" + note + "</p>\n" + TableHtml(t.table);
  if (any_flagged) {
    // The drawing scrolls inside the page, opened at the first flagged event.
    html += "<div style=\"display:flex\">" + titles + "<div id=\"drawing\">\n" + svg +
            "</div></div>\n<script>(function(){var f=document.getElementById('first-flagged'),"
            "d=document.getElementById('drawing');if(!f||!d)return;"
            "d.scrollLeft+=f.getBoundingClientRect().left-d.getBoundingClientRect().left-"
            "Math.min(240,d.clientWidth/4);})();</script>\n";
  } else {
    html += svg;
  }
  // The demo always says its final value; a timeline of other lanes only when it has one.
  if (t.lanes.empty() || !t.final_value.empty()) {
    html += "<p>Final value: <code>" + Escape(JsonSafeText(t.final_value)) + "</code></p>\n";
  }
  html += "</body></html>\n";
  return html;
}

}  // namespace fencekit::timeline
