// The loops behind the elementwise and broadcast reference kernels. An op
// supplies only its scalar function, written once for every dtype (a generic
// lambda over the *compute type*: float for float16, the element type
// otherwise); these templates load, convert and store the elements. The
// function is a template argument, so it inlines: no std::function or virtual
// call per element, and the contiguous loops vectorise.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "nimble/compiler/op/op.h"
#include "nimble/vm/dtype.h"
#include "nimble/vm/kernels/element.h"
#include "nimble/vm/tensor.h"

namespace nimble::op {

// `base`, after checking that every tensor among the arguments (and the
// output too when `check_output`) has a dtype of `accepted`; the error names
// the argument and its type.
TypeRelation RequireDTypeClass(DTypeClass accepted, TypeRelation base, bool check_output);

// out[i] = fn(in[i]) over two tensors of the same element count.
template <typename In, typename Out, typename Fn>
void UnaryLoop(const Tensor& input, const Tensor& output, const Fn& fn) {
  const In* in = input->data<In>();
  Out* out = output->data<Out>();
  const int64_t n = output->numel();
  for (int64_t i = 0; i < n; ++i) out[i] = ConvertElement<Out>(fn(LoadElement(in[i])));
}

namespace elemwise_detail {

// How one input is read along the innermost output dimension: every element
// (stride 1) or one broadcast element (stride 0).
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
struct StridedInput {
  const T* data;
  int64_t stride;  // 0 or 1
};

template <typename Out, typename Fn, typename... Readers>
void RowLoop(Out* out, int64_t n, const Fn& fn, const std::tuple<Readers...>& readers) {
  std::apply(
      [&](const Readers&... read) {
        for (int64_t i = 0; i < n; ++i) out[i] = ConvertElement<Out>(fn(read(i)...));
      },
      readers);
}

// Picks a reader type for each input in turn, so that every stride pattern
// gets its own loop with the broadcast operands hoisted out of it.
template <typename Out, typename Fn, typename... Readers, typename T, typename... Rest>
void RowLoop(Out* out, int64_t n, const Fn& fn, const std::tuple<Readers...>& readers,
             StridedInput<T> next, Rest... rest) {
  if (next.stride == 0) {
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
// and adjacent dims that are contiguous in every input are merged, so the same
// shape or a scalar operand becomes a single row.
template <size_t N>
struct BroadcastSpace {
  std::vector<int64_t> dims;
  std::vector<std::array<int64_t, N>> strides;
};

template <size_t N>
BroadcastSpace<N> MakeBroadcastSpace(const Shape& out_shape,
                                     const std::array<const Shape*, N>& in_shapes) {
  const size_t rank = out_shape.size();
  std::vector<std::array<int64_t, N>> full_strides(rank);
  for (size_t k = 0; k < N; ++k) {
    const Shape& shape = *in_shapes[k];
    const size_t offset = rank - shape.size();
    int64_t stride = 1;
    for (size_t d = rank; d-- > 0;) {
      const int64_t size = d < offset ? 1 : shape[d - offset];
      full_strides[d][k] = size == 1 ? 0 : stride;
      stride *= size;
    }
  }
  BroadcastSpace<N> space;
  for (size_t d = 0; d < rank; ++d) {
    if (out_shape[d] == 1) continue;
    bool mergeable = !space.dims.empty();
    for (size_t k = 0; mergeable && k < N; ++k) {
      mergeable = space.strides.back()[k] == full_strides[d][k] * out_shape[d];
    }
    if (mergeable) {
      space.dims.back() *= out_shape[d];
      space.strides.back() = full_strides[d];
    } else {
      space.dims.push_back(out_shape[d]);
      space.strides.push_back(full_strides[d]);
    }
  }
  return space;
}

}  // namespace elemwise_detail

// out = fn(inputs...) elementwise, with the inputs broadcast (numpy rules) to
// the output's shape, which the shape function already checked. `In...` are
// the inputs' element types: BroadcastLoop<bool, float, float>(out, {a, b}, fn).
template <typename Out, typename... In, typename Fn>
void BroadcastLoop(const Tensor& output, const std::array<Tensor, sizeof...(In)>& inputs,
                   const Fn& fn) {
  using namespace elemwise_detail;
  constexpr size_t N = sizeof...(In);
  if (output->numel() == 0) return;
  std::array<const Shape*, N> in_shapes;
  for (size_t k = 0; k < N; ++k) in_shapes[k] = &inputs[k]->shape();
  const BroadcastSpace<N> space = MakeBroadcastSpace(output->shape(), in_shapes);
  Out* out = output->data<Out>();
  const std::array<const void*, N> bases = [&]<size_t... K>(std::index_sequence<K...>) {
    return std::array<const void*, N>{inputs[K]->template data<In>()...};
  }
  (std::index_sequence_for<In...>());

  // The innermost dim is one row; an odometer walks the outer dims.
  const size_t rank = space.dims.size();
  const int64_t row = rank == 0 ? 1 : space.dims.back();
  const std::array<int64_t, N> row_strides =
      rank == 0 ? std::array<int64_t, N>{} : space.strides.back();
  std::vector<int64_t> index(rank == 0 ? 0 : rank - 1, 0);
  std::array<int64_t, N> offsets{};
  for (int64_t done = 0, total = output->numel(); done < total; done += row) {
    [&]<size_t... K>(std::index_sequence<K...>) {
      RowLoop(out + done, row, fn, std::tuple<>(),
              StridedInput<In>{static_cast<const In*>(bases[K]) + offsets[K], row_strides[K]}...);
    }
    (std::index_sequence_for<In...>());
    for (size_t d = index.size(); d-- > 0;) {
      for (size_t k = 0; k < N; ++k) offsets[k] += space.strides[d][k];
      if (++index[d] < space.dims[d]) break;
      for (size_t k = 0; k < N; ++k) offsets[k] -= space.strides[d][k] * space.dims[d];
      index[d] = 0;
    }
  }
}

}  // namespace nimble::op
