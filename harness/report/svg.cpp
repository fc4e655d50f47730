// The SVG charts of report.html (see svg.h). Plain string building: every chart is a few
// hundred elements at most per candidate or fixture, so no DOM library is needed.
#include "harness/report/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <sstream>

namespace evalbox::harness {
inline namespace report {
namespace svg {

namespace {

constexpr const char* font = "font-family=\"system-ui, sans-serif\" font-size=\"12\"";

// Long names are cut for the drawing; the full name stays in the tooltip.
std::string short_label(std::string_view s, size_t max_chars) {
  // Count UTF-8 code points, not bytes, and never cut inside one.
  size_t chars = 0, i = 0;
  for (; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (chars == max_chars) break;
      ++chars;
    }
  }
  if (i >= s.size()) return std::string(s);
  size_t cut = i;
  // back off one code point to make room for the ellipsis
  do --cut;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80);
  return std::string(s.substr(0, cut)) + "…";
}

double clamp01(double v) { return std::clamp(v, 0.0, 1.0); }

}  // namespace

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        // Control characters other than tab and newline have no business in a label.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t')
          out += ' ';
        else
          out += c;
    }
  }
  return out;
}

std::string bar_chart(std::string_view id, std::span<const bar> bars) {
  constexpr double left = 190, plot = 400, right = 260, row = 30, top = 26;
  const double width = left + plot + right;
  const double height = top + row * static_cast<double>(bars.size()) + 8;
  std::string s = fmt::format(
      "<svg id=\"{}\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" "
      "height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\" {}>\n",
      escape(id), width, height, width, height, font);
  for (int t = 0; t <= 4; ++t) {
    double x = left + plot * t / 4.0;
    s += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#ddd\"/>"
        "<text x=\"{0}\" y=\"{3}\" text-anchor=\"middle\" fill=\"#555\">{4}%</text>\n",
        x, top - 4, height - 8, top - 10, t * 25);
  }
  for (size_t i = 0; i < bars.size(); ++i) {
    const bar& b = bars[i];
    double y = top + row * static_cast<double>(i);
    double mid = y + row / 2;
    s += fmt::format("<g class=\"bar-row\"><title>{}: {}</title>", escape(b.label), escape(b.note));
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>", left - 8, mid + 4,
                     escape(short_label(b.label, 26)));
    if (b.value) {
      s += fmt::format(
          "<rect class=\"bar\" x=\"{}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" fill=\"#4c78a8\"/>",
          left, y + 6, plot * clamp01(*b.value), row - 12);
    }
    if (b.ci) {
      double lo = left + plot * clamp01(b.ci->lo), hi = left + plot * clamp01(b.ci->hi);
      s += fmt::format(
          "<line class=\"whisker\" x1=\"{0:.2f}\" y1=\"{2}\" x2=\"{1:.2f}\" y2=\"{2}\" "
          "stroke=\"#222\" stroke-width=\"1.5\"/>"
          "<line x1=\"{0:.2f}\" y1=\"{3}\" x2=\"{0:.2f}\" y2=\"{4}\" stroke=\"#222\"/>"
          "<line x1=\"{1:.2f}\" y1=\"{3}\" x2=\"{1:.2f}\" y2=\"{4}\" stroke=\"#222\"/>",
          lo, hi, mid, mid - 6, mid + 6);
    }
    s += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"#333\">{}</text></g>\n", left + plot + 10,
                     mid + 4, escape(b.note));
  }
  s += "</svg>\n";
  return s;
}

void heatmap(std::ostream& out, std::string_view id, std::span<const std::string> rows,
             std::span<const std::string> cols, size_t count,
             const std::function<heat_cell(size_t)>& cell) {
  constexpr double left = 230, cell_w = 96, cell_h = 22, top = 30;
  const double width = left + cell_w * static_cast<double>(cols.size()) + 10;
  const double height = top + cell_h * static_cast<double>(rows.size()) + 6;
  out << fmt::format(
      "<svg id=\"{}\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" "
      "height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\" {}>\n",
      escape(id), width, height, width, height, font);
  for (size_t c = 0; c < cols.size(); ++c) {
    out << fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\"><title>{}</title>{}</text>\n",
        left + cell_w * (static_cast<double>(c) + 0.5), top - 10, escape(cols[c]),
        escape(short_label(cols[c], 12)));
  }
  for (size_t r = 0; r < rows.size(); ++r) {
    out << fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\"><title>{}</title>{}</text>\n",
                       left - 8, top + cell_h * (static_cast<double>(r) + 0.5) + 4, escape(rows[r]),
                       escape(short_label(rows[r], 32)));
  }
  for (size_t i = 0; i < count; ++i) {
    const heat_cell c = cell(i);
    double x = left + cell_w * static_cast<double>(c.col);
    double y = top + cell_h * static_cast<double>(c.row);
    // Red (0%) through yellow to green (100%); grey when only errors.
    std::string fill =
        c.rate ? fmt::format("hsl({:.0f},70%,72%)", 120.0 * clamp01(*c.rate)) : std::string("#ccc");
    out << fmt::format(
        "<g><title>{}</title><rect class=\"heat\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" "
        "fill=\"{}\" stroke=\"#fff\"/><text x=\"{}\" y=\"{}\" "
        "text-anchor=\"middle\">{}</text></g>\n",
        escape(c.title), x, y, cell_w, cell_h, fill, x + cell_w / 2, y + cell_h / 2 + 4,
        escape(c.text));
  }
  out << "</svg>\n";
}

std::string heatmap(std::string_view id, std::span<const std::string> rows,
                    std::span<const std::string> cols, std::span<const heat_cell> cells) {
  std::ostringstream out;
  heatmap(out, id, rows, cols, cells.size(), [&](size_t i) { return cells[i]; });
  return std::move(out).str();
}

std::string difference_chart(std::string_view id, std::span<const difference_row> rows) {
  constexpr double left = 220, plot = 400, right = 280, row = 44, top = 26;
  const double width = left + plot + right;
  const double height = top + row * static_cast<double>(rows.size()) + 8;
  auto xof = [&](double d) { return left + plot * (std::clamp(d, -1.0, 1.0) + 1.0) / 2.0; };
  std::string s = fmt::format(
      "<svg id=\"{}\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" "
      "height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\" {}>\n",
      escape(id), width, height, width, height, font);
  for (int t = -2; t <= 2; ++t) {
    double x = xof(t / 2.0);
    s += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"{3}\"/>"
        "<text x=\"{0}\" y=\"{4}\" text-anchor=\"middle\" fill=\"#555\">{5:+d}</text>\n",
        x, top - 4, height - 8, t == 0 ? "#888" : "#ddd", top - 10, t * 50);
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    const difference_row& r = rows[i];
    double y = top + row * static_cast<double>(i);
    double mid = y + row / 2;
    s +=
        fmt::format("<g class=\"diff-row\"><title>{}: {}</title>", escape(r.label), escape(r.note));
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>", left - 8, mid + 4,
                     escape(short_label(r.label, 30)));
    for (size_t k = 0; k < r.fixtures.size(); ++k) {
      // Spread the dots vertically (deterministically) so equal differences stay visible.
      double jitter = (static_cast<double>(k % 7) - 3.0) * 2.2;
      s += fmt::format(
          "<circle class=\"diff-fixture\" cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"2.5\" fill=\"#9ab\" "
          "fill-opacity=\"0.7\"><title>{}: {:+.1f} pts</title></circle>",
          xof(r.fixtures[k].second), mid + jitter, escape(r.fixtures[k].first),
          r.fixtures[k].second * 100);
    }
    if (r.ci) {
      s += fmt::format(
          "<line class=\"whisker\" x1=\"{:.2f}\" y1=\"{}\" x2=\"{:.2f}\" y2=\"{}\" stroke=\"#222\" "
          "stroke-width=\"2\"/>",
          xof(r.ci->lo), mid, xof(r.ci->hi), mid);
    }
    if (r.mean) {
      s += fmt::format(
          "<circle class=\"diff-mean\" cx=\"{:.2f}\" cy=\"{}\" r=\"5\" fill=\"#d62728\"/>",
          xof(*r.mean), mid);
    }
    s += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"#333\">{}</text></g>\n", left + plot + 10,
                     mid + 4, escape(r.note));
  }
  s += "</svg>\n";
  return s;
}

}  // namespace svg
}  // namespace report
}  // namespace evalbox::harness
