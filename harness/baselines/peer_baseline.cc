#include "harness/baselines/peer_baseline.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "harness/agent/child_process.h"
#include "harness/baselines/peer_bench_py.h"
#include "harness/baselines/peer_dynet_py.h"
#include "harness/baselines/peer_mxnet_py.h"
#include "harness/baselines/peer_onnxruntime_py.h"
#include "harness/baselines/peer_openvino_py.h"
#include "harness/baselines/peer_pytorch_py.h"
#include "harness/baselines/peer_tensorflow_py.h"
#include "harness/baselines/peer_tvm_py.h"
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
// The protocol and its plug-ins, written into each work directory.
constexpr std::pair<const char*, const char*> kPeerScripts[] = {
    {"peer_bench.py", kPeerBenchScript},
    {"peer_pytorch.py", kPeerPytorchScript},
    {"peer_onnxruntime.py", kPeerOnnxruntimeScript},
    {"peer_openvino.py", kPeerOpenvinoScript},
    {"peer_tensorflow.py", kPeerTensorflowScript},
    {"peer_mxnet.py", kPeerMxnetScript},
    {"peer_tvm.py", kPeerTvmScript},
    {"peer_dynet.py", kPeerDynetScript},
};
constexpr const char* kNoOnnxTreeLstm = "the model recurses over a tree (no ONNX export)";

// A peer framework as `nimble-bench baseline` knows it: what the coordinator
// queues without asking Python, and why a model has no baseline.
struct PeerFramework {
  std::string name;       // --framework and peer_NAME.py
  std::string display;    // in messages
  std::string module;     // what its interpreter must import
  bool runs_onnx_export;  // the run needs model.onnx, exported under PyTorch first
  std::map<std::string, std::vector<std::string>> variants;  // per model, in timing order
  std::map<std::string, std::string> why_not;                // per model without a baseline
};

const std::vector<PeerFramework>& Frameworks() {
  static const std::vector<PeerFramework> frameworks = {
      {"pytorch",
       "PyTorch",
       "torch",
       false,
       {{"lstm", {"native", "mv_script"}},
        {"treelstm", {"eager_recursive", "script_iter"}},
        {"bert", {"eager", "nn_fastpath"}}},
       {}},
      {"onnxruntime",
       "ONNX Runtime",
       "onnxruntime",
       true,
       {{"lstm", {"onnxruntime"}}, {"bert", {"onnxruntime"}}},
       {{"treelstm", kNoOnnxTreeLstm}}},
      {"openvino",
       "OpenVINO",
       "openvino",
       true,
       {{"lstm", {"f32", "default"}}, {"bert", {"f32", "default"}}},
       {{"treelstm", kNoOnnxTreeLstm}}},
      {"tensorflow",
       "TensorFlow",
       "tensorflow",
       false,
       {{"lstm", {"keras_function"}},
        {"treelstm", {"while_loop", "eager_recursive"}},
        {"bert", {"function", "xla"}}},
       {}},
      {"mxnet",
       "MXNet",
       "mxnet",
       false,
       {{"lstm", {"gluon", "gluon_hybrid"}}, {"bert", {"gluon_hybrid"}}},
       {{"treelstm", "the paper measured MXNet on LSTM and BERT only"}}},
      {"tvm",
       "TVM",
       "tvm",
       true,
       {{"bert", {"relax_vm"}}},
       {{"lstm", "TVM 0.27's Relax ONNX importer has no LSTM operator"},
        {"treelstm", kNoOnnxTreeLstm}}},
      {"dynet",
       "DyNet",
       "dynet",
       false,
       {{"lstm", {"vanilla_lstm"}}, {"treelstm", {"recursive"}}},
       {{"bert", "the talk measured DyNet on LSTM and Tree-LSTM only"}}},
  };
  return frameworks;
}

const PeerFramework& FindFramework(const std::string& name) {
  for (const PeerFramework& framework : Frameworks()) {
    if (framework.name == name) return framework;
  }
  throw Error("unknown framework '" + name + "' (" + JoinStrings(PeerFrameworks(), ", ") + ")");
}

std::string ModelName(const std::string& model) {
  if (model == "lstm") return "LSTM";
  if (model == "treelstm") return "Tree-LSTM";
  if (model == "bert") return "BERT";
  return model;
}

// An interpreter's import probe takes seconds (TensorFlow's the most).
constexpr double kProbeTimeoutS = 600;

agent::ChildResult RunPython(const std::string& python, const std::vector<std::string>& args,
                             double timeout_s = kProbeTimeoutS) {
  std::vector<std::string> argv = {python};
  argv.insert(argv.end(), args.begin(), args.end());
  agent::ChildOptions options;
  options.timeout_s = timeout_s;
  return agent::RunChild(argv, options);
}

bool Imports(const std::string& python, const std::string& module) {
  return RunPython(python, {"-c", "import " + module}).ok();
}

std::string FindPython(const PeerFramework& framework, const PeerOptions& options) {
  if (!options.python.empty()) return options.python;
  const std::string installed = PeersDir() + "/" + framework.name + "/bin/python";
  if (access(installed.c_str(), X_OK) == 0) return installed;
  if (framework.name == "pytorch") return kSystemPython;
  for (const char* candidate : {"python3", kSystemPython}) {
    if (Imports(candidate, framework.module)) return candidate;
  }
  throw Error(framework.display + " is not installed: there is no " + installed +
              ", and neither python3 on PATH nor /usr/bin/python3 imports " + framework.module +
              " (install it with scripts/install-peers.sh " + framework.name +
              ", or name an interpreter with --python)");
}

// Runs peer_bench.py COMMAND for at most `timeout_s`; its stdout, or an
// error with its last stderr line.
std::string RunPeerScript(const std::string& python, const bench::ScratchDir& dir,
                          const std::string& command, double timeout_s) {
  const agent::ChildResult result =
      RunPython(python, {dir.File("peer_bench.py"), command, "--workdir", dir.File("")}, timeout_s);
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

std::vector<PeerResult> ParseResults(const std::string& out,
                                     const std::vector<std::string>& expected_variants) {
  std::vector<PeerResult> results;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    try {
      const nlohmann::json json = nlohmann::json::parse(line);
      PeerResult result{json.at("variant").get<std::string>(),
                        json.at("version").get<std::string>(),
                        json.value("omp_wait_policy", std::string()),
                        json.value("configuration", nlohmann::json::object()),
                        {}};
      if (!result.configuration.is_object()) {
        throw Error("baseline: peer_bench.py's configuration is not an object: " +
                    line.substr(0, 200));
      }
      if (std::find(expected_variants.begin(), expected_variants.end(), result.variant) ==
          expected_variants.end()) {
        throw Error("baseline: peer_bench.py timed variant '" + result.variant + "', not one of " +
                    JoinStrings(expected_variants, ", "));
      }
      for (const auto& [name, value] : json.at("figures").items()) {
        const bool count = name == "sentences" || name == "tokens";
        const bool seconds = name.size() > 2 && name.ends_with("_s");
        result.measurements.push_back({name, value.get<double>(),
                                       count                     ? "count"
                                       : name == "max_abs_error" ? "abs"
                                       : seconds                 ? "s"
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

std::vector<std::string> PeerFrameworks() {
  std::vector<std::string> names;
  for (const PeerFramework& framework : Frameworks()) names.push_back(framework.name);
  return names;
}

std::string PeersDir() {
  if (const char* dir = std::getenv("NIMBLE_PEERS_DIR"); dir && *dir) return dir;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "") + "/.local/share/nimble/peers";
}

std::vector<std::string> InstalledPeers() {
  std::vector<std::string> installed;
  for (const PeerFramework& framework : Frameworks()) {
    try {
      const std::string python = FindPython(framework, PeerOptions{});
      // FindPython names Debian's interpreter for PyTorch without importing it.
      if (python != kSystemPython || Imports(python, framework.module)) {
        installed.push_back(framework.name);
      }
    } catch (const Error&) {
    }
  }
  return installed;
}

std::vector<std::string> PeerVariants(const std::string& framework, const std::string& model) {
  for (const PeerFramework& known : Frameworks()) {
    if (known.name != framework) continue;
    const auto variants = known.variants.find(model);
    return variants == known.variants.end() ? std::vector<std::string>{} : variants->second;
  }
  return {};
}

std::vector<PeerResult> RunPeerBaseline(const bench::BenchOptions& bench,
                                        const PeerOptions& options,
                                        const bench::Progress& progress) {
  const PeerFramework& framework = FindFramework(options.framework);
  if (const auto why = framework.why_not.find(bench.model); why != framework.why_not.end()) {
    throw Error(framework.display + " has no " + ModelName(bench.model) +
                " baseline: " + why->second);
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
  const std::string python = FindPython(framework, options);
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
                         {"time_limit_s", options.time_limit_s},
                         {"device", on_gpu ? "cuda" : "cpu"}};
  if (!options.variants.empty()) spec["variants"] = options.variants;
  WriteFileText(dir.File("spec.json"), spec.dump());
  for (const auto& [name, text] : kPeerScripts) WriteFileText(dir.File(name), text);

  progress(options.framework, 0, 1);
  if (framework.runs_onnx_export) {
    RunPeerScript(kSystemPython, dir, "export", options.time_limit_s);
  }
  std::vector<PeerResult> results =
      ParseResults(RunPeerScript(python, dir, "run", options.time_limit_s),
                   options.variants.empty() ? known : options.variants);
  progress(options.framework, 1, 1);
  return results;
}

}  // namespace nimble::baselines
