// The runtime half of the operators about shapes and of those whose output
// shape depends on their input values (compiler/op/dynamic.cc): shape_of and
// ndarray_size (data-independent), unique (data-dependent: the shape function
// counts the distinct values) and argwhere (upper-bound: the kernel reports
// how many of the bound's rows it wrote).
#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nimble/vm/error.h"
#include "nimble/vm/kernels/element.h"
#include "nimble/vm/kernels/op_kernel.h"
#include "nimble/vm/thread_pool.h"

namespace nimble::vm {

namespace {

// Elements of a condition per argwhere block: a block is the unit of work a
// thread takes, and large enough that the count pass pays for itself.
constexpr int64_t kArgWhereBlock = int64_t{1} << 15;

// out[i] = values[i] converted to out's dtype (shape_of's and ndarray_size's
// dtype attribute may name any dtype).
void WriteInt64s(const DLTensor& out, std::span<const int64_t> values) {
  if (NumelOf(out) != static_cast<int64_t>(values.size())) {
    throw Error("output of shape " + ShapeToString(ShapeOf(out)) + " for " +
                std::to_string(values.size()) + " values");
  }
  DispatchDType(DTypeOf(out), [&](auto tag) {
    using T = decltype(tag);
    std::transform(values.begin(), values.end(), DataOf<T>(out),
                   [](int64_t value) { return ConvertElement<T>(value); });
  });
}

std::vector<Shape> ShapeOfShapeFunc(std::span<const Shape> input_shapes, TensorArgs, const Attrs&) {
  return {{static_cast<int64_t>(input_shapes[0].size())}};
}

void ShapeOfKernel(TensorArgs inputs, TensorArgs outputs, const Attrs&) {
  WriteInt64s(*outputs[0], ShapeOf(*inputs[0]));
}

std::vector<Shape> ScalarShapeFunc(std::span<const Shape>, TensorArgs, const Attrs&) {
  return {Shape{}};
}

void NdarraySizeKernel(TensorArgs inputs, TensorArgs outputs, const Attrs&) {
  const int64_t numel = NumelOf(*inputs[0]);
  WriteInt64s(*outputs[0], {&numel, 1});
}

// The distinct values of data[0, count) in ascending order; NaNs sort last
// and count as one value (numpy's order).
template <typename T>
std::vector<T> SortedDistinct(const T* data, int64_t count) {
  std::vector<T> distinct;
  if constexpr (sizeof(T) == 1) {
    // bool, int8, uint8: a table of the 256 possible values beats sorting.
    std::array<bool, 256> seen{};
    for (int64_t i = 0; i < count; ++i) seen[static_cast<uint8_t>(data[i])] = true;
    for (int value = std::numeric_limits<T>::min(); value <= std::numeric_limits<T>::max();
         ++value) {
      if (seen[static_cast<uint8_t>(value)]) distinct.push_back(static_cast<T>(value));
    }
  } else {
    // Sorts plain keys (float for float16) with operator<, the NaNs set apart
    // first so that the order is strict.
    using Key = ComputeType<T>;
    std::vector<Key> keys(static_cast<size_t>(count));
    std::transform(data, data + count, keys.begin(), [](T value) { return LoadElement(value); });
    auto numbers_end = keys.end();
    if constexpr (std::is_floating_point_v<Key>) {
      numbers_end = std::partition(keys.begin(), keys.end(), [](Key key) { return key == key; });
    }
    const bool has_nan = numbers_end != keys.end();
    std::sort(keys.begin(), numbers_end);
    keys.erase(std::unique(keys.begin(), numbers_end), keys.end());
    distinct.reserve(keys.size() + has_nan);
    for (Key key : keys) distinct.push_back(ConvertElement<T>(key));
    if constexpr (std::is_floating_point_v<Key>) {
      if (has_nan) distinct.push_back(ConvertElement<T>(std::numeric_limits<Key>::quiet_NaN()));
    }
  }
  return distinct;
}

// Data-dependent: the length is the number of distinct values, so this does
// the kernel's work once more.
std::vector<Shape> UniqueShapeFunc(std::span<const Shape>, TensorArgs input_data, const Attrs&) {
  const DLTensor& data = *input_data[0];
  const int64_t count = DispatchDType(DTypeOf(data), [&](auto tag) {
    using T = decltype(tag);
    return static_cast<int64_t>(SortedDistinct<T>(DataOf<T>(data), NumelOf(data)).size());
  });
  return {{count}};
}

void UniqueKernel(TensorArgs inputs, TensorArgs outputs, const Attrs&) {
  const DLTensor& data = *inputs[0];
  const DLTensor& out = *outputs[0];
  if (DTypeOf(out) != DTypeOf(data)) {
    throw Error("unique: output of dtype " + DTypeOf(out).name() + " for data of dtype " +
                DTypeOf(data).name());
  }
  DispatchDType(DTypeOf(data), [&](auto tag) {
    using T = decltype(tag);
    const std::vector<T> values = SortedDistinct<T>(DataOf<T>(data), NumelOf(data));
    if (static_cast<int64_t>(values.size()) != NumelOf(out)) {
      throw Error("unique: output of shape " + ShapeToString(ShapeOf(out)) + " for " +
                  std::to_string(values.size()) + " distinct values of input shape " +
                  ShapeToString(ShapeOf(data)));
    }
    std::copy(values.begin(), values.end(), DataOf<T>(out));
  });
}

// Upper bound: every element may be non-zero, so (numel, ndim).
std::vector<Shape> ArgWhereShapeFunc(std::span<const Shape> input_shapes, TensorArgs,
                                     const Attrs&) {
  const Shape& shape = input_shapes[0];
  for (int64_t dim : shape) {
    if (dim > std::numeric_limits<int32_t>::max()) {
      throw Error("argwhere: condition of shape " + ShapeToString(shape) +
                  " has a dimension too large for int32 coordinates");
    }
  }
  return {{ShapeNumel(shape), static_cast<int64_t>(shape.size())}};
}

template <typename T>
bool IsNonZero(T value) {
  if constexpr (kIsFloatBits<T>) {
    return (value.bits & 0x7fff) != 0;  // all but the sign bit: -0 is zero, NaN is not
  } else {
    return value != T{};
  }
}

template <typename T>
int64_t CountNonZero(const T* values, int64_t count) {
  int64_t nonzero = 0;
  for (int64_t i = 0; i < count; ++i) nonzero += IsNonZero(values[i]);
  return nonzero;
}

// A bit per element of values[0, width), width <= 64: set for the non-zeros.
// The bits are built without branches, and the caller visits the set ones, so
// a random condition costs no mispredicted branch per element.
template <typename T>
uint64_t NonZeroMask(const T* values, int64_t width) {
  uint64_t mask = 0;
  for (int64_t k = 0; k < width; ++k) mask |= static_cast<uint64_t>(IsNonZero(values[k])) << k;
  return mask;
}

// Writes the coordinates of the non-zero elements among the flat elements
// [begin, end) of `values` (of `shape`, rank >= 1, no size 0) to `rows`, one
// row of shape.size() each, in row-major order; returns their number. The
// scan runs along the last dimension; the other coordinates change once per row.
template <typename T>
int64_t WriteCoordinates(const T* values, std::span<const int64_t> shape, int64_t begin,
                         int64_t end, int32_t* rows) {
  const size_t ndim = shape.size();
  const size_t last = ndim - 1;
  std::vector<int32_t> coordinate(ndim);
  int64_t rest = begin;
  for (size_t d = ndim; d-- > 0;) {
    coordinate[d] = static_cast<int32_t>(rest % shape[d]);
    rest /= shape[d];
  }
  int32_t* row = rows;
  for (int64_t i = begin; i < end;) {
    const int64_t row_begin = i - coordinate[last];
    const int64_t row_end = std::min(end, row_begin + shape[last]);
    for (; i < row_end; i += 64) {
      for (uint64_t mask = NonZeroMask(values + i, std::min<int64_t>(64, row_end - i)); mask != 0;
           mask &= mask - 1) {
        coordinate[last] = static_cast<int32_t>(i + std::countr_zero(mask) - row_begin);
        row = std::copy(coordinate.begin(), coordinate.end(), row);
      }
    }
    i = row_end;
    coordinate[last] = 0;
    for (size_t d = last; d-- > 0;) {
      if (++coordinate[d] < shape[d]) break;
      coordinate[d] = 0;
    }
  }
  return static_cast<int64_t>(row - rows) / static_cast<int64_t>(ndim);
}

// The coordinates of the non-zero elements of `condition`, written to `rows`;
// returns their number. A large condition is cut into blocks: a parallel pass
// counts each block's non-zeros, which gives each block the offset at which a
// second parallel pass writes its rows.
template <typename T>
int64_t ArgWhere(const DLTensor& condition, int32_t* rows) {
  const T* values = DataOf<T>(condition);
  const int64_t numel = NumelOf(condition);
  if (numel == 0) return 0;
  if (condition.ndim == 0) return IsNonZero(values[0]) ? 1 : 0;
  const std::span<const int64_t> shape = ShapeOf(condition);
  const int64_t num_blocks = (numel + kArgWhereBlock - 1) / kArgWhereBlock;
  if (num_blocks == 1) return WriteCoordinates(values, shape, 0, numel, rows);
  // offsets[b] = the number of non-zeros before block b.
  std::vector<int64_t> offsets(num_blocks + 1, 0);
  ParallelFor(0, num_blocks, 1, [&](int64_t first, int64_t stop) {
    for (int64_t b = first; b < stop; ++b) {
      const int64_t begin = b * kArgWhereBlock;
      offsets[b + 1] = CountNonZero(values + begin, std::min(kArgWhereBlock, numel - begin));
    }
  });
  for (int64_t b = 0; b < num_blocks; ++b) offsets[b + 1] += offsets[b];
  ParallelFor(0, num_blocks, 1, [&](int64_t first, int64_t stop) {
    for (int64_t b = first; b < stop; ++b) {
      const int64_t begin = b * kArgWhereBlock;
      WriteCoordinates(values, shape, begin, std::min(numel, begin + kArgWhereBlock),
                       rows + offsets[b] * condition.ndim);
    }
  });
  return offsets[num_blocks];
}

// Outputs: the bound-sized int32 coordinates, then the int64 [2] tensor that
// receives their true shape.
void ArgWhereKernel(TensorArgs inputs, TensorArgs outputs, const Attrs&) {
  const DLTensor& condition = *inputs[0];
  const DLTensor& out = *outputs[0];
  const DLTensor& true_shape = *outputs[1];
  const int64_t ndim = condition.ndim;
  const int64_t numel = NumelOf(condition);
  if (out.ndim != 2 || out.shape[0] < numel || out.shape[1] != ndim) {
    throw Error("argwhere: output of shape " + ShapeToString(ShapeOf(out)) +
                " is smaller than the bound (" + std::to_string(numel) + ", " +
                std::to_string(ndim) + ") for condition of shape " +
                ShapeToString(ShapeOf(condition)));
  }
  if (DTypeOf(out) != DataType::Int32() || DTypeOf(true_shape) != DataType::Int64() ||
      NumelOf(true_shape) != 2) {
    throw Error("argwhere: expected int32 coordinates and an int64 [2] true shape, got " +
                DTypeOf(out).name() + " and " + DTypeOf(true_shape).name() + " of shape " +
                ShapeToString(ShapeOf(true_shape)));
  }
  const int64_t count = DispatchDType(DTypeOf(condition), [&](auto tag) {
    return ArgWhere<decltype(tag)>(condition, DataOf<int32_t>(out));
  });
  DataOf<int64_t>(true_shape)[0] = count;
  DataOf<int64_t>(true_shape)[1] = ndim;
}

void RegisterOp(OpKernelRegistry& registry, const std::string& name, ShapeFunction shape_func,
                OpKernelFunc kernel, ShapeFuncMode mode = ShapeFuncMode::kDataIndependent) {
  OpKernelDef& def = registry.Register(name);
  def.shape_func = std::move(shape_func);
  def.shape_mode = mode;
  def.kernel = std::move(kernel);
}

}  // namespace

void RegisterDynamicOpKernels(OpKernelRegistry& registry) {
  RegisterOp(registry, "shape_of", ShapeOfShapeFunc, ShapeOfKernel);
  RegisterOp(registry, "ndarray_size", ScalarShapeFunc, NdarraySizeKernel);
  RegisterOp(registry, "unique", UniqueShapeFunc, UniqueKernel, ShapeFuncMode::kDataDependent);
  RegisterOp(registry, "argwhere", ArgWhereShapeFunc, ArgWhereKernel, ShapeFuncMode::kUpperBound);
}

}  // namespace nimble::vm
