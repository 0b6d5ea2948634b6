#include "harness/bench/model_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>

#include "harness/bench/statistics.h"
#include "nimble/compiler/backend/pipeline.h"
#include "nimble/compiler/ir/constant_bytes.h"
#if NIMBLE_HAVE_ONNX
#include "nimble/compiler/onnx/onnx_import.h"
#endif
#include "nimble/compiler/transform/allocation_stats.h"
#include "nimble/vm/allocator.h"
#include "nimble/vm/error.h"
#include "nimble/vm/kernels/op_kernel.h"
#include "nimble/vm/tensor.h"
#include "nimble/vm/vm.h"

// Optional, like oneDNN: the aarch64 cross build may lack the headers.
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define NIMBLE_HAS_CALLGRIND
#else
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#endif

namespace nimble::bench {

namespace {

using Clock = std::chrono::steady_clock;

// Profiled passes run on at most this many samples: they only need the
// split and the counts, not the whole dataset again.
constexpr size_t kProfiledSamples = 50;

double Microseconds(Clock::duration duration) {
  return std::chrono::duration<double, std::micro>(duration).count();
}

// The value below which `fraction` of the sorted `values` lie (nearest rank).
double Percentile(std::vector<double> values, double fraction) {
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(std::ceil(fraction * values.size()));
  return values[std::min(values.size() - 1, rank == 0 ? 0 : rank - 1)];
}

int64_t TotalTokens(const std::vector<Sample>& samples) {
  int64_t tokens = 0;
  for (const Sample& sample : samples) tokens += sample.tokens;
  return tokens;
}

// Collects the run's figures.
class Figures {
 public:
  void Add(const std::string& name, double value, const std::string& unit) {
    measurements_.push_back({name, value, unit});
  }
  std::vector<Measurement> Take() { return std::move(measurements_); }

 private:
  std::vector<Measurement> measurements_;
};

// Timed passes of `machine` over `samples`: µs/token and per-sample
// latencies (median over passes).
struct Timing {
  double us_per_token = 0;
  std::vector<double> latencies_us;
  std::vector<double> pass_us;  // each timed pass over the samples, in order
};

// A program to time and its inputs.
struct Timed {
  vm::VirtualMachine* machine;
  const std::vector<Sample>* samples;
};

// Times each program on its samples: each runs `warmup` untimed
// invocations, then each timed pass runs every program in turn (A B A B), so
// that a drift of the host's speed falls on all of them alike.
std::vector<Timing> TimePasses(const std::vector<Timed>& programs, int warmup, int repeat,
                               const std::string& phase, const Progress& progress) {
  size_t total = 0;
  for (const Timed& program : programs) {
    total += static_cast<size_t>(warmup) + program.samples->size() * repeat;
  }
  size_t done = 0;
  for (const Timed& program : programs) {
    for (int i = 0; i < warmup; ++i) {
      program.machine->Invoke("main", (*program.samples)[i % program.samples->size()].args);
      progress(phase, ++done, total);
    }
  }
  std::vector<Timing> timings(programs.size());
  std::vector<std::vector<std::vector<double>>> per_sample(programs.size());
  for (size_t m = 0; m < programs.size(); ++m) per_sample[m].resize(programs[m].samples->size());
  for (int pass = 0; pass < repeat; ++pass) {
    for (size_t m = 0; m < programs.size(); ++m) {
      const std::vector<Sample>& samples = *programs[m].samples;
      double pass_total = 0;
      for (size_t s = 0; s < samples.size(); ++s) {
        const Clock::time_point start = Clock::now();
        programs[m].machine->Invoke("main", samples[s].args);
        const double us = Microseconds(Clock::now() - start);
        per_sample[m][s].push_back(us);
        pass_total += us;
        progress(phase, ++done, total);
      }
      timings[m].pass_us.push_back(pass_total);
    }
  }
  for (size_t m = 0; m < programs.size(); ++m) {
    timings[m].us_per_token =
        Median(timings[m].pass_us) / static_cast<double>(TotalTokens(*programs[m].samples));
    for (const std::vector<double>& runs : per_sample[m]) {
      timings[m].latencies_us.push_back(Median(runs));
    }
  }
  return timings;
}

// Whether each of `onnx`'s samples has `native`'s token ids as its first
// input: the two models read the same sentences.
bool SameTokenIds(const std::vector<Sample>& onnx, const std::vector<Sample>& native) {
  if (onnx.size() != native.size()) return false;
  for (size_t i = 0; i < onnx.size(); ++i) {
    const Tensor ids = onnx[i].args.front().as<TensorNode>();
    const Tensor expected = native[i].args.front().as<TensorNode>();
    if (!ids || !ids->dtype().is_int() || ids->shape() != expected->shape()) return false;
    for (int64_t k = 0; k < ids->numel(); ++k) {
      if (LoadElementAsInt64(ids->raw_data(), ids->dtype(), k) !=
          LoadElementAsInt64(expected->raw_data(), expected->dtype(), k)) {
        return false;
      }
    }
  }
  return true;
}

// The median over passes of `a`'s time over `b`'s, pass by pass.
double MedianPassRatio(const Timing& a, const Timing& b) {
  std::vector<double> ratios;
  for (size_t pass = 0; pass < a.pass_us.size() && pass < b.pass_us.size(); ++pass) {
    ratios.push_back(a.pass_us[pass] / b.pass_us[pass]);
  }
  return Median(ratios);
}

// One profiled pass (after one untimed run): the kernel/other split and what
// the VM allocated, per sample.
struct Profile {
  double kernel_fraction = 0;  // model kernels, shape functions excluded
  double shape_func_fraction = 0;
  double alloc_storage_per_sample = 0;
  double device_allocs_per_sample = 0;
  double peak_bytes = 0;      // above what was live before the pass
  double resident_bytes = 0;  // live before the pass
  double instructions_per_sample = 0;
  // Time outside kernels per instruction that is not a kernel call: the VM's
  // own cost of dispatch, allocation, calls and scalar work.
  double other_ns_per_instruction = 0;
};

Profile ProfilePass(const vm::Executable& executable, const std::vector<Sample>& samples) {
  vm::VirtualMachine machine(executable,
                             vm::VMOptions{.devices = {}, .extra_kernels = {}, .profiling = true});
  // Untimed passes first: the pool and this VM's caches (its scalar
  // tensors) then hold what every sample needs, so that the pass below
  // counts steady-state allocations, not this machine's warm-up. One pass is
  // not always enough: since the pool has 64-byte classes, Tree-LSTM's
  // second pass still allocated a buffer (1 in 8 sentences); after two
  // passes, none.
  constexpr int kWarmPasses = 2;
  for (int pass = 0; pass < kWarmPasses; ++pass) {
    for (const Sample& sample : samples) machine.Invoke("main", sample.args);
  }
  machine.profiler()->Reset();
  Allocator* allocator = GetAllocator(Device{DeviceType::kCPU, 0});
  allocator->ResetPeak();
  // What is live before the pass (weights, the samples' inputs, anything
  // else of the process) is not the model's working set: report it apart.
  const size_t resident = allocator->Stats().bytes_live;
  for (const Sample& sample : samples) machine.Invoke("main", sample.args);
  const vm::ProfileStats stats = machine.profiler()->Stats();
  const double n = static_cast<double>(samples.size());
  Profile profile;
  // Shape functions are the VM's bookkeeping, not model work: their time
  // counts as "other", as the paper's Table 4 counts it.
  static const std::string shape_func_prefix = vm::ShapeFuncKernelName("");
  std::chrono::nanoseconds shape_func_time{0};
  for (const vm::KernelProfile& kernel : stats.kernels) {
    if (kernel.name.starts_with(shape_func_prefix)) shape_func_time += kernel.time;
  }
  if (stats.total_time.count() > 0) {
    const double total = static_cast<double>(stats.total_time.count());
    profile.kernel_fraction =
        static_cast<double>((stats.kernel_time - shape_func_time).count()) / total;
    profile.shape_func_fraction = static_cast<double>(shape_func_time.count()) / total;
  }
  profile.alloc_storage_per_sample =
      static_cast<double>(stats.count(vm::Opcode::kAllocStorage)) / n;
  for (const vm::DeviceAllocationProfile& device : stats.allocations) {
    profile.device_allocs_per_sample += static_cast<double>(device.stats.device_allocs) / n;
  }
  profile.peak_bytes = static_cast<double>(allocator->Stats().peak_bytes_live - resident);
  profile.resident_bytes = static_cast<double>(resident);
  profile.instructions_per_sample = static_cast<double>(stats.instructions()) / n;
  const uint64_t non_kernel = stats.instructions() - stats.count(vm::Opcode::kInvokePacked);
  if (non_kernel > 0) {
    profile.other_ns_per_instruction =
        static_cast<double>(stats.other_time().count()) / static_cast<double>(non_kernel);
  }
  return profile;
}

void AddTiming(Figures& figures, const std::string& prefix, const Timing& timing) {
  figures.Add(prefix + "us_per_token", timing.us_per_token, "us");
  figures.Add(prefix + "latency_mean",
              std::accumulate(timing.latencies_us.begin(), timing.latencies_us.end(), 0.0) /
                  static_cast<double>(timing.latencies_us.size()),
              "us");
  figures.Add(prefix + "latency_p50", Percentile(timing.latencies_us, 0.50), "us");
  figures.Add(prefix + "latency_p90", Percentile(timing.latencies_us, 0.90), "us");
  figures.Add(prefix + "latency_p99", Percentile(timing.latencies_us, 0.99), "us");
}

void AddSplit(Figures& figures, const std::string& prefix, const Timing& timing,
              const Profile& profile) {
  figures.Add(prefix + "kernel_fraction", profile.kernel_fraction, "ratio");
  figures.Add(prefix + "kernel_us_per_token", timing.us_per_token * profile.kernel_fraction, "us");
  figures.Add(prefix + "other_us_per_token", timing.us_per_token * (1 - profile.kernel_fraction),
              "us");
  figures.Add(prefix + "shape_func_us_per_token", timing.us_per_token * profile.shape_func_fraction,
              "us");
  figures.Add(prefix + "vm_instructions_per_sentence", profile.instructions_per_sample, "count");
  figures.Add(prefix + "other_ns_per_instruction", profile.other_ns_per_instruction, "ns");
}

// BERT's inputs cut or padded ([PAD] = 0, token type 0) to `length`.
std::vector<Sample> AtLength(const std::vector<Sample>& samples, int64_t length) {
  std::vector<Sample> result;
  for (const Sample& sample : samples) {
    Sample fixed;
    fixed.tokens = length;
    for (const Ref<Object>& arg : sample.args) {
      const Tensor ids = arg.as<TensorNode>();
      std::vector<int32_t> values(static_cast<size_t>(length), 0);
      const int64_t keep = std::min(length, ids->numel());
      std::copy(ids->data<int32_t>(), ids->data<int32_t>() + keep, values.begin());
      fixed.args.push_back(TensorNode::FromVector<int32_t>({1, length}, DataType::Int32(), values));
    }
    result.push_back(std::move(fixed));
  }
  return result;
}

}  // namespace

backend::CompileOptions CompileOptionsOf(const BenchOptions& options) {
  backend::CompileOptions compile{.target = options.target};
  compile.fuse_ops = options.fuse_ops;
  compile.kernels = options.kernels;
  compile.tuning_database = options.tuning_database;
  compile.precision = options.precision;
  compile.batch_trees = options.batch_trees;
  return compile;
}

ir::IRModule ModelModule(const BenchOptions& options) {
  if (options.model != "onnx") return BuildModel(options).Module();
#if NIMBLE_HAVE_ONNX
  return onnx_import::ImportOnnxFile(options.onnx, {.dim_bounds = options.onnx_dim_bounds});
#else
  throw Error(options.onnx + ": ONNX import is not in this build (libonnx-dev, libprotobuf-dev)");
#endif
}

models::Model BuildModel(const BenchOptions& options) {
  if (options.model == "lstm") return models::BuildLstm(options.lstm);
  if (options.model == "treelstm") return models::BuildTreeLstm(options.treelstm);
  if (options.model == "bert") return models::BuildBert(options.bert);
  throw Error("unknown model '" + options.model + "' (lstm, treelstm or bert)");
}

std::vector<Sample> MakeSamples(const BenchOptions& options, const ir::IRModule& module) {
  if (options.model == "onnx") return OnnxSamples(options.dataset, module);
  if (options.model == "lstm") return LstmSamples(options.dataset, options.lstm.input_size);
  if (options.model == "treelstm") {
    return TreeLstmSamples(options.dataset, module, options.treelstm.input_size);
  }
  return BertSamples(options.dataset, options.bert.max_positions);
}

namespace {

nlohmann::ordered_json BertConfiguration(const BenchOptions& options) {
  return {{"vocab_size", options.bert.vocab_size},
          {"hidden_size", options.bert.hidden_size},
          {"layers", options.bert.layers},
          {"heads", options.bert.heads},
          {"ffn_size", options.bert.ffn_size},
          {"static_seq_len", options.static_seq_len},
          {"bounded_length", options.bert.bounded_length}};
}

}  // namespace

std::string ConfigurationJson(const BenchOptions& options) {
  nlohmann::ordered_json config;
  if (options.model == "onnx") {
    config = {{"onnx", options.onnx}};
    if (!options.onnx_dim_bounds.empty()) config["dim_bounds"] = options.onnx_dim_bounds;
    // The native BERT it was timed against, as a bert run records it.
    if (options.against_native) config["against_native"] = BertConfiguration(options);
  } else if (options.model == "lstm") {
    config = {{"input_size", options.lstm.input_size},
              {"hidden_size", options.lstm.hidden_size},
              {"layers", options.lstm.layers}};
  } else if (options.model == "treelstm") {
    config = {{"input_size", options.treelstm.input_size},
              {"hidden_size", options.treelstm.hidden_size}};
  } else {
    config = BertConfiguration(options);
  }
  config["seed"] = options.dataset.seed;
  if (options.kernels != "auto") config["kernels"] = options.kernels;
  if (!options.fuse_ops) config["fusion"] = false;
  // Spelled as the peers record theirs (f32, bf16).
  if (options.precision != "fp32") config["precision"] = options.precision;
  if (options.batch_trees) config["batch_trees"] = true;
  return config.dump();
}

namespace {

void CheckProtocol(const BenchOptions& options) {
  if (options.repeat < 1 || options.warmup < 0) {
    throw Error("--repeat must be at least 1 and --warmup at least 0");
  }
}

std::vector<Sample> SamplesOf(const BenchOptions& options, const ir::IRModule& module,
                              const Progress& progress) {
  progress("data", 0, 1);
  std::vector<Sample> samples = MakeSamples(options, module);
  if (samples.empty()) throw Error(options.dataset.path + ": no samples for " + options.model);
  progress("data", 1, 1);
  return samples;
}

}  // namespace

BenchResult RunCountedPass(const BenchOptions& options) {
#ifndef NIMBLE_HAS_CALLGRIND
  throw Error(
      "this nimble-bench was built without Valgrind's headers (apt install valgrind, "
      "then rebuild) and cannot count instructions");
#endif
  CheckProtocol(options);
  const ir::IRModule module = ModelModule(options);
  const std::vector<Sample> samples =
      SamplesOf(options, module, [](const std::string&, size_t, size_t) {});
  vm::VirtualMachine machine(backend::Compile(module, CompileOptionsOf(options)));
  for (int i = 0; i < options.warmup; ++i) {
    machine.Invoke("main", samples[i % samples.size()].args);
  }
  CALLGRIND_START_INSTRUMENTATION;
  for (const Sample& sample : samples) machine.Invoke("main", sample.args);
  CALLGRIND_STOP_INSTRUMENTATION;
  Figures figures;
  figures.Add("sentences", static_cast<double>(samples.size()), "count");
  figures.Add("tokens", static_cast<double>(TotalTokens(samples)), "count");
  return {figures.Take(), static_cast<int64_t>(samples.size())};
}

namespace {

// The predicted class of a classifier's output: the index of its largest value.
int64_t PredictedClass(const Tensor& logits) {
  int64_t best = 0;
  for (int64_t i = 1; i < logits->numel(); ++i) {
    if (logits->GetAsDouble(i) > logits->GetAsDouble(best)) best = i;
  }
  return best;
}

// What reduced precision changed: every sample through `machine` and through
// the fp32 program, the largest absolute difference of their outputs, and for
// BERT (a 2-class head) the share of sentence pairs whose class differs.
void AddPrecisionFigures(Figures& figures, const ir::IRModule& module, const BenchOptions& options,
                         vm::VirtualMachine& machine, const std::vector<Sample>& samples) {
  backend::CompileOptions fp32 = CompileOptionsOf(options);
  fp32.precision = "fp32";
  vm::VirtualMachine reference(backend::Compile(module, fp32));
  double max_diff = 0;
  int64_t flips = 0;
  for (const Sample& sample : samples) {
    const Tensor reduced = machine.Invoke("main", sample.args).as<TensorNode>();
    const Tensor exact = reference.Invoke("main", sample.args).as<TensorNode>();
    if (!reduced || !exact || reduced->numel() != exact->numel()) {
      throw Error("the " + options.precision + " and fp32 programs' outputs differ in shape");
    }
    for (int64_t i = 0; i < exact->numel(); ++i) {
      max_diff = std::max(max_diff, std::abs(reduced->GetAsDouble(i) - exact->GetAsDouble(i)));
    }
    flips += PredictedClass(reduced) != PredictedClass(exact);
  }
  figures.Add("max_abs_diff_vs_fp32", max_diff, "abs");
  if (options.model == "bert") {
    figures.Add("class_flip_share_vs_fp32",
                static_cast<double>(flips) / static_cast<double>(samples.size()), "ratio");
  }
}

}  // namespace

BenchResult RunBenchmark(const BenchOptions& options, const Progress& progress) {
  CheckProtocol(options);
  if (options.against_native && options.model != "onnx") {
    throw Error("--against-native compares an --onnx model with the native BERT");
  }
  const ir::IRModule module = ModelModule(options);
  const std::vector<Sample> samples = SamplesOf(options, module, progress);
  // With --against-native, the native builder's BERT reads the same
  // sentences (its own inputs: ids and token types).
  std::vector<Sample> native_samples;
  if (options.against_native) {
    native_samples = BertSamples(options.dataset, options.bert.max_positions);
    if (!SameTokenIds(samples, native_samples)) {
      throw Error(
          "--against-native compares a BERT fed token ids, and the ONNX model's first "
          "input, " +
          module->Lookup("main")->params.front()->name_hint +
          ", does not take the token ids that the native BERT reads");
    }
  }

  Figures figures;
  const backend::CompileOptions planned = CompileOptionsOf(options);
  backend::CompileOptions unplanned = planned;
  unplanned.plan_memory = false;
  const Clock::time_point compile_start = Clock::now();
  const vm::Executable executable = backend::Compile(module, planned);
  figures.Add("compile_ms", Microseconds(Clock::now() - compile_start) / 1000, "ms");
  const transform::AllocationStats written_planned =
      transform::CountAllocations(backend::RunPasses(module, planned));
  const transform::AllocationStats written_unplanned =
      transform::CountAllocations(backend::RunPasses(module, unplanned));
  figures.Add("allocations_written_planned", static_cast<double>(written_planned.allocations),
              "count");
  figures.Add("allocations_written_unplanned", static_cast<double>(written_unplanned.allocations),
              "count");
  figures.Add("static_bytes_planned", static_cast<double>(written_planned.static_bytes), "bytes");
  figures.Add("static_bytes_unplanned", static_cast<double>(written_unplanned.static_bytes),
              "bytes");

  figures.Add("sentences", static_cast<double>(samples.size()), "count");
  figures.Add("tokens", static_cast<double>(TotalTokens(samples)), "count");
  vm::VirtualMachine machine(executable);
  const Timing timing =
      TimePasses({{&machine, &samples}}, options.warmup, options.repeat, "run", progress).front();
  AddTiming(figures, "", timing);

  const std::vector<Sample> profiled(samples.begin(),
                                     samples.begin() + std::min(samples.size(), kProfiledSamples));
  progress("profile", 0, 2);
  const Profile with_plan = ProfilePass(executable, profiled);
  progress("profile", 1, 2);
  const Profile without_plan = ProfilePass(backend::Compile(module, unplanned), profiled);
  progress("profile", 2, 2);
  AddSplit(figures, "", timing, with_plan);
  figures.Add("alloc_storage_per_sentence_planned", with_plan.alloc_storage_per_sample, "count");
  figures.Add("alloc_storage_per_sentence_unplanned", without_plan.alloc_storage_per_sample,
              "count");
  figures.Add("device_allocs_per_sentence", with_plan.device_allocs_per_sample, "count");
  figures.Add("peak_bytes_planned", with_plan.peak_bytes, "bytes");
  figures.Add("peak_bytes_unplanned", without_plan.peak_bytes, "bytes");
  figures.Add("resident_bytes", with_plan.resident_bytes, "bytes");
  figures.Add("weight_bytes", static_cast<double>(ir::ConstantBytes(module)), "bytes");

  if (options.static_seq_len > 0) {
    if (options.model != "bert") throw Error("--static-seq-len applies to bert");
    // Table 4: the same inputs, at one length, on the dynamic and the static program.
    const std::vector<Sample> fixed = AtLength(samples, options.static_seq_len);
    models::BertOptions static_options = options.bert;
    static_options.seq_len = options.static_seq_len;
    const vm::Executable static_executable =
        backend::Compile(models::BuildBert(static_options).Module(), planned);
    vm::VirtualMachine static_machine(static_executable);
    const std::vector<Timing> timings =
        TimePasses({{&machine, &fixed}, {&static_machine, &fixed}}, options.warmup, options.repeat,
                   "dynamic, static @len", progress);
    const Timing& dynamic_timing = timings[0];
    const Timing& static_timing = timings[1];
    figures.Add("fixed_len_dynamic_over_static", MedianPassRatio(dynamic_timing, static_timing),
                "ratio");
    const std::vector<Sample> fixed_profiled(
        fixed.begin(), fixed.begin() + std::min(fixed.size(), kProfiledSamples));
    AddTiming(figures, "fixed_len_dynamic_", dynamic_timing);
    AddSplit(figures, "fixed_len_dynamic_", dynamic_timing,
             ProfilePass(executable, fixed_profiled));
    AddTiming(figures, "fixed_len_static_", static_timing);
    AddSplit(figures, "fixed_len_static_", static_timing,
             ProfilePass(static_executable, fixed_profiled));
  }
  if (options.precision != "fp32") AddPrecisionFigures(figures, module, options, machine, samples);
  if (options.against_native) {
    vm::VirtualMachine native_machine(
        backend::Compile(models::BuildBert(options.bert).Module(), planned));
    const std::vector<Timing> timings =
        TimePasses({{&machine, &samples}, {&native_machine, &native_samples}}, options.warmup,
                   options.repeat, "onnx, native", progress);
    figures.Add("onnx_over_native", MedianPassRatio(timings[0], timings[1]), "ratio");
    figures.Add("against_native_onnx_us_per_token", timings[0].us_per_token, "us");
    figures.Add("against_native_native_us_per_token", timings[1].us_per_token, "us");
  }
  return {figures.Take(), static_cast<int64_t>(samples.size())};
}

}  // namespace nimble::bench
