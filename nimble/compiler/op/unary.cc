// Unary elementwise operators and cast: output type = input type (cast: the
// `dtype` attribute), pattern elementwise. The reference kernel here applies
// the op's definition in reference_scalar.h one element at a time; the shape
// functions and built-in kernels live in the runtime (elemwise.cc), whose
// scalar functions are written separately so that each side checks the other.
#include <cstdint>
#include <functional>
#include <string>

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

// Registers an op computing `fn` on each element; the output has the input's
// type, whose dtype must be one `fn` accepts.
template <typename Fn>
void RegisterUnaryOp(OpRegistry& registry, const std::string& name, const std::string& description,
                     Fn fn) {
  OpDef& def = registry.Register(name);
  def.description = description;
  def.relation = RequireDTypeClass(Fn::kAccepts, IdentityRelation, /*check_output=*/true);
  def.pattern = OpPattern::kElemWise;
  def.kernel = [fn](std::span<const Tensor> inputs, std::span<Tensor> outputs, const ir::Attrs&) {
    DispatchDType(inputs[0]->dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (ElementInClass<T>(Fn::kAccepts)) {
        ReferenceUnary<T, T>(inputs[0], outputs[0], fn);
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

ComputeFunction UnaryCompute(const std::string& name, ElementFunction fn) {
  return [name, fn](te::ComputeContext&, std::span<const te::Tensor> inputs, const ir::Attrs&,
                    std::span<const DataType> output_dtypes) -> std::vector<te::Tensor> {
    if (HasFloat16(inputs, output_dtypes)) return {};
    const te::Tensor& input = inputs[0];
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

// The functors of elemwise_functions.h, operation for operation.
void AddUnaryComputes(OpRegistry& registry) {
  const auto set = [&](const std::string& name, ElementFunction fn) {
    registry.FindMutable(name)->compute = UnaryCompute(name, std::move(fn));
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
  RegisterUnaryOp(registry, "copy", "A copy of the input.", Identity());
  RegisterUnaryOp(registry, "logical_not", "Elementwise boolean not.", LogicalNot());
  RegisterCast(registry);
  AddUnaryComputes(registry);
}

}  // namespace nimble::op
