// `nimble-bench report`: the paper's tables regenerated from results.db
// (docs/reports.md). BuildReport turns the selected runs into tables whose
// every cell is either a figure traced to the run that measured it, the
// paper's figure, or a marked gap (no data, emulated): nothing is invented.
// The renderers only lay out what BuildReport decided.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/reports/run_selection.h"

namespace nimble::reports {

// Where a figure came from.
struct Provenance {
  int64_t run_id = 0;
  std::string commit;
  std::string host;
  std::string cpu_model;
  std::string date;  // when the run finished (ISO 8601 UTC)
};

struct Cell {
  std::string text;             // as shown
  std::optional<double> value;  // set when the cell is a measured figure (or a median of them)
  std::optional<int64_t> run;   // the one run it came from (Report::sources)
  // A list of runs (a median's, a row's): `text` reads "runs 3, 7" and the
  // renderers link each id (Report::sources).
  std::vector<int64_t> runs;
  bool gap = false;  // no data, emulated or not comparable: shown marked
};

// One bar of a table's chart: a measured figure or the paper's.
struct Bar {
  std::string group;  // e.g. "LSTM 1 layer, intel, box-1"
  std::string label;  // e.g. "PyTorch (mv_script)", "paper: PyTorch"
  double value = 0;
  bool paper = false;
  std::optional<double> low;  // a median's interval (or range), drawn as a whisker
  std::optional<double> high;
};

struct Table {
  std::string id;     // anchor: table1, table2, table3, table4, memory, figure3
  std::string title;  // "Table 1: LSTM, µs/token"
  std::string caption;
  std::vector<std::string> header;
  std::vector<std::vector<Cell>> rows;
  // The paper's figures that no row here measured, in one line (empty: none).
  std::string not_measured;
  std::string chart_unit;                 // empty: no chart
  std::vector<Bar> chart;                 // empty: no chart either
  std::optional<double> chart_reference;  // a value marked across the chart (1 for a ratio)
};

struct Report {
  std::string database;  // the path it was built from
  std::string filter;    // the selection, in words
  // When the newest of its runs finished (ISO 8601, UTC; empty without
  // runs): the report is a function of the database alone, so a committed
  // report can be checked against its committed database.
  std::string as_of;
  std::vector<Table> tables;
  std::vector<Provenance> sources;  // every run a cell refers to, by id
  // The hosts of those runs with their CPU, once each ("box-1 (Xeon ...)"):
  // the tables name hosts only.
  std::vector<std::string> hosts;
};

// The report of `runs` (run_selection.h), read from `database` with the
// selection described by `filter`. The runs of one system, configuration
// and host are one row: timings as their median with a 95% interval, peers'
// speed-ups paired round by round with Nimble's runs (docs/reports.md).
Report BuildReport(const std::vector<SelectedRun>& runs, const std::string& database,
                   const std::string& filter);

// report.md: GitHub-flavoured Markdown, the sources listed at the end.
std::string RenderMarkdown(const Report& report);

// index.html: one self-contained page (inline CSS and SVG charts, no
// script, no network) that reads the same as the Markdown.
std::string RenderHtml(const Report& report);

}  // namespace nimble::reports
