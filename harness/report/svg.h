// The charts of report.html, drawn as inline SVG by evalbox itself (no chart library, nothing
// fetched): pass@1 bars with interval whiskers, the fixture × candidate heatmap, and the paired
// difference chart. Every label and tooltip is escaped here; callers pass plain text.
#pragma once

#include <functional>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "harness/report/stats.h"

namespace evalbox::harness {
inline namespace report {
namespace svg {

// Escapes text for HTML/SVG element content and double- or single-quoted attributes.
std::string escape(std::string_view text);

// One horizontal bar on a 0–100% axis: `value` with its interval as a whisker.
struct bar {
  std::string label;
  std::optional<double> value;  // nullopt: drawn as "n/a", no bar
  std::optional<stats::interval> ci;
  std::string note;  // printed right of the plot, e.g. "62.0% [48, 75] n=30"
};
// <svg id=…> with one <rect class="bar"> per bar that has a value and one
// <line class="whisker"> per interval.
std::string bar_chart(std::string_view id, std::span<const bar> bars);

struct heat_cell {
  size_t row = 0;              // index into rows
  size_t col = 0;              // index into cols
  std::optional<double> rate;  // nullopt: no non-error trial (drawn grey)
  std::string text;            // inside the cell, e.g. "3/5"
  std::string title;           // tooltip
};
// Rows × columns of coloured cells (<rect class="heat">), red at 0% to green at 100%.
std::string heatmap(std::string_view id, std::span<const std::string> rows,
                    std::span<const std::string> cols, std::span<const heat_cell> cells);
// The same chart written to `out` as it is drawn, `cell(i)` making the i-th of `count` cells
// only when it is drawn: a heatmap has a cell per candidate and fixture.
void heatmap(std::ostream& out, std::string_view id, std::span<const std::string> rows,
             std::span<const std::string> cols, size_t count,
             const std::function<heat_cell(size_t)>& cell);

struct difference_row {
  std::string label;           // "tuned vs baseline"
  std::optional<double> mean;  // mean difference in [−1, 1]
  std::optional<stats::interval> ci;
  std::vector<std::pair<std::string, double>> fixtures;  // per-fixture differences
  std::string note;                                      // verdict and n
};
// One row per comparison on a −100…+100 point axis: the per-fixture differences as small dots
// (<circle class="diff-fixture">), the mean (<circle class="diff-mean">) and its interval.
std::string difference_chart(std::string_view id, std::span<const difference_row> rows);

}  // namespace svg
}  // namespace report
}  // namespace evalbox::harness
