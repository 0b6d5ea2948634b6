#include "nimble/vm/dtype.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "nimble/vm/error.h"

namespace nimble {

bool DataType::TryParse(std::string_view name, DataType* out) {
  static constexpr struct {
    std::string_view name;
    DataType dtype;
  } kNames[] = {
      {"bool", Bool()},         {"int8", Int8()},
      {"int32", Int32()},       {"int64", Int64()},
      {"float16", Float16()},   {"float32", Float32()},
      {"float64", Float64()},   {"uint8", {Code::kUInt, 8}},
      {"bfloat16", BFloat16()},
  };
  for (const auto& entry : kNames) {
    if (entry.name == name) {
      *out = entry.dtype;
      return true;
    }
  }
  return false;
}

DataType DataType::Parse(std::string_view name) {
  DataType dtype;
  if (!TryParse(name, &dtype)) {
    throw Error(
        "unknown dtype '" + std::string(name) +
        "' (expected bool, int8, uint8, int32, int64, float16, bfloat16, float32 or float64)");
  }
  return dtype;
}

std::string DataType::name() const {
  switch (code_) {
    case Code::kBool:
      return "bool";
    case Code::kInt:
      return "int" + std::to_string(bits_);
    case Code::kUInt:
      return "uint" + std::to_string(bits_);
    case Code::kFloat:
      return "float" + std::to_string(bits_);
    case Code::kBFloat:
      return "bfloat" + std::to_string(bits_);
  }
  return "?";
}

float HalfToFloat(Half h) {
  const uint32_t sign = (h.bits & 0x8000u) << 16;
  const uint32_t exponent = (h.bits >> 10) & 0x1f;
  const uint32_t mantissa = h.bits & 0x3ff;
  if (exponent == 0) {
    const float value = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -value : value;
  }
  uint32_t bits;
  if (exponent == 31) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  }
  return std::bit_cast<float>(bits);
}

Half FloatToHalf(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const int32_t exponent = static_cast<int32_t>((bits >> 23) & 0xff) - 127 + 15;
  uint32_t mantissa = bits & 0x7fffffu;
  if (((bits >> 23) & 0xff) == 0xff) {  // inf or nan
    return {static_cast<uint16_t>(sign | 0x7c00u | (mantissa ? 0x200u : 0u))};
  }
  if (exponent >= 31) return {static_cast<uint16_t>(sign | 0x7c00u)};
  if (exponent <= 0) {
    if (exponent < -10) return {sign};
    mantissa |= 0x800000u;
    const int shift = 14 - exponent;
    uint32_t half_mantissa = mantissa >> shift;
    const uint32_t remainder = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (remainder > halfway || (remainder == halfway && (half_mantissa & 1u))) ++half_mantissa;
    return {static_cast<uint16_t>(sign | half_mantissa)};
  }
  uint32_t result = (static_cast<uint32_t>(exponent) << 10) | (mantissa >> 13);
  const uint32_t remainder = mantissa & 0x1fffu;
  if (remainder > 0x1000u || (remainder == 0x1000u && (result & 1u))) ++result;
  return {static_cast<uint16_t>(sign | result)};
}

float BFloat16ToFloat(BFloat16 b) {
  return std::bit_cast<float>(uint32_t{b.bits} << 16);
}

BFloat16 FloatToBFloat16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return {static_cast<uint16_t>((bits >> 16) | 0x40u)};
  // Adding 0x7fff plus the lowest kept bit rounds the dropped half to
  // nearest, a tie towards the even result; an overflow carries into the
  // exponent, up to infinity, as rounding should.
  const uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  return {static_cast<uint16_t>(rounded >> 16)};
}

}  // namespace nimble
