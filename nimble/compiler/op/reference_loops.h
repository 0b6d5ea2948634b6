// Index helpers for the reference kernels. A reference kernel is the plainest
// correct statement of what an op computes: one output element at a time,
// addressed by its multi-index. It is the oracle the runtime's built-in
// kernels (nimble/vm/kernels) are tested against, so it shares none of their
// loop structure (no row merging, no parallel chunks, no special cases).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "nimble/vm/tensor.h"

namespace nimble::op {

// Calls fn(index) for every multi-index of `shape`, in row-major order.
template <typename Fn>
void ForEachIndex(const Shape& shape, const Fn& fn) {
  const int64_t count = ShapeNumel(shape);
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t done = 0; done < count; ++done) {
    fn(std::span<const int64_t>(index));
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
}

// The row-major flat offset in `shape` of the element that multi-index
// `index` (of an output of rank >= shape's rank) reads under numpy
// broadcasting: dimensions align on the right, and a size-1 dimension always
// reads position 0.
inline int64_t BroadcastOffset(const Shape& shape, std::span<const int64_t> index) {
  const size_t skip = index.size() - shape.size();
  int64_t offset = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    offset = offset * shape[d] + (shape[d] == 1 ? 0 : index[skip + d]);
  }
  return offset;
}

}  // namespace nimble::op
