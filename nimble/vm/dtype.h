// Element types of tensors: the dtypes the IR and the runtime support, their
// Relay names ("float32", "int64", "bool") and sizes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace nimble {

class DataType {
 public:
  enum class Code : uint8_t { kInt, kUInt, kFloat, kBool, kBFloat };

  constexpr DataType() = default;
  constexpr DataType(Code code, uint8_t bits) : code_(code), bits_(bits) {}

  static constexpr DataType Bool() { return {Code::kBool, 8}; }
  static constexpr DataType Int8() { return {Code::kInt, 8}; }
  static constexpr DataType UInt8() { return {Code::kUInt, 8}; }
  static constexpr DataType Int32() { return {Code::kInt, 32}; }
  static constexpr DataType Int64() { return {Code::kInt, 64}; }
  static constexpr DataType Float16() { return {Code::kFloat, 16}; }
  // bfloat16: float32's sign and exponent with 7 bits of mantissa (weights
  // of reduced-precision matrix products).
  static constexpr DataType BFloat16() { return {Code::kBFloat, 16}; }
  static constexpr DataType Float32() { return {Code::kFloat, 32}; }
  static constexpr DataType Float64() { return {Code::kFloat, 64}; }

  // Parses a Relay dtype name; throws nimble::Error naming the bad string.
  static DataType Parse(std::string_view name);
  // True and sets `out` when `name` is a supported dtype name.
  static bool TryParse(std::string_view name, DataType* out);

  constexpr Code code() const { return code_; }
  constexpr int bits() const { return bits_; }
  constexpr size_t bytes() const { return (bits_ + 7) / 8; }
  // float16, float32, float64; bfloat16 is apart (it only holds weights).
  constexpr bool is_float() const { return code_ == Code::kFloat; }
  constexpr bool is_bfloat() const { return code_ == Code::kBFloat; }
  constexpr bool is_int() const { return code_ == Code::kInt || code_ == Code::kUInt; }
  constexpr bool is_bool() const { return code_ == Code::kBool; }

  std::string name() const;

  constexpr bool operator==(const DataType&) const = default;

 private:
  Code code_ = Code::kFloat;
  uint8_t bits_ = 32;
};

// Calls `fn(T{})` with T the C++ element type of `dtype` (float16 and
// bfloat16 are stored as uint16_t bits and dispatched as `Half` and
// `BFloat16`); throws for unsupported dtypes.
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};
float HalfToFloat(Half h);
Half FloatToHalf(float f);
float BFloat16ToFloat(BFloat16 b);
// Rounds to nearest, ties to even; NaN stays NaN (quiet).
BFloat16 FloatToBFloat16(float f);

// The 16-bit float element types, which arithmetic reads as float.
template <typename T>
inline constexpr bool kIsFloatBits = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
inline float FloatBitsToFloat(Half h) {
  return HalfToFloat(h);
}
inline float FloatBitsToFloat(BFloat16 b) {
  return BFloat16ToFloat(b);
}
// `value` as the 16-bit float type T.
template <typename T>
T FloatToFloatBits(float value) {
  if constexpr (std::is_same_v<T, Half>) {
    return FloatToHalf(value);
  } else {
    return FloatToBFloat16(value);
  }
}

template <typename Fn>
decltype(auto) DispatchDType(DataType dtype, Fn&& fn) {
  using C = DataType::Code;
  switch (dtype.code()) {
    case C::kBool:
      return fn(bool{});
    case C::kFloat:
      if (dtype.bits() == 32) return fn(float{});
      if (dtype.bits() == 64) return fn(double{});
      if (dtype.bits() == 16) return fn(Half{});
      break;
    case C::kBFloat:
      if (dtype.bits() == 16) return fn(BFloat16{});
      break;
    case C::kInt:
      if (dtype.bits() == 8) return fn(int8_t{});
      if (dtype.bits() == 32) return fn(int32_t{});
      if (dtype.bits() == 64) return fn(int64_t{});
      break;
    case C::kUInt:
      if (dtype.bits() == 8) return fn(uint8_t{});
      break;
  }
  return fn(float{});  // unreachable for dtypes built through Parse()
}

}  // namespace nimble
