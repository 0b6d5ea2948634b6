// nimble-bench: measures the models the way the paper does and records every
// figure in results.db (docs/results.md).
//
//   nimble-bench run --model lstm|treelstm|bert [--layers N] [--target intel|arm|nvidia]
//                    [--dataset PATH|synthetic] [--vocab vocab.txt] [--split test]
//                    [--sentences N] [--warmup N] [--repeat N] [--threads N]
//                    [--static-seq-len L] [--weights W.npz] [--db results.db] [--json]
//
// Exit status: 0 on success, 1 on an error (one line on stderr), 2 on bad usage.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "harness/bench/build_info.h"
#include "harness/bench/host_info.h"
#include "harness/bench/model_runner.h"
#include "harness/bench/results_db.h"
#include "nimble/vm/error.h"
#include "nimble/vm/thread_pool.h"

namespace nimble::bench {
namespace {

constexpr int kUsageError = 2;

struct RunCommand {
  BenchOptions bench;
  int layers = 0;  // 0: the model's default
  int64_t hidden_size = 0;
  int heads = 0;
  int64_t ffn_size = 0;
  int sentences = 0;
  int threads = 0;
  std::string weights;
  std::string db = "results.db";
  bool json = false;
};

// Default sample counts: the paper's datasets are larger; these keep a run
// on the defaults to a few minutes on two cores.
int DefaultSentences(const std::string& model) {
  if (model == "bert") return 40;
  return model == "treelstm" ? 300 : 200;
}

void ApplySizes(RunCommand& command) {
  BenchOptions& bench = command.bench;
  if (command.layers > 0) {
    bench.lstm.layers = command.layers;
    bench.bert.layers = command.layers;
  }
  if (command.hidden_size > 0) {
    bench.lstm.hidden_size = command.hidden_size;
    bench.treelstm.hidden_size = command.hidden_size;
    bench.bert.hidden_size = command.hidden_size;
  }
  bench.lstm.weights_path = bench.treelstm.weights_path = bench.bert.weights_path = command.weights;
  if (command.heads > 0) bench.bert.heads = command.heads;
  if (command.ffn_size > 0) bench.bert.ffn_size = command.ffn_size;
  bench.dataset.count = command.sentences > 0 ? command.sentences : DefaultSentences(bench.model);
}

// A one-line progress bar on stderr, redrawn in place; only on a terminal.
class ProgressBar {
 public:
  explicit ProgressBar(bool enabled) : enabled_(enabled) {}
  ~ProgressBar() {
    if (drawn_) std::cerr << "\r\033[K" << std::flush;
  }
  void operator()(const std::string& phase, size_t done, size_t total) {
    if (!enabled_ || total == 0) return;
    constexpr size_t kWidth = 30;
    const size_t filled = done * kWidth / total;
    std::cerr << "\r" << std::left << std::setw(12) << phase << " [" << std::string(filled, '#')
              << std::string(kWidth - filled, '.') << "] " << done << "/" << total << "\033[K"
              << std::flush;
    drawn_ = true;
  }

 private:
  bool enabled_;
  bool drawn_ = false;
};

const Measurement* Find(const std::vector<Measurement>& figures, const std::string& name) {
  for (const Measurement& figure : figures) {
    if (figure.name == name) return &figure;
  }
  return nullptr;
}

double Value(const std::vector<Measurement>& figures, const std::string& name) {
  const Measurement* figure = Find(figures, name);
  return figure ? figure->value : 0;
}

// A figure that counts things, printed without decimals.
long long Count(const std::vector<Measurement>& figures, const std::string& name) {
  return std::llround(Value(figures, name));
}

std::string Summary(const RunCommand& command, const RunInfo& info, int64_t run_id,
                    const std::vector<Measurement>& figures) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1);
  out << "nimble-bench " << info.model << " " << info.configuration << "\n"
      << "  data           " << info.dataset << " (" << info.split << "), "
      << Count(figures, "sentences") << " sentences, " << Count(figures, "tokens") << " tokens\n"
      << "  host           " << info.cpu_model << ", " << info.threads << " threads, target "
      << info.target << "\n"
      << "  us/token       " << Value(figures, "us_per_token") << "\n"
      << "  latency (us)   mean " << Value(figures, "latency_mean") << ", p50 "
      << Value(figures, "latency_p50") << ", p90 " << Value(figures, "latency_p90") << ", p99 "
      << Value(figures, "latency_p99") << "\n"
      << "  kernels/others " << 100 * Value(figures, "kernel_fraction") << "% / "
      << 100 * (1 - Value(figures, "kernel_fraction")) << "% ("
      << Value(figures, "kernel_us_per_token") << " / " << Value(figures, "other_us_per_token")
      << " us/token)\n"
      << "  allocations    written " << Count(figures, "allocations_written_planned")
      << " planned vs " << Count(figures, "allocations_written_unplanned")
      << " unplanned; executed per sentence "
      << Value(figures, "alloc_storage_per_sentence_planned") << " vs "
      << Value(figures, "alloc_storage_per_sentence_unplanned") << "\n"
      << "  peak bytes     " << Count(figures, "peak_bytes_planned") << " planned vs "
      << Count(figures, "peak_bytes_unplanned") << " unplanned\n";
  if (command.bench.static_seq_len > 0) {
    out << "  at length " << command.bench.static_seq_len << "   dynamic "
        << Value(figures, "fixed_len_dynamic_us_per_token") << " us/token (others "
        << Value(figures, "fixed_len_dynamic_other_us_per_token") << "), static "
        << Value(figures, "fixed_len_static_us_per_token") << " (others "
        << Value(figures, "fixed_len_static_other_us_per_token") << ")\n";
  }
  out << "  recorded       run " << run_id << " in " << command.db << "\n";
  return out.str();
}

std::string Json(const RunInfo& info, int64_t run_id, const std::vector<Measurement>& figures) {
  nlohmann::ordered_json result = {
      {"run_id", run_id},        {"commit", info.commit_id},
      {"model", info.model},     {"configuration", nlohmann::json::parse(info.configuration)},
      {"target", info.target},   {"threads", info.threads},
      {"dataset", info.dataset}, {"split", info.split}};
  nlohmann::ordered_json measurements = nlohmann::ordered_json::object();
  for (const Measurement& figure : figures) {
    measurements[figure.name] = {{"value", figure.value}, {"unit", figure.unit}};
  }
  result["measurements"] = measurements;
  return result.dump(2) + "\n";
}

void Run(RunCommand command) {
  ApplySizes(command);
  if (command.threads > 0) {
    // Read once, when the pool is first used: set it before anything runs.
    setenv("NIMBLE_NUM_THREADS", std::to_string(command.threads).c_str(), 1);
  }
  const HostInfo host = DescribeHost();
  RunInfo info{.commit_id = kBuildCommit,
               .host = host.host,
               .cpu_model = host.cpu_model,
               .cpu_flags = host.cpu_flags,
               .cores = host.cores,
               .threads = ThreadPool::Global().num_threads(),
               .target = command.bench.target,
               .model = command.bench.model,
               .configuration = ConfigurationJson(command.bench),
               .dataset = command.bench.dataset.path,
               .split = command.bench.dataset.split,
               .sentences = command.bench.dataset.count,
               .warmup = command.bench.warmup,
               .repeat = command.bench.repeat};
  ResultsDb db(command.db);
  const int64_t run_id = db.BeginRun(info);
  BenchResult result;
  try {
    ProgressBar bar(!command.json && isatty(STDERR_FILENO));
    result = RunBenchmark(command.bench, [&](const std::string& phase, size_t done, size_t total) {
      bar(phase, done, total);
    });
  } catch (const Error& error) {
    db.FailRun(run_id, error.what());
    throw;
  }
  db.FinishRun(run_id, result.measurements);
  std::cout << (command.json ? Json(info, run_id, result.measurements)
                             : Summary(command, info, run_id, result.measurements));
}

int Main(int argc, char** argv) {
  CLI::App app{"nimble-bench: benchmark Nimble's models into results.db"};
  app.require_subcommand(1);
  RunCommand run;
  CLI::App* run_command =
      app.add_subcommand("run", "Compile a model, run it over a dataset, record the figures");
  run_command->add_option("--model", run.bench.model, "The model")
      ->required()
      ->check(CLI::IsMember({"lstm", "treelstm", "bert"}));
  run_command->add_option("--layers", run.layers, "LSTM: 1 or 2 (default 1); BERT: default 12")
      ->check(CLI::Range(1, 24));
  run_command
      ->add_option("--hidden-size", run.hidden_size,
                   "Override the model's hidden size (for quick runs)")
      ->check(CLI::Range(1, 8192));
  run_command->add_option("--heads", run.heads, "BERT: override the attention heads")
      ->check(CLI::Range(1, 64));
  run_command->add_option("--ffn-size", run.ffn_size, "BERT: override the feed-forward size")
      ->check(CLI::Range(1, 65536));
  run_command->add_option("--target", run.bench.target, "The target hosts")
      ->check(CLI::IsMember({"intel", "arm", "nvidia"}))
      ->capture_default_str();
  run_command
      ->add_option("--dataset", run.bench.dataset.path,
                   "synthetic, an MRPC TSV (lstm, bert), an SST directory or PTB file (treelstm)")
      ->capture_default_str();
  run_command->add_option("--vocab", run.bench.dataset.vocab,
                          "BERT's WordPiece vocab.txt, for a real MRPC file");
  run_command->add_option("--split", run.bench.dataset.split, "train, dev or test")
      ->check(CLI::IsMember({"train", "dev", "test"}))
      ->capture_default_str();
  run_command
      ->add_option("--sentences", run.sentences,
                   "Sentences to run (default: bert 40, lstm 200, treelstm 300)")
      ->check(CLI::Range(1, 1000000));
  run_command->add_option("--warmup", run.bench.warmup, "Untimed runs first")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  run_command->add_option("--repeat", run.bench.repeat, "Timed passes over the sentences")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  run_command->add_option("--threads", run.threads, "Threads (default: NIMBLE_NUM_THREADS or all)")
      ->check(CLI::Range(1, 1024));
  run_command
      ->add_option("--static-seq-len", run.bench.static_seq_len,
                   "BERT: also time a static program at this length (paper Table 4)")
      ->check(CLI::Range(1, 512));
  run_command->add_option("--weights", run.weights,
                          "The model's weights (.npz, e.g. from nimble export-model) instead of "
                          "seeded ones");
  run_command->add_option("--seed", run.bench.dataset.seed, "Seed of synthetic data and weights")
      ->capture_default_str();
  run_command->add_option("--db", run.db, "The results database")->capture_default_str();
  run_command->add_flag("--json", run.json, "Print the figures as JSON instead of a table");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? 0 : kUsageError;
  }
  run.bench.lstm.seed = run.bench.treelstm.seed = run.bench.bert.seed = run.bench.dataset.seed;
  try {
    Run(run);
  } catch (const std::exception& error) {
    std::string message = error.what();
    for (char& c : message) {
      if (c == '\n') c = ' ';
    }
    std::cerr << "error: " << message << "\n";
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace nimble::bench

int main(int argc, char** argv) {
  return nimble::bench::Main(argc, argv);
}
