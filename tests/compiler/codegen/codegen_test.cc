#include <dlfcn.h>
#include <elf.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "nimble/compiler/codegen/link.h"
#include "nimble/compiler/codegen/llvm_codegen.h"
#include "nimble/compiler/codegen/target.h"
#include "nimble/compiler/te/lower.h"
#include "nimble/compiler/tir/stmt.h"
#include "nimble/vm/dlpack.h"
#include "nimble/vm/kernel.h"
#include "nimble/vm/kernel_library.h"
#include "nimble/vm/kernels/element.h"
#include "nimble/vm/tensor.h"
#include "tests/cuda_device.h"
#include "tests/error_of.h"

namespace nimble::codegen {
namespace {

using ::testing::HasSubstr;
using namespace nimble::tir;  // NOLINT: the test builds a lot of IR
using tir::Buffer;            // not nimble::Buffer (device memory)

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

CodegenTarget HostTarget() {
#if defined(__x86_64__)
  return CodegenTargetFor("intel");
#else
  return CodegenTargetFor("arm");
#endif
}

Buffer MakeBuffer(const std::string& name, DataType dtype, std::vector<Expr> shape) {
  return std::make_shared<BufferNode>(name, dtype, std::move(shape));
}

// The kernels compiled for the host, linked and loaded as the VM loads them.
class Library {
 public:
  explicit Library(const std::vector<PrimFunc>& kernels)
      : library_(LinkSharedLibrary(EmitObject(kernels, HostTarget()), HostTarget())) {}

  // Calls kernel `name` on `args` and returns its status.
  int Call(const std::string& name, std::vector<DLTensor> args) const {
    std::string missing;
    const NimbleKernelFunc kernel = library_.Find(name, &missing);
    EXPECT_NE(kernel, nullptr) << missing;
    std::vector<DLTensor*> pointers;
    for (DLTensor& arg : args) pointers.push_back(&arg);
    return kernel(nullptr, pointers.data(), static_cast<int32_t>(pointers.size()));
  }
  int Call(const std::string& name, const std::vector<Tensor>& args) const {
    std::vector<DLTensor> tensors;
    for (const Tensor& arg : args) tensors.push_back(AsDLTensor(arg));
    return Call(name, tensors);
  }

 private:
  vm::KernelLibrary library_;
};

template <typename T>
std::vector<T> Values(const Tensor& tensor) {
  const T* data = tensor->data<T>();
  return std::vector<T>(data, data + tensor->numel());
}

// |actual - expected| in units in the last place of the float nearest to
// `expected` (subnormals: of the smallest exponent).
double UlpError(float actual, double expected) {
  const auto rounded = static_cast<float>(expected);
  if (std::isnan(expected)) return std::isnan(actual) ? 0 : INFINITY;
  if (std::isinf(rounded) || std::isinf(actual)) return actual == rounded ? 0 : INFINITY;
  const int exponent = rounded == 0 ? -126 : std::max(std::ilogb(rounded), -126);
  return std::abs(actual - expected) / std::ldexp(1.0, exponent - 23);
}

// out[i] = fn(a[i]) over a[n], n symbolic; the loop is vectorised.
PrimFunc UnaryKernel(const std::string& name, Intrinsic intrinsic, DataType dtype) {
  const Var n = MakeVar("n");
  const Var i = MakeVar("i");
  const Buffer a = MakeBuffer("a", dtype, {n});
  const Buffer out = MakeBuffer("out", dtype, {n});
  return {name,
          {a, out},
          1,
          For(i, n, ForKind::kVectorized, Store(out, i, Call(intrinsic, {Load(a, i)})))};
}

// ---------------------------------------------------------------------------
// Targets

TEST(CodegenTargetTest, NamesTheTargets) {
  const CodegenTarget arm = CodegenTargetFor("arm");
  EXPECT_EQ(arm.triple, "aarch64-unknown-linux-gnu");
  EXPECT_THAT(arm.features, HasSubstr("+neon"));
  const CodegenTarget intel = CodegenTargetFor("intel");
  EXPECT_EQ(intel.triple, "x86_64-unknown-linux-gnu");
  EXPECT_FALSE(intel.cpu.empty());
  const CodegenTarget nvidia = CodegenTargetFor("nvidia");
  EXPECT_EQ(nvidia.triple, intel.triple) << "the host code of GPU kernels";
  EXPECT_EQ(nvidia.device_triple, "nvptx64-nvidia-cuda");
  EXPECT_EQ(nvidia.device_cpu, "sm_80");
  EXPECT_TRUE(intel.device_triple.empty());
  EXPECT_THAT(ErrorOf([] { CodegenTargetFor("riscv"); }), HasSubstr("'riscv'"));
}

// ---------------------------------------------------------------------------
// Floats

TEST(CodegenTest, ElementwiseKernelOnSymbolicSizes) {
  const Var n = MakeVar("n");
  const Var i = MakeVar("i");
  const Buffer a = MakeBuffer("a", DataType::Float32(), {n});
  const Buffer b = MakeBuffer("b", DataType::Float32(), {n});
  const Buffer out = MakeBuffer("out", DataType::Float32(), {n});
  const Expr value = Add(Mul(Call(Intrinsic::kTanh, {Load(a, i)}), Load(b, i)), FloatImm(1));
  const Library library(
      {{"tanh_mul_add", {a, b, out}, 2, For(i, n, ForKind::kVectorized, Store(out, i, value))}});

  std::mt19937 random(7);
  std::uniform_real_distribution<float> uniform(-6, 6);
  for (const int64_t size : {0, 1, 7, 1000}) {
    std::vector<float> xs(size), ys(size);
    for (int64_t k = 0; k < size; ++k) {
      xs[k] = uniform(random);
      ys[k] = uniform(random);
    }
    const Tensor out_tensor = TensorNode::Empty({size}, DataType::Float32());
    ASSERT_EQ(library.Call("tanh_mul_add",
                           {TensorNode::FromVector({size}, DataType::Float32(), xs),
                            TensorNode::FromVector({size}, DataType::Float32(), ys), out_tensor}),
              0);
    const std::vector<float> got = Values<float>(out_tensor);
    for (int64_t k = 0; k < size; ++k) {
      // tanh within 1.3 ulp (vector_math.h), then one rounding each for the
      // product and the sum.
      const double tanh = std::tanh(static_cast<double>(xs[k]));
      const double expected = tanh * ys[k] + 1;
      const double ulp_tanh = std::ldexp(1.0, std::ilogb(static_cast<float>(tanh)) - 23);
      const double bound = 1.3 * ulp_tanh * std::abs(ys[k]) + std::abs(tanh * ys[k]) * FLT_EPSILON +
                           std::abs(expected) * FLT_EPSILON;
      EXPECT_NEAR(got[k], expected, bound) << "size " << size << ", x = " << xs[k];
    }
  }
}

// Exp, log, tanh, sigmoid, erf and erfc against double-precision libm on
// every 8192nd float and special values, within vector_math.h's bounds (where
// the result is normal for exp, sigmoid and erfc). log is Cephes' logf (the
// runtime uses libm's): 1 ulp. erfc is 1 - x P(x^2) below |x| = 1 as in the
// runtime's gelu, which cancels up to two bits near |x| = 1: 5 ulp.
TEST(CodegenTest, Float32MathIsAsAccurateAsTheRuntimes) {
  std::vector<float> inputs = {0.0f, -0.0f, kInf, -kInf, kNaN, FLT_MIN, FLT_TRUE_MIN, -1.0f};
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 8192) {
    float x;
    const auto word = static_cast<uint32_t>(bits);
    std::memcpy(&x, &word, sizeof x);
    inputs.push_back(x);
  }
  const auto size = static_cast<int64_t>(inputs.size());
  const Tensor input = TensorNode::FromVector({size}, DataType::Float32(), inputs);

  struct Function {
    Intrinsic intrinsic;
    double (*reference)(double);
    double max_ulps;
    bool normal_results_only;
  };
  const Function functions[] = {
      {Intrinsic::kExp, [](double x) { return std::exp(x); }, 1.01, true},
      {Intrinsic::kLog, [](double x) { return std::log(x); }, 1.0, false},
      {Intrinsic::kTanh, [](double x) { return std::tanh(x); }, 1.3, false},
      {Intrinsic::kSigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }, 2.8, true},
      {Intrinsic::kErf, [](double x) { return std::erf(x); }, 2.4, false},
      {Intrinsic::kErfc, [](double x) { return std::erfc(x); }, 5.0, true},
  };
  std::vector<PrimFunc> kernels;
  for (const Function& function : functions) {
    kernels.push_back(
        UnaryKernel(IntrinsicName(function.intrinsic), function.intrinsic, DataType::Float32()));
  }
  const Library library(kernels);
  for (const Function& function : functions) {
    const std::string name = IntrinsicName(function.intrinsic);
    const Tensor out = TensorNode::Empty({size}, DataType::Float32());
    ASSERT_EQ(library.Call(name, {input, out}), 0);
    double worst = 0;
    float worst_x = 0;
    const float* got = out->data<float>();
    for (int64_t k = 0; k < size; ++k) {
      const double expected = function.reference(inputs[k]);
      if (function.normal_results_only && std::abs(expected) < FLT_MIN) continue;
      const double error = UlpError(got[k], expected);
      if (!(error <= worst)) {
        worst = error;
        worst_x = inputs[k];
      }
    }
    EXPECT_LE(worst, function.max_ulps) << name << " at x = " << worst_x;
  }
}

TEST(CodegenTest, Float32SpecialValues) {
  const std::vector<float> inputs = {kInf, -kInf, kNaN, 0.0f, -0.0f, -1.0f};
  const Tensor input = TensorNode::FromVector({6}, DataType::Float32(), inputs);
  struct Expected {
    Intrinsic intrinsic;
    std::vector<float> values;
  };
  const std::vector<Expected> cases = {
      {Intrinsic::kExp, {kInf, 0, kNaN, 1, 1, std::exp(-1.0f)}},
      {Intrinsic::kLog, {kInf, kNaN, kNaN, -kInf, -kInf, kNaN}},
      {Intrinsic::kTanh, {1, -1, kNaN, 0, -0.0f, std::tanh(-1.0f)}},
      {Intrinsic::kSigmoid, {1, 0, kNaN, 0.5f, 0.5f, 1 / (1 + std::exp(1.0f))}},
      {Intrinsic::kErf, {1, -1, kNaN, 0, -0.0f, std::erf(-1.0f)}},
      {Intrinsic::kErfc, {0, 2, kNaN, 1, 1, std::erfc(-1.0f)}},
  };
  std::vector<PrimFunc> kernels;
  for (const Expected& c : cases) {
    kernels.push_back(UnaryKernel(IntrinsicName(c.intrinsic), c.intrinsic, DataType::Float32()));
  }
  const Library library(kernels);
  for (const Expected& c : cases) {
    const Tensor out = TensorNode::Empty({6}, DataType::Float32());
    ASSERT_EQ(library.Call(IntrinsicName(c.intrinsic), {input, out}), 0);
    for (size_t k = 0; k < inputs.size(); ++k) {
      const float got = out->data<float>()[k];
      if (std::isnan(c.values[k])) {
        EXPECT_TRUE(std::isnan(got)) << IntrinsicName(c.intrinsic) << "(" << inputs[k] << ")";
      } else {
        EXPECT_FLOAT_EQ(got, c.values[k]) << IntrinsicName(c.intrinsic) << "(" << inputs[k] << ")";
        EXPECT_EQ(std::signbit(got), std::signbit(c.values[k])) << IntrinsicName(c.intrinsic);
      }
    }
  }
}

// sqrt, rsqrt, abs, round (halves to even), pow, and max/min, whose NaN
// propagates from either side as in the runtime's maximum/minimum; floor,
// ceil and fmod.
TEST(CodegenTest, OtherFloatOperations) {
  const Var i = MakeVar("i");
  const Buffer a = MakeBuffer("a", DataType::Float32(), {IntImm(6)});
  const Buffer b = MakeBuffer("b", DataType::Float32(), {IntImm(6)});
  std::vector<Buffer> outs;
  std::vector<Stmt> stores;
  const std::vector<Expr> values = {
      Call(Intrinsic::kSqrt, {Load(a, i)}),
      Call(Intrinsic::kRsqrt, {Load(a, i)}),
      Call(Intrinsic::kAbs, {Load(b, i)}),
      Call(Intrinsic::kRound, {Load(b, i)}),
      Call(Intrinsic::kPow, {Load(a, i), Load(b, i)}),
      Max(Load(a, i), Load(b, i)),
      Min(Load(a, i), Load(b, i)),
      Call(Intrinsic::kFloor, {Load(b, i)}),
      Call(Intrinsic::kCeil, {Load(b, i)}),
      Call(Intrinsic::kFmod, {Load(b, i), Load(a, i)}),
  };
  for (size_t k = 0; k < values.size(); ++k) {
    outs.push_back(MakeBuffer("out" + std::to_string(k), DataType::Float32(), {IntImm(6)}));
    stores.push_back(Store(outs.back(), i, values[k]));
  }
  std::vector<Buffer> params = {a, b};
  params.insert(params.end(), outs.begin(), outs.end());
  const Library library(
      {{"float_ops", params, 2, For(i, IntImm(6), ForKind::kSerial, Seq(stores))}});

  const std::vector<float> xs = {4, 2.25f, kNaN, 9, 1, 0.5f};
  const std::vector<float> ys = {2.5f, -0.5f, 3, kNaN, -3.5f, 1.5f};
  std::vector<Tensor> args = {TensorNode::FromVector({6}, DataType::Float32(), xs),
                              TensorNode::FromVector({6}, DataType::Float32(), ys)};
  for (size_t k = 0; k < outs.size(); ++k)
    args.push_back(TensorNode::Empty({6}, DataType::Float32()));
  ASSERT_EQ(library.Call("float_ops", args), 0);
  auto expect = [&](size_t out, const std::vector<float>& expected) {
    const std::vector<float> got = Values<float>(args[2 + out]);
    for (size_t k = 0; k < expected.size(); ++k) {
      if (std::isnan(expected[k])) {
        EXPECT_TRUE(std::isnan(got[k])) << "output " << out << " element " << k;
      } else {
        EXPECT_FLOAT_EQ(got[k], expected[k]) << "output " << out << " element " << k;
      }
    }
  };
  expect(0, {2, 1.5f, kNaN, 3, 1, std::sqrt(0.5f)});
  expect(1, {0.5f, 1 / 1.5f, kNaN, 1.0f / 3, 1, 1 / std::sqrt(0.5f)});
  expect(2, {2.5f, 0.5f, 3, kNaN, 3.5f, 1.5f});
  expect(3, {2, -0.0f, 3, kNaN, -4, 2});
  expect(4, {32, 1 / 1.5f, kNaN, kNaN, 1, std::pow(0.5f, 1.5f)});
  expect(5, {4, 2.25f, kNaN, kNaN, 1, 1.5f});
  expect(6, {2.5f, -0.5f, kNaN, kNaN, -3.5f, 0.5f});
  expect(7, {2, -1, 3, kNaN, -4, 1});
  expect(8, {3, -0.0f, 3, kNaN, -3, 2});
  // fmod: exact, with the dividend's sign (-3.5 fmod 1 is -0.5; 3 fmod NaN is NaN).
  expect(9, {2.5f, -0.5f, kNaN, kNaN, -0.5f, 0.0f});
}

TEST(CodegenTest, Float64UsesLibm) {
  const std::vector<double> xs = {-3, -0.5, 0, 0.25, 2, 30};
  const std::vector<std::pair<Intrinsic, double (*)(double)>> functions = {
      {Intrinsic::kExp, [](double x) { return std::exp(x); }},
      {Intrinsic::kTanh, [](double x) { return std::tanh(x); }},
      {Intrinsic::kSigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }},
      {Intrinsic::kErf, [](double x) { return std::erf(x); }},
      {Intrinsic::kErfc, [](double x) { return std::erfc(x); }},
      {Intrinsic::kLog, [](double x) { return std::log(x); }},
  };
  std::vector<PrimFunc> kernels;
  for (const auto& [intrinsic, reference] : functions) {
    kernels.push_back(UnaryKernel(IntrinsicName(intrinsic), intrinsic, DataType::Float64()));
  }
  const Library library(kernels);
  const Tensor input = TensorNode::FromVector({6}, DataType::Float64(), xs);
  for (const auto& [intrinsic, reference] : functions) {
    const Tensor out = TensorNode::Empty({6}, DataType::Float64());
    ASSERT_EQ(library.Call(IntrinsicName(intrinsic), {input, out}), 0);
    for (size_t k = 0; k < xs.size(); ++k) {
      const double expected = reference(xs[k]);
      const double got = out->data<double>()[k];
      if (std::isnan(expected)) {
        EXPECT_TRUE(std::isnan(got));
      } else if (std::isinf(expected)) {
        EXPECT_EQ(got, expected);
      } else {
        EXPECT_NEAR(got, expected, std::abs(expected) * 4e-16) << IntrinsicName(intrinsic);
      }
    }
  }
}

// out[i, j] = a[i, j] + (bm == 1 ? b[0, j] : b[i, j]): b broadcasts along
// dimension 0 when it has one row. The select must not evaluate the load it
// does not take (b[i, j] is out of bounds when bm is 1).
TEST(CodegenTest, BroadcastSelectsOnADimensionOfOne) {
  const Var m = MakeVar("m");
  const Var n = MakeVar("n");
  const Var bm = MakeVar("bm");
  const Var i = MakeVar("i");
  const Var j = MakeVar("j");
  const Buffer a = MakeBuffer("a", DataType::Float32(), {m, n});
  const Buffer b = MakeBuffer("b", DataType::Float32(), {bm, n});
  const Buffer out = MakeBuffer("out", DataType::Float32(), {m, n});
  const Expr b_value = Select(Compare(CompareOp::kEq, bm, IntImm(1)), Load(b, j),
                              Load(b, FlatIndex({bm, n}, {i, j})));
  const Stmt body = For(
      i, m, ForKind::kSerial,
      For(j, n, ForKind::kUnrolled,
          Store(out, FlatIndex({m, n}, {i, j}), Add(Load(a, FlatIndex({m, n}, {i, j})), b_value))));
  const Library library({{"broadcast_add", {a, b, out}, 2, body}});

  std::vector<float> as(12);
  for (int k = 0; k < 12; ++k) as[k] = static_cast<float>(k);
  const Tensor a_tensor = TensorNode::FromVector({3, 4}, DataType::Float32(), as);
  for (const int64_t rows : {1, 3}) {
    std::vector<float> bs(static_cast<size_t>(rows) * 4);
    for (size_t k = 0; k < bs.size(); ++k) bs[k] = 100.0f * static_cast<float>(k + 1);
    const Tensor out_tensor = TensorNode::Empty({3, 4}, DataType::Float32());
    ASSERT_EQ(library.Call("broadcast_add",
                           {a_tensor, TensorNode::FromVector({rows, 4}, DataType::Float32(), bs),
                            out_tensor}),
              0);
    const std::vector<float> got = Values<float>(out_tensor);
    for (int r = 0; r < 3; ++r) {
      for (int c = 0; c < 4; ++c) {
        EXPECT_EQ(got[r * 4 + c], as[r * 4 + c] + bs[(rows == 1 ? 0 : r) * 4 + c]);
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Integers and bools

TEST(CodegenTest, IntegerArithmeticWrapsAndDividesAsTheRuntime) {
  const Var i = MakeVar("i");
  const Expr six = IntImm(6);
  const Buffer a = MakeBuffer("a", DataType::Int32(), {six});
  const Buffer b = MakeBuffer("b", DataType::Int32(), {six});
  const Buffer x = MakeBuffer("x", DataType::Int64(), {six});
  const Buffer y = MakeBuffer("y", DataType::Int64(), {six});
  const std::vector<std::pair<std::string, Expr>> outputs = {
      {"mul", Mul(Load(a, i), Load(b, i))},
      {"sub", Sub(Load(a, i), Load(b, i))},
      {"div", Div(Load(a, i), Load(b, i))},
      {"min", Min(Load(a, i), Load(b, i))},
      {"abs", Call(Intrinsic::kAbs, {Load(a, i)})},
      {"floordiv", FloorDiv(Load(x, i), Load(y, i))},
      {"floormod", FloorMod(Load(x, i), Load(y, i))},
      {"floordiv4", FloorDiv(Load(x, i), IntImm(4))},
  };
  std::vector<Buffer> params = {a, b, x, y};
  std::vector<Stmt> stores;
  for (const auto& [name, value] : outputs) {
    params.push_back(MakeBuffer(name, value->dtype, {six}));
    stores.push_back(Store(params.back(), i, value));
  }
  const Library library({{"int_ops", params, 4, For(i, six, ForKind::kSerial, Seq(stores))}});

  constexpr int32_t kMin32 = std::numeric_limits<int32_t>::min();
  constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();
  std::vector<Tensor> args = {
      TensorNode::FromVector<int32_t>({6}, DataType::Int32(), {-7, 7, kMin32, 65536, 5, -1}),
      TensorNode::FromVector<int32_t>({6}, DataType::Int32(), {2, -2, -1, 65536, 7, 3}),
      TensorNode::FromVector<int64_t>({6}, DataType::Int64(), {-7, 7, kMin64, -8, 7, 0}),
      TensorNode::FromVector<int64_t>({6}, DataType::Int64(), {2, -2, -1, 4, 7, 5}),
  };
  for (const auto& [name, value] : outputs) args.push_back(TensorNode::Empty({6}, value->dtype));
  ASSERT_EQ(library.Call("int_ops", args), 0);
  using V32 = std::vector<int32_t>;
  using V64 = std::vector<int64_t>;
  EXPECT_EQ(Values<int32_t>(args[4]), (V32{-14, -14, kMin32, 0, 35, -3}));
  EXPECT_EQ(Values<int32_t>(args[5]), (V32{-9, 9, kMin32 + 1, 0, -2, -4}));
  EXPECT_EQ(Values<int32_t>(args[6]), (V32{-3, -3, kMin32, 1, 0, 0}));
  EXPECT_EQ(Values<int32_t>(args[7]), (V32{-7, -2, kMin32, 65536, 5, -1}));
  EXPECT_EQ(Values<int32_t>(args[8]), (V32{7, 7, kMin32, 65536, 5, 1}));
  EXPECT_EQ(Values<int64_t>(args[9]), (V64{-4, -4, kMin64, -2, 1, 0}));
  EXPECT_EQ(Values<int64_t>(args[10]), (V64{1, -1, 0, 0, 0, 0}));
  EXPECT_EQ(Values<int64_t>(args[11]), (V64{-2, 1, kMin64 / 4, -2, 1, 0}));

  // A zero divisor fails the kernel, as the runtime's divide does.
  args[1] = TensorNode::FromVector<int32_t>({6}, DataType::Int32(), {1, 1, 0, 1, 1, 1});
  EXPECT_NE(library.Call("int_ops", args), 0);
  EXPECT_EQ(vm::TakeKernelError(), "int_ops: integer division by zero");
}

TEST(CodegenTest, ComparesSelectsAndStoresBools) {
  const Var n = MakeVar("n");
  const Var i = MakeVar("i");
  const Buffer a = MakeBuffer("a", DataType::Int32(), {n});
  const Buffer b = MakeBuffer("b", DataType::Int32(), {n});
  const Buffer u = MakeBuffer("u", DataType::UInt8(), {n});
  const Buffer less = MakeBuffer("less", DataType::Bool(), {n});
  const Buffer logic = MakeBuffer("logic", DataType::Bool(), {n});
  const Buffer picked = MakeBuffer("picked", DataType::Int32(), {n});
  const Buffer big = MakeBuffer("big", DataType::Bool(), {n});
  const Stmt body = For(
      i, n, ForKind::kVectorized,
      Seq({Store(less, i, Compare(CompareOp::kLt, Load(a, i), Load(b, i))),
           Store(logic, i,
                 Or(And(Compare(CompareOp::kGt, Load(a, i), IntImm(0, DataType::Int32())),
                        tir::Not(Load(less, i))),
                    Compare(CompareOp::kEq, Load(a, i), Load(b, i)))),
           Store(picked, i,
                 Add(Select(Load(less, i), Load(a, i), Load(b, i)),
                     Mul(Cast(DataType::Int32(), Load(logic, i)), IntImm(100, DataType::Int32())))),
           Store(big, i, Compare(CompareOp::kGt, Load(u, i), IntImm(100, DataType::UInt8())))}));
  const Library library({{"bools", {a, b, u, less, logic, picked, big}, 3, body}});

  std::vector<Tensor> args = {
      TensorNode::FromVector<int32_t>({5}, DataType::Int32(), {1, 5, -3, 4, 0}),
      TensorNode::FromVector<int32_t>({5}, DataType::Int32(), {2, 3, -3, 4, -1}),
      TensorNode::FromVector<int32_t>({5}, DataType::UInt8(), {200, 100, 0, 101, 255}),
      TensorNode::Empty({5}, DataType::Bool()),
      TensorNode::Empty({5}, DataType::Bool()),
      TensorNode::Empty({5}, DataType::Int32()),
      TensorNode::Empty({5}, DataType::Bool()),
  };
  ASSERT_EQ(library.Call("bools", args), 0);
  // Bools are stored as bytes 0 and 1.
  EXPECT_EQ(Values<uint8_t>(args[3]), (std::vector<uint8_t>{1, 0, 0, 0, 0}));
  EXPECT_EQ(Values<uint8_t>(args[4]), (std::vector<uint8_t>{0, 1, 1, 1, 0}));
  EXPECT_EQ(Values<int32_t>(args[5]), (std::vector<int32_t>{1, 103, 97, 104, -1}));
  EXPECT_EQ(Values<uint8_t>(args[6]), (std::vector<uint8_t>{1, 0, 0, 1, 1}));
}

// Casts follow the runtime's ConvertElement: float to integer truncates and
// saturates, NaN gives 0; to bool is != 0 (NaN too); from bool is 0 or 1.
TEST(CodegenTest, CastsConvertAsTheRuntime) {
  const std::vector<float> xs = {kNaN, -kInf, kInf, -1e10f, 1e10f,  -3.7f,  -0.5f,
                                 0.0f, 0.5f,  2.9f, 127.9f, 128.0f, 255.5f, 300.0f};
  const auto size = static_cast<int64_t>(xs.size());
  const Var i = MakeVar("i");
  const Buffer x = MakeBuffer("x", DataType::Float32(), {IntImm(size)});
  const std::vector<DataType> targets = {DataType::Int32(), DataType::UInt8(), DataType::Int8(),
                                         DataType::Int64(), DataType::Bool(),  DataType::Float64()};
  std::vector<Buffer> params = {x};
  std::vector<Stmt> stores;
  for (const DataType dtype : targets) {
    params.push_back(MakeBuffer(dtype.name(), dtype, {IntImm(size)}));
    stores.push_back(Store(params.back(), i, Cast(dtype, Load(x, i))));
  }
  // int32 -> float32 and bool -> float32 through the first two outputs.
  const Buffer from_int = MakeBuffer("from_int", DataType::Float32(), {IntImm(size)});
  const Buffer from_bool = MakeBuffer("from_bool", DataType::Int32(), {IntImm(size)});
  params.push_back(from_int);
  params.push_back(from_bool);
  stores.push_back(Store(from_int, i, Cast(DataType::Float32(), Load(params[1], i))));
  stores.push_back(Store(from_bool, i, Cast(DataType::Int32(), Load(params[5], i))));
  const Library library(
      {{"casts", params, 1, For(i, IntImm(size), ForKind::kSerial, Seq(stores))}});

  std::vector<Tensor> args = {TensorNode::FromVector({size}, DataType::Float32(), xs)};
  for (size_t k = 1; k < params.size(); ++k)
    args.push_back(TensorNode::Empty({size}, params[k]->dtype));
  ASSERT_EQ(library.Call("casts", args), 0);
  for (int64_t k = 0; k < size; ++k) {
    const float value = xs[k];
    EXPECT_EQ(args[1]->data<int32_t>()[k], ConvertElement<int32_t>(value)) << value;
    EXPECT_EQ(args[2]->data<uint8_t>()[k], ConvertElement<uint8_t>(value)) << value;
    EXPECT_EQ(args[3]->data<int8_t>()[k], ConvertElement<int8_t>(value)) << value;
    EXPECT_EQ(args[4]->data<int64_t>()[k], ConvertElement<int64_t>(value)) << value;
    EXPECT_EQ(args[5]->data<uint8_t>()[k], ConvertElement<bool>(value) ? 1 : 0) << value;
    const double widened = args[6]->data<double>()[k];
    EXPECT_TRUE(widened == static_cast<double>(value) ||
                (std::isnan(widened) && std::isnan(value)));
    EXPECT_EQ(args[7]->data<float>()[k], static_cast<float>(ConvertElement<int32_t>(value)));
    EXPECT_EQ(args[8]->data<int32_t>()[k], ConvertElement<bool>(value) ? 1 : 0);
  }
}

// ---------------------------------------------------------------------------
// Reductions, parallel loops, allocations

// out[r] = sum of x[r, :], accumulated in a one-element temporary by a
// vectorised loop whose additions may be reordered.
TEST(CodegenTest, ReassociatedSumMatchesADoubleSum) {
  const Var rows = MakeVar("rows");
  const Var cols = MakeVar("cols");
  const Var r = MakeVar("r");
  const Var c = MakeVar("c");
  const Buffer x = MakeBuffer("x", DataType::Float32(), {rows, cols});
  const Buffer out = MakeBuffer("out", DataType::Float32(), {rows});
  const Buffer acc = MakeBuffer("acc", DataType::Float32(), {IntImm(1)});
  const Stmt body = For(
      r, rows, ForKind::kSerial,
      Allocate(acc,
               Seq({Store(acc, IntImm(0), FloatImm(0)),
                    For(c, cols, ForKind::kVectorized,
                        Store(acc, IntImm(0),
                              Add(Load(acc, IntImm(0)), Load(x, FlatIndex({rows, cols}, {r, c}))),
                              /*reassociate=*/true)),
                    Store(out, r, Load(acc, IntImm(0)))})));
  const std::vector<PrimFunc> kernels = {{"row_sum", {x, out}, 1, body}};
  const Library library(kernels);
  EXPECT_THAT(EmitLLVMText(kernels, HostTarget()), HasSubstr("fadd reassoc contract <"));

  std::mt19937 random(11);
  std::uniform_real_distribution<float> uniform(0, 1);
  std::vector<float> values(3 * 1001);
  for (float& value : values) value = uniform(random);
  const Tensor out_tensor = TensorNode::Empty({3}, DataType::Float32());
  ASSERT_EQ(library.Call("row_sum", {TensorNode::FromVector({3, 1001}, DataType::Float32(), values),
                                     out_tensor}),
            0);
  for (int row = 0; row < 3; ++row) {
    double expected = 0;
    for (int col = 0; col < 1001; ++col) expected += values[row * 1001 + col];
    EXPECT_NEAR(out_tensor->data<float>()[row], expected, expected * 1e-5);
  }
}

// A parallel loop over 2^20 elements on the runtime's thread pool; its body
// uses buffers, a shape variable and a let variable from around it.
TEST(CodegenTest, ParallelLoopRunsOnTheThreadPool) {
  const Var n = MakeVar("n");
  const Var half = MakeVar("half");
  const Var i = MakeVar("i");
  const Buffer a = MakeBuffer("a", DataType::Int32(), {n});
  const Buffer d = MakeBuffer("d", DataType::Int32(), {n});
  const Buffer out = MakeBuffer("out", DataType::Int32(), {n});
  const Expr value =
      Add(Div(Mul(Load(a, i), IntImm(3, DataType::Int32())), Load(d, i)),
          Cast(DataType::Int32(), Select(Compare(CompareOp::kLt, i, half), i, Sub(n, i))));
  const Stmt body = Let(half, FloorDiv(n, IntImm(2)),
                        For(i, n, ForKind::kParallel, Store(out, i, value), IntImm(4096)));
  const std::vector<PrimFunc> kernels = {{"parallel_div", {a, d, out}, 2, body}};
  const Library library(kernels);

  constexpr int64_t kSize = int64_t{1} << 20;
  std::vector<int32_t> as(kSize), ds(kSize, 1);
  for (int64_t k = 0; k < kSize; ++k) {
    as[k] = static_cast<int32_t>(k % 1000 - 500);
    ds[k] = static_cast<int32_t>(k % 7 + 1);
  }
  const Tensor out_tensor = TensorNode::Empty({kSize}, DataType::Int32());
  std::vector<Tensor> args = {TensorNode::FromVector({kSize}, DataType::Int32(), as),
                              TensorNode::FromVector({kSize}, DataType::Int32(), ds), out_tensor};
  ASSERT_EQ(library.Call("parallel_div", args), 0);
  const int32_t* got = out_tensor->data<int32_t>();
  int64_t mismatches = 0;
  for (int64_t k = 0; k < kSize; ++k) {
    const int64_t expected = as[k] * 3 / ds[k] + (k < kSize / 2 ? k : kSize - k);
    mismatches += got[k] != expected;
  }
  EXPECT_EQ(mismatches, 0);

  // A chunk's failure on a worker thread reaches the caller with its message.
  ds[kSize - 3] = 0;
  args[1] = TensorNode::FromVector({kSize}, DataType::Int32(), ds);
  EXPECT_NE(library.Call("parallel_div", args), 0);
  EXPECT_EQ(vm::TakeKernelError(), "parallel_div: integer division by zero");
}

// Temporaries above 64 KiB, or of a symbolic size, live on the heap.
TEST(CodegenTest, LargeAllocationsUseTheHeap) {
  constexpr int64_t kSize = 32768;  // 128 KiB of float32
  const Var n = MakeVar("n");
  const Var i = MakeVar("i");
  const Buffer a = MakeBuffer("a", DataType::Float32(), {IntImm(kSize)});
  const Buffer b = MakeBuffer("b", DataType::Int64(), {n});
  const Buffer out = MakeBuffer("out", DataType::Float32(), {IntImm(kSize)});
  const Buffer out_b = MakeBuffer("out_b", DataType::Int64(), {n});
  const Buffer big = MakeBuffer("big", DataType::Float32(), {IntImm(kSize)});
  const Buffer sized = MakeBuffer("sized", DataType::Int64(), {n});
  const Stmt body = Seq({
      Allocate(big, Seq({For(i, IntImm(kSize), ForKind::kVectorized,
                             Store(big, i, Mul(Load(a, i), FloatImm(2)))),
                         For(i, IntImm(kSize), ForKind::kSerial,
                             Store(out, i, Load(big, Sub(IntImm(kSize - 1), i))))})),
      Allocate(sized, Seq({For(i, n, ForKind::kSerial, Store(sized, i, Mul(Load(b, i), i))),
                           For(i, n, ForKind::kSerial, Store(out_b, i, Load(sized, i)))})),
  });
  const std::vector<PrimFunc> kernels = {{"heap", {a, b, out, out_b}, 2, body}};
  EXPECT_THAT(EmitLLVMText(kernels, HostTarget()), HasSubstr("@malloc("));
  const Library library(kernels);

  std::vector<float> as(kSize);
  for (int64_t k = 0; k < kSize; ++k) as[k] = static_cast<float>(k);
  for (const int64_t size : {0, 5}) {
    std::vector<int64_t> bs(size, 3);
    const Tensor out_tensor = TensorNode::Empty({kSize}, DataType::Float32());
    const Tensor out_b_tensor = TensorNode::Empty({size}, DataType::Int64());
    ASSERT_EQ(library.Call("heap", {TensorNode::FromVector({kSize}, DataType::Float32(), as),
                                    TensorNode::FromVector({size}, DataType::Int64(), bs),
                                    out_tensor, out_b_tensor}),
              0);
    for (int64_t k = 0; k < kSize; ++k) {
      ASSERT_EQ(out_tensor->data<float>()[k], 2.0f * static_cast<float>(kSize - 1 - k));
    }
    for (int64_t k = 0; k < size; ++k) EXPECT_EQ(out_b_tensor->data<int64_t>()[k], 3 * k);
  }
}

// A library loaded by other means than KernelLibrary has no runtime hooks:
// its parallel loops run on the calling thread and its errors carry no
// message.
TEST(CodegenTest, RunsWhereNoRuntimeFilledTheHooks) {
  const Var n = MakeVar("n");
  const Var i = MakeVar("i");
  const Buffer a = MakeBuffer("a", DataType::Int64(), {n});
  const Buffer out = MakeBuffer("out", DataType::Int64(), {n});
  const Stmt body = Assert(Compare(CompareOp::kLt, n, IntImm(100)), "n is below 100",
                           For(i, n, ForKind::kParallel, Store(out, i, Mul(Load(a, i), i))));
  const std::vector<std::byte> bytes = LinkSharedLibrary(
      EmitObject(std::vector<PrimFunc>{{"scale", {a, out}, 1, body}}, HostTarget()), HostTarget());
  char path[] = "/tmp/nimble-codegen-test-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  close(fd);
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  unlink(path);
  ASSERT_NE(handle, nullptr) << dlerror();
  const auto kernel = reinterpret_cast<NimbleKernelFunc>(dlsym(handle, "scale"));
  ASSERT_NE(kernel, nullptr);
  for (const int64_t size : {10, 100}) {
    const Tensor input =
        TensorNode::FromVector<int64_t>({size}, DataType::Int64(), std::vector<int64_t>(size, 3));
    const Tensor output = TensorNode::Empty({size}, DataType::Int64());
    DLTensor args[] = {AsDLTensor(input), AsDLTensor(output)};
    DLTensor* pointers[] = {&args[0], &args[1]};
    const int status = kernel(nullptr, pointers, 2);
    EXPECT_EQ(vm::TakeKernelError(), "");
    if (size == 100) {
      EXPECT_NE(status, 0);
    } else {
      ASSERT_EQ(status, 0);
      for (int64_t k = 0; k < size; ++k) EXPECT_EQ(output->data<int64_t>()[k], 3 * k);
    }
  }
  dlclose(handle);
}

// ---------------------------------------------------------------------------
// Argument checks

class ArgumentChecksTest : public ::testing::Test {
 protected:
  // fused_add(a: float32[n, 8], b: float32[n, 8]) -> out: float32[n, 8],
  // which asserts n <= 4.
  static void SetUpTestSuite() {
    const Var n = MakeVar("n");
    const Var i = MakeVar("i");
    const Buffer a = MakeBuffer("a", DataType::Float32(), {n, IntImm(8)});
    const Buffer b = MakeBuffer("b", DataType::Float32(), {n, IntImm(8)});
    const Buffer out = MakeBuffer("out", DataType::Float32(), {n, IntImm(8)});
    const Stmt loop =
        For(i, Mul(n, IntImm(8)), ForKind::kVectorized, Store(out, i, Add(Load(a, i), Load(b, i))));
    const Stmt body = Assert(Compare(CompareOp::kLe, n, IntImm(4)), "n is at most 4", loop);
    library_ = new Library({{"fused_add", {a, b, out}, 2, body}});
  }
  static void TearDownTestSuite() {
    delete library_;
    library_ = nullptr;
  }

  // Calls fused_add on tensors of `rows` rows, adjusted by `adjust`; returns
  // the error it reports ("" for none), after checking its status.
  template <typename Adjust>
  std::string ErrorOfCall(int64_t rows, const Adjust& adjust) {
    const Tensor a = TensorNode::Empty({rows, 8}, DataType::Float32());
    const Tensor b = TensorNode::Empty({rows, 8}, DataType::Float32());
    const Tensor out = TensorNode::Empty({rows, 8}, DataType::Float32());
    std::vector<DLTensor> args = {AsDLTensor(a), AsDLTensor(b), AsDLTensor(out)};
    adjust(args);
    const int status = library_->Call("fused_add", args);
    std::string error = vm::TakeKernelError();
    EXPECT_EQ(status != 0, !error.empty()) << "status " << status << ", error '" << error << "'";
    return error;
  }

  static Library* library_;
};

Library* ArgumentChecksTest::library_ = nullptr;

TEST_F(ArgumentChecksTest, AcceptsMatchingArguments) {
  EXPECT_EQ(ErrorOfCall(3, [](std::vector<DLTensor>&) {}), "");
  // Compact strides are accepted, and the stride of an extent-1 dimension
  // does not matter.
  int64_t strides[] = {12345, 1};
  EXPECT_EQ(ErrorOfCall(1, [&](std::vector<DLTensor>& args) { args[0].strides = strides; }), "");
}

TEST_F(ArgumentChecksTest, ReportsEachMismatch) {
  EXPECT_EQ(ErrorOfCall(2, [](std::vector<DLTensor>& args) { args.pop_back(); }),
            "fused_add: expected 3 arguments");
  EXPECT_EQ(
      ErrorOfCall(2, [](std::vector<DLTensor>& args) { args[1].device.device_type = kDLCUDA; }),
      "fused_add: argument 1 (b): is not on the CPU");
  EXPECT_EQ(ErrorOfCall(2, [](std::vector<DLTensor>& args) { args[0].ndim = 1; }),
            "fused_add: argument 0 (a): rank is not 2");
  EXPECT_EQ(ErrorOfCall(2,
                        [](std::vector<DLTensor>& args) {
                          args[2].dtype = {kDLInt, 32, 1};
                        }),
            "fused_add: argument 2 (out): dtype is not float32");
  int64_t wide[] = {2, 9};
  EXPECT_EQ(ErrorOfCall(2, [&](std::vector<DLTensor>& args) { args[0].shape = wide; }),
            "fused_add: argument 0 (a): dimension 1 is not 8");
  int64_t taller[] = {3, 8};
  EXPECT_EQ(ErrorOfCall(2, [&](std::vector<DLTensor>& args) { args[1].shape = taller; }),
            "fused_add: argument 1 (b): dimension 0 is not n");
  int64_t strides[] = {16, 1};
  EXPECT_EQ(ErrorOfCall(2, [&](std::vector<DLTensor>& args) { args[2].strides = strides; }),
            "fused_add: argument 2 (out): strides are not compact row-major");
  EXPECT_EQ(ErrorOfCall(5, [](std::vector<DLTensor>&) {}), "fused_add: n is at most 4");
}

// ---------------------------------------------------------------------------
// Generated code and targets

TEST(CodegenTest, VectorisedLoopUsesTheHostsVectorsWithoutAliasChecks) {
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx2")) GTEST_SKIP() << "the host has no AVX2";
#else
  GTEST_SKIP() << "an x86-64 test";
#endif
  const Var n = MakeVar("n");
  const Var i = MakeVar("i");
  const Buffer a = MakeBuffer("a", DataType::Float32(), {n});
  const Buffer b = MakeBuffer("b", DataType::Float32(), {n});
  const Buffer out = MakeBuffer("out", DataType::Float32(), {n});
  const std::vector<PrimFunc> kernels = {
      {"mul_add",
       {a, b, out},
       2,
       For(i, n, ForKind::kVectorized,
           Store(out, i, Add(Mul(Load(a, i), Load(b, i)), Call(Intrinsic::kExp, {Load(a, i)}))))}};
  const std::string ir = EmitLLVMText(kernels, CodegenTargetFor("intel"));
  EXPECT_THAT(ir, ::testing::ContainsRegex("<(8|16) x float>"));
  EXPECT_THAT(ir, HasSubstr("noalias"));
  EXPECT_THAT(ir, ::testing::Not(HasSubstr("vector.memcheck")));  // no runtime alias checks
  EXPECT_THAT(ir, ::testing::Not(HasSubstr("@expf")));            // exp is inline
}

// A vectorised loop of run-time extent runs its tail as masked vector
// iterations where every vector instruction takes a mask (AVX-512), and
// keeps a scalar remainder on AVX2.
TEST(CodegenTest, VectorTailsAreMaskedOnAvx512Only) {
  const Var n = MakeVar("n");
  const Var i = MakeVar("i");
  const Buffer a = MakeBuffer("a", DataType::Float32(), {n});
  const Buffer out = MakeBuffer("out", DataType::Float32(), {n});
  const std::vector<PrimFunc> kernels = {
      {"exp",
       {a, out},
       1,
       For(i, n, ForKind::kVectorized, Store(out, i, Call(Intrinsic::kExp, {Load(a, i)})))}};
  CodegenTarget target = CodegenTargetFor("intel");
  target.triple = "x86_64-unknown-linux-gnu";
  target.cpu = "x86-64-v4";
  target.features = "+avx2,+fma,+avx512f";
  EXPECT_THAT(EmitLLVMText(kernels, target), HasSubstr("@llvm.masked.load"));
  target.cpu = "x86-64-v3";
  target.features = "+avx2,+fma,-avx512f";
  const std::string avx2 = EmitLLVMText(kernels, target);
  EXPECT_THAT(avx2, ::testing::ContainsRegex("<8 x float>"));
  EXPECT_THAT(avx2, ::testing::Not(HasSubstr("@llvm.masked.load")));
}

// Reads `symbol`'s definition from the dynamic symbol table of an ELF64
// shared object.
bool ExportsSymbol(const std::vector<std::byte>& elf, const std::string& symbol) {
  const auto* base = reinterpret_cast<const char*>(elf.data());
  Elf64_Ehdr header;
  std::memcpy(&header, base, sizeof header);
  for (int s = 0; s < header.e_shnum; ++s) {
    Elf64_Shdr section;
    std::memcpy(&section, base + header.e_shoff + s * sizeof section, sizeof section);
    if (section.sh_type != SHT_DYNSYM) continue;
    Elf64_Shdr strings;
    std::memcpy(&strings, base + header.e_shoff + section.sh_link * sizeof strings, sizeof strings);
    for (size_t k = 0; k < section.sh_size / sizeof(Elf64_Sym); ++k) {
      Elf64_Sym sym;
      std::memcpy(&sym, base + section.sh_offset + k * sizeof sym, sizeof sym);
      if (sym.st_shndx != SHN_UNDEF && base + strings.sh_offset + sym.st_name == symbol)
        return true;
    }
  }
  return false;
}

TEST(CodegenTest, ArmObjectLinksIntoAnAarch64SharedObject) {
  const CodegenTarget arm = CodegenTargetFor("arm");
  const std::vector<PrimFunc> kernels = {
      UnaryKernel("arm_tanh", Intrinsic::kTanh, DataType::Float32())};
  const std::vector<std::byte> library = LinkSharedLibrary(EmitObject(kernels, arm), arm);
  ASSERT_GT(library.size(), sizeof(Elf64_Ehdr));
  Elf64_Ehdr header;
  std::memcpy(&header, library.data(), sizeof header);
  EXPECT_EQ(std::memcmp(header.e_ident, ELFMAG, SELFMAG), 0);
  EXPECT_EQ(header.e_type, ET_DYN);
  EXPECT_EQ(header.e_machine, EM_AARCH64);
  EXPECT_TRUE(ExportsSymbol(library, "arm_tanh"));
  EXPECT_TRUE(ExportsSymbol(library, "nimble_runtime"));
  EXPECT_THAT(EmitLLVMText(kernels, arm), HasSubstr("<4 x float>"));  // NEON
}

TEST(CodegenTest, LinkerFailuresCarryItsMessages) {
  const std::vector<std::byte> garbage(64, std::byte{0x2a});
  const std::string error = ErrorOf([&] { LinkSharedLibrary(garbage, HostTarget()); });
  EXPECT_THAT(error, HasSubstr("linking kernels for " + HostTarget().name + " failed: "));
  EXPECT_THAT(error, HasSubstr("kernels.o"));  // lld names the file it cannot read
}

TEST(CodegenTest, RejectsWhatItCannotCompile) {
  const Var i = MakeVar("i");
  const Buffer half = MakeBuffer("h", DataType::Float16(), {IntImm(4)});
  const Buffer f = MakeBuffer("f", DataType::Float32(), {IntImm(4)});
  const Buffer tmp = MakeBuffer("tmp", DataType::Float32(), {IntImm(4)});
  auto error_of = [](const PrimFunc& kernel) {
    return ErrorOf([&] { EmitObject(std::vector<PrimFunc>{kernel}, HostTarget()); });
  };
  EXPECT_EQ(error_of({"k", {half}, 1, Store(half, IntImm(0), Load(half, IntImm(1)))}),
            "kernel k: float16 is not supported by code generation");
  EXPECT_EQ(error_of({"k", {f}, 1, Store(f, i, FloatImm(0))}), "kernel k: variable i is not bound");
  EXPECT_EQ(error_of({"k",
                      {f},
                      1,
                      Allocate(tmp, Assert(BoolImm(true), "m", Store(f, IntImm(0), FloatImm(0))))}),
            "kernel k: an Assert inside an Allocate is not supported");
  EXPECT_EQ(
      error_of({"k",
                {f},
                1,
                For(i, IntImm(4), ForKind::kParallel,
                    Assert(Compare(CompareOp::kLt, i, IntImm(2)), "m", Store(f, i, FloatImm(0))))}),
      "kernel k: an Assert inside a parallel or GPU loop is not supported");
  EXPECT_THAT(ErrorOf([&] {
                EmitObject(std::vector<PrimFunc>{{"k", {f}, 1, Store(f, IntImm(0), FloatImm(0))},
                                                 {"k", {f}, 1, Store(f, IntImm(0), FloatImm(0))}},
                           HostTarget());
              }),
              HasSubstr("kernel name 'k' is used twice"));
}

// ---------------------------------------------------------------------------
// The GPU

// out[r] = max over j of x[r, j], a block of threads per row: each thread
// takes every 256th element, then the block combines the threads' maxima.
PrimFunc RowMaxOnTheGpu(Intrinsic combine) {
  const Var rows = MakeVar("rows"), length = MakeVar("length");
  const Var r = MakeVar("r"), j = MakeVar("j");
  const Buffer x = MakeBuffer("x", DataType::Float32(), {rows, length});
  const Buffer out = MakeBuffer("out", DataType::Float32(), {rows});
  const Buffer acc = MakeBuffer("acc", DataType::Float32(), {IntImm(1)});
  const Expr element = Load(x, Add(Mul(r, length), j));
  const Expr zero = IntImm(0);
  const Stmt row =
      Allocate(acc, Seq({Store(acc, zero, FloatImm(-kInf)),
                         For(j, length, ForKind::kGpuBlockStride,
                             Store(acc, zero,
                                   Select(Compare(CompareOp::kGt, element, Load(acc, zero)),
                                          element, Load(acc, zero)))),
                         Store(out, r, Call(combine, {Load(acc, zero)}))}));
  return {"row_max", {x, out}, 1, For(r, rows, ForKind::kGpuBlocks, row), PrimFunc::Device::kGpu};
}

TEST(CodegenGpuTest, BlockReductionCombinesInSharedMemory) {
  std::string ptx;
  EmitObject(std::vector<PrimFunc>{RowMaxOnTheGpu(Intrinsic::kBlockMax)},
             CodegenTargetFor("nvidia"), &ptx);
  EXPECT_THAT(ptx, HasSubstr(".shared .align 4 .b8 row_max_block_max[1024]"));
  EXPECT_THAT(ptx, HasSubstr("bar.sync"));
  // Block r is row r: the kernel reads the block index, not a thread index
  // scaled by the block size.
  EXPECT_THAT(ptx, HasSubstr("%ctaid.x"));
  if (testing::Ptxas().empty()) GTEST_SKIP() << "no ptxas here";
  const auto* bytes = reinterpret_cast<const std::byte*>(ptx.data());
  for (const char* arch : {"sm_80", "sm_90"}) {
    EXPECT_EQ(testing::PtxasRejects({bytes, ptx.size()}, arch), "");
  }
}

TEST(CodegenGpuTest, RejectsBlockCodeThatNotEveryThreadOfABlockRuns) {
  const Var i = MakeVar("i"), j = MakeVar("j");
  const Buffer f = MakeBuffer("f", DataType::Float32(), {IntImm(4)});
  auto error_of = [&](Stmt body) {
    const PrimFunc kernel{"k", {f}, 1, std::move(body), PrimFunc::Device::kGpu};
    std::string ptx;
    return ErrorOf(
        [&] { EmitObject(std::vector<PrimFunc>{kernel}, CodegenTargetFor("nvidia"), &ptx); });
  };
  const Stmt sum_into_f = Store(f, i, Call(Intrinsic::kBlockSum, {Load(f, i)}));
  EXPECT_EQ(error_of(For(i, IntImm(4), ForKind::kGpuThreads, sum_into_f)),
            "kernel k: block_sum outside the code that every thread of a gpu_blocks loop runs");
  EXPECT_EQ(error_of(For(i, IntImm(4), ForKind::kGpuBlocks,
                         For(j, IntImm(4), ForKind::kGpuBlockStride, sum_into_f))),
            "kernel k: block_sum outside the code that every thread of a gpu_blocks loop runs");
  EXPECT_EQ(error_of(For(i, IntImm(4), ForKind::kGpuThreads,
                         For(j, IntImm(4), ForKind::kGpuBlockStride, Store(f, j, FloatImm(0))))),
            "kernel k: gpu_block_stride loop j outside a gpu_blocks loop or inside another");
  EXPECT_EQ(
      error_of(For(i, IntImm(4), ForKind::kGpuBlocks,
                   For(j, IntImm(4), ForKind::kGpuBlockStride,
                       For(i, IntImm(4), ForKind::kGpuBlockStride, Store(f, i, FloatImm(0)))))),
      "kernel k: gpu_block_stride loop i outside a gpu_blocks loop or inside another");
}

// c = a * bᵀ for the GPU as te::Lower schedules it: the tiled template
// (te/gpu_matmul_schedule.h) of 256 threads, its operands staged in shared
// memory.
PrimFunc TiledProductOnTheGpu() {
  const Var rows = MakeVar("m");
  const Expr depth = IntImm(300), cols = IntImm(200);
  const te::Tensor a = te::Placeholder("a", DataType::Float32(), {rows, depth});
  const te::Tensor b = te::Placeholder("b", DataType::Float32(), {cols, depth});
  const te::Tensor c = te::Compute(
      "c", {rows, cols},
      [&](const std::vector<Expr>& indices) {
        const te::ReduceAxis k = te::MakeReduceAxis("k", depth);
        return te::Reduce(te::ReduceKind::kSum,
                          Mul(te::Read(a, {indices[0], k.var}), te::Read(b, {indices[1], k.var})),
                          {k});
      },
      te::ScheduleHint::kMatMul);
  return te::Lower("product", {a, b}, {c}, {}, {}, PrimFunc::Device::kGpu);
}

TEST(CodegenGpuTest, ATiledProductStagesItsOperandsInSharedMemory) {
  std::string ptx;
  EmitObject(std::vector<PrimFunc>{TiledProductOnTheGpu()}, CodegenTargetFor("nvidia"), &ptx);
  // Two slices of 16 x 65 floats (PTX spells "." in names "_$_"); each
  // thread's 16 sums in registers, none
  // in local memory.
  EXPECT_THAT(ptx, HasSubstr(".shared .align 16 .b8 product_c_$_first[4160]"));
  EXPECT_THAT(ptx, HasSubstr(".shared .align 16 .b8 product_c_$_second[4160]"));
  EXPECT_THAT(ptx, HasSubstr("bar.sync"));
  EXPECT_THAT(ptx, ::testing::Not(HasSubstr(".local")));
  if (testing::Ptxas().empty()) GTEST_SKIP() << "no ptxas here";
  const auto* bytes = reinterpret_cast<const std::byte*>(ptx.data());
  for (const char* arch : {"sm_80", "sm_90"}) {
    EXPECT_EQ(testing::PtxasRejects({bytes, ptx.size()}, arch), "");
  }
}

TEST(CodegenGpuTest, RejectsBlockThreadsAndSharedMemoryOutOfPlace) {
  const Var i = MakeVar("i"), t = MakeVar("t"), n = MakeVar("n");
  const Buffer f = MakeBuffer("f", DataType::Float32(), {IntImm(4)});
  const Buffer shared = std::make_shared<BufferNode>(
      "s", DataType::Float32(), std::vector<Expr>{IntImm(4)}, MemoryScope::kGpuShared);
  auto error_of = [&](Stmt body) {
    const PrimFunc kernel{"k", {f}, 1, std::move(body), PrimFunc::Device::kGpu};
    std::string ptx;
    return ErrorOf(
        [&] { EmitObject(std::vector<PrimFunc>{kernel}, CodegenTargetFor("nvidia"), &ptx); });
  };
  const Stmt store = Store(f, t, FloatImm(0));
  EXPECT_EQ(error_of(For(i, IntImm(4), ForKind::kGpuBlocks, Seq({Barrier(), store}))),
            "kernel k: a barrier outside a gpu_block_threads loop");
  EXPECT_EQ(
      error_of(For(i, IntImm(4), ForKind::kGpuBlocks, For(t, n, ForKind::kGpuBlockThreads, store))),
      "kernel k: gpu_block_threads loop t of extent n, not a constant from 1 to 1024");
  EXPECT_EQ(error_of(For(i, IntImm(4), ForKind::kGpuBlocks,
                         For(t, IntImm(2048), ForKind::kGpuBlockThreads, store))),
            "kernel k: gpu_block_threads loop t of extent 2048, not a constant from 1 to 1024");
  EXPECT_EQ(
      error_of(For(i, IntImm(4), ForKind::kGpuBlocks,
                   For(n, IntImm(2), ForKind::kSerial,
                       For(t, IntImm(4), ForKind::kGpuBlockThreads, store)))),
      "kernel k: gpu_block_threads loop t inside a loop or branch of its block, or after another");
  EXPECT_EQ(error_of(For(i, IntImm(4), ForKind::kGpuBlocks,
                         For(t, IntImm(4), ForKind::kGpuBlockThreads,
                             Allocate(shared, Store(shared, t, FloatImm(0)))))),
            "kernel k: shared buffer s outside the code that every thread of a gpu_blocks loop "
            "runs");
  EXPECT_EQ(error_of(For(i, IntImm(4), ForKind::kGpuThreads,
                         Allocate(shared, Store(shared, IntImm(0), FloatImm(0))))),
            "kernel k: shared buffer s outside the code that every thread of a gpu_blocks loop "
            "runs");
  const Buffer large = std::make_shared<BufferNode>(
      "large", DataType::Float32(), std::vector<Expr>{IntImm(20000)}, MemoryScope::kGpuShared);
  EXPECT_EQ(error_of(For(i, IntImm(4), ForKind::kGpuBlocks,
                         Allocate(large, For(t, IntImm(4), ForKind::kGpuBlockThreads,
                                             Store(large, t, FloatImm(0)))))),
            "kernel k: shared buffer large is not of a constant size within 49152 bytes a block");
  // A block combine's halving tree needs a power of two threads.
  EXPECT_EQ(error_of(For(i, IntImm(4), ForKind::kGpuBlocks,
                         Seq({For(t, IntImm(6), ForKind::kGpuBlockThreads, store),
                              Store(f, i, Call(Intrinsic::kBlockSum, {Load(f, i)}))}))),
            "kernel k: block_sum in a block of 6 threads, not a power of two");
}

}  // namespace
}  // namespace nimble::codegen
