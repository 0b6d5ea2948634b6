// The reference kernels' definition of every elementwise operator on one
// element (unary.cc, binary.cc): the oracle the runtime's built-in kernels
// are tested against. It is written apart from the runtime's scalar
// functions (vm/kernels/elemwise_functions.h) on purpose, so that the
// differential tests compare two statements of each op rather than one
// formula with itself; neither side may include the other's.
//
// Each definition is the plainest correct one: IEEE arithmetic in the
// compute type (float for float16, the element type otherwise; element.h),
// which is exactly rounded; transcendental functions evaluated in double
// with <cmath> and rounded to the compute type (and a float16 result once
// more, to its own precision, like every float16 result); integer arithmetic
// carried out modulo 2^64 and narrowed, which is wrap-around modulo 2^bits.
// The semantics are those of docs/operators.md ("Elementwise semantics worth
// knowing").
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "nimble/vm/attrs.h"
#include "nimble/vm/dtype.h"
#include "nimble/vm/error.h"
#include "nimble/vm/kernels/element.h"

namespace nimble::op::reference {

// What an op accepts (its type relation rejects the other dtypes) and
// whether it returns bool (comparisons) rather than its input's dtype.
template <DTypeClass kClass, bool kBoolResult = false>
struct ElementOp {
  static constexpr DTypeClass kAccepts = kClass;
  static constexpr bool kReturnsBool = kBoolResult;
};

// The element type an op `Op` writes for inputs of element type T.
template <typename Op, typename T>
using ResultOf = std::conditional_t<Op::kReturnsBool, bool, T>;

// `op` with the call's attributes: an op with parameters (leaky_relu's
// alpha) has `WithAttrs`, returning a copy that holds them; the others are
// their own.
template <typename Op>
Op Configured(const Op& op, const Attrs& attrs) {
  if constexpr (requires { op.WithAttrs(attrs); }) {
    return op.WithAttrs(attrs);
  } else {
    return op;
  }
}

// f(x) computed in double and rounded once to x's type.
template <typename C, typename F>
C InDouble(C x, const F& f) {
  return static_cast<C>(f(static_cast<double>(x)));
}

// An integer result computed modulo 2^64 and narrowed to C, i.e. modulo
// 2^bits: numpy's wrap-around, without C++'s signed overflow.
template <typename C>
C Narrow(uint64_t value) {
  return static_cast<C>(value);
}
template <typename C>
uint64_t Widen(C value) {
  return static_cast<uint64_t>(value);
}

// `value` (a compute-type value) stored as element type To: float to integer
// truncates toward zero, saturates at the integer range and maps NaN to 0;
// anything to bool is `value != 0`; integers convert modulo 2^bits; float16
// is reached through float32.
template <typename To, typename From>
To Convert(From value) {
  if constexpr (kIsFloatBits<To>) {
    return FloatToFloatBits<To>(static_cast<float>(value));
  } else if constexpr (std::is_same_v<To, bool>) {
    return value != From(0);
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    if (std::isnan(value)) return To(0);
    const double truncated = std::trunc(static_cast<double>(value));
    if (truncated <= static_cast<double>(std::numeric_limits<To>::min())) {
      return std::numeric_limits<To>::min();
    }
    if (truncated >= static_cast<double>(std::numeric_limits<To>::max())) {
      return std::numeric_limits<To>::max();
    }
    return static_cast<To>(truncated);
  } else {
    return static_cast<To>(value);
  }
}

// ---------------------------------------------------------------------------
// Unary.

struct Negative : ElementOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) {
      return -x;
    } else {
      return Narrow<C>(uint64_t{0} - Widen(x));
    }
  }
};

struct Abs : ElementOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) {
      return std::fabs(x);
    } else if constexpr (std::is_signed_v<C>) {
      return x < C(0) ? Negative()(x) : x;
    } else {
      return x;
    }
  }
};

struct Exp : ElementOp<DTypeClass::kFloat> {
  template <typename C>
  C operator()(C x) const {
    return InDouble(x, [](double y) { return std::exp(y); });
  }
};

struct Log : ElementOp<DTypeClass::kFloat> {
  template <typename C>
  C operator()(C x) const {
    return InDouble(x, [](double y) { return std::log(y); });
  }
};

struct Sqrt : ElementOp<DTypeClass::kFloat> {
  template <typename C>
  C operator()(C x) const {
    return InDouble(x, [](double y) { return std::sqrt(y); });
  }
};

struct Rsqrt : ElementOp<DTypeClass::kFloat> {
  template <typename C>
  C operator()(C x) const {
    return InDouble(x, [](double y) { return 1.0 / std::sqrt(y); });
  }
};

struct Tanh : ElementOp<DTypeClass::kFloat> {
  template <typename C>
  C operator()(C x) const {
    return InDouble(x, [](double y) { return std::tanh(y); });
  }
};

struct Sigmoid : ElementOp<DTypeClass::kFloat> {
  template <typename C>
  C operator()(C x) const {
    return InDouble(x, [](double y) { return 1.0 / (1.0 + std::exp(-y)); });
  }
};

struct Relu : ElementOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C x) const {
    return x < C(0) ? C(0) : x;  // NaN < 0 is false: NaN stays NaN
  }
};

struct Erf : ElementOp<DTypeClass::kFloat> {
  template <typename C>
  C operator()(C x) const {
    return InDouble(x, [](double y) { return std::erf(y); });
  }
};

// 0.5 x (1 + erf(x / sqrt(2))), with 1 + erf(z) written as erfc(-z), the
// same value without 1 + erf's cancellation for negative x, and x / sqrt(2)
// as x * sqrt(1/2). At -inf the formula is -inf * 0; its limit is -0.
struct Gelu : ElementOp<DTypeClass::kFloat> {
  template <typename C>
  C operator()(C x) const {
    return InDouble(x, [](double y) {
      if (y == -std::numeric_limits<double>::infinity()) return -0.0;
      return 0.5 * y * std::erfc(-y * std::sqrt(0.5));
    });
  }
};

// The nearest integer, halves to even; the result has x's sign (-0.4 and
// -0.5 give -0).
struct Round : ElementOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) {
      C nearest = std::round(x);  // halves away from zero
      const bool half = std::fabs(x - std::trunc(x)) == C(0.5);
      if (half && std::fmod(nearest, C(2)) != C(0)) nearest -= std::copysign(C(1), x);
      return std::copysign(nearest, x);
    } else {
      return x;
    }
  }
};

// -1, 0 or 1 by the sign of x; zeros (either sign) and NaN are returned as
// they are. Unsigned integers are 0 or 1.
struct Sign : ElementOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C x) const {
    if (x > C(0)) return C(1);
    if constexpr (std::is_signed_v<C> || std::is_floating_point_v<C>) {
      if (x < C(0)) return C(-1);
    }
    return x;
  }
};

struct Floor : ElementOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) {
      return std::floor(x);
    } else {
      return x;
    }
  }
};

struct Ceil : ElementOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) {
      return std::ceil(x);
    } else {
      return x;
    }
  }
};

// x for x >= 0, alpha * x below; NaN stays NaN.
struct LeakyRelu : ElementOp<DTypeClass::kFloat> {
  double alpha = 0.01;
  LeakyRelu WithAttrs(const Attrs& attrs) const {
    LeakyRelu configured = *this;
    configured.alpha = attrs.GetFloat("alpha");
    return configured;
  }
  template <typename C>
  C operator()(C x) const {
    return x < C(0) ? static_cast<C>(static_cast<C>(alpha) * x) : x;
  }
};

// x for x >= 0, alpha * (e^x - 1) below, with e^x - 1 as expm1 (exact near 0).
struct Elu : ElementOp<DTypeClass::kFloat> {
  double alpha = 1.0;
  Elu WithAttrs(const Attrs& attrs) const {
    Elu configured = *this;
    configured.alpha = attrs.GetFloat("alpha");
    return configured;
  }
  template <typename C>
  C operator()(C x) const {
    const double a = alpha;
    return x < C(0) ? InDouble(x, [a](double y) { return a * std::expm1(y); }) : x;
  }
};

// max(0, min(1, alpha * x + beta)); NaN stays NaN.
struct HardSigmoid : ElementOp<DTypeClass::kFloat> {
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
    return InDouble(x, [a, b](double y) {
      const double z = a * y + b;
      if (std::isnan(z)) return z;
      return z < 0 ? 0.0 : z > 1 ? 1.0 : z;
    });
  }
};

// log(1 + e^x), as max(x, 0) + log1p(e^-|x|): no overflow for large x and
// no cancellation for very negative x (where the result is about e^x).
struct Softplus : ElementOp<DTypeClass::kFloat> {
  template <typename C>
  C operator()(C x) const {
    return InDouble(
        x, [](double y) { return (y > 0 ? y : 0.0) + std::log1p(std::exp(-std::fabs(y))); });
  }
};

// min(max(x, a_min), a_max), so a_max wins where a_min > a_max (numpy's
// clip); NaN stays NaN. Integers compare with the bounds converted to their
// type (truncated, saturating: an infinite bound is the type's limit).
struct Clip : ElementOp<DTypeClass::kNumeric> {
  double a_min = -std::numeric_limits<double>::infinity();
  double a_max = std::numeric_limits<double>::infinity();
  Clip WithAttrs(const Attrs& attrs) const {
    Clip configured = *this;
    configured.a_min = attrs.GetFloat("a_min");
    configured.a_max = attrs.GetFloat("a_max");
    return configured;
  }
  template <typename C>
  C operator()(C x) const {
    const C low = Convert<C>(a_min);
    const C high = Convert<C>(a_max);
    if (x < low) x = low;
    if (x > high) x = high;
    return x;
  }
};

struct IsNaNOp : ElementOp<DTypeClass::kFloat, /*kBoolResult=*/true> {
  template <typename C>
  bool operator()(C x) const {
    return std::isnan(x);
  }
};

// copy, and cast (whose conversion is the loop's store, Convert).
struct Identity : ElementOp<DTypeClass::kAny> {
  template <typename C>
  C operator()(C x) const {
    return x;
  }
};

struct LogicalNot : ElementOp<DTypeClass::kBool> {
  bool operator()(bool x) const { return !x; }
};

// ---------------------------------------------------------------------------
// Binary.

struct Add : ElementOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      return a + b;
    } else {
      return Narrow<C>(Widen(a) + Widen(b));
    }
  }
};

struct Subtract : ElementOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      return a - b;
    } else {
      return Narrow<C>(Widen(a) - Widen(b));
    }
  }
};

struct Multiply : ElementOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      return a * b;
    } else {
      return Narrow<C>(Widen(a) * Widen(b));
    }
  }
};

// Integers truncate toward zero (C), a zero divisor throws and the one
// quotient out of range, INT_MIN / -1, wraps to INT_MIN; floats are IEEE.
struct Divide : ElementOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      return a / b;
    } else {
      if (b == C(0)) throw Error("divide: division by zero");
      if constexpr (std::is_signed_v<C>) {
        if (a == std::numeric_limits<C>::min() && b == C(-1)) return a;
      }
      return static_cast<C>(a / b);
    }
  }
};

// Integers: base^exponent modulo 2^bits by square-and-multiply (exact, and
// fast for any exponent); a negative exponent throws. Floats: pow in double.
struct Power : ElementOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C base, C exponent) const {
    if constexpr (std::is_floating_point_v<C>) {
      return static_cast<C>(std::pow(static_cast<double>(base), static_cast<double>(exponent)));
    } else {
      if constexpr (std::is_signed_v<C>) {
        if (exponent < C(0)) {
          throw Error("power: integers to negative integer powers are not allowed");
        }
      }
      uint64_t result = 1;
      uint64_t square = Widen(base);
      for (uint64_t bits = Widen(exponent); bits != 0; bits >>= 1) {
        if (bits & 1) result *= square;
        square *= square;
      }
      return Narrow<C>(result);
    }
  }
};

// The remainder of a / b with a's sign (C's % and fmod): exact. Integers: a
// zero divisor throws and INT_MIN % -1 is 0 (C leaves it undefined).
struct Mod : ElementOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_floating_point_v<C>) {
      return std::fmod(a, b);
    } else {
      if (b == C(0)) throw Error("mod: division by zero");
      if constexpr (std::is_signed_v<C>) {
        if (b == C(-1)) return C(0);
      }
      return static_cast<C>(a % b);
    }
  }
};

// The remainder of a / b with b's sign (Python's and numpy's %): the
// truncated remainder, plus b where the two signs differ. A zero float
// remainder takes b's sign too, as in numpy.
struct FloorMod : ElementOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>) {
      if (b == C(0)) throw Error("floor_mod: division by zero");
    }
    const C r = Mod()(a, b);
    if constexpr (std::is_floating_point_v<C>) {
      if (r == C(0)) return std::copysign(C(0), b);
      return (r < C(0)) != (b < C(0)) ? r + b : r;
    } else if constexpr (std::is_signed_v<C>) {
      return r != C(0) && (r < C(0)) != (b < C(0)) ? static_cast<C>(r + b) : r;
    } else {
      return r;
    }
  }
};

template <typename C>
bool IsNaN(C x) {
  if constexpr (std::is_floating_point_v<C>) {
    return std::isnan(x);
  } else {
    return false;
  }
}

// NaN in either operand gives NaN.
struct Maximum : ElementOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C a, C b) const {
    if (IsNaN(a)) return a;
    if (IsNaN(b)) return b;
    return a > b ? a : b;
  }
};

struct Minimum : ElementOp<DTypeClass::kNumeric> {
  template <typename C>
  C operator()(C a, C b) const {
    if (IsNaN(a)) return a;
    if (IsNaN(b)) return b;
    return a < b ? a : b;
  }
};

// Comparisons: any dtype in, bool out.
struct Equal : ElementOp<DTypeClass::kAny, /*kBoolResult=*/true> {
  template <typename C>
  bool operator()(C a, C b) const {
    return a == b;
  }
};

struct NotEqual : ElementOp<DTypeClass::kAny, /*kBoolResult=*/true> {
  template <typename C>
  bool operator()(C a, C b) const {
    return a != b;
  }
};

struct Less : ElementOp<DTypeClass::kAny, /*kBoolResult=*/true> {
  template <typename C>
  bool operator()(C a, C b) const {
    return a < b;
  }
};

struct LessEqual : ElementOp<DTypeClass::kAny, /*kBoolResult=*/true> {
  template <typename C>
  bool operator()(C a, C b) const {
    return a <= b;
  }
};

struct Greater : ElementOp<DTypeClass::kAny, /*kBoolResult=*/true> {
  template <typename C>
  bool operator()(C a, C b) const {
    return a > b;
  }
};

struct GreaterEqual : ElementOp<DTypeClass::kAny, /*kBoolResult=*/true> {
  template <typename C>
  bool operator()(C a, C b) const {
    return a >= b;
  }
};

struct LogicalAnd : ElementOp<DTypeClass::kBool> {
  bool operator()(bool a, bool b) const { return a && b; }
};

struct LogicalOr : ElementOp<DTypeClass::kBool> {
  bool operator()(bool a, bool b) const { return a || b; }
};

struct LogicalXor : ElementOp<DTypeClass::kBool> {
  bool operator()(bool a, bool b) const { return a != b; }
};

}  // namespace nimble::op::reference
