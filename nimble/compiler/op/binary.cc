// Broadcasting binary operators (arithmetic, comparisons, logical) and
// `where`: output shape = numpy broadcast of the inputs with the Any rules of
// BroadcastDims, checked again at run time by the shape function. The
// reference kernel here applies the op's definition in reference_scalar.h one
// output element at a time; the shape functions and built-in kernels live in
// the runtime (elemwise.cc), whose scalar functions are written separately so
// that each side checks the other.
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "nimble/compiler/op/compute_util.h"
#include "nimble/compiler/op/dtype_class.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/op/reference_loops.h"
#include "nimble/compiler/op/reference_scalar.h"
#include "nimble/compiler/op/type_relations.h"
#include "nimble/vm/error.h"

namespace nimble::op {

namespace {

// The element of `input` (of element type T) that output multi-index `index`
// reads under broadcasting, in the compute type.
template <typename T>
ComputeType<T> ElementAt(const Tensor& input, std::span<const int64_t> index) {
  return LoadElement(input->data<T>()[BroadcastOffset(input->shape(), index)]);
}

// The reference kernel: each output element, by its multi-index, is
// value(index) converted to Out.
template <typename Out, typename Value>
void ReferenceBroadcast(const Tensor& output, const Value& value) {
  Out* out = output->data<Out>();
  int64_t flat = 0;
  ForEachIndex(output->shape(), [&](std::span<const int64_t> index) {
    out[flat++] = reference::Convert<Out>(value(index));
  });
}

// Registers a two-input broadcast op computing `fn` on inputs of one dtype
// that `fn` accepts; the output has that dtype, or bool for a comparison.
template <typename Fn>
void RegisterBroadcastOp(OpRegistry& registry, const std::string& name,
                         const std::string& description, Fn fn) {
  OpDef& def = registry.Register(name);
  def.description = description;
  def.min_inputs = def.max_inputs = 2;
  def.relation = RequireDTypeClass(Fn::kAccepts,
                                   Fn::kReturnsBool ? BroadcastCompareRelation : BroadcastRelation,
                                   /*check_output=*/false);
  def.pattern = OpPattern::kBroadcast;
  def.kernel = [fn](std::span<const Tensor> inputs, std::span<Tensor> outputs, const ir::Attrs&) {
    DispatchDType(inputs[0]->dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (ElementInClass<T>(Fn::kAccepts)) {
        ReferenceBroadcast<reference::ResultOf<Fn, T>>(outputs[0], [&](auto index) {
          return fn(ElementAt<T>(inputs[0], index), ElementAt<T>(inputs[1], index));
        });
      } else {
        ThrowUnsupportedDType(inputs[0]->dtype());
      }
    });
  };
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
  def.pattern = OpPattern::kBroadcast;
  def.kernel = [](std::span<const Tensor> inputs, std::span<Tensor> outputs, const ir::Attrs&) {
    DispatchDType(inputs[1]->dtype(), [&](auto tag) {
      using T = decltype(tag);
      ReferenceBroadcast<T>(outputs[0], [&](auto index) {
        return ElementAt<bool>(inputs[0], index) ? ElementAt<T>(inputs[1], index)
                                                 : ElementAt<T>(inputs[2], index);
      });
    });
  };
}

}  // namespace

// ---------------------------------------------------------------------------
// Compute definitions: the scalar function of each op as a loop-IR expression
// of the broadcast input elements (OpDef::compute), for code generation to
// fuse.

namespace {

using tir::CompareOp;

using BinaryFunction = std::function<Expr(const Expr& a, const Expr& b)>;

// `float_only`: integer inputs are left to the built-in kernel, which reports
// what can fail on them at run time (a zero divisor, a negative exponent).
ComputeFunction BinaryCompute(const std::string& name, BinaryFunction fn, bool float_only) {
  return [name, fn, float_only](
             te::ComputeContext& context, std::span<const te::Tensor> inputs, const ir::Attrs&,
             std::span<const DataType> output_dtypes) -> std::vector<te::Tensor> {
    if (HasFloat16(inputs, output_dtypes) || (float_only && !inputs[0]->dtype.is_float())) {
      return {};
    }
    return {BroadcastCompute(context, name, inputs, [&](const std::vector<Expr>& values) {
      return fn(values[0], values[1]);
    })};
  };
}

Expr PowerOf(const Expr& base, const Expr& exponent) {
  return tir::Call(tir::Intrinsic::kPow, {base, exponent});
}

Expr FmodOf(const Expr& a, const Expr& b) {
  return tir::Call(tir::Intrinsic::kFmod, {a, b});
}

// Python's a % b for floats: fmod's remainder (a's sign) plus b where the
// signs differ, and a zero remainder with b's sign, as the reference has it.
Expr FloorModOf(const Expr& a, const Expr& b) {
  const Expr r = FmodOf(a, b);
  const Expr zero = tir::FloatImm(0.0, a->dtype);
  const Expr b_negative = tir::Compare(CompareOp::kLt, b, zero);
  const Expr signs_differ =
      tir::Compare(CompareOp::kNe, tir::Compare(CompareOp::kLt, r, zero), b_negative);
  // |r| times -1 or 1 (the constants -0 and 0 compare equal, so a select of
  // the two could be folded to one).
  const Expr signed_zero = tir::Mul(
      tir::Call(tir::Intrinsic::kAbs, {r}),
      tir::Select(b_negative, tir::FloatImm(-1.0, a->dtype), tir::FloatImm(1.0, a->dtype)));
  return tir::Select(tir::Compare(CompareOp::kEq, r, zero), signed_zero,
                     tir::Select(signs_differ, tir::Add(r, b), r));
}

BinaryFunction Comparison(CompareOp op) {
  return [op](const Expr& a, const Expr& b) { return tir::Compare(op, a, b); };
}

std::vector<te::Tensor> WhereCompute(te::ComputeContext& context,
                                     std::span<const te::Tensor> inputs, const ir::Attrs&,
                                     std::span<const DataType> output_dtypes) {
  if (HasFloat16(inputs, output_dtypes)) return {};
  return {BroadcastCompute(context, "where", inputs, [](const std::vector<Expr>& values) {
    return tir::Select(values[0], values[1], values[2]);
  })};
}

// The functors of elemwise_functions.h, operation for operation; tir::Max and
// tir::Min have maximum's and minimum's NaN semantics.
void AddBinaryComputes(OpRegistry& registry) {
  const auto set = [&](const std::string& name, BinaryFunction fn, bool float_only = false) {
    registry.FindMutable(name)->compute = BinaryCompute(name, std::move(fn), float_only);
  };
  set("add", tir::Add);
  set("subtract", tir::Sub);
  set("multiply", tir::Mul);
  set("divide", tir::Div, /*float_only=*/true);
  set("power", PowerOf, /*float_only=*/true);
  set("mod", FmodOf, /*float_only=*/true);
  set("floor_mod", FloorModOf, /*float_only=*/true);
  set("maximum", tir::Max);
  set("minimum", tir::Min);
  set("equal", Comparison(CompareOp::kEq));
  set("not_equal", Comparison(CompareOp::kNe));
  set("less", Comparison(CompareOp::kLt));
  set("less_equal", Comparison(CompareOp::kLe));
  set("greater", Comparison(CompareOp::kGt));
  set("greater_equal", Comparison(CompareOp::kGe));
  set("logical_and", tir::And);
  set("logical_or", tir::Or);
  set("logical_xor", Comparison(CompareOp::kNe));
  registry.FindMutable("where")->compute = WhereCompute;
}

}  // namespace

void RegisterBinaryOps(OpRegistry& registry) {
  using namespace reference;
  RegisterBroadcastOp(registry, "add", "Elementwise a + b (integers wrap).", Add());
  RegisterBroadcastOp(registry, "subtract", "Elementwise a - b (integers wrap).", Subtract());
  RegisterBroadcastOp(registry, "multiply", "Elementwise a * b (integers wrap).", Multiply());
  RegisterBroadcastOp(registry, "divide",
                      "Elementwise a / b. Integers truncate toward zero (C semantics, not numpy's "
                      "floor) and a zero divisor is an error.",
                      Divide());
  RegisterBroadcastOp(registry, "power",
                      "Elementwise a ** b. Integers wrap; a negative integer exponent is an error.",
                      Power());
  RegisterBroadcastOp(registry, "mod",
                      "Elementwise remainder of a / b with a's sign (C's % and fmod). A zero "
                      "integer divisor is an error.",
                      Mod());
  RegisterBroadcastOp(registry, "floor_mod",
                      "Elementwise remainder of a / b with b's sign (Python's %; a zero float "
                      "remainder too). A zero integer divisor is an error.",
                      FloorMod());
  RegisterBroadcastOp(registry, "maximum", "Elementwise max(a, b); NaN propagates.", Maximum());
  RegisterBroadcastOp(registry, "minimum", "Elementwise min(a, b); NaN propagates.", Minimum());
  RegisterBroadcastOp(registry, "equal", "Elementwise a == b.", Equal());
  RegisterBroadcastOp(registry, "not_equal", "Elementwise a != b.", NotEqual());
  RegisterBroadcastOp(registry, "less", "Elementwise a < b.", Less());
  RegisterBroadcastOp(registry, "less_equal", "Elementwise a <= b.", LessEqual());
  RegisterBroadcastOp(registry, "greater", "Elementwise a > b.", Greater());
  RegisterBroadcastOp(registry, "greater_equal", "Elementwise a >= b.", GreaterEqual());
  RegisterBroadcastOp(registry, "logical_and", "Elementwise boolean and.", LogicalAnd());
  RegisterBroadcastOp(registry, "logical_or", "Elementwise boolean or.", LogicalOr());
  RegisterBroadcastOp(registry, "logical_xor", "Elementwise boolean exclusive or.", LogicalXor());
  RegisterWhere(registry);
  AddBinaryComputes(registry);
}

}  // namespace nimble::op
