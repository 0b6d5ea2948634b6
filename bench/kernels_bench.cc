// The dense kernels at the paper's model shapes, each implementation through
// the kernel registry as the VM calls it: built-in vs oneDNN vs OpenBLAS.
// Counters: FLOPS (2*m*n*k per call, per second of wall time).
//
//   NIMBLE_NUM_THREADS=2 build/bench/nimble_bench_kernels --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "nimble/vm/dlpack.h"
#include "nimble/vm/kernel.h"
#include "nimble/vm/tensor.h"
#include "nimble/vm/thread_pool.h"

namespace nimble::vm {
namespace {

Tensor RandomTensor(const Shape& shape) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(ShapeNumel(shape)));
  for (float& value : values) value = uniform(rng);
  return TensorNode::FromVector<float>(shape, DataType::Float32(), values);
}

// Runs `kernel` on fresh random inputs of the given shapes into `out_shape`.
void RunMatMul(benchmark::State& state, const std::string& kernel_name, const Shape& a_shape,
               const Shape& b_shape, const Shape& out_shape, double flops) {
  const Tensor a = RandomTensor(a_shape);
  const Tensor b = RandomTensor(b_shape);
  const Tensor out = TensorNode::Empty(out_shape, DataType::Float32());
  const Kernel kernel = KernelRegistry::Global().Bind(kernel_name, Attrs());
  DLTensor tensors[] = {AsDLTensor(a), AsDLTensor(b), AsDLTensor(out)};
  DLTensor* args[] = {&tensors[0], &tensors[1], &tensors[2]};
  kernel(args, 3);  // warms caches, and creates oneDNN's primitive
  for (auto _ : state) {
    kernel(args, 3);
    benchmark::ClobberMemory();
  }
  state.counters["FLOPS"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
}

// nn.dense: data [m, k] x weight [n, k].
void BM_Dense(benchmark::State& state, const std::string& kernel_name) {
  const int64_t m = state.range(0);
  const int64_t k = state.range(1);
  const int64_t n = state.range(2);
  RunMatMul(state, kernel_name, {m, k}, {n, k}, {m, n}, 2.0 * m * n * k);
}

void DenseShapes(benchmark::internal::Benchmark* benchmark) {
  benchmark->ArgNames({"m", "k", "n"});
  for (int64_t m : {16, 64, 128}) {
    for (int64_t n : {768, 3072}) benchmark->Args({m, 768, n});  // BERT-base
  }
  benchmark->Args({1, 812, 2048});  // LSTM cell: [x, h] x 4 gates
  benchmark->Args({1, 450, 600});   // Tree-LSTM cell
  benchmark->UseRealTime();
}

// nn.batch_matmul: BERT's attention scores, 12 heads of [seq, 64] x [seq, 64]^T.
void BM_BatchMatMul(benchmark::State& state, const std::string& kernel_name) {
  const int64_t seq = state.range(0);
  RunMatMul(state, kernel_name, {12, seq, 64}, {12, seq, 64}, {12, seq, seq},
            2.0 * 12 * seq * seq * 64);
}

void AttentionShapes(benchmark::internal::Benchmark* benchmark) {
  benchmark->ArgNames({"seq"});
  for (int64_t seq : {16, 64, 128}) benchmark->Args({seq});
  benchmark->UseRealTime();
}

// The cost of one ParallelFor that hands each thread a trivial chunk: the
// thread pool's dispatch overhead per kernel.
void BM_ParallelForOverhead(benchmark::State& state) {
  ThreadPool& pool = ThreadPool::Global();
  std::vector<int64_t> sink(static_cast<size_t>(pool.num_threads()) * 4);
  for (auto _ : state) {
    pool.ParallelFor(0, static_cast<int64_t>(sink.size()), 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) ++sink[i];
    });
  }
  benchmark::DoNotOptimize(sink.data());
}
BENCHMARK(BM_ParallelForOverhead)->UseRealTime();

BENCHMARK_CAPTURE(BM_Dense, builtin, std::string("nn.dense"))->Apply(DenseShapes);
BENCHMARK_CAPTURE(BM_Dense, dnnl, std::string("nn.dense.dnnl"))->Apply(DenseShapes);
BENCHMARK_CAPTURE(BM_Dense, openblas, std::string("nn.dense.openblas"))->Apply(DenseShapes);
BENCHMARK_CAPTURE(BM_BatchMatMul, builtin, std::string("nn.batch_matmul"))->Apply(AttentionShapes);
BENCHMARK_CAPTURE(BM_BatchMatMul, dnnl, std::string("nn.batch_matmul.dnnl"))
    ->Apply(AttentionShapes);
BENCHMARK_CAPTURE(BM_BatchMatMul, openblas, std::string("nn.batch_matmul.openblas"))
    ->Apply(AttentionShapes);

}  // namespace
}  // namespace nimble::vm

BENCHMARK_MAIN();
