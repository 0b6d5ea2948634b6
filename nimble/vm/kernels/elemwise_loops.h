// The runtime's fast elementwise loops over DLTensor arguments (dense,
// row-major, CPU), for any kernel that applies a scalar function to every
// element of one tensor or of several broadcast tensors:
//
//   UnaryLoop<In, Out>(input, output, fn)         out[i] = fn(in[i])
//   BroadcastLoop<Out, In...>(output, {in...}, fn) numpy-broadcast n-ary map
//
// `fn` is a functor over the compute type (element.h: float for float16), a
// template argument, so it inlines: no per-element indirect call, and the
// contiguous row loops vectorise (float32 unary maps for the CPU's widest
// vector instructions, vector_math.h). Values are read with LoadElement and stored
// with ConvertElement, so In and Out may differ (cast).
//
// Work is split over the process's thread pool (thread_pool.h) in chunks of
// at least kElemwiseGrain output elements; smaller outputs run inline and pay
// nothing for threading. Exceptions `fn` throws reach the caller.
//
// Callers check dtypes; the loops trust In/Out. BroadcastLoop's inputs must
// broadcast to the output's shape (CheckBroadcastsTo), which keeps every read
// in bounds.
#pragma once

#include <dlpack/dlpack.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "nimble/vm/error.h"
#include "nimble/vm/kernels/element.h"
#include "nimble/vm/kernels/op_kernel.h"
#include "nimble/vm/kernels/vector_math.h"
#include "nimble/vm/shape.h"
#include "nimble/vm/thread_pool.h"

namespace nimble::vm {

// Output elements per parallel chunk: enough work that a thread's share
// outweighs handing it over.
inline constexpr int64_t kElemwiseGrain = int64_t{1} << 15;

// Runs fn(begin, end) over [0, n): on the thread pool when n is at least two
// grains, else inline.
template <typename Fn>
void ParallelChunks(int64_t n, const Fn& fn) {
  if (n >= 2 * kElemwiseGrain) {
    ParallelFor(0, n, kElemwiseGrain, fn);
  } else if (n > 0) {
    fn(0, n);
  }
}

// Throws unless `input` broadcasts to `output`'s shape under numpy rules
// (aligned on the right, each dimension equal or 1); `what` names the input.
inline void CheckBroadcastsTo(const DLTensor& input, const DLTensor& output, const char* what) {
  bool fits = input.ndim <= output.ndim;
  for (int32_t d = 0; fits && d < input.ndim; ++d) {
    const int64_t size = input.shape[d];
    fits = size == 1 || size == output.shape[output.ndim - input.ndim + d];
  }
  if (!fits) {
    throw Error(std::string(what) + " of shape " + ShapeToString(ShapeOf(input)) +
                " does not broadcast to the output's shape " + ShapeToString(ShapeOf(output)));
  }
}

// float32 to float32 runs in vector_math::MapFloat32's loop, compiled for the
// CPU's widest vector instructions: the transcendental ops are compute-bound.
template <typename In, typename Out, typename Fn>
void UnaryLoop(const DLTensor& input, const DLTensor& output, const Fn& fn) {
  const In* in = DataOf<const In>(input);
  Out* out = DataOf<Out>(output);
  ParallelChunks(NumelOf(output), [&](int64_t begin, int64_t end) {
    if constexpr (std::is_same_v<In, float> && std::is_same_v<Out, float>) {
      vector_math::MapFloat32(in + begin, out + begin, end - begin, fn);
    } else {
      for (int64_t i = begin; i < end; ++i) out[i] = ConvertElement<Out>(fn(LoadElement(in[i])));
    }
  });
}

namespace elemwise_detail {

// How one input is read along a row of the output: every element (stride 1)
// or one broadcast element (stride 0), loaded once.
template <typename T>
struct ContiguousReader {
  const T* data;
  ComputeType<T> operator()(int64_t i) const { return LoadElement(data[i]); }
};
template <typename T>
struct BroadcastReader {
  ComputeType<T> value;
  ComputeType<T> operator()(int64_t) const { return value; }
};

template <typename T>
struct RowInput {
  const T* data;  // the row's first element
  bool broadcast;
};

template <typename Out, typename Fn, typename... Readers>
void RowLoop(Out* out, int64_t n, const Fn& fn, const std::tuple<Readers...>& readers) {
  std::apply(
      [&](const Readers&... read) {
        for (int64_t i = 0; i < n; ++i) out[i] = ConvertElement<Out>(fn(read(i)...));
      },
      readers);
}

// Picks a reader for each input in turn, so that every pattern of broadcast
// inputs gets its own loop with the broadcast values hoisted out of it.
template <typename Out, typename Fn, typename... Readers, typename T, typename... Rest>
void RowLoop(Out* out, int64_t n, const Fn& fn, const std::tuple<Readers...>& readers,
             RowInput<T> next, Rest... rest) {
  if (next.broadcast) {
    RowLoop(out, n, fn,
            std::tuple_cat(readers, std::tuple(BroadcastReader<T>{LoadElement(*next.data)})),
            rest...);
  } else {
    RowLoop(out, n, fn, std::tuple_cat(readers, std::tuple(ContiguousReader<T>{next.data})),
            rest...);
  }
}

// The broadcast iteration space: output dims with, per input, the element
// stride of each dim (0 where the input is broadcast). Size-1 dims are dropped
// and adjacent dims that are contiguous in every input are merged, so equal
// shapes or scalar operands become a single row. The innermost dim's strides
// are then 0 or 1. DLTensor ranks are small; kMaxRank bounds them so that the
// space needs no heap allocation.

template <size_t N>
struct BroadcastSpace {
  int32_t rank = 0;
  std::array<int64_t, kMaxRank> dims;
  std::array<std::array<int64_t, N>, kMaxRank> strides;
};

template <size_t N>
BroadcastSpace<N> MakeBroadcastSpace(const DLTensor& output,
                                     const std::array<const DLTensor*, N>& inputs) {
  if (output.ndim > kMaxRank) {
    throw Error("elementwise loops support ranks up to " + std::to_string(kMaxRank) + ", got " +
                std::to_string(output.ndim));
  }
  std::array<std::array<int64_t, N>, kMaxRank> full_strides;
  for (size_t k = 0; k < N; ++k) {
    const DLTensor& input = *inputs[k];
    const int32_t offset = output.ndim - input.ndim;
    int64_t stride = 1;
    for (int32_t d = output.ndim; d-- > 0;) {
      const int64_t size = d < offset ? 1 : input.shape[d - offset];
      full_strides[d][k] = size == 1 ? 0 : stride;
      stride *= size;
    }
  }
  BroadcastSpace<N> space;
  for (int32_t d = 0; d < output.ndim; ++d) {
    const int64_t size = output.shape[d];
    if (size == 1) continue;
    bool mergeable = space.rank > 0;
    for (size_t k = 0; mergeable && k < N; ++k) {
      mergeable = space.strides[space.rank - 1][k] == full_strides[d][k] * size;
    }
    if (mergeable) {
      space.dims[space.rank - 1] *= size;
      space.strides[space.rank - 1] = full_strides[d];
    } else {
      space.dims[space.rank] = size;
      space.strides[space.rank] = full_strides[d];
      ++space.rank;
    }
  }
  return space;
}

}  // namespace elemwise_detail

// out = fn(inputs...) elementwise, the inputs broadcast to the output's shape.
// `In...` are the inputs' element types:
// BroadcastLoop<bool, float, float>(out, {&a, &b}, fn).
template <typename Out, typename... In, typename Fn>
void BroadcastLoop(const DLTensor& output, const std::array<const DLTensor*, sizeof...(In)>& inputs,
                   const Fn& fn) {
  using namespace elemwise_detail;
  constexpr size_t N = sizeof...(In);
  const int64_t total = NumelOf(output);
  if (total == 0) return;
  const BroadcastSpace<N> space = MakeBroadcastSpace(output, inputs);
  Out* out = DataOf<Out>(output);
  const std::tuple<const In*...> bases = [&]<size_t... K>(std::index_sequence<K...>) {
    return std::tuple<const In*...>{DataOf<const In>(*inputs[K])...};
  }
  (std::index_sequence_for<In...>());

  // The innermost dim is a row; an odometer over the outer dims gives each
  // input's offset. A chunk may start and end inside a row.
  const int32_t outer_rank = space.rank == 0 ? 0 : space.rank - 1;
  const int64_t row = space.rank == 0 ? 1 : space.dims[outer_rank];
  const std::array<int64_t, N> row_strides =
      space.rank == 0 ? std::array<int64_t, N>{} : space.strides[outer_rank];
  ParallelChunks(total, [&](int64_t begin, int64_t end) {
    std::array<int64_t, kMaxRank> index;
    std::array<int64_t, N> offsets{};
    int64_t column = begin % row;
    for (int64_t rest = begin / row, d = outer_rank; d-- > 0;) {
      index[d] = rest % space.dims[d];
      rest /= space.dims[d];
      for (size_t k = 0; k < N; ++k) offsets[k] += index[d] * space.strides[d][k];
    }
    for (int64_t position = begin; position < end;) {
      const int64_t length = std::min(row - column, end - position);
      [&]<size_t... K>(std::index_sequence<K...>) {
        RowLoop(out + position, length, fn, std::tuple<>(),
                RowInput<In>{std::get<K>(bases) + offsets[K] + column * row_strides[K],
                             row_strides[K] == 0}...);
      }
      (std::index_sequence_for<In...>());
      position += length;
      column = 0;
      for (int32_t d = outer_rank; d-- > 0;) {
        for (size_t k = 0; k < N; ++k) offsets[k] += space.strides[d][k];
        if (++index[d] < space.dims[d]) break;
        for (size_t k = 0; k < N; ++k) offsets[k] -= space.strides[d][k] * space.dims[d];
        index[d] = 0;
      }
    }
  });
}

}  // namespace nimble::vm
