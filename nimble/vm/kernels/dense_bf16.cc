#include "nimble/vm/kernels/dense_bf16.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "nimble/vm/cpu_features.h"
#include "nimble/vm/thread_pool.h"

namespace nimble::vm {

#if defined(__x86_64__)
namespace {

// Every function here that uses an intrinsic is compiled for AVX512-BF16
// (with AVX512BW's 16-bit masked loads and VL's 256-bit masked stores); the
// file is otherwise generic x86-64, and the loops run only once the caller
// has checked the host (RequireBf16Products).
#define NIMBLE_AVX512_BF16 gnu::target("avx512f,avx512bw,avx512vl,avx512bf16")

// bf16 values in a 512-bit vector: one dot-product step.
constexpr int64_t kStep = 32;
// Below this many products a chunk of work is not worth handing to a thread:
// twice the float32 loops' threshold (dense.cc), as a bf16 product costs half.
constexpr int64_t kMinChunkProducts = int64_t{1} << 17;
// The most bytes of a's rows that every tile of a chunk's rows of b reads in
// turn: a block that stays in L2.
constexpr int64_t kRowBlockBytes = 256 * 1024;

int64_t CeilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// The loads of one step of a dot product: whole vectors, or the row's last
// k % 32 values zero-filled (a masked load never reads past the row's end,
// and its zeros add nothing to the sums).
struct WholeVectors {
  [[NIMBLE_AVX512_BF16]] __m512bh operator()(const Bf16Bits* values) const {
    return (__m512bh)_mm512_loadu_si512(values);
  }
};
struct TailVectors {
  __mmask32 lanes;
  [[NIMBLE_AVX512_BF16]] __m512bh operator()(const Bf16Bits* values) const {
    return (__m512bh)_mm512_maskz_loadu_epi16(lanes, values);
  }
};

// sums[i][j] += the products of a_rows[i] and b_rows[j] at [p, p + 32), in
// pairs: each vector of b is loaded once for the R rows of a, each of a once
// for the C rows of b.
template <int R, int C, typename Load>
[[NIMBLE_AVX512_BF16]] inline void DotStep(__m512 (&sums)[R][C], const Bf16Bits* const (&a_rows)[R],
                                           const Bf16Bits* const (&b_rows)[C], int64_t p,
                                           Load load) {
  __m512bh b_parts[C];
#pragma GCC unroll 8
  for (int j = 0; j < C; ++j) b_parts[j] = load(b_rows[j] + p);
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
    const __m512bh a_part = load(a_rows[i] + p);
#pragma GCC unroll 8
    for (int j = 0; j < C; ++j) sums[i][j] = _mm512_dpbf16_ps(sums[i][j], a_part, b_parts[j]);
  }
}

// Per 128-bit block of four lanes, the sums of adjacent pairs: a's in lanes
// 0-1, b's in 2-3 (x86's haddps).
template <size_t... kLane>
[[NIMBLE_AVX512_BF16]] inline __m512 PairSums(__m512 a, __m512 b, std::index_sequence<kLane...>) {
  constexpr auto first = [](size_t lane) {
    const size_t block = lane / 4 * 4;
    const size_t slot = lane % 4;
    return slot < 2 ? block + 2 * slot : 16 + block + 2 * (slot - 2);
  };
  return __builtin_shufflevector(a, b, first(kLane)...) +
         __builtin_shufflevector(a, b, (first(kLane) + 1)...);
}

// The sums of the lanes of v0, v1, v2 and v3, in that order: reduced
// together, in a quarter of the shuffles of four reductions. (Shuffles
// rather than their intrinsics, whose undefined lanes GCC 12 reports as
// maybe uninitialized.)
[[NIMBLE_AVX512_BF16]] inline __m128 SumEachOfFour(__m512 v0, __m512 v1, __m512 v2, __m512 v3) {
  constexpr auto lanes = std::make_index_sequence<16>();
  // Every block holds a part of each sum: [v0, v1, v2, v3].
  const __m512 blocks = PairSums(PairSums(v0, v1, lanes), PairSums(v2, v3, lanes), lanes);
  const __m256 halves = __builtin_shufflevector(blocks, blocks, 0, 1, 2, 3, 4, 5, 6, 7) +
                        __builtin_shufflevector(blocks, blocks, 8, 9, 10, 11, 12, 13, 14, 15);
  return __builtin_shufflevector(halves, halves, 0, 1, 2, 3) +
         __builtin_shufflevector(halves, halves, 4, 5, 6, 7);
}

// c[i * ldc + j] = the dot product of a's row i and b's row j (rows k long,
// one after another) for i < R and j < cols <= C, the R x C sums in
// registers. A tile that overhangs b's rows re-reads its last row and drops
// those sums.
template <int R, int C>
[[NIMBLE_AVX512_BF16]] inline void DotTile(const Bf16Bits* a, const Bf16Bits* b, int64_t k,
                                           float* c, int64_t ldc, int cols) {
  static_assert(C % 4 == 0, "the sums are reduced four at a time");
  const Bf16Bits* a_rows[R];
  for (int i = 0; i < R; ++i) a_rows[i] = a + i * k;
  const Bf16Bits* b_rows[C];
  for (int j = 0; j < C; ++j) b_rows[j] = b + std::min(j, cols - 1) * k;
  __m512 sums[R][C];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < C; ++j) sums[i][j] = _mm512_setzero_ps();
  }
  const int64_t body = k / kStep * kStep;
  for (int64_t p = 0; p < body; p += kStep) DotStep(sums, a_rows, b_rows, p, WholeVectors{});
  if (body < k) {
    const TailVectors tail{static_cast<__mmask32>((1u << (k - body)) - 1)};
    DotStep(sums, a_rows, b_rows, body, tail);
  }
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 2
    for (int j = 0; j < C; j += 4) {
      const __m128 four = SumEachOfFour(sums[i][j], sums[i][j + 1], sums[i][j + 2], sums[i][j + 3]);
      float* out = c + i * ldc + j;
      if (j + 4 <= cols) {
        _mm_storeu_ps(out, four);
      } else if (j < cols) {
        std::memcpy(out, &four, sizeof(float) * (cols - j));
      }
    }
  }
}

// DotTile for `rows` <= R rows of a: a shorter last group of rows recurses
// to its exact height.
template <int R, int C>
[[NIMBLE_AVX512_BF16]] inline void DotTileRows(int rows, const Bf16Bits* a, const Bf16Bits* b,
                                               int64_t k, float* c, int64_t ldc, int cols) {
  if constexpr (R > 1) {
    if (rows < R) return DotTileRows<R - 1, C>(rows, a, b, k, c, ldc, cols);
  }
  DotTile<R, C>(a, b, k, c, ldc, cols);
}

// Columns [first_tile * C, last_tile * C) of c (clipped to n): for each block
// of a's rows that fits L2, the chunk's tiles of C rows of b in turn (each
// stays in L1 while every row tile of the block reads it), so b is read from
// memory once per block.
template <int R, int C>
[[NIMBLE_AVX512_BF16, gnu::flatten]] void MultiplyColumnTiles(const Bf16Bits* a, const Bf16Bits* b,
                                                              float* c, int64_t m, int64_t n,
                                                              int64_t k, int64_t first_tile,
                                                              int64_t last_tile) {
  const int64_t col_end = std::min(n, last_tile * C);
  const int64_t block_rows =
      std::max<int64_t>(R, kRowBlockBytes / (k * static_cast<int64_t>(sizeof(Bf16Bits))) / R * R);
  for (int64_t block = 0; block < m; block += block_rows) {
    const int64_t block_end = std::min(m, block + block_rows);
    for (int64_t col = first_tile * C; col < col_end; col += C) {
      const int cols = static_cast<int>(std::min<int64_t>(C, col_end - col));
      for (int64_t row = block; row < block_end; row += R) {
        const int rows = static_cast<int>(std::min<int64_t>(R, block_end - row));
        DotTileRows<R, C>(rows, a + row * k, b + col * k, k, c + row * n + col, n, cols);
      }
    }
  }
}

// The product in tiles of R rows of a by C of b, whose columns of c are cut
// into one chunk per thread (below kMinChunkProducts a chunk, fewer), so
// that, call after call, each thread reads the same rows of b, which its
// cache may still hold (dense.cc: VectorRowGrain).
template <int R, int C>
void MultiplyOnPool(const Bf16Bits* a, const Bf16Bits* b, float* c, int64_t m, int64_t n,
                    int64_t k) {
  const int64_t tiles = CeilDiv(n, C);
  const int64_t grain =
      std::max(CeilDiv(kMinChunkProducts, m * k * C), tiles / ThreadPool::Global().num_threads());
  ParallelFor(0, tiles, grain, [&](int64_t first, int64_t last) {
    MultiplyColumnTiles<R, C>(a, b, c, m, n, k, first, last);
  });
}

[[NIMBLE_AVX512_BF16]] void RoundToBf16Avx512(const float* values, int64_t count, Bf16Bits* out) {
  int64_t i = 0;
  for (; i + 32 <= count; i += 32) {
    const __m512bh rounded =
        _mm512_cvtne2ps_pbh(_mm512_loadu_ps(values + i + 16), _mm512_loadu_ps(values + i));
    _mm512_storeu_si512(out + i, (__m512i)rounded);
  }
  for (; i < count; i += 16) {
    const __mmask16 lanes =
        count - i >= 16 ? __mmask16{0xffff} : static_cast<__mmask16>((1u << (count - i)) - 1);
    const __m256bh rounded = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(lanes, values + i));
    _mm256_mask_storeu_epi16(out + i, lanes, (__m256i)rounded);
  }
}

#undef NIMBLE_AVX512_BF16

}  // namespace

void RoundToBf16(const float* values, int64_t count, Bf16Bits* out) {
  RoundToBf16Avx512(values, count, out);
}

void Bf16DenseProduct(const Bf16Bits* a, const Bf16Bits* b, float* c, int64_t m, int64_t n,
                      int64_t k) {
  if (m == 1) {
    // Streaming b is the whole cost: eight rows in flight, one accumulator
    // each (enough independent sums to cover the dot products' latency), and
    // each vector of a loaded once for the eight.
    MultiplyOnPool<1, 8>(a, b, c, m, n, k);
  } else {
    // 24 accumulators, 4 vectors of b and one of a: 29 of the 32 registers.
    MultiplyOnPool<6, 4>(a, b, c, m, n, k);
  }
}
#else
// No AVX512-BF16 off x86-64: RequireBf16Products throws its error here.
void RoundToBf16(const float*, int64_t, Bf16Bits*) {
  RequireBf16Products("nn.dense with a bfloat16 weight");
}

void Bf16DenseProduct(const Bf16Bits*, const Bf16Bits*, float*, int64_t, int64_t, int64_t) {
  RequireBf16Products("nn.dense with a bfloat16 weight");
}
#endif

}  // namespace nimble::vm
