#include <sstream>

#include "harness/reports/report.h"

namespace nimble::reports {

namespace {

// A cell's text made safe inside a Markdown table row.
std::string Escape(const std::string& text) {
  std::string escaped;
  for (char c : text) {
    if (c == '|') {
      escaped += "\\|";
    } else if (c == '\n') {
      escaped += ' ';
    } else {
      escaped += c;
    }
  }
  return escaped;
}

std::string CellText(const Cell& cell) {
  // One run links as "[run 3]", like a single figure's; a list as "runs [3], [7]".
  if (cell.runs.size() == 1) {
    const std::string id = std::to_string(cell.runs[0]);
    return "[run " + id + "](#run-" + id + ")";
  }
  if (!cell.runs.empty()) {
    std::string text = "runs";
    for (size_t i = 0; i < cell.runs.size(); ++i) {
      const std::string id = std::to_string(cell.runs[i]);
      text += std::string(i == 0 ? " " : ", ") + "[" + id + "](#run-" + id + ")";
    }
    return text;
  }
  if (cell.gap) return "*" + Escape(cell.text) + "*";
  if (cell.run && !cell.value)
    return "[" + Escape(cell.text) + "](#run-" + std::to_string(*cell.run) + ")";
  return Escape(cell.text);
}

void WriteRow(std::ostringstream& out, const std::vector<std::string>& cells) {
  out << "|";
  for (const std::string& cell : cells) out << " " << cell << " |";
  out << "\n";
}

}  // namespace

std::string RenderMarkdown(const Report& report) {
  std::ostringstream out;
  out << "# Nimble: the paper's tables from results.db\n\n"
      << "From `" << report.database << "` (" << report.filter << ")"
      << (report.as_of.empty() ? std::string() : ", runs to " + report.as_of)
      << ". Figures in *italics* are gaps: no data, or an emulated "
      << "correctness run, never a latency.\n\n";
  if (!report.hosts.empty()) {
    out << "Hosts:";
    for (size_t i = 0; i < report.hosts.size(); ++i) {
      out << (i == 0 ? " " : "; ") << report.hosts[i];
    }
    out << ".\n\n";
  }
  for (const Table& table : report.tables) {
    out << "<a id=\"" << table.id << "\"></a>\n\n## " << table.title << "\n\n"
        << table.caption << "\n\n";
    if (table.header.empty()) continue;
    if (table.rows.empty()) {
      out << "*No runs in the selection.*\n\n";
    } else {
      WriteRow(out, table.header);
      WriteRow(out, std::vector<std::string>(table.header.size(), "---"));
      for (const std::vector<Cell>& row : table.rows) {
        std::vector<std::string> cells;
        for (const Cell& cell : row) cells.push_back(CellText(cell));
        WriteRow(out, cells);
      }
      out << "\n";
    }
    if (!table.not_measured.empty()) out << table.not_measured << "\n\n";
  }
  out << "## Sources\n\n";
  if (report.sources.empty()) out << "No runs in the selection.\n";
  for (const Provenance& source : report.sources) {
    out << "- <a id=\"run-" << source.run_id << "\"></a>run " << source.run_id << ": commit "
        << source.commit << ", " << source.host << " (" << source.cpu_model << "), " << source.date
        << "\n";
  }
  return out.str();
}

}  // namespace nimble::reports
