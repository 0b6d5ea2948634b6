#include "harness/bench/dispatch_microbench.h"

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "harness/bench/dispatch_figures.h"
#include "harness/bench/statistics.h"
#include "nimble/compiler/backend/pipeline.h"
#include "nimble/compiler/text/parser.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/error.h"
#include "nimble/vm/tensor.h"
#include "nimble/vm/vm.h"

namespace nimble::bench {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kMaxFeatures = 16384;
constexpr int64_t kMaxLength = 4096;
constexpr int kMaxDegree = 64;
constexpr int kMaxRounds = 1000;

// `nn.dense` from shape.in to shape.out features over `rows` rows ("?" when
// `degree` is not 0), compiled with generated kernels.
vm::Executable CompileDense(const DenseShape& shape, int64_t rows, int degree,
                            const std::string& target) {
  const std::string row_type = degree == 0 ? std::to_string(rows) : "?";
  ir::IRModule module = text::ParseModule(
      "#[version = \"0.0.5\"]\n"
      "def @main(%x: Tensor[(" +
          row_type + ", " + std::to_string(shape.in) + "), float32], %w: Tensor[(" +
          std::to_string(shape.out) + ", " + std::to_string(shape.in) +
          "), float32]) {\n  nn.dense(%x, %w)\n}\n",
      DenseShapeName(shape.in, shape.out) + ".relay");
  typing::InferTypes(module);
  backend::CompileOptions options{.target = target};
  options.kernels = "generated";
  options.matmul.dispatch = degree;
  return backend::Compile(module, options);
}

Tensor Filled(const Shape& shape) {
  Tensor tensor = TensorNode::Empty(shape, DataType::Float32());
  for (int64_t i = 0; i < tensor->numel(); ++i) {
    tensor->data<float>()[i] = static_cast<float>(i % 13) * 0.01f;
  }
  return tensor;
}

// One variant at one length: its machine, arguments, calls per timing and
// the per-call times of the rounds.
struct Timed {
  vm::VirtualMachine* machine = nullptr;
  const std::vector<Ref<Object>>* args = nullptr;
  int64_t calls = 1;
  std::vector<double> us_per_call;
};

double SecondsOf(const Timed& timed, int64_t calls) {
  const Clock::time_point start = Clock::now();
  for (int64_t i = 0; i < calls; ++i) timed.machine->Invoke("main", *timed.args);
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

void CheckDispatchBenchOptions(const DispatchBenchOptions& options) {
  if (options.target != "intel" && options.target != "arm") {
    throw Error("microbench dispatch: target '" + options.target +
                "' (intel or arm: the generated CPU kernels of the host)");
  }
  if (options.shapes.empty() || options.lengths.empty() || options.degrees.empty()) {
    throw Error("microbench dispatch: needs at least one shape, length and dispatch degree");
  }
  for (const DenseShape& shape : options.shapes) {
    if (shape.in < 1 || shape.in > kMaxFeatures || shape.out < 1 || shape.out > kMaxFeatures) {
      throw Error("microbench dispatch: shape " + std::to_string(shape.in) + "x" +
                  std::to_string(shape.out) + " (each side 1 to " + std::to_string(kMaxFeatures) +
                  ")");
    }
  }
  for (int64_t length : options.lengths) {
    if (length < 1 || length > kMaxLength) {
      throw Error("microbench dispatch: length " + std::to_string(length) + " (1 to " +
                  std::to_string(kMaxLength) + ")");
    }
  }
  for (int degree : options.degrees) {
    if (degree < 1 || degree > kMaxDegree) {
      throw Error("microbench dispatch: dispatch degree " + std::to_string(degree) + " (1 to " +
                  std::to_string(kMaxDegree) + ")");
    }
  }
  if (options.rounds < 1 || options.rounds > kMaxRounds) {
    throw Error("microbench dispatch: rounds " + std::to_string(options.rounds) + " (1 to " +
                std::to_string(kMaxRounds) + ")");
  }
  if (!(options.min_seconds >= 0 && options.min_seconds <= 10)) {
    throw Error("microbench dispatch: min time per timing must be 0 to 10 s");
  }
}

std::vector<Measurement> RunDispatchBench(const DispatchBenchOptions& options,
                                          const Progress& progress) {
  CheckDispatchBenchOptions(options);
  // Variant 0 is static; variant v > 0 is dispatch/degrees[v - 1].
  std::vector<int> variants = {0};
  variants.insert(variants.end(), options.degrees.begin(), options.degrees.end());
  const size_t shapes = options.shapes.size();
  const size_t lengths = options.lengths.size();

  // Compile: a static program per (shape, length), a symbolic one per
  // (shape, degree) that serves every length.
  const size_t programs = shapes * (lengths + options.degrees.size());
  std::vector<std::unique_ptr<vm::VirtualMachine>> machines;
  std::vector<std::vector<vm::VirtualMachine*>> machine_of(shapes);  // [shape][length or degree]
  for (size_t s = 0; s < shapes; ++s) {
    for (size_t l = 0; l < lengths + options.degrees.size(); ++l) {
      const bool fixed = l < lengths;
      machines.push_back(std::make_unique<vm::VirtualMachine>(
          CompileDense(options.shapes[s], fixed ? options.lengths[l] : 0,
                       fixed ? 0 : options.degrees[l - lengths], options.target)));
      machine_of[s].push_back(machines.back().get());
      progress("compile", machines.size(), programs);
    }
  }

  // Arguments per (shape, length), and a Timed per (shape, length, variant),
  // calibrated by a first call (which also warms the kernel up).
  std::vector<std::vector<std::vector<Ref<Object>>>> args(shapes);
  std::vector<Timed> timed;
  for (size_t s = 0; s < shapes; ++s) {
    const DenseShape& shape = options.shapes[s];
    for (size_t l = 0; l < lengths; ++l) {
      args[s].push_back({Filled({options.lengths[l], shape.in}), Filled({shape.out, shape.in})});
    }
  }
  for (size_t s = 0; s < shapes; ++s) {
    for (size_t l = 0; l < lengths; ++l) {
      for (size_t v = 0; v < variants.size(); ++v) {
        Timed entry;
        entry.machine = v == 0 ? machine_of[s][l] : machine_of[s][lengths + v - 1];
        entry.args = &args[s][l];
        const double once = std::max(SecondsOf(entry, 1), 1e-9);
        entry.calls =
            std::max<int64_t>(1, static_cast<int64_t>(std::ceil(options.min_seconds / once)));
        timed.push_back(std::move(entry));
      }
    }
  }

  // Rounds: every entry once per round, starting one further along each
  // round so that no variant always follows the same one.
  const size_t total = timed.size() * static_cast<size_t>(options.rounds);
  size_t done = 0;
  for (int round = 0; round < options.rounds; ++round) {
    for (size_t i = 0; i < timed.size(); ++i) {
      Timed& entry = timed[(i + static_cast<size_t>(round)) % timed.size()];
      entry.us_per_call.push_back(SecondsOf(entry, entry.calls) * 1e6 /
                                  static_cast<double>(entry.calls));
      progress("time", ++done, total);
    }
  }

  std::vector<Measurement> figures;
  for (size_t s = 0; s < shapes; ++s) {
    const DenseShape& shape = options.shapes[s];
    for (size_t v = 0; v < variants.size(); ++v) {
      double us = 0, relative = 0, worst = 0;
      for (size_t l = 0; l < lengths; ++l) {
        const size_t base = (s * lengths + l) * variants.size();
        const double time = Median(timed[base + v].us_per_call);
        const double ratio = time / Median(timed[base].us_per_call);
        us += time;
        relative += ratio;
        worst = std::max(worst, ratio);
      }
      const double n = static_cast<double>(lengths);
      figures.push_back({DispatchFigureName(shape.in, shape.out, variants[v], "us"), us / n, "us"});
      if (variants[v] == 0) continue;
      figures.push_back({DispatchFigureName(shape.in, shape.out, variants[v], "relative"),
                         relative / n, "ratio"});
      figures.push_back(
          {DispatchFigureName(shape.in, shape.out, variants[v], "worst_relative"), worst, "ratio"});
    }
  }
  return figures;
}

std::string DispatchConfigurationJson(const DispatchBenchOptions& options) {
  nlohmann::json shapes = nlohmann::json::array();
  for (const DenseShape& shape : options.shapes) shapes.push_back({shape.in, shape.out});
  const te::MatMulKnobs knobs;
  return nlohmann::json{
      {"shapes", shapes},
      {"lengths", options.lengths},
      {"degrees", options.degrees},
      {"rounds", options.rounds},
      {"min_seconds", options.min_seconds},
      {"kernels", "generated"},
      {"matmul_tile", std::to_string(knobs.tile_rows) + "x" + std::to_string(knobs.tile_cols)}}
      .dump();
}

}  // namespace nimble::bench
