#include "nimble/vm/kernels/dense.h"

#include <cblas.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(NIMBLE_HAVE_DNNL)
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>
#endif

#include "nimble/vm/cpu_features.h"
#include "nimble/vm/dlpack.h"
#include "nimble/vm/error.h"
#include "nimble/vm/kernels/dense_bf16.h"
#include "nimble/vm/kernels/vector_math.h"
#include "nimble/vm/tensor.h"
#include "nimble/vm/thread_pool.h"

namespace nimble::vm {
namespace {

// c[i] = op(a[i]) * op(b[i]) for i < batch(): m x n sums of k products each.
// A batch count of 1 broadcasts. Every matrix is dense row-major.
struct MatMulProblem {
  int64_t batch_a = 1;
  int64_t batch_b = 1;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  bool transpose_a = false;  // a[i] is stored [k, m] rather than [m, k]
  bool transpose_b = true;   // b[i] is stored [n, k] rather than [k, n]

  int64_t batch() const { return batch_a == 1 ? batch_b : batch_a; }
};

// One implementation of MatMulProblem on operands of element type T (float,
// or Bf16Bits for nn.dense with a bfloat16 weight: the data rounded to it
// first); c is float32 either way. Every size it gets is positive.
template <typename T>
using MatMulImplOf = void (*)(const MatMulProblem& problem, const T* a, const T* b, float* c);
using MatMulImpl = MatMulImplOf<float>;

int64_t CeilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// ---------------------------------------------------------------------------
// Built-in. Both operands are first brought to k-contiguous rows (a as
// [m, k], b as [n, k]: nn.dense's layout and batch_matmul's default, which need
// no copy). c is cut into blocks of kRowBlock x kColBlock that threads take in
// turn; a block is computed in tiles of R rows of a by C rows of b, whose R*C
// vector dot products stay in registers. k is split into slices of about
// kDepthSlice so that a tile's rows of a stay in L1 while it sweeps the
// block's rows of b, which stay in L2.
// A single row of a with b as [n, k] (nn.dense on one token) skips the
// blocks: MultiplyVector streams b's rows in contiguous chunks of n per thread.

constexpr int64_t kRowBlock = 48;
constexpr int64_t kColBlock = 48;
constexpr int64_t kDepthSlice = 1024;
// Below this many flops a chunk of work is not worth handing to a thread.
constexpr int64_t kMinChunkFlops = int64_t{1} << 17;

template <int kBytes>
struct VectorOf {
  typedef float type __attribute__((vector_size(kBytes)));
};

// Rows [row_begin, row_end) x columns [col_begin, col_end) of c (m x n) =
// a (m x k) times the transpose of b (n x k).
struct NtBlock {
  const float* a;
  const float* b;
  float* c;
  int64_t n;
  int64_t k;
  int64_t row_begin, row_end;
  int64_t col_begin, col_end;
};

template <typename V>
constexpr int kLanes = sizeof(V) / sizeof(float);

// The lanes of a vector form blocks of four (a 128-bit register's worth), and
// reductions stay within blocks, where shuffles are cheap, until the end.
//
// out = per block, the sums of adjacent lane pairs, a's in lanes 0-1 and b's
// in lanes 2-3 (x86's haddps).
template <typename V, size_t... kLane>
inline void PairSums(const V& a, const V& b, V& out, std::index_sequence<kLane...>) {
  constexpr auto first = [](size_t lane) {
    const size_t block = lane / 4 * 4;
    const size_t slot = lane % 4;
    return slot < 2 ? block + 2 * slot : kLanes<V> + block + 2 * (slot - 2);
  };
  out = __builtin_shufflevector(a, b, first(kLane)...) +
        __builtin_shufflevector(a, b, (first(kLane) + 1)...);
}

// Reduces each of v[0..C) within blocks, so that lane j % 4 of every block of
// v[j / 4] holds part of the sum of the original v[j]: a tree of PairSums in
// which each level halves the vectors still in play (kCount) and the lanes
// of a block that hold parts of the same sum (kGroup).
template <typename V, int kCount, int kGroup, int C>
inline void SumWithinBlocks(V (&v)[C]) {
  if constexpr (kGroup > 1) {
    constexpr auto lanes = std::make_index_sequence<kLanes<V>>();
    if constexpr (kCount > 1) {
#pragma GCC unroll 8
      for (int t = 0; t < kCount / 2; ++t) PairSums(v[2 * t], v[2 * t + 1], v[t], lanes);
      SumWithinBlocks<V, kCount / 2, kGroup / 2>(v);
    } else {
      PairSums(v[0], v[0], v[0], lanes);
      SumWithinBlocks<V, 1, kGroup / 2>(v);
    }
  }
}

// out = the sum of v's lower and upper halves.
template <typename V, typename Half, size_t... kLane>
inline void SumHalves(const V& v, Half& out, std::index_sequence<kLane...>) {
  out = __builtin_shufflevector(v, v, kLane...) +
        __builtin_shufflevector(v, v, (kLanes<V> / 2 + kLane)...);
}

// out = the sum of v's blocks of four lanes.
template <typename V>
inline void SumBlocks(const V& v, typename VectorOf<16>::type& out) {
  if constexpr (kLanes<V> == 4) {
    out = v;
  } else {
    typename VectorOf<sizeof(V) / 2>::type half;
    SumHalves(v, half, std::make_index_sequence<kLanes<V> / 2>());
    SumBlocks(half, out);
  }
}

// sums[j] = the sum of v[j]'s lanes, for j < C.
template <typename V, int C>
inline void SumLanes(V (&v)[C], float (&sums)[C]) {
  using Block = typename VectorOf<16>::type;
  SumWithinBlocks<V, C, 4>(v);
#pragma GCC unroll 8
  for (int t = 0; t < (C + 3) / 4; ++t) {
    Block block;
    SumBlocks(v[t], block);
    std::memcpy(&sums[4 * t], &block, sizeof(float) * std::min(C - 4 * t, 4));
  }
}

// c[i * ldc + j] = (or += when accumulating) the dot product of a_rows[i] and
// b_rows[j] over `depth` elements, for i < R and j < cols <= C.
template <typename V, int R, int C>
inline void DotTile(const float* const (&a_rows)[R], const float* const (&b_rows)[C], int64_t depth,
                    float* c, int64_t ldc, int cols, bool accumulate) {
  constexpr int L = kLanes<V>;
  static_assert((C & (C - 1)) == 0 && (L & (L - 1)) == 0, "the lane sums need powers of two");
  V sums[R][C] = {};
  int64_t p = 0;
  for (; p + L <= depth; p += L) {
    V a[R];
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) std::memcpy(&a[i], a_rows[i] + p, sizeof(V));
#pragma GCC unroll 8
    for (int j = 0; j < C; ++j) {
      V b;
      std::memcpy(&b, b_rows[j] + p, sizeof(V));
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) sums[i][j] += a[i] * b;
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
    float row_sums[C];
    SumLanes(sums[i], row_sums);
    for (int j = 0; j < C; ++j) {
      for (int64_t q = p; q < depth; ++q) row_sums[j] += a_rows[i][q] * b_rows[j][q];
    }
    float* out = c + i * ldc;
    if (accumulate) {
#pragma GCC unroll 8
      for (int j = 0; j < C; ++j) {
        if (j < cols) row_sums[j] += out[j];
      }
    }
    if (cols == C) {
      std::memcpy(out, row_sums, sizeof(row_sums));
    } else {
      std::memcpy(out, row_sums, sizeof(float) * cols);
    }
  }
}

// As many columns per tile as the accumulator registers allow for R rows,
// rounded down to a power of two.
constexpr int TileColumns(int rows, int accumulators) {
  int columns = 1;
  while (columns * 2 <= std::min(8, accumulators / rows)) columns *= 2;
  return columns;
}

// Rows [row, row + rows) of the block against all its columns, over the depth
// slice [depth_begin, depth_begin + depth). R is the tile height; a shorter
// last group of rows recurses to its exact height.
template <typename V, int R, int kAccumulators>
inline void MultiplyRows(const NtBlock& block, int64_t row, int rows, int64_t depth_begin,
                         int64_t depth, bool accumulate) {
  if constexpr (R > 1) {
    if (rows < R) {
      MultiplyRows<V, R - 1, kAccumulators>(block, row, rows, depth_begin, depth, accumulate);
      return;
    }
  }
  constexpr int C = TileColumns(R, kAccumulators);
  const float* a_rows[R];
  for (int i = 0; i < R; ++i) a_rows[i] = block.a + (row + i) * block.k + depth_begin;
  for (int64_t col = block.col_begin; col < block.col_end; col += C) {
    const int cols = static_cast<int>(std::min<int64_t>(C, block.col_end - col));
    // A tile that overhangs the block re-reads its last column and drops those sums.
    const float* b_rows[C];
    b_rows[0] = block.b + col * block.k + depth_begin;
    for (int j = 1; j < C; ++j) b_rows[j] = j < cols ? b_rows[j - 1] + block.k : b_rows[j - 1];
    DotTile<V, R, C>(a_rows, b_rows, depth, block.c + row * block.n + col, block.n, cols,
                     accumulate);
  }
}

template <typename V, int R, int kAccumulators>
inline void MultiplyBlock(const NtBlock& block) {
  const int64_t slices = CeilDiv(block.k, kDepthSlice);
  const int64_t slice = CeilDiv(CeilDiv(block.k, slices), kLanes<V>) * kLanes<V>;
  for (int64_t depth_begin = 0; depth_begin < block.k; depth_begin += slice) {
    const int64_t depth = std::min(slice, block.k - depth_begin);
    for (int64_t row = block.row_begin; row < block.row_end; row += R) {
      const int rows = static_cast<int>(std::min<int64_t>(R, block.row_end - row));
      MultiplyRows<V, R, kAccumulators>(block, row, rows, depth_begin, depth, depth_begin > 0);
    }
  }
}

// Batch 1 (m = 1, nn.dense on one token): c[j] = the dot product of a and
// b's row j for j < rows, b's rows k long and contiguous. Streaming b is the
// whole cost, so the loop keeps eight rows in flight, one accumulator each
// (enough independent sums to cover the FMA latency), and loads each vector
// of a once for the eight rows. The last k % L columns are one more vector
// per row, the row's last L values against a copy of a's that is zero where
// the main loop already counted them: a scalar tail (the Tree-LSTM's rows
// of 300 leave 4) cost as much as a fifth of the row. `backwards` takes the
// groups of eight rows from last to first (SweepBackwards says why).
template <typename V>
inline void MultiplyVector(const float* a, const float* b, float* c, int64_t rows, int64_t k,
                           bool backwards) {
  constexpr int L = kLanes<V>;
  constexpr int kRows = 8;
  const int64_t body = k / L * L;
  const bool vector_tail = body != k && k >= L;
  V a_tail = {};
  if (vector_tail) {
    float lanes[L] = {};
    for (int lane = static_cast<int>(body + L - k); lane < L; ++lane) lanes[lane] = a[k - L + lane];
    std::memcpy(&a_tail, lanes, sizeof(V));
  }
  int64_t row = 0;
  const auto dot_rows = [&]<int R>(std::integral_constant<int, R>) {
    const float* b_rows[R];
    for (int j = 0; j < R; ++j) b_rows[j] = b + (row + j) * k;
    V sum[R] = {};
    for (int64_t p = 0; p < body; p += L) {
      V a_part;
      std::memcpy(&a_part, a + p, sizeof(V));
#pragma GCC unroll 8
      for (int j = 0; j < R; ++j) {
        V b_part;
        std::memcpy(&b_part, b_rows[j] + p, sizeof(V));
        sum[j] += a_part * b_part;
      }
    }
    if (vector_tail) {
#pragma GCC unroll 8
      for (int j = 0; j < R; ++j) {
        V b_part;
        std::memcpy(&b_part, b_rows[j] + k - L, sizeof(V));
        sum[j] += a_tail * b_part;
      }
    }
    float sums[R];
    SumLanes(sum, sums);
    for (int j = 0; j < R; ++j) {
      if (!vector_tail) {
        for (int64_t q = body; q < k; ++q) sums[j] += a[q] * b_rows[j][q];
      }
      c[row + j] = sums[j];
    }
  };
  const int64_t grouped = rows / kRows * kRows;
  if (!backwards) {
    for (; row < grouped; row += kRows) dot_rows(std::integral_constant<int, kRows>());
    for (; row < rows; ++row) dot_rows(std::integral_constant<int, 1>());
    return;
  }
  for (row = rows - 1; row >= grouped; --row) dot_rows(std::integral_constant<int, 1>());
  for (row = grouped - kRows; row >= 0; row -= kRows) {
    dot_rows(std::integral_constant<int, kRows>());
  }
}

// Whether this call sweeps the rows at `rows` from last to first. Each call
// for the same rows on this thread turns the other way: a weight slice
// larger than the core's L2 leaves only its last rows there after a sweep,
// so a sweep in the same direction would miss on every row, while one
// turning back starts on the rows still cached (LSTM's W_hh, 2 MB a thread,
// against 512 KB of L2). Results do not change: every row is still one dot
// product in the same order.
bool SweepBackwards(const float* rows) {
  struct LastSweep {
    const float* rows = nullptr;
    bool backwards = false;
  };
  // A few weights per thread (an LSTM layer's W_hh each); a slot shared by
  // two weights only costs the reuse.
  thread_local std::array<LastSweep, 8> last_sweeps;
  LastSweep& last = last_sweeps[(reinterpret_cast<uintptr_t>(rows) >> 6) % last_sweeps.size()];
  if (last.rows != rows) {
    last = {rows, false};
  } else {
    last.backwards = !last.backwards;
  }
  return last.backwards;
}

// One instance of each loop per instruction set, chosen at run time: the
// tile shapes fit the register files (AVX-512: 32 zmm, AVX2: 16 ymm; the
// baseline, SSE2 or NEON, has 16 or 32 128-bit registers).
using MultiplyBlockFn = void (*)(const NtBlock& block);
using MultiplyVectorFn = void (*)(const float* a, const float* b, float* c, int64_t rows, int64_t k,
                                  bool backwards);

struct BuiltinLoops {
  MultiplyBlockFn multiply_block;
  MultiplyVectorFn multiply_vector;
};

#if defined(__x86_64__)
[[gnu::target("avx512f"), gnu::flatten]] void MultiplyBlockAvx512(const NtBlock& block) {
  MultiplyBlock<VectorOf<64>::type, 6, 24>(block);
}
[[gnu::target("avx512f"), gnu::flatten]] void MultiplyVectorAvx512(const float* a, const float* b,
                                                                   float* c, int64_t rows,
                                                                   int64_t k, bool backwards) {
  MultiplyVector<VectorOf<64>::type>(a, b, c, rows, k, backwards);
}
[[gnu::target("avx2,fma"), gnu::flatten]] void MultiplyBlockAvx2(const NtBlock& block) {
  MultiplyBlock<VectorOf<32>::type, 3, 12>(block);
}
[[gnu::target("avx2,fma"), gnu::flatten]] void MultiplyVectorAvx2(const float* a, const float* b,
                                                                  float* c, int64_t rows, int64_t k,
                                                                  bool backwards) {
  MultiplyVector<VectorOf<32>::type>(a, b, c, rows, k, backwards);
}
#endif
[[gnu::flatten]] void MultiplyBlockBaseline(const NtBlock& block) {
  MultiplyBlock<VectorOf<16>::type, 3, 12>(block);
}
[[gnu::flatten]] void MultiplyVectorBaseline(const float* a, const float* b, float* c, int64_t rows,
                                             int64_t k, bool backwards) {
  MultiplyVector<VectorOf<16>::type>(a, b, c, rows, k, backwards);
}

BuiltinLoops SelectBuiltinLoops() {
  switch (vector_math::HostVectorIsa()) {
#if defined(__x86_64__)
    case vector_math::VectorIsa::kAvx512:
      return {MultiplyBlockAvx512, MultiplyVectorAvx512};
    case vector_math::VectorIsa::kAvx2:
      return {MultiplyBlockAvx2, MultiplyVectorAvx2};
#endif
    default:
      return {MultiplyBlockBaseline, MultiplyVectorBaseline};
  }
}

// ---------------------------------------------------------------------------
// Packed weights (nn.contrib_dense_pack). The weight arrives as [n / 16, k,
// 16]: each block of 16 output columns stored k-major, packed once at compile
// time (transform/pack_dense_weights.h). A tile of R data rows by B blocks
// keeps its R x 16B sums in registers; each step broadcasts one element of
// each data row against the blocks' 16 contiguous weights each, so every
// weight loaded feeds R multiply-adds, every broadcast B, and no horizontal
// sums are needed, which the dot-product tiles above pay for. A thread takes
// whole blocks, and a depth slice of its B blocks stays in L1 while the row
// tiles sweep it; the data is laid out once per call in row tiles
// (PackRowTiles), which lifted one thread from 67% to 80% of the FMA peak at
// BERT's FFN (m 54, k 768, n 3072: 69 -> 80 GFLOP/s on a Zen 3 core). On
// AVX-512, two blocks a tile (12 x 32) rather than one: one block's 12 FMAs
// a step came with 13 loads, more than the two load ports keep up with, and
// two blocks take BERT's products at 54 rows from 241-262 to 269-302 GFLOP/s
// (2 threads of a Sapphire Rapids Xeon, weights in cache). A change to these
// loops' speed bumps backend/matmul_sites.h's kKernelsRevision, so that
// tuning databases measure them again.

constexpr int64_t kPackedBlock = 16;

// out = value in every lane (an out-parameter: returning a vector by value
// from a function compiled for another instruction set changes the ABI).
template <typename V, size_t... kLane>
inline void Broadcast(float value, V& out, std::index_sequence<kLane...>) {
  const V first = {value};
  out = __builtin_shufflevector(first, first, (kLane * 0)...);
}

// Depth per pass over the blocks: a slice of a tile's blocks (256 x 16
// floats, 16 KiB a block; 32 KiB for AVX-512's two) stays in L1 while every
// row tile of data reads it, and a long reduction (BERT's 3072) does not
// push data's rows out of L2.
constexpr int64_t kPackedDepthSlice = 256;

// a (m x k) as the packed kernel reads it, into `panels`: per depth slice,
// tiles of `tile_rows` rows, each stored depth-major (row i of the tile at
// step q is panels[q * tile_rows + i]), so that a tile's step reads
// consecutive values instead of one from each row. The tile of rows t in
// the slice from depth p starts at (p * tiles + t * depth) * tile_rows. The
// last tile's rows past m are left as they are: the kernel reads only a
// tile's real rows.
void PackRowTiles(const float* a, int64_t m, int64_t k, int tile_rows, float* panels) {
  const int64_t tiles = CeilDiv(m, tile_rows);
  for (int64_t p = 0; p < k; p += kPackedDepthSlice) {
    const int64_t depth = std::min(kPackedDepthSlice, k - p);
    for (int64_t t = 0; t < tiles; ++t) {
      float* panel = panels + (p * tiles + t * depth) * tile_rows;
      for (int i = 0; i < tile_rows && t * tile_rows + i < m; ++i) {
        const float* row = a + (t * tile_rows + i) * k + p;
        for (int64_t q = 0; q < depth; ++q) panel[q * tile_rows + i] = row[q];
      }
    }
  }
}

// Weights ahead of the tiles: which cache lines a tile asks for while it works.
struct Prefetch {
  const float* lines;  // line q of block b starts at lines + b * block_stride + q * 16
  int64_t count;
  int64_t every;  // steps between two requests
};

// c[i * n + b * 16 + j] = (or += when accumulating) the sum over q < depth of
// panel[q * stride + i] * block[b * block_stride + q * 16 + j], for i < R,
// b < B and j < 16: R rows by B blocks of 16 columns; plus bias[b * 16 + j]
// when not accumulating and there is a bias (the sums start from it). Every
// `ahead.every` steps, also prefetch `ahead`'s next line of each block, if
// any, into L2.
template <typename V, int R, int B>
inline void PackedTile(const float* panel, int64_t stride, const float* block, int64_t block_stride,
                       int64_t depth, float* c, int64_t n, bool accumulate, const float* bias,
                       Prefetch ahead) {
  constexpr int kVectors = B * kPackedBlock / kLanes<V>;
  constexpr int kVectorsPerBlock = kPackedBlock / kLanes<V>;
  constexpr auto lanes = std::make_index_sequence<kLanes<V>>();
  V sums[R][kVectors] = {};
  if (bias && !accumulate) {
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) {
      V start;
      std::memcpy(&start, bias + v * kLanes<V>, sizeof(V));
#pragma GCC unroll 16
      for (int i = 0; i < R; ++i) sums[i][v] = start;
    }
  }
  const float* next_line = ahead.lines;
  const float* const end_line = ahead.lines + ahead.count * kPackedBlock;
  int64_t countdown = 0;
#pragma GCC unroll 4
  for (int64_t q = 0; q < depth; ++q) {
    if (--countdown <= 0 && next_line < end_line) {
#pragma GCC unroll 4
      for (int b = 0; b < B; ++b) __builtin_prefetch(next_line + b * block_stride, 0, 2);
      next_line += kPackedBlock;
      countdown = ahead.every;
    }
    V w[kVectors];
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) {
      std::memcpy(&w[v],
                  block + (v / kVectorsPerBlock) * block_stride + q * kPackedBlock +
                      (v % kVectorsPerBlock) * kLanes<V>,
                  sizeof(V));
    }
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      V x;
      Broadcast(panel[q * stride + i], x, lanes);
#pragma GCC unroll 4
      for (int v = 0; v < kVectors; ++v) sums[i][v] += x * w[v];
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
    if (accumulate) {
#pragma GCC unroll 4
      for (int v = 0; v < kVectors; ++v) {
        V old;
        std::memcpy(&old, c + i * n + v * kLanes<V>, sizeof(V));
        sums[i][v] += old;
      }
    }
    std::memcpy(c + i * n, sums[i], sizeof(sums[i]));
  }
}

// The last `rows` (< R) rows: one tile of exactly that many.
template <typename V, int R, int B>
inline void PackedTail(int64_t rows, const float* panel, int64_t stride, const float* block,
                       int64_t block_stride, int64_t depth, float* c, int64_t n, bool accumulate,
                       const float* bias, Prefetch ahead) {
  if constexpr (R > 1) {
    if (rows == R - 1) {
      return PackedTile<V, R - 1, B>(panel, stride, block, block_stride, depth, c, n, accumulate,
                                     bias, ahead);
    }
    PackedTail<V, R - 1, B>(rows, panel, stride, block, block_stride, depth, c, n, accumulate, bias,
                            ahead);
  }
}

// Blocks [j, j + B) of c (m x n) = a, as PackRowTiles(a, m, k, R) laid it out
// in `panels`, times the packed weight, plus `bias` (n values) when not null.
//
// A model's weights come from memory (BERT-base reads 340 MB an inference),
// and only a slice's first row tile waits for them: left to the hardware
// prefetcher, a cold 54 x 768 x 3072 product ran at 67% of its hot speed
// (2 threads of a Sapphire Rapids Xeon). The slices of a block are
// consecutive in memory, so while it works on one slice, its row tiles share
// out the prefetching of the next `depth` lines, one line every `tiles`
// steps: the requests are spread over the slice's whole work, not bunched
// (which left it at 67%), and the cold product runs at 95%.
template <typename V, int R, int B>
void MultiplyPackedBlockGroup(const float* panels, const float* packed, const float* bias, float* c,
                              int64_t m, int64_t n, int64_t k, int64_t j, bool gelu) {
  const int64_t tiles = CeilDiv(m, R);
  float* c_j = c + j * kPackedBlock;
  const float* bias_j = bias ? bias + j * kPackedBlock : nullptr;
  const int64_t block_stride = k * kPackedBlock;
  for (int64_t p = 0; p < k; p += kPackedDepthSlice) {
    const float* slice = packed + (j * k + p) * kPackedBlock;
    const int64_t depth = std::min(kPackedDepthSlice, k - p);
    const int64_t lines_per_tile = CeilDiv(depth, tiles);
    for (int64_t t = 0; t < tiles; ++t) {
      const float* panel = panels + (p * tiles + t * depth) * R;
      const int64_t rows = std::min<int64_t>(R, m - t * R);
      const int64_t first_line = t * lines_per_tile;
      // The next slice of the same blocks; past a block's last slice, the
      // first of the block B further on (where this thread goes next).
      const Prefetch ahead{slice + (depth + first_line) * kPackedBlock +
                               (p + depth == k ? (B - 1) * block_stride : 0),
                           std::clamp<int64_t>(depth - first_line, 0, lines_per_tile), tiles};
      if (rows == R) {
        PackedTile<V, R, B>(panel, R, slice, block_stride, depth, c_j + t * R * n, n, p > 0, bias_j,
                            ahead);
      } else {
        PackedTail<V, R, B>(rows, panel, R, slice, block_stride, depth, c_j + t * R * n, n, p > 0,
                            bias_j, ahead);
      }
    }
  }
  // While the blocks' columns are still in L1: a separate pass over BERT's
  // feed-forward product cost 0.9 of its 50 ms.
  if (gelu) {
    for (int64_t i = 0; i < m; ++i) {
      float* row = c_j + i * n;
      for (int64_t col = 0; col < B * kPackedBlock; ++col) row[col] = vector_math::Gelu(row[col]);
    }
  }
}

// Blocks [first, last) of c, B at a time, then one at a time.
template <typename V, int R, int B>
void MultiplyPackedBlocks(const float* panels, const float* packed, const float* bias, float* c,
                          int64_t m, int64_t n, int64_t k, int64_t first, int64_t last, bool gelu) {
  int64_t j = first;
  for (; j + B <= last; j += B) {
    MultiplyPackedBlockGroup<V, R, B>(panels, packed, bias, c, m, n, k, j, gelu);
  }
  for (; j < last; ++j) {
    MultiplyPackedBlockGroup<V, R, 1>(panels, packed, bias, c, m, n, k, j, gelu);
  }
}

// Tiles that fit the register file with their weight vectors and a
// broadcast: AVX-512 12 rows x 2 blocks (24 of 32 zmm), AVX2 6 x 1 block (12
// of 16 ymm); the baseline's 128-bit vectors need 4 a block and row: NEON's
// 32 registers hold 6 rows, SSE2's 16 two.
using MultiplyPackedFn = void (*)(const float* panels, const float* packed, const float* bias,
                                  float* c, int64_t m, int64_t n, int64_t k, int64_t first,
                                  int64_t last, bool gelu);
struct PackedLoops {
  MultiplyPackedFn multiply;
  int tile_rows;
};
#if defined(__x86_64__)
constexpr int kAvx512PackedRows = 12;
constexpr int kAvx512PackedBlocks = 2;
constexpr int kAvx2PackedRows = 6;
[[gnu::target("avx512f"), gnu::flatten]] void MultiplyPackedAvx512(
    const float* panels, const float* packed, const float* bias, float* c, int64_t m, int64_t n,
    int64_t k, int64_t first, int64_t last, bool gelu) {
  MultiplyPackedBlocks<VectorOf<64>::type, kAvx512PackedRows, kAvx512PackedBlocks>(
      panels, packed, bias, c, m, n, k, first, last, gelu);
}
[[gnu::target("avx2,fma"), gnu::flatten]] void MultiplyPackedAvx2(
    const float* panels, const float* packed, const float* bias, float* c, int64_t m, int64_t n,
    int64_t k, int64_t first, int64_t last, bool gelu) {
  MultiplyPackedBlocks<VectorOf<32>::type, kAvx2PackedRows, 1>(panels, packed, bias, c, m, n, k,
                                                               first, last, gelu);
}
constexpr int kBaselinePackedRows = 2;
#else
constexpr int kBaselinePackedRows = 6;
#endif
[[gnu::flatten]] void MultiplyPackedBaseline(const float* panels, const float* packed,
                                             const float* bias, float* c, int64_t m, int64_t n,
                                             int64_t k, int64_t first, int64_t last, bool gelu) {
  MultiplyPackedBlocks<VectorOf<16>::type, kBaselinePackedRows, 1>(panels, packed, bias, c, m, n, k,
                                                                   first, last, gelu);
}

PackedLoops SelectPackedLoops() {
  switch (vector_math::HostVectorIsa()) {
#if defined(__x86_64__)
    case vector_math::VectorIsa::kAvx512:
      return {MultiplyPackedAvx512, kAvx512PackedRows};
    case vector_math::VectorIsa::kAvx2:
      return {MultiplyPackedAvx2, kAvx2PackedRows};
#endif
    default:
      return {MultiplyPackedBaseline, kBaselinePackedRows};
  }
}

// c (m x n) = a (m x k) times the packed weight of n / 16 blocks, plus bias
// (n values) on every row when it is not null, then gelu of each element
// when `gelu`; m, n, k > 0. a is laid out once for every thread's blocks.
void PackedMatMul(const float* a, const float* packed, const float* bias, float* c, int64_t m,
                  int64_t n, int64_t k, bool gelu) {
  static const PackedLoops loops = SelectPackedLoops();
  // Kept from call to call: a fresh vector a call (590 KB at BERT's 48 x
  // 3072) cost zeroing and, when glibc handed the pages back, page faults.
  thread_local std::vector<float> panels;
  const size_t size = static_cast<size_t>(CeilDiv(m, loops.tile_rows) * loops.tile_rows * k);
  if (panels.size() < size) panels.resize(size);
  // The workers read this thread's panels (in the lambda, `panels` would be
  // each worker's own).
  float* const row_tiles = panels.data();
  PackRowTiles(a, m, k, loops.tile_rows, row_tiles);
  const int64_t blocks = n / kPackedBlock;
  const int64_t grain = std::max<int64_t>(1, kMinChunkFlops / (2 * m * k * kPackedBlock));
  ParallelFor(0, blocks, grain, [&](int64_t first, int64_t last) {
    loops.multiply(row_tiles, packed, bias, c, m, n, k, first, last, gelu);
  });
}

// The [cols, rows] transposes of `count` consecutive [rows, cols] matrices.
std::vector<float> TransposeEach(const float* data, int64_t count, int64_t rows, int64_t cols) {
  std::vector<float> out(static_cast<size_t>(count * rows * cols));
  for (int64_t index = 0; index < count; ++index) {
    const float* from = data + index * rows * cols;
    float* to = out.data() + index * rows * cols;
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) to[j * rows + i] = from[i * cols + j];
    }
  }
  return out;
}

// The fewest rows of b in a chunk of a matrix-vector product: whole cache
// lines of c.
constexpr int64_t kVectorRowGrain = 64;

// Rows of b per chunk of a matrix-vector product: one chunk per thread, so
// that with two threads each reads the same rows call after call (the
// pool's caller takes the first chunk, its worker the other; with more,
// the workers take theirs in whatever order they come) and a weight that
// the two caches hold between them stays there (the Tree-LSTM's node
// weight, 900 KB, in two 512 KB L2s); never less than kVectorRowGrain, nor
// than what outweighs the hand-over.
int64_t VectorRowGrain(int64_t rows, int64_t k) {
  const int64_t per_thread = rows / ThreadPool::Global().num_threads();
  return std::max({kVectorRowGrain, CeilDiv(kMinChunkFlops, 2 * k) / 16 * 16, per_thread});
}

void BuiltinMatMul(const MatMulProblem& p, const float* a, const float* b, float* c) {
  static const BuiltinLoops loops = SelectBuiltinLoops();
  if (p.m == 1 && p.transpose_b) {
    // A single row of a is k contiguous values whichever way it is stored.
    const int64_t grain = VectorRowGrain(p.n, p.k);
    for (int64_t batch = 0; batch < p.batch(); ++batch) {
      const float* a_i = a + (p.batch_a == 1 ? 0 : batch) * p.k;
      const float* b_i = b + (p.batch_b == 1 ? 0 : batch) * p.n * p.k;
      float* c_i = c + batch * p.n;
      ParallelFor(0, p.n, grain, [&](int64_t first, int64_t last) {
        const float* rows = b_i + first * p.k;
        loops.multiply_vector(a_i, rows, c_i + first, last - first, p.k, SweepBackwards(rows));
      });
    }
    return;
  }
  std::vector<float> a_rows;
  std::vector<float> b_rows;
  if (p.transpose_a) {
    a_rows = TransposeEach(a, p.batch_a, p.k, p.m);
    a = a_rows.data();
  }
  if (!p.transpose_b) {
    b_rows = TransposeEach(b, p.batch_b, p.k, p.n);
    b = b_rows.data();
  }
  const int64_t row_blocks = CeilDiv(p.m, kRowBlock);
  const int64_t col_blocks = CeilDiv(p.n, kColBlock);
  const int64_t blocks_per_batch = row_blocks * col_blocks;
  const int64_t block_flops = 2 * std::min(p.m, kRowBlock) * std::min(p.n, kColBlock) * p.k;
  const int64_t grain = std::max<int64_t>(1, kMinChunkFlops / block_flops);
  // Consecutive blocks share their columns, so a chunk reuses b's rows in cache.
  ParallelFor(0, p.batch() * blocks_per_batch, grain, [&](int64_t first, int64_t last) {
    for (int64_t index = first; index < last; ++index) {
      const int64_t batch = index / blocks_per_batch;
      const int64_t col_block = index % blocks_per_batch / row_blocks;
      const int64_t row_block = index % row_blocks;
      const NtBlock block{
          .a = a + (p.batch_a == 1 ? 0 : batch) * p.m * p.k,
          .b = b + (p.batch_b == 1 ? 0 : batch) * p.n * p.k,
          .c = c + batch * p.m * p.n,
          .n = p.n,
          .k = p.k,
          .row_begin = row_block * kRowBlock,
          .row_end = std::min(p.m, (row_block + 1) * kRowBlock),
          .col_begin = col_block * kColBlock,
          .col_end = std::min(p.n, (col_block + 1) * kColBlock),
      };
      loops.multiply_block(block);
    }
  });
}

// nn.dense with a bfloat16 weight: its own loops (dense_bf16.h), b as [n, k].
void BuiltinBf16MatMul(const MatMulProblem& p, const Bf16Bits* a, const Bf16Bits* b, float* c) {
  Bf16DenseProduct(a, b, c, p.m, p.n, p.k);
}

// ---------------------------------------------------------------------------
// Libraries. oneDNN and OpenBLAS run on the runtime's pool: the product is cut
// into one slice per pool thread and each slice is a single-threaded library
// call. Left to their own threads (OpenMP's for Debian's oneDNN, OpenBLAS's
// pthreads), the libraries keep them spinning for milliseconds after each
// call, on the very cores that the pool's next kernel needs: BERT compiled
// for length 128, with oneDNN at the sites where it measured fastest, ran
// 1.35x slower than the dynamic program, which used none, and as fast once
// OpenMP's threads slept (OMP_WAIT_POLICY=passive).

// One slice of a MatMulProblem: its sizes and the strides of the whole
// operands it lies in (a row of a, of b as stored, of c; a matrix of each)...
struct MatMulSliceShape {
  MatMulProblem p;
  int64_t lda, ldb, ldc;
  int64_t batch_stride_a, batch_stride_b, batch_stride_c;
};

// ... and where its operands start, a and b of element type T.
template <typename T>
struct MatMulSlice : MatMulSliceShape {
  const T* a;
  const T* b;
  float* c;
};

template <typename T>
using MatMulSliceImpl = void (*)(const MatMulSlice<T>& slice);

// Cuts `p` into at most one slice per pool thread and runs `impl` on each in
// parallel: along the batch when there are enough matrices, else along
// whichever of m and n is larger (splitting n gives each thread a part of b,
// the weights of a dense layer, instead of all of it).
template <typename T>
void RunSlicedOnPool(MatMulSliceImpl<T> impl, const MatMulProblem& p, const T* a, const T* b,
                     float* c) {
  const MatMulSlice<T> whole{MatMulSliceShape{
                                 .p = p,
                                 .lda = p.transpose_a ? p.m : p.k,
                                 .ldb = p.transpose_b ? p.k : p.n,
                                 .ldc = p.n,
                                 .batch_stride_a = p.m * p.k,
                                 .batch_stride_b = p.n * p.k,
                                 .batch_stride_c = p.m * p.n,
                             },
                             a, b, c};
  // Below this many multiply-adds a second thread costs more than it saves.
  constexpr int64_t kMinSliceWork = int64_t{1} << 16;
  const int64_t work = p.batch() * p.m * p.n * p.k;
  const int64_t threads = ThreadPool::Global().num_threads();
  const int64_t pieces = std::max<int64_t>(1, std::min(threads, work / kMinSliceWork));
  if (pieces == 1) {
    impl(whole);
    return;
  }
  enum class Axis { kBatch, kRows, kCols };
  const Axis axis = p.batch() >= pieces ? Axis::kBatch : p.n > p.m ? Axis::kCols : Axis::kRows;
  const int64_t extent = axis == Axis::kBatch ? p.batch() : axis == Axis::kCols ? p.n : p.m;
  // Column slices stay multiples of 16 so that every slice keeps whole vectors.
  const int64_t align = axis == Axis::kCols ? 16 : 1;
  const int64_t step = CeilDiv(CeilDiv(extent, pieces), align) * align;
  ParallelFor(0, CeilDiv(extent, step), 1, [&](int64_t first, int64_t last) {
    for (int64_t piece = first; piece < last; ++piece) {
      const int64_t begin = piece * step;
      const int64_t size = std::min(step, extent - begin);
      MatMulSlice<T> slice = whole;
      switch (axis) {
        case Axis::kBatch:
          // A batch of one broadcasts: every slice reads the whole of it.
          if (p.batch_a != 1) {
            slice.p.batch_a = size;
            slice.a += begin * whole.batch_stride_a;
          }
          if (p.batch_b != 1) {
            slice.p.batch_b = size;
            slice.b += begin * whole.batch_stride_b;
          }
          slice.c += begin * whole.batch_stride_c;
          break;
        case Axis::kRows:
          slice.p.m = size;
          slice.a += p.transpose_a ? begin : begin * whole.lda;
          slice.c += begin * whole.ldc;
          break;
        case Axis::kCols:
          slice.p.n = size;
          slice.b += p.transpose_b ? begin * whole.ldb : begin;
          slice.c += begin;
          break;
      }
      impl(slice);
    }
  });
}

#if defined(NIMBLE_HAVE_DNNL)
// oneDNN: one matmul primitive per slice shape and element type, created on
// first use (creation costs far more than a small product) and kept for the
// life of the process. Transposed operands and slices are strided views:
// nothing is copied. A primitive is shared by the pool's threads, so its
// scratchpad is ours, one per thread: oneDNN's own (library mode, as Debian
// builds it) is common to all primitives and lets a primitive run only on
// the thread that created it; two slices of one shape on two threads gave
// wrong products. With bf16 operands (a bfloat16 weight, the data rounded to
// it) the sums are still float32: c stays f32, and oneDNN takes AMX tiles
// where the CPU has them.

dnnl::engine& CpuEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// oneDNN's name for the operands' element type T.
template <typename T>
constexpr dnnl::memory::data_type kDnnlType =
    std::is_same_v<T, Bf16Bits> ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;

struct DnnlPrimitive {
  dnnl::matmul matmul;
  dnnl::memory::desc a, b, c, scratchpad;
};

// `type`: a's and b's.
DnnlPrimitive CreateDnnlPrimitive(const MatMulSliceShape& s, dnnl::memory::data_type type) {
  using dnnl::memory;
  const MatMulProblem& p = s.p;
  const memory::desc a({p.batch_a, p.m, p.k}, type,
                       p.transpose_a ? memory::dims{s.batch_stride_a, 1, s.lda}
                                     : memory::dims{s.batch_stride_a, s.lda, 1});
  const memory::desc b({p.batch_b, p.k, p.n}, type,
                       p.transpose_b ? memory::dims{s.batch_stride_b, 1, s.ldb}
                                     : memory::dims{s.batch_stride_b, s.ldb, 1});
  const memory::desc c({p.batch(), p.m, p.n}, memory::data_type::f32,
                       memory::dims{s.batch_stride_c, s.ldc, 1});
  dnnl::primitive_attr attributes;
  attributes.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::matmul::primitive_desc descriptor(dnnl::matmul::desc(a, b, c), attributes,
                                                CpuEngine());
  return {dnnl::matmul(descriptor), a, b, c, descriptor.scratchpad_desc()};
}

std::shared_ptr<const DnnlPrimitive> CachedDnnlPrimitive(const MatMulSliceShape& s,
                                                         dnnl::memory::data_type type) {
  using Key = std::array<int64_t, 14>;
  static std::mutex mutex;
  static std::map<Key, std::shared_ptr<const DnnlPrimitive>> cache;
  const MatMulProblem& p = s.p;
  const Key key{static_cast<int64_t>(type),
                p.batch_a,
                p.batch_b,
                p.m,
                p.n,
                p.k,
                p.transpose_a,
                p.transpose_b,
                s.lda,
                s.ldb,
                s.ldc,
                s.batch_stride_a,
                s.batch_stride_b,
                s.batch_stride_c};
  std::lock_guard lock(mutex);
  std::shared_ptr<const DnnlPrimitive>& entry = cache[key];
  if (!entry) entry = std::make_shared<const DnnlPrimitive>(CreateDnnlPrimitive(s, type));
  return entry;
}

std::string ProblemString(const MatMulProblem& p) {
  return "batch " + std::to_string(p.batch_a) + "/" + std::to_string(p.batch_b) +
         ", m=" + std::to_string(p.m) + ", n=" + std::to_string(p.n) + ", k=" + std::to_string(p.k);
}

// The slice at s, a and b of element type `type`: one function for every
// element type, so that a thread keeps one stream and one scratchpad.
void RunDnnlMatMulSlice(const MatMulSliceShape& s, dnnl::memory::data_type type, const void* a,
                        const void* b, float* c) {
  // OpenMP's thread count is per thread: each pool thread runs its slice alone.
  thread_local const bool single_threaded = (omp_set_num_threads(1), true);
  (void)single_threaded;
  try {
    const std::shared_ptr<const DnnlPrimitive> primitive = CachedDnnlPrimitive(s, type);
    dnnl::engine& engine = CpuEngine();
    thread_local dnnl::stream stream(engine);
    // oneDNN takes non-const handles but reads the inputs only.
    dnnl::memory a_memory(primitive->a, engine, const_cast<void*>(a));
    dnnl::memory b_memory(primitive->b, engine, const_cast<void*>(b));
    dnnl::memory c_memory(primitive->c, engine, c);
    thread_local std::vector<std::byte> scratchpad;
    scratchpad.resize(std::max(scratchpad.size(), primitive->scratchpad.get_size()));
    dnnl::memory scratchpad_memory(primitive->scratchpad, engine, scratchpad.data());
    primitive->matmul.execute(stream, {{DNNL_ARG_SRC, a_memory},
                                       {DNNL_ARG_WEIGHTS, b_memory},
                                       {DNNL_ARG_DST, c_memory},
                                       {DNNL_ARG_SCRATCHPAD, scratchpad_memory}});
    stream.wait();
  } catch (const dnnl::error& error) {
    const char* operands = type == dnnl::memory::data_type::bf16 ? ", bfloat16" : "";
    throw Error("oneDNN matmul (" + ProblemString(s.p) + operands + ") failed: " + error.what());
  }
}

template <typename T>
void DnnlMatMulSlice(const MatMulSlice<T>& s) {
  RunDnnlMatMulSlice(s, kDnnlType<T>, s.a, s.b, s.c);
}

template <typename T>
void DnnlMatMul(const MatMulProblem& p, const T* a, const T* b, float* c) {
  RunSlicedOnPool(DnnlMatMulSlice<T>, p, a, b, c);
}
#endif

// OpenBLAS: one cblas call per matrix of the slice. The library is opened
// at its first use rather than linked: linked, its start-up made a thread per
// core that spun on sched_yield for the first tenth of a second of every
// process, whether it ever called OpenBLAS or not (a 0.4 s `nimble run` of the
// LSTM took 1.18x as long on 2 cores). The runtime calls it single-threaded on
// its own pool, so those threads never had work: unless the environment says
// otherwise, OPENBLAS_NUM_THREADS=1 keeps it from making them.

constexpr const char* kOpenBlasLibrary = "libopenblas.so.0";

struct OpenBlasLibrary {
  decltype(&cblas_sgemm) sgemm;
  decltype(&cblas_sgemv) sgemv;
};

const OpenBlasLibrary& OpenBlas() {
  static const OpenBlasLibrary library = [] {
    // glibc's setenv leaves the strings that other threads may be reading.
    setenv("OPENBLAS_NUM_THREADS", "1", /*overwrite=*/0);
    void* handle = dlopen(kOpenBlasLibrary, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      throw Error(std::string("OpenBLAS: cannot load ") + kOpenBlasLibrary + ": " + dlerror());
    }
    const auto symbol = [&]<typename Fn>(Fn*, const char* name) {
      void* address = dlsym(handle, name);
      if (address == nullptr) {
        throw Error(std::string("OpenBLAS: ") + kOpenBlasLibrary + " has no " + name);
      }
      return reinterpret_cast<Fn*>(address);
    };
    symbol(&openblas_set_num_threads, "openblas_set_num_threads")(1);
    return OpenBlasLibrary{symbol(&cblas_sgemm, "cblas_sgemm"),
                           symbol(&cblas_sgemv, "cblas_sgemv")};
  }();
  return library;
}

blasint BlasIndex(int64_t value) {
  if (value > std::numeric_limits<blasint>::max()) {
    throw Error("OpenBLAS cannot index a dimension of " + std::to_string(value));
  }
  return static_cast<blasint>(value);
}

void OpenBlasMatMulSlice(const MatMulSlice<float>& s) {
  const MatMulProblem& p = s.p;
  const blasint m = BlasIndex(p.m);
  const blasint n = BlasIndex(p.n);
  const blasint k = BlasIndex(p.k);
  const blasint lda = BlasIndex(s.lda);
  const blasint ldb = BlasIndex(s.ldb);
  const blasint ldc = BlasIndex(s.ldc);
  const OpenBlasLibrary& blas = OpenBlas();
  for (int64_t batch = 0; batch < p.batch(); ++batch) {
    const float* a_i = s.a + (p.batch_a == 1 ? 0 : batch) * s.batch_stride_a;
    const float* b_i = s.b + (p.batch_b == 1 ? 0 : batch) * s.batch_stride_b;
    float* c_i = s.c + batch * s.batch_stride_c;
    if (m == 1) {
      // A single row of a: k values, a column of the stored [k, m] when transposed.
      const blasint step_a = p.transpose_a ? lda : 1;
      if (p.transpose_b) {
        blas.sgemv(CblasRowMajor, CblasNoTrans, n, k, 1.0f, b_i, ldb, a_i, step_a, 0.0f, c_i, 1);
      } else {
        blas.sgemv(CblasRowMajor, CblasTrans, k, n, 1.0f, b_i, ldb, a_i, step_a, 0.0f, c_i, 1);
      }
    } else {
      blas.sgemm(CblasRowMajor, p.transpose_a ? CblasTrans : CblasNoTrans,
                 p.transpose_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a_i, lda, b_i, ldb, 0.0f,
                 c_i, ldc);
    }
  }
}

void OpenBlasMatMul(const MatMulProblem& p, const float* a, const float* b, float* c) {
  RunSlicedOnPool(OpenBlasMatMulSlice, p, a, b, c);
}

// ---------------------------------------------------------------------------
// The kernels: argument and attribute checks around an implementation.

// The element types of the products' operands: float32, and bfloat16 for
// nn.dense's weight.
enum class Element { kFloat32, kBfloat16 };

const char* ElementName(Element element) {
  return element == Element::kFloat32 ? "float32" : "bfloat16";
}

std::optional<Element> ElementOf(DLDataType type) {
  if (type.lanes != 1) return std::nullopt;
  if (type.code == kDLFloat && type.bits == 32) return Element::kFloat32;
  if (type.code == kDLBfloat && type.bits == 16) return Element::kBfloat16;
  return std::nullopt;
}

// `type` as a message names it; DLPack's code and bits for a type that
// nimble has no DataType for.
std::string DTypeName(DLDataType type) {
  if (const std::optional<Element> element = ElementOf(type)) return ElementName(*element);
  try {
    return FromDLDataType(type).name();
  } catch (const Error&) {
    return "DLPack type code " + std::to_string(type.code) + ", " + std::to_string(type.bits) +
           " bits, " + std::to_string(type.lanes) + " lanes";
  }
}

// A tensor on the CPU, dense row-major, of one of the products' element types.
struct MatrixArg {
  void* data;
  std::span<const int64_t> shape;
  Element element;

  template <typename T>
  T* As() const {
    return static_cast<T*>(data);
  }
};

std::string ShapeOf(const MatrixArg& arg) {
  return ShapeToString(arg.shape);
}

// `accepted`: the element types the argument may have.
MatrixArg CheckArg(const DLTensor* tensor, const std::string& op, const char* role,
                   std::initializer_list<Element> accepted = {Element::kFloat32}) {
  if (tensor == nullptr) throw Error(op + ": " + role + " is null");
  const std::span<const int64_t> shape(tensor->shape, tensor->ndim);
  for (const int64_t dim : shape) {
    if (dim < 0)
      throw Error(op + ": " + role + " has a negative dimension: " + ShapeToString(shape));
  }
  const std::optional<Element> element = ElementOf(tensor->dtype);
  if (!element || std::find(accepted.begin(), accepted.end(), *element) == accepted.end()) {
    std::string names;
    for (const Element name : accepted) {
      names += (names.empty() ? "" : " or ") + std::string(ElementName(name));
    }
    throw Error(op + ": " + role + " must be " + names + ", got " + DTypeName(tensor->dtype));
  }
  if (tensor->device.device_type != kDLCPU) {
    throw Error(op + ": " + role + " must be on the CPU, got device type " +
                std::to_string(tensor->device.device_type));
  }
  if (tensor->strides != nullptr) {
    int64_t expected = 1;
    for (int32_t axis = tensor->ndim - 1; axis >= 0; --axis) {
      if (shape[axis] != 1 && tensor->strides[axis] != expected) {
        throw Error(op + ": " + role + " of shape " + ShapeToString(shape) +
                    " is not dense row-major");
      }
      expected *= shape[axis];
    }
  }
  return {static_cast<char*>(tensor->data) + tensor->byte_offset, shape, *element};
}

void CheckArgCount(const std::string& op, int32_t num_args, int32_t num_inputs = 2) {
  if (num_args != num_inputs + 1) {
    throw Error(op + ": expects " + std::to_string(num_inputs + 1) + " arguments (" +
                std::to_string(num_inputs) + " inputs and the output), got " +
                std::to_string(num_args));
  }
}

// `inputs` describes the inputs, for the message.
template <typename Describe>
void CheckOutShape(const std::string& op, const MatrixArg& out, const Shape& expected,
                   const Describe& inputs) {
  if (!std::equal(out.shape.begin(), out.shape.end(), expected.begin(), expected.end())) {
    throw Error(op + ": out has shape " + ShapeOf(out) + " but " + inputs() + " give " +
                ShapeToString(expected));
  }
}

// `count` values rounded to bfloat16 (nn.dense's data, for a bfloat16 weight),
// in a buffer of this thread's that its next call overwrites: kept from call
// to call, as PackedMatMul's panels are.
const Bf16Bits* RoundedToBf16(const float* values, int64_t count) {
  thread_local std::vector<Bf16Bits> rounded;
  if (rounded.size() < static_cast<size_t>(count)) rounded.resize(static_cast<size_t>(count));
  RoundToBf16(values, count, rounded.data());
  return rounded.data();
}

// Runs `impl`, handling the sizes it never sees: empty results, and k = 0
// (a sum of nothing).
template <typename T>
void RunMatMul(MatMulImplOf<T> impl, const MatMulProblem& p, const T* a, const T* b, float* c) {
  if (p.batch() == 0 || p.m == 0 || p.n == 0) return;
  if (p.k == 0) {
    std::fill_n(c, p.batch() * p.m * p.n, 0.0f);
    return;
  }
  impl(p, a, b, c);
}

// The C ABI around `body`: exceptions become the kernel's error message.
template <typename Body>
int Guarded(const Body& body) {
  try {
    body();
    return 0;
  } catch (const std::exception& error) {
    NimbleKernelSetError(error.what());
  } catch (...) {
    NimbleKernelSetError("unknown exception");
  }
  return 1;
}

struct DenseState {
  MatMulImpl impl;
  // For a bfloat16 weight; null where the implementation has none (OpenBLAS).
  MatMulImplOf<Bf16Bits> bf16_impl;
  std::optional<int64_t> units;
};

// The arguments of nn.dense or nn.contrib_dense_pack, checked: float32 data
// of rank >= 1, the weight of one of `weight_elements` as `weight_dims` reads
// it (returning its reduction and unit counts, or throwing), and float32 out
// of data's leading shape by the units.
struct DenseCall {
  MatrixArg data, weight, out;
  int64_t m, k, units;
};

template <typename WeightDims>
// The output is the argument after the `num_inputs` inputs.
DenseCall CheckDenseCall(const std::string& op, DLTensor* const* args, int32_t num_args,
                         std::initializer_list<Element> weight_elements,
                         const WeightDims& weight_dims, int32_t num_inputs = 2) {
  CheckArgCount(op, num_args, num_inputs);
  DenseCall call{CheckArg(args[0], op, "data"),
                 CheckArg(args[1], op, "weight", weight_elements),
                 CheckArg(args[num_inputs], op, "out"),
                 0,
                 0,
                 0};
  const auto inputs = [&] {
    return "data " + ShapeOf(call.data) + " and weight " + ShapeOf(call.weight);
  };
  if (call.data.shape.empty()) throw Error(op + ": data must have rank >= 1, got shape ()");
  const auto [weight_k, units] = weight_dims(call.weight);
  call.k = call.data.shape.back();
  if (weight_k != call.k) {
    throw Error(op + ": " + inputs() + " disagree on the reduction dimension (" +
                std::to_string(call.k) + " vs " + std::to_string(weight_k) + ")");
  }
  call.units = units;
  Shape expected(call.data.shape.begin(), call.data.shape.end() - 1);
  expected.push_back(units);
  CheckOutShape(op, call.out, expected, inputs);
  call.m = ShapeNumel(call.data.shape.first(call.data.shape.size() - 1));
  return call;
}

int DenseKernel(void* state, DLTensor* const* args, int32_t num_args) {
  return Guarded([&] {
    const std::string op = "nn.dense";
    const auto& dense = *static_cast<const DenseState*>(state);
    const DenseCall call = CheckDenseCall(
        op, args, num_args, {Element::kFloat32, Element::kBfloat16}, [&](const MatrixArg& weight) {
          if (weight.shape.size() != 2) {
            throw Error(op + ": weight must be 2-D, got " + ShapeOf(weight));
          }
          if (dense.units && *dense.units != weight.shape[0]) {
            throw Error(op + ": units=" + std::to_string(*dense.units) + " but weight has shape " +
                        ShapeOf(weight));
          }
          return std::pair(weight.shape[1], weight.shape[0]);
        });
    const MatMulProblem problem{.m = call.m, .n = call.units, .k = call.k};
    const float* data = call.data.As<const float>();
    float* out = call.out.As<float>();
    if (call.weight.element == Element::kFloat32) {
      RunMatMul(dense.impl, problem, data, call.weight.As<const float>(), out);
      return;
    }
    // The weight's dtype comes with the call: binding cannot refuse it.
    if (!dense.bf16_impl) {
      throw Error(op + ": OpenBLAS has no bfloat16 product in this build; nn.dense and " +
                  "nn.dense.dnnl take a bfloat16 weight");
    }
    RequireBf16Products(op + " with a bfloat16 weight");
    RunMatMul(dense.bf16_impl, problem, RoundedToBf16(data, call.m * call.k),
              call.weight.As<const Bf16Bits>(), out);
  });
}

// The packed kernel's activation (attribute `activation`), applied to each
// element of the product: its state, null for none.
struct PackedDenseActivation {
  bool gelu = false;
};

// Arguments: data, weight, optionally bias [units], then out.
int PackedDenseKernel(void* state, DLTensor* const* args, int32_t num_args) {
  const bool gelu = state && static_cast<const PackedDenseActivation*>(state)->gelu;
  return Guarded([&] {
    const std::string op = "nn.contrib_dense_pack";
    if (num_args != 3 && num_args != 4) {
      throw Error(op + ": expects 3 or 4 arguments (data, weight, an optional bias, and the " +
                  "output), got " + std::to_string(num_args));
    }
    const int32_t num_inputs = num_args - 1;
    const DenseCall call = CheckDenseCall(
        op, args, num_args, {Element::kFloat32},
        [&](const MatrixArg& weight) {
          if (weight.shape.size() != 3 || weight.shape[2] != kPackedBlock) {
            throw Error(op + ": weight must be packed as [units / 16, k, 16], got " +
                        ShapeOf(weight));
          }
          return std::pair(weight.shape[1], weight.shape[0] * kPackedBlock);
        },
        num_inputs);
    const float* bias = nullptr;
    if (num_inputs == 3) {
      const MatrixArg arg = CheckArg(args[2], op, "bias");
      if (arg.shape.size() != 1 || arg.shape[0] != call.units) {
        throw Error(op + ": bias must have shape " + ShapeToString(Shape{call.units}) + ", got " +
                    ShapeOf(arg));
      }
      bias = arg.As<const float>();
    }
    if (call.m == 0 || call.units == 0) return;
    if (call.k == 0) {
      for (int64_t row = 0; row < call.m; ++row) {
        float* out = call.out.As<float>() + row * call.units;
        if (bias) {
          std::copy_n(bias, call.units, out);
        } else {
          std::fill_n(out, call.units, 0.0f);
        }
        if (gelu) std::transform(out, out + call.units, out, vector_math::Gelu);
      }
      return;
    }
    PackedMatMul(call.data.As<const float>(), call.weight.As<const float>(), bias,
                 call.out.As<float>(), call.m, call.units, call.k, gelu);
  });
}

struct BatchMatMulState {
  MatMulImpl impl;
  bool transpose_a;
  bool transpose_b;
};

int BatchMatMulKernel(void* state, DLTensor* const* args, int32_t num_args) {
  return Guarded([&] {
    const std::string op = "nn.batch_matmul";
    const auto& batch_matmul = *static_cast<const BatchMatMulState*>(state);
    CheckArgCount(op, num_args);
    const MatrixArg x = CheckArg(args[0], op, "x");
    const MatrixArg y = CheckArg(args[1], op, "y");
    const MatrixArg out = CheckArg(args[2], op, "out");
    if (x.shape.size() != 3) throw Error(op + ": x must be 3-D, got " + ShapeOf(x));
    if (y.shape.size() != 3) throw Error(op + ": y must be 3-D, got " + ShapeOf(y));
    const auto inputs = [&] {
      return "x " + ShapeOf(x) + " and y " + ShapeOf(y) +
             " (transpose_a=" + (batch_matmul.transpose_a ? "True" : "False") +
             ", transpose_b=" + (batch_matmul.transpose_b ? "True" : "False") + ")";
    };
    const MatMulProblem problem{
        .batch_a = x.shape[0],
        .batch_b = y.shape[0],
        .m = batch_matmul.transpose_a ? x.shape[2] : x.shape[1],
        .n = batch_matmul.transpose_b ? y.shape[1] : y.shape[2],
        .k = batch_matmul.transpose_a ? x.shape[1] : x.shape[2],
        .transpose_a = batch_matmul.transpose_a,
        .transpose_b = batch_matmul.transpose_b,
    };
    const int64_t y_k = batch_matmul.transpose_b ? y.shape[2] : y.shape[1];
    if (y_k != problem.k) {
      throw Error(op + ": " + inputs() + " disagree on the reduction dimension (" +
                  std::to_string(problem.k) + " vs " + std::to_string(y_k) + ")");
    }
    if (problem.batch_a != problem.batch_b && problem.batch_a != 1 && problem.batch_b != 1) {
      throw Error(op + ": " + inputs() + " have batch sizes that differ and neither is 1");
    }
    CheckOutShape(op, out, {problem.batch(), problem.m, problem.n}, inputs);
    RunMatMul(batch_matmul.impl, problem, x.As<const float>(), y.As<const float>(),
              out.As<float>());
  });
}

void CheckAttrNames(const std::string& kernel, const Attrs& attrs,
                    std::initializer_list<std::string_view> allowed) {
  for (const auto& [name, value] : attrs.entries()) {
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      throw Error(kernel + ": unknown attribute '" + name + "'");
    }
  }
}

void CheckOutDType(const std::string& kernel, const Attrs& attrs) {
  if (attrs.IsNone("out_dtype")) return;
  const DataType out_dtype = attrs.GetDType("out_dtype");
  if (out_dtype != DataType::Float32()) {
    throw Error(kernel + ": out_dtype " + out_dtype.name() + " is not supported (float32 only)");
  }
}

Kernel BindDense(const std::string& kernel, MatMulImpl impl, MatMulImplOf<Bf16Bits> bf16_impl,
                 const Attrs& attrs) {
  CheckAttrNames(kernel, attrs, {"units", "out_dtype"});
  CheckOutDType(kernel, attrs);
  auto state = std::make_shared<DenseState>(DenseState{impl, bf16_impl, std::nullopt});
  if (!attrs.IsNone("units")) {
    state->units = attrs.GetInt("units");
    if (*state->units < 0) {
      throw Error(kernel + ": units must be non-negative, got " + std::to_string(*state->units));
    }
  }
  return Kernel{kernel, DenseKernel, std::move(state)};
}

Kernel BindBatchMatMul(const std::string& kernel, MatMulImpl impl, const Attrs& attrs) {
  CheckAttrNames(kernel, attrs, {"out_dtype", "transpose_a", "transpose_b"});
  CheckOutDType(kernel, attrs);
  auto flag = [&](const std::string& name, bool default_value) {
    return attrs.IsNone(name) ? default_value : attrs.GetBool(name);
  };
  return Kernel{kernel, BatchMatMulKernel,
                std::make_shared<BatchMatMulState>(
                    BatchMatMulState{impl, flag("transpose_a", false), flag("transpose_b", true)})};
}

}  // namespace

void RegisterDenseKernels(KernelRegistry& registry) {
  // Each with its product for nn.dense's bfloat16 weight, if any.
  std::vector<std::tuple<std::string, MatMulImpl, MatMulImplOf<Bf16Bits>>> implementations = {
      {"", BuiltinMatMul, BuiltinBf16MatMul}, {".openblas", OpenBlasMatMul, nullptr}};
#if defined(NIMBLE_HAVE_DNNL)
  implementations.emplace_back(".dnnl", DnnlMatMul<float>, DnnlMatMul<Bf16Bits>);
#endif
  for (const auto& [suffix, impl, bf16_impl] : implementations) {
    const std::string dense = "nn.dense" + suffix;
    registry.Register(dense, [dense, impl, bf16_impl](const Attrs& attrs) {
      return BindDense(dense, impl, bf16_impl, attrs);
    });
    const std::string batch_matmul = "nn.batch_matmul" + suffix;
    registry.Register(batch_matmul, [batch_matmul, impl](const Attrs& attrs) {
      return BindBatchMatMul(batch_matmul, impl, attrs);
    });
  }
  registry.Register("nn.contrib_dense_pack", [](const Attrs& attrs) {
    const std::string kernel = "nn.contrib_dense_pack";
    CheckAttrNames(kernel, attrs, {"out_dtype", "activation"});
    CheckOutDType(kernel, attrs);
    if (attrs.IsNone("activation")) return Kernel{kernel, PackedDenseKernel, nullptr};
    if (attrs.GetString("activation") != "gelu") {
      throw Error(kernel + ": activation must be None or \"gelu\", got \"" +
                  attrs.GetString("activation") + "\"");
    }
    return Kernel{kernel, PackedDenseKernel, std::make_shared<PackedDenseActivation>(true)};
  });
#if !defined(NIMBLE_HAVE_DNNL)
  // Still registered, so that a program naming them says why it cannot run.
  for (const std::string op : {"nn.dense", "nn.batch_matmul"}) {
    const std::string kernel = op + ".dnnl";
    registry.Register(kernel, [kernel, op](const Attrs&) -> Kernel {
      throw Error(kernel + ": oneDNN is not in this build (libdnnl was not found when it was " +
                  "configured); use " + op + " or " + op + ".openblas");
    });
  }
#endif
}

}  // namespace nimble::vm
