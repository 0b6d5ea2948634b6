#include "harness/cli/run_command.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "harness/baselines/peer_baseline.h"
#include "harness/bench/build_info.h"
#include "harness/bench/emulation.h"
#include "harness/bench/host_info.h"
#include "harness/bench/results_db.h"
#include "harness/bench/run_record.h"
#include "harness/cli/callgrind.h"
#include "harness/cli/dim_bounds.h"
#include "harness/cli/progress_bar.h"
#include "harness/protocol/auth.h"
#include "harness/protocol/client.h"
#include "harness/protocol/messages.h"
#include "harness/protocol/tls.h"
#include "nimble/compiler/backend/kernel_tuning.h"
#include "nimble/compiler/backend/pipeline.h"
#include "nimble/compiler/support/sqlite_util.h"
#include "nimble/vm/device.h"
#include "nimble/vm/error.h"
#include "nimble/vm/thread_pool.h"

namespace nimble::bench {

namespace {

// Default sample counts: the paper's datasets are larger; these keep a run
// on the defaults to a few minutes on two cores.
int DefaultSentences(const std::string& model) {
  if (model == "bert") return 40;
  return model == "treelstm" ? 300 : 200;
}

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

}  // namespace

std::string BuildIdentity() {
  std::string identity = kBuildCommit;
  const std::vector<std::string> disabled = backend::DisabledPasses();
  for (size_t i = 0; i < disabled.size(); ++i) {
    identity += (i == 0 ? "+disabled:" : ",") + disabled[i];
  }
  return identity;
}

RunInfo HostRunInfo(const HostInfo& host) {
  RunInfo info;
  info.started_at = sqlite::NowUtc();
  info.commit_id = BuildIdentity();
  info.host = host.host;
  info.cpu_model = host.cpu_model;
  info.cpu_flags = host.cpu_flags;
  info.cores = host.cores;
  info.threads = ThreadPool::Global().num_threads();
  info.arch = host.arch;
  info.emulated = host.emulated;
  info.emulator = host.emulator;
  return info;
}

namespace {

// The help group of AddRunOptions' options: the ones a job forwards.
constexpr const char* kRunOptionsGroup = "Model, data and protocol";

// Runs `command` as a job of its coordinator, following it until it ends.
int RunViaCoordinator(const RunCommand& command, const CLI::App* cli) {
  protocol::Client client(command.coordinator, protocol::ReadSecretFile(command.secret_file),
                          command.tls_ca.empty() ? nullptr : protocol::ClientTls(command.tls_ca));
  protocol::JobSpec spec;
  spec.kind = "run";
  spec.target = command.bench.target;
  spec.options = {{"args", ForwardedRunArgs(cli)}};
  spec.allow_emulated = command.emulate;
  const protocol::Json submitted =
      client.Request({{"type", "submit"}, {"jobs", {protocol::ToJson(spec)}}});
  const int64_t job_id = submitted.at("job_ids").at(0).get<int64_t>();
  const bool terminal = !command.json && isatty(STDERR_FILENO);
  std::cerr << "submitted job " << job_id << " to " << command.coordinator << std::endl;
  std::string last;
  while (true) {
    const protocol::Json job =
        client.Request({{"type", "jobs"}, {"job_ids", {job_id}}}).at("jobs").at(0);
    const std::string state = job.at("state").get<std::string>();
    if (state == "done") {
      const RunRecord record = RunRecordFromJson(job.at("run"));
      if (terminal) std::cerr << "\r\033[K" << std::flush;
      std::cout << (command.json
                        ? RunJson(record.info, job.at("run_id"), record.measurements)
                        : RunSummary(command, record.info, job.at("run_id"), record.measurements));
      return 0;
    }
    if (state == "failed" || state == "unknown") {
      if (terminal) std::cerr << "\r\033[K" << std::flush;
      throw Error("job " + std::to_string(job_id) + " " + state + ": " +
                  job.value("error", std::string()));
    }
    const std::string now = state +
                            (job.value("agent", std::string()).empty()
                                 ? ""
                                 : " on agent " + job["agent"].get<std::string>()) +
                            ", attempt " + std::to_string(job.value("attempts", 0));
    if (terminal && now != last)
      std::cerr << "\rjob " << job_id << ": " << now << "\033[K" << std::flush;
    last = now;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

// `--emulate` on a host that is not ARM: the cross-built aarch64
// nimble-bench runs the same command under qemu-aarch64 and records it.
int RunEmulated(const RunCommand& command, const CLI::App* cli) {
  std::vector<std::string> args = {"run"};
  const std::vector<std::string> forwarded = ForwardedRunArgs(cli);
  args.insert(args.end(), forwarded.begin(), forwarded.end());
  args.insert(args.end(), {"--target", "arm", "--emulate", "--db", command.db});
  if (command.json) args.push_back("--json");
  if (command.record_json) args.push_back("--record-json");
  return RunUnderEmulator(FindArmEmulator(), args);
}

// The run as this host produces it, before its figures exist.
RunInfo LocalRunInfo(const RunCommand& command, const HostInfo& host) {
  RunInfo info = HostRunInfo(host);
  info.target = command.bench.target;
  info.model = command.bench.model;
  info.configuration = ConfigurationJson(command.bench);
  info.dataset = command.bench.dataset.path;
  info.split = command.bench.dataset.split;
  info.sentences = command.bench.dataset.count;
  info.warmup = command.bench.warmup;
  info.repeat = command.bench.repeat;
  // A GPU run names its GPU: "no CUDA device" here, before anything is recorded.
  if (info.target == "nvidia") info.gpu = DeviceAPI::Get(Device{DeviceType::kCUDA, 0})->Describe();
  return info;
}

// `--count-instructions`: this binary again, under callgrind, runs the
// counted pass (RunCountedPass) on one thread; the run records its
// instruction count, sentences and tokens, and no time (a time under
// callgrind would be the emulator's). Its configuration says
// "counted_by": "callgrind", so it is compared only with runs counted so.
int RunCounted(const RunCommand& command, const CLI::App* cli) {
  if (command.emulate) throw Error("--count-instructions counts native runs, not emulated ones");
  if (command.threads > 1) throw Error("--count-instructions counts one thread (--threads 1)");
  if (command.bench.static_seq_len > 0) {
    throw Error("--count-instructions counts the dynamic program: leave out --static-seq-len");
  }
  if (command.bench.against_native) {
    throw Error("--count-instructions counts one program: leave out --against-native");
  }
  const HostInfo host = DescribeHost();
  CheckTargetRunsHere(command.bench.target, host, /*emulated=*/false);
  std::vector<std::string> argv = {SelfExecutable(), "run"};
  const std::vector<std::string> forwarded = ForwardedRunArgs(cli);
  argv.insert(argv.end(), forwarded.begin(), forwarded.end());
  argv.insert(argv.end(), {"--target", command.bench.target, "--tuning-db",
                           command.bench.tuning_database, "--counted-pass"});
  const InstructionCount count = CountInstructions(argv, {{"NIMBLE_NUM_THREADS", "1"}});
  std::vector<Measurement> figures;
  try {
    const nlohmann::json printed = nlohmann::json::parse(count.out);
    for (const auto& [name, value] : printed.items()) {
      figures.push_back({name, value.get<double>(), "count"});
    }
  } catch (const nlohmann::json::exception& error) {
    throw Error("the counted pass printed something else than its figures: " +
                std::string(error.what()));
  }
  const double instructions = static_cast<double>(count.instructions);
  figures.push_back({"cpu_instructions", instructions, "count"});
  figures.push_back(
      {"cpu_instructions_per_token", instructions / Value(figures, "tokens"), "count"});

  RunInfo info = LocalRunInfo(command, host);
  info.threads = 1;
  nlohmann::ordered_json configuration = nlohmann::ordered_json::parse(info.configuration);
  configuration["counted_by"] = "callgrind";
  info.configuration = configuration.dump();
  if (command.record_json) {
    std::cout << ToJson(RunRecord{info, figures}).dump() << "\n";
    return 0;
  }
  const int64_t run_id = ResultsDb(command.db).RecordRun(info, figures);
  std::cout << (command.json ? RunJson(info, run_id, figures)
                             : RunSummary(command, info, run_id, figures));
  return 0;
}

}  // namespace

std::string SelfExecutable() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) throw Error("cannot find this executable: " + error.message());
  return self;
}

void ApplySizes(RunCommand& command) {
  BenchOptions& bench = command.bench;
  if (!bench.onnx.empty()) {
    if (!bench.model.empty()) throw Error("--onnx and --model name two models: give one");
    bench.model = "onnx";
  }
  if (!command.dim_bounds.empty() && bench.onnx.empty()) {
    throw Error("--dim-bound applies to an --onnx model");
  }
  bench.onnx_dim_bounds = cli::ParseDimBounds(command.dim_bounds);
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

void AddRunOptions(CLI::App* command, RunCommand& run) {
  // Every option of the group is forwarded to an agent's run; --target,
  // added after it, is the job's own.
  command->option_defaults()->group(kRunOptionsGroup);
  command->add_option("--model", run.bench.model, "The model (required for run jobs)")
      ->check(CLI::IsMember({"lstm", "treelstm", "bert"}));
  command->add_option("--onnx", run.bench.onnx,
                      "An ONNX model instead (token ids or word vectors from --dataset, by its "
                      "inputs' names and types)");
  command->add_option("--dim-bound", run.dim_bounds,
                      "With --onnx: NAME=N types the model's input dimension NAME `?<=N`, so "
                      "that storage is planned once for N; repeatable");
  command->add_option("--layers", run.layers, "LSTM: 1 or 2 (default 1); BERT: default 12")
      ->check(CLI::Range(1, 24));
  command
      ->add_option("--hidden-size", run.hidden_size,
                   "Override the model's hidden size (for quick runs)")
      ->check(CLI::Range(1, 8192));
  command->add_option("--heads", run.heads, "BERT: override the attention heads")
      ->check(CLI::Range(1, 64));
  command->add_option("--ffn-size", run.ffn_size, "BERT: override the feed-forward size")
      ->check(CLI::Range(1, 65536));
  command
      ->add_option("--dataset", run.bench.dataset.path,
                   "synthetic, an MRPC TSV (lstm, bert), an SST directory or PTB file (treelstm)")
      ->capture_default_str();
  command->add_option("--vocab", run.bench.dataset.vocab,
                      "BERT's WordPiece vocab.txt, for a real MRPC file");
  command->add_option("--split", run.bench.dataset.split, "train, dev or test")
      ->check(CLI::IsMember({"train", "dev", "test"}))
      ->capture_default_str();
  command
      ->add_option("--sentences", run.sentences,
                   "Sentences to run (default: bert 40, lstm 200, treelstm 300)")
      ->check(CLI::Range(1, 1000000));
  command->add_option("--warmup", run.bench.warmup, "Untimed runs first")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  command->add_option("--repeat", run.bench.repeat, "Timed passes over the sentences")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  command->add_option("--threads", run.threads, "Threads (default: NIMBLE_NUM_THREADS or all)")
      ->check(CLI::Range(1, 1024));
  command
      ->add_option("--static-seq-len", run.bench.static_seq_len,
                   "BERT: also time a static program at this length (paper Table 4)")
      ->check(CLI::Range(1, 512));
  command->add_flag("--against-native", run.bench.against_native,
                    "With --onnx of a BERT: also time the native builder's BERT (the same sizes "
                    "options) on the same sentences, the two in turn pass by pass, and record "
                    "onnx_over_native (the median pass ratio)");
  command->add_flag("!--unbounded-length", run.bench.bert.bounded_length,
                    "BERT: type the length `?`, not `?<=512` (storage planned per length, not "
                    "once for the bound)");
  command->add_option("--weights", run.weights,
                      "The model's weights (.npz, e.g. from nimble export-model) instead of "
                      "seeded ones");
  command->add_option("--seed", run.bench.dataset.seed, "Seed of synthetic data and weights")
      ->capture_default_str();
  command
      ->add_option("--kernels", run.bench.kernels,
                   "As nimble compile: generated, builtin, auto (nn.dense and nn.batch_matmul "
                   "on whichever kernel measures fastest) or library")
      ->check(CLI::IsMember({"auto", "generated", "builtin", "library"}))
      ->capture_default_str();
  command->add_flag("!--no-fusion", run.bench.fuse_ops,
                    "Give every op a kernel of its own (no operator fusion)");
  command
      ->add_option("--precision", run.bench.precision,
                   "fp32, or bf16: dense weights in bfloat16, bf16 products with float32 sums "
                   "(hosts with avx512_bf16); records the largest difference from the fp32 "
                   "program's outputs and, for BERT, the share of pairs whose class changed")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  command->add_flag("--batch-trees", run.bench.batch_trees,
                    "Tree-LSTM: run the nodes of one height as one batch (transform/"
                    "tree_batching.h) instead of one node at a time; recorded as batch_trees");
  command->add_flag("--count-instructions", run.count_instructions,
                    "Count the instructions of one pass with Valgrind's callgrind, one thread "
                    "(slow: a small run); records no times");
  command->option_defaults()->group("Options");
  run.bench.tuning_database = backend::DefaultTuningDatabase();
  command
      ->add_option("--tuning-db", run.bench.tuning_database,
                   "The SQLite file of this host's kernel measurements ('' keeps none)")
      ->capture_default_str();
  command->add_option("--target", run.bench.target, "The target hosts")
      ->check(CLI::IsMember({"intel", "arm", "nvidia"}))
      ->capture_default_str();
}

std::vector<std::string> ForwardedRunArgs(const CLI::App* command) {
  std::vector<std::string> args;
  for (const CLI::Option* option : command->get_options()) {
    const std::string name = option->get_name(/*positional=*/false, /*all_options=*/false);
    if (option->count() == 0 || option->get_group() != kRunOptionsGroup) continue;
    args.push_back(name);
    if (option->get_expected_min() != 0) {  // not a flag: its values follow
      for (const std::string& value : option->results()) args.push_back(value);
    }
  }
  return args;
}

std::string RunSummary(const RunCommand& command, const RunInfo& info, int64_t run_id,
                       const std::vector<Measurement>& figures) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1);
  out << "nimble-bench " << info.model << " " << info.configuration << "\n"
      << "  data           " << info.dataset << " (" << info.split << "), "
      << Count(figures, "sentences") << " sentences, " << Count(figures, "tokens") << " tokens\n"
      << "  host           " << info.host << ": " << info.cpu_model << " (" << info.arch
      << (info.emulated ? ", emulated by " + info.emulator : "") << "), " << info.threads
      << " threads, target " << info.target << "\n";
  if (!info.gpu.empty()) out << "  gpu            " << info.gpu << "\n";
  if (command.count_instructions) {
    // A counted run has no times to show.
    out << "  instructions   " << Count(figures, "cpu_instructions") << " in one pass ("
        << Count(figures, "cpu_instructions_per_token") << " per token), counted by callgrind\n";
  } else {
    out << "  us/token       " << Value(figures, "us_per_token") << "\n"
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
  }
  if (command.bench.static_seq_len > 0) {
    out << "  at length " << command.bench.static_seq_len << "   dynamic "
        << Value(figures, "fixed_len_dynamic_us_per_token") << " us/token (others "
        << Value(figures, "fixed_len_dynamic_other_us_per_token") << "), static "
        << Value(figures, "fixed_len_static_us_per_token") << " (others "
        << Value(figures, "fixed_len_static_other_us_per_token") << "); dynamic / static "
        << std::setprecision(3) << Value(figures, "fixed_len_dynamic_over_static")
        << std::setprecision(1) << " (median of " << command.bench.repeat
        << " interleaved passes)\n";
  }
  if (command.bench.against_native) {
    out << "  against native onnx " << Value(figures, "against_native_onnx_us_per_token")
        << " us/token, native " << Value(figures, "against_native_native_us_per_token")
        << "; onnx / native " << std::setprecision(3) << Value(figures, "onnx_over_native")
        << std::setprecision(1) << " (median of " << command.bench.repeat
        << " interleaved passes)\n";
  }
  out << "  recorded       run " << run_id << " in "
      << (command.coordinator.empty() ? command.db : "the results.db of " + command.coordinator)
      << (info.job_id > 0 ? " (job " + std::to_string(info.job_id) + " on agent " + info.agent + ")"
                          : "")
      << "\n";
  return out.str();
}

std::string RunJson(const RunInfo& info, int64_t run_id, const std::vector<Measurement>& figures) {
  nlohmann::ordered_json result = {
      {"run_id", run_id},         {"commit", info.commit_id},
      {"model", info.model},      {"configuration", nlohmann::json::parse(info.configuration)},
      {"target", info.target},    {"threads", info.threads},
      {"dataset", info.dataset},  {"split", info.split},
      {"host", info.host},        {"arch", info.arch},
      {"emulated", info.emulated}};
  if (info.job_id > 0) {
    result["job_id"] = info.job_id;
    result["agent"] = info.agent;
  }
  nlohmann::ordered_json measurements = nlohmann::ordered_json::object();
  for (const Measurement& figure : figures) {
    measurements[figure.name] = {{"value", figure.value}, {"unit", figure.unit}};
  }
  result["measurements"] = measurements;
  return result.dump(2) + "\n";
}

int Run(RunCommand command, const CLI::App* cli) {
  ApplySizes(command);
  if (!command.coordinator.empty()) return RunViaCoordinator(command, cli);
  if (command.counted_pass) {
    // callgrind's child (RunCounted): the figures it counts, nothing recorded.
    nlohmann::json figures = nlohmann::json::object();
    for (const Measurement& figure : RunCountedPass(command.bench).measurements) {
      figures[figure.name] = figure.value;
    }
    std::cout << figures.dump() << "\n";
    return 0;
  }
  if (command.count_instructions) return RunCounted(command, cli);
  const HostInfo host = DescribeHost();
  if (command.emulate && command.bench.target == "arm" && host.arch != "aarch64") {
    return RunEmulated(command, cli);
  }
  CheckTargetRunsHere(command.bench.target, host, command.emulate);
  if (command.threads > 0) {
    // Read once, when the pool is first used: set it before anything runs.
    setenv("NIMBLE_NUM_THREADS", std::to_string(command.threads).c_str(), 1);
  }
  RunInfo info = LocalRunInfo(command, host);
  if (command.record_json) {
    // An agent's child: the record goes to the agent, which sends it to
    // the coordinator; no database here.
    const BenchResult result =
        RunBenchmark(command.bench, [](const std::string&, size_t, size_t) {});
    std::cout << ToJson(RunRecord{info, result.measurements}).dump() << "\n";
    return 0;
  }
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
  std::cout << (command.json ? RunJson(info, run_id, result.measurements)
                             : RunSummary(command, info, run_id, result.measurements));
  return 0;
}

int RunBaseline(RunCommand command, const BaselineCommand& baseline) {
  if (command.count_instructions) throw Error("baseline: --count-instructions is for runs");
  ApplySizes(command);
  const HostInfo host = DescribeHost();
  CheckTargetRunsHere(command.bench.target, host, /*emulated=*/false);
  const int threads = command.threads > 0 ? command.threads : ThreadPool::Global().num_threads();
  if (command.threads > 0) setenv("NIMBLE_NUM_THREADS", std::to_string(threads).c_str(), 1);
  const RunInfo started = LocalRunInfo(command, host);
  ProgressBar bar(!command.json && !command.record_json && isatty(STDERR_FILENO));
  baselines::PeerOptions peer{.framework = baseline.framework,
                              .python = baseline.python,
                              .threads = threads,
                              .check_samples = 4,
                              .variants = baseline.variants};
  if (baseline.time_limit_s > 0) peer.time_limit_s = baseline.time_limit_s;
  const std::vector<baselines::PeerResult> results = baselines::RunPeerBaseline(
      command.bench, peer,
      [&](const std::string& phase, size_t done, size_t total) { bar(phase, done, total); });
  std::optional<ResultsDb> db;
  if (!command.record_json) db.emplace(command.db);
  nlohmann::ordered_json printed = nlohmann::ordered_json::array();
  for (const baselines::PeerResult& result : results) {
    RunInfo info = started;
    info.framework = baseline.framework;
    nlohmann::ordered_json configuration = nlohmann::ordered_json::parse(info.configuration);
    configuration["variant"] = result.variant;
    configuration["version"] = result.version;
    // Its precision, and a looser tolerance where reduced precision needed one.
    for (const auto& [name, value] : result.configuration.items()) configuration[name] = value;
    // PyTorch's OpenMP pool waits as the policy says, which moves its
    // figures several times over (ONNX Runtime has its own pool).
    if (baseline.framework == "pytorch" && !result.omp_wait_policy.empty()) {
      configuration["omp_wait_policy"] = result.omp_wait_policy;
    }
    // Nimble's compile options do not apply to a peer.
    configuration.erase("kernels");
    configuration.erase("fusion");
    info.configuration = configuration.dump();
    if (command.record_json) {
      std::cout << ToJson(RunRecord{info, result.measurements}).dump() << "\n";
      continue;
    }
    const int64_t run_id = db->RecordRun(info, result.measurements);
    if (command.json) {
      printed.push_back(nlohmann::ordered_json::parse(RunJson(info, run_id, result.measurements)));
    } else {
      const std::string precision = result.configuration.value("precision", std::string("f32"));
      std::cout << baseline.framework << " " << result.variant << " " << result.version
                << (precision == "f32" ? "" : " at " + precision) << ": " << std::fixed
                << std::setprecision(1) << Value(result.measurements, "us_per_token")
                << " us/token over " << Count(result.measurements, "tokens")
                << " tokens (outputs within " << std::scientific << std::setprecision(1)
                << Value(result.measurements, "max_abs_error") << " of Nimble's), run " << run_id
                << " in " << command.db << std::defaultfloat << "\n";
    }
  }
  if (command.json) std::cout << printed.dump(2) << "\n";
  return 0;
}

}  // namespace nimble::bench
