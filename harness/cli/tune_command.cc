#include "harness/cli/tune_command.h"

#include <unistd.h>

#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>

#include "harness/bench/fixed_text.h"
#include "harness/bench/host_info.h"
#include "harness/cli/progress_bar.h"
#include "harness/cli/run_command.h"
#include "harness/protocol/auth.h"
#include "harness/protocol/tls.h"
#include "harness/tuning/tuner.h"
#include "nimble/compiler/backend/kernel_tuning.h"
#include "nimble/vm/error.h"
#include "nimble/vm/thread_pool.h"

namespace nimble::bench {
namespace {

struct TuneCommand {
  RunCommand model;  // the model and its sizes; --target
  backend::TuneOptions tune;
  double task_timeout_s = 300;
  std::string database = backend::DefaultTuningDatabase();
  std::string site_json;  // an agent's child: this one site instead of a model's
  bool json = false;
  bool record_json = false;  // an agent's child: print the result, keep the database local
  std::string coordinator;
  std::string secret_file;
  std::string tls_ca;
};

std::string Summary(const TuneCommand& command, const std::vector<tuning::SiteOutcome>& outcomes) {
  std::ostringstream out;
  out << "tuned " << outcomes.size() << (outcomes.size() == 1 ? " site" : " sites") << " of "
      << command.model.bench.model << " for " << command.tune.target << " into " << command.database
      << "\n";
  for (const tuning::SiteOutcome& outcome : outcomes) {
    out << "  " << outcome.site.key.op << " " << outcome.site.key.shapes;
    if (!outcome.error.empty()) {
      out << "  failed: " << outcome.error << "\n";
      continue;
    }
    out << "  -> " << outcome.tuned.kernel << " (" << Fixed(outcome.tuned.mean_relative, 3)
        << "x the fastest on average; best generated: "
        << (outcome.tuned.generated.empty() ? "none" : outcome.tuned.generated) << "), "
        << outcome.tuned.configurations << " configurations, " << outcome.measured
        << " measured now, " << outcome.failed << " failed, on " << outcome.host.host << " ("
        << outcome.host.threads << " threads)\n";
  }
  return out.str();
}

std::string SummaryJson(const std::vector<tuning::SiteOutcome>& outcomes) {
  tuning::Json sites = tuning::Json::array();
  for (const tuning::SiteOutcome& outcome : outcomes) {
    sites.push_back({{"site", tuning::ToJson(outcome.site)},
                     {"host", outcome.host.host},
                     {"threads", outcome.host.threads},
                     {"kernel", outcome.tuned.kernel},
                     {"generated", outcome.tuned.generated},
                     {"mean_relative", outcome.tuned.mean_relative},
                     {"configurations", outcome.tuned.configurations},
                     {"measured", outcome.measured},
                     {"failed", outcome.failed},
                     {"error", outcome.error}});
  }
  return tuning::Json{{"sites", sites}}.dump(2) + "\n";
}

int RunTune(TuneCommand command) {
  ApplySizes(command.model);
  command.tune.target = command.model.bench.target;
  // The model compiles as later runs will: its packing choices come from,
  // and go to, the same database.
  command.model.bench.tuning_database = command.database;
  backend::CheckTuneOptions(command.tune);
  if (command.task_timeout_s <= 0) throw Error("--task-timeout must be positive");
  if (command.model.threads > 0) {
    // Read once, when the pool is first used: set it before anything runs.
    setenv("NIMBLE_NUM_THREADS", std::to_string(command.model.threads).c_str(), 1);
  }
  std::vector<backend::TunableSite> sites;
  if (!command.site_json.empty()) {
    try {
      sites.push_back(tuning::SiteFromJson(tuning::Json::parse(command.site_json)));
    } catch (const tuning::Json::exception& error) {
      throw Error(std::string("--site-json: ") + error.what());
    }
  } else {
    if (command.model.bench.model.empty()) throw Error("tune needs --model (lstm, treelstm, bert)");
    sites = tuning::ModelSites(command.model.bench);
  }
  backend::TuningDatabase database(command.database);
  std::vector<tuning::SiteOutcome> outcomes;
  ProgressBar bar(!command.json && !command.record_json && isatty(STDERR_FILENO));
  const backend::TuneProgress progress = [&](const std::string& phase, size_t done, size_t total) {
    bar(phase, done, total);
  };
  if (!command.coordinator.empty()) {
    protocol::Client client(command.coordinator, protocol::ReadSecretFile(command.secret_file),
                            command.tls_ca.empty() ? nullptr : protocol::ClientTls(command.tls_ca));
    outcomes = tuning::TuneViaCoordinator(client, sites, command.tune, command.task_timeout_s,
                                          database, progress);
  } else {
    // Timings under an emulator would be the emulator's.
    const HostInfo host = DescribeHost();
    CheckTargetRunsHere(command.tune.target, host, /*emulated=*/false);
    if (host.emulated) throw Error("tune: this host is emulated; timings would be the emulator's");
    const int threads = ThreadPool::Global().num_threads();
    const backend::TaskRunner run =
        tuning::ChildTaskRunner(SelfExecutable(), threads, command.task_timeout_s);
    for (const backend::TunableSite& site : sites) {
      tuning::HereResult result =
          tuning::TuneHere(site, command.tune, threads, database, run, progress);
      if (command.record_json) {
        // An agent's child: everything the site has on this host goes back.
        std::cout << tuning::Json{{"tune", tuning::ToJson(result)}}.dump() << "\n";
        return 0;
      }
      outcomes.push_back(std::move(result.outcome));
    }
  }
  std::cout << (command.json ? SummaryJson(outcomes) : Summary(command, outcomes));
  for (const tuning::SiteOutcome& outcome : outcomes) {
    if (!outcome.error.empty()) return 1;
  }
  return 0;
}

int RunTuneTask() {
  const std::string input{std::istreambuf_iterator<char>(std::cin), {}};
  backend::TuningTask task;
  try {
    task = tuning::TaskFromJson(tuning::Json::parse(input));
  } catch (const tuning::Json::exception& error) {
    throw Error(std::string("tune-task: its input is not a task: ") + error.what());
  }
  tuning::Json records = tuning::Json::array();
  for (const backend::TuningRecord& record : backend::MeasureTuningTask(task)) {
    records.push_back(tuning::ToJson(record));
  }
  std::cout << tuning::Json{{"records", records}}.dump() << "\n";
  return 0;
}

}  // namespace

std::vector<std::pair<CLI::App*, CommandRunner>> AddTuneCommands(CLI::App& app) {
  auto tune = std::make_shared<TuneCommand>();
  CLI::App* command = app.add_subcommand(
      "tune", "Tune the generated matrix products of a model on this host or on agents");
  RunCommand& model = tune->model;
  command->add_option("--model", model.bench.model, "The model whose sites are tuned")
      ->check(CLI::IsMember({"lstm", "treelstm", "bert"}));
  command->add_option("--layers", model.layers, "LSTM: 1 or 2; BERT: default 12")
      ->check(CLI::Range(1, 24));
  command->add_option("--hidden-size", model.hidden_size, "Override the model's hidden size")
      ->check(CLI::Range(1, 8192));
  command->add_option("--heads", model.heads, "BERT: override the attention heads")
      ->check(CLI::Range(1, 64));
  command->add_option("--ffn-size", model.ffn_size, "BERT: override the feed-forward size")
      ->check(CLI::Range(1, 65536));
  command->add_option("--target", model.bench.target, "The CPU target (the host's, or the agents')")
      ->check(CLI::IsMember({"intel", "arm"}))
      ->capture_default_str();
  command
      ->add_option("--trials", tune->tune.trials,
                   "Template configurations measured at the representative size (0: all)")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  command->add_option("--top-k", tune->tune.top_k, "Configurations kept for the other sizes")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  command
      ->add_option("--representative", tune->tune.representative_extent,
                   "The size each `?` is first measured at")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  command->add_option("--extents", tune->tune.extents, "The sizes the top-k are compared at")
      ->capture_default_str();
  command->add_option("--batch", tune->tune.batch, "Configurations per measuring process")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  command
      ->add_option("--task-timeout", tune->task_timeout_s,
                   "Seconds a measuring process may take before it is killed (its candidates "
                   "are then measured alone, and one that fails alone is recorded as failed)")
      ->capture_default_str();
  command->add_option("--threads", model.threads, "Threads (default: NIMBLE_NUM_THREADS or all)")
      ->check(CLI::Range(1, 1024));
  command
      ->add_option("--tuning-db", tune->database,
                   "The tuning database that records go to and compiles read")
      ->capture_default_str();
  command->add_flag("--json", tune->json, "Print the outcome as JSON");
  command->add_option("--coordinator", tune->coordinator,
                      "Tune on this coordinator's agents of the target (HOST:PORT)");
  command->add_option("--secret-file", tune->secret_file, "With --coordinator: the secret");
  command->add_option("--tls-ca", tune->tls_ca,
                      "With --coordinator: TLS, checking its certificate against this CA");
  command->add_option("--site-json", tune->site_json)->group("");    // an agent's child
  command->add_flag("--record-json", tune->record_json)->group("");  // an agent's child
  auto* task = app.add_subcommand("tune-task", "")->group("");       // tune's child
  return {{command, [tune] { return RunTune(*tune); }}, {task, [] { return RunTuneTask(); }}};
}

}  // namespace nimble::bench
