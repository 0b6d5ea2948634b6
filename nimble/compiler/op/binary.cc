// Broadcasting binary operators (arithmetic, comparisons, logical) and
// `where`: output shape = numpy broadcast of the inputs with the Any rules of
// BroadcastDims, checked again at run time by the shape function; kernel = one
// BroadcastLoop over a scalar function.
#include <cmath>
#include <functional>

#include "nimble/compiler/op/elemwise.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/op/type_relations.h"
#include "nimble/vm/error.h"

namespace nimble::op {

namespace {

// Registers a two-input broadcast op computing `fn` on inputs of one dtype in
// `kAccepted`; the output has that dtype, or bool for a comparison.
template <DTypeClass kAccepted, bool kCompare, typename Fn>
void RegisterBroadcastOp(OpRegistry& registry, const std::string& name,
                         const std::string& description, Fn fn) {
  OpDef& def = registry.Register(name);
  def.description = description;
  def.min_inputs = def.max_inputs = 2;
  def.relation = RequireDTypeClass(
      kAccepted, kCompare ? BroadcastCompareRelation : BroadcastRelation, /*check_output=*/false);
  def.shape_func = BroadcastShapeFunc(name);
  def.shape_mode = ShapeFuncMode::kDataIndependent;
  def.pattern = OpPattern::kBroadcast;
  def.kernel = [fn](std::span<const Tensor> inputs, std::span<Tensor> outputs, const ir::Attrs&) {
    DispatchDType(inputs[0]->dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (ElementInClass<T>(kAccepted)) {
        using Out = std::conditional_t<kCompare, bool, T>;
        BroadcastLoop<Out, T, T>(outputs[0], {inputs[0], inputs[1]}, fn);
      } else {
        ThrowUnsupportedDType(inputs[0]->dtype());
      }
    });
  };
}

template <typename T>
bool IsNaN(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(x);
  } else {
    return false;
  }
}

// C semantics for integers (truncation toward zero; INT_MIN / -1 wraps to
// INT_MIN), IEEE for floats.
template <typename T>
T Divide(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b == T(0)) throw Error("divide: division by zero");
    if constexpr (std::is_signed_v<T>) {
      if (b == T(-1)) return Wrapping(std::minus<>(), T(0), a);
    }
    return static_cast<T>(a / b);
  } else {
    return a / b;
  }
}

// Exponentiation by squaring for integers (wrapping like multiply), std::pow
// for floats.
template <typename T>
T Power(T base, T exponent) {
  if constexpr (std::is_integral_v<T>) {
    if constexpr (std::is_signed_v<T>) {
      if (exponent < T(0)) {
        throw Error("power: integers to negative integer powers are not allowed");
      }
    }
    T result = 1;
    for (; exponent != T(0); exponent = static_cast<T>(exponent >> 1)) {
      if (exponent & 1) result = Wrapping(std::multiplies<>(), result, base);
      base = Wrapping(std::multiplies<>(), base, base);
    }
    return result;
  } else {
    return std::pow(base, exponent);
  }
}

bool WhereRelation(const std::vector<ir::Type>& types, const ir::Attrs&, TypeReporter& reporter) {
  const ir::TensorType condition = AsTensorType(types[0], "where", "condition");
  const ir::TensorType x = AsTensorType(types[1], "where", "x");
  const ir::TensorType y = AsTensorType(types[2], "where", "y");
  if (!condition || !x || !y) return false;
  if (!condition->dtype.is_bool()) {
    throw Error("condition must be a bool tensor, got " + ir::TypeToString(types[0]));
  }
  if (x->dtype != y->dtype) {
    throw Error("x and y dtypes differ: " + x->dtype.name() + " and " + y->dtype.name());
  }
  std::vector<ir::Dim> shape = BroadcastDims(condition->shape, x->shape, "");
  shape = BroadcastDims(shape, y->shape, "");
  reporter.Assign(types[3], ir::MakeTensorType(std::move(shape), x->dtype));
  return true;
}

void RegisterWhere(OpRegistry& registry) {
  OpDef& def = registry.Register("where");
  def.description =
      "where(condition, x, y): x where condition is true, else y; the three inputs broadcast "
      "together.";
  def.min_inputs = def.max_inputs = 3;
  def.relation = WhereRelation;
  def.shape_func = BroadcastShapeFunc("where");
  def.shape_mode = ShapeFuncMode::kDataIndependent;
  def.pattern = OpPattern::kBroadcast;
  def.kernel = [](std::span<const Tensor> inputs, std::span<Tensor> outputs, const ir::Attrs&) {
    DispatchDType(inputs[1]->dtype(), [&](auto tag) {
      using T = decltype(tag);
      BroadcastLoop<T, bool, T, T>(
          outputs[0], {inputs[0], inputs[1], inputs[2]},
          [](bool condition, auto x, auto y) { return condition ? x : y; });
    });
  };
}

}  // namespace

void RegisterBinaryOps(OpRegistry& registry) {
  using enum DTypeClass;
  constexpr bool kArith = false;
  constexpr bool kCompare = true;
  RegisterBroadcastOp<kNumeric, kArith>(
      registry, "add", "Elementwise a + b (integers wrap).",
      [](auto a, auto b) { return Wrapping(std::plus<>(), a, b); });
  RegisterBroadcastOp<kNumeric, kArith>(
      registry, "subtract", "Elementwise a - b (integers wrap).",
      [](auto a, auto b) { return Wrapping(std::minus<>(), a, b); });
  RegisterBroadcastOp<kNumeric, kArith>(
      registry, "multiply", "Elementwise a * b (integers wrap).",
      [](auto a, auto b) { return Wrapping(std::multiplies<>(), a, b); });
  RegisterBroadcastOp<kNumeric, kArith>(
      registry, "divide",
      "Elementwise a / b. Integers truncate toward zero (C semantics, not numpy's floor) and a "
      "zero divisor is an error.",
      [](auto a, auto b) { return Divide(a, b); });
  RegisterBroadcastOp<kNumeric, kArith>(
      registry, "power",
      "Elementwise a ** b. Integers wrap; a negative integer exponent is an error.",
      [](auto a, auto b) { return Power(a, b); });
  RegisterBroadcastOp<kNumeric, kArith>(registry, "maximum",
                                        "Elementwise max(a, b); NaN propagates.",
                                        [](auto a, auto b) { return IsNaN(a) || a > b ? a : b; });
  RegisterBroadcastOp<kNumeric, kArith>(registry, "minimum",
                                        "Elementwise min(a, b); NaN propagates.",
                                        [](auto a, auto b) { return IsNaN(a) || a < b ? a : b; });
  RegisterBroadcastOp<kAny, kCompare>(registry, "equal", "Elementwise a == b.",
                                      [](auto a, auto b) { return a == b; });
  RegisterBroadcastOp<kAny, kCompare>(registry, "not_equal", "Elementwise a != b.",
                                      [](auto a, auto b) { return a != b; });
  RegisterBroadcastOp<kAny, kCompare>(registry, "less", "Elementwise a < b.",
                                      [](auto a, auto b) { return a < b; });
  RegisterBroadcastOp<kAny, kCompare>(registry, "less_equal", "Elementwise a <= b.",
                                      [](auto a, auto b) { return a <= b; });
  RegisterBroadcastOp<kAny, kCompare>(registry, "greater", "Elementwise a > b.",
                                      [](auto a, auto b) { return a > b; });
  RegisterBroadcastOp<kAny, kCompare>(registry, "greater_equal", "Elementwise a >= b.",
                                      [](auto a, auto b) { return a >= b; });
  RegisterBroadcastOp<kBool, kArith>(registry, "logical_and", "Elementwise boolean and.",
                                     [](bool a, bool b) { return a && b; });
  RegisterBroadcastOp<kBool, kArith>(registry, "logical_or", "Elementwise boolean or.",
                                     [](bool a, bool b) { return a || b; });
  RegisterWhere(registry);
}

}  // namespace nimble::op
