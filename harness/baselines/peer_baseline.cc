#include "harness/baselines/peer_baseline.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "harness/agent/child_process.h"
#include "harness/baselines/peer_bench_py.h"
#include "harness/bench/scratch_dir.h"
#include "nimble/compiler/backend/pipeline.h"
#include "nimble/vm/error.h"
#include "nimble/vm/file_io.h"
#include "nimble/vm/npy.h"
#include "nimble/vm/string_join.h"
#include "nimble/vm/vm.h"

namespace nimble::baselines {

namespace {

// Debian's python3-torch lives in the system interpreter, whatever python3
// comes first on PATH.
constexpr const char* kSystemPython = "/usr/bin/python3";
// Comparing float32 models computed in a different order: Nimble's own
// tests hold its outputs to 1e-4 of PyTorch's on these models.
constexpr double kRelativeTolerance = 1e-3;
constexpr double kAbsoluteTolerance = 1e-4;
constexpr double kChildTimeoutS = 4 * 3600;

agent::ChildResult RunPython(const std::string& python, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {python};
  argv.insert(argv.end(), args.begin(), args.end());
  agent::ChildOptions options;
  options.timeout_s = kChildTimeoutS;
  return agent::RunChild(argv, options);
}

bool Imports(const std::string& python, const std::string& module) {
  return RunPython(python, {"-c", "import " + module}).ok();
}

std::string FindPython(const PeerOptions& options) {
  if (!options.python.empty()) return options.python;
  if (options.framework == "pytorch") return kSystemPython;
  for (const char* candidate : {"python3", kSystemPython}) {
    if (Imports(candidate, "onnxruntime")) return candidate;
  }
  throw Error(
      "ONNX Runtime is not installed: neither python3 on PATH nor /usr/bin/python3 imports "
      "onnxruntime (install it, e.g. python3 -m pip install onnxruntime, or name an "
      "interpreter with --python)");
}

// Runs peer_bench.py COMMAND; its stdout, or an error with its last stderr line.
std::string RunPeerScript(const std::string& python, const bench::ScratchDir& dir,
                          const std::string& command) {
  const agent::ChildResult result =
      RunPython(python, {dir.File("peer_bench.py"), command, "--workdir", dir.File("")});
  if (!result.ok()) {
    throw Error("baseline (" + python + " peer_bench.py " + command + "): " + result.Describe());
  }
  return result.out;
}

// Nimble's outputs on the first samples: what the peer must reproduce.
std::vector<std::pair<std::string, Tensor>> NimbleOutputs(const bench::BenchOptions& bench,
                                                          const ir::IRModule& module,
                                                          const std::vector<bench::Sample>& samples,
                                                          size_t count) {
  backend::CompileOptions options{.target = bench.target};
  options.fuse_ops = bench.fuse_ops;
  options.kernels = bench.kernels;
  options.tuning_database = bench.tuning_database;
  const vm::Executable executable = backend::Compile(module, options);
  vm::VirtualMachine machine(executable);
  std::vector<std::pair<std::string, Tensor>> outputs;
  for (size_t i = 0; i < count; ++i) {
    const Ref<Object> output = machine.Invoke("main", samples[i].args);
    const Tensor tensor = output.as<TensorNode>();
    if (!tensor) throw Error(bench.model + ": @main does not return a tensor");
    outputs.emplace_back("s" + std::to_string(i), tensor);
  }
  return outputs;
}

std::vector<PeerResult> ParseResults(const std::string& out) {
  std::vector<PeerResult> results;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    try {
      const nlohmann::json json = nlohmann::json::parse(line);
      PeerResult result{json.at("variant").get<std::string>(),
                        json.at("version").get<std::string>(),
                        json.value("omp_wait_policy", std::string()),
                        {}};
      for (const auto& [name, value] : json.at("figures").items()) {
        const bool count = name == "sentences" || name == "tokens";
        result.measurements.push_back({name, value.get<double>(),
                                       count                     ? "count"
                                       : name == "max_abs_error" ? "abs"
                                                                 : "us"});
      }
      results.push_back(std::move(result));
    } catch (const nlohmann::json::exception& error) {
      throw Error("baseline: peer_bench.py printed a malformed result (" +
                  std::string(error.what()) + "): " + line.substr(0, 200));
    }
  }
  if (results.empty()) throw Error("baseline: peer_bench.py printed no results");
  return results;
}

}  // namespace

std::vector<std::string> PeerVariants(const std::string& framework, const std::string& model) {
  if (framework == "onnxruntime") {
    return model == "treelstm" ? std::vector<std::string>{} : std::vector<std::string>{framework};
  }
  if (framework != "pytorch") return {};
  if (model == "lstm") return {"native", "mv_script"};
  if (model == "treelstm") return {"eager_recursive", "script_iter"};
  if (model == "bert") return {"eager", "nn_fastpath"};
  return {};
}

std::vector<PeerResult> RunPeerBaseline(const bench::BenchOptions& bench,
                                        const PeerOptions& options,
                                        const bench::Progress& progress) {
  if (options.framework != "pytorch" && options.framework != "onnxruntime") {
    throw Error("unknown framework '" + options.framework + "' (pytorch or onnxruntime)");
  }
  if (options.framework == "onnxruntime" && bench.model == "treelstm") {
    throw Error("ONNX Runtime has no Tree-LSTM baseline: the model recurses over a tree");
  }
  const bool on_gpu = bench.target == "nvidia";
  if (on_gpu && options.framework != "pytorch") {
    throw Error("--target nvidia's peer is pytorch on the GPU; the " + options.framework +
                " baseline runs on the CPU");
  }
  const std::vector<std::string> known = PeerVariants(options.framework, bench.model);
  for (const std::string& variant : options.variants) {
    if (std::find(known.begin(), known.end(), variant) == known.end()) {
      throw Error(options.framework + " has no variant '" + variant + "' for " + bench.model +
                  " (it has " + JoinStrings(known, ", ") + ")");
    }
  }
  const std::string python = FindPython(options);
  const models::Model model = bench::BuildModel(bench);
  const ir::IRModule module = model.Module();
  progress("data", 0, 1);
  const std::vector<bench::Sample> samples = bench::MakeSamples(bench, module);
  if (samples.empty()) throw Error(bench.dataset.path + ": no samples for " + bench.model);
  progress("data", 1, 1);
  const size_t check = std::min(samples.size(), static_cast<size_t>(options.check_samples));

  const bench::ScratchDir dir("nimble_baseline_");
  models::SaveWeights(model, dir.File("weights.npz"));
  std::vector<std::pair<std::string, Tensor>> named;
  std::vector<int64_t> tokens;
  for (size_t i = 0; i < samples.size(); ++i) {
    for (const auto& [name, tensor] : samples[i].named_inputs) {
      named.emplace_back("s" + std::to_string(i) + "_" + name, tensor);
    }
    tokens.push_back(samples[i].tokens);
  }
  named.emplace_back("tokens",
                     TensorNode::FromVector<int64_t>({static_cast<int64_t>(tokens.size())},
                                                     DataType::Int64(), tokens));
  WriteNpz(dir.File("samples.npz"), named);
  progress("nimble", 0, 1);
  WriteNpz(dir.File("expected.npz"), NimbleOutputs(bench, module, samples, check));
  progress("nimble", 1, 1);
  nlohmann::json spec = {{"model", bench.model},
                         {"framework", options.framework},
                         {"threads", options.threads},
                         {"warmup", bench.warmup},
                         {"repeat", bench.repeat},
                         {"heads", bench.bert.heads},
                         {"check", check},
                         {"rtol", kRelativeTolerance},
                         {"atol", kAbsoluteTolerance},
                         {"device", on_gpu ? "cuda" : "cpu"}};
  if (!options.variants.empty()) spec["variants"] = options.variants;
  WriteFileText(dir.File("spec.json"), spec.dump());
  WriteFileText(dir.File("peer_bench.py"), kPeerBenchScript);

  progress(options.framework, 0, 1);
  if (options.framework == "onnxruntime") RunPeerScript(kSystemPython, dir, "export");
  std::vector<PeerResult> results = ParseResults(RunPeerScript(python, dir, "run"));
  progress(options.framework, 1, 1);
  return results;
}

}  // namespace nimble::baselines
