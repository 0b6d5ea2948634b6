#include "nimble/vm/kernels/dense.h"

#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "nimble/vm/cpu_features.h"
#include "nimble/vm/dlpack.h"
#include "nimble/vm/error.h"
#include "nimble/vm/kernel.h"
#include "nimble/vm/tensor.h"
#include "nimble/vm/thread_pool.h"
#include "tests/scoped_env.h"

namespace nimble::vm {
namespace {

using ::testing::HasSubstr;

Tensor RandomTensor(const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(ShapeNumel(shape)));
  for (float& value : values) value = uniform(rng);
  return TensorNode::FromVector<float>(shape, DataType::Float32(), values);
}

// Binds kernel `name` to `attrs` and runs it on `inputs` into a new output
// of `out_shape`, first filled with NaN so that elements it leaves unwritten
// show up.
Tensor RunKernel(const std::string& name, const Attrs& attrs, std::vector<DLTensor> inputs,
                 const Shape& out_shape) {
  const Kernel kernel = KernelRegistry::Global().Bind(name, attrs);
  const Tensor out = TensorNode::FromVector<float>(
      out_shape, DataType::Float32(),
      std::vector<float>(ShapeNumel(out_shape), std::numeric_limits<float>::quiet_NaN()));
  inputs.push_back(AsDLTensor(out));
  std::vector<DLTensor*> args;
  for (DLTensor& tensor : inputs) args.push_back(&tensor);
  kernel(args.data(), static_cast<int32_t>(args.size()));
  return out;
}

Tensor RunKernel(const std::string& name, const Attrs& attrs, const std::vector<Tensor>& inputs,
                 const Shape& out_shape) {
  std::vector<DLTensor> tensors;
  for (const Tensor& input : inputs) tensors.push_back(AsDLTensor(input));
  return RunKernel(name, attrs, std::move(tensors), out_shape);
}

Tensor RunKernel(const std::string& name, const Attrs& attrs, const Tensor& a, const Tensor& b,
                 const Shape& out_shape) {
  return RunKernel(name, attrs, std::vector<Tensor>{a, b}, out_shape);
}

// The message of the nimble::Error that `run` throws.
std::string ErrorOf(const std::function<void()>& run) {
  try {
    run();
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

// The message of the nimble::Error that running `name` throws.
std::string KernelError(const std::string& name, const Attrs& attrs,
                        const std::vector<Tensor>& inputs, const Shape& out_shape) {
  return ErrorOf([&] { RunKernel(name, attrs, inputs, out_shape); });
}

std::string KernelError(const std::string& name, const Attrs& attrs, const Tensor& a,
                        const Tensor& b, const Shape& out_shape) {
  return KernelError(name, attrs, std::vector<Tensor>{a, b}, out_shape);
}

struct MatMulCase {
  int64_t batch_a, batch_b, m, n, k;
  bool transpose_a, transpose_b;
};

// The plain triple loop, accumulated in double.
std::vector<float> NaiveMatMul(const MatMulCase& p, const Tensor& a, const Tensor& b) {
  const float* x = a->data<float>();
  const float* y = b->data<float>();
  const int64_t batch = std::max(p.batch_a, p.batch_b);
  std::vector<float> c(static_cast<size_t>(batch * p.m * p.n));
  for (int64_t index = 0; index < batch; ++index) {
    const float* xi = x + (p.batch_a == 1 ? 0 : index) * p.m * p.k;
    const float* yi = y + (p.batch_b == 1 ? 0 : index) * p.n * p.k;
    for (int64_t i = 0; i < p.m; ++i) {
      for (int64_t j = 0; j < p.n; ++j) {
        double sum = 0;
        for (int64_t q = 0; q < p.k; ++q) {
          const float xv = p.transpose_a ? xi[q * p.m + i] : xi[i * p.k + q];
          const float yv = p.transpose_b ? yi[j * p.k + q] : yi[q * p.n + j];
          sum += static_cast<double>(xv) * yv;
        }
        c[(index * p.m + i) * p.n + j] = static_cast<float>(sum);
      }
    }
  }
  return c;
}

void ExpectClose(const Tensor& actual, const std::vector<float>& expected, int64_t k) {
  ASSERT_EQ(actual->numel(), static_cast<int64_t>(expected.size()));
  // Inputs lie in [-1, 1], so each sum rounds within a few ulps per term.
  const float tolerance = 1e-5f + 2e-6f * static_cast<float>(k);
  const float* data = actual->data<float>();
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_NEAR(data[i], expected[i], tolerance) << "at flat index " << i;
  }
}

class DenseKernelsTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::string Dense() const { return "nn.dense" + GetParam(); }
  std::string BatchMatMul() const { return "nn.batch_matmul" + GetParam(); }

  void CheckDense(const Shape& data_shape, int64_t n, uint32_t seed) {
    const int64_t k = data_shape.back();
    SCOPED_TRACE(Dense() + " data " + ShapeToString(data_shape) + ", n " + std::to_string(n));
    const Tensor data = RandomTensor(data_shape, seed);
    const Tensor weight = RandomTensor({n, k}, seed + 1);
    Shape out_shape(data_shape.begin(), data_shape.end() - 1);
    out_shape.push_back(n);
    const int64_t m = ShapeNumel(std::span(data_shape).first(data_shape.size() - 1));
    const Tensor out = RunKernel(Dense(), Attrs(), data, weight, out_shape);
    ExpectClose(out, NaiveMatMul({1, 1, m, n, k, false, true}, data, weight), k);
  }

  void CheckBatchMatMul(const MatMulCase& p, uint32_t seed) {
    SCOPED_TRACE(BatchMatMul() + " batch " + std::to_string(p.batch_a) + "/" +
                 std::to_string(p.batch_b) + " m " + std::to_string(p.m) + " n " +
                 std::to_string(p.n) + " k " + std::to_string(p.k) + " transpose " +
                 std::to_string(p.transpose_a) + std::to_string(p.transpose_b));
    const Tensor x =
        RandomTensor({p.batch_a, p.transpose_a ? p.k : p.m, p.transpose_a ? p.m : p.k}, seed);
    const Tensor y =
        RandomTensor({p.batch_b, p.transpose_b ? p.n : p.k, p.transpose_b ? p.k : p.n}, seed + 1);
    Attrs attrs;
    attrs.Set("out_dtype", std::monostate{});
    attrs.Set("transpose_a", p.transpose_a);
    attrs.Set("transpose_b", p.transpose_b);
    const Tensor out =
        RunKernel(BatchMatMul(), attrs, x, y, {std::max(p.batch_a, p.batch_b), p.m, p.n});
    ExpectClose(out, NaiveMatMul(p, x, y), p.k);
  }
};

TEST_P(DenseKernelsTest, DenseMatchesNaiveLoopOnOddSizes) {
  uint32_t seed = 1;
  for (int64_t m : {1, 3, 17}) {
    for (int64_t k : {7, 300}) {
      for (int64_t n : {5, 33}) CheckDense({m, k}, n, seed += 2);
    }
  }
}

// A single row (the built-in kernel's matrix-vector loop): k around every
// vector width (below one, the tail is scalar; above, one overlapping
// vector), n around its group of eight rows, and a batch whose row of x or y
// broadcasts.
TEST_P(DenseKernelsTest, MatrixVectorProductsCoverEveryTail) {
  uint32_t seed = 100;
  for (int64_t k : {1, 3, 4, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 300}) {
    for (int64_t n : {1, 3, 7, 8, 9, 17, 67}) CheckDense({1, k}, n, seed += 2);
  }
  CheckBatchMatMul({3, 3, 1, 9, 37, false, true}, 200);
  CheckBatchMatMul({1, 3, 1, 9, 37, true, true}, 202);
  CheckBatchMatMul({3, 1, 1, 9, 37, false, true}, 204);
  CheckBatchMatMul({2, 2, 1, 9, 37, false, false}, 206);
}

// The built-in product sweeps a weight's rows the other way on each call for
// the same weight (for its cache); every call must still give every row, the
// same bits each time.
TEST_P(DenseKernelsTest, MatrixVectorProductsRepeatOnOneWeight) {
  for (const auto& [k, n] : {std::pair<int64_t, int64_t>{33, 67}, {300, 1030}}) {
    SCOPED_TRACE("k " + std::to_string(k) + ", n " + std::to_string(n));
    const Tensor weight = RandomTensor({n, k}, 300);
    const Tensor data = RandomTensor({1, k}, 301);
    const Tensor first = RunKernel(Dense(), Attrs(), data, weight, {1, n});
    ExpectClose(first, NaiveMatMul({1, 1, 1, n, k, false, true}, data, weight), k);
    for (int call = 0; call < 3; ++call) {
      const Tensor again = RunKernel(Dense(), Attrs(), data, weight, {1, n});
      EXPECT_EQ(std::memcmp(again->raw_data(), first->raw_data(), first->nbytes()), 0)
          << "call " << call + 2;
    }
  }
}

TEST_P(DenseKernelsTest, DenseFlattensLeadingDimensions) {
  CheckDense({2, 3, 7}, 5, 10);
  CheckDense({300}, 33, 11);
  CheckDense({2, 1, 4, 9}, 3, 12);
}

TEST_P(DenseKernelsTest, DenseAtModelSizes) {
  CheckDense({100, 1100}, 130, 20);  // several blocks and depth slices
  CheckDense({1, 812}, 2048, 21);    // the LSTM's matrix-vector product
  CheckDense({1, 1100}, 1030, 23);   // split over threads, rows not a multiple of four
  CheckDense({16, 768}, 768, 22);    // BERT
}

TEST_P(DenseKernelsTest, DenseChecksUnits) {
  const Tensor data = RandomTensor({3, 7}, 30);
  const Tensor weight = RandomTensor({5, 7}, 31);
  Attrs units;
  units.Set("units", int64_t{5});
  units.Set("out_dtype", DataType::Float32());
  ExpectClose(RunKernel(Dense(), units, data, weight, {3, 5}),
              NaiveMatMul({1, 1, 3, 5, 7, false, true}, data, weight), 7);
  Attrs wrong;
  wrong.Set("units", int64_t{4});
  EXPECT_THAT(KernelError(Dense(), wrong, data, weight, {3, 5}),
              HasSubstr("nn.dense: units=4 but weight has shape (5, 7)"));
}

TEST_P(DenseKernelsTest, BatchMatMulMatchesNaiveLoop) {
  uint32_t seed = 40;
  for (bool transpose_a : {false, true}) {
    for (bool transpose_b : {false, true}) {
      for (auto [batch_a, batch_b] : {std::pair{3, 3}, {1, 4}, {2, 1}, {1, 1}}) {
        CheckBatchMatMul({batch_a, batch_b, 3, 5, 7, transpose_a, transpose_b}, seed += 2);
        CheckBatchMatMul({batch_a, batch_b, 17, 33, 300, transpose_a, transpose_b}, seed += 2);
        CheckBatchMatMul({batch_a, batch_b, 1, 33, 300, transpose_a, transpose_b}, seed += 2);
      }
    }
  }
}

// The libraries run one slice per pool thread, cut along the batch, the rows
// or the columns (to multiples of 16): products big enough to be cut, with
// every layout, a broadcast operand, a column tail and a last slice of one
// row (a matrix-vector call on a strided row when a is transposed).
TEST_P(DenseKernelsTest, SlicedProductsMatchNaiveLoop) {
  if (ThreadPool::Global().num_threads() < 2) GTEST_SKIP() << "one thread: nothing is sliced";
  uint32_t seed = 500;
  for (bool transpose_a : {false, true}) {
    for (bool transpose_b : {false, true}) {
      CheckBatchMatMul({1, 1, 67, 19, 300, transpose_a, transpose_b}, seed += 2);  // rows
      CheckBatchMatMul({1, 1, 19, 67, 300, transpose_a, transpose_b}, seed += 2);  // columns
      CheckBatchMatMul({4, 1, 19, 9, 300, transpose_a, transpose_b}, seed += 2);   // batch
      CheckBatchMatMul({1, 3, 19, 9, 300, transpose_a, transpose_b}, seed += 2);
      CheckBatchMatMul({1, 1, 3, 2, 30000, transpose_a, transpose_b}, seed += 2);  // 2 + 1 rows
    }
  }
}

TEST_P(DenseKernelsTest, BatchMatMulDefaultsToTransposedY) {
  const Tensor x = RandomTensor({12, 10, 64}, 60);  // BERT's attention scores
  const Tensor y = RandomTensor({12, 10, 64}, 61);
  ExpectClose(RunKernel(BatchMatMul(), Attrs(), x, y, {12, 10, 10}),
              NaiveMatMul({12, 12, 10, 10, 64, false, true}, x, y), 64);
}

TEST_P(DenseKernelsTest, EmptyReductionGivesZeros) {
  const Tensor out =
      RunKernel(Dense(), Attrs(), RandomTensor({3, 0}, 70), RandomTensor({4, 0}, 71), {3, 4});
  EXPECT_EQ(out->data<float>()[0], 0.0f);
  ExpectClose(out, std::vector<float>(12, 0.0f), 0);
  const Tensor batched = RunKernel(BatchMatMul(), Attrs(), RandomTensor({2, 3, 0}, 72),
                                   RandomTensor({2, 4, 0}, 73), {2, 3, 4});
  ExpectClose(batched, std::vector<float>(24, 0.0f), 0);
}

TEST_P(DenseKernelsTest, EmptyResultsRun) {
  EXPECT_EQ(RunKernel(Dense(), Attrs(), RandomTensor({0, 7}, 80), RandomTensor({5, 7}, 81), {0, 5})
                ->numel(),
            0);
  EXPECT_EQ(RunKernel(Dense(), Attrs(), RandomTensor({3, 7}, 82), RandomTensor({0, 7}, 83), {3, 0})
                ->numel(),
            0);
  EXPECT_EQ(RunKernel(BatchMatMul(), Attrs(), RandomTensor({0, 3, 7}, 84),
                      RandomTensor({1, 5, 7}, 85), {0, 3, 5})
                ->numel(),
            0);
}

TEST_P(DenseKernelsTest, ShapeErrorsNameTheOpAndShapes) {
  const std::string dense = Dense();
  const std::string prefix = "kernel " + dense + ": nn.dense: ";
  EXPECT_THAT(KernelError(dense, Attrs(), RandomTensor({3, 7}, 1), RandomTensor({5, 8}, 2), {3, 5}),
              HasSubstr(prefix + "data (3, 7) and weight (5, 8) disagree on the reduction "
                                 "dimension (7 vs 8)"));
  EXPECT_THAT(KernelError(dense, Attrs(), RandomTensor({3, 7}, 1), RandomTensor({5, 7}, 2), {3, 6}),
              HasSubstr(prefix + "out has shape (3, 6) but data (3, 7) and weight (5, 7) give "
                                 "(3, 5)"));
  EXPECT_THAT(
      KernelError(dense, Attrs(), RandomTensor({3, 7}, 1), RandomTensor({1, 5, 7}, 2), {3, 5}),
      HasSubstr(prefix + "weight must be 2-D, got (1, 5, 7)"));
  const Tensor scalar = TensorNode::Scalar(DataType::Float32(), 1.0f);
  EXPECT_THAT(KernelError(dense, Attrs(), scalar, RandomTensor({5, 1}, 2), {5}),
              HasSubstr(prefix + "data must have rank >= 1"));
  const Tensor ints =
      TensorNode::FromVector<int32_t>({3, 7}, DataType::Int32(), std::vector<int32_t>(21, 1));
  EXPECT_THAT(KernelError(dense, Attrs(), ints, RandomTensor({5, 7}, 2), {3, 5}),
              HasSubstr(prefix + "data must be float32, got int32"));

  const std::string batch_matmul = BatchMatMul();
  const std::string batch_prefix = "kernel " + batch_matmul + ": nn.batch_matmul: ";
  EXPECT_THAT(KernelError(batch_matmul, Attrs(), RandomTensor({2, 3, 7}, 1),
                          RandomTensor({3, 5, 7}, 2), {3, 3, 5}),
              HasSubstr(batch_prefix + "x (2, 3, 7) and y (3, 5, 7) (transpose_a=False, "
                                       "transpose_b=True) have batch sizes that differ and "
                                       "neither is 1"));
  Attrs plain;
  plain.Set("transpose_b", false);
  EXPECT_THAT(KernelError(batch_matmul, plain, RandomTensor({2, 3, 7}, 1),
                          RandomTensor({2, 5, 7}, 2), {2, 3, 7}),
              HasSubstr(batch_prefix + "x (2, 3, 7) and y (2, 5, 7) (transpose_a=False, "
                                       "transpose_b=False) disagree on the reduction dimension "
                                       "(7 vs 5)"));
  EXPECT_THAT(KernelError(batch_matmul, Attrs(), RandomTensor({3, 7}, 1),
                          RandomTensor({1, 5, 7}, 2), {1, 3, 5}),
              HasSubstr(batch_prefix + "x must be 3-D, got (3, 7)"));
  EXPECT_THAT(KernelError(batch_matmul, Attrs(), RandomTensor({2, 3, 7}, 1),
                          RandomTensor({1, 5, 7}, 2), {1, 3, 5}),
              HasSubstr(batch_prefix + "out has shape (1, 3, 5) but"));
}

TEST_P(DenseKernelsTest, WrongArgumentCountIsAnError) {
  const Kernel kernel = KernelRegistry::Global().Bind(Dense(), Attrs());
  const Tensor data = RandomTensor({3, 7}, 1);
  DLTensor tensor = AsDLTensor(data);
  DLTensor* args[] = {&tensor, &tensor};
  try {
    kernel(args, 2);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("nn.dense: expects 3 arguments"));
  }
}

TEST_P(DenseKernelsTest, RejectsTensorsItCannotRead) {
  const Kernel kernel = KernelRegistry::Global().Bind(Dense(), Attrs());
  const Tensor data = RandomTensor({3, 7}, 1);
  const Tensor weight = RandomTensor({5, 7}, 2);
  const Tensor out = RandomTensor({3, 5}, 3);
  const auto error = [&](const std::function<void(DLTensor&)>& spoil) -> std::string {
    DLTensor tensors[] = {AsDLTensor(data), AsDLTensor(weight), AsDLTensor(out)};
    spoil(tensors[1]);
    DLTensor* args[] = {&tensors[0], &tensors[1], &tensors[2]};
    try {
      kernel(args, 3);
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  int64_t negative_shape[] = {-5, 7};
  EXPECT_THAT(error([&](DLTensor& t) { t.shape = negative_shape; }),
              HasSubstr("nn.dense: weight has a negative dimension: (-5, 7)"));
  int64_t column_major[] = {1, 5};
  EXPECT_THAT(error([&](DLTensor& t) { t.strides = column_major; }),
              HasSubstr("nn.dense: weight of shape (5, 7) is not dense row-major"));
  int64_t row_major[] = {7, 1};
  EXPECT_EQ(error([&](DLTensor& t) { t.strides = row_major; }), "(no error)");
  EXPECT_THAT(error([&](DLTensor& t) {
                t.device = {kDLCUDA, 0};
              }),
              HasSubstr("nn.dense: weight must be on the CPU"));
  EXPECT_THAT(error([&](DLTensor& t) {
                t.dtype = {kDLFloat, 64, 1};
              }),
              HasSubstr("nn.dense: weight must be float32 or bfloat16, got float64"));
}

TEST_P(DenseKernelsTest, BindingValidatesAttributes) {
  const auto bind_error = [](const std::string& name, const Attrs& attrs) -> std::string {
    try {
      KernelRegistry::Global().Bind(name, attrs);
    } catch (const Error& error) {
      return error.what();
    }
    return "(no error)";
  };
  Attrs half;
  half.Set("out_dtype", DataType::Float16());
  EXPECT_THAT(bind_error(Dense(), half),
              HasSubstr(Dense() + ": out_dtype float16 is not supported (float32 only)"));
  EXPECT_THAT(bind_error(BatchMatMul(), half), HasSubstr("out_dtype float16 is not supported"));
  Attrs negative;
  negative.Set("units", int64_t{-1});
  EXPECT_THAT(bind_error(Dense(), negative), HasSubstr("units must be non-negative, got -1"));
  Attrs unknown;
  unknown.Set("axis", int64_t{1});
  EXPECT_THAT(bind_error(Dense(), unknown), HasSubstr("unknown attribute 'axis'"));
  Attrs transpose_on_dense;
  transpose_on_dense.Set("transpose_b", true);
  EXPECT_THAT(bind_error(Dense(), transpose_on_dense),
              HasSubstr("unknown attribute 'transpose_b'"));
  Attrs not_a_flag;
  not_a_flag.Set("transpose_a", std::string("yes"));
  EXPECT_THAT(bind_error(BatchMatMul(), not_a_flag), HasSubstr("transpose_a"));
}

INSTANTIATE_TEST_SUITE_P(Implementations, DenseKernelsTest,
                         ::testing::Values("", ".dnnl", ".openblas"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param.empty() ? std::string("builtin")
                                                     : info.param.substr(1);
                         });

// ---------------------------------------------------------------------------
// nn.dense with a bfloat16 weight: DLPack's {kDLBfloat, 16}, stored as the
// upper halves of float32s; data and out stay float32.

// `value` rounded to bfloat16 (nearest, ties to even; no NaN here).
uint16_t Bf16BitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

float FloatOfBf16(uint16_t bf16) {
  const uint32_t bits = uint32_t{bf16} << 16;
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// A bfloat16 tensor, which vm tensors do not hold: its bits, and a DLTensor
// over them.
struct Bf16Tensor {
  Shape shape;
  std::vector<uint16_t> bits;

  DLTensor dl() {
    return DLTensor{bits.data(),
                    {kDLCPU, 0},
                    static_cast<int32_t>(shape.size()),
                    {kDLBfloat, 16, 1},
                    shape.data(),
                    nullptr,
                    0};
  }
};

// `tensor`'s values rounded to bfloat16.
Bf16Tensor ToBf16(const Tensor& tensor) {
  Bf16Tensor rounded{Shape(tensor->shape().begin(), tensor->shape().end()), {}};
  const float* values = tensor->data<float>();
  for (int64_t i = 0; i < tensor->numel(); ++i) rounded.bits.push_back(Bf16BitsOf(values[i]));
  return rounded;
}

// NIMBLE_CPU_FEATURES_OFF for a scope (cpu_features.h reads it on every check).
class CpuFeaturesOff : public testing::ScopedEnv {
 public:
  explicit CpuFeaturesOff(const char* features) : ScopedEnv("NIMBLE_CPU_FEATURES_OFF", features) {}
};

// The kernels that take a bfloat16 weight.
class Bf16DenseKernelsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!HostHas(CpuFeature::kAvx512Bf16)) {
      GTEST_SKIP() << "this host has no avx512_bf16, without which bf16 products refuse to run "
                      "(RefusedWithoutAvx512Bf16 checks that)";
    }
  }

  std::string Dense() const { return "nn.dense" + GetParam(); }

  // nn.dense on random data and a random weight rounded to bfloat16, against
  // the product in double of the bf16-rounded data and weight: the kernel
  // rounds the data the same way, so only the order of the float32 sums
  // differs, within 1e-4 of the sum of the products' magnitudes.
  void CheckBf16Dense(const Shape& data_shape, int64_t n, uint32_t seed,
                      const Attrs& attrs = Attrs()) {
    const int64_t k = data_shape.back();
    const int64_t m = ShapeNumel(std::span(data_shape).first(data_shape.size() - 1));
    SCOPED_TRACE(Dense() + " data " + ShapeToString(data_shape) + ", n " + std::to_string(n));
    const Tensor data = RandomTensor(data_shape, seed);
    Bf16Tensor weight = ToBf16(RandomTensor({n, k}, seed + 1));
    Shape out_shape(data_shape.begin(), data_shape.end() - 1);
    out_shape.push_back(n);
    const Tensor out = RunKernel(Dense(), attrs, {AsDLTensor(data), weight.dl()}, out_shape);
    const Bf16Tensor rounded_data = ToBf16(data);
    const float* actual = out->data<float>();
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        double magnitude = 0;
        for (int64_t q = 0; q < k; ++q) {
          const double product = static_cast<double>(FloatOfBf16(rounded_data.bits[i * k + q])) *
                                 FloatOfBf16(weight.bits[j * k + q]);
          sum += product;
          magnitude += std::abs(product);
        }
        ASSERT_NEAR(actual[i * n + j], sum, 1e-4 * magnitude + 1e-30)
            << "at row " << i << ", column " << j;
      }
    }
  }
};

// Every k tail of a 32-value step (1, 7, 31: no whole step; 33, 300: a step
// or more and a tail; 768: none), one row (the matrix-vector loop, eight
// weight rows at a time) and more (tiles of 6 rows, their tails: 2, 5, 54 =
// 9 x 6), and n around the tiles' 4 and 8 columns, split over threads at 1000.
TEST_P(Bf16DenseKernelsTest, MatchesBf16RoundedReference) {
  uint32_t seed = 1000;
  for (const int64_t m : {1, 2, 5, 54}) {
    for (const int64_t k : {1, 7, 31, 33, 300, 768}) {
      for (const int64_t n : {1, 15, 17, 64, 1000}) CheckBf16Dense({m, k}, n, seed += 2);
    }
  }
}

TEST_P(Bf16DenseKernelsTest, FlattensLeadingDimensions) {
  CheckBf16Dense({2, 3, 300}, 17, 20);
  CheckBf16Dense({2, 27, 768}, 64, 22);
  CheckBf16Dense({1, 1, 1024}, 4096, 24);  // an LSTM step at model size
  CheckBf16Dense({33}, 9, 26);
}

// The rounded data lives in a buffer kept from call to call: a smaller call
// after a larger one, and units checked as for float32.
TEST_P(Bf16DenseKernelsTest, RepeatedCallsAndUnits) {
  CheckBf16Dense({54, 768}, 100, 30);
  CheckBf16Dense({3, 40}, 9, 32);
  Attrs units;
  units.Set("units", int64_t{9});
  units.Set("out_dtype", DataType::Float32());
  CheckBf16Dense({3, 40}, 9, 34, units);
  const Tensor data = RandomTensor({3, 40}, 36);
  Bf16Tensor weight = ToBf16(RandomTensor({8, 40}, 37));
  EXPECT_THAT(ErrorOf([&] {
                RunKernel(Dense(), units, {AsDLTensor(data), weight.dl()}, {3, 8});
              }),
              HasSubstr("nn.dense: units=9 but weight has shape (8, 40)"));
}

TEST_P(Bf16DenseKernelsTest, EmptySizes) {
  Bf16Tensor empty_weight = ToBf16(RandomTensor({4, 0}, 40));
  const Tensor zeros = RunKernel(Dense(), Attrs(),
                                 {AsDLTensor(RandomTensor({3, 0}, 41)), empty_weight.dl()}, {3, 4});
  ExpectClose(zeros, std::vector<float>(12, 0.0f), 0);
  Bf16Tensor weight = ToBf16(RandomTensor({5, 7}, 42));
  EXPECT_EQ(RunKernel(Dense(), Attrs(), {AsDLTensor(RandomTensor({0, 7}, 43)), weight.dl()}, {0, 5})
                ->numel(),
            0);
}

INSTANTIATE_TEST_SUITE_P(Implementations, Bf16DenseKernelsTest, ::testing::Values("", ".dnnl"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param.empty() ? std::string("builtin")
                                                     : info.param.substr(1);
                         });

// Without AVX512-BF16 (here: turned off) a bf16 weight is refused, never
// multiplied in float32 instead; the same kernels still take float32.
TEST(Bf16DenseRefusalTest, RefusedWithoutAvx512Bf16) {
  const Tensor data = RandomTensor({2, 40}, 50);
  const Tensor float_weight = RandomTensor({3, 40}, 51);
  Bf16Tensor weight = ToBf16(float_weight);
  const CpuFeaturesOff off("avx512_bf16");
  for (const std::string name : {"nn.dense", "nn.dense.dnnl"}) {
    SCOPED_TRACE(name);
    const std::string error = ErrorOf([&] {
      RunKernel(name, Attrs(), {AsDLTensor(data), weight.dl()}, {2, 3});
    });
    EXPECT_THAT(error, HasSubstr("nn.dense with a bfloat16 weight needs the CPU feature "
                                 "avx512_bf16"));
    EXPECT_THAT(error, HasSubstr("NIMBLE_CPU_FEATURES_OFF=avx512_bf16"));
    ExpectClose(RunKernel(name, Attrs(), data, float_weight, {2, 3}),
                NaiveMatMul({1, 1, 2, 3, 40, false, true}, data, float_weight), 40);
  }
}

TEST(Bf16DenseRefusalTest, OpenBlasHasNoBf16Product) {
  const Tensor data = RandomTensor({2, 40}, 60);
  Bf16Tensor weight = ToBf16(RandomTensor({3, 40}, 61));
  EXPECT_THAT(
      ErrorOf([&] {
        RunKernel("nn.dense.openblas", Attrs(), {AsDLTensor(data), weight.dl()}, {2, 3});
      }),
      HasSubstr("kernel nn.dense.openblas: nn.dense: OpenBLAS has no bfloat16 product in this "
                "build; nn.dense and nn.dense.dnnl take a bfloat16 weight"));
}

// Only nn.dense's weight may be bfloat16, and only float32 or bfloat16.
TEST(Bf16DenseRefusalTest, WrongDTypesNameTheOpArgumentAndDType) {
  const Tensor data = RandomTensor({2, 40}, 70);
  const Tensor float_weight = RandomTensor({3, 40}, 71);
  Bf16Tensor bf16_data = ToBf16(data);
  Bf16Tensor weight = ToBf16(float_weight);
  const auto error = [](const std::string& name, std::vector<DLTensor> inputs, const Shape& out) {
    return ErrorOf([&] { RunKernel(name, Attrs(), std::move(inputs), out); });
  };
  for (const std::string name : {"nn.dense", "nn.dense.dnnl", "nn.dense.openblas"}) {
    SCOPED_TRACE(name);
    EXPECT_THAT(error(name, {bf16_data.dl(), weight.dl()}, {2, 3}),
                HasSubstr("nn.dense: data must be float32, got bfloat16"));
    DLTensor doubles = AsDLTensor(float_weight);
    doubles.dtype = {kDLFloat, 64, 1};
    EXPECT_THAT(error(name, {AsDLTensor(data), doubles}, {2, 3}),
                HasSubstr("nn.dense: weight must be float32 or bfloat16, got float64"));
    DLTensor bytes = AsDLTensor(float_weight);
    bytes.dtype = {kDLInt, 8, 1};
    EXPECT_THAT(error(name, {AsDLTensor(data), bytes}, {2, 3}),
                HasSubstr("nn.dense: weight must be float32 or bfloat16, got int8"));
    // The output: a bf16 tensor where float32 is expected.
    Bf16Tensor out = ToBf16(RandomTensor({2, 3}, 72));
    DLTensor args[] = {AsDLTensor(data), weight.dl(), out.dl()};
    DLTensor* arg_pointers[] = {&args[0], &args[1], &args[2]};
    const Kernel kernel = KernelRegistry::Global().Bind(name, Attrs());
    EXPECT_THAT(ErrorOf([&] { kernel(arg_pointers, 3); }),
                HasSubstr("nn.dense: out must be float32, got bfloat16"));
  }
  Bf16Tensor packed = ToBf16(RandomTensor({1, 40, 16}, 73));
  EXPECT_THAT(error("nn.contrib_dense_pack", {AsDLTensor(data), packed.dl()}, {2, 16}),
              HasSubstr("nn.contrib_dense_pack: weight must be float32, got bfloat16"));
  Bf16Tensor y = ToBf16(RandomTensor({1, 3, 40}, 74));
  EXPECT_THAT(
      error("nn.batch_matmul", {AsDLTensor(RandomTensor({1, 2, 40}, 75)), y.dl()}, {1, 2, 3}),
      HasSubstr("nn.batch_matmul: y must be float32, got bfloat16"));
}

// ---------------------------------------------------------------------------
// nn.contrib_dense_pack: the weight [n, k] packed as [n / 16, k, 16].

Tensor Packed(const Tensor& weight) {
  const int64_t n = weight->shape()[0];
  const int64_t k = weight->shape()[1];
  std::vector<float> packed(static_cast<size_t>(n * k));
  for (int64_t u = 0; u < n; ++u) {
    for (int64_t l = 0; l < k; ++l) {
      packed[((u / 16) * k + l) * 16 + u % 16] = weight->data<float>()[u * k + l];
    }
  }
  return TensorNode::FromVector<float>({n / 16, k, 16}, DataType::Float32(), packed);
}

// Every tail of the row tiles (m % 12 for AVX-512, % 6, % 2), reductions
// shorter and longer than a depth slice (256) with a vector tail, one block,
// three (AVX-512 takes two at a time: a pair and one left over) and 37 (the
// threads' chunks start at odd blocks), leading dimensions flattened.
TEST(PackedDenseKernelTest, MatchesNaiveLoopOnEveryRowTail) {
  for (const Shape& data_shape : std::vector<Shape>{
           {1, 7}, {2, 33}, {5, 64}, {6, 3}, {7, 600}, {11, 19}, {13, 1030}, {2, 9, 40}}) {
    for (const int64_t n : {16, 48, 592}) {
      SCOPED_TRACE("data " + ShapeToString(data_shape) + ", n " + std::to_string(n));
      const int64_t k = data_shape.back();
      const int64_t m = ShapeNumel(std::span(data_shape).first(data_shape.size() - 1));
      const Tensor data = RandomTensor(data_shape, 3);
      const Tensor weight = RandomTensor({n, k}, 4);
      Shape out_shape(data_shape.begin(), data_shape.end() - 1);
      out_shape.push_back(n);
      const Tensor out =
          RunKernel("nn.contrib_dense_pack", Attrs(), data, Packed(weight), out_shape);
      ExpectClose(out, NaiveMatMul({1, 1, m, n, k, false, true}, data, weight), k);
    }
  }
}

// The packed kernel under `attrs`, with a bias, on every row tail and
// depth-slice count (600, 1030: three and five slices), against the naive
// product plus the bias with `activation` applied to each element.
void ExpectPackedProductsWithBias(const Attrs& attrs,
                                  const std::function<float(float)>& activation) {
  for (const Shape& data_shape : std::vector<Shape>{{1, 7}, {7, 600}, {13, 1030}, {2, 3, 40}}) {
    for (const int64_t n : {16, 48}) {
      SCOPED_TRACE("data " + ShapeToString(data_shape) + ", n " + std::to_string(n));
      const int64_t k = data_shape.back();
      const int64_t m = ShapeNumel(std::span(data_shape).first(data_shape.size() - 1));
      const Tensor data = RandomTensor(data_shape, 5);
      const Tensor weight = RandomTensor({n, k}, 6);
      const Tensor bias = RandomTensor({n}, 7);
      Shape out_shape(data_shape.begin(), data_shape.end() - 1);
      out_shape.push_back(n);
      std::vector<float> expected = NaiveMatMul({1, 1, m, n, k, false, true}, data, weight);
      for (size_t i = 0; i < expected.size(); ++i) {
        expected[i] = activation(expected[i] + bias->data<float>()[i % n]);
      }
      ExpectClose(
          RunKernel("nn.contrib_dense_pack", attrs, {data, Packed(weight), bias}, out_shape),
          expected, k);
    }
  }
}

// A bias starts every row's sums: added once however many depth slices the
// reduction takes.
TEST(PackedDenseKernelTest, BiasIsAddedOnceToEveryRow) {
  ExpectPackedProductsWithBias(Attrs(), [](float x) { return x; });
  // An empty reduction leaves the bias.
  const Tensor bias = RandomTensor({16}, 8);
  std::vector<float> rows(bias->data<float>(), bias->data<float>() + 16);
  rows.insert(rows.end(), rows.begin(), rows.end());
  ExpectClose(RunKernel("nn.contrib_dense_pack", Attrs(),
                        {RandomTensor({2, 0}, 1), RandomTensor({1, 0, 16}, 2), bias}, {2, 16}),
              rows, 0);
  EXPECT_THAT(
      KernelError("nn.contrib_dense_pack", Attrs(),
                  {RandomTensor({3, 8}, 1), RandomTensor({2, 8, 16}, 2), RandomTensor({16}, 3)},
                  {3, 32}),
      HasSubstr("nn.contrib_dense_pack: bias must have shape (32,), got (16,)"));
  EXPECT_THAT(KernelError("nn.contrib_dense_pack", Attrs(),
                          {RandomTensor({3, 8}, 1), RandomTensor({2, 8, 16}, 2),
                           RandomTensor({32}, 3), RandomTensor({32}, 4)},
                          {3, 32}),
              HasSubstr("nn.contrib_dense_pack: expects 3 or 4 arguments (data, weight, an "
                        "optional bias, and the output), got 5"));
}

// activation="gelu": gelu of each element of the product plus bias, on every
// row tail and depth-slice count, and of the bias alone for an empty
// reduction; gelu in double, as the reference writes it (erfc).
TEST(PackedDenseKernelTest, GeluActivationAppliesToEveryElement) {
  Attrs gelu;
  gelu.Set("activation", std::string("gelu"));
  const auto gelu_of = [](float x) {
    return static_cast<float>(0.5 * x * std::erfc(-static_cast<double>(x) * std::sqrt(0.5)));
  };
  ExpectPackedProductsWithBias(gelu, gelu_of);
  const Tensor bias = RandomTensor({16}, 8);
  std::vector<float> rows;
  for (int row = 0; row < 2; ++row) {
    for (int64_t u = 0; u < 16; ++u) rows.push_back(gelu_of(bias->data<float>()[u]));
  }
  ExpectClose(RunKernel("nn.contrib_dense_pack", gelu,
                        {RandomTensor({2, 0}, 1), RandomTensor({1, 0, 16}, 2), bias}, {2, 16}),
              rows, 0);
  Attrs relu;
  relu.Set("activation", std::string("relu"));
  EXPECT_THAT(
      KernelError("nn.contrib_dense_pack", relu, RandomTensor({3, 8}, 1),
                  RandomTensor({1, 8, 16}, 2), {3, 16}),
      HasSubstr("nn.contrib_dense_pack: activation must be None or \"gelu\", got \"relu\""));
}

TEST(PackedDenseKernelTest, EmptySizes) {
  const Tensor zeros = RunKernel("nn.contrib_dense_pack", Attrs(), RandomTensor({3, 0}, 1),
                                 RandomTensor({1, 0, 16}, 2), {3, 16});
  ExpectClose(zeros, std::vector<float>(48, 0.0f), 0);
  EXPECT_EQ(RunKernel("nn.contrib_dense_pack", Attrs(), RandomTensor({0, 8}, 1),
                      RandomTensor({2, 8, 16}, 2), {0, 32})
                ->numel(),
            0);
}

TEST(PackedDenseKernelTest, ShapeErrorsNameTheOpAndShapes) {
  const auto error = [](const Shape& data, const Shape& weight, const Shape& out) {
    return KernelError("nn.contrib_dense_pack", Attrs(), RandomTensor(data, 1),
                       RandomTensor(weight, 2), out);
  };
  EXPECT_THAT(error({3, 8}, {2, 8, 8}, {3, 16}),
              HasSubstr("nn.contrib_dense_pack: weight must be packed as [units / 16, k, 16], "
                        "got (2, 8, 8)"));
  EXPECT_THAT(error({3, 8}, {2, 7, 16}, {3, 32}),
              HasSubstr("disagree on the reduction dimension (8 vs 7)"));
  EXPECT_THAT(
      error({3, 8}, {2, 8, 16}, {3, 16}),
      HasSubstr("out has shape (3, 16) but data (3, 8) and weight (2, 8, 16) give (3, 32)"));
  Attrs units;
  units.Set("units", int64_t{32});
  try {
    KernelRegistry::Global().Bind("nn.contrib_dense_pack", units);
    ADD_FAILURE() << "bound with units";
  } catch (const Error& bind_error) {
    EXPECT_THAT(bind_error.what(), HasSubstr("unknown attribute 'units'"));
  }
}

TEST(DenseKernelsRegistryTest, RegistersAllImplementations) {
  for (const char* name :
       {"nn.dense", "nn.dense.dnnl", "nn.dense.openblas", "nn.contrib_dense_pack",
        "nn.batch_matmul", "nn.batch_matmul.dnnl", "nn.batch_matmul.openblas"}) {
    EXPECT_TRUE(KernelRegistry::Global().Contains(name)) << name;
  }
}

// OpenBLAS is opened by its first call, and then makes no threads of its
// own (linked, its start-up spun a thread per core in every process). Run in
// a fresh process (the threadsafe death-test style re-executes the binary for
// this test alone), as the tests before it may have called it already.
TEST(OpenBlasLibraryTest, OpenedByItsFirstCallWithoutThreadsOfItsOwn) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const bool unset = std::getenv("OPENBLAS_NUM_THREADS") == nullptr;
        const bool loaded_before = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD) != nullptr;
        const Tensor a = RandomTensor({3, 8}, 1);
        const Tensor b = RandomTensor({5, 8}, 2);
        RunKernel("nn.dense.openblas", {}, a, b, {3, 5});
        void* library = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD);
        using ThreadCount = int (*)();
        const auto threads =
            library ? reinterpret_cast<ThreadCount>(dlsym(library, "openblas_get_num_threads"))
                    : nullptr;
        const char* setting = std::getenv("OPENBLAS_NUM_THREADS");
        const bool single =
            threads && threads() == 1 && (!unset || (setting && std::string(setting) == "1"));
        std::exit(!loaded_before && single ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace nimble::vm
