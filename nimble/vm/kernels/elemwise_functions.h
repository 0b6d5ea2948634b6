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
#include <type_traits>

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

// Calls visit(name, function) for every two-input broadcast op.
template <typename Visit>
void ForEachBinaryFunction(const Visit& visit) {
  visit("add", Add());
  visit("subtract", Subtract());
  visit("multiply", Multiply());
  visit("divide", Divide());
  visit("power", Power());
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
