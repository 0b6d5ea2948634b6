// The operators' compute definitions (OpDef::compute), checked against their
// reference kernels: each op runs through op::InvokeOp and through its
// compute definition, lowered (te::Lower) and run by the loop-IR interpreter
// (tests/compiler/tir/interpreter.h), on random inputs whose placeholders have static
// shapes and `?` ones. Also fused compositions, the kernels' run-time
// requirements, the lowering's schedule as printed loop IR, and what lowering
// and the tir constructors must get right for the compute definitions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "nimble/compiler/te/lower.h"
#include "nimble/compiler/tir/printer.h"
#include "nimble/vm/adt.h"
#include "tests/compiler/op/op_test_util.h"
#include "tests/compiler/te/product_test_util.h"
#include "tests/compiler/tir/interpreter.h"

namespace nimble::op::testing {
namespace {

using te::Expr;
using te::testing::Count;

constexpr DataType kF64 = DataType::Float64();
constexpr DataType kF16 = DataType::Float16();
constexpr DataType kI8 = DataType::Int8();
constexpr DataType kU8 = DataType::UInt8();
constexpr DataType kI32 = DataType::Int32();
constexpr DataType kI64 = DataType::Int64();
constexpr DataType kBool = DataType::Bool();

const std::vector<DataType> kIntDTypes = {kI8, kU8, kI32, kI64};
const std::vector<DataType> kAllDTypes = {kF32, kF64, kI8, kU8, kI32, kI64, kBool};

// ---------------------------------------------------------------------------
// Inputs

std::mt19937_64& Rng() {
  static std::mt19937_64 rng(20261124);
  return rng;
}

// Random elements: floats uniform in [low, high], integers over the dtype's
// whole range (so that arithmetic wraps), bools fair.
Tensor Random(const Shape& shape, DataType dtype, double low = -3, double high = 3) {
  const size_t count = static_cast<size_t>(ShapeNumel(shape));
  if (dtype.is_float()) {
    std::uniform_real_distribution<double> uniform(low, high);
    std::vector<double> values(count);
    for (double& value : values) value = uniform(Rng());
    return TensorFrom(shape, dtype, values);
  }
  int64_t min = 0, max = 1;
  if (dtype.is_int()) {
    const int bits = dtype.bits();
    const bool is_unsigned = dtype.code() == DataType::Code::kUInt;
    min = bits == 64 ? std::numeric_limits<int64_t>::min()
                     : (is_unsigned ? 0 : -(int64_t{1} << (bits - 1)));
    max = bits == 64 ? std::numeric_limits<int64_t>::max()
                     : (is_unsigned ? (int64_t{1} << bits) - 1 : (int64_t{1} << (bits - 1)) - 1);
  }
  std::uniform_int_distribution<int64_t> uniform(min, max);
  std::vector<int64_t> values(count);
  for (int64_t& value : values) value = uniform(Rng());
  return TensorFrom<int64_t>(shape, dtype, values);
}

// Random small integers in [low, high] of any dtype (ties for argmax,
// indices for take).
Tensor RandomInts(const Shape& shape, DataType dtype, int64_t low, int64_t high) {
  std::uniform_int_distribution<int64_t> uniform(low, high);
  std::vector<int64_t> values(static_cast<size_t>(ShapeNumel(shape)));
  for (int64_t& value : values) value = uniform(Rng());
  return TensorFrom<int64_t>(shape, dtype, values);
}

// `tensor` (float) with its first elements replaced by values whose
// semantics ops get wrong: NaN, infinities, signed zeros, halves.
Tensor WithSpecials(Tensor tensor) {
  const double specials[] = {std::nan(""), INFINITY, -INFINITY, -0.0, 0.0, 0.5, 2.5, -1.5};
  const int64_t count = std::min<int64_t>(tensor->numel(), std::size(specials));
  for (int64_t i = 0; i < count; ++i) {
    if (tensor->dtype() == kF32) {
      tensor->data<float>()[i] = static_cast<float>(specials[i]);
    } else {
      tensor->data<double>()[i] = specials[i];
    }
  }
  return tensor;
}

// ---------------------------------------------------------------------------
// Running an op both ways

// Which dimensions of the inputs' placeholders are `?` (shape variables),
// by input and dimension.
using DynamicDims = std::function<bool(size_t input, size_t dim)>;
const DynamicDims kStatic = [](size_t, size_t) { return false; };
const DynamicDims kDynamic = [](size_t, size_t) { return true; };
const std::vector<DynamicDims> kBothModes = {kStatic, kDynamic};

std::vector<te::Tensor> Placeholders(const std::vector<Tensor>& values,
                                     const DynamicDims& dynamic) {
  std::vector<te::Tensor> placeholders;
  for (size_t i = 0; i < values.size(); ++i) {
    std::vector<Expr> shape;
    for (size_t d = 0; d < values[i]->shape().size(); ++d) {
      shape.push_back(dynamic(i, d)
                          ? Expr(tir::MakeVar("n" + std::to_string(i) + "_" + std::to_string(d)))
                          : tir::IntImm(values[i]->shape()[d]));
    }
    placeholders.push_back(
        te::Placeholder("in" + std::to_string(i), values[i]->dtype(), std::move(shape)));
  }
  return placeholders;
}

// An op's call on `inputs`: tensors, or one tuple of them (concatenate, stack).
struct Call {
  std::string op;
  std::vector<Tensor> inputs;
  ir::Attrs attrs;
  bool tuple_input = false;

  const OpDef& def() const { return Def(op); }
  ir::Attrs normalized() const { return NormalizeAttrs(def(), attrs); }
  std::vector<Ref<Object>> args() const {
    std::vector<Ref<Object>> fields(inputs.begin(), inputs.end());
    if (tuple_input) return {MakeTuple(fields)};
    return fields;
  }
  // The result dtypes, flattened like the compute definition's outputs, from
  // the inputs' types with `dynamic` dims `?` (as the compiler sees them).
  std::vector<DataType> output_dtypes(const DynamicDims& dynamic) const {
    std::vector<ir::Type> types;
    for (size_t i = 0; i < inputs.size(); ++i) {
      std::vector<ir::Dim> dims;
      for (size_t d = 0; d < inputs[i]->shape().size(); ++d) {
        dims.push_back(dynamic(i, d) ? kAny : ir::Dim(inputs[i]->shape()[d]));
      }
      types.push_back(TensorOf(dims, inputs[i]->dtype()));
    }
    if (tuple_input) types = {ir::MakeTupleType(types)};
    const ir::Type type = ResolveCallType(def(), types, normalized());
    std::vector<DataType> dtypes;
    if (type->kind == ir::TypeKind::kTuple) {
      for (const ir::Type& field : type.as<ir::TupleTypeNode>()->fields) {
        dtypes.push_back(field.as<ir::TensorTypeNode>()->dtype);
      }
    } else {
      dtypes.push_back(type.as<ir::TensorTypeNode>()->dtype);
    }
    return dtypes;
  }
  // The reference kernel's outputs.
  std::vector<Tensor> Reference() const {
    const Ref<Object> result = InvokeOp(def(), args(), normalized());
    if (Tensor tensor = result.as<TensorNode>()) return {tensor};
    std::vector<Tensor> outputs;
    for (const Ref<Object>& field : result.as<ADTNode>()->fields()) {
      outputs.push_back(field.as<TensorNode>());
    }
    return outputs;
  }
  // The compute definition on `placeholders` of the inputs, made with `dynamic`.
  std::vector<te::Tensor> Compute(te::ComputeContext& context,
                                  const std::vector<te::Tensor>& placeholders,
                                  const DynamicDims& dynamic) const {
    return def().compute(context, placeholders, normalized(), output_dtypes(dynamic));
  }
};

// Runs the compute definition of `call`, lowered, on its inputs, writing
// outputs of `output_shapes`; nimble::Error when a requirement fails.
std::vector<Tensor> RunCompute(const Call& call, const DynamicDims& dynamic,
                               const std::vector<Shape>& output_shapes) {
  const std::vector<te::Tensor> placeholders = Placeholders(call.inputs, dynamic);
  te::ComputeContext context;
  const std::vector<te::Tensor> outputs = call.Compute(context, placeholders, dynamic);
  if (outputs.empty()) throw Error("test: " + call.op + " has no compute for these inputs");
  const tir::PrimFunc func = te::Lower(call.op, placeholders, outputs, context.requirements());
  std::vector<Tensor> args = call.inputs;
  const std::vector<DataType> dtypes = call.output_dtypes(dynamic);
  std::vector<Tensor> results;
  for (size_t k = 0; k < output_shapes.size(); ++k) {
    results.push_back(TensorNode::Empty(output_shapes[k], dtypes[k]));
    args.push_back(results.back());
  }
  tir::testing::Interpret(func, args);
  return results;
}

// How close a compute definition's result must be to the reference's.
struct Tolerance {
  enum class Kind { kExact, kUlps, kRelative } kind = Kind::kExact;
  double value = 0;
};
// Bit for bit (NaNs match any NaN).
constexpr Tolerance kExact{};
// Within n units in the last place (evaluation orders or math functions differ).
Tolerance Ulps(double n) {
  return {Tolerance::Kind::kUlps, n};
}
// Within r * max(|expected|, 1) (sums in the dtype, where the reference sums in double).
Tolerance Relative(double r) {
  return {Tolerance::Kind::kRelative, r};
}

// The distance in representable values between two finite floats of `dtype`.
double UlpDistance(double a, double b, DataType dtype) {
  const auto ordered = [&](double x) -> int64_t {
    if (dtype == kF32) {
      int32_t bits;
      const float f = static_cast<float>(x);
      std::memcpy(&bits, &f, sizeof(bits));
      return bits < 0 ? std::numeric_limits<int32_t>::min() - int64_t{bits} : bits;
    }
    int64_t bits;
    std::memcpy(&bits, &x, sizeof(bits));
    return bits < 0 ? std::numeric_limits<int64_t>::min() - bits : bits;
  };
  return std::abs(static_cast<double>(ordered(a)) - static_cast<double>(ordered(b)));
}

bool Close(double actual, double expected, DataType dtype, Tolerance tolerance) {
  if (std::isnan(actual) || std::isnan(expected)) return std::isnan(actual) && std::isnan(expected);
  if (tolerance.kind == Tolerance::Kind::kExact || std::isinf(actual) || std::isinf(expected)) {
    return actual == expected && std::signbit(actual) == std::signbit(expected);
  }
  if (tolerance.kind == Tolerance::Kind::kUlps) {
    return UlpDistance(actual, expected, dtype) <= tolerance.value;
  }
  return std::abs(actual - expected) <= tolerance.value * std::max(std::abs(expected), 1.0);
}

void ExpectClose(const Tensor& actual, const Tensor& expected, Tolerance tolerance) {
  ASSERT_EQ(actual->shape(), expected->shape());
  ASSERT_EQ(actual->dtype(), expected->dtype());
  int failures = 0;
  for (int64_t i = 0; i < expected->numel() && failures < 5; ++i) {
    if (expected->dtype().is_float()) {
      const double a = actual->GetAsDouble(i), e = expected->GetAsDouble(i);
      if (!Close(a, e, expected->dtype(), tolerance)) {
        ADD_FAILURE() << "element " << i << ": " << a << " (compute) vs " << e << " (reference)";
        ++failures;
      }
    } else if (actual->GetAsInt64(i) != expected->GetAsInt64(i)) {
      ADD_FAILURE() << "element " << i << ": " << actual->GetAsInt64(i) << " (compute) vs "
                    << expected->GetAsInt64(i) << " (reference)";
      ++failures;
    }
  }
}

std::string Describe(const Call& call) {
  std::string text = call.op + "(";
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    text +=
        (i ? ", " : "") + call.inputs[i]->dtype().name() + ShapeToString(call.inputs[i]->shape());
  }
  text += ")";
  for (const auto& [name, value] : call.attrs.entries()) {
    text += " " + name + "=" + AttrValueToString(value);
  }
  return text;
}

// The compute definition of `call` agrees with its reference kernel, for
// each way of giving the placeholders' shapes in `modes`.
void ExpectMatches(const Call& call, Tolerance tolerance = kExact,
                   const std::vector<DynamicDims>& modes = kBothModes) {
  SCOPED_TRACE(Describe(call));
  const std::vector<Tensor> expected = call.Reference();
  std::vector<Shape> shapes;
  for (const Tensor& output : expected) shapes.push_back(output->shape());
  for (size_t mode = 0; mode < modes.size(); ++mode) {
    SCOPED_TRACE("placeholder mode " + std::to_string(mode) + " (0: static, 1: `?`)");
    std::vector<Tensor> actual;
    try {
      actual = RunCompute(call, modes[mode], shapes);
    } catch (const Error& error) {
      ADD_FAILURE() << error.what();
      continue;
    }
    for (size_t k = 0; k < expected.size(); ++k) ExpectClose(actual[k], expected[k], tolerance);
  }
}

void ExpectMatches(const std::string& op, const std::vector<Tensor>& inputs,
                   const ir::Attrs& attrs = {}, Tolerance tolerance = kExact,
                   const std::vector<DynamicDims>& modes = kBothModes) {
  ExpectMatches(Call{op, inputs, attrs}, tolerance, modes);
}

// The message of the error the compute definition's kernel fails with.
std::string ComputeError(const Call& call, const std::vector<Shape>& output_shapes,
                         const DynamicDims& dynamic = kDynamic) {
  return ErrorOf([&] { RunCompute(call, dynamic, output_shapes); });
}

// True when `call` has a compute definition for its inputs.
bool HasCompute(const Call& call, const DynamicDims& dynamic = kStatic) {
  te::ComputeContext context;
  return !call.Compute(context, Placeholders(call.inputs, dynamic), dynamic).empty();
}

// ---------------------------------------------------------------------------
// Unary

const std::vector<Shape> kUnaryShapes = {{2, 3, 5}, {7}, {}, {0, 4}, {1, 9}};

TEST(UnaryComputeTest, FloatOps) {
  // float32 tolerances: the runtime's exp, tanh, sigmoid, erf and gelu are
  // vector_math's approximations (documented within 3 ulp, gelu 2e-6
  // relative), its log and pow libm's float ones, its rsqrt rounds twice;
  // the interpreter rounds the exact value once. float64 uses libm alike.
  const std::vector<std::pair<std::string, Tolerance>> ops = {
      {"negative", kExact}, {"abs", kExact},          {"exp", Ulps(4)},    {"log", Ulps(1)},
      {"sqrt", kExact},     {"rsqrt", Ulps(1)},       {"tanh", Ulps(4)},   {"sigmoid", Ulps(4)},
      {"erf", Ulps(4)},     {"gelu", Relative(2e-6)}, {"nn.relu", kExact}, {"round", kExact},
      {"copy", kExact}};
  for (const auto& [op, f32_tolerance] : ops) {
    for (DataType dtype : {kF32, kF64}) {
      for (const Shape& shape : kUnaryShapes) {
        ExpectMatches(op, {WithSpecials(Random(shape, dtype))}, {},
                      dtype == kF32 ? f32_tolerance : kExact);
      }
    }
  }
}

// The element-wise ops of the ONNX importer. elu and softplus compute e^x - 1
// and log(1 + y) by Kahan's and Goldberg's formulas around exp and log,
// within a few ulps of the reference's expm1 and log1p; the interpreter
// evaluates exp and log exactly rounded, the runtime (float32) within
// vector_math's bounds.
TEST(UnaryComputeTest, OnnxElementwiseOps) {
  const ir::Attrs elu = MakeAttrs({{"alpha", 1.5}});
  const ir::Attrs leaky = MakeAttrs({{"alpha", 0.1}});
  const ir::Attrs hard = MakeAttrs({{"alpha", 0.2}, {"beta", 0.5}});
  const ir::Attrs clip = MakeAttrs({{"a_min", -0.5}, {"a_max", 0.75}});
  struct Case {
    std::string op;
    ir::Attrs attrs;
    Tolerance tolerance;
  };
  const std::vector<Case> cases = {{"floor", {}, kExact},        {"ceil", {}, kExact},
                                   {"sign", {}, kExact},         {"nn.leaky_relu", leaky, kExact},
                                   {"nn.elu", elu, Ulps(4)},     {"nn.hard_sigmoid", hard, Ulps(1)},
                                   {"nn.softplus", {}, Ulps(4)}, {"clip", clip, kExact},
                                   {"clip", {}, kExact},         {"isnan", {}, kExact}};
  for (const Case& test : cases) {
    for (DataType dtype : {kF32, kF64}) {
      for (const Shape& shape : kUnaryShapes) {
        ExpectMatches(test.op, {WithSpecials(Random(shape, dtype))}, test.attrs, test.tolerance);
      }
    }
  }
  // Near 0, where e^x - 1 and log(1 + e^x)'s tail lose their digits unless
  // computed with care, and far out.
  const std::vector<double> values = {-1e-8, -1e-5, -0.01, -0.3, -0.49, -0.51, -1, -5,
                                      -20,   -40,   -90,   -200, 1e-6,  0.4,   20, 100};
  const auto size = static_cast<int64_t>(values.size());
  for (DataType dtype : {kF32, kF64}) {
    ExpectMatches("nn.elu", {TensorFrom({size}, dtype, values)}, elu, Ulps(4));
    ExpectMatches("nn.softplus", {TensorFrom({size}, dtype, values)}, {}, Ulps(4));
  }
  for (const std::string op : {"floor", "ceil", "sign", "clip"}) {
    for (DataType dtype : kIntDTypes) {
      const int64_t lowest =
          dtype == kI64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (dtype.bits() - 1));
      ExpectMatches(op, {TensorFrom<int64_t>({5}, dtype, {0, 1, -1, 7, lowest})},
                    op == "clip" ? MakeAttrs({{"a_min", -3.0}, {"a_max", 1e30}}) : ir::Attrs{});
      ExpectMatches(op, {Random({3, 11}, dtype)}, op == "clip" ? clip : ir::Attrs{});
    }
  }
}

// Through both clamps (-20 in float32, -40 in float64) and the erfc tail.
TEST(UnaryComputeTest, GeluOverItsWholeRange) {
  std::vector<double> values;
  for (double x = -45; x <= 30; x += 0.37) values.push_back(x);
  const auto size = static_cast<int64_t>(values.size());
  ExpectMatches("gelu", {TensorFrom({size}, kF32, values)}, {}, Relative(2e-6));
  ExpectMatches("gelu", {TensorFrom({size}, kF64, values)}, {}, kExact);
}

TEST(UnaryComputeTest, IntegerOpsWrap) {
  for (const std::string op : {"negative", "abs", "nn.relu", "round", "copy"}) {
    for (DataType dtype : kIntDTypes) {
      ExpectMatches(op, {Random({3, 11}, dtype)});
      // The most negative value, whose negation and absolute value wrap to
      // itself (uint8 reads the values modulo 256).
      const int64_t lowest =
          dtype == kI64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (dtype.bits() - 1));
      ExpectMatches(op, {TensorFrom<int64_t>({4}, dtype, {0, 1, -1, lowest})});
    }
  }
}

TEST(UnaryComputeTest, BoolOps) {
  ExpectMatches("logical_not", {Random({4, 5}, kBool)});
  ExpectMatches("copy", {Random({4, 5}, kBool)});
}

TEST(UnaryComputeTest, CastBetweenEveryPairOfDTypes) {
  const std::vector<double> floats = {std::nan(""), INFINITY, -INFINITY, 1e10,  -1e10, 300.7,
                                      -129.5,       2.5,      -0.0,      255.9, -1,    1e-3};
  for (DataType from : kAllDTypes) {
    const Tensor x = from.is_float() ? TensorFrom({3, 4}, from, floats) : Random({3, 4}, from);
    for (DataType to : kAllDTypes) ExpectMatches("cast", {x}, MakeAttrs({{"dtype", to}}));
  }
}

TEST(UnaryComputeTest, Float16IsLeftToTheBuiltinKernel) {
  EXPECT_FALSE(HasCompute(Call{"exp", {Random({3}, kF16)}, {}}));
  EXPECT_FALSE(HasCompute(Call{"cast", {Random({3}, kF32)}, MakeAttrs({{"dtype", kF16}})}));
  EXPECT_FALSE(HasCompute(Call{"add", {Random({3}, kF16), Random({3}, kF16)}, {}}));
}

// ---------------------------------------------------------------------------
// Broadcast

const std::vector<std::pair<Shape, Shape>> kBroadcastShapes = {{{2, 3, 4}, {2, 3, 4}},
                                                               {{2, 3, 4}, {3, 1}},
                                                               {{1, 3, 1}, {5, 1, 4}},
                                                               {{}, {2, 3}},
                                                               {{0, 3}, {1, 3}},
                                                               {{4, 1}, {0}},
                                                               {{5}, {1}},
                                                               {{1}, {1}}};

TEST(BroadcastComputeTest, FloatArithmetic) {
  const std::vector<std::pair<std::string, Tolerance>> ops = {
      {"add", kExact},    {"subtract", kExact}, {"multiply", kExact}, {"divide", kExact},
      {"power", Ulps(1)}, {"maximum", kExact},  {"minimum", kExact}};
  for (const auto& [op, f32_tolerance] : ops) {
    for (DataType dtype : {kF32, kF64}) {
      for (const auto& [lhs, rhs] : kBroadcastShapes) {
        ExpectMatches(op, {WithSpecials(Random(lhs, dtype)), Random(rhs, dtype)}, {},
                      dtype == kF32 ? f32_tolerance : kExact);
        ExpectMatches(op, {Random(lhs, dtype), WithSpecials(Random(rhs, dtype))}, {},
                      dtype == kF32 ? f32_tolerance : kExact);
      }
    }
  }
}

TEST(BroadcastComputeTest, MaximumAndMinimumPropagateNaNAsTheRuntime) {
  const Tensor a = TensorFrom({4}, kF32, {std::nan(""), 1.0, -0.0, 0.0});
  const Tensor b = TensorFrom({4}, kF32, {1.0, std::nan(""), 0.0, -0.0});
  ExpectMatches("maximum", {a, b});
  ExpectMatches("minimum", {a, b});
}

TEST(BroadcastComputeTest, IntegerArithmeticWraps) {
  for (const std::string op : {"add", "subtract", "multiply", "maximum", "minimum"}) {
    for (DataType dtype : kIntDTypes) {
      for (const auto& [lhs, rhs] : kBroadcastShapes) {
        ExpectMatches(op, {Random(lhs, dtype), Random(rhs, dtype)});
      }
    }
  }
}

// mod is C's fmod (the dividend's sign), floor_mod Python's % (the
// divisor's, a zero remainder too), over signs, zeros, NaN and infinities.
TEST(BroadcastComputeTest, FloatRemainders) {
  const std::vector<double> a = {7,  -7,  7, -7, 0, -0.0,     6,
                                 -6, 1.5, 3, -3, 5, INFINITY, std::nan("")};
  const std::vector<double> b = {3, 3, -3, -3, -2, 2, -3, 3, 0, INFINITY, INFINITY, 0.75, 2, 2};
  const auto n = static_cast<int64_t>(a.size());
  for (const std::string op : {"mod", "floor_mod"}) {
    for (DataType dtype : {kF32, kF64}) {
      ExpectMatches(op, {TensorFrom({n}, dtype, a), TensorFrom({n}, dtype, b)});
      for (const auto& [lhs, rhs] : kBroadcastShapes) {
        ExpectMatches(op, {WithSpecials(Random(lhs, dtype)), Random(rhs, dtype)});
      }
    }
  }
}

TEST(BroadcastComputeTest, IntegerDivideAndPowerAreLeftToTheBuiltinKernel) {
  for (const std::string op : {"divide", "power", "mod", "floor_mod"}) {
    for (DataType dtype : kIntDTypes) {
      EXPECT_FALSE(HasCompute(Call{op, {Random({3}, dtype), Random({3}, dtype)}, {}}));
    }
  }
}

TEST(BroadcastComputeTest, Comparisons) {
  for (const std::string op :
       {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"}) {
    for (DataType dtype : kAllDTypes) {
      for (const auto& [lhs, rhs] : kBroadcastShapes) {
        const Tensor a =
            dtype.is_float() ? WithSpecials(Random(lhs, dtype)) : RandomInts(lhs, dtype, 0, 2);
        const Tensor b =
            dtype.is_float() ? WithSpecials(Random(rhs, dtype)) : RandomInts(rhs, dtype, 0, 2);
        ExpectMatches(op, {a, b});
      }
    }
  }
}

TEST(BroadcastComputeTest, LogicalOps) {
  for (const std::string op : {"logical_and", "logical_or", "logical_xor"}) {
    for (const auto& [lhs, rhs] : kBroadcastShapes) {
      ExpectMatches(op, {Random(lhs, kBool), Random(rhs, kBool)});
    }
  }
}

TEST(BroadcastComputeTest, Where) {
  const std::vector<std::vector<Shape>> shapes = {{{2, 3}, {2, 3}, {2, 3}},
                                                  {{3, 1}, {1, 4}, {4}},
                                                  {{}, {2, 2}, {1}},
                                                  {{0, 2}, {1, 2}, {2}},
                                                  {{5, 1, 1}, {1}, {2, 1}}};
  for (DataType dtype : {kF32, kI8, kI64, kBool}) {
    for (const std::vector<Shape>& shape : shapes) {
      ExpectMatches("where",
                    {Random(shape[0], kBool), Random(shape[1], dtype), Random(shape[2], dtype)});
    }
  }
}

TEST(BroadcastComputeTest, SizesThatCannotBroadcastFailAtRunTime) {
  EXPECT_EQ(ComputeError(Call{"add", {Random({3}, kF32), Random({4}, kF32)}, {}}, {{3}}),
            "add: cannot broadcast dimension 0: input 0 and input 1 differ in size and neither "
            "is 1");
  EXPECT_EQ(
      ComputeError(
          Call{"where", {Random({2, 3}, kBool), Random({2, 1}, kF32), Random({1, 4}, kF32)}, {}},
          {{2, 3}}),
      "where: cannot broadcast dimension 1: input 0 and input 2 differ in size and neither "
      "is 1");
  // A `?` size against a static one.
  const DynamicDims lhs_only = [](size_t input, size_t) { return input == 0; };
  EXPECT_EQ(ComputeError(Call{"multiply", {Random({2, 5}, kF32), Random({3}, kF32)}, {}}, {{2, 3}},
                         lhs_only),
            "multiply: cannot broadcast dimension 1: input 0 and input 1 differ in size and "
            "neither is 1");
}

TEST(BroadcastComputeTest, OneShapeVariableNeedsNoRequirementOrSelect) {
  const Expr n = tir::MakeVar("n");
  const te::Tensor x = te::Placeholder("x", kF32, {n, tir::IntImm(3)});
  const te::Tensor y = te::Placeholder("y", kF32, {n, tir::IntImm(1)});
  te::ComputeContext context;
  const std::vector<te::Tensor> out =
      Def("add").compute(context, std::vector{x, y}, {}, std::vector{kF32});
  EXPECT_TRUE(context.requirements().empty());
  EXPECT_EQ(tir::ToString(te::Lower("add", {x, y}, out, context.requirements())),
            "kernel add(x: float32[n, 3], y: float32[n, 1], out add: float32[n, 3]) {\n"
            "  for add.i in [0, n) parallel chunk 10922 {\n"
            "    for add.j in [0, 3) vectorized {\n"
            "      add[((add.i * 3) + add.j)] = (x[((add.i * 3) + add.j)] + y[add.i])\n"
            "    }\n"
            "  }\n"
            "}\n");
}

// ---------------------------------------------------------------------------
// Neural-network ops

TEST(NnComputeTest, Dense) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{3, 7}, {5, 7}}, {{2, 2, 19}, {6, 19}}, {{5}, {3, 5}}, {{0, 4}, {3, 4}}, {{3, 0}, {2, 0}}};
  for (const auto& [data, weight] : shapes) {
    ExpectMatches("nn.dense", {Random(data, kF32), Random(weight, kF32)}, {}, Relative(1e-5));
    ExpectMatches("nn.dense", {Random(data, kF64), Random(weight, kF64)}, {}, Relative(1e-12));
    ExpectMatches("nn.dense", {Random(data, kF32), Random(weight, kF32)},
                  MakeAttrs({{"units", weight[0]}, {"out_dtype", kF64}}), Relative(1e-12));
  }
}

TEST(NnComputeTest, BatchMatMul) {
  for (bool transpose_a : {false, true}) {
    for (bool transpose_b : {false, true}) {
      for (const auto& [x_batch, y_batch] :
           std::vector<std::pair<int64_t, int64_t>>{{2, 2}, {1, 3}, {3, 1}, {1, 1}, {0, 1}}) {
        const int64_t m = 3, k = 5, n = 4;
        const Shape x = transpose_a ? Shape{x_batch, k, m} : Shape{x_batch, m, k};
        const Shape y = transpose_b ? Shape{y_batch, n, k} : Shape{y_batch, k, n};
        const ir::Attrs attrs =
            MakeAttrs({{"transpose_a", transpose_a}, {"transpose_b", transpose_b}});
        ExpectMatches("nn.batch_matmul", {Random(x, kF32), Random(y, kF32)}, attrs, Relative(1e-5));
        ExpectMatches("nn.batch_matmul", {Random(x, kF64), Random(y, kF64)}, attrs,
                      Relative(1e-12));
        ir::Attrs to_f64 = attrs;
        to_f64.Set("out_dtype", kF64);
        ExpectMatches("nn.batch_matmul", {Random(x, kF32), Random(y, kF32)}, to_f64,
                      Relative(1e-12));
      }
    }
  }
}

TEST(NnComputeTest, BatchMatMulBatchesThatCannotBroadcastFail) {
  EXPECT_EQ(
      ComputeError(Call{"nn.batch_matmul", {Random({2, 3, 4}, kF32), Random({3, 5, 4}, kF32)}, {}},
                   {{2, 3, 5}}),
      "nn.batch_matmul: cannot broadcast dimension 0: input 0 and input 1 differ in size "
      "and neither is 1");
}

TEST(NnComputeTest, BiasAdd) {
  for (DataType dtype : {kF32, kF64, kI8, kI64}) {
    ExpectMatches("nn.bias_add", {Random({2, 3, 4}, dtype), Random({3}, dtype)});
    ExpectMatches("nn.bias_add", {Random({2, 3, 4}, dtype), Random({4}, dtype)},
                  MakeAttrs({{"axis", int64_t{-1}}}));
    ExpectMatches("nn.bias_add", {Random({2, 3, 4}, dtype), Random({2}, dtype)},
                  MakeAttrs({{"axis", int64_t{0}}}));
    ExpectMatches("nn.bias_add", {Random({0, 3}, dtype), Random({3}, dtype)});
  }
  EXPECT_FALSE(HasCompute(Call{"nn.bias_add", {Random({2, 3}, kBool), Random({3}, kBool)}, {}}));
}

TEST(NnComputeTest, Softmax) {
  for (int64_t axis : {-1, 0, 1, 2}) {
    ExpectMatches("nn.softmax", {Random({2, 3, 5}, kF32, -10, 10)}, MakeAttrs({{"axis", axis}}),
                  Relative(1e-5));
    ExpectMatches("nn.softmax", {Random({2, 3, 5}, kF64, -10, 10)}, MakeAttrs({{"axis", axis}}),
                  Relative(1e-12));
  }
  ExpectMatches("nn.softmax", {Random({7}, kF32)}, {}, Relative(1e-5));
  ExpectMatches("nn.softmax", {Random({3, 0}, kF32)}, {}, Relative(1e-5));
  ExpectMatches("nn.softmax",
                {TensorFrom({2, 3}, kF32, {1, -INFINITY, 2, -INFINITY, -INFINITY, 0})}, {},
                Relative(1e-5));
}

// On the CPU exp(x - max) is one stage, read by the sum and the quotient,
// so each element's exp is computed once; its loop counts each exp as 8
// elements' work (1 + 8 an element) when it splits the rows into chunks. A
// GPU thread recomputes it instead of storing it in a device temporary.
TEST(NnComputeTest, SoftmaxComputesEachExpOnceOnTheCpu) {
  const Expr n = tir::MakeVar("n");
  const te::Tensor x = te::Placeholder("x", kF32, {n, tir::IntImm(54)});
  const auto lower = [&](bool gpu) {
    te::ComputeContext context(gpu);
    const std::vector<te::Tensor> out =
        Def("nn.softmax")
            .compute(context, std::vector{x}, MakeAttrs({{"axis", int64_t{-1}}}),
                     std::vector{kF32});
    return tir::ToString(
        te::Lower("nn.softmax", {x}, out, context.requirements(), {},
                  gpu ? tir::PrimFunc::Device::kGpu : tir::PrimFunc::Device::kCpu));
  };
  const auto count_exps = [](const std::string& text) {
    size_t exps = 0;
    for (size_t at = text.find("exp(("); at != std::string::npos; at = text.find("exp((", at + 1)) {
      ++exps;
    }
    return exps;
  };
  const std::string cpu = lower(false);
  EXPECT_NE(cpu.find("allocate nn.softmax.exp: float32[n, 54]"), std::string::npos) << cpu;
  EXPECT_EQ(count_exps(cpu), 1u) << cpu;
  EXPECT_NE(cpu.find("for nn.softmax.exp.i in [0, n) parallel chunk 67 {"), std::string::npos)
      << cpu;
  const std::string gpu = lower(true);
  EXPECT_EQ(gpu.find("nn.softmax.exp"), std::string::npos) << gpu;
  EXPECT_EQ(count_exps(gpu), 2u) << gpu;
}

// nn.conv1d/2d and the pools (compiler/op/conv.cc); also run as generated
// kernels, fused with a relu, in tests/compiler/op/conv_test.cc. Their
// compute definitions need static kernel sizes: the data's dims are `?` in
// the second mode.
TEST(ConvComputeTest, ConvAndPools) {
  const std::vector<DynamicDims> modes = {kStatic, [](size_t input, size_t) { return input == 0; }};
  const ir::Attrs conv = MakeAttrs({{"strides", std::vector<int64_t>{2, 1}},
                                    {"padding", std::vector<int64_t>{1, 0, 2, 1}},
                                    {"dilation", std::vector<int64_t>{1, 2}},
                                    {"groups", int64_t{2}}});
  ExpectMatches("nn.conv2d", {Random({2, 4, 7, 6}, kF32), Random({6, 2, 3, 2}, kF32)}, conv,
                Relative(1e-5), modes);
  ExpectMatches("nn.conv1d", {Random({1, 3, 9}, kF64), Random({3, 1, 3}, kF64)},
                MakeAttrs({{"padding", std::vector<int64_t>{2, 0}}, {"groups", int64_t{3}}}),
                Relative(1e-12), modes);
  for (bool ceil_mode : {false, true}) {
    const ir::Attrs pool = MakeAttrs({{"pool_size", std::vector<int64_t>{3, 2}},
                                      {"strides", std::vector<int64_t>{2}},
                                      {"padding", std::vector<int64_t>{1, 0, 0, 1}},
                                      {"ceil_mode", ceil_mode}});
    ExpectMatches("nn.max_pool2d", {Random({2, 3, 8, 7}, kF32)}, pool, kExact, modes);
    for (bool include_pad : {false, true}) {
      ir::Attrs avg = pool;
      avg.Set("count_include_pad", include_pad);
      ExpectMatches("nn.avg_pool2d", {Random({2, 3, 8, 7}, kF32)}, avg, Relative(1e-5), modes);
      avg.Set("pool_size", std::vector<int64_t>{2});
      avg.Set("dilation", std::vector<int64_t>{2});
      avg.Set("padding", std::vector<int64_t>{1});
      ExpectMatches("nn.avg_pool1d", {Random({1, 2, 9}, kF32)}, avg, Relative(1e-5), modes);
    }
    ExpectMatches("nn.max_pool1d", {Random({1, 2, 9}, kF32)},
                  MakeAttrs({{"pool_size", std::vector<int64_t>{2}},
                             {"dilation", std::vector<int64_t>{2}},
                             {"padding", std::vector<int64_t>{1}},
                             {"ceil_mode", ceil_mode}}),
                  kExact, modes);
  }
}

TEST(NnComputeTest, LayerNorm) {
  for (int64_t axis : {-1, 1}) {
    for (bool center : {true, false}) {
      for (bool scale : {true, false}) {
        for (double epsilon : {1e-5, 0.1}) {
          const ir::Attrs attrs = MakeAttrs(
              {{"axis", axis}, {"center", center}, {"scale", scale}, {"epsilon", epsilon}});
          const int64_t channels = axis == 1 ? 3 : 6;
          for (DataType dtype : {kF32, kF64}) {
            ExpectMatches(
                "nn.layer_norm",
                {Random({2, 3, 6}, dtype), Random({channels}, dtype), Random({channels}, dtype)},
                attrs, Relative(dtype == kF32 ? 1e-5 : 1e-12));
          }
        }
      }
    }
  }
  // A constant line: variance 0.
  ExpectMatches(
      "nn.layer_norm",
      {TensorFrom({2, 3}, kF32, {1, 1, 1, 4, 5, 6}), Random({3}, kF32), Random({3}, kF32)}, {},
      Relative(1e-5));
}

TEST(NnComputeTest, ParameterLengthsAreRequired) {
  EXPECT_EQ(
      ComputeError(Call{"nn.bias_add", {Random({2, 3}, kF32), Random({4}, kF32)}, {}}, {{2, 3}}),
      "nn.bias_add: bias's length differs from data's axis 1");
  EXPECT_EQ(
      ComputeError(Call{"nn.dense", {Random({2, 3}, kF32), Random({4, 5}, kF32)}, {}}, {{2, 4}}),
      "nn.dense: reduction dimensions differ");
}

// ---------------------------------------------------------------------------
// Reductions

std::vector<ir::Attrs> ReduceAttrs() {
  std::vector<ir::Attrs> variants;
  for (const std::vector<int64_t>& axis :
       std::vector<std::vector<int64_t>>{{}, {1}, {0, 2}, {-1}, {2, 1, 0}}) {
    for (bool keepdims : {false, true}) {
      for (bool exclude : {false, true}) {
        variants.push_back(
            MakeAttrs({{"axis", axis}, {"keepdims", keepdims}, {"exclude", exclude}}));
      }
    }
  }
  variants.push_back(MakeAttrs({}));  // axis None
  return variants;
}

TEST(ReduceComputeTest, ValueReductions) {
  for (const std::string op : {"sum", "mean", "max", "min", "prod"}) {
    for (const ir::Attrs& attrs : ReduceAttrs()) {
      const bool prod = op == "prod";
      ExpectMatches(op, {Random({2, 3, 4}, kF32, prod ? 0.5 : -3, prod ? 1.5 : 3)}, attrs,
                    Relative(1e-5));
      ExpectMatches(op, {Random({2, 3, 4}, kF64, prod ? 0.5 : -3, prod ? 1.5 : 3)}, attrs,
                    Relative(1e-12));
      for (DataType dtype : kIntDTypes) ExpectMatches(op, {Random({2, 3, 4}, dtype)}, attrs);
    }
  }
}

TEST(ReduceComputeTest, MaxAndMinSkipNaNAsTheRuntime) {
  // Before ReduceCombine skipped NaNs, the compute definitions gave NaN here.
  const Tensor x = TensorFrom({2, 3}, kF32, {1, std::nan(""), 2, std::nan(""), -1, -2});
  for (const std::string op : {"max", "min"}) {
    ExpectMatches(op, {x}, MakeAttrs({{"axis", std::vector<int64_t>{1}}}));
    ExpectMatches(op, {x});
  }
}

TEST(ReduceComputeTest, LogicalReductions) {
  for (const std::string op : {"all", "any"}) {
    for (const ir::Attrs& attrs : ReduceAttrs())
      ExpectMatches(op, {Random({2, 3, 4}, kBool)}, attrs);
    ExpectMatches(op, {Random({0, 3}, kBool)}, MakeAttrs({{"axis", std::vector<int64_t>{0}}}));
  }
}

TEST(ReduceComputeTest, ArgMaxAndArgMin) {
  std::vector<ir::Attrs> variants;
  for (const ir::Attrs& base : ReduceAttrs()) {
    for (bool last : {false, true}) {
      ir::Attrs attrs = base;
      attrs.Set("select_last_index", last);
      variants.push_back(attrs);
    }
  }
  for (const std::string op : {"argmax", "argmin"}) {
    for (const ir::Attrs& attrs : variants) {
      ExpectMatches(op, {Random({2, 3, 4}, kF32)}, attrs);
      ExpectMatches(op, {RandomInts({2, 3, 4}, kI8, -2, 2)}, attrs);  // ties
      ExpectMatches(op, {Random({2, 3, 4}, kI64)}, attrs);
    }
    // NaNs are never best; infinities may tie with the start; all NaN gives 0.
    const Tensor special =
        TensorFrom({4, 3}, kF32,
                   {std::nan(""), 1, 1, -INFINITY, std::nan(""), -INFINITY, INFINITY, INFINITY,
                    std::nan(""), std::nan(""), std::nan(""), std::nan("")});
    for (bool last : {false, true}) {
      ExpectMatches(op, {special},
                    MakeAttrs({{"axis", std::vector<int64_t>{1}}, {"select_last_index", last}}));
    }
    const Tensor int_min = TensorFrom<int64_t>({3}, kI8, {-128, -128, -128});
    ExpectMatches(op, {int_min});
    ExpectMatches(op, {int_min}, MakeAttrs({{"select_last_index", true}}));
  }
}

TEST(ReduceComputeTest, EmptyReductions) {
  const ir::Attrs axis0 = MakeAttrs({{"axis", std::vector<int64_t>{0}}});
  const ir::Attrs axis1 = MakeAttrs({{"axis", std::vector<int64_t>{1}}});
  for (const std::string op : {"sum", "prod"}) ExpectMatches(op, {Random({0, 3}, kF32)}, axis0);
  for (const std::string op : {"sum", "prod", "mean", "max", "min", "argmax", "argmin"}) {
    ExpectMatches(op, {Random({0, 3}, kF32)}, axis1);  // no output element
  }
  for (const std::string op : {"mean", "max", "min", "argmax", "argmin"}) {
    // No identity to give: the reference fails, and so does the kernel.
    const Call call{op, {Random({0, 3}, kF32)}, axis0};
    EXPECT_FALSE(InvokeError(op, call.inputs, axis0).empty());
    for (const DynamicDims& mode : kBothModes) {
      EXPECT_EQ(ComputeError(call, {{3}}, mode),
                op + ": cannot reduce an empty axis (the reduction has no identity)");
    }
  }
}

// ---------------------------------------------------------------------------
// Transforms

TEST(TransformComputeTest, Reshape) {
  const std::vector<std::vector<int64_t>> newshapes = {
      {24},    {-1},     {4, -1},          {0, -1},         {-2},    {2, -1, 2},
      {-3, 4}, {-3, -1}, {0, -4, 1, 3, 0}, {-4, -1, 2, -2}, {6, -1}, {0, 0, 0, 1}};
  for (const std::vector<int64_t>& newshape : newshapes) {
    for (DataType dtype : {kF32, kI8, kBool}) {
      ExpectMatches("reshape", {Random({2, 3, 4}, dtype)}, MakeAttrs({{"newshape", newshape}}));
    }
  }
  ExpectMatches("reshape", {Random({0, 3}, kF32)},
                MakeAttrs({{"newshape", std::vector<int64_t>{0, -1}}}));
  ExpectMatches("reshape", {Random({0, 3}, kF32)},
                MakeAttrs({{"newshape", std::vector<int64_t>{-1}}}));
  ExpectMatches("reshape", {Random({0, 3}, kF32)},
                MakeAttrs({{"newshape", std::vector<int64_t>{0, 3}}, {"allowzero", true}}));
  ExpectMatches("reshape", {Random({}, kF32)},
                MakeAttrs({{"newshape", std::vector<int64_t>{1, 1}}}));
}

TEST(TransformComputeTest, ReshapeRequiresTheElementCountToStay) {
  EXPECT_EQ(ComputeError(Call{"reshape",
                              {Random({2, 3}, kF32)},
                              MakeAttrs({{"newshape", std::vector<int64_t>{0, 6}}})},
                         {{2, 6}}),
            "reshape: the element count changes");
}

TEST(TransformComputeTest, ReshapeDimsOfShapeVariables) {
  const Expr n = tir::MakeVar("n");
  const te::Tensor x = te::Placeholder("x", kF32, {n, tir::IntImm(3), tir::IntImm(4)});
  te::ComputeContext context;
  const std::vector<te::Tensor> out = Def("reshape").compute(
      context, std::vector{x},
      NormalizeAttrs(Def("reshape"), MakeAttrs({{"newshape", std::vector<int64_t>{6, -1}}})),
      std::vector{kF32});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(tir::ToString(out[0]->shape[0]), "6");
  EXPECT_EQ(tir::ToString(out[0]->shape[1]), "floordiv(((n * 3) * 4), 6)");
}

TEST(TransformComputeTest, ReshapeLike) {
  ExpectMatches("reshape_like", {Random({2, 3, 4}, kF32), Random({4, 6}, kI8)});
  ExpectMatches("reshape_like", {Random({2, 3, 4}, kF32), Random({12, 5}, kF32)},
                MakeAttrs({{"lhs_begin", int64_t{1}}, {"rhs_end", int64_t{1}}}));
  ExpectMatches("reshape_like", {Random({2, 3, 4}, kI64), Random({5, 6}, kF32)},
                MakeAttrs({{"lhs_end", int64_t{2}}, {"rhs_begin", int64_t{1}}}));
}

TEST(TransformComputeTest, Transpose) {
  for (const auto& axes : std::vector<std::vector<int64_t>>{{1, 0, 2}, {2, 0, 1}, {-1, 0, 1}}) {
    ExpectMatches("transpose", {Random({2, 3, 4}, kF32)}, MakeAttrs({{"axes", axes}}));
  }
  ExpectMatches("transpose", {Random({2, 3, 4}, kI8)});
  ExpectMatches("transpose", {Random({5}, kF32)});
  ExpectMatches("transpose", {Random({}, kF32)});
  ExpectMatches("transpose", {Random({0, 3}, kBool)});
}

TEST(TransformComputeTest, Squeeze) {
  const Tensor x = Random({1, 3, 1, 2}, kF32);
  ExpectMatches("squeeze", {x}, {}, kExact, {kStatic});  // axis None needs static sizes
  for (const auto& axis : std::vector<std::vector<int64_t>>{{0}, {2, 0}, {-2}}) {
    ExpectMatches("squeeze", {x}, MakeAttrs({{"axis", axis}}));
  }
  EXPECT_EQ(
      ComputeError(
          Call{"squeeze", {Random({2, 3}, kF32)}, MakeAttrs({{"axis", std::vector<int64_t>{0}}})},
          {{3}}),
      "squeeze: dimension 0 is not 1");
}

TEST(TransformComputeTest, ExpandDims) {
  for (int64_t axis : {0, 1, 2, -1, -3}) {
    for (int64_t count : {0, 1, 2}) {
      ExpectMatches("expand_dims", {Random({2, 3}, kF32)},
                    MakeAttrs({{"axis", axis}, {"num_newaxis", count}}));
    }
  }
}

TEST(TransformComputeTest, StridedSlice) {
  struct Slice {
    std::vector<int64_t> begin, end, strides, axes;
    std::string mode = "end";
  };
  const std::vector<Slice> slices = {{{1}, {4}, {}, {}},
                                     {{0, 1, 2}, {5, 5, 5}, {1, 2, 3}, {}},
                                     {{4}, {0}, {-1}, {}},
                                     {{-1}, {-6}, {-2}, {}},
                                     {{-10}, {10}, {}, {}},
                                     {{3}, {1}, {}, {}},
                                     {{1, -2}, {5, 100}, {}, {2, 0}},
                                     {{4, 3}, {1}, {-1, -1}, {}},
                                     {{0, 0, 6}, {5, 6, -100}, {2, 4, -3}, {}},
                                     {{1, 2}, {2, -1}, {}, {}, "size"},
                                     {{-2, 0, 1}, {1, 10, 3}, {}, {}, "size"},
                                     {{2}, {3}, {7}, {1}}};
  for (const Slice& slice : slices) {
    std::vector<std::pair<std::string, ir::AttrValue>> attrs = {
        {"begin", slice.begin}, {"end", slice.end}, {"slice_mode", slice.mode}};
    if (!slice.strides.empty()) attrs.emplace_back("strides", slice.strides);
    if (!slice.axes.empty()) attrs.emplace_back("axes", slice.axes);
    ExpectMatches("strided_slice", {Random({5, 6, 7}, kF32)}, MakeAttrs(attrs));
  }
  ExpectMatches(
      "strided_slice", {Random({0, 6}, kI8)},
      MakeAttrs({{"begin", std::vector<int64_t>{1, 1}}, {"end", std::vector<int64_t>{3, -1}}}));
}

// gather_elements and gather_nd (compiler/op/index.cc), negative indices
// wrapping; also fused through the VM in tests/compiler/op/index_test.cc.
TEST(TransformComputeTest, GatherElementsAndGatherNd) {
  for (DataType index_dtype : {kI32, kI64}) {
    const Tensor data = Random({3, 4}, kF32);
    ExpectMatches("gather_elements",
                  {data, TensorFrom<int64_t>({2, 4}, index_dtype, {0, -1, 2, 1, 2, 0, -3, 1})},
                  MakeAttrs({{"axis", int64_t{0}}}));
    ExpectMatches("gather_elements",
                  {data, TensorFrom<int64_t>({3, 2}, index_dtype, {3, -4, 0, 1, -1, 2})},
                  MakeAttrs({{"axis", int64_t{1}}}));
    // gather_nd needs the indices' last dimension static: only the data's
    // dims are `?` in the second mode.
    const std::vector<DynamicDims> modes = {kStatic,
                                            [](size_t input, size_t) { return input == 0; }};
    ExpectMatches("gather_nd",
                  {data, TensorFrom<int64_t>({3, 2}, index_dtype, {0, 3, -1, -4, 2, 1})},
                  MakeAttrs({}), kExact, modes);
    ExpectMatches(
        "gather_nd",
        {Random({2, 3, 4}, kF32), TensorFrom<int64_t>({2, 2, 1}, index_dtype, {2, -3, 0, 1})},
        MakeAttrs({{"batch_dims", int64_t{1}}}), kExact, modes);
  }
}

TEST(TransformComputeTest, Take) {
  const std::vector<int64_t> wild = {-7, -1, 0, 3, 4, 9, -5, 2, 11, -12, 5, 1};
  for (const std::string mode : {"clip", "wrap"}) {
    for (DataType index_dtype : {kI32, kI64}) {
      const Tensor data = Random({4, 5}, kF32);
      const Tensor indices = TensorFrom<int64_t>({3, 4}, index_dtype, wild);
      ExpectMatches("take", {data, indices}, MakeAttrs({{"mode", mode}}));
      for (int64_t axis : {0, 1, -1}) {
        ExpectMatches("take", {data, indices}, MakeAttrs({{"axis", axis}, {"mode", mode}}));
      }
      ExpectMatches("take",
                    {Random({2, 4, 3}, kI8),
                     TensorFrom<int64_t>({2, 5}, index_dtype, {0, 5, -1, 2, 3, 1, 1, -9, 4, 0})},
                    MakeAttrs({{"axis", int64_t{1}}, {"batch_dims", int64_t{1}}, {"mode", mode}}));
      ExpectMatches("take", {data, TensorFrom<int64_t>({}, index_dtype, {-3})},
                    MakeAttrs({{"axis", int64_t{1}}, {"mode", mode}}));
      ExpectMatches("take", {Random({0, 3}, kF32), TensorFrom<int64_t>({0}, index_dtype, {})},
                    MakeAttrs({{"axis", int64_t{0}}, {"mode", mode}}));
    }
    // An empty axis has no row for any index.
    const Call empty{"take",
                     {Random({0, 3}, kF32), TensorFrom<int64_t>({2}, kI64, {0, 1})},
                     MakeAttrs({{"axis", int64_t{0}}, {"mode", mode}})};
    EXPECT_FALSE(InvokeError(empty.op, empty.inputs, empty.attrs).empty());
    EXPECT_EQ(ComputeError(empty, {{2, 3}}), "take: an index is out of range for an empty axis");
  }
  EXPECT_FALSE(HasCompute(Call{"take",
                               {Random({4}, kF32), TensorFrom<int64_t>({1}, kI64, {0})},
                               MakeAttrs({{"mode", std::string("fast")}})}));
}

TEST(TransformComputeTest, TakeWrapsTheMostNegativeIndex) {
  ExpectMatches("take",
                {Random({7}, kF32), TensorFrom<int64_t>({3}, kI64,
                                                        {std::numeric_limits<int64_t>::min(),
                                                         std::numeric_limits<int64_t>::max(), -8})},
                MakeAttrs({{"mode", std::string("wrap")}}));
}

// Static sizes along the axis (the compute definition needs them), `?`
// elsewhere.
DynamicDims DynamicBut(size_t axis) {
  return [axis](size_t, size_t dim) { return dim != axis; };
}

TEST(TransformComputeTest, Concatenate) {
  const auto expect = [](std::vector<Tensor> inputs, int64_t axis) {
    const size_t rank = inputs[0]->shape().size();
    const size_t normalized =
        static_cast<size_t>(axis < 0 ? axis + static_cast<int64_t>(rank) : axis);
    ExpectMatches(Call{"concatenate", std::move(inputs), MakeAttrs({{"axis", axis}}), true}, kExact,
                  {kStatic, DynamicBut(normalized), kDynamic});
  };
  expect({Random({2, 3}, kF32), Random({1, 3}, kF32)}, 0);
  expect({Random({2, 1}, kI8), Random({2, 2}, kI8), Random({2, 0}, kI8)}, 1);
  expect({Random({2, 0}, kI8), Random({2, 2}, kI8), Random({2, 1}, kI8)}, -1);
  expect({Random({3}, kF64), Random({4}, kF64)}, 0);
  expect({Random({2, 3}, kF32)}, 1);
  expect({Random({0, 3}, kF32), Random({0, 3}, kF32)}, 0);
  expect({Random({0, 3}, kF32), Random({0, 2}, kF32)}, 1);
  EXPECT_EQ(
      ComputeError(Call{"concatenate", {Random({2, 3}, kF32), Random({2, 4}, kF32)}, {}, true},
                   {{4, 3}}, DynamicBut(0)),
      "concatenate: the inputs differ in dimension 1");
}

TEST(TransformComputeTest, Stack) {
  for (int64_t axis : {0, 1, 2, -1}) {
    ExpectMatches(Call{"stack",
                       {Random({2, 3}, kF32), Random({2, 3}, kF32), Random({2, 3}, kF32)},
                       MakeAttrs({{"axis", axis}}),
                       true});
  }
  ExpectMatches(Call{"stack", {Random({}, kI8), Random({}, kI8)}, {}, true});
  ExpectMatches(Call{"stack", {Random({0, 2}, kI8)}, {}, true});
}

TEST(TransformComputeTest, Split) {
  const auto split = [](const Shape& shape, ir::AttrValue sections, int64_t axis) {
    ExpectMatches(Call{"split",
                       {Random(shape, kF32)},
                       MakeAttrs({{"indices_or_sections", std::move(sections)}, {"axis", axis}})});
  };
  split({6, 4}, int64_t{3}, 0);
  split({6, 4}, int64_t{2}, 1);
  split({6, 4}, int64_t{1}, -1);
  split({6, 4}, std::vector<int64_t>{1, 4}, 0);
  split({3, 5}, std::vector<int64_t>{0, 2, 2}, -1);
  split({3, 5}, std::vector<int64_t>{5}, 1);
  split({0, 5}, int64_t{5}, 1);
  EXPECT_EQ(
      ComputeError(
          Call{"split", {Random({7}, kF32)}, MakeAttrs({{"indices_or_sections", int64_t{2}}})},
          {{3}, {3}}),
      "split: the axis does not divide into equal sections");
}

// ---------------------------------------------------------------------------
// Creation

TEST(CreationComputeTest, ConstantFills) {
  for (const std::string op : {"zeros", "ones"}) {
    for (DataType dtype : kAllDTypes) {
      ExpectMatches(op, {}, MakeAttrs({{"shape", std::vector<int64_t>{2, 3}}, {"dtype", dtype}}));
      ExpectMatches(op + "_like", {Random({3, 0, 2}, dtype)});
      ExpectMatches(op + "_like", {Random({4, 1}, dtype)});
    }
    ExpectMatches(op, {}, MakeAttrs({{"shape", std::vector<int64_t>{}}}));
  }
}

TEST(CreationComputeTest, FullConvertsItsFillValue) {
  for (double fill : {2.7, -1e10, 300.5, std::nan(""), -0.0}) {
    for (DataType dtype : kAllDTypes) {
      ExpectMatches("full", {TensorFrom({}, kF64, {fill})},
                    MakeAttrs({{"shape", std::vector<int64_t>{2, 2}}, {"dtype", dtype}}));
      ExpectMatches("full_like", {Random({3, 2}, dtype), TensorFrom({}, kF32, {fill})});
    }
  }
  ExpectMatches("full", {TensorFrom<int64_t>({}, kI64, {-5})},
                MakeAttrs({{"shape", std::vector<int64_t>{3}}}));
}

// ---------------------------------------------------------------------------
// Fused compositions: one op's compute applied to another's output tensors,
// lowered into one kernel, against the reference ops run one after another.

// The output of `op`'s compute definition on tensor expressions `inputs`.
te::Tensor Apply(te::ComputeContext& context, const std::string& op, std::vector<te::Tensor> inputs,
                 ir::Attrs attrs = {}) {
  const OpDef& def = Def(op);
  const std::vector<te::Tensor> outputs =
      def.compute(context, inputs, NormalizeAttrs(def, attrs), std::vector{inputs[0]->dtype});
  if (outputs.size() != 1) throw Error("test: " + op + " has no compute for these inputs");
  return outputs[0];
}

// Runs the kernel computing `output` from `placeholders` on `inputs`.
Tensor RunFused(const std::vector<te::Tensor>& placeholders, const te::Tensor& output,
                const te::ComputeContext& context, const std::vector<Tensor>& inputs,
                const Shape& shape, std::string* printed = nullptr) {
  const tir::PrimFunc func = te::Lower("fused", placeholders, {output}, context.requirements());
  if (printed) *printed = tir::ToString(func);
  Tensor result = TensorNode::Empty(shape, output->dtype);
  std::vector<Tensor> args = inputs;
  args.push_back(result);
  tir::testing::Interpret(func, args);
  return result;
}

TEST(FusedComputeTest, TanhOfAddTimesABroadcastFactor) {
  const std::vector<Tensor> inputs = {Random({4, 5}, kF32), Random({5}, kF32),
                                      Random({4, 1}, kF32)};
  const Tensor expected =
      Invoke("multiply", {Invoke("tanh", {Invoke("add", {inputs[0], inputs[1]})}), inputs[2]});
  for (const DynamicDims& mode : kBothModes) {
    const std::vector<te::Tensor> x = Placeholders(inputs, mode);
    te::ComputeContext context;
    const te::Tensor out = Apply(
        context, "multiply", {Apply(context, "tanh", {Apply(context, "add", {x[0], x[1]})}), x[2]});
    std::string printed;
    ExpectClose(RunFused(x, out, context, inputs, expected->shape(), &printed), expected, Ulps(5));
    // Elementwise ops inline into one loop nest: no temporary.
    EXPECT_EQ(printed.find("allocate"), std::string::npos) << printed;
  }
}

TEST(FusedComputeTest, DenseBiasAddGelu) {
  const std::vector<Tensor> inputs = {Random({3, 8}, kF32), Random({6, 8}, kF32),
                                      Random({6}, kF32)};
  const Tensor expected =
      Invoke("gelu", {Invoke("nn.bias_add", {Invoke("nn.dense", {inputs[0], inputs[1]}), inputs[2]},
                             MakeAttrs({{"axis", int64_t{-1}}}))});
  for (const DynamicDims& mode : kBothModes) {
    const std::vector<te::Tensor> x = Placeholders(inputs, mode);
    te::ComputeContext context;
    const te::Tensor dense = Apply(context, "nn.dense", {x[0], x[1]});
    const te::Tensor out =
        Apply(context, "gelu",
              {Apply(context, "nn.bias_add", {dense, x[2]}, MakeAttrs({{"axis", int64_t{-1}}}))});
    ExpectClose(RunFused(x, out, context, inputs, expected->shape()), expected, Relative(1e-5));
  }
}

TEST(FusedComputeTest, LayerNormOfAResidualAdd) {
  const std::vector<Tensor> inputs = {Random({2, 3, 8}, kF32), Random({2, 3, 8}, kF32),
                                      Random({8}, kF32), Random({8}, kF32)};
  const Tensor expected =
      Invoke("nn.layer_norm", {Invoke("add", {inputs[0], inputs[1]}), inputs[2], inputs[3]});
  for (const DynamicDims& mode : kBothModes) {
    const std::vector<te::Tensor> x = Placeholders(inputs, mode);
    te::ComputeContext context;
    const te::Tensor out =
        Apply(context, "nn.layer_norm", {Apply(context, "add", {x[0], x[1]}), x[2], x[3]});
    ExpectClose(RunFused(x, out, context, inputs, expected->shape()), expected, Relative(1e-5));
  }
}

TEST(FusedComputeTest, SoftmaxOfATransposedScaledScore) {
  const std::vector<Tensor> inputs = {Random({2, 5, 3}, kF32), TensorFrom({}, kF32, {0.125})};
  const ir::Attrs axes = MakeAttrs({{"axes", std::vector<int64_t>{0, 2, 1}}});
  const Tensor expected = Invoke(
      "nn.softmax", {Invoke("multiply", {Invoke("transpose", {inputs[0]}, axes), inputs[1]})});
  for (const DynamicDims& mode : kBothModes) {
    const std::vector<te::Tensor> x = Placeholders(inputs, mode);
    te::ComputeContext context;
    const te::Tensor out =
        Apply(context, "nn.softmax",
              {Apply(context, "multiply", {Apply(context, "transpose", {x[0]}, axes), x[1]})});
    ExpectClose(RunFused(x, out, context, inputs, expected->shape()), expected, Relative(1e-5));
  }
}

// ---------------------------------------------------------------------------
// The lowering's schedule, as printed loop IR

TEST(ScheduleTest, StaticElementwise) {
  const te::Tensor x = te::Placeholder("x", kF32, {tir::IntImm(64), tir::IntImm(8)});
  const te::Tensor y = te::Placeholder("y", kF32, {tir::IntImm(8)});
  te::ComputeContext context;
  const te::Tensor out = Apply(context, "add", {x, y});
  EXPECT_EQ(tir::ToString(te::Lower("add", {x, y}, {out}, context.requirements())),
            "kernel add(x: float32[64, 8], y: float32[8], out add: float32[64, 8]) {\n"
            "  for add.i in [0, 64) parallel chunk 4096 {\n"
            "    for add.j in [0, 8) vectorized {\n"
            "      add[((add.i * 8) + add.j)] = (x[((add.i * 8) + add.j)] + y[add.j])\n"
            "    }\n"
            "  }\n"
            "}\n");
}

// Matrix products take their own template: tests/compiler/te/matmul_schedule_test.cc.

TEST(ScheduleTest, RowVectorRunsItsElementsInParallel) {
  const te::Tensor x =
      te::Placeholder("x", kF32, {tir::IntImm(1), tir::IntImm(8), tir::IntImm(16)});
  te::ComputeContext context;
  const std::string printed = tir::ToString(
      te::Lower("sum", {x},
                {Apply(context, "sum", {x}, MakeAttrs({{"axis", std::vector<int64_t>{2}}}))}, {}));
  EXPECT_NE(printed.find("  for sum.j in [0, 8) parallel chunk 2048 {"), std::string::npos)
      << printed;
}

// On the GPU a reduction whose innermost axis may be long (32 or more, or a
// shape variable) takes a block of threads per element; a short one, a thread.
TEST(ScheduleTest, GpuLongReductionsTakeABlockPerElement) {
  const tir::Var n = tir::MakeVar("n");
  const te::Tensor x = te::Placeholder("x", kF32, {tir::IntImm(3), tir::IntImm(40)});
  const te::Tensor y = te::Placeholder("y", kF32, {tir::IntImm(3), n});
  const te::Tensor z = te::Placeholder("z", kF32, {tir::IntImm(40), tir::IntImm(3)});
  te::ComputeContext context(/*gpu=*/true);
  const Attrs last_axis = MakeAttrs({{"axis", std::vector<int64_t>{-1}}});
  auto lower = [&](const te::Tensor& input, const std::string& op) {
    return te::Lower(op, {input}, {Apply(context, op, {input}, last_axis)}, {}, {},
                     tir::PrimFunc::Device::kGpu);
  };
  EXPECT_EQ(tir::ToString(lower(x, "sum")),
            "gpu kernel sum(x: float32[3, 40], out sum: float32[3]) {\n"
            "  for sum.block in [0, 3) gpu_blocks {\n"
            "    allocate sum.acc: float32[1]\n"
            "    sum.acc[0] = 0.0f\n"
            "    for sum.k1 in [0, 40) gpu_block_stride {\n"
            "      sum.acc[0] =reassoc (sum.acc[0] + x[((sum.block * 40) + sum.k1)])\n"
            "    }\n"
            "    sum[sum.block] = block_sum(sum.acc[0])\n"
            "  }\n"
            "}\n");
  const std::string symbolic_axis = tir::ToString(lower(y, "max"));
  EXPECT_NE(symbolic_axis.find("block_max("), std::string::npos) << symbolic_axis;
  const std::string short_axis = tir::ToString(lower(z, "min"));
  EXPECT_NE(short_axis.find("gpu_threads"), std::string::npos) << short_axis;
  EXPECT_EQ(short_axis.find("block"), std::string::npos) << short_axis;

  // A block of one thread runs the same program (the interpreter's model).
  const Tensor input = Random({3, 40}, kF32);
  const Tensor sums = TensorNode::Empty({3}, kF32);
  tir::testing::Interpret(lower(x, "sum"), std::vector{input, sums});
  for (int64_t row = 0; row < 3; ++row) {
    double expected = 0;
    for (int64_t k = 0; k < 40; ++k) expected += input->data<float>()[row * 40 + k];
    EXPECT_NEAR(sums->data<float>()[row], expected, 1e-4);
  }
}

// A matrix product's elementwise epilogue (a bias, an activation) is
// stored by the product from each sum, so the product is never written out:
// on the CPU by its template, on the GPU by its template (16 rows or more)
// or by a block per element (fewer). On the CPU a transcendental epilogue
// (GELU) keeps its own vectorised loop after a dot-product tile. A consumer
// that reads the product elsewhere than at its own indices (a transpose),
// and a product that is an output too, keep the product's buffer.
TEST(ScheduleTest, AProductStoresItsElementwiseEpilogue) {
  for (const std::string activation : {"nn.relu", "gelu"}) {
    for (const int64_t rows : {20, 3}) {
      const std::vector<Tensor> inputs = {Random({rows, 40}, kF32), Random({6, 40}, kF32),
                                          Random({6}, kF32)};
      const Tensor expected =
          Invoke(activation,
                 {Invoke("nn.bias_add", {Invoke("nn.dense", {inputs[0], inputs[1]}), inputs[2]},
                         MakeAttrs({{"axis", int64_t{-1}}}))});
      for (const bool gpu : {false, true}) {
        for (const DynamicDims& mode : kBothModes) {
          const std::vector<te::Tensor> x = Placeholders(inputs, mode);
          te::ComputeContext context(gpu);
          const te::Tensor dense = Apply(context, "nn.dense", {x[0], x[1]});
          const te::Tensor out = Apply(
              context, activation,
              {Apply(context, "nn.bias_add", {dense, x[2]}, MakeAttrs({{"axis", int64_t{-1}}}))});
          const tir::PrimFunc func =
              te::Lower("fused", x, {out}, context.requirements(), {},
                        gpu ? tir::PrimFunc::Device::kGpu : tir::PrimFunc::Device::kCpu);
          const std::string printed = tir::ToString(func);
          const bool folded = gpu || activation == "nn.relu";
          EXPECT_EQ(printed.find("allocate nn.dense:") == std::string::npos, folded) << printed;
          EXPECT_EQ(printed.find("gpu_threads"), std::string::npos) << printed;
          if (gpu) {
            // Symbolic rows take the template whatever their count.
            int64_t static_rows = 0;
            const bool few = tir::AsInt(x[0]->shape[0], &static_rows) && static_rows < 16;
            EXPECT_EQ(printed.find("gpu_block_threads") != std::string::npos, !few) << printed;
          }
          Tensor result = TensorNode::Empty(expected->shape(), kF32);
          tir::testing::Interpret(func, std::vector{inputs[0], inputs[1], inputs[2], result});
          ExpectClose(result, expected, Relative(1e-5));
        }
      }
    }
  }
  const te::Tensor a = te::Placeholder("a", kF32, {tir::IntImm(4), tir::IntImm(8)});
  const te::Tensor b = te::Placeholder("b", kF32, {tir::IntImm(4), tir::IntImm(8)});
  te::ComputeContext context;
  const te::Tensor product = Apply(context, "nn.dense", {a, b});
  const te::Tensor transposed = Apply(context, "transpose", {product});
  const std::string kept = tir::ToString(te::Lower("k", {a, b}, {transposed}, {}));
  EXPECT_NE(kept.find("allocate nn.dense: float32[4, 4]"), std::string::npos) << kept;
  const te::Tensor tanh = Apply(context, "tanh", {product});
  const std::string output = tir::ToString(te::Lower("k", {a, b}, {tanh, product}, {}));
  EXPECT_NE(output.find("nn.dense[((nn.dense.row"), std::string::npos) << output;
}

// A residual add after a product whose rows are a `?` of their own (each
// input's `?` is a variable) has the rows `select(n0 == 1, n3, n0)`: the
// product stores it from each sum where that equals the product's rows n0,
// and otherwise (a product of one row broadcast over the residual's rows)
// writes a buffer read by the add's own loops. Both branches compute the
// add; static shapes need no branch. Where the columns are `?`s too, the
// bias add's broadcast inside the residual's adds its extent's equality to
// the condition. Only the GPU branches so (the CPU keeps the buffer).
TEST(ScheduleTest, AResidualOfRowsOfItsOwnIsAnEpilogueWhereTheRowsAreEqual) {
  const DynamicDims dynamic_rows = [](size_t input, size_t dim) {
    return dim == 0 && (input == 0 || input == 3);
  };
  for (const auto& [rows, residual_rows] :
       std::vector<std::pair<int64_t, int64_t>>{{20, 20}, {20, 1}, {1, 20}}) {
    const std::vector<Tensor> inputs = {Random({rows, 40}, kF32), Random({6, 40}, kF32),
                                        Random({6}, kF32), Random({residual_rows, 6}, kF32)};
    const Tensor expected = Invoke(
        "add", {Invoke("add", {Invoke("nn.dense", {inputs[0], inputs[1]}), inputs[2]}), inputs[3]});
    for (const bool gpu : {false, true}) {
      for (const DynamicDims* mode : {&kStatic, &dynamic_rows, &kDynamic}) {
        const std::vector<te::Tensor> x = Placeholders(inputs, *mode);
        te::ComputeContext context(gpu);
        const te::Tensor out =
            Apply(context, "add",
                  {Apply(context, "add", {Apply(context, "nn.dense", {x[0], x[1]}), x[2]}), x[3]});
        const tir::PrimFunc func =
            te::Lower("residual", x, {out}, context.requirements(), {},
                      gpu ? tir::PrimFunc::Device::kGpu : tir::PrimFunc::Device::kCpu);
        const std::string printed = tir::ToString(func);
        if (mode != &kStatic && !gpu) {
          EXPECT_EQ(Count(printed, "n3_0, n0_0) == n0_0"), 0u) << printed;
        }
        if (mode == &dynamic_rows && gpu) {
          EXPECT_NE(printed.find("  if (select((n0_0 == 1), n3_0, n0_0) == n0_0) {"),
                    std::string::npos)
              << printed;
        }
        if (mode == &kDynamic && gpu) {
          EXPECT_NE(printed.find("  if (((select((n0_0 == 1), n3_0, n0_0) == n0_0) && "),
                    std::string::npos)
              << printed;
          EXPECT_NE(printed.find(" && (select((n1_0 == 1), n2_0, n1_0) == n1_0)) {"),
                    std::string::npos)
              << printed;
        }
        if (mode != &kStatic) {
          // On the GPU in the other branch.
          EXPECT_EQ(Count(printed, "allocate nn.dense:"), 1u) << printed;
        } else {
          EXPECT_EQ(printed.find("if ((select"), std::string::npos) << printed;
          EXPECT_EQ(printed.find("allocate nn.dense:") == std::string::npos,
                    rows == std::max(rows, residual_rows))
              << printed;
        }
        Tensor result = TensorNode::Empty(expected->shape(), kF32);
        tir::testing::Interpret(func,
                                std::vector{inputs[0], inputs[1], inputs[2], inputs[3], result});
        ExpectClose(result, expected, Relative(1e-5));
      }
    }
  }
}

// A product read by two stages through one tensor inlined into both (a bias
// add read by a relu and by a sum) counts one read, but is no one stage's
// epilogue: it keeps its buffer, which both stages read.
TEST(ScheduleTest, AProductReadByTwoStagesThroughAnInlinedTensorKeepsItsBuffer) {
  const std::vector<Tensor> inputs = {Random({20, 8}, kF32), Random({6, 8}, kF32),
                                      Random({6}, kF32)};
  const Tensor biased = Invoke("add", {Invoke("nn.dense", {inputs[0], inputs[1]}), inputs[2]});
  const ir::Attrs last_axis = MakeAttrs({{"axis", std::vector<int64_t>{-1}}});
  for (const bool gpu : {false, true}) {
    const std::vector<te::Tensor> x = Placeholders(inputs, kStatic);
    te::ComputeContext context(gpu);
    const te::Tensor added =
        Apply(context, "add", {Apply(context, "nn.dense", {x[0], x[1]}), x[2]});
    const tir::PrimFunc func = te::Lower(
        "two", x, {Apply(context, "nn.relu", {added}), Apply(context, "sum", {added}, last_axis)},
        context.requirements(), {},
        gpu ? tir::PrimFunc::Device::kGpu : tir::PrimFunc::Device::kCpu);
    const std::string printed = tir::ToString(func);
    EXPECT_EQ(Count(printed, "allocate nn.dense:"), 1u) << printed;
    Tensor relu = TensorNode::Empty({20, 6}, kF32);
    Tensor sum = TensorNode::Empty({20}, kF32);
    tir::testing::Interpret(func, std::vector{inputs[0], inputs[1], inputs[2], relu, sum});
    ExpectClose(relu, Invoke("nn.relu", {biased}), Relative(1e-5));
    ExpectClose(sum, Invoke("sum", {biased}, last_axis), Relative(1e-5));
  }
}

// BERT's attention context: p (heads, L, L) times v (heads, L, dh), then
// transposed to (L, heads, dh) and reshaped to (1, L, heads * dh). On the
// GPU the product stores each sum where the transpose and the reshape move
// it: one launch, no buffer for the product. The CPU keeps the buffer (its
// template stores a row's columns as vectors). Both with 20 rows (the
// template) and 3 (a block per element), static and `?` lengths.
TEST(ScheduleTest, AGpuProductStoresEachSumWhereALayoutChangeMovesIt) {
  constexpr int64_t kHeads = 3, kHeadSize = 5;
  for (const int64_t length : {20, 3}) {
    const std::vector<Tensor> inputs = {Random({kHeads, length, length}, kF32),
                                        Random({kHeads, length, kHeadSize}, kF32)};
    const ir::Attrs product_attrs = MakeAttrs({{"transpose_b", false}});
    const ir::Attrs perm = MakeAttrs({{"axes", std::vector<int64_t>{1, 0, 2}}});
    const ir::Attrs rows =
        MakeAttrs({{"newshape", std::vector<int64_t>{1, -1, kHeads * kHeadSize}}});
    const Tensor expected = Invoke(
        "reshape", {Invoke("transpose", {Invoke("nn.batch_matmul", inputs, product_attrs)}, perm)},
        rows);
    for (const bool gpu : {false, true}) {
      for (const DynamicDims& mode : kBothModes) {
        const std::vector<te::Tensor> x = Placeholders(inputs, mode);
        te::ComputeContext context(gpu);
        const te::Tensor out =
            Apply(context, "reshape",
                  {Apply(context, "transpose",
                         {Apply(context, "nn.batch_matmul", x, product_attrs)}, perm)},
                  rows);
        const tir::PrimFunc func =
            te::Lower("context", x, {out}, context.requirements(), {},
                      gpu ? tir::PrimFunc::Device::kGpu : tir::PrimFunc::Device::kCpu);
        const std::string printed = tir::ToString(func);
        EXPECT_EQ(Count(printed, "allocate nn.batch_matmul:"), gpu ? 0u : 1u) << printed;
        if (gpu) {
          EXPECT_EQ(Count(printed, "gpu_blocks") + Count(printed, "gpu_threads"), 1u) << printed;
        }
        Tensor result = TensorNode::Empty(expected->shape(), kF32);
        tir::testing::Interpret(func, std::vector{inputs[0], inputs[1], result});
        ExpectClose(result, expected, Relative(1e-5));
      }
    }
  }
}

// An LSTM cell fused with its gate product (as --kernels generated fuses it):
// h (1, U) times w (4U, U) plus x gives the gates i, f, g, o of U units each;
// c' = sigmoid(f) * c + sigmoid(i) * tanh(g) and h' = sigmoid(o) * tanh(c').
// On the GPU the product of one row is computed where the cell reads it: one
// launch, each unit computing its four gates (by a thread each for a short
// reduction, U = 8; by block reductions for a long one, U = 40) with no gate
// buffer. The CPU writes the gates out once, then c' and h'.
TEST(ScheduleTest, AGpuCellComputesItsGateProductsWhereItReadsThem) {
  for (const int64_t units : {8, 40}) {
    const std::vector<Tensor> inputs = {Random({1, units}, kF32), Random({4 * units, units}, kF32),
                                        Random({1, 4 * units}, kF32), Random({1, units}, kF32)};
    const auto slice_attrs = [&](int64_t k) {
      return MakeAttrs({{"begin", std::vector<int64_t>{k * units}},
                        {"end", std::vector<int64_t>{(k + 1) * units}},
                        {"axes", std::vector<int64_t>{1}}});
    };
    const Tensor gate_values =
        Invoke("add", {Invoke("nn.dense", {inputs[0], inputs[1]}), inputs[2]});
    const auto expected_gate = [&](int64_t k, const std::string& activation) {
      return Invoke(activation, {Invoke("strided_slice", {gate_values}, slice_attrs(k))});
    };
    const Tensor expected_cell = Invoke(
        "add", {Invoke("multiply", {expected_gate(1, "sigmoid"), inputs[3]}),
                Invoke("multiply", {expected_gate(0, "sigmoid"), expected_gate(2, "tanh")})});
    const Tensor expected_hidden =
        Invoke("multiply", {expected_gate(3, "sigmoid"), Invoke("tanh", {expected_cell})});
    for (const bool gpu : {false, true}) {
      const std::vector<te::Tensor> x = Placeholders(inputs, kStatic);
      te::ComputeContext context(gpu);
      const te::Tensor gates =
          Apply(context, "add", {Apply(context, "nn.dense", {x[0], x[1]}), x[2]});
      const auto gate = [&](int64_t k, const std::string& activation) {
        return Apply(context, activation,
                     {Apply(context, "strided_slice", {gates}, slice_attrs(k))});
      };
      const te::Tensor cell =
          Apply(context, "add",
                {Apply(context, "multiply", {gate(1, "sigmoid"), x[3]}),
                 Apply(context, "multiply", {gate(0, "sigmoid"), gate(2, "tanh")})});
      const te::Tensor hidden =
          Apply(context, "multiply", {gate(3, "sigmoid"), Apply(context, "tanh", {cell})});
      const tir::PrimFunc func =
          te::Lower("cell", x, {hidden, cell}, context.requirements(), {},
                    gpu ? tir::PrimFunc::Device::kGpu : tir::PrimFunc::Device::kCpu);
      const std::string printed = tir::ToString(func);
      if (gpu) {
        const bool block = units >= 32;
        EXPECT_EQ(Count(printed, block ? "gpu_blocks" : "gpu_threads"), 1u) << printed;
        EXPECT_EQ(Count(printed, block ? "gpu_threads" : "gpu_blocks"), 0u) << printed;
        EXPECT_EQ(Count(printed, "block_sum"), block ? 4u : 0u) << printed;
        EXPECT_EQ(Count(printed, "allocate nn.dense:"), 0u) << printed;
      } else {
        EXPECT_EQ(Count(printed, "allocate "), 3u) << printed;  // the gates and two tiles' sums
      }
      Tensor hidden_out = TensorNode::Empty({1, units}, kF32);
      Tensor cell_out = TensorNode::Empty({1, units}, kF32);
      tir::testing::Interpret(
          func, std::vector{inputs[0], inputs[1], inputs[2], inputs[3], hidden_out, cell_out});
      ExpectClose(cell_out, expected_cell, Relative(1e-5));
      ExpectClose(hidden_out, expected_hidden, Relative(1e-5));
    }
  }
}

// ---------------------------------------------------------------------------
// Lowering and the tir constructors, where the compute definitions rely on
// them.

TEST(LowerTest, AnOutputReadByAnotherOutputIsComputedFirst) {
  // A fused primitive may return a value and something computed from it.
  const te::Tensor x = te::Placeholder("x", kF32, {tir::IntImm(3)});
  const te::Tensor doubled = te::Compute("doubled", x->shape, [&](const std::vector<Expr>& i) {
    return tir::Mul(te::Read(x, i), tir::FloatImm(2));
  });
  const te::Tensor plus_one = te::Compute("plus_one", x->shape, [&](const std::vector<Expr>& i) {
    return tir::Add(te::Read(doubled, i), tir::FloatImm(1));
  });
  const tir::PrimFunc func = te::Lower("k", {x}, {plus_one, doubled}, {});
  const Tensor input = TensorFrom({3}, kF32, {1, 2, 3});
  const Tensor first = TensorNode::Empty({3}, kF32), second = TensorNode::Empty({3}, kF32);
  tir::testing::Interpret(func, std::vector{input, first, second});
  EXPECT_EQ(Values(first), (std::vector<double>{3, 5, 7})) << tir::ToString(func);
  EXPECT_EQ(Values(second), (std::vector<double>{2, 4, 6}));
}

TEST(TirTest, IntegerConstantsFoldWithWrapping) {
  int64_t value;
  ASSERT_TRUE(tir::AsInt(tir::Add(tir::IntImm(100, kI8), tir::IntImm(100, kI8)), &value));
  EXPECT_EQ(value, -56);
  ASSERT_TRUE(tir::AsInt(tir::Cast(kU8, tir::IntImm(-1)), &value));
  EXPECT_EQ(value, 255);
  ASSERT_TRUE(tir::AsInt(tir::Cast(kI32, tir::IntImm(int64_t{1} << 32 | 7)), &value));
  EXPECT_EQ(value, 7);
}

// ---------------------------------------------------------------------------

TEST(ComputeCoverageTest, EveryOpWithAComputeIsTestedHere) {
  const std::set<std::string> tested = {"negative",
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
                                        "nn.dense",
                                        "nn.batch_matmul",
                                        "nn.bias_add",
                                        "nn.softmax",
                                        "nn.layer_norm",
                                        "sum",
                                        "mean",
                                        "max",
                                        "min",
                                        "prod",
                                        "all",
                                        "any",
                                        "argmax",
                                        "argmin",
                                        "reshape",
                                        "reshape_like",
                                        "transpose",
                                        "squeeze",
                                        "expand_dims",
                                        "concatenate",
                                        "stack",
                                        "split",
                                        "take",
                                        "strided_slice",
                                        "zeros",
                                        "ones",
                                        "full",
                                        "zeros_like",
                                        "ones_like",
                                        "full_like",
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
                                        "logical_xor",
                                        "gather_elements",
                                        "gather_nd",
                                        "nn.conv1d",
                                        "nn.conv2d",
                                        "nn.max_pool1d",
                                        "nn.max_pool2d",
                                        "nn.avg_pool1d",
                                        "nn.avg_pool2d"};
  std::set<std::string> with_compute;
  for (const std::string& name : OpRegistry::Global().Names()) {
    if (Def(name).compute) with_compute.insert(name);
  }
  EXPECT_EQ(with_compute, tested);
}

}  // namespace
}  // namespace nimble::op::testing
