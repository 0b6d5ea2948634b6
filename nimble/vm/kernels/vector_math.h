// Float32 transcendental functions as branch-free scalar code that the
// compiler vectorises (libm's expf, tanhf, erff are calls it cannot), and
// MapFloat32, the loop that applies one of them to an array compiled for the
// widest vector instruction set the CPU has (chosen at run time, so the build
// itself targets any x86-64 or aarch64).
//
// The functions are the runtime's definition of these ops for float32 and
// float16 (elemwise_functions.h), and softmax's exponential (nn.cc); float64
// keeps libm. The compiler's reference kernels compute the ops in double
// instead (compiler/op/reference_scalar.h), and the differential tests hold
// the built-in kernels to the accuracy documented here.
//
// Accuracy, measured against double-precision libm on every 16th float of
// the range (about 1.4e8 points per function, AVX2+FMA and SSE2 builds), in
// units in the last place (ulp) of the float result:
//   Exp      <= 1.01 ulp where the result is normal; 0 below -103.97 and +inf
//            above 88.72, as the correctly rounded result. ExpOfNonPositive
//            (x <= 0 only) is as accurate but flushes subnormal results to 0.
//   Tanh     <= 1.3 ulp; +-1 from |x| > 9.01 on, where tanhf rounds to +-1 too.
//   Sigmoid  <= 2.8 ulp where the result is normal (also for very negative x:
//            it is computed as e / (1 + e) there, never as 1 - something).
//   Erf      <= 2.4 ulp; +-1 from |x| > 3.92 on.
//   Gelu     0.5 x (1 + erf(x / sqrt(2))) with 1 + erf computed directly for
//            negative x, so there is no cancellation where gelu is small:
//            relative error <= 1e-6 for x >= -3 (13 ulp), <= 2e-6 for
//            x >= -5, <= 2e-5 down to the smallest normal result (x = -13);
//            -0 below -20. (x / sqrt(2) and x^2 rounded to float limit it.)
// Special values: NaN propagates through every function; tanh(+-inf) = +-1,
// sigmoid(-inf) = 0, sigmoid(+inf) = 1, erf(+-inf) = +-1, gelu(+inf) = +inf,
// gelu(-inf) = -0, exp(-inf) = 0; nothing overflows on the way.
//
// Vectorisable form: GCC if-converts no select between floats under
// -ftrapping-math (the default), nor std::min/std::max once inlined into
// these functions, so selects and clamps are bit masks (Select), and 2^n is
// built from exponent bits.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace nimble::vector_math {

// condition ? if_true : if_false, as bit operations.
inline float Select(bool condition, float if_true, float if_false) {
  const uint32_t mask = 0u - static_cast<uint32_t>(condition);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(if_true) & mask) |
                              (std::bit_cast<uint32_t>(if_false) & ~mask));
}

// max(x, low) and min(x, high); a NaN x stays NaN.
inline float AtLeast(float x, float low) {
  return Select(x < low, low, x);
}
inline float AtMost(float x, float high) {
  return Select(x > high, high, x);
}

// |magnitude| with the sign of `sign`.
inline float CopySign(float magnitude, float sign) {
  constexpr uint32_t kSignBit = 0x80000000u;
  return std::bit_cast<float>((std::bit_cast<uint32_t>(magnitude) & ~kSignBit) |
                              (std::bit_cast<uint32_t>(sign) & kSignBit));
}

namespace detail {

// e^x as mantissa * 2^exponent, |x| <= 89. Cephes' expf: x = n ln 2 + r with
// n = round(x / ln 2) and |r| <= ln 2 / 2 (ln 2 split in two constants,
// Cody-Waite, so r is exact), e^r by a degree-6 polynomial.
struct ExpParts {
  float mantissa;    // e^r, in [0.7, 1.42]
  int32_t exponent;  // n
};

inline ExpParts SplitExp(float x) {
  constexpr float kRound = 12582912.0f;     // 1.5 * 2^23: adding it rounds to an integer
  constexpr float kLn2High = 0.693359375f;  // ln 2 = kLn2High + kLn2Low
  constexpr float kLn2Low = -2.12194440e-4f;
  const float shifted = x * 1.44269504088896341f + kRound;
  const float n = shifted - kRound;
  const float r = x - n * kLn2High - n * kLn2Low;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // n as an integer: `shifted` holds it in its low mantissa bits.
  return {p,
          static_cast<int32_t>(std::bit_cast<uint32_t>(shifted) - std::bit_cast<uint32_t>(kRound))};
}

// 2^n for -126 <= n <= 127.
inline float PowerOfTwo(int32_t n) {
  return std::bit_cast<float>(static_cast<uint32_t>(n + 127) << 23);
}

}  // namespace detail

// e^x. 2^n is applied as two factors 2^(n/2) that are both normal floats, so
// results that overflow become +inf and results in the subnormal range round
// once, as they should. x is first clamped to [-104, 89], beyond which the
// result is 0 or +inf anyway, so that n fits the exponent field.
inline float Exp(float x) {
  const detail::ExpParts parts = detail::SplitExp(AtMost(AtLeast(x, -104.0f), 89.0f));
  const int32_t half = parts.exponent >> 1;
  return parts.mantissa * detail::PowerOfTwo(half) * detail::PowerOfTwo(parts.exponent - half);
}

// e^x for x <= 0 (softmax's x - max), cheaper than Exp: results below the
// smallest normal float are flushed to 0 (a mask), so one factor 2^n does.
inline float ExpOfNonPositive(float x) {
  constexpr float kLowest = -87.3365447f;  // ln(FLT_MIN)
  const detail::ExpParts parts = detail::SplitExp(x);
  const uint32_t keep = 0u - static_cast<uint32_t>(!(x < kLowest));
  return std::bit_cast<float>(
      std::bit_cast<uint32_t>(parts.mantissa * detail::PowerOfTwo(parts.exponent)) & keep);
}

// tanh(x). Cephes' tanhf: an odd polynomial below |x| = 0.625, where
// 1 - 2 / (e^2|x| + 1) would cancel, and that formula above it (e^2|x| = +inf
// gives exactly 1). Both are odd; x's sign is applied last, which also keeps
// tanh(-0) = -0.
inline float Tanh(float x) {
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * x + x;
  const float large = 1.0f - 2.0f / (Exp(2.0f * std::abs(x)) + 1.0f);
  return CopySign(Select(std::abs(x) < 0.625f, small, large), x);
}

// 1 / (1 + e^-x), from e = e^-|x| <= 1: 1 / (1 + e) for x >= 0 and
// e / (1 + e) for x < 0, which neither overflows nor loses the small results
// of very negative x to cancellation.
inline float Sigmoid(float x) {
  const float e = Exp(-std::abs(x));
  const float positive = 1.0f / (1.0f + e);
  return Select(x < 0.0f, e * positive, positive);
}

namespace detail {

// erf(x) / x for |x| <= 1: a degree-5 polynomial in x^2, fitted for relative
// error (1.6e-7 in float arithmetic).
inline float ErfOverX(float x) {
  const float z = x * x;
  float p = -5.631665699183941e-4f;
  p = p * z + 4.917608108371496e-3f;
  p = p * z - 2.671135775744915e-2f;
  p = p * z + 1.128018125891685e-1f;
  p = p * z - 3.761232495307922e-1f;
  return p * z + 1.128379106521606f;
}

// erfc(a) for a >= 1, as e^-a^2 / a * S(1 / a): erfc(a) e^a^2 a is smooth and
// tends to 1 / sqrt(pi), so a degree-9 polynomial in 1 / a fits it to 1.6e-7
// relative error for 1 <= a <= 11 (e^-a^2 is 0 in float beyond 10.1).
// +inf gives 0.
inline float ErfcOfAtLeastOne(float a) {
  const float u = 1.0f / a;
  const float v = u - 0.5f;
  float s = -2.00115367770195e-2f;
  s = s * v + 8.971880376338959e-2f;
  s = s * v - 1.121517121791840e-1f;
  s = s * v + 4.736624285578728e-2f;
  s = s * v + 4.272013902664185e-2f;
  s = s * v - 1.092538535594940e-1f;
  s = s * v + 1.189692318439484e-1f;
  s = s * v - 3.662068024277687e-2f;
  s = s * v - 1.672111898660660e-1f;
  s = s * v + 5.107913017272949e-1f;
  return Exp(-a * a) * u * s;
}

}  // namespace detail

// erf(x): x * P(x^2) below |x| = 1, 1 - erfc(|x|) with x's sign above.
inline float Erf(float x) {
  const float a = AtMost(std::abs(x), 4.0f);  // erf(4) is 1 in float
  return Select(std::abs(x) < 1.0f, x * detail::ErfOverX(x),
                CopySign(1.0f - detail::ErfcOfAtLeastOne(a), x));
}

// 0.5 x (1 + erf(x / sqrt(2))), where 1 + erf(z) is erfc(-z) for z <= -1:
// no cancellation where gelu is small. x is clamped at -20, below which the
// result is -0 (so gelu(-inf) is -0 rather than -inf * 0).
inline float Gelu(float x) {
  x = AtLeast(x, -20.0f);
  const float z = x * 0.707106781186547524f;
  const float a = std::abs(z);
  const float tail = detail::ErfcOfAtLeastOne(a);
  const float one_plus_erf =
      Select(a < 1.0f, 1.0f + z * detail::ErfOverX(z), Select(z < 0.0f, tail, 2.0f - tail));
  return 0.5f * x * one_plus_erf;
}

// ---------------------------------------------------------------------------
// MapFloat32

enum class VectorIsa { kBaseline, kAvx2, kAvx512 };

// The widest vector instruction set this CPU runs (x86-64: AVX-512F, AVX2 with
// FMA, or SSE2; elsewhere the baseline, which on aarch64 is NEON).
inline VectorIsa HostVectorIsa() {
  static const VectorIsa isa = [] {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return VectorIsa::kAvx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return VectorIsa::kAvx2;
#endif
    return VectorIsa::kBaseline;
  }();
  return isa;
}

namespace detail {

template <typename Fn>
inline void MapLoop(const float* in, float* out, int64_t n, const Fn& fn) {
  for (int64_t i = 0; i < n; ++i) out[i] = fn(in[i]);
}

// flatten inlines fn into the loop, which is then compiled (and vectorised)
// for the clone's instruction set; a * b + c contracts to FMA there.
#if defined(__x86_64__)
template <typename Fn>
[[gnu::target("avx512f,avx2,fma"), gnu::flatten]] void MapLoopAvx512(const float* in, float* out,
                                                                     int64_t n, const Fn& fn) {
  MapLoop(in, out, n, fn);
}
template <typename Fn>
[[gnu::target("avx2,fma"), gnu::flatten]] void MapLoopAvx2(const float* in, float* out, int64_t n,
                                                           const Fn& fn) {
  MapLoop(in, out, n, fn);
}
#endif

}  // namespace detail

// out[i] = fn(in[i]) for i < n (in == out is allowed), `fn` a functor over
// float inlined into a loop for HostVectorIsa(). Results may differ from the
// baseline build's in the last bit (fused multiply-adds), within the
// accuracies above.
template <typename Fn>
void MapFloat32(const float* in, float* out, int64_t n, const Fn& fn) {
#if defined(__x86_64__)
  switch (HostVectorIsa()) {
    case VectorIsa::kAvx512:
      return detail::MapLoopAvx512(in, out, n, fn);
    case VectorIsa::kAvx2:
      return detail::MapLoopAvx2(in, out, n, fn);
    case VectorIsa::kBaseline:
      break;
  }
#endif
  detail::MapLoop(in, out, n, fn);
}

}  // namespace nimble::vector_math
