// Unary elementwise operators and cast: output type = input type (cast: the
// `dtype` attribute), pattern elementwise. The reference kernel here applies
// the op's definition in reference_scalar.h one element at a time; the shape
// functions and built-in kernels live in the runtime (elemwise.cc), whose
// scalar functions are written separately so that each side checks the other.
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>

#include "nimble/compiler/op/compute_util.h"
#include "nimble/compiler/op/dtype_class.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/op/reference_scalar.h"
#include "nimble/compiler/op/type_relations.h"

namespace nimble::op {

namespace {

// The reference kernel: out[i] = fn(in[i]), element by element in the compute
// type. Input and output have one shape, so flat index i is the same element
// of both.
template <typename In, typename Out, typename Fn>
void ReferenceUnary(const Tensor& input, const Tensor& output, const Fn& fn) {
  const In* in = input->data<In>();
  Out* out = output->data<Out>();
  for (int64_t i = 0; i < output->numel(); ++i) {
    out[i] = reference::Convert<Out>(fn(LoadElement(in[i])));
  }
}

// The output of a predicate (isnan): the input's shape, bool.
bool UnaryPredicateRelation(const std::vector<ir::Type>& types, const ir::Attrs&,
                            TypeReporter& reporter) {
  const ir::TensorType input = AsTensorType(types[0], "predicate", "argument 0");
  if (!input) return false;
  reporter.Assign(types[1], ir::MakeTensorType(input->shape, DataType::Bool()));
  return true;
}

// Registers an op computing `fn` on each element; the output has the input's
// type (bool for a predicate), whose dtype must be one `fn` accepts. `attrs`
// are the parameters `fn` takes (reference::Configured).
template <typename Fn>
void RegisterUnaryOp(OpRegistry& registry, const std::string& name, const std::string& description,
                     Fn fn, std::vector<AttrSpec> attrs = {}) {
  OpDef& def = registry.Register(name);
  def.description = description;
  def.attrs = std::move(attrs);
  def.relation = Fn::kReturnsBool
                     ? RequireDTypeClass(Fn::kAccepts, UnaryPredicateRelation,
                                         /*check_output=*/false)
                     : RequireDTypeClass(Fn::kAccepts, IdentityRelation, /*check_output=*/true);
  def.pattern = OpPattern::kElemWise;
  def.kernel = [fn](std::span<const Tensor> inputs, std::span<Tensor> outputs,
                    const ir::Attrs& call_attrs) {
    const Fn configured = reference::Configured(fn, call_attrs);
    DispatchDType(inputs[0]->dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (ElementInClass<T>(Fn::kAccepts)) {
        ReferenceUnary<T, reference::ResultOf<Fn, T>>(inputs[0], outputs[0], configured);
      } else {
        ThrowUnsupportedDType(inputs[0]->dtype());
      }
    });
  };
}

bool CastRelation(const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                  TypeReporter& reporter) {
  const ir::TensorType input = AsTensorType(types[0], "cast", "argument 0");
  if (!input) return false;
  reporter.Assign(types[1], ir::MakeTensorType(input->shape, attrs.GetDType("dtype")));
  return true;
}

void RegisterCast(OpRegistry& registry) {
  OpDef& def = registry.Register("cast");
  def.description =
      "Converts each element to `dtype`. Float to integer truncates toward zero, saturates at the "
      "integer range and maps NaN to 0; anything to bool is `x != 0`.";
  def.attrs = {
      {.name = "dtype", .kind = ir::AttrKind::kDType, .default_value = {}, .required = true}};
  def.relation = CastRelation;
  def.pattern = OpPattern::kElemWise;
  def.kernel = [](std::span<const Tensor> inputs, std::span<Tensor> outputs, const ir::Attrs&) {
    DispatchDType(inputs[0]->dtype(), [&](auto in_tag) {
      DispatchDType(outputs[0]->dtype(), [&](auto out_tag) {
        ReferenceUnary<decltype(in_tag), decltype(out_tag)>(inputs[0], outputs[0],
                                                            reference::Identity());
      });
    });
  };
}

}  // namespace

// ---------------------------------------------------------------------------
// Compute definitions: each op's scalar function as a loop-IR expression of
// the input element (OpDef::compute), for code generation to fuse.

namespace {

using tir::Intrinsic;

// The output element from the input element `x` and the output dtype, or
// null where code generation leaves the op to the built-in kernel.
using ElementFunction = std::function<Expr(const Expr& x, DataType out)>;
// The same for an op with parameters, from the call's attributes.
using ElementFunctionOf = std::function<ElementFunction(const ir::Attrs& attrs)>;

ComputeFunction UnaryCompute(const std::string& name, ElementFunctionOf fn_of) {
  return
      [name, fn_of](te::ComputeContext&, std::span<const te::Tensor> inputs, const ir::Attrs& attrs,
                    std::span<const DataType> output_dtypes) -> std::vector<te::Tensor> {
        if (HasFloat16(inputs, output_dtypes)) return {};
        const te::Tensor& input = inputs[0];
        const ElementFunction fn = fn_of(attrs);
        // A null element means the op is left to its built-in kernel for this dtype.
        if (!fn(te::Read(input, std::vector<Expr>(input->shape.size(), tir::IntImm(0))),
                output_dtypes[0])) {
          return {};
        }
        return {te::Compute(name, input->shape, [&](const std::vector<Expr>& indices) {
          return fn(te::Read(input, indices), output_dtypes[0]);
        })};
      };
}

ElementFunction Math(Intrinsic intrinsic) {
  return [intrinsic](const Expr& x, DataType) { return tir::Call(intrinsic, {x}); };
}

Expr IsNegative(const Expr& x) {
  return tir::Compare(tir::CompareOp::kLt, x, tir::Constant(x->dtype, 0));
}

// IEEE negation for floats (x * -1 flips the sign of 0 too); integers wrap.
Expr Negate(const Expr& x) {
  if (x->dtype.is_float()) return tir::Mul(x, tir::Constant(x->dtype, -1));
  return tir::Sub(tir::Constant(x->dtype, 0), x);
}

Expr Const(const Expr& x, double value) {
  return tir::FloatImm(value, x->dtype);
}

// log(1 + y) for y >= 0 without losing the small y: log(u) * y / (u - 1)
// with u = 1 + y rounded, whose u - 1 is exact, cancels u's rounding error
// (Goldberg's formula); y itself where u rounds to 1.
Expr Log1p(const Expr& y) {
  const Expr u = tir::Add(Const(y, 1), y);
  return tir::Select(
      tir::Compare(tir::CompareOp::kEq, u, Const(y, 1)), y,
      tir::Div(tir::Mul(tir::Call(Intrinsic::kLog, {u}), y), tir::Sub(u, Const(y, 1))));
}

// e^x - 1 for x < 0: for -0.5 < x, (u - 1) * x / log(u) with u = e^x
// rounded (Kahan's formula; u - 1 is exact there and the quotient cancels
// u's error), x where u rounds to 1; below, u - 1 has no cancellation.
Expr Expm1OfNegative(const Expr& x) {
  const Expr u = tir::Call(Intrinsic::kExp, {x});
  const Expr u_minus_1 = tir::Sub(u, Const(x, 1));
  const Expr near_zero =
      tir::Select(tir::Compare(tir::CompareOp::kEq, u, Const(x, 1)), x,
                  tir::Div(tir::Mul(u_minus_1, x), tir::Call(Intrinsic::kLog, {u})));
  return tir::Select(tir::Compare(tir::CompareOp::kGt, x, Const(x, -0.5)), near_zero, u_minus_1);
}

// Clip's bound `value` as a constant of x's dtype: integers take it
// truncated and saturated, as the reference does (an infinite bound is the
// type's limit).
Expr BoundOf(const Expr& x, double value) {
  if (x->dtype.is_float()) return Const(x, value);
  return DispatchDType(x->dtype, [&](auto tag) -> Expr {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      return tir::IntImm(static_cast<int64_t>(reference::Convert<T>(value)), x->dtype);
    } else {
      return nullptr;
    }
  });
}

// The functors of elemwise_functions.h, operation for operation.
void AddUnaryComputes(OpRegistry& registry) {
  const auto set = [&](const std::string& name, ElementFunction fn) {
    registry.FindMutable(name)->compute = UnaryCompute(name, [fn](const ir::Attrs&) { return fn; });
  };
  const auto set_with_attrs = [&](const std::string& name, ElementFunctionOf fn_of) {
    registry.FindMutable(name)->compute = UnaryCompute(name, std::move(fn_of));
  };
  set("negative", [](const Expr& x, DataType) { return Negate(x); });
  set("abs", [](const Expr& x, DataType) {
    if (x->dtype.is_float()) return tir::Call(Intrinsic::kAbs, {x});
    return tir::Select(IsNegative(x), Negate(x), x);
  });
  set("exp", Math(Intrinsic::kExp));
  set("log", Math(Intrinsic::kLog));
  set("sqrt", Math(Intrinsic::kSqrt));
  set("rsqrt", Math(Intrinsic::kRsqrt));
  set("tanh", Math(Intrinsic::kTanh));
  set("sigmoid", Math(Intrinsic::kSigmoid));
  set("erf", Math(Intrinsic::kErf));
  // std::max(x, 0): NaN and -0 stay as they are.
  set("nn.relu", [](const Expr& x, DataType) {
    return tir::Select(IsNegative(x), tir::Constant(x->dtype, 0), x);
  });
  // 1 + erf(z) as erfc(-z), so that the small results of negative x do not
  // cancel; x is first clamped where the runtime clamps it (-20 in float32,
  // -40 in float64), below which the result is -0, as is gelu(-inf).
  set("gelu", [](const Expr& x, DataType) -> Expr {
    const double clamp = x->dtype == DataType::Float64() ? -40 : -20;
    const Expr y = tir::Max(x, tir::FloatImm(clamp, x->dtype));
    const Expr erfc = tir::Call(Intrinsic::kErfc,
                                {tir::Mul(y, tir::FloatImm(-0.70710678118654752440, x->dtype))});
    return tir::Mul(tir::Mul(tir::FloatImm(0.5, x->dtype), y), erfc);
  });
  set("round", [](const Expr& x, DataType) {
    return x->dtype.is_float() ? tir::Call(Intrinsic::kRound, {x}) : x;
  });
  set("floor", [](const Expr& x, DataType) {
    return x->dtype.is_float() ? tir::Call(Intrinsic::kFloor, {x}) : x;
  });
  set("ceil", [](const Expr& x, DataType) {
    return x->dtype.is_float() ? tir::Call(Intrinsic::kCeil, {x}) : x;
  });
  // Zeros and NaN (all comparisons false) are returned as they are.
  set("sign", [](const Expr& x, DataType) {
    const Expr zero = tir::Constant(x->dtype, 0);
    const Expr positive = tir::Compare(tir::CompareOp::kGt, x, zero);
    const Expr one = tir::Constant(x->dtype, 1);
    if (x->dtype.code() == DataType::Code::kUInt) return tir::Select(positive, one, x);
    return tir::Select(positive, one, tir::Select(IsNegative(x), tir::Constant(x->dtype, -1), x));
  });
  set_with_attrs("nn.leaky_relu", [](const ir::Attrs& attrs) -> ElementFunction {
    const double alpha = attrs.GetFloat("alpha");
    return [alpha](const Expr& x, DataType) {
      return tir::Select(IsNegative(x), tir::Mul(Const(x, alpha), x), x);
    };
  });
  set_with_attrs("nn.elu", [](const ir::Attrs& attrs) -> ElementFunction {
    const double alpha = attrs.GetFloat("alpha");
    return [alpha](const Expr& x, DataType) {
      return tir::Select(IsNegative(x), tir::Mul(Const(x, alpha), Expm1OfNegative(x)), x);
    };
  });
  // tir::Max and tir::Min propagate NaN, as the reference does.
  set_with_attrs("nn.hard_sigmoid", [](const ir::Attrs& attrs) -> ElementFunction {
    const double alpha = attrs.GetFloat("alpha");
    const double beta = attrs.GetFloat("beta");
    // In float64, as the reference: alpha * x + beta cancels near 0.
    return [alpha, beta](const Expr& x, DataType) {
      const DataType wide = DataType::Float64();
      const Expr z = tir::Add(tir::Mul(tir::FloatImm(alpha, wide), tir::Cast(wide, x)),
                              tir::FloatImm(beta, wide));
      return tir::Cast(x->dtype,
                       tir::Max(tir::Min(z, tir::FloatImm(1, wide)), tir::FloatImm(0, wide)));
    };
  });
  set("nn.softplus", [](const Expr& x, DataType) {
    const Expr tail = Log1p(tir::Call(Intrinsic::kExp, {Negate(tir::Call(Intrinsic::kAbs, {x}))}));
    return tir::Add(tir::Max(x, Const(x, 0)), tail);
  });
  set_with_attrs("clip", [](const ir::Attrs& attrs) -> ElementFunction {
    const double a_min = attrs.GetFloat("a_min");
    const double a_max = attrs.GetFloat("a_max");
    return [a_min, a_max](const Expr& x, DataType) -> Expr {
      const Expr low = BoundOf(x, a_min);
      const Expr high = BoundOf(x, a_max);
      if (!low || !high) return nullptr;
      return tir::Min(tir::Max(x, low), high);
    };
  });
  // NaN alone is unequal to itself.
  set("isnan", [](const Expr& x, DataType) { return tir::Compare(tir::CompareOp::kNe, x, x); });
  set("copy", [](const Expr& x, DataType) { return x; });
  set("logical_not", [](const Expr& x, DataType) { return tir::Not(x); });
  set("cast", [](const Expr& x, DataType out) { return tir::Cast(out, x); });
}

}  // namespace

void RegisterUnaryOps(OpRegistry& registry) {
  using namespace reference;
  RegisterUnaryOp(registry, "negative", "Elementwise -x (integers wrap: -INT_MIN = INT_MIN).",
                  Negative());
  RegisterUnaryOp(registry, "abs", "Elementwise |x| (integers wrap: |INT_MIN| = INT_MIN).", Abs());
  RegisterUnaryOp(registry, "exp", "Elementwise e^x.", Exp());
  RegisterUnaryOp(registry, "log", "Elementwise natural logarithm.", Log());
  RegisterUnaryOp(registry, "sqrt", "Elementwise square root.", Sqrt());
  RegisterUnaryOp(registry, "rsqrt", "Elementwise 1 / sqrt(x).", Rsqrt());
  RegisterUnaryOp(registry, "tanh", "Elementwise hyperbolic tangent.", Tanh());
  RegisterUnaryOp(registry, "sigmoid", "Elementwise 1 / (1 + e^-x).", Sigmoid());
  RegisterUnaryOp(registry, "nn.relu", "Elementwise max(x, 0); NaN stays NaN.", Relu());
  RegisterUnaryOp(registry, "erf", "Elementwise Gauss error function.", Erf());
  RegisterUnaryOp(registry, "gelu", "Elementwise 0.5 * x * (1 + erf(x / sqrt(2))).", Gelu());
  RegisterUnaryOp(registry, "round",
                  "Elementwise round to the nearest integer, halves to even (numpy's rint: 2.5 -> "
                  "2, -0.5 -> -0); integers are unchanged.",
                  Round());
  RegisterUnaryOp(registry, "floor", "Elementwise largest integer <= x; integers are unchanged.",
                  Floor());
  RegisterUnaryOp(registry, "ceil", "Elementwise smallest integer >= x; integers are unchanged.",
                  Ceil());
  RegisterUnaryOp(registry, "sign",
                  "Elementwise -1, 0 or 1 by the sign of x; zeros and NaN are returned as they "
                  "are.",
                  Sign());
  RegisterUnaryOp(registry, "nn.leaky_relu", "Elementwise x for x >= 0, alpha * x below.",
                  LeakyRelu(), {{"alpha", ir::AttrKind::kFloat, 0.01}});
  RegisterUnaryOp(registry, "nn.elu", "Elementwise x for x >= 0, alpha * (e^x - 1) below.", Elu(),
                  {{"alpha", ir::AttrKind::kFloat, 1.0}});
  RegisterUnaryOp(registry, "nn.hard_sigmoid",
                  "Elementwise max(0, min(1, alpha * x + beta)); NaN stays NaN.", HardSigmoid(),
                  {{"alpha", ir::AttrKind::kFloat, 0.2}, {"beta", ir::AttrKind::kFloat, 0.5}});
  RegisterUnaryOp(registry, "nn.softplus", "Elementwise log(1 + e^x).", Softplus());
  RegisterUnaryOp(registry, "clip",
                  "Elementwise min(max(x, a_min), a_max); NaN stays NaN. Integers take the "
                  "bounds truncated and saturated to their type.",
                  Clip(),
                  {{"a_min", ir::AttrKind::kFloat, -std::numeric_limits<double>::infinity()},
                   {"a_max", ir::AttrKind::kFloat, std::numeric_limits<double>::infinity()}});
  RegisterUnaryOp(registry, "isnan", "Elementwise x != x: true where x is NaN.", IsNaNOp());
  RegisterUnaryOp(registry, "copy", "A copy of the input.", Identity());
  RegisterUnaryOp(registry, "logical_not", "Elementwise boolean not.", LogicalNot());
  RegisterCast(registry);
  AddUnaryComputes(registry);
}

}  // namespace nimble::op
