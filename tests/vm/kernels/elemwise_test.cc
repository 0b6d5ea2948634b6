// The elementwise built-in kernels (vm/kernels/elemwise.cc) against the
// compiler's reference kernels: every unary and binary op, cast and where, on
// random inputs over rank-0, odd, empty and broadcast shapes in every dtype
// the op accepts, and on outputs large enough for the parallel path. The two
// kernels state each op's scalar function separately (elemwise_functions.h,
// compiler/op/reference_scalar.h), so they must agree exactly, or within
// UlpBound where the built-in one approximates. The integer semantics
// (wrap-around, truncating division) are also checked against literal values,
// and argument errors through the kernel ABI must come back as errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "nimble/vm/kernels/elemwise_functions.h"
#include "tests/error_of.h"
#include "tests/vm/kernels/kernel_test_util.h"

namespace nimble::vm::testing {
namespace {

using ::testing::HasSubstr;

constexpr DataType kUInt8(DataType::Code::kUInt, 8);
const std::vector<DataType> kAllDTypes = {
    DataType::Float32(), DataType::Float64(), DataType::Float16(), DataType::Int8(), kUInt8,
    DataType::Int32(),   DataType::Int64(),   DataType::Bool()};

bool Accepts(DTypeClass accepted, DataType dtype) {
  return DispatchDType(dtype, [&](auto tag) { return ElementInClass<decltype(tag)>(accepted); });
}

std::string DTypeString(DataType dtype) {
  return dtype.name();
}

// Random values in [low, high), narrowed to what `dtype` holds, so that no
// conversion while filling the tensor is out of range.
Tensor Random(const Shape& shape, DataType dtype, std::mt19937& rng, double low, double high) {
  if (dtype == DataType::Int8()) {
    low = std::max(low, -128.0);
    high = std::min(high, 128.0);
  } else if (dtype == kUInt8) {
    low = std::max(low, 0.0);
    high = std::min(high, 256.0);
  }
  return RandomTensor(shape, dtype, rng, low, high);
}

// Rounds float elements to quarters, so that comparisons, maximum and minimum
// also meet equal operands.
Tensor Quarters(Tensor tensor) {
  if (!tensor->dtype().is_float()) return tensor;
  for (int64_t i = 0; i < tensor->numel(); ++i) {
    tensor->SetFromDouble(i, std::round(tensor->GetAsDouble(i) * 4) / 4);
  }
  return tensor;
}

// One tensor's shapes: rank 0, odd sizes (no vector loop covers them
// whole), size-0 dimensions, higher ranks.
const std::vector<Shape> kShapes = {{},    {1}, {3},    {7},       {13},
                                    {257}, {0}, {3, 0}, {2, 3, 5}, {4, 1, 33}};

// Two broadcast operands: scalars, equal shapes, rows, columns, outer
// products, rank mismatches, size-1 and size-0 dimensions. Each runs both ways.
const std::vector<std::pair<Shape, Shape>> kShapePairs = {{{}, {}},
                                                          {{7}, {7}},
                                                          {{}, {13}},
                                                          {{3, 5}, {}},
                                                          {{3, 5}, {5}},
                                                          {{1, 5}, {3, 5}},
                                                          {{3, 1}, {3, 5}},
                                                          {{3, 1}, {1, 5}},
                                                          {{2, 1, 3}, {4, 1}},
                                                          {{2, 3, 1, 5}, {3, 4, 1}},
                                                          {{1, 1, 7}, {1, 1}},
                                                          {{3, 0}, {1}},
                                                          {{0}, {}},
                                                          {{257}, {1}},
                                                          {{5, 1, 1}, {1, 1, 1, 9}}};

// Outputs above two parallel grains, none a multiple of a vector: one long
// row, rows of broadcast operands, and short or long rows that chunks start
// and end inside.
const Shape kLarge = {513, 401};
const std::vector<std::pair<Shape, Shape>> kLargePairs = {
    {kLarge, kLarge}, {{513, 1}, {401}}, {{70001, 3}, {70001, 1}}, {{3, 70001}, {3, 1}}};

// Random values in the domain of unary op `op`.
Tensor UnaryInput(const std::string& op, const Shape& shape, DataType dtype, std::mt19937& rng) {
  const bool positive = op == "log" || op == "sqrt" || op == "rsqrt";
  return Random(shape, dtype, rng, positive ? 0.05 : -4.0, 4.0);
}

// Random operands for binary op `op`: integer divisors are never zero and
// integer exponents never negative (both errors, tested on their own).
std::vector<Ref<Object>> BinaryInputs(const std::string& op, const Shape& a_shape,
                                      const Shape& b_shape, DataType dtype, std::mt19937& rng) {
  const bool integer = dtype.is_int();
  Tensor a = Quarters(Random(a_shape, dtype, rng, op == "power" ? 0.0 : -4.0, 4.0));
  Tensor b;
  if ((op == "divide" || op == "mod" || op == "floor_mod") && integer) {
    b = Random(b_shape, dtype, rng, 1.0, 5.0);
    for (int64_t i = 0; dtype != kUInt8 && i < b->numel(); i += 2) {
      b->SetFromDouble(i, -b->GetAsDouble(i));
    }
  } else if (op == "power") {
    b = Quarters(Random(b_shape, dtype, rng, integer ? 0.0 : -3.0, 4.0));
  } else {
    b = Quarters(Random(b_shape, dtype, rng, -4.0, 4.0));
  }
  return {a, b};
}

std::vector<std::string> UnaryOps() {
  std::vector<std::string> ops;
  elemwise::ForEachUnaryFunction([&](const char* name, auto) { ops.push_back(name); });
  return ops;
}

std::vector<std::string> BinaryOps() {
  std::vector<std::string> ops;
  elemwise::ForEachBinaryFunction([&](const char* name, auto) { ops.push_back(name); });
  return ops;
}

Attrs CastTo(DataType dtype) {
  Attrs attrs;
  attrs.Set("dtype", dtype);
  return attrs;
}

// vector_math.h's documented accuracy, in ulps of the float32 result from the
// exact value, of the functions the built-in kernels compute with it for
// float32 and float16 (gelu's is documented as a relative error; UlpBound).
double VectorMathUlps(const std::string& op) {
  if (op == "exp") return 1.01;
  if (op == "tanh") return 1.3;
  if (op == "sigmoid") return 2.8;
  if (op == "erf") return 2.4;
  return 0;
}

// The largest UlpDistance between the built-in kernel's result of `op` on
// inputs of `dtype` and the reference's.
//
// The reference evaluates float32 and float16 in double and rounds once, so
// it is within 0.5 ulp of the exact value; a built-in kernel that
// approximates may be its own documented distance from the exact value
// further away:
// - exp, tanh, sigmoid, erf: VectorMathUlps;
// - gelu: relative error <= 2e-6 for x >= -5 (vector_math.h; the inputs
//   here, but for special values far below, where both give -0), which is at
//   most 2e-6 * 2^24 = 33.6 ulps, an ulp being at least 2^-24 of a float;
// - log, power: libm's float32 logf and powf, within 1 ulp;
// - rsqrt: 1 / sqrtf(x), rounded twice, within 1.5 ulp.
// A float16 result is within 1 ulp of the reference's for all of these (both
// round float32 values much closer than that), under each bound. float64
// evaluates the same libm expressions on both sides, and the other ops are
// exactly rounded on both (IEEE +, -, *, /, sqrt, comparisons, conversions,
// integer arithmetic; elu, hard_sigmoid and softplus, which both sides
// compute in double and round once): for them the bound is 0, exact
// equality.
double UlpBound(const std::string& op, DataType dtype) {
  constexpr double kReferenceRounding = 0.5;
  if (dtype == DataType::Float64()) return 0;
  if (VectorMathUlps(op) > 0) return VectorMathUlps(op) + kReferenceRounding;
  if (op == "gelu") return 2e-6 * (1 << 24) + kReferenceRounding;
  if (op == "log" || op == "power") return 1 + kReferenceRounding;
  if (op == "rsqrt") return 1.5 + kReferenceRounding;
  return 0;
}

// ExpectBuiltinMatchesReference within the UlpBound of `op` on the dtype of
// its first input.
void ExpectElemwiseMatches(const std::string& op, const std::vector<Ref<Object>>& args,
                           const Attrs& attrs = {}) {
  const DataType dtype = args[0].as<TensorNode>()->dtype();
  ExpectBuiltinMatchesReference(op, args, attrs, {.ulps = UlpBound(op, dtype)});
}

// The reference's result, the `like` RunBuiltin needs.
Tensor Reference(const std::string& op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  const nimble::op::OpDef* def = nimble::op::OpRegistry::Global().Find(op);
  return nimble::op::InvokeOp(*def, {inputs.begin(), inputs.end()},
                              nimble::op::NormalizeAttrs(*def, attrs))
      .as<TensorNode>();
}

// The built-in kernel's result, run as the VM runs it.
Tensor Builtin(const std::string& op, const std::vector<Tensor>& inputs, const Attrs& attrs = {}) {
  const nimble::op::OpDef* def = nimble::op::OpRegistry::Global().Find(op);
  return RunBuiltin(op, nimble::op::NormalizeAttrs(*def, attrs), inputs,
                    {Reference(op, inputs, attrs)})[0];
}

std::vector<int64_t> Int64Elements(const Tensor& tensor) {
  std::vector<int64_t> values;
  for (int64_t i = 0; i < tensor->numel(); ++i) values.push_back(tensor->GetAsInt64(i));
  return values;
}

// The built-in kernel's error through the ABI, with outputs given as
// (shape, dtype) rather than from the shape function.
std::string KernelError(const std::string& op, std::vector<Tensor> arguments,
                        const Attrs& attrs = {}) {
  return ErrorOf([&] { CallKernel(op, attrs, arguments); });
}

TEST(ElemwiseKernels, EveryOpHasARuntimeKernel) {
  const std::vector<std::string> expected = {"negative",
                                             "abs",
                                             "exp",
                                             "log",
                                             "sqrt",
                                             "rsqrt",
                                             "tanh",
                                             "sigmoid",
                                             "nn.relu",
                                             "erf",
                                             "gelu",
                                             "round",
                                             "copy",
                                             "logical_not",
                                             "cast",
                                             "add",
                                             "subtract",
                                             "multiply",
                                             "divide",
                                             "power",
                                             "maximum",
                                             "minimum",
                                             "equal",
                                             "not_equal",
                                             "less",
                                             "less_equal",
                                             "greater",
                                             "greater_equal",
                                             "logical_and",
                                             "logical_or",
                                             "where",
                                             "floor",
                                             "ceil",
                                             "sign",
                                             "nn.leaky_relu",
                                             "nn.elu",
                                             "nn.hard_sigmoid",
                                             "nn.softplus",
                                             "clip",
                                             "isnan",
                                             "mod",
                                             "floor_mod",
                                             "logical_xor"};
  std::vector<std::string> tabled = UnaryOps();
  for (const std::string& op : BinaryOps()) tabled.push_back(op);
  tabled.push_back("cast");
  tabled.push_back("where");
  EXPECT_EQ(std::set<std::string>(tabled.begin(), tabled.end()),
            std::set<std::string>(expected.begin(), expected.end()));
  for (const std::string& op : expected) {
    SCOPED_TRACE(op);
    const OpKernelDef* def = OpKernelRegistry::Global().Find(op);
    ASSERT_NE(def, nullptr);
    EXPECT_TRUE(def->kernel);
    EXPECT_TRUE(def->shape_func);
    EXPECT_EQ(def->shape_mode, ShapeFuncMode::kDataIndependent);
    EXPECT_EQ(def->NumOutputs({}), 1);
    const nimble::op::OpDef* compiler = nimble::op::OpRegistry::Global().Find(op);
    ASSERT_NE(compiler, nullptr);
    EXPECT_TRUE(compiler->shape_func && compiler->kernel);
    EXPECT_TRUE(KernelRegistry::Global().Contains(op));
    EXPECT_TRUE(KernelRegistry::Global().Contains(ShapeFuncKernelName(op)));
  }
}

TEST(ElemwiseKernels, UnaryOpsInEveryAcceptedDType) {
  std::mt19937 rng(1);
  elemwise::ForEachUnaryFunction([&](const std::string& op, auto fn) {
    for (const DataType dtype : kAllDTypes) {
      if (!Accepts(decltype(fn)::kAccepts, dtype)) continue;
      for (const Shape& shape : kShapes) {
        ExpectElemwiseMatches(op, {UnaryInput(op, shape, dtype, rng)});
      }
    }
  });
}

TEST(ElemwiseKernels, BinaryOpsBroadcastInEveryAcceptedDType) {
  std::mt19937 rng(2);
  elemwise::ForEachBinaryFunction([&](const std::string& op, auto fn) {
    for (const DataType dtype : kAllDTypes) {
      if (!Accepts(decltype(fn)::kAccepts, dtype)) continue;
      for (const auto& [a, b] : kShapePairs) {
        ExpectElemwiseMatches(op, BinaryInputs(op, a, b, dtype, rng));
        ExpectElemwiseMatches(op, BinaryInputs(op, b, a, dtype, rng));
      }
    }
  });
}

// NaN, infinities, signed zero, halves (round's ties) and huge values, where
// float formulas and conversions have their corner cases.
TEST(ElemwiseKernels, FloatSpecialValues) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> specials = {std::numeric_limits<double>::quiet_NaN(),
                                        inf,
                                        -inf,
                                        -0.0,
                                        0.0,
                                        0.5,
                                        -0.5,
                                        2.5,
                                        -2.5,
                                        1e30,
                                        -1e-30,
                                        300.7,
                                        -129.9};
  const int64_t n = static_cast<int64_t>(specials.size());
  for (const DataType dtype : {DataType::Float32(), DataType::Float64(), DataType::Float16()}) {
    SCOPED_TRACE(DTypeString(dtype));
    const Tensor x = TensorNode::FromVector<double>({n}, dtype, specials);
    std::vector<double> reversed(specials.rbegin(), specials.rend());
    const Tensor y = TensorNode::FromVector<double>({n}, dtype, reversed);
    for (const std::string& op : UnaryOps()) {
      if (op != "logical_not") ExpectElemwiseMatches(op, {x});
    }
    for (const std::string& op : BinaryOps()) {
      if (op != "logical_and" && op != "logical_or" && op != "logical_xor") {
        ExpectElemwiseMatches(op, {x, y});
      }
    }
    for (const DataType to : kAllDTypes) ExpectElemwiseMatches("cast", {x}, CastTo(to));
  }
}

TEST(ElemwiseKernels, CastBetweenEveryPairOfDTypes) {
  std::mt19937 rng(3);
  for (const DataType from : kAllDTypes) {
    for (const DataType to : kAllDTypes) {
      for (const Shape& shape : {Shape{}, Shape{7}, Shape{3, 0}, Shape{257}, Shape{2, 3, 5}}) {
        // Beyond int8's range, so that narrowing wraps and float saturates.
        ExpectElemwiseMatches("cast", {Random(shape, from, rng, -300.0, 300.0)}, CastTo(to));
      }
    }
  }
}

TEST(ElemwiseKernels, WhereBroadcastsAllThreeInputs) {
  struct Case {
    Shape condition, x, y;
  };
  const std::vector<Case> cases = {
      {{}, {}, {}},
      {{7}, {}, {}},
      {{}, {13}, {3, 1}},
      {{2, 1, 5}, {1, 3, 1}, {3, 5}},
      {{1}, {13}, {3, 13}},
      {{4, 1}, {1, 7}, {4, 7}},
      {{3, 1, 1}, {2, 1}, {1, 1, 5}},
      {{0, 3}, {3}, {1}},
      {{257}, {257}, {257}},
  };
  std::mt19937 rng(4);
  for (const DataType dtype : kAllDTypes) {
    for (const Case& test : cases) {
      ExpectElemwiseMatches(
          "where", {RandomTensor(test.condition, DataType::Bool(), rng),
                    Random(test.x, dtype, rng, -4.0, 4.0), Random(test.y, dtype, rng, -4.0, 4.0)});
    }
  }
}

TEST(ElemwiseKernels, LargeOutputsTakeTheParallelPath) {
  std::mt19937 rng(5);
  const DataType f32 = DataType::Float32();
  for (const std::string& op : UnaryOps()) {
    const DataType dtype = op == "logical_not" ? DataType::Bool() : f32;
    ExpectElemwiseMatches(op, {UnaryInput(op, kLarge, dtype, rng)});
  }
  for (const std::string& op : BinaryOps()) {
    const bool logical = op == "logical_and" || op == "logical_or" || op == "logical_xor";
    const DataType dtype = logical ? DataType::Bool() : f32;
    ExpectElemwiseMatches(op, BinaryInputs(op, kLarge, kLarge, dtype, rng));
  }
  for (const std::string op : {"add", "less", "maximum"}) {
    for (const auto& [a, b] : kLargePairs) {
      ExpectElemwiseMatches(op, BinaryInputs(op, a, b, f32, rng));
      ExpectElemwiseMatches(op, BinaryInputs(op, b, a, f32, rng));
    }
  }
  for (const DataType dtype : {DataType::Int32(), DataType::Int64(), DataType::Float16()}) {
    ExpectElemwiseMatches("divide", BinaryInputs("divide", {70001, 3}, {3}, dtype, rng));
  }
  for (const DataType to : {DataType::Int32(), DataType::Float16(), f32}) {
    ExpectElemwiseMatches("cast", {Random(kLarge, f32, rng, -1e3, 1e3)}, CastTo(to));
  }
  ExpectElemwiseMatches(
      "where", {RandomTensor({513, 1}, DataType::Bool(), rng), Random({401}, f32, rng, -4.0, 4.0),
                Random(kLarge, f32, rng, -4.0, 4.0)});
  ExpectElemwiseMatches(
      "where", {RandomTensor({70001, 1}, DataType::Bool(), rng), Random({}, f32, rng, -4.0, 4.0),
                Random({70001, 3}, f32, rng, -4.0, 4.0)});
}

// The float32 kernel of `op` (its vector loop) on `values`.
std::vector<float> RunFloat32(const std::string& op, const std::vector<float>& values) {
  const int64_t n = static_cast<int64_t>(values.size());
  const Tensor x = TensorNode::FromVector<float>({n}, DataType::Float32(), values);
  const Tensor y = TensorNode::Empty({n}, DataType::Float32());
  CallKernel(op, {}, {x, y});
  return std::vector<float>(y->data<float>(), y->data<float>() + n);
}

// out = fn(in) in vector_math's portable loop, compiled for the baseline
// instruction set (no FMA): what a CPU without AVX2 runs.
template <typename Fn>
std::vector<float> RunBaseline(const Fn& fn, const std::vector<float>& values) {
  std::vector<float> out(values.size());
  vector_math::detail::MapLoop(values.data(), out.data(), static_cast<int64_t>(values.size()), fn);
  return out;
}

// vector_math.h's float32 functions against double-precision libm on 10^6
// evenly spaced points per range, within the bounds it documents (ulps of the
// result; gelu as relative error, where float rounding of x / sqrt(2) and x^2
// bounds it), in the kernel's loop (this CPU's widest vectors) and in the
// baseline loop.
TEST(ElemwiseKernels, Float32TranscendentalsMatchLibmWithinDocumentedBounds) {
  struct Case {
    std::string op;
    std::vector<float> (*baseline)(const std::vector<float>&);
    double (*reference)(double);
    double low, high;
    double max_ulps;      // 0: use max_relative
    double max_relative;  // 0: use max_ulps
  };
  constexpr auto gelu = [](double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); };
  const std::vector<Case> cases = {
      {"exp", [](const std::vector<float>& x) { return RunBaseline(elemwise::Exp(), x); },
       [](double x) { return std::exp(x); }, -87.3, 88.72, VectorMathUlps("exp"), 0},
      {"tanh", [](const std::vector<float>& x) { return RunBaseline(elemwise::Tanh(), x); },
       [](double x) { return std::tanh(x); }, -10, 10, VectorMathUlps("tanh"), 0},
      {"tanh", [](const std::vector<float>& x) { return RunBaseline(elemwise::Tanh(), x); },
       [](double x) { return std::tanh(x); }, -0.7, 0.7, VectorMathUlps("tanh"), 0},
      {"sigmoid", [](const std::vector<float>& x) { return RunBaseline(elemwise::Sigmoid(), x); },
       [](double x) { return 1 / (1 + std::exp(-x)); }, -87, 20, VectorMathUlps("sigmoid"), 0},
      {"erf", [](const std::vector<float>& x) { return RunBaseline(elemwise::Erf(), x); },
       [](double x) { return std::erf(x); }, -5, 5, VectorMathUlps("erf"), 0},
      {"erf", [](const std::vector<float>& x) { return RunBaseline(elemwise::Erf(), x); },
       [](double x) { return std::erf(x); }, -1.1, 1.1, VectorMathUlps("erf"), 0},
      {"gelu", [](const std::vector<float>& x) { return RunBaseline(elemwise::Gelu(), x); }, gelu,
       -3, 10, 0, 1e-6},
      {"gelu", [](const std::vector<float>& x) { return RunBaseline(elemwise::Gelu(), x); }, gelu,
       -5, -3, 0, 2e-6},
      {"gelu", [](const std::vector<float>& x) { return RunBaseline(elemwise::Gelu(), x); }, gelu,
       -13, -5, 0, 2e-5},
  };
  constexpr int kPoints = 1000000;
  for (const Case& test : cases) {
    SCOPED_TRACE(test.op + " on [" + std::to_string(test.low) + ", " + std::to_string(test.high) +
                 "]");
    std::vector<float> x(kPoints);
    for (int i = 0; i < kPoints; ++i) {
      x[i] = static_cast<float>(test.low + (test.high - test.low) * i / (kPoints - 1));
    }
    for (const bool baseline : {false, true}) {
      const std::vector<float> y = baseline ? test.baseline(x) : RunFloat32(test.op, x);
      double worst = 0;
      float worst_x = 0;
      for (int i = 0; i < kPoints; ++i) {
        const double expected = test.reference(x[i]);
        const double error =
            std::abs(y[i] - expected) /
            (test.max_ulps > 0 ? UlpOf(expected, DataType::Float32()) : std::abs(expected));
        if (!(error <= worst)) {
          worst = error;
          worst_x = x[i];
        }
      }
      EXPECT_LE(worst, test.max_ulps > 0 ? test.max_ulps : test.max_relative)
          << (baseline ? "baseline" : "kernel") << " loop, worst at x = " << worst_x;
    }
  }
}

// Softmax's exponential of x - max <= 0: Exp's accuracy down to the smallest
// normal result, 0 below it.
TEST(ElemwiseKernels, SoftmaxExponentialMatchesLibm) {
  std::vector<float> x(1000000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -87.3f * static_cast<float>(i) / (x.size() - 1);
  const std::vector<float> y = RunBaseline(vector_math::ExpOfNonPositive, x);
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double expected = std::exp(static_cast<double>(x[i]));
    worst = std::max(worst, std::abs(y[i] - expected) / UlpOf(expected, DataType::Float32()));
  }
  EXPECT_LE(worst, VectorMathUlps("exp"));
  EXPECT_EQ(vector_math::ExpOfNonPositive(-87.34f), 0.0f);
  EXPECT_EQ(vector_math::ExpOfNonPositive(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_TRUE(std::isnan(vector_math::ExpOfNonPositive(std::numeric_limits<float>::quiet_NaN())));
}

// Limits and special values of the float32 functions, exactly; float64 keeps
// libm's values.
TEST(ElemwiseKernels, Float32TranscendentalLimits) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {nan, -nan, inf, -inf, 0.0f, -0.0f, 1e30f, -1e30f, 100.0f, -100.0f};
  const auto expect = [&](const std::string& op, const std::vector<float>& expected) {
    SCOPED_TRACE(op);
    const std::vector<float> y = RunFloat32(op, x);
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(expected[i])) {
        EXPECT_TRUE(std::isnan(y[i])) << "x = " << x[i] << " gave " << y[i];
      } else {
        EXPECT_EQ(y[i], expected[i]) << "x = " << x[i];
        EXPECT_EQ(std::signbit(y[i]), std::signbit(expected[i])) << "x = " << x[i];
      }
    }
  };
  // exp(-100) and sigmoid(-100) are subnormal: the correctly rounded ones.
  expect("exp", {nan, nan, inf, 0, 1, 1, inf, 0, inf, std::exp(-100.0f)});
  expect("tanh", {nan, nan, 1, -1, 0.0f, -0.0f, 1, -1, 1, -1});
  expect("sigmoid", {nan, nan, 1, 0, 0.5f, 0.5f, 1, 0, 1, std::exp(-100.0f)});
  expect("erf", {nan, nan, 1, -1, 0.0f, -0.0f, 1, -1, 1, -1});
  expect("gelu", {nan, nan, inf, -0.0f, 0.0f, -0.0f, 1e30f, -0.0f, 100, -0.0f});

  const std::vector<double> doubles = {-3.7, -0.2, 0.0, 1e-8, 0.9, 5.5};
  const Tensor x64 = TensorNode::FromVector<double>({6}, DataType::Float64(), doubles);
  const Tensor y64 = TensorNode::Empty({6}, DataType::Float64());
  CallKernel("tanh", {}, {x64, y64});
  for (size_t i = 0; i < doubles.size(); ++i) {
    EXPECT_EQ(y64->data<double>()[i], std::tanh(doubles[i]));
  }
}

// Integer semantics the scalar functions define (numpy's wrap-around; C's
// truncating division), checked as values on the built-in kernel and as
// agreement with the reference.
TEST(ElemwiseKernels, IntegerWrapAroundAndDivision) {
  constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();
  constexpr int64_t kMin32 = std::numeric_limits<int32_t>::min();
  constexpr int64_t kBig = int64_t{1} << 62;
  struct Case {
    std::string op;
    DataType dtype;
    std::vector<int64_t> a, b, expected;  // b empty: a unary op
  };
  const std::vector<Case> cases = {
      {"add", DataType::Int32(), {kMax32, kMin32}, {1, -1}, {kMin32, kMax32}},
      {"add", kUInt8, {200, 255}, {100, 1}, {44, 0}},
      {"subtract", DataType::Int8(), {-128, 127}, {1, -1}, {127, -128}},
      {"subtract", kUInt8, {0, 5}, {1, 10}, {255, 251}},
      {"multiply", DataType::Int64(), {kBig, -3}, {4, kBig}, {0, kBig}},
      {"multiply", kUInt8, {16, 15}, {16, 17}, {0, 255}},
      {"divide",
       DataType::Int32(),
       {7, -7, 7, -7, kMin32, 1},
       {2, 2, -2, -2, -1, 3},
       {3, -3, -3, 3, kMin32, 0}},
      {"divide", DataType::Int8(), {-128, -128, 127}, {-1, 3, -128}, {-128, -42, 0}},
      {"divide", kUInt8, {255, 7}, {2, 255}, {127, 0}},
      {"power",
       DataType::Int32(),
       {2, 2, -2, 3, 0, -1},
       {31, 32, 3, 0, 0, 7},
       {kMin32, 0, -8, 1, 1, -1}},
      {"power",
       DataType::Int64(),
       {3, 2},
       {39, 63},
       {4052555153018976267, std::numeric_limits<int64_t>::min()}},
      {"power", kUInt8, {3, 2}, {5, 8}, {243, 0}},
      // mod keeps the dividend's sign (C), floor_mod takes the divisor's (Python).
      {"mod", DataType::Int32(), {7, -7, 7, -7, kMin32}, {3, 3, -3, -3, -1}, {1, -1, 1, -1, 0}},
      {"floor_mod",
       DataType::Int32(),
       {7, -7, 7, -7, kMin32, 6, -6},
       {3, 3, -3, -3, -1, -3, 3},
       {1, 2, -2, -1, 0, 0, 0}},
      {"floor_mod", DataType::Int8(), {-128, -128, 127}, {127, -128, -128}, {126, 0, -1}},
      {"floor_mod", kUInt8, {255, 7}, {2, 255}, {1, 7}},
      {"sign", DataType::Int64(), {-kBig, 0, kBig}, {}, {-1, 0, 1}},
      {"sign", kUInt8, {0, 1, 255}, {}, {0, 1, 1}},
      {"negative", DataType::Int32(), {kMin32, 5, 0}, {}, {kMin32, -5, 0}},
      {"negative", kUInt8, {1, 0}, {}, {255, 0}},
      {"abs", DataType::Int8(), {-128, -5, 7}, {}, {-128, 5, 7}},
      {"abs",
       DataType::Int64(),
       {std::numeric_limits<int64_t>::min(), -kBig},
       {},
       {std::numeric_limits<int64_t>::min(), kBig}},
  };
  for (const Case& test : cases) {
    SCOPED_TRACE(test.op + " " + DTypeString(test.dtype));
    const int64_t n = static_cast<int64_t>(test.a.size());
    std::vector<Tensor> inputs = {TensorNode::FromVector<int64_t>({n}, test.dtype, test.a)};
    if (!test.b.empty()) inputs.push_back(TensorNode::FromVector<int64_t>({n}, test.dtype, test.b));
    ExpectElemwiseMatches(test.op, {inputs.begin(), inputs.end()});
    EXPECT_EQ(Int64Elements(Builtin(test.op, inputs)), test.expected);
  }
}

TEST(ElemwiseKernels, ErrorsThroughTheAbi) {
  const DataType i32 = DataType::Int32();
  const DataType f32 = DataType::Float32();
  const auto ints = [&](Shape shape, std::vector<int64_t> values) {
    return TensorNode::FromVector<int64_t>(shape, i32, values);
  };
  const auto empty = [](Shape shape, DataType dtype) { return TensorNode::Empty(shape, dtype); };

  // Value errors of the scalar functions, also from a chunk on a worker thread.
  EXPECT_THAT(KernelError("divide", {ints({3}, {1, 2, 3}), ints({3}, {1, 0, 1}), empty({3}, i32)}),
              HasSubstr("divide: division by zero"));
  const int64_t large = 3 * kLarge[0] * kLarge[1];
  std::vector<int64_t> divisors(large, 7);
  divisors[large / 2 + 5] = 0;
  EXPECT_THAT(KernelError("divide", {ints({}, {9}), ints({large}, divisors), empty({large}, i32)}),
              HasSubstr("divide: division by zero"));
  EXPECT_THAT(KernelError("power", {ints({2}, {2, 2}), ints({2}, {1, -1}), empty({2}, i32)}),
              HasSubstr("power: integers to negative integer powers are not allowed"));

  // Dtypes the relations would reject.
  EXPECT_THAT(KernelError("exp", {ints({2}, {1, 2}), empty({2}, i32)}),
              HasSubstr("the kernel does not support dtype int32"));
  EXPECT_THAT(KernelError("logical_and", {empty({2}, f32), empty({2}, f32), empty({2}, f32)}),
              HasSubstr("the kernel does not support dtype float32"));
  EXPECT_THAT(KernelError("add", {ints({2}, {1, 2}), empty({2}, f32), empty({2}, i32)}),
              HasSubstr("input 1 has dtype float32, expected int32"));
  EXPECT_THAT(KernelError("less", {empty({2}, f32), empty({2}, f32), empty({2}, f32)}),
              HasSubstr("the output has dtype float32, expected bool"));
  EXPECT_THAT(KernelError("negative", {empty({2}, f32), empty({2}, i32)}),
              HasSubstr("the output has dtype int32, expected float32"));
  EXPECT_THAT(
      KernelError("where", {empty({2}, f32), empty({2}, f32), empty({2}, f32), empty({2}, f32)}),
      HasSubstr("the condition has dtype float32, expected bool"));
  EXPECT_THAT(KernelError("where", {empty({2}, DataType::Bool()), empty({2}, f32), empty({2}, i32),
                                    empty({2}, f32)}),
              HasSubstr("y has dtype int32, expected float32"));

  // Shapes that would read or write out of bounds.
  EXPECT_THAT(KernelError("sqrt", {empty({3}, f32), empty({4}, f32)}),
              HasSubstr("the output has shape (4,) but the input has shape (3,)"));
  EXPECT_THAT(KernelError("cast", {empty({3}, f32), empty({2, 3}, i32)}, CastTo(i32)),
              HasSubstr("the output has shape (2, 3) but the input has shape (3,)"));
  EXPECT_THAT(KernelError("add", {empty({4, 3}, f32), empty({3}, f32), empty({3, 3}, f32)}),
              HasSubstr("input 0 of shape (4, 3) does not broadcast to the output's shape (3, 3)"));
  EXPECT_THAT(KernelError("where", {empty({2}, DataType::Bool()), empty({5}, f32), empty({5}, f32),
                                    empty({5}, f32)}),
              HasSubstr("the condition of shape (2,) does not broadcast"));
  EXPECT_THAT(KernelError("add", {empty({3}, f32), empty({3}, f32)}),
              HasSubstr("expects 2 inputs and 1 output, got 1 inputs and 1 outputs"));

  // The shape function's run-time broadcast check.
  const OpKernelDef* add = OpKernelRegistry::Global().Find("add");
  EXPECT_THAT(ErrorOf([&] {
                RunShapeFunc(*add, {}, {empty({4, 3}, f32), empty({3, 3}, f32)}, {2});
              }),
              HasSubstr("add: cannot broadcast shapes (4, 3) and (3, 3)"));
}

}  // namespace
}  // namespace nimble::vm::testing
