// nimble-bench: measures the models the way the paper does and records every
// figure in results.db (docs/results.md), on this host or on a fleet of
// agents behind a coordinator (docs/harness.md).
//
//   nimble-bench run --model lstm|treelstm|bert [--target intel|arm|nvidia] [--emulate]
//                    [--coordinator HOST:PORT --secret-file F] [model and data options]
//   nimble-bench coordinator --listen HOST:PORT --db results.db --secret-file F
//   nimble-bench agent --coordinator HOST:PORT --secret-file F
//   nimble-bench submit|status --coordinator HOST:PORT --secret-file F ...
//   nimble-bench agents start --via slurm --count N ... | --via ssh HOST... --bundle B | agents stop
//   nimble-bench probe
//   nimble-bench baseline --model M --framework pytorch|onnxruntime|openvino|tensorflow|mxnet|tvm|
//                         dynet [--variant V] [--python PY] [--time-limit S] [model and data
//                         options]
//   nimble-bench report --db results.db --out DIR [--run-id N... | --commit C | --host H]
//   nimble-bench microbench dispatch [--target intel|arm] [--db results.db] [--threads N]
//   nimble-bench tune --model M [--target intel|arm] [--trials N] [--tuning-db F]
//                     [--coordinator HOST:PORT --secret-file F]
//   nimble-bench gate --baseline results/baseline.db --current results.db [--max-regression 5%]
//
// Exit status: 0 on success, 1 on an error (one line on stderr), 2 on bad usage.
#include <CLI/CLI.hpp>
#include <iostream>
#include <string>

#include "harness/baselines/peer_baseline.h"
#include "harness/cli/fleet_commands.h"
#include "harness/cli/microbench_command.h"
#include "harness/cli/report_commands.h"
#include "harness/cli/run_command.h"
#include "harness/cli/tune_command.h"

namespace nimble::bench {
namespace {

constexpr int kUsageError = 2;

// Help and version print as CLI11 does; a usage error is one line, so an
// agent's failure reason (the last line of its child's stderr) names it.
int UsageExit(const CLI::App& app, const CLI::ParseError& error) {
  if (error.get_exit_code() == 0) return app.exit(error);
  std::cerr << "error: " << error.what() << " (see --help)\n";
  return kUsageError;
}

int Main(int argc, char** argv) {
  CLI::App app{"nimble-bench: benchmark Nimble's models into results.db, here or on a fleet"};
  app.require_subcommand(1);
  RunCommand run;
  CLI::App* run_command =
      app.add_subcommand("run", "Compile a model, run it over a dataset, record the figures");
  AddRunOptions(run_command, run);
  run_command->add_option("--db", run.db, "The results database")->capture_default_str();
  run_command->add_flag("--json", run.json, "Print the figures as JSON instead of a table");
  run_command->add_flag("--emulate", run.emulate,
                        "--target arm on a non-ARM host: a correctness run under qemu-aarch64 "
                        "(after scripts/build-arm.sh), recorded as emulated");
  run_command->add_flag("--record-json", run.record_json,
                        "Print the run's record as JSON and write no database (agents use it)");
  run_command->add_flag("--counted-pass", run.counted_pass)->group("");  // RunCounted's child
  run_command->add_option("--coordinator", run.coordinator,
                          "Run it as a job of this coordinator (HOST:PORT) and wait");
  run_command->add_option("--secret-file", run.secret_file, "With --coordinator: the secret");
  run_command->add_option("--tls-ca", run.tls_ca,
                          "With --coordinator: TLS, checking its certificate against this CA");
  RunCommand baseline_run;
  BaselineCommand baseline;
  CLI::App* baseline_command = app.add_subcommand(
      "baseline", "Run the same model, weights and samples in a peer framework here");
  AddRunOptions(baseline_command, baseline_run);
  baseline_command->add_option("--framework", baseline.framework, "The peer")
      ->check(CLI::IsMember(baselines::PeerFrameworks()))
      ->required();
  baseline_command->add_option(
      "--python", baseline.python,
      "The interpreter that has the framework (default: its scripts/install-peers.sh "
      "environment, else found)");
  baseline_command->add_option("--db", baseline_run.db, "The results database")
      ->capture_default_str();
  baseline_command->add_flag("--json", baseline_run.json, "Print the runs as JSON");
  baseline_command->add_option("--variant", baseline.variants,
                               "Time only these variants (default: all the framework's)");
  baseline_command
      ->add_option("--time-limit", baseline.time_limit_s,
                   "Seconds the peer may take; a run whose timed passes would "
                   "end later fails after its first (default: 4 hours)")
      ->check(CLI::PositiveNumber);
  baseline_command->add_flag("--record-json", baseline_run.record_json,
                             "Print each run's record as JSON and write no database (agents)");
  std::vector<std::pair<CLI::App*, CommandRunner>> commands = AddFleetCommands(app);
  for (auto& command : AddReportCommands(app)) commands.push_back(std::move(command));
  for (auto& command : AddMicrobenchCommands(app)) commands.push_back(std::move(command));
  for (auto& command : AddTuneCommands(app)) commands.push_back(std::move(command));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return UsageExit(app, error);
  }
  try {
    if (run_command->parsed()) {
      if (run.bench.model.empty() && run.bench.onnx.empty()) throw CLI::RequiredError("--model");
      if (!run.coordinator.empty() && run.secret_file.empty()) {
        throw CLI::RequiredError("--secret-file (with --coordinator)");
      }
      run.bench.lstm.seed = run.bench.treelstm.seed = run.bench.bert.seed = run.bench.dataset.seed;
      return Run(run, run_command);
    }
    if (baseline_command->parsed()) {
      if (baseline_run.bench.model.empty()) throw CLI::RequiredError("--model");
      baseline_run.bench.lstm.seed = baseline_run.bench.treelstm.seed =
          baseline_run.bench.bert.seed = baseline_run.bench.dataset.seed;
      return RunBaseline(baseline_run, baseline);
    }
    for (const auto& [command, runner] : commands) {
      if (command->parsed()) return runner();
    }
    return kUsageError;
  } catch (const CLI::ParseError& error) {
    return UsageExit(app, error);
  } catch (const std::exception& error) {
    std::string message = error.what();
    for (char& c : message) {
      if (c == '\n') c = ' ';
    }
    std::cerr << "error: " << message << "\n";
    return 1;
  }
}

}  // namespace
}  // namespace nimble::bench

int main(int argc, char** argv) {
  return nimble::bench::Main(argc, argv);
}
