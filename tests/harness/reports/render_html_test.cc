// RenderHtml on a hand-built Report: what the page must hold whatever the
// database says (escaped text, traced figures, marked gaps, a chart bar per
// figure) and what it must never hold (script, network references).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iterator>
#include <regex>
#include <string>
#include <vector>

#include "harness/reports/report.h"
#include "tests/harness/reports/reports_test_util.h"

namespace nimble::reports {
namespace {

using test_util::GapCell;
using test_util::MeasuredCell;
using test_util::PlainCell;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

// Two tables, one charted, with text a hostile or careless database could
// hold, and a figure (0.1 + 0.2) whose shortest exact form has 17 digits.
Report SampleReport() {
  Table lstm;
  lstm.id = "table1";
  lstm.title = "Table 1: LSTM, µs/token";
  lstm.caption = "Latency per token; <b>lower</b> is better & \"paper\" is MLSys'21.";
  lstm.header = {"Model", "Nimble", "PyTorch", "paper: Nimble"};
  lstm.rows = {{PlainCell("LSTM 1 layer"), MeasuredCell("12.50", 12.5, 3),
                MeasuredCell("0.30", 0.1 + 0.2, 4), PlainCell("47.8")},
               {PlainCell("LSTM 2 layers"), MeasuredCell("25.00", 25, 3), GapCell("no data"),
                PlainCell("97.2")}};
  lstm.chart_unit = "µs/token";
  lstm.chart = {{"LSTM 1 layer", "Nimble", 12.5, false, 11.5, 14.25},
                {"LSTM 1 layer", "PyTorch <mv_script>", 0.1 + 0.2, false, {}, {}},
                {"LSTM 1 layer", "paper: Nimble", 47.8, true, {}, {}},
                {"LSTM 2 layers", "Nimble", 25, false, {}, {}},
                {"LSTM 2 layers", "paper: Nimble", 97.2, true, {}, {}}};
  Table memory;
  memory.id = "memory";
  memory.title = "Memory, MiB";
  memory.header = {"Model", "Nimble"};
  memory.rows = {{PlainCell("BERT"), MeasuredCell("1,024", 1024, 4)},
                 {PlainCell("Tree-LSTM"), GapCell("")}};

  Report report;
  report.database = "/data/results.db";
  report.filter = "all finished runs";
  report.as_of = "2021-04-05T06:07:08Z";
  report.tables = {lstm, memory};
  report.sources = {{3, "abc1234", "<script>alert('x')</script>", "Xeon \"Platinum\" 8259CL",
                     "2021-04-01T00:00:00Z"},
                    {4, "def5678", "arm-box", "", "2021-04-02T00:00:00Z"}};
  return report;
}

// Occurrences of `needle` in `text`.
size_t Count(const std::string& text, const std::string& needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

// The captured groups of each match of `pattern` in `text`.
std::vector<std::vector<std::string>> Captures(const std::string& text,
                                               const std::string& pattern) {
  const std::regex expression(pattern);
  std::vector<std::vector<std::string>> matches;
  for (auto match = std::sregex_iterator(text.begin(), text.end(), expression);
       match != std::sregex_iterator(); ++match) {
    matches.emplace_back(std::next(match->begin()), match->end());
  }
  return matches;
}

// The part of the page from `<section id="id">` to its end.
std::string Section(const std::string& html, const std::string& id) {
  const size_t begin = html.find("<section id=\"" + id + "\">");
  if (begin == std::string::npos) return "";
  return html.substr(begin, html.find("</section>", begin) - begin);
}

TEST(RenderHtml, IsOneSelfContainedPage) {
  const std::string html = RenderHtml(SampleReport());
  EXPECT_THAT(html, StartsWith("<!doctype html>"));
  EXPECT_THAT(html, HasSubstr("<meta charset=\"utf-8\">"));
  EXPECT_THAT(html, HasSubstr("<title>"));
  EXPECT_THAT(html, HasSubstr("<style>"));
  EXPECT_THAT(html, HasSubstr("td[data-value]"));  // reports/style.css, compiled in
  EXPECT_THAT(html, HasSubstr("</html>"));
}

TEST(RenderHtml, HasNoScriptAndNoNetworkReference) {
  const std::string html = RenderHtml(SampleReport());
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, Not(HasSubstr("http")));
  EXPECT_THAT(html, Not(HasSubstr("//")));
  EXPECT_THAT(html, Not(HasSubstr("src=")));
}

TEST(RenderHtml, EscapesEveryTextFromTheDatabase) {
  const std::string html = RenderHtml(SampleReport());
  EXPECT_THAT(html, HasSubstr("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));
  EXPECT_THAT(html, HasSubstr("Xeon &quot;Platinum&quot; 8259CL"));
  EXPECT_THAT(html, HasSubstr("&lt;b&gt;lower&lt;/b&gt; is better &amp; &quot;paper&quot; is "
                              "MLSys&#39;21."));
  EXPECT_THAT(html, HasSubstr("PyTorch &lt;mv_script&gt;"));
  EXPECT_THAT(html, Not(HasSubstr("<b>")));
}

TEST(RenderHtml, SaysWhereAndWhenItCameFrom) {
  const std::string html = RenderHtml(SampleReport());
  const std::string header = html.substr(0, html.find("</header>"));
  EXPECT_THAT(header, HasSubstr("/data/results.db"));
  EXPECT_THAT(header, HasSubstr("all finished runs"));
  EXPECT_THAT(header, HasSubstr("2021-04-05T06:07:08Z"));
}

TEST(RenderHtml, ListsEveryTableInTheContentsAndGivesEachASection) {
  const std::string html = RenderHtml(SampleReport());
  for (const std::string id : {"table1", "memory", "sources"}) {
    EXPECT_THAT(html, HasSubstr("<a href=\"#" + id + "\">")) << id;
    EXPECT_THAT(Section(html, id), Not(IsEmpty())) << id;
  }
  EXPECT_THAT(Section(html, "table1"), HasSubstr("<h2>Table 1: LSTM, µs/token</h2>"));
}

// Every measured cell: its exact value in data-value (0.1 + 0.2 needs 17
// digits to read back as the same double), its text linking to its run.
TEST(RenderHtml, MeasuredCellsCarryTheirExactValueAndLinkToTheirRun) {
  const std::vector<std::vector<std::string>> expected = {{"12.5", "3", "12.50"},
                                                          {"0.30000000000000004", "4", "0.30"},
                                                          {"25", "3", "25.00"},
                                                          {"1024", "4", "1,024"}};
  EXPECT_EQ(Captures(RenderHtml(SampleReport()),
                     R"re(<td data-value="([^"]*)"><a href="#run-(\d+)">([^<]*)</a></td>)re"),
            expected);
}

TEST(RenderHtml, MarksGapCellsAndShowsPaperCellsPlain) {
  const std::string html = RenderHtml(SampleReport());
  EXPECT_EQ(Count(html, "<td class=\"gap\">"), 2u);
  EXPECT_THAT(html, HasSubstr("<td class=\"gap\">no data</td>"));
  EXPECT_THAT(html, HasSubstr("<td>47.8</td>"));
}

TEST(RenderHtml, ChartsOneBarPerFigureWithItsValue) {
  const std::string chart = Section(RenderHtml(SampleReport()), "table1");
  EXPECT_EQ(Count(chart, "<svg"), 1u);
  EXPECT_THAT(chart, HasSubstr("role=\"img\""));
  EXPECT_THAT(chart, HasSubstr("<title id=\"chart-table1\">Table 1: LSTM, µs/token"));
  EXPECT_EQ(Count(chart, "<rect class=\"bar measured\""), 3u);
  EXPECT_EQ(Count(chart, "<rect class=\"bar paper\" fill=\"url(#hatch-table1)\""), 2u);
  const std::vector<std::vector<std::string>> values = {
      {"12.5"}, {"0.3"}, {"47.8"}, {"25"}, {"97.2"}};
  EXPECT_EQ(Captures(chart, R"re(<text class="bar-value"[^>]*>([^<]*)</text>)re"), values);
  EXPECT_EQ(Count(chart, "<text class=\"group-label\""), 2u);
  EXPECT_THAT(chart, HasSubstr(">measured here (median)</text>"));
  EXPECT_THAT(chart, HasSubstr(">the paper's figure</text>"));
  EXPECT_THAT(chart, HasSubstr("<text class=\"unit\""));
  EXPECT_GE(Count(chart, "<text class=\"tick-label\""), 3u);
}

TEST(RenderHtml, AnIntervalIsAWhiskerAcrossItsBar) {
  const std::string chart = Section(RenderHtml(SampleReport()), "table1");
  // One bar has an interval: its line and two end ticks, and the legend's.
  EXPECT_EQ(Count(chart, "<line class=\"whisker\""), 4u);
  EXPECT_THAT(chart, HasSubstr(">95% interval or range</text>"));
  EXPECT_THAT(chart, Not(HasSubstr("class=\"reference\"")));
  // The bar's value label sits right of its whisker (the first after the
  // legend's), not inside it.
  const auto whisker_ends =
      Captures(chart, R"re(<line class="whisker"[^>]* x1="([0-9.]+)"[^>]* x2="([0-9.]+)")re");
  const auto first_label = Captures(chart, R"re(<text class="bar-value" x="([0-9.]+)")re");
  ASSERT_GE(whisker_ends.size(), 2u);
  ASSERT_FALSE(first_label.empty());
  EXPECT_GT(std::stod(first_label[0][0]), std::stod(whisker_ends[1][1]));
}

TEST(RenderHtml, ARatioChartMarksOne) {
  Report report = SampleReport();
  report.tables[0].chart_reference = 1;
  EXPECT_EQ(Count(Section(RenderHtml(report), "table1"), "<line class=\"reference\""), 1u);
}

TEST(RenderHtml, ATableWithAUnitButNoBarsHasNoChart) {
  Report report = SampleReport();
  report.tables[0].chart.clear();
  EXPECT_THAT(Section(RenderHtml(report), "table1"), Not(HasSubstr("<svg")));
}

TEST(RenderHtml, ARunListLinksEachRun) {
  Report report = SampleReport();
  Cell runs = PlainCell("runs 3, 4");
  runs.runs = {3, 4};
  report.tables[1].rows[0][1] = runs;
  EXPECT_THAT(Section(RenderHtml(report), "memory"),
              HasSubstr("<td>runs <a href=\"#run-3\">3</a>, <a href=\"#run-4\">4</a></td>"));
  runs.runs = {3};
  report.tables[1].rows[0][1] = runs;
  EXPECT_THAT(Section(RenderHtml(report), "memory"),
              HasSubstr("<td><a href=\"#run-3\">run 3</a></td>"));
}

TEST(RenderHtml, TheFoldedLineFollowsItsTableEscaped) {
  Report report = SampleReport();
  report.tables[0].not_measured = "Not measured here: MXNet (paper: 4.45x on <intel>).";
  const std::string section = Section(RenderHtml(report), "table1");
  const size_t line = section.find(
      "<p class=\"note not-measured\">Not measured here: MXNet (paper: 4.45x on &lt;intel&gt;)."
      "</p>");
  ASSERT_NE(line, std::string::npos);
  EXPECT_GT(line, section.find("</table>"));
  EXPECT_THAT(Section(RenderHtml(report), "memory"), Not(HasSubstr("not-measured")));
}

TEST(RenderHtml, TableWithoutUnitHasNoChart) {
  EXPECT_THAT(Section(RenderHtml(SampleReport()), "memory"), Not(HasSubstr("<svg")));
}

TEST(RenderHtml, SourcesListEveryRunAsALinkTarget) {
  const std::string sources = Section(RenderHtml(SampleReport()), "sources");
  EXPECT_THAT(sources, HasSubstr("<li id=\"run-3\">run 3: <code>abc1234</code>, "
                                 "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; "
                                 "(Xeon &quot;Platinum&quot; 8259CL), 2021-04-01T00:00:00Z</li>"));
  EXPECT_THAT(sources, HasSubstr("<li id=\"run-4\">run 4: <code>def5678</code>, arm-box, "
                                 "2021-04-02T00:00:00Z</li>"));
}

}  // namespace
}  // namespace nimble::reports
