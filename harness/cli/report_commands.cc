#include "harness/cli/report_commands.h"

#include <filesystem>
#include <iostream>
#include <memory>

#include "harness/bench/results_db.h"
#include "harness/reports/gate.h"
#include "harness/reports/report.h"
#include "nimble/vm/error.h"
#include "nimble/vm/file_io.h"

namespace nimble::bench {

namespace {

constexpr int kRegression = 1;
// A timing the runs could not decide (too few or too noisy): neither pass nor fail.
constexpr int kInconclusive = 3;  // 2 is CLI11's for a usage error

struct ReportCommand {
  std::string db = "results.db";
  std::string out = "report";
  reports::RunFilter filter;
};

struct GateCommand {
  std::string baseline = "results/baseline.db";
  std::string current = "results.db";
  double max_regression_percent = 5;
  double alpha = 0.05;
  std::vector<std::string> metrics;
  bool update_baseline = false;
  bool prune = false;
  std::string reason;
};

// Reading must not create: a mistyped path is an error, not an empty report.
std::unique_ptr<ResultsDb> OpenExisting(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) throw Error(path + ": no such results database");
  return std::make_unique<ResultsDb>(path);
}

std::string Describe(const reports::RunFilter& filter) {
  std::string text;
  const auto add = [&](const std::string& part) { text += (text.empty() ? "" : ", ") + part; };
  if (!filter.run_ids.empty()) {
    std::string ids;
    for (int64_t id : filter.run_ids) ids += (ids.empty() ? "" : " ") + std::to_string(id);
    add("runs " + ids);
  }
  if (!filter.commit.empty()) add("commit " + filter.commit);
  if (!filter.host.empty()) add("host " + filter.host);
  return "every finished run, aggregated per configuration and host" +
         (text.empty() ? std::string() : ", of " + text);
}

int RunReport(const ReportCommand& command) {
  const auto db = OpenExisting(command.db);
  // Figure 3 comes from dispatch microbenchmarks; every other table from runs.
  reports::RunFilter filter = command.filter;
  filter.kinds = {"run", "microbench"};
  const std::vector<reports::SelectedRun> runs = reports::SelectRuns(*db, filter);
  const reports::Report report = reports::BuildReport(runs, command.db, Describe(command.filter));
  std::filesystem::create_directories(command.out);
  const std::filesystem::path out(command.out);
  WriteFileText((out / "report.md").string(), reports::RenderMarkdown(report));
  WriteFileText((out / "index.html").string(), reports::RenderHtml(report));
  std::cout << "wrote " << (out / "report.md").string() << " and " << (out / "index.html").string()
            << " from " << runs.size() << " runs (" << report.sources.size() << " cited)\n";
  return 0;
}

int RunGate(const GateCommand& command) {
  const auto current = OpenExisting(command.current);
  const std::vector<reports::SelectedRun> current_runs = reports::SelectRuns(*current, {});
  if (command.update_baseline) {
    const int64_t copied = reports::UpdateBaseline(command.baseline, current_runs, command.current,
                                                   command.reason, command.prune);
    std::cout << "baseline " << command.baseline << ": " << copied << " runs from "
              << command.current << " (" << command.reason << ")\n";
    return 0;
  }
  const auto baseline = OpenExisting(command.baseline);
  reports::GateOptions options{.max_regression = command.max_regression_percent / 100,
                               .metrics = command.metrics,
                               .alpha = command.alpha};
  const reports::GateResult result =
      reports::Gate(reports::SelectRuns(*baseline, {}), current_runs, options);
  std::cout << reports::FormatGate(result, options);
  if (result.failed()) return kRegression;
  return result.inconclusive() ? kInconclusive : 0;
}

}  // namespace

std::vector<std::pair<CLI::App*, CommandRunner>> AddReportCommands(CLI::App& app) {
  std::vector<std::pair<CLI::App*, CommandRunner>> commands;

  auto report = std::make_shared<ReportCommand>();
  CLI::App* report_command = app.add_subcommand(
      "report", "Write the paper's tables from results.db: DIR/report.md and DIR/index.html");
  report_command->add_option("--db", report->db, "The results database")->capture_default_str();
  report_command->add_option("--out", report->out, "The directory to write")->capture_default_str();
  report_command->add_option("--run-id", report->filter.run_ids, "Only these runs");
  report_command->add_option("--commit", report->filter.commit,
                             "Only runs of commits starting with this");
  report_command->add_option("--host", report->filter.host, "Only runs on this host");
  commands.emplace_back(report_command, [report] { return RunReport(*report); });

  auto gate = std::make_shared<GateCommand>();
  CLI::App* gate_command = app.add_subcommand(
      "gate",
      "Compare results.db with a baseline, like with like; exit 1 on a regression past the "
      "threshold or a figure missing from the current runs, 3 when a timing's runs are too few "
      "or too noisy to decide");
  gate_command->add_option("--baseline", gate->baseline, "The baseline database")
      ->capture_default_str();
  gate_command->add_option("--current", gate->current, "The database to check")
      ->capture_default_str();
  gate_command
      ->add_option("--max-regression", gate->max_regression_percent,
                   "Percent a lower-is-better figure may grow (e.g. 5 or 5%)")
      ->transform([](std::string value) {
        if (!value.empty() && value.back() == '%') value.pop_back();
        return value;
      })
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str();
  gate_command->add_option("--metrics", gate->metrics,
                           "Figures to gate (default: the deterministic ones: allocations, "
                           "bytes, VM instructions, peak memory); a timing is tested over all "
                           "the runs of each side (Mann-Whitney U)");
  gate_command
      ->add_option("--alpha", gate->alpha,
                   "A timing's test: the two-sided p-value below which the sides differ")
      ->check(CLI::Range(0.0001, 0.5))
      ->capture_default_str();
  gate_command->add_flag("--update-baseline", gate->update_baseline,
                         "Replace the baseline's runs with the current ones (needs --reason)");
  gate_command->add_flag("--prune", gate->prune,
                         "With --update-baseline: also drop the baseline's runs on the current "
                         "runs' hosts that they do not measure again");
  gate_command->add_option("--reason", gate->reason,
                           "Why the baseline changes (recorded in its baseline_updates table)");
  commands.emplace_back(gate_command, [gate] { return RunGate(*gate); });
  return commands;
}

}  // namespace nimble::bench
