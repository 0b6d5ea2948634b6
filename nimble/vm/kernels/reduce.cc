// The runtime half of the reductions (sum, mean, max, min, prod, all, any,
// argmax, argmin): their shape functions and built-in kernels.
//
// A kernel views its input as [outer, reduced, inner] (row-major) after
// merging adjacent axes that are all reduced or all kept, so the contiguous
// dimension is either a row to fold (inner == 1) or a row of accumulators
// (inner > 1); both loops vectorise. Work is split over outputs, and a long
// reduction into few outputs is also cut into slices of the reduced dim whose
// partial results are combined in a fixed order, so results do not depend on
// the thread count. Reduced axes that do not merge into one run (axis=[0, 2]
// of a rank-3 input) are first gathered into [kept..., reduced...] order.
#include "nimble/vm/kernels/reduce.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nimble/vm/error.h"
#include "nimble/vm/kernels/element.h"
#include "nimble/vm/kernels/op_kernel.h"
#include "nimble/vm/kernels/shape_util.h"
#include "nimble/vm/thread_pool.h"

namespace nimble::vm {

std::vector<bool> ReducedAxes(int64_t ndim, const Attrs& attrs, const std::string& op) {
  std::vector<bool> reduced(ndim, true);
  if (attrs.IsNone("axis") || attrs.GetIntList("axis").empty()) return reduced;
  std::vector<bool> listed(ndim, false);
  for (int64_t axis : attrs.GetIntList("axis")) {
    const int64_t normalized = NormalizeAxis(axis, ndim, op);
    if (listed[normalized]) {
      throw Error(op + ": axis " + std::to_string(axis) +
                  " is listed twice in axis=" + AttrValueToString(attrs.GetIntList("axis")));
    }
    listed[normalized] = true;
  }
  const bool exclude = attrs.GetBool("exclude");
  for (int64_t d = 0; d < ndim; ++d) reduced[d] = listed[d] != exclude;
  return reduced;
}

namespace {

ShapeFunction ReduceShapeFunc(const std::string& op) {
  return [op](std::span<const Shape> input_shapes, TensorArgs, const Attrs& attrs) {
    const Shape& shape = input_shapes[0];
    const std::vector<bool> reduced = ReducedAxes(static_cast<int64_t>(shape.size()), attrs, op);
    return std::vector<Shape>{ReducedShape(shape, reduced, attrs.GetBool("keepdims"))};
  };
}

// ---------------------------------------------------------------------------
// Reducers: Identity, Combine (associative and commutative) and Finalize
// (from the combined value and the element count to the result), over an
// accumulator type chosen per input type. kNeedsElement reducers fail on an
// empty reduction.

// Sums and products of integers accumulate in int64, wrapping modulo 2^64 and
// narrowed at the end (as a wrapping accumulator of the input type would be,
// except for mean's division); of floats in double (blocks of float32 or
// float16 are first folded in float, see BlockAccumulator), so that float32
// results lose nothing to long reductions and barely depend on the order of
// lanes and slices.
template <typename T>
using ArithmeticAccumulator = std::conditional_t<std::is_integral_v<T>, int64_t, double>;

template <typename A>
A Lowest() {
  if constexpr (std::numeric_limits<A>::has_infinity) {
    return -std::numeric_limits<A>::infinity();
  } else {
    return std::numeric_limits<A>::lowest();
  }
}
template <typename A>
A Highest() {
  if constexpr (std::numeric_limits<A>::has_infinity) {
    return std::numeric_limits<A>::infinity();
  } else {
    return std::numeric_limits<A>::max();
  }
}

struct SumReducer {
  static constexpr DTypeClass kAccepts = DTypeClass::kNumeric;
  static constexpr bool kNeedsElement = false;
  template <typename T>
  using Accumulator = ArithmeticAccumulator<T>;
  template <typename A>
  static A Identity() {
    return A(0);
  }
  template <typename A>
  static A Combine(A acc, A x) {
    return Wrapping(std::plus<>(), acc, x);
  }
  template <typename A>
  static A Finalize(A acc, int64_t) {
    return acc;
  }
};

// Integer division for integers, as Relay's mean.
struct MeanReducer : SumReducer {
  static constexpr bool kNeedsElement = true;
  template <typename A>
  static A Finalize(A acc, int64_t count) {
    return acc / static_cast<A>(count);
  }
};

struct ProdReducer : SumReducer {
  template <typename A>
  static A Identity() {
    return A(1);
  }
  template <typename A>
  static A Combine(A acc, A x) {
    return Wrapping(std::multiplies<>(), acc, x);
  }
};

// max and min are exact in the element's compute type. A NaN never replaces
// the accumulator, so it is skipped.
struct MaxReducer : SumReducer {
  static constexpr bool kNeedsElement = true;
  template <typename T>
  using Accumulator = ComputeType<T>;
  template <typename A>
  static A Identity() {
    return Lowest<A>();
  }
  template <typename A>
  static A Combine(A acc, A x) {
    return x > acc ? x : acc;
  }
};

struct MinReducer : MaxReducer {
  template <typename A>
  static A Identity() {
    return Highest<A>();
  }
  template <typename A>
  static A Combine(A acc, A x) {
    return x < acc ? x : acc;
  }
};

struct AllReducer : SumReducer {
  static constexpr DTypeClass kAccepts = DTypeClass::kBool;
  template <typename T>
  using Accumulator = bool;
  template <typename A>
  static A Identity() {
    return true;
  }
  template <typename A>
  static A Combine(A acc, A x) {
    return acc && x;
  }
};

struct AnyReducer : AllReducer {
  template <typename A>
  static A Identity() {
    return false;
  }
  template <typename A>
  static A Combine(A acc, A x) {
    return acc || x;
  }
};

// ---------------------------------------------------------------------------
// The [outer, reduced, inner] view

// Elements of work worth handing to a thread.
constexpr int64_t kGrain = 32768;
// Columns of the inner dim accumulated together; their accumulators stay in L1.
constexpr int64_t kColumnBlock = 1024;
// Below this many (output, column block) units, long reductions are sliced.
constexpr int64_t kMinUnits = 32;
constexpr int64_t kMaxSlices = 16;
// Independent accumulators of a contiguous row: they let the loop vectorise
// without reassociating floating-point operations.
constexpr int64_t kLanes = 16;
// Elements of a row, and rows of a column block, folded in BlockAccumulator.
constexpr int64_t kRowBlock = 1024;
constexpr int64_t kColumnRows = 64;

int64_t CeilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

struct ReduceView {
  int64_t outer = 1;
  int64_t reduced = 1;
  int64_t inner = 1;
};

// The input's axes with size-1 axes dropped and adjacent axes that are all
// reduced or all kept merged into one.
struct MergedAxes {
  std::vector<int64_t> sizes;
  std::vector<bool> reduced;
};

MergedAxes MergeAxes(std::span<const int64_t> shape, const std::vector<bool>& reduced) {
  MergedAxes merged;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!merged.sizes.empty() && merged.reduced.back() == reduced[d]) {
      merged.sizes.back() *= shape[d];
    } else {
      merged.sizes.push_back(shape[d]);
      merged.reduced.push_back(reduced[d]);
    }
  }
  return merged;
}

// Copies the input into [kept axes..., reduced axes...] order, so that each
// output's elements form one contiguous row in row-major order of the reduced
// axes (the order argmax's index counts in).
template <typename T>
std::unique_ptr<T[]> GatherReducedLast(const T* in, const MergedAxes& axes) {
  const size_t rank = axes.sizes.size();
  std::vector<int64_t> in_strides(rank);
  int64_t numel = 1;
  for (size_t d = rank; d-- > 0;) {
    in_strides[d] = numel;
    numel *= axes.sizes[d];
  }
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  for (bool reduced : {false, true}) {
    for (size_t d = 0; d < rank; ++d) {
      if (axes.reduced[d] != reduced) continue;
      sizes.push_back(axes.sizes[d]);
      strides.push_back(in_strides[d]);
    }
  }
  const int64_t row = sizes.back();
  const int64_t row_stride = strides.back();
  std::unique_ptr<T[]> out(new T[numel]);
  ParallelFor(0, numel / row, std::max<int64_t>(1, kGrain / row), [&](int64_t begin, int64_t end) {
    // The multi-index over the leading (rank - 1) axes of row `begin`.
    std::vector<int64_t> index(rank - 1);
    int64_t src = 0;
    for (int64_t rest = begin, d = static_cast<int64_t>(rank) - 2; d >= 0; --d) {
      index[d] = rest % sizes[d];
      rest /= sizes[d];
      src += index[d] * strides[d];
    }
    for (int64_t r = begin; r < end; ++r) {
      T* dst = out.get() + r * row;
      if (row_stride == 1) {
        std::copy_n(in + src, row, dst);
      } else {
        for (int64_t j = 0; j < row; ++j) dst[j] = in[src + j * row_stride];
      }
      for (size_t d = rank - 1; d-- > 0;) {
        src += strides[d];
        if (++index[d] < sizes[d]) break;
        src -= strides[d] * sizes[d];
        index[d] = 0;
      }
    }
  });
  return out;
}

// Calls fn(data, view) with the input (count > 0 elements per output, at
// least one output) as [outer, reduced, inner], gathered first when the
// reduced axes do not form one run.
template <typename T, typename Fn>
void WithReduceView(const DLTensor& input, const std::vector<bool>& reduced, int64_t out_numel,
                    int64_t count, const Fn& fn) {
  const T* data = DataOf<const T>(input);
  const MergedAxes axes = MergeAxes(ShapeOf(input), reduced);
  // Merged axes alternate, so each reduced one is a separate run.
  const bool gather = std::count(axes.reduced.begin(), axes.reduced.end(), true) > 1;
  if (gather) {
    const std::unique_ptr<T[]> gathered = GatherReducedLast(data, axes);
    fn(static_cast<const T*>(gathered.get()), ReduceView{out_numel, count, 1});
    return;
  }
  ReduceView view;
  bool seen_reduced = false;
  for (size_t d = 0; d < axes.sizes.size(); ++d) {
    seen_reduced = seen_reduced || axes.reduced[d];
    (axes.reduced[d] ? view.reduced : seen_reduced ? view.inner : view.outer) *= axes.sizes[d];
  }
  fn(data, view);
}

// Floats accumulated in double (A) are first folded in float over short
// blocks (F), which vectorises twice as wide; a block's rounding error stays
// far below float32's over the whole reduction.
template <typename A, typename T>
using BlockAccumulator =
    std::conditional_t<std::is_same_v<A, double> && std::is_same_v<ComputeType<T>, float>, float,
                       A>;

// Folds a contiguous row into one value: kLanes independent accumulators per
// block, combined as a tree.
template <typename Reducer, typename A, typename T>
A ReduceRow(const T* row, int64_t n) {
  using F = BlockAccumulator<A, T>;
  A acc = Reducer::template Identity<A>();
  for (int64_t begin = 0; begin < n; begin += kRowBlock) {
    const int64_t end = std::min(n, begin + kRowBlock);
    F lanes[kLanes];
    for (F& lane : lanes) lane = Reducer::template Identity<F>();
    int64_t i = begin;
    for (; i + kLanes <= end; i += kLanes) {
      for (int64_t lane = 0; lane < kLanes; ++lane) {
        lanes[lane] = Reducer::Combine(lanes[lane], static_cast<F>(LoadElement(row[i + lane])));
      }
    }
    for (; i < end; ++i) lanes[0] = Reducer::Combine(lanes[0], static_cast<F>(LoadElement(row[i])));
    for (int64_t half = kLanes / 2; half > 0; half /= 2) {
      for (int64_t lane = 0; lane < half; ++lane) {
        lanes[lane] = Reducer::Combine(lanes[lane], lanes[lane + half]);
      }
    }
    acc = Reducer::Combine(acc, static_cast<A>(lanes[0]));
  }
  return acc;
}

// acc[j] = the fold of rows [r_begin, r_end) of a [reduced, inner] block at
// column `col` + j, for j < width. Rows are folded four at a time so each
// accumulator is loaded and stored once per four rows.
template <typename Reducer, typename A, typename T>
void FoldRows(const T* block, int64_t inner, int64_t r_begin, int64_t r_end, int64_t col,
              int64_t width, A* acc) {
  using F = BlockAccumulator<A, T>;
  if (inner == 1) {
    acc[0] = ReduceRow<Reducer, A>(block + r_begin, r_end - r_begin);
    return;
  }
  const auto load = [](T x) { return static_cast<F>(LoadElement(x)); };
  for (int64_t j = 0; j < width; ++j) acc[j] = Reducer::template Identity<A>();
  F part[kColumnBlock];
  for (int64_t begin = r_begin; begin < r_end; begin += kColumnRows) {
    const int64_t end = std::min(r_end, begin + kColumnRows);
    for (int64_t j = 0; j < width; ++j) part[j] = Reducer::template Identity<F>();
    int64_t r = begin;
    for (; r + 4 <= end; r += 4) {
      const T* x0 = block + r * inner + col;
      const T* x1 = x0 + inner;
      const T* x2 = x1 + inner;
      const T* x3 = x2 + inner;
      for (int64_t j = 0; j < width; ++j) {
        part[j] = Reducer::Combine(
            Reducer::Combine(Reducer::Combine(Reducer::Combine(part[j], load(x0[j])), load(x1[j])),
                             load(x2[j])),
            load(x3[j]));
      }
    }
    for (; r < end; ++r) {
      const T* x = block + r * inner + col;
      for (int64_t j = 0; j < width; ++j) part[j] = Reducer::Combine(part[j], load(x[j]));
    }
    for (int64_t j = 0; j < width; ++j) acc[j] = Reducer::Combine(acc[j], static_cast<A>(part[j]));
  }
}

// How a view's work is split: units of (outer index, block of up to `width`
// inner columns), each reduced in `slices` slices of `slice_rows` rows.
struct ReducePartition {
  int64_t width;
  int64_t blocks;
  int64_t units;
  int64_t slices;
  int64_t slice_rows;
};

ReducePartition Partition(const ReduceView& view) {
  ReducePartition p;
  p.width = std::min(view.inner, kColumnBlock);
  p.blocks = CeilDiv(view.inner, p.width);
  p.units = view.outer * p.blocks;
  p.slices = p.units >= kMinUnits
                 ? 1
                 : std::clamp<int64_t>(view.reduced * p.width / kGrain, 1, kMaxSlices);
  p.slice_rows = CeilDiv(view.reduced, p.slices);
  p.slices = CeilDiv(view.reduced, p.slice_rows);
  return p;
}

// Calls sink(output index, folded value) once for each output of the view.
template <typename Reducer, typename A, typename T, typename Sink>
void FoldView(const T* data, const ReduceView& view, const Sink& sink) {
  const ReducePartition p = Partition(view);
  // Not std::vector: vector<bool> (all, any) has no addressable elements.
  std::unique_ptr<A[]> partials(p.slices > 1 ? new A[p.units * p.slices * p.width] : nullptr);
  const int64_t grain = std::max<int64_t>(1, kGrain / (p.slice_rows * p.width));
  ParallelFor(0, p.units * p.slices, grain, [&](int64_t begin, int64_t end) {
    A acc[kColumnBlock];
    // Item = (outer, column block, slice), slice fastest; counted, not divided.
    int64_t slice = begin % p.slices;
    int64_t block = begin / p.slices % p.blocks;
    int64_t outer = begin / p.slices / p.blocks;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t col = block * p.width;
      const int64_t width = std::min(p.width, view.inner - col);
      const int64_t r_begin = slice * p.slice_rows;
      const int64_t r_end = std::min(view.reduced, r_begin + p.slice_rows);
      A* dst = p.slices > 1 ? partials.get() + item * p.width : acc;
      FoldRows<Reducer, A>(data + outer * view.reduced * view.inner, view.inner, r_begin, r_end,
                           col, width, dst);
      if (p.slices == 1) {
        for (int64_t j = 0; j < width; ++j) sink(outer * view.inner + col + j, acc[j]);
      }
      if (++slice < p.slices) continue;
      slice = 0;
      if (++block < p.blocks) continue;
      block = 0;
      ++outer;
    }
  });
  for (int64_t unit = 0; p.slices > 1 && unit < p.units; ++unit) {
    const int64_t outer = unit / p.blocks;
    const int64_t col = unit % p.blocks * p.width;
    const A* first = partials.get() + unit * p.slices * p.width;
    for (int64_t j = 0; j < std::min(p.width, view.inner - col); ++j) {
      A value = first[j];
      for (int64_t s = 1; s < p.slices; ++s)
        value = Reducer::Combine(value, first[s * p.width + j]);
      sink(outer * view.inner + col + j, value);
    }
  }
}

// The first (or, with `last`, the last) r < n with row[r] == target; 0 when
// there is none. Blocks are tested whole, which vectorises, before the one
// that holds a match is searched.
template <typename A, typename T>
int32_t FindInRow(const T* row, int64_t n, A target, bool last) {
  constexpr int64_t kBlock = 16;
  const auto matches = [&](int64_t begin) {
    int32_t count = 0;
    for (int64_t k = 0; k < kBlock; ++k) count += LoadElement(row[begin + k]) == target;
    return count > 0;
  };
  const auto scan = [&](int64_t begin, int64_t end) -> int64_t {
    for (int64_t k = 0; k < end - begin; ++k) {
      const int64_t r = last ? end - 1 - k : begin + k;
      if (LoadElement(row[r]) == target) return r;
    }
    return -1;
  };
  const int64_t full = n / kBlock * kBlock;
  int64_t found = -1;
  if (last) {
    found = scan(full, n);
    for (int64_t b = full; found < 0 && b > 0; b -= kBlock) {
      if (matches(b - kBlock)) found = scan(b - kBlock, b);
    }
  } else {
    for (int64_t b = 0; found < 0 && b < full; b += kBlock) {
      if (matches(b)) found = scan(b, b + kBlock);
    }
    if (found < 0) found = scan(full, n);
  }
  return static_cast<int32_t>(std::max<int64_t>(found, 0));
}

// The reduced index (row) of the first element of a view's output equal to
// its folded value, or the last with `last`; 0 where none is (only NaNs,
// which argmax skips).
template <typename A, typename T>
void FindIndices(const T* data, const ReduceView& view, const A* best, bool last, int32_t* out) {
  const int64_t width = std::min(view.inner, kColumnBlock);
  const int64_t blocks = CeilDiv(view.inner, width);
  const int64_t grain = std::max<int64_t>(1, kGrain / (view.reduced * width));
  ParallelFor(0, view.outer * blocks, grain, [&](int64_t begin, int64_t end) {
    int32_t found[kColumnBlock];
    for (int64_t unit = begin; unit < end; ++unit) {
      const int64_t outer = unit / blocks;
      const int64_t col = unit % blocks * width;
      const int64_t cols = std::min(width, view.inner - col);
      const T* block = data + outer * view.reduced * view.inner + col;
      const A* target = best + outer * view.inner + col;
      int32_t* dst = out + outer * view.inner + col;
      if (view.inner == 1) {
        dst[0] = FindInRow(block, view.reduced, target[0], last);
        continue;
      }
      // Rows of columns: a branch-free update per column, which vectorises.
      std::fill(found, found + cols, -1);
      for (int64_t r = 0; r < view.reduced; ++r) {
        const T* row = block + r * view.inner;
        for (int64_t j = 0; j < cols; ++j) {
          const bool hit = (LoadElement(row[j]) == target[j]) & (last | (found[j] < 0));
          found[j] = hit ? static_cast<int32_t>(r) : found[j];
        }
      }
      for (int64_t j = 0; j < cols; ++j) dst[j] = std::max(found[j], 0);
    }
  });
}

// ---------------------------------------------------------------------------
// Kernels

// The number of input elements folded into each output element.
int64_t ReducedCount(std::span<const int64_t> shape, const std::vector<bool>& reduced) {
  int64_t count = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (reduced[d]) count *= shape[d];
  }
  return count;
}

// Guards a direct kernel call against outputs the shape function would not
// have allocated, and a reduction without identity against empty input.
void CheckOutput(const DLTensor& input, const DLTensor& output, DataType dtype,
                 const std::vector<bool>& reduced, int64_t count, bool needs_element,
                 const std::string& op) {
  const std::span<const int64_t> shape = ShapeOf(input);
  const int64_t out_numel = ShapeNumel(ReducedShape(Shape(shape.begin(), shape.end()), reduced,
                                                    /*keepdims=*/false));
  if (DTypeOf(output) != dtype || NumelOf(output) != out_numel) {
    throw Error(op + ": the output must be " + dtype.name() + " with " + std::to_string(out_numel) +
                " elements, got " + DTypeOf(output).name() + " with " +
                std::to_string(NumelOf(output)));
  }
  if (needs_element && count == 0 && out_numel > 0) {
    throw Error(op + ": cannot reduce an empty axis of shape " +
                ShapeToString(Shape(shape.begin(), shape.end())) +
                " (the reduction has no identity)");
  }
}

template <typename Reducer, typename T>
void ReduceValues(const DLTensor& input, const DLTensor& output, const std::vector<bool>& reduced,
                  const std::string& op) {
  using A = typename Reducer::template Accumulator<T>;
  const int64_t count = ReducedCount(ShapeOf(input), reduced);
  CheckOutput(input, output, DTypeOf(input), reduced, count, Reducer::kNeedsElement, op);
  const int64_t out_numel = NumelOf(output);
  T* out = DataOf<T>(output);
  const auto sink = [out, count](int64_t i, A value) {
    out[i] = ConvertElement<T>(Reducer::Finalize(value, count));
  };
  if (out_numel == 0) return;
  if (count == 0) {
    for (int64_t i = 0; i < out_numel; ++i) sink(i, Reducer::template Identity<A>());
    return;
  }
  WithReduceView<T>(input, reduced, out_numel, count, [&](const T* data, const ReduceView& view) {
    FoldView<Reducer, A>(data, view, sink);
  });
}

// argmax (MaxReducer) and argmin (MinReducer): the folded value of each
// output first, then the index of the element that equals it. Scanning for
// the first (or last) equal element is what a strict (or non-strict)
// comparison in reduced-index order selects, ties included.
template <typename Reducer, typename T>
void ReduceIndices(const DLTensor& input, const DLTensor& output, const std::vector<bool>& reduced,
                   bool select_last_index, const std::string& op) {
  using A = typename Reducer::template Accumulator<T>;
  const int64_t count = ReducedCount(ShapeOf(input), reduced);
  CheckOutput(input, output, DataType::Int32(), reduced, count, true, op);
  if (count > std::numeric_limits<int32_t>::max()) {
    throw Error(op + ": reducing " + std::to_string(count) +
                " elements per output overflows the int32 index");
  }
  const int64_t out_numel = NumelOf(output);
  if (out_numel == 0) return;
  std::unique_ptr<A[]> best(new A[out_numel]);
  WithReduceView<T>(input, reduced, out_numel, count, [&](const T* data, const ReduceView& view) {
    FoldView<Reducer, A>(data, view, [&best](int64_t i, A value) { best[i] = value; });
    FindIndices(data, view, best.get(), select_last_index, DataOf<int32_t>(output));
  });
}

// The kernel of a value (kIndex = false) or index reduction.
template <typename Reducer, bool kIndex>
OpKernelFunc ReduceKernel(const std::string& op) {
  return [op](TensorArgs inputs, TensorArgs outputs, const Attrs& attrs) {
    const DLTensor& input = *inputs[0];
    const std::vector<bool> reduced = ReducedAxes(input.ndim, attrs, op);
    DispatchDType(DTypeOf(input), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!ElementInClass<T>(Reducer::kAccepts)) {
        ThrowUnsupportedDType(DTypeOf(input));
      } else if constexpr (kIndex) {
        ReduceIndices<Reducer, T>(input, *outputs[0], reduced, attrs.GetBool("select_last_index"),
                                  op);
      } else {
        ReduceValues<Reducer, T>(input, *outputs[0], reduced, op);
      }
    });
  };
}

}  // namespace

void RegisterReduceOpKernels(OpKernelRegistry& registry) {
  const std::vector<std::pair<std::string, OpKernelFunc>> ops = {
      {"sum", ReduceKernel<SumReducer, false>("sum")},
      {"mean", ReduceKernel<MeanReducer, false>("mean")},
      {"max", ReduceKernel<MaxReducer, false>("max")},
      {"min", ReduceKernel<MinReducer, false>("min")},
      {"prod", ReduceKernel<ProdReducer, false>("prod")},
      {"all", ReduceKernel<AllReducer, false>("all")},
      {"any", ReduceKernel<AnyReducer, false>("any")},
      {"argmax", ReduceKernel<MaxReducer, true>("argmax")},
      {"argmin", ReduceKernel<MinReducer, true>("argmin")},
  };
  for (const auto& [name, kernel] : ops) {
    OpKernelDef& def = registry.Register(name);
    def.shape_func = ReduceShapeFunc(name);
    def.kernel = kernel;
  }
}

}  // namespace nimble::vm
