// The built-in loops of nn.dense with a bfloat16 weight (kernels/dense.h):
// AVX512-BF16 dot products (vdpbf16ps: 32 bf16 products a vector, summed in
// pairs into 16 float32 lanes), which take twice float32's products per
// instruction and read half its weight bytes, most of what a weight-bound
// product (an LSTM step) costs. x86-64 only; the caller checks the host first
// (RequireBf16Products, cpu_features.h): elsewhere these throw its error.
#pragma once

#include <cstdint>

namespace nimble::vm {

// bfloat16 as stored: the upper 16 bits of a float32.
using Bf16Bits = uint16_t;

// out[i] = values[i] rounded to bfloat16 (to nearest, ties to even), for
// i < count: the data of a bf16 product, rounded once per call rather than
// in the product's inner loop, where every weight row would round it again.
void RoundToBf16(const float* values, int64_t count, Bf16Bits* out);

// c (m x n) = a (m x k) times the transpose of b (n x k), both bf16 and
// row-major, the products summed in float32, on the thread pool; m, n, k > 0.
// One row (m = 1) streams b's rows, eight at a time; more rows go in tiles
// of 6 rows of a by 4 of b.
void Bf16DenseProduct(const Bf16Bits* a, const Bf16Bits* b, float* c, int64_t m, int64_t n,
                      int64_t k);

}  // namespace nimble::vm
