// Compile time against program depth: a chain of `let`s and `if`s nested in
// each other's else branch, each at sizes a factor of about four apart, so a
// pass that is superlinear in the depth shows as a time that grows faster
// than the size. Compile/* is what `nimble compile` does (parse, type
// inference, the passes, the VM compiler with its kernels); Pass/* times one
// pass of the pipeline alone, on the largest program as the passes before it
// leave it, to say which pass a regression is in.
//
//   build/bench/nimble_bench_compile_depth --benchmark_filter=Compile
#include <benchmark/benchmark.h>

#include <map>
#include <string>
#include <vector>

#include "nimble/compiler/backend/pipeline.h"
#include "nimble/compiler/support/deep_stack.h"
#include "nimble/compiler/text/parser.h"
#include "nimble/compiler/typing/type_infer.h"

namespace nimble::backend {
namespace {

// `let %v{i} = add(%v{i-1}, %x);` `bindings` times, then the last one.
std::string LetChain(int bindings) {
  std::string text = "def @main(%x: Tensor[(2), float32]) {\n";
  std::string previous = "%x";
  for (int i = 0; i < bindings; ++i) {
    const std::string var = "%v" + std::to_string(i);
    text += "  let " + var + " = add(" + previous + ", %x);\n";
    previous = var;
  }
  return text + "  " + previous + "\n}\n";
}

// `depth` ifs, each in the else branch of the one before, each condition a
// scalar computed from the input.
std::string NestedIfs(int depth) {
  std::string text = "def @main(%x: Tensor[(2), float32]) {\n";
  for (int i = 0; i < depth; ++i) {
    text += "if (less(sum(%x), " + std::to_string(i) + "f)) { add(%x, %x) } else {\n";
  }
  text += "multiply(%x, %x)\n";
  return text + std::string(depth, '}') + "\n}\n";
}

ir::IRModule Parsed(const std::string& text) {
  ir::IRModule module = text::ParseModule(text, "depth.relay");
  typing::InferTypes(module);
  return module;
}

void BM_Compile(benchmark::State& state, std::string (*program)(int)) {
  const std::string text = program(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(Compile(Parsed(text)));
  state.counters["per_level"] = benchmark::Counter(
      static_cast<double>(state.range(0)),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

BENCHMARK_CAPTURE(BM_Compile, LetChain, LetChain)
    ->Arg(8000)
    ->Arg(32000)
    ->Arg(100000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Compile, NestedIfs, NestedIfs)
    ->Arg(200)
    ->Arg(800)
    ->Arg(3000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Type inference alone, of the parsed program: what every pass that changes
// the program pays once more after it.
void BM_InferTypes(benchmark::State& state, std::string (*program)(int)) {
  const ir::IRModule module = Parsed(program(static_cast<int>(state.range(0))));
  for (auto _ : state) typing::InferTypes(module);
}

BENCHMARK_CAPTURE(BM_InferTypes, LetChain, LetChain)
    ->Arg(100000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_InferTypes, NestedIfs, NestedIfs)
    ->Arg(3000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The input of each pass of the pipeline for `text`: what the passes
// before it make of it, computed once per program for all its benchmarks.
const std::vector<ir::IRModule>& PassInputs(const std::string& text) {
  static std::map<std::string, std::vector<ir::IRModule>> inputs_of_text;
  std::vector<ir::IRModule>& inputs = inputs_of_text[text];
  if (inputs.empty()) {
    const CompileOptions options;
    inputs.push_back(Parsed(text));
    RunWithDeepStack([&] {
      for (const PassInfo& pass : Passes()) inputs.push_back(pass.run(inputs.back(), options));
    });
  }
  return inputs;
}

void RegisterPassBenchmarks(const std::string& shape, std::string (*program)(int), int size) {
  const std::string text = program(size);
  for (size_t i = 0; i < Passes().size(); ++i) {
    const std::string name = "Pass/" + shape + "/" + Passes()[i].name + "/" + std::to_string(size);
    benchmark::RegisterBenchmark(name.c_str(),
                                 [text, i](benchmark::State& state) {
                                   const ir::IRModule& input = PassInputs(text)[i];
                                   const CompileOptions options;
                                   for (auto _ : state) {
                                     benchmark::DoNotOptimize(RunWithDeepStack(
                                         [&] { return Passes()[i].run(input, options); }));
                                   }
                                 })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
}

}  // namespace
}  // namespace nimble::backend

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  nimble::backend::RegisterPassBenchmarks("LetChain", nimble::backend::LetChain, 100000);
  nimble::backend::RegisterPassBenchmarks("NestedIfs", nimble::backend::NestedIfs, 3000);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
