#include "harness/cli/microbench_command.h"

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>

#include "harness/bench/dispatch_figures.h"
#include "harness/bench/dispatch_microbench.h"
#include "harness/bench/fixed_text.h"
#include "harness/bench/host_info.h"
#include "harness/bench/results_db.h"
#include "harness/bench/run_record.h"
#include "harness/cli/progress_bar.h"
#include "harness/cli/run_command.h"
#include "nimble/vm/error.h"

namespace nimble::bench {

namespace {

struct DispatchCommand {
  DispatchBenchOptions options;
  std::vector<std::string> shapes;  // INxOUT
  int threads = 0;
  std::string db = "results.db";
  bool json = false;
  bool record_json = false;
};

DenseShape ParseShape(const std::string& text) {
  DenseShape shape;
  char extra = 0;
  if (std::sscanf(text.c_str(), "%ldx%ld%c", &shape.in, &shape.out, &extra) != 2) {
    throw CLI::ValidationError("--shapes", "expected INxOUT (e.g. 768x3072), got '" + text + "'");
  }
  return shape;
}

const Measurement* Find(const std::vector<Measurement>& figures, const std::string& name) {
  for (const Measurement& figure : figures) {
    if (figure.name == name) return &figure;
  }
  return nullptr;
}

// Per shape: the static time, then each degree's relative latency (worst).
std::string Summary(const DispatchCommand& command, const RunInfo& info, int64_t run_id,
                    const std::vector<Measurement>& figures) {
  const DispatchBenchOptions& options = command.options;
  std::ostringstream out;
  out << "dispatch microbenchmark on " << info.host << " (" << info.cpu_model << "), "
      << info.threads << (info.threads == 1 ? " thread: " : " threads: ") << options.lengths.size()
      << " lengths (" << options.lengths.front() << ".." << options.lengths.back() << "), "
      << options.rounds << " rounds\n"
      << "  latency relative to static codegen, mean over the lengths (worst)\n";
  for (const DenseShape& shape : options.shapes) {
    const Measurement* base = Find(figures, DispatchFigureName(shape.in, shape.out, 0, "us"));
    out << "  " << DenseShapeName(shape.in, shape.out) << "  static "
        << (base ? Fixed(base->value, 1) : "?") << " us";
    for (int degree : options.degrees) {
      const Measurement* mean =
          Find(figures, DispatchFigureName(shape.in, shape.out, degree, "relative"));
      const Measurement* worst =
          Find(figures, DispatchFigureName(shape.in, shape.out, degree, "worst_relative"));
      out << ", dispatch/" << degree << " " << (mean ? Fixed(mean->value, 3) : "?") << " ("
          << (worst ? Fixed(worst->value, 3) : "?") << ")";
    }
    out << "\n";
  }
  out << "  recorded       run " << run_id << " in " << command.db << "\n";
  return out.str();
}

int RunDispatch(DispatchCommand command) {
  if (!command.shapes.empty()) {
    command.options.shapes.clear();
    for (const std::string& text : command.shapes)
      command.options.shapes.push_back(ParseShape(text));
  }
  CheckDispatchBenchOptions(command.options);
  const HostInfo host = DescribeHost();
  // A latency under an emulator would be the emulator's.
  CheckTargetRunsHere(command.options.target, host, /*emulate=*/false);
  if (host.emulated)
    throw Error("microbench dispatch: this host is emulated; timings would be the emulator's");
  if (command.threads > 0) {
    // Read once, when the pool is first used: set it before anything runs.
    setenv("NIMBLE_NUM_THREADS", std::to_string(command.threads).c_str(), 1);
  }
  RunInfo info = HostRunInfo(host);
  info.target = command.options.target;
  info.model = kDispatchMicrobench;
  info.configuration = DispatchConfigurationJson(command.options);
  info.dataset = "none";
  info.split = "none";
  info.repeat = command.options.rounds;
  info.kind = "microbench";
  if (command.record_json) {
    // An agent's child: the record goes to the agent; no database here.
    const std::vector<Measurement> figures =
        RunDispatchBench(command.options, [](const std::string&, size_t, size_t) {});
    std::cout << ToJson(RunRecord{info, figures}).dump() << "\n";
    return 0;
  }
  ResultsDb db(command.db);
  const int64_t run_id = db.BeginRun(info);
  std::vector<Measurement> figures;
  try {
    ProgressBar bar(!command.json && isatty(STDERR_FILENO));
    figures = RunDispatchBench(command.options, [&](const std::string& phase, size_t done,
                                                    size_t total) { bar(phase, done, total); });
  } catch (const Error& error) {
    db.FailRun(run_id, error.what());
    throw;
  }
  db.FinishRun(run_id, figures);
  std::cout << (command.json ? RunJson(info, run_id, figures)
                             : Summary(command, info, run_id, figures));
  return 0;
}

}  // namespace

std::vector<std::pair<CLI::App*, CommandRunner>> AddMicrobenchCommands(CLI::App& app) {
  CLI::App* microbench = app.add_subcommand(
      "microbench", "Measure one mechanism of the compiler here and record it in results.db");
  microbench->require_subcommand(1);
  auto dispatch = std::make_shared<DispatchCommand>();
  CLI::App* command = microbench->add_subcommand(
      "dispatch", "Symbolic vs static generated dense kernels, dispatch/k (the paper's Figure 3)");
  DispatchBenchOptions& options = dispatch->options;
  command->add_option("--target", options.target, "The host's CPU target")
      ->check(CLI::IsMember({"intel", "arm"}))
      ->capture_default_str();
  command->add_option("--shapes", dispatch->shapes,
                      "Dense shapes INxOUT (default: BERT-base's 768x768 768x3072 3072x768)");
  command->add_option("--lengths", options.lengths, "Row counts (sequence lengths)")
      ->capture_default_str();
  command->add_option("--degrees", options.degrees, "Dispatch degrees k")->capture_default_str();
  command->add_option("--rounds", options.rounds, "Interleaved rounds; a time is their median")
      ->capture_default_str();
  command->add_option("--min-time", options.min_seconds, "Seconds each timing repeats its call for")
      ->capture_default_str();
  command->add_option("--threads", dispatch->threads,
                      "Threads (default: NIMBLE_NUM_THREADS, else all)");
  command->add_option("--db", dispatch->db, "The results database")->capture_default_str();
  command->add_flag("--json", dispatch->json, "Print the figures as JSON instead of a table");
  command->add_flag("--record-json", dispatch->record_json,
                    "Print the run's record as JSON and write no database (agents use it)");
  return {{command, [dispatch] { return RunDispatch(*dispatch); }}};
}

}  // namespace nimble::bench
