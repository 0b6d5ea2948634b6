// The cost of a symbolic row count in generated matrix products (the paper's
// Figure 3): BERT-base's three dense shapes at sequence lengths 121 to 128
// (every residue mod 8), each compiled static (the length in the type) and
// symbolic (`?`) with dispatch/8, /4, /2 and /1 (te/matmul_schedule.h). All
// are generated kernels with the default 4x3 tiles; the VM runs the
// executable, so a call includes its dispatch, as in a model. Compare a
// symbolic row with the static one of the same shape and length.
//
//   NIMBLE_NUM_THREADS=2 build/bench/nimble_bench_dispatch --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "nimble/compiler/backend/pipeline.h"
#include "nimble/compiler/text/parser.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/tensor.h"
#include "nimble/vm/vm.h"

namespace nimble {
namespace {

// BERT-base's dense layers: (input width, output width).
struct DenseShape {
  int64_t in, out;
};
constexpr DenseShape kShapes[] = {{768, 768}, {768, 3072}, {3072, 768}};

// 0 compiles the length into the program (static); otherwise the dispatch
// degree of the symbolic program.
vm::Executable CompileDense(const DenseShape& shape, int64_t rows, int dispatch) {
  const std::string row_type = dispatch == 0 ? std::to_string(rows) : "?";
  ir::IRModule module = text::ParseModule(
      "#[version = \"0.0.5\"]\n"
      "def @main(%x: Tensor[(" +
          row_type + ", " + std::to_string(shape.in) + "), float32], %w: Tensor[(" +
          std::to_string(shape.out) + ", " + std::to_string(shape.in) +
          "), float32]) {\n  nn.dense(%x, %w)\n}\n",
      "dispatch_bench.relay");
  typing::InferTypes(module);
  backend::CompileOptions options;
  options.kernels = "generated";
  options.matmul.dispatch = dispatch;
  return backend::Compile(module, options);
}

Ref<Object> Filled(const Shape& shape) {
  Tensor tensor = TensorNode::Empty(shape, DataType::Float32());
  for (int64_t i = 0; i < tensor->numel(); ++i) tensor->data<float>()[i] = (i % 13) * 0.01f;
  return tensor;
}

void BM_Dense(benchmark::State& state) {
  const DenseShape& shape = kShapes[state.range(0)];
  const int64_t rows = state.range(1);
  const int dispatch = static_cast<int>(state.range(2));
  const vm::Executable executable = CompileDense(shape, rows, dispatch);
  vm::VirtualMachine machine(executable);
  const std::vector<Ref<Object>> args = {Filled({rows, shape.in}), Filled({shape.out, shape.in})};
  for (auto _ : state) benchmark::DoNotOptimize(machine.Invoke("main", args));
  state.SetLabel(std::to_string(shape.in) + "->" + std::to_string(shape.out) +
                 (dispatch == 0 ? " static" : " dispatch/" + std::to_string(dispatch)));
  state.counters["FLOPS"] = benchmark::Counter(2.0 * rows * shape.in * shape.out,
                                               benchmark::Counter::kIsIterationInvariantRate);
}

void Arguments(benchmark::internal::Benchmark* benchmark) {
  benchmark->ArgNames({"shape", "rows", "dispatch"});
  for (int64_t shape = 0; shape < 3; ++shape) {
    for (int64_t rows = 121; rows <= 128; ++rows) {
      for (int64_t dispatch : {0, 8, 4, 2, 1}) benchmark->Args({shape, rows, dispatch});
    }
  }
  benchmark->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_Dense)->Apply(Arguments);

}  // namespace
}  // namespace nimble

BENCHMARK_MAIN();
