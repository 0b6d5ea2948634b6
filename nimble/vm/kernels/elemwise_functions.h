// The scalar function of every elementwise operator (unary, binary, where,
// cast) as the runtime's built-in kernels (elemwise.cc) compute it. The
// compiler's reference kernels do not use these: they have their own plain
// definitions (compiler/op/reference_scalar.h), so that the differential
// tests (tests/vm/kernels/elemwise_test.cc) check these functions against an
// independent statement of each op, not against themselves.
//
// Each function is a functor over the *compute type* (float for float16, the
// element type otherwise; element.h), so a loop instantiates it per dtype and
// inlines it. Its base ScalarOp says which dtypes the op accepts and whether
// the result is bool (comparisons) rather than the input's dtype.
// ForEachUnaryFunction / ForEachBinaryFunction list the ops by name.
//
// exp, tanh, sigmoid, erf and gelu compute in float (float32, float16) with
// vector_math.h's vectorisable functions, whose accuracy it documents;
// float64 uses libm.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <type_traits>

#include "nimble/vm/attrs.h"
#include "nimble/vm/error.h"
#include "nimble/vm/kernels/element.h"
#include "nimble/vm/kernels/vector_math.h"

namespace nimble::elemwise {

template <DTypeClass kClass, bool kBoolResult = false>
struct ScalarOp {
  static constexpr DTypeClass kAccepts = kClass;
  static constexpr bool kReturnsBool = kBoolResult;
};

// The element type an op `Fn` writes for inputs of element type T.
template <typename Fn, typename T>
using ResultOf = std::conditional_t<Fn::kReturnsBool, bool, T>;

// `fn` with a call's attributes: a function with parameters (leaky_relu's
// alpha) has `WithAttrs`, returning a copy that holds them; the others are
// their own.
template <typename Fn>
Fn Configured(const Fn& fn, const Attrs& attrs) {
  if constexpr (requires { fn.WithAttrs(attrs); }) {
    return fn.WithAttrs(attrs);
  } else {
    return fn;
  }
}

// vector_math's kFloatFn for float, else libm_fn (a template argument, so
// that the call is direct and inlines into the vector loops).
template <float (*kFloatFn)(float), typename C, typename LibmFn>
C FloatOrLibm(C x, const LibmFn& libm_fn) {
  if constexpr (std::is_same_v<C, float>) {
    return kFloatFn(x);
  } else {
    return libm_fn(x);
  }
}

template <typename C>
bool IsNaN(C x) {
  if constexpr (std::is_floating_point_v<C>) {
    return std::isnan(x);
  } else {
    return false;
  }
}

// ---------------------------------------------------------------------------
// Unary.

// Integers wrap: -INT_MIN = INT_MIN (and so does Abs).
// IEEE negation for floats (negative(0.0) is -0.0); integers wrap.
struct Negative : ScalarOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) {
      return -x;
    } else {
      return Wrapping(std::minus<>(), C(0), x);
    }
  }
};

struct Abs : ScalarOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) {
      return std::abs(x);
    } else if constexpr (std::is_unsigned_v<C>) {
      return x;
    } else {
      return x < C(0) ? Negative()(x) : x;
    }
  }
};

struct Exp : ScalarOp<DTypeClass::kFloat> {
  template <typename C>
  C operator()(C x) const {
    return FloatOrLibm<vector_math::Exp>(x, [](C y) { return std::exp(y); });
  }
};

struct Log : ScalarOp<DTypeClass::kFloat> {
  template <typename C>
  C operator()(C x) const {
    return std::log(x);
  }
};

struct Sqrt : ScalarOp<DTypeClass::kFloat> {
  template <typename C>
  C operator()(C x) const {
    return std::sqrt(x);
  }
};

struct Rsqrt : ScalarOp<DTypeClass::kFloat> {
  template <typename C>
  C operator()(C x) const {
    return C(1) / std::sqrt(x);
  }
};

struct Tanh : ScalarOp<DTypeClass::kFloat> {
  template <typename C>
  C operator()(C x) const {
    return FloatOrLibm<vector_math::Tanh>(x, [](C y) { return std::tanh(y); });
  }
};

struct Sigmoid : ScalarOp<DTypeClass::kFloat> {
  template <typename C>
  C operator()(C x) const {
    return FloatOrLibm<vector_math::Sigmoid>(x, [](C y) { return C(1) / (C(1) + std::exp(-y)); });
  }
};

struct Relu : ScalarOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C x) const {
    return std::max(x, C(0));  // max(NaN, 0) is its first argument: NaN
  }
};

struct Erf : ScalarOp<DTypeClass::kFloat> {
  template <typename C>
  C operator()(C x) const {
    return FloatOrLibm<vector_math::Erf>(x, [](C y) { return std::erf(y); });
  }
};

// float64: 1 + erf(z) as erfc(-z), as vector_math's Gelu does, so that the
// small results of negative x stay accurate. x is clamped at -40, below which
// erfc underflows and the result is -0; so is gelu(-inf), not -inf * 0.
struct Gelu : ScalarOp<DTypeClass::kFloat> {
  template <typename C>
  C operator()(C x) const {
    return FloatOrLibm<vector_math::Gelu>(x, [](C y) {
      y = y < C(-40) ? C(-40) : y;
      return C(0.5) * y * std::erfc(y * C(-0.70710678118654752440));
    });
  }
};

// Halves to even (numpy's rint), in the default rounding mode.
struct Round : ScalarOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) {
      return std::nearbyint(x);
    } else {
      return x;
    }
  }
};

struct Floor : ScalarOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) {
      return std::floor(x);
    } else {
      return x;
    }
  }
};

struct Ceil : ScalarOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) {
      return std::ceil(x);
    } else {
      return x;
    }
  }
};

// (x > 0) - (x < 0), but zeros and NaN come back as they are (-0 stays -0).
struct Sign : ScalarOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_unsigned_v<C>) {
      return x != C(0) ? C(1) : x;
    } else {
      return x > C(0) ? C(1) : x < C(0) ? C(-1) : x;
    }
  }
};

struct LeakyRelu : ScalarOp<DTypeClass::kFloat> {
  double alpha = 0.01;
  LeakyRelu WithAttrs(const Attrs& attrs) const {
    LeakyRelu configured = *this;
    configured.alpha = attrs.GetFloat("alpha");
    return configured;
  }
  template <typename C>
  C operator()(C x) const {
    return x < C(0) ? C(alpha) * x : x;
  }
};

// In double, rounded once, as the reference does (libm's float expm1f and
// log1pf, and float arithmetic around them, would be some ulps away, and
// hard_sigmoid's alpha * x + beta cancels near 0 in float). expm1 rather than
// exp - 1: the small results near 0 keep their precision.
template <typename C, typename F>
C ViaDouble(C x, const F& f) {
  return static_cast<C>(f(static_cast<double>(x)));
}

struct Elu : ScalarOp<DTypeClass::kFloat> {
  double alpha = 1.0;
  Elu WithAttrs(const Attrs& attrs) const {
    Elu configured = *this;
    configured.alpha = attrs.GetFloat("alpha");
    return configured;
  }
  template <typename C>
  C operator()(C x) const {
    const double a = alpha;
    return x < C(0) ? ViaDouble(x, [a](double y) { return a * std::expm1(y); }) : x;
  }
};

struct HardSigmoid : ScalarOp<DTypeClass::kFloat> {
  double alpha = 0.2;
  double beta = 0.5;
  HardSigmoid WithAttrs(const Attrs& attrs) const {
    HardSigmoid configured = *this;
    configured.alpha = attrs.GetFloat("alpha");
    configured.beta = attrs.GetFloat("beta");
    return configured;
  }
  template <typename C>
  C operator()(C x) const {
    const double a = alpha, b = beta;
    return ViaDouble(x, [a, b](double y) {
      const double z = a * y + b;
      return IsNaN(z) ? z : std::clamp(z, 0.0, 1.0);
    });
  }
};

// max(x, 0) + log1p(e^-|x|), in double: e^x would overflow for large x, and
// log(1 + e^x) would round the small results of very negative x to 0.
struct Softplus : ScalarOp<DTypeClass::kFloat> {
  template <typename C>
  C operator()(C x) const {
    return ViaDouble(
        x, [](double y) { return (y > 0 ? y : 0.0) + std::log1p(std::exp(-std::abs(y))); });
  }
};

// The bounds in x's type: integers truncate and saturate them (an infinite
// bound is the type's limit); min(max(x, low), high) lets high win.
struct Clip : ScalarOp<DTypeClass::kNumeric> {
  double a_min = -std::numeric_limits<double>::infinity();
  double a_max = std::numeric_limits<double>::infinity();
  Clip WithAttrs(const Attrs& attrs) const {
    Clip configured = *this;
    configured.a_min = attrs.GetFloat("a_min");
    configured.a_max = attrs.GetFloat("a_max");
    return configured;
  }
  template <typename C>
  static C Bound(double value) {
    if constexpr (std::is_floating_point_v<C>) {
      return static_cast<C>(value);
    } else {
      if (std::isnan(value)) return C(0);
      if (value <= static_cast<double>(std::numeric_limits<C>::min())) {
        return std::numeric_limits<C>::min();
      }
      if (value >= static_cast<double>(std::numeric_limits<C>::max())) {
        return std::numeric_limits<C>::max();
      }
      return static_cast<C>(value);
    }
  }
  template <typename C>
  C operator()(C x) const {
    const C low = Bound<C>(a_min);
    const C high = Bound<C>(a_max);
    return IsNaN(x) ? x : std::min(std::max(x, low), high);
  }
};

struct IsNaNOp : ScalarOp<DTypeClass::kFloat, /*kBoolResult=*/true> {
  template <typename C>
  bool operator()(C x) const {
    return std::isnan(x);
  }
};

// copy, and cast's conversion: the loops' store (ConvertElement) does the work.
struct Identity : ScalarOp<DTypeClass::kAny> {
  template <typename C>
  C operator()(C x) const {
    return x;
  }
};

struct LogicalNot : ScalarOp<DTypeClass::kBool> {
  bool operator()(bool x) const { return !x; }
};

// Calls visit(name, function) for every unary op but cast.
template <typename Visit>
void ForEachUnaryFunction(const Visit& visit) {
  visit("negative", Negative());
  visit("abs", Abs());
  visit("exp", Exp());
  visit("log", Log());
  visit("sqrt", Sqrt());
  visit("rsqrt", Rsqrt());
  visit("tanh", Tanh());
  visit("sigmoid", Sigmoid());
  visit("nn.relu", Relu());
  visit("erf", Erf());
  visit("gelu", Gelu());
  visit("round", Round());
  visit("floor", Floor());
  visit("ceil", Ceil());
  visit("sign", Sign());
  visit("nn.leaky_relu", LeakyRelu());
  visit("nn.elu", Elu());
  visit("nn.hard_sigmoid", HardSigmoid());
  visit("nn.softplus", Softplus());
  visit("clip", Clip());
  visit("isnan", IsNaNOp());
  visit("copy", Identity());
  visit("logical_not", LogicalNot());
}

// ---------------------------------------------------------------------------
// Binary.

struct Add : ScalarOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C a, C b) const {
    return Wrapping(std::plus<>(), a, b);
  }
};

struct Subtract : ScalarOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C a, C b) const {
    return Wrapping(std::minus<>(), a, b);
  }
};

struct Multiply : ScalarOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C a, C b) const {
    return Wrapping(std::multiplies<>(), a, b);
  }
};

// C semantics for integers (truncation toward zero; INT_MIN / -1 wraps to
// INT_MIN; a zero divisor throws), IEEE for floats.
struct Divide : ScalarOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      if (b == C(0)) throw Error("divide: division by zero");
      if constexpr (std::is_signed_v<C>) {
        if (b == C(-1)) return Negative()(a);
      }
      return static_cast<C>(a / b);
    } else {
      return a / b;
    }
  }
};

// Exponentiation by squaring for integers (wrapping like multiply; a negative
// exponent throws), std::pow for floats.
struct Power : ScalarOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C base, C exponent) const {
    if constexpr (std::is_integral_v<C>) {
      if constexpr (std::is_signed_v<C>) {
        if (exponent < C(0)) {
          throw Error("power: integers to negative integer powers are not allowed");
        }
      }
      C result = 1;
      for (; exponent != C(0); exponent = static_cast<C>(exponent >> 1)) {
        if (exponent & 1) result = Multiply()(result, base);
        base = Multiply()(base, base);
      }
      return result;
    } else {
      return std::pow(base, exponent);
    }
  }
};

// C's remainder, a's sign; integers: a zero divisor throws, and % -1 is 0
// (INT_MIN % -1 overflows in C).
struct Mod : ScalarOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      if (b == C(0)) throw Error("mod: division by zero");
      if constexpr (std::is_signed_v<C>) {
        if (b == C(-1)) return C(0);
      }
      return static_cast<C>(a % b);
    } else {
      return std::fmod(a, b);
    }
  }
};

// Python's remainder, b's sign: C's plus b where the two signs differ; a
// zero float remainder is signed like b.
struct FloorMod : ScalarOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      if (b == C(0)) throw Error("floor_mod: division by zero");
      if constexpr (std::is_signed_v<C>) {
        if (b == C(-1)) return C(0);
        const C r = static_cast<C>(a % b);
        return r != C(0) && ((r ^ b) < C(0)) ? static_cast<C>(r + b) : r;
      } else {
        return static_cast<C>(a % b);
      }
    } else {
      const C r = std::fmod(a, b);
      if (r == C(0)) return std::copysign(C(0), b);
      return std::signbit(r) != std::signbit(b) ? r + b : r;
    }
  }
};

struct Maximum : ScalarOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C a, C b) const {
    return IsNaN(a) || a > b ? a : b;
  }
};

struct Minimum : ScalarOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C a, C b) const {
    return IsNaN(a) || a < b ? a : b;
  }
};

// A comparison: any dtype in, bool out.
template <typename Compare>
struct Comparison : ScalarOp<DTypeClass::kAny, /*kBoolResult=*/true> {
  template <typename C>
  bool operator()(C a, C b) const {
    return Compare()(a, b);
  }
};

struct LogicalAnd : ScalarOp<DTypeClass::kBool> {
  bool operator()(bool a, bool b) const { return a && b; }
};

struct LogicalOr : ScalarOp<DTypeClass::kBool> {
  bool operator()(bool a, bool b) const { return a || b; }
};

struct LogicalXor : ScalarOp<DTypeClass::kBool> {
  bool operator()(bool a, bool b) const { return a != b; }
};

// Calls visit(name, function) for every two-input broadcast op.
template <typename Visit>
void ForEachBinaryFunction(const Visit& visit) {
  visit("add", Add());
  visit("subtract", Subtract());
  visit("multiply", Multiply());
  visit("divide", Divide());
  visit("power", Power());
  visit("mod", Mod());
  visit("floor_mod", FloorMod());
  visit("maximum", Maximum());
  visit("minimum", Minimum());
  visit("equal", Comparison<std::equal_to<>>());
  visit("not_equal", Comparison<std::not_equal_to<>>());
  visit("less", Comparison<std::less<>>());
  visit("less_equal", Comparison<std::less_equal<>>());
  visit("greater", Comparison<std::greater<>>());
  visit("greater_equal", Comparison<std::greater_equal<>>());
  visit("logical_and", LogicalAnd());
  visit("logical_or", LogicalOr());
  visit("logical_xor", LogicalXor());
}

// ---------------------------------------------------------------------------
// where(condition, x, y).

struct Select {
  template <typename C>
  C operator()(bool condition, C x, C y) const {
    return condition ? x : y;
  }
};

}  // namespace nimble::elemwise
