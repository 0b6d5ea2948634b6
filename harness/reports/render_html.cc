// index.html: the report as one self-contained page. Everything it shows
// comes from the database (host names, commits, captions), so every text is
// escaped; the page carries its stylesheet and charts inline and has no
// script, so it renders the same offline, in a mail attachment or in print.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harness/reports/report.h"
#include "harness/reports/report_css.h"

namespace nimble::reports {
namespace {

// `text` safe both as element content and inside a quoted attribute.
std::string Escape(std::string_view text) {
  std::string escaped;
  escaped.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        escaped += "&amp;";
        break;
      case '<':
        escaped += "&lt;";
        break;
      case '>':
        escaped += "&gt;";
        break;
      case '"':
        escaped += "&quot;";
        break;
      case '\'':
        escaped += "&#39;";
        break;
      default:
        escaped += c;
    }
  }
  return escaped;
}

// The shortest text that reads back as exactly `value`, so a data-value
// attribute carries the measured figure, not its rounded display.
std::string ExactNumber(double value) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

// A figure as a chart labels it: four significant digits, never an exponent
// for the magnitudes a benchmark records.
std::string ShortNumber(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, std::abs(value) >= 1000 ? "%.0f" : "%.4g", value);
  return buffer;
}

// Characters, not bytes, of UTF-8 text: labels such as "µs/token" are sized
// by what is drawn.
size_t DisplayLength(std::string_view text) {
  return std::count_if(text.begin(), text.end(),
                       [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}

// The bars of a chart by group, groups in the order the table gave them.
using BarGroups = std::vector<std::pair<std::string, std::vector<const Bar*>>>;

BarGroups GroupBars(const std::vector<Bar>& bars) {
  BarGroups groups;
  for (const Bar& bar : bars) {
    auto group = std::find_if(groups.begin(), groups.end(),
                              [&](const auto& entry) { return entry.first == bar.group; });
    if (group == groups.end()) group = groups.insert(groups.end(), {bar.group, {}});
    group->second.push_back(&bar);
  }
  return groups;
}

// A tick step of 1, 2 or 5 times a power of ten giving at most five ticks
// up to `largest`, so the axis reads in round numbers.
double TickStep(double largest) {
  const double rough = largest / 5;
  const double magnitude = std::pow(10.0, std::floor(std::log10(rough)));
  for (const double multiple : {1.0, 2.0, 5.0}) {
    if (multiple * magnitude >= rough) return multiple * magnitude;
  }
  return 10 * magnitude;
}

// Geometry of the horizontal bar chart, in SVG user units (pixels at 100%).
constexpr double kChartWidth = 720;
constexpr double kCharWidth = 7;  // an average 12px glyph, to size the label column
constexpr double kValueRoom = 64;
constexpr double kLegendHeight = 24;
constexpr double kGroupHeading = 20;
constexpr double kBarHeight = 14;
constexpr double kBarPitch = 18;
constexpr double kGroupGap = 6;
constexpr double kAxisRoom = 44;

// ` name="value"` for an SVG coordinate or length.
std::string Attribute(const char* name, double value) {
  return std::string(" ") + name + "=\"" + ShortNumber(value) + "\"";
}

// Where a chart draws: bars start right of a column wide enough for the
// longest label, and the scale runs from 0 to a round number at or above
// the largest figure.
struct ChartScale {
  double plot_left = 0;
  double plot_width = 0;
  double step = 0;
  double axis_end = 0;

  // Figures are times and sizes; one that is negative or not finite gets no
  // bar, only its printed value.
  double Length(double value) const {
    return std::isfinite(value) ? std::clamp(value / axis_end, 0.0, 1.0) * plot_width : 0.0;
  }
};

// The right end of a bar or of its whisker.
double BarEnd(const Bar& bar) {
  return bar.high ? std::max(bar.value, *bar.high) : bar.value;
}

ChartScale ScaleFor(const std::vector<Bar>& bars, std::optional<double> reference) {
  size_t longest_label = 0;
  double largest = reference.value_or(0);
  for (const Bar& bar : bars) {
    longest_label = std::max(longest_label, DisplayLength(bar.label));
    if (std::isfinite(BarEnd(bar))) largest = std::max(largest, BarEnd(bar));
  }
  if (largest <= 0) largest = 1;
  ChartScale scale;
  scale.plot_left = std::clamp(longest_label * kCharWidth + 12, 80.0, 280.0);
  scale.plot_width = kChartWidth - scale.plot_left - kValueRoom;
  scale.step = TickStep(largest);
  scale.axis_end = scale.step * std::ceil(largest / scale.step);
  return scale;
}

// The opening of a bar's or legend swatch's <rect>: its kind as a class,
// and the hatch fill for the paper's.
std::string OpenRect(const std::string& role, bool paper, const std::string& paper_fill) {
  return "<rect class=\"" + role + (paper ? " paper\"" + paper_fill : " measured\"");
}

// A median's interval as a line across its bar's middle, with end ticks.
constexpr const char* kWhiskerStroke = " stroke=\"#1f2328\" stroke-width=\"1.5\"";

std::string Whisker(const ChartScale& scale, double low, double high, double middle) {
  const double left = scale.plot_left + scale.Length(low);
  const double right = scale.plot_left + scale.Length(high);
  std::string svg = "<line class=\"whisker\"" + std::string(kWhiskerStroke) +
                    Attribute("x1", left) + Attribute("y1", middle) + Attribute("x2", right) +
                    Attribute("y2", middle) + "/>";
  for (const double x : {left, right}) {
    svg += "<line class=\"whisker\"" + std::string(kWhiskerStroke) + Attribute("x1", x) +
           Attribute("y1", middle - 4) + Attribute("x2", x) + Attribute("y2", middle + 4) + "/>";
  }
  return svg;
}

// The legend above the bars, naming only the kinds of bar the chart has.
std::string ChartLegend(const std::vector<Bar>& bars, const ChartScale& scale,
                        const std::string& paper_fill) {
  std::string legend;
  double x = scale.plot_left;
  for (const bool paper : {false, true}) {
    if (std::none_of(bars.begin(), bars.end(),
                     [&](const Bar& bar) { return bar.paper == paper; })) {
      continue;
    }
    const std::string text = paper ? "the paper's figure" : "measured here (median)";
    legend += OpenRect("swatch", paper, paper_fill) + Attribute("x", x) +
              " y=\"4\" width=\"14\" height=\"12\"/><text" + Attribute("x", x + 20) + " y=\"15\">" +
              text + "</text>\n";
    x += 28 + DisplayLength(text) * kCharWidth;
  }
  if (std::any_of(bars.begin(), bars.end(), [](const Bar& bar) { return bar.low && bar.high; })) {
    const std::string text = "95% interval or range";
    legend += "<line class=\"whisker\"" + std::string(kWhiskerStroke) + Attribute("x1", x) +
              " y1=\"10\"" + Attribute("x2", x + 14) + " y2=\"10\"/><text" +
              Attribute("x", x + 20) + " y=\"15\">" + text + "</text>\n";
  }
  return legend;
}

// The grouped bars from `top` down, each with its label on the left and its
// value at its end; `bottom` becomes the y below the last group.
std::string ChartBars(const std::vector<Bar>& bars, const ChartScale& scale,
                      const std::string& paper_fill, double top, double& bottom) {
  std::string svg;
  double y = top;
  for (const auto& [group, members] : GroupBars(bars)) {
    svg += "<text class=\"group-label\" x=\"0\"" + Attribute("y", y + 14) + ">" + Escape(group) +
           "</text>\n";
    y += kGroupHeading;
    for (const Bar* bar : members) {
      const double length = scale.Length(bar->value);
      svg += "<text class=\"bar-label\" text-anchor=\"end\"" + Attribute("x", scale.plot_left - 6) +
             Attribute("y", y + 11) + ">" + Escape(bar->label) + "</text>";
      svg += OpenRect("bar", bar->paper, paper_fill) + Attribute("x", scale.plot_left) +
             Attribute("y", y) + Attribute("width", length) + Attribute("height", kBarHeight) +
             "/>";
      if (bar->low && bar->high) svg += Whisker(scale, *bar->low, *bar->high, y + kBarHeight / 2);
      const double label_x = scale.plot_left + std::max(length, scale.Length(BarEnd(*bar))) + 4;
      svg += "<text class=\"bar-value\"" + Attribute("x", label_x) + Attribute("y", y + 11) + ">" +
             ShortNumber(bar->value) + "</text>\n";
      y += kBarPitch;
    }
    y += kGroupGap;
  }
  bottom = y;
  return svg;
}

// Grid lines from `top` to the axis at `axis_y`, tick labels, the unit and
// the reference value (1 for a ratio) as a solid line.
std::string ChartAxis(const ChartScale& scale, double top, double axis_y, const std::string& unit,
                      std::optional<double> reference) {
  std::string svg;
  if (reference) {
    const double x = scale.plot_left + scale.Length(*reference);
    svg += "<line class=\"reference\" stroke=\"#6e7781\" stroke-width=\"1.5\"" +
           Attribute("x1", x) + Attribute("y1", top) + Attribute("x2", x) +
           Attribute("y2", axis_y) + "/>\n";
  }
  const long tick_count = std::lround(scale.axis_end / scale.step);
  for (long i = 0; i <= tick_count; ++i) {
    const double tick = i * scale.step;
    const double x = scale.plot_left + tick / scale.axis_end * scale.plot_width;
    svg += "<line class=\"grid\"" + Attribute("x1", x) + Attribute("y1", top) + Attribute("x2", x) +
           Attribute("y2", axis_y) + "/><text class=\"tick-label\" text-anchor=\"middle\"" +
           Attribute("x", x) + Attribute("y", axis_y + 16) + ">" + ShortNumber(tick) + "</text>\n";
  }
  svg += "<line class=\"axis\"" + Attribute("x1", scale.plot_left) + Attribute("y1", axis_y) +
         Attribute("x2", scale.plot_left + scale.plot_width) + Attribute("y2", axis_y) + "/>\n";
  svg += "<text class=\"unit\" text-anchor=\"middle\"" +
         Attribute("x", scale.plot_left + scale.plot_width / 2) + Attribute("y", axis_y + 34) +
         ">" + Escape(unit) + "</text>\n";
  return svg;
}

// The inline SVG bar chart of `table`: measured bars solid, the paper's
// hatched (a pattern per chart: ids are page-wide), a legend saying which is
// which, and a scale axis in the table's unit. Pure SVG styled by the page's
// CSS, so it draws without script.
std::string BarChart(const Table& table) {
  const ChartScale scale = ScaleFor(table.chart, table.chart_reference);
  const std::string hatch_id = Escape("hatch-" + table.id);
  const std::string paper_fill = " fill=\"url(#" + hatch_id + ")\"";
  const std::string title_id = Escape("chart-" + table.id);

  double axis_y = 0;
  const std::string bars = ChartBars(table.chart, scale, paper_fill, kLegendHeight, axis_y);
  const double height = axis_y + kAxisRoom;
  return "<figure class=\"chart\"><svg class=\"chart\" role=\"img\" aria-labelledby=\"" + title_id +
         "\"" + Attribute("width", kChartWidth) + Attribute("height", height) + " viewBox=\"0 0 " +
         ShortNumber(kChartWidth) + " " + ShortNumber(height) + "\">\n<title id=\"" + title_id +
         "\">" + Escape(table.title) + ", bar chart in " + Escape(table.chart_unit) +
         "</title>\n<defs><pattern id=\"" + hatch_id +
         "\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
         "patternTransform=\"rotate(45)\"><rect class=\"hatch-ground\" width=\"6\" height=\"6\"/>"
         "<line class=\"hatch-stroke\" x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\"/></pattern></defs>\n" +
         ChartLegend(table.chart, scale, paper_fill) +
         ChartAxis(scale, kLegendHeight, axis_y, table.chart_unit, table.chart_reference) + bars +
         "</svg></figure>\n";
}

// One cell: a measured figure right-aligned with its exact value and a link
// to the run it came from; a gap marked so it cannot be read as a figure.
std::string TableCell(const Cell& cell) {
  std::string td = "<td";
  if (cell.gap) td += " class=\"gap\"";
  if (cell.value) td += " data-value=\"" + ExactNumber(*cell.value) + "\"";
  td += ">";
  if (cell.runs.size() == 1) {
    const std::string id = std::to_string(cell.runs[0]);
    td += "<a href=\"#run-" + id + "\">run " + id + "</a>";
  } else if (!cell.runs.empty()) {
    td += "runs";
    for (size_t i = 0; i < cell.runs.size(); ++i) {
      const std::string id = std::to_string(cell.runs[i]);
      td += std::string(i == 0 ? " " : ", ") + "<a href=\"#run-" + id + "\">" + id + "</a>";
    }
  } else if (cell.run) {
    td += "<a href=\"#run-" + std::to_string(*cell.run) + "\">" + Escape(cell.text) + "</a>";
  } else {
    td += Escape(cell.text);
  }
  return td + "</td>";
}

std::string TableSection(const Table& table) {
  std::string html =
      "<section id=\"" + Escape(table.id) + "\">\n<h2>" + Escape(table.title) + "</h2>\n";
  if (!table.caption.empty()) html += "<p class=\"caption\">" + Escape(table.caption) + "</p>\n";
  html += "<div class=\"table-box\"><table>\n<thead><tr>";
  for (const std::string& heading : table.header) {
    html += "<th scope=\"col\">" + Escape(heading) + "</th>";
  }
  html += "</tr></thead>\n<tbody>\n";
  for (const std::vector<Cell>& row : table.rows) {
    html += "<tr>";
    for (const Cell& cell : row) html += TableCell(cell);
    html += "</tr>\n";
  }
  html += "</tbody>\n</table></div>\n";
  if (!table.not_measured.empty())
    html += "<p class=\"note not-measured\">" + Escape(table.not_measured) + "</p>\n";
  if (!table.chart_unit.empty() && !table.chart.empty()) html += BarChart(table);
  return html + "</section>\n";
}

// The runs the figures link to, each the target of its cells' links.
std::string SourcesSection(const std::vector<Provenance>& sources) {
  std::string html = "<section id=\"sources\">\n<h2>Sources</h2>\n<ul class=\"sources\">\n";
  for (const Provenance& source : sources) {
    const std::string id = std::to_string(source.run_id);
    html += "<li id=\"run-" + id + "\">run " + id + ": <code>" + Escape(source.commit) +
            "</code>, " + Escape(source.host);
    if (!source.cpu_model.empty()) html += " (" + Escape(source.cpu_model) + ")";
    html += ", " + Escape(source.date) + "</li>\n";
  }
  return html + "</ul>\n</section>\n";
}

}  // namespace

std::string RenderHtml(const Report& report) {
  std::string html =
      "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<title>Nimble report: " +
      Escape(report.database) + "</title>\n<style>\n" + kReportCss + "</style>\n</head>\n<body>\n";
  html +=
      "<header>\n<h1>Nimble: the paper's tables, measured</h1>\n<p class=\"meta\">Runs from "
      "<code>" +
      Escape(report.database) + "</code> (selection: " + Escape(report.filter) + ")" +
      (report.as_of.empty() ? std::string() : ", runs to " + Escape(report.as_of)) + ".</p>\n";
  if (!report.hosts.empty()) {
    std::string hosts;
    for (const std::string& host : report.hosts) hosts += (hosts.empty() ? "" : "; ") + host;
    html += "<p class=\"meta\">Hosts: " + Escape(hosts) + ".</p>\n";
  }
  html +=
      "<p class=\"note\">Each row lists the runs it aggregates, each a link to its source; "
      "greyed italic cells are gaps (no data, emulated or not comparable).</p>\n</header>\n";

  html += "<nav aria-label=\"Contents\">\n<h2>Contents</h2>\n<ol>\n";
  for (const Table& table : report.tables) {
    html += "<li><a href=\"#" + Escape(table.id) + "\">" + Escape(table.title) + "</a></li>\n";
  }
  html += "<li><a href=\"#sources\">Sources</a></li>\n</ol>\n</nav>\n<main>\n";
  for (const Table& table : report.tables) html += TableSection(table);
  html += SourcesSection(report.sources);
  return html + "</main>\n</body>\n</html>\n";
}

}  // namespace nimble::reports
