// Where the HTML timeline puts things: the time axis (LayOutTime) and the rows of labels
// (StackLabels, PlaceLabels). html.cc draws with them.
#include <algorithm>

#include "fencekit/timeline/timeline.h"

namespace fencekit::timeline {

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

std::vector<int> PlaceLabels(const std::vector<int>& xs, const std::vector<int>& widths, int gap) {
  const std::size_t n = xs.size();
  std::vector<int> rows(n, 0);
  std::vector<int> row_left;                // each row's leftmost label start, so far
  std::vector<std::pair<int, int>> placed;  // (x, row), by decreasing x
  for (std::size_t k = n; k-- > 0;) {       // the latest first: later labels are to the right
    const int from = xs[k] + kLabelOffset, to = from + widths[k];
    // A leader line that falls under this label, or a later label of the same moment: the
    // label goes above that one.
    int above = -1;
    for (auto it = placed.rbegin(); it != placed.rend() && it->first <= to + gap; ++it) {
      above = std::max(above, it->second);
    }
    std::size_t row = static_cast<std::size_t>(above + 1);
    while (row < row_left.size() && to + gap > row_left[row]) ++row;
    if (row == row_left.size()) row_left.push_back(from);
    row_left[row] = from;
    rows[k] = static_cast<int>(row);
    placed.emplace_back(xs[k], static_cast<int>(row));
  }
  return rows;
}

}  // namespace fencekit::timeline
