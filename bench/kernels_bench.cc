// The kernels at the paper's model shapes, through the kernel registry as the
// VM calls them: the dense kernels in each implementation (built-in vs oneDNN
// vs OpenBLAS; counter FLOPS = 2*m*n*k per call per second of wall time), and
// the built-in kernels of the other ops the models run most (counter
// bytes_per_second: inputs and outputs moved per second).
//
//   NIMBLE_NUM_THREADS=2 build/bench/nimble_bench_kernels --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "nimble/vm/dlpack.h"
#include "nimble/vm/kernel.h"
#include "nimble/vm/kernels/op_kernel.h"
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

// Weights of a whole model do not fit any cache: BERT-base reads 340 MB of
// them per inference. A cold run cycles through enough distinct copies of the
// weight that each call reads it from memory, as a model does.
constexpr size_t kColdWeightBytes = size_t{256} << 20;

// Runs `kernel` on fresh random inputs of the given shapes into `out_shape`;
// `cold`: a different copy of b each call (kColdWeightBytes of them in all).
void RunMatMul(benchmark::State& state, const std::string& kernel_name, const Shape& a_shape,
               const Shape& b_shape, const Shape& out_shape, double flops, bool cold = false) {
  const Tensor a = RandomTensor(a_shape);
  const size_t weight_bytes = static_cast<size_t>(ShapeNumel(b_shape)) * sizeof(float);
  const size_t copies = cold ? std::max<size_t>(2, kColdWeightBytes / weight_bytes) : 1;
  std::vector<Tensor> weights;
  for (size_t i = 0; i < copies; ++i) weights.push_back(RandomTensor(b_shape));
  const Tensor out = TensorNode::Empty(out_shape, DataType::Float32());
  const Kernel kernel = KernelRegistry::Global().Bind(kernel_name, Attrs());
  std::vector<DLTensor> weight_views;
  for (const Tensor& weight : weights) weight_views.push_back(AsDLTensor(weight));
  DLTensor tensors[] = {AsDLTensor(a), weight_views[0], AsDLTensor(out)};
  DLTensor* args[] = {&tensors[0], &tensors[1], &tensors[2]};
  kernel(args, 3);  // warms caches, and creates oneDNN's primitive
  size_t next = 0;
  for (auto _ : state) {
    tensors[1] = weight_views[next];
    next = next + 1 == copies ? 0 : next + 1;
    kernel(args, 3);
    benchmark::ClobberMemory();
  }
  state.counters["FLOPS"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
}

// nn.dense: data [m, k] x weight [n, k].
void BM_Dense(benchmark::State& state, const std::string& kernel_name, bool cold) {
  const int64_t m = state.range(0);
  const int64_t k = state.range(1);
  const int64_t n = state.range(2);
  RunMatMul(state, kernel_name, {m, k}, {n, k}, {m, n}, 2.0 * m * n * k, cold);
}

// nn.contrib_dense_pack: the same product with the weight packed as
// [n / 16, k, 16], as transform/pack_dense_weights.h leaves it.
void BM_PackedDense(benchmark::State& state, bool cold) {
  const int64_t m = state.range(0);
  const int64_t k = state.range(1);
  const int64_t n = state.range(2);
  RunMatMul(state, "nn.contrib_dense_pack", {m, k}, {n / 16, k, 16}, {m, n}, 2.0 * m * n * k, cold);
}

void DenseShapes(benchmark::internal::Benchmark* benchmark) {
  benchmark->ArgNames({"m", "k", "n"});
  for (int64_t m : {16, 54, 64, 128}) {                          // 54: MRPC's mean pair length
    for (int64_t n : {768, 3072}) benchmark->Args({m, 768, n});  // BERT-base
  }
  for (int64_t m : {54, 128}) benchmark->Args({m, 3072, 768});  // BERT's FFN output
  // The LSTM's input projection over a sentence (MRPC's mean is 24 words):
  // layer 1's W_ih (300 in) and layer 2's (512 in).
  for (int64_t k : {300, 512}) benchmark->Args({24, k, 2048});
  // Batch 1 (matrix-vector): the LSTM's W_ih and W_hh (300 or 512 in, 4 gates
  // of 512 out), both fused as [x, h], layer 2's fused [x, h], Tree-LSTM cells.
  for (int64_t k : {300, 512, 812, 1024}) benchmark->Args({1, k, 2048});
  benchmark->Args({1, 300, 750});  // Tree-LSTM node
  benchmark->Args({1, 450, 600});
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

// One op's built-in kernel on random inputs of `shapes`, outputs shaped by
// its shape function: what InvokePacked costs for that primitive.
void BM_OpKernel(benchmark::State& state, const std::string& op, const std::vector<Shape>& shapes,
                 const Attrs& attrs) {
  std::vector<Tensor> tensors;
  for (const Shape& shape : shapes) tensors.push_back(RandomTensor(shape));
  const OpKernelDef* def = OpKernelRegistry::Global().Find(op);
  for (const Shape& shape : def->shape_func(shapes, {}, attrs)) {
    tensors.push_back(TensorNode::Empty(shape, DataType::Float32()));
  }
  std::vector<DLTensor> views;
  for (const Tensor& tensor : tensors) views.push_back(AsDLTensor(tensor));
  std::vector<DLTensor*> args;
  size_t bytes = 0;
  for (size_t i = 0; i < views.size(); ++i) {
    args.push_back(&views[i]);
    bytes += tensors[i]->nbytes();
  }
  const Kernel kernel = KernelRegistry::Global().Bind(op, attrs);
  for (auto _ : state) {
    kernel(args.data(), static_cast<int32_t>(args.size()));
    benchmark::ClobberMemory();
  }
  state.counters["bytes_per_second"] =
      benchmark::Counter(static_cast<double>(bytes), benchmark::Counter::kIsIterationInvariantRate);
}

Attrs AttrsOf(std::vector<std::pair<std::string, AttrValue>> entries) {
  Attrs attrs;
  for (auto& [name, value] : entries) attrs.Set(name, std::move(value));
  return attrs;
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

BENCHMARK_CAPTURE(BM_Dense, builtin, std::string("nn.dense"), false)->Apply(DenseShapes);
BENCHMARK_CAPTURE(BM_Dense, dnnl, std::string("nn.dense.dnnl"), false)->Apply(DenseShapes);
BENCHMARK_CAPTURE(BM_Dense, openblas, std::string("nn.dense.openblas"), false)->Apply(DenseShapes);
void PackedDenseShapes(benchmark::internal::Benchmark* benchmark) {
  benchmark->ArgNames({"m", "k", "n"});
  for (int64_t m : {16, 54, 64, 128}) {
    for (int64_t n : {768, 3072}) benchmark->Args({m, 768, n});
  }
  for (int64_t m : {54, 128}) benchmark->Args({m, 3072, 768});
  for (int64_t k : {300, 512}) benchmark->Args({24, k, 2048});
  benchmark->Args({1, 512, 2048});
  benchmark->UseRealTime();
}
BENCHMARK_CAPTURE(BM_PackedDense, hot, false)->Apply(PackedDenseShapes);
// BERT's products with their weights read from memory, as in the model.
void BertColdShapes(benchmark::internal::Benchmark* benchmark) {
  benchmark->ArgNames({"m", "k", "n"});
  for (int64_t m : {16, 54}) {
    for (int64_t n : {768, 3072}) benchmark->Args({m, 768, n});
    benchmark->Args({m, 3072, 768});
  }
  benchmark->UseRealTime();
}
BENCHMARK_CAPTURE(BM_PackedDense, cold, true)->Apply(BertColdShapes);
BENCHMARK_CAPTURE(BM_Dense, builtin_cold, std::string("nn.dense"), true)->Apply(BertColdShapes);
BENCHMARK_CAPTURE(BM_Dense, dnnl_cold, std::string("nn.dense.dnnl"), true)->Apply(BertColdShapes);
BENCHMARK_CAPTURE(BM_BatchMatMul, builtin, std::string("nn.batch_matmul"))->Apply(AttentionShapes);
BENCHMARK_CAPTURE(BM_BatchMatMul, dnnl, std::string("nn.batch_matmul.dnnl"))
    ->Apply(AttentionShapes);
BENCHMARK_CAPTURE(BM_BatchMatMul, openblas, std::string("nn.batch_matmul.openblas"))
    ->Apply(AttentionShapes);

// LSTM (hidden 512): gate arithmetic on one token.
BENCHMARK_CAPTURE(BM_OpKernel, lstm_add, std::string("add"),
                  std::vector<Shape>{{1, 2048}, {1, 2048}}, Attrs())
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_OpKernel, lstm_sigmoid, std::string("sigmoid"), std::vector<Shape>{{1, 2048}},
                  Attrs())
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_OpKernel, lstm_tanh, std::string("tanh"), std::vector<Shape>{{1, 512}},
                  Attrs())
    ->UseRealTime();
// The transcendental unary ops at an LSTM gate's width and at BERT's FFN
// activation (sequence length 128).
const bool kTranscendentalsRegistered = [] {
  for (const char* op : {"exp", "tanh", "sigmoid", "erf", "gelu"}) {
    for (const auto& [rows, cols] : {std::pair{1, 512}, std::pair{128, 3072}}) {
      const std::string name = std::string("BM_OpKernel/") + op + "/" + std::to_string(rows) + "x" +
                               std::to_string(cols);
      benchmark::RegisterBenchmark(name.c_str(), BM_OpKernel, std::string(op),
                                   std::vector<Shape>{{rows, cols}}, Attrs())
          ->UseRealTime();
    }
  }
  return true;
}();
// BERT-base at sequence length 128.
BENCHMARK_CAPTURE(BM_OpKernel, bert_bias_add, std::string("add"),
                  std::vector<Shape>{{128, 768}, {768}}, Attrs())
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_OpKernel, bert_gelu, std::string("gelu"), std::vector<Shape>{{128, 3072}},
                  Attrs())
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_OpKernel, bert_softmax, std::string("nn.softmax"),
                  std::vector<Shape>{{12, 128, 128}}, AttrsOf({{"axis", int64_t{-1}}}))
    ->UseRealTime();
BENCHMARK_CAPTURE(
    BM_OpKernel, bert_layer_norm, std::string("nn.layer_norm"),
    std::vector<Shape>{{128, 768}, {768}, {768}},
    AttrsOf({{"axis", int64_t{-1}}, {"epsilon", 1e-12}, {"center", true}, {"scale", true}}))
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_OpKernel, bert_heads_transpose, std::string("transpose"),
                  std::vector<Shape>{{128, 12, 64}},
                  AttrsOf({{"axes", std::vector<int64_t>{1, 0, 2}}}))
    ->UseRealTime();

}  // namespace
}  // namespace nimble::vm

BENCHMARK_MAIN();
