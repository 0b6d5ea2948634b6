// Element conversions shared by every kernel, the runtime's built-in ones
// and the compiler's reference ones: which dtypes an op accepts, the type
// arithmetic runs in (float for float16), and conversions without undefined
// behaviour. The elementwise reference kernels, which check cast and the
// wrapping arithmetic, convert and wrap with their own code instead
// (compiler/op/reference_scalar.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "nimble/vm/dtype.h"
#include "nimble/vm/error.h"

namespace nimble {

// The element types an op accepts. Relations reject the others by name, and
// kernels instantiate their loops only for the accepted ones.
enum class DTypeClass { kAny, kNumeric, kFloat, kBool };

template <typename T>
constexpr bool ElementInClass(DTypeClass accepted) {
  switch (accepted) {
    case DTypeClass::kAny:
      return true;
    case DTypeClass::kNumeric:
      return !std::is_same_v<T, bool>;
    case DTypeClass::kFloat:
      return std::is_floating_point_v<T> || kIsFloatBits<T>;
    case DTypeClass::kBool:
      return std::is_same_v<T, bool>;
  }
  return false;
}

// The kernel's guard for a dtype its relation rejects (a direct kernel call).
[[noreturn]] inline void ThrowUnsupportedDType(DataType dtype) {
  throw Error("the kernel does not support dtype " + dtype.name());
}

// DispatchDType restricted to the float dtypes, so that float kernels are
// only instantiated for them; the type relations reject the others first.
template <typename Fn>
void DispatchFloat(DataType dtype, const Fn& fn) {
  DispatchDType(dtype, [&](auto tag) {
    if constexpr (ElementInClass<decltype(tag)>(DTypeClass::kFloat)) {
      fn(tag);
    } else {
      ThrowUnsupportedDType(dtype);
    }
  });
}

// Calls fn(T{}) with the unsigned integer type of the element size of
// `dtype`: kernels that move elements without looking at them (gathers,
// copies) copy them as bits.
template <typename Fn>
void DispatchElementSize(DataType dtype, const Fn& fn) {
  switch (dtype.bytes()) {
    case 1:
      return fn(uint8_t{});
    case 2:
      return fn(uint16_t{});
    case 4:
      return fn(uint32_t{});
    case 8:
      return fn(uint64_t{});
  }
  ThrowUnsupportedDType(dtype);
}

// Integer arithmetic that wraps modulo 2^bits, as numpy does, where C++
// signed overflow is undefined; other types compute `fn(a, b)` unchanged.
template <typename T, typename Fn>
inline T Wrapping(const Fn& fn, T a, T b) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    using Unsigned = std::make_unsigned_t<T>;
    return static_cast<T>(fn(static_cast<Unsigned>(a), static_cast<Unsigned>(b)));
  } else {
    return static_cast<T>(fn(a, b));
  }
}

// The type arithmetic on an element of type T is done in.
template <typename T>
struct ComputeTypeOf {
  using type = T;
};
template <>
struct ComputeTypeOf<Half> {
  using type = float;
};
template <>
struct ComputeTypeOf<BFloat16> {
  using type = float;
};
template <typename T>
using ComputeType = typename ComputeTypeOf<T>::type;

template <typename T>
inline ComputeType<T> LoadElement(T value) {
  if constexpr (kIsFloatBits<T>) {
    return FloatBitsToFloat(value);
  } else {
    return value;
  }
}

// Converts a computed value to the element type `To` without undefined
// behaviour: float to integer truncates toward zero, saturates at the integer
// range and maps NaN to 0; anything to bool is `value != 0`; integers narrow
// modulo 2^bits.
template <typename To, typename From>
inline To ConvertElement(From value) {
  if constexpr (kIsFloatBits<To>) {
    return FloatToFloatBits<To>(static_cast<float>(ConvertElement<float>(value)));
  } else if constexpr (kIsFloatBits<From>) {
    return ConvertElement<To>(FloatBitsToFloat(value));
  } else if constexpr (std::is_same_v<To, bool>) {
    return value != From(0);
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    constexpr To kMin = std::numeric_limits<To>::min();
    constexpr To kMax = std::numeric_limits<To>::max();
    if (std::isnan(value)) return 0;
    if (value <= static_cast<From>(kMin)) return kMin;
    if (value >= static_cast<From>(kMax)) return kMax;
    return static_cast<To>(value);
  } else {
    return static_cast<To>(value);
  }
}

}  // namespace nimble
