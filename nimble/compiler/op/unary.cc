// Unary elementwise operators: output type = input type (except cast), shape
// function = identity, kernel = one UnaryLoop over a scalar function.
#include <algorithm>
#include <cmath>
#include <functional>

#include "nimble/compiler/op/elemwise.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/op/type_relations.h"
#include "nimble/vm/error.h"

namespace nimble::op {

namespace {

// Registers an op computing `fn` on each element of an input whose dtype is
// in `kAccepted`; the output has the input's type.
template <DTypeClass kAccepted, typename Fn>
void RegisterUnaryOp(OpRegistry& registry, const std::string& name, const std::string& description,
                     Fn fn) {
  OpDef& def = registry.Register(name);
  def.description = description;
  def.relation = RequireDTypeClass(kAccepted, IdentityRelation, /*check_output=*/true);
  def.shape_func = IdentityShapeFunc;
  def.shape_mode = ShapeFuncMode::kDataIndependent;
  def.pattern = OpPattern::kElemWise;
  def.kernel = [fn](std::span<const Tensor> inputs, std::span<Tensor> outputs, const ir::Attrs&) {
    DispatchDType(inputs[0]->dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (ElementInClass<T>(kAccepted)) {
        UnaryLoop<T, T>(inputs[0], outputs[0], fn);
      } else {
        ThrowUnsupportedDType(inputs[0]->dtype());
      }
    });
  };
}

template <typename T>
T Negate(T x) {
  return Wrapping(std::minus<>(), T(0), x);
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
  def.shape_func = IdentityShapeFunc;
  def.shape_mode = ShapeFuncMode::kDataIndependent;
  def.pattern = OpPattern::kElemWise;
  def.kernel = [](std::span<const Tensor> inputs, std::span<Tensor> outputs, const ir::Attrs&) {
    DispatchDType(inputs[0]->dtype(), [&](auto in_tag) {
      DispatchDType(outputs[0]->dtype(), [&](auto out_tag) {
        UnaryLoop<decltype(in_tag), decltype(out_tag)>(inputs[0], outputs[0],
                                                       [](auto x) { return x; });
      });
    });
  };
}

}  // namespace

void RegisterUnaryOps(OpRegistry& registry) {
  using enum DTypeClass;
  RegisterUnaryOp<kNumeric>(registry, "negative",
                            "Elementwise -x (integers wrap: -INT_MIN = INT_MIN).",
                            [](auto x) { return Negate(x); });
  RegisterUnaryOp<kNumeric>(registry, "abs",
                            "Elementwise |x| (integers wrap: |INT_MIN| = INT_MIN).", [](auto x) {
                              using C = decltype(x);
                              if constexpr (std::is_floating_point_v<C>) {
                                return std::abs(x);
                              } else if constexpr (std::is_unsigned_v<C>) {
                                return x;
                              } else {
                                return x < C(0) ? Negate(x) : x;
                              }
                            });
  RegisterUnaryOp<kFloat>(registry, "exp", "Elementwise e^x.", [](auto x) { return std::exp(x); });
  RegisterUnaryOp<kFloat>(registry, "log", "Elementwise natural logarithm.",
                          [](auto x) { return std::log(x); });
  RegisterUnaryOp<kFloat>(registry, "sqrt", "Elementwise square root.",
                          [](auto x) { return std::sqrt(x); });
  RegisterUnaryOp<kFloat>(registry, "rsqrt", "Elementwise 1 / sqrt(x).", [](auto x) {
    using C = decltype(x);
    return C(1) / std::sqrt(x);
  });
  RegisterUnaryOp<kFloat>(registry, "tanh", "Elementwise hyperbolic tangent.",
                          [](auto x) { return std::tanh(x); });
  RegisterUnaryOp<kFloat>(registry, "sigmoid", "Elementwise 1 / (1 + e^-x).", [](auto x) {
    using C = decltype(x);
    return C(1) / (C(1) + std::exp(-x));
  });
  RegisterUnaryOp<kNumeric>(registry, "nn.relu", "Elementwise max(x, 0); NaN stays NaN.",
                            [](auto x) {
                              using C = decltype(x);
                              return std::max(x, C(0));
                            });
  RegisterUnaryOp<kFloat>(registry, "erf", "Elementwise Gauss error function.",
                          [](auto x) { return std::erf(x); });
  RegisterUnaryOp<kFloat>(registry, "gelu", "Elementwise 0.5 * x * (1 + erf(x / sqrt(2))).",
                          [](auto x) {
                            using C = decltype(x);
                            return C(0.5) * x * (C(1) + std::erf(x * C(0.70710678118654752440)));
                          });
  RegisterUnaryOp<kNumeric>(
      registry, "round",
      "Elementwise round to the nearest integer, halves to even (numpy's rint: 2.5 -> 2, "
      "-0.5 -> -0); integers are unchanged.",
      [](auto x) {
        if constexpr (std::is_floating_point_v<decltype(x)>) {
          return std::nearbyint(x);
        } else {
          return x;
        }
      });
  RegisterUnaryOp<kAny>(registry, "copy", "A copy of the input.", [](auto x) { return x; });
  RegisterUnaryOp<kBool>(registry, "logical_not", "Elementwise boolean not.",
                         [](bool x) { return !x; });
  RegisterCast(registry);
}

}  // namespace nimble::op
