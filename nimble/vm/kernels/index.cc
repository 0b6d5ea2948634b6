// The runtime half of the indexing family (gather_elements, gather_nd,
// scatter_nd, cumsum, topk): shape functions and built-in kernels.
//
// The shape functions run the family's rules (index_rules.h) on StaticDim,
// as the transform family's do; topk's reads k, so it is data-dependent.
//
// The kernels:
//   - gather_elements, gather_nd and scatter_nd resolve every index first
//     (wrapping negative ones), so an out-of-range index is reported, naming
//     the op, the index, the axis and its size, before anything is written;
//     then they move elements (gathers dispatch on the element size only);
//   - scatter_nd copies data and applies the updates in row-major order of
//     indices (a repeated index with reduction "none": the last one wins);
//   - cumsum walks the axis with one running sum per inner position, so the
//     inner loop is contiguous; integers wrap as numpy's do;
//   - topk partially sorts each lane's positions by (value, position), so
//     equal values keep the lower position first (ONNX's tie-break); NaN
//     counts as larger than every number.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "nimble/vm/error.h"
#include "nimble/vm/kernels/element.h"
#include "nimble/vm/kernels/index_rules.h"
#include "nimble/vm/kernels/op_kernel.h"
#include "nimble/vm/kernels/shape_util.h"

namespace nimble::vm {

namespace {

using transform::StaticDim;
using StaticDims = transform::DimsOf<StaticDim>;

Shape ShapeVector(const DLTensor& tensor) {
  const std::span<const int64_t> shape = ShapeOf(tensor);
  return Shape(shape.begin(), shape.end());
}

int64_t Product(std::span<const int64_t> dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<>());
}

// Row-major element strides of `shape`.
std::vector<int64_t> Strides(std::span<const int64_t> shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

// Every element of an int32 or int64 index tensor, as int64.
std::vector<int64_t> ReadIndices(const DLTensor& indices, const std::string& op) {
  const DataType dtype = DTypeOf(indices);
  const int64_t count = NumelOf(indices);
  std::vector<int64_t> values(static_cast<size_t>(count));
  if (dtype == DataType::Int64()) {
    std::copy_n(DataOf<int64_t>(indices), count, values.begin());
  } else if (dtype == DataType::Int32()) {
    std::copy_n(DataOf<int32_t>(indices), count, values.begin());
  } else {
    throw Error(op + ": indices must be int32 or int64, got " + dtype.name());
  }
  return values;
}

// `index` along `axis` of data, wrapped; the error names the op, the index
// and the axis's size.
int64_t ResolveIndex(int64_t index, size_t axis, const DLTensor& data, const std::string& op) {
  const int64_t extent = data.shape[axis];
  const std::optional<int64_t> row = indexing::WrapIndex(index, extent);
  if (!row) {
    throw Error(op + ": index " + std::to_string(index) + " is out of range for axis " +
                std::to_string(axis) + " of data " + ShapeToString(ShapeVector(data)) +
                ", of size " + std::to_string(extent));
  }
  return *row;
}

// ---------------------------------------------------------------------------
// gather_elements

void GatherElementsKernel(TensorArgs inputs, TensorArgs outputs, const Attrs& attrs) {
  const std::string op = "gather_elements";
  const DLTensor& data = *inputs[0];
  const DLTensor& indices = *inputs[1];
  const DLTensor& out = *outputs[0];
  const size_t rank = static_cast<size_t>(data.ndim);
  const size_t axis = static_cast<size_t>(NormalizeAxis(attrs.GetInt("axis"), data.ndim, op));
  const std::span<const int64_t> index_shape = ShapeOf(indices);
  const std::vector<int64_t> strides = Strides(ShapeOf(data));
  // The source offset of each output element.
  std::vector<int64_t> offsets = ReadIndices(indices, op);
  std::vector<int64_t> position(rank, 0);
  for (int64_t& offset : offsets) {
    int64_t source = 0;
    for (size_t d = 0; d < rank; ++d) {
      source += (d == axis ? ResolveIndex(offset, axis, data, op) : position[d]) * strides[d];
    }
    offset = source;
    for (size_t d = rank; d-- > 0;) {
      if (++position[d] < index_shape[d]) break;
      position[d] = 0;
    }
  }
  DispatchElementSize(DTypeOf(data), [&](auto tag) {
    using T = decltype(tag);
    const T* src = DataOf<T>(data);
    T* dst = DataOf<T>(out);
    for (size_t k = 0; k < offsets.size(); ++k) dst[k] = src[offsets[k]];
  });
}

// ---------------------------------------------------------------------------
// gather_nd and scatter_nd: each row of `depth` indices (the last dim of
// indices) addresses a slice of data past its first `batch_dims` dims.

// The element offset, within its batch, of the slice each row addresses.
std::vector<int64_t> SliceOffsets(const DLTensor& data, const DLTensor& indices, size_t batch_dims,
                                  size_t depth, const std::string& op) {
  const std::vector<int64_t> values = ReadIndices(indices, op);
  const std::vector<int64_t> strides = Strides(ShapeOf(data));
  std::vector<int64_t> offsets(values.size() / std::max<size_t>(depth, 1));
  for (size_t row = 0; row < offsets.size(); ++row) {
    int64_t offset = 0;
    for (size_t j = 0; j < depth; ++j) {
      const size_t axis = batch_dims + j;
      offset += ResolveIndex(values[row * depth + j], axis, data, op) * strides[axis];
    }
    offsets[row] = offset;
  }
  return offsets;
}

void GatherNdKernel(TensorArgs inputs, TensorArgs outputs, const Attrs& attrs) {
  const std::string op = "gather_nd";
  const DLTensor& data = *inputs[0];
  const DLTensor& indices = *inputs[1];
  const DLTensor& out = *outputs[0];
  const std::span<const int64_t> data_shape = ShapeOf(data);
  const std::span<const int64_t> index_shape = ShapeOf(indices);
  const size_t batch_dims = static_cast<size_t>(attrs.GetInt("batch_dims"));
  const size_t depth = static_cast<size_t>(index_shape.back());
  const int64_t batches = Product(data_shape.first(batch_dims));
  const int64_t batch_stride = Product(data_shape.subspan(batch_dims));
  const int64_t slice = Product(data_shape.subspan(batch_dims + depth));
  const std::vector<int64_t> offsets = SliceOffsets(data, indices, batch_dims, depth, op);
  const int64_t rows_per_batch = batches == 0 ? 0 : static_cast<int64_t>(offsets.size()) / batches;
  DispatchElementSize(DTypeOf(data), [&](auto tag) {
    using T = decltype(tag);
    const T* src = DataOf<T>(data);
    T* dst = DataOf<T>(out);
    for (size_t row = 0; row < offsets.size(); ++row) {
      const int64_t batch = static_cast<int64_t>(row) / rows_per_batch;
      std::copy_n(src + batch * batch_stride + offsets[row], slice,
                  dst + static_cast<int64_t>(row) * slice);
    }
  });
}

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

Reduction ParseReduction(const std::string& name) {
  if (name == "none") return Reduction::kNone;
  if (name == "add") return Reduction::kAdd;
  if (name == "mul") return Reduction::kMul;
  if (name == "max") return Reduction::kMax;
  if (name == "min") return Reduction::kMin;
  throw Error(
      "scatter_nd: reduction must be \"none\", \"add\", \"mul\", \"max\" or \"min\", got \"" +
      name + "\"");
}

// `old` combined with `update`; max and min keep `old` unless `update` is
// strictly larger (smaller).
template <typename T>
T Combine(Reduction reduction, T old, T update) {
  if constexpr (std::is_same_v<T, bool>) {
    if (reduction != Reduction::kNone) throw Error("scatter_nd: reductions need numeric data");
    return update;
  } else {
    using C = ComputeType<T>;
    const C a = LoadElement(old), b = LoadElement(update);
    switch (reduction) {
      case Reduction::kNone:
        return update;
      case Reduction::kAdd:
        return ConvertElement<T>(Wrapping(std::plus<>(), a, b));
      case Reduction::kMul:
        return ConvertElement<T>(Wrapping(std::multiplies<>(), a, b));
      case Reduction::kMax:
        return b > a ? update : old;
      case Reduction::kMin:
        return b < a ? update : old;
    }
    return update;
  }
}

void ScatterNdKernel(TensorArgs inputs, TensorArgs outputs, const Attrs& attrs) {
  const std::string op = "scatter_nd";
  const DLTensor& data = *inputs[0];
  const DLTensor& indices = *inputs[1];
  const DLTensor& updates = *inputs[2];
  const DLTensor& out = *outputs[0];
  const Reduction reduction = ParseReduction(attrs.GetString("reduction"));
  const size_t depth = static_cast<size_t>(ShapeOf(indices).back());
  const int64_t slice = Product(ShapeOf(data).subspan(depth));
  const std::vector<int64_t> offsets = SliceOffsets(data, indices, 0, depth, op);
  DispatchDType(DTypeOf(data), [&](auto tag) {
    using T = decltype(tag);
    const T* src = DataOf<T>(data);
    T* dst = DataOf<T>(out);
    if (src != dst) std::copy_n(src, NumelOf(data), dst);
    const T* update = DataOf<T>(updates);
    for (size_t row = 0; row < offsets.size(); ++row) {
      T* target = dst + offsets[row];
      const T* from = update + static_cast<int64_t>(row) * slice;
      if (reduction == Reduction::kNone) {
        std::copy_n(from, slice, target);
        continue;
      }
      for (int64_t e = 0; e < slice; ++e) target[e] = Combine(reduction, target[e], from[e]);
    }
  });
}

// ---------------------------------------------------------------------------
// cumsum and topk: data seen as (outer, extent, inner) around the axis.

struct Lanes {
  int64_t outer, extent, inner;
};

Lanes LanesOf(std::span<const int64_t> shape, size_t axis) {
  return {Product(shape.first(axis)), shape[axis], Product(shape.subspan(axis + 1))};
}

void CumsumKernel(TensorArgs inputs, TensorArgs outputs, const Attrs& attrs) {
  const DLTensor& data = *inputs[0];
  const DLTensor& out = *outputs[0];
  const size_t axis = static_cast<size_t>(NormalizeAxis(attrs.GetInt("axis"), data.ndim, "cumsum"));
  const bool exclusive = attrs.GetBool("exclusive");
  const bool reverse = attrs.GetBool("reverse");
  const Lanes lanes = LanesOf(ShapeOf(data), axis);
  const auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* src = DataOf<T>(data);
    T* dst = DataOf<T>(out);
    std::vector<T> sums(static_cast<size_t>(lanes.inner));
    for (int64_t o = 0; o < lanes.outer; ++o) {
      std::fill(sums.begin(), sums.end(), T(0));
      for (int64_t s = 0; s < lanes.extent; ++s) {
        const int64_t step = reverse ? lanes.extent - 1 - s : s;
        const int64_t base = (o * lanes.extent + step) * lanes.inner;
        for (int64_t i = 0; i < lanes.inner; ++i) {
          const T value = src[base + i];
          if (exclusive) dst[base + i] = sums[i];
          sums[i] = Wrapping(std::plus<>(), sums[i], value);
          if (!exclusive) dst[base + i] = sums[i];
        }
      }
    }
  };
  const DataType dtype = DTypeOf(data);
  if (dtype == DataType::Int32()) return run(int32_t{});
  if (dtype == DataType::Int64()) return run(int64_t{});
  if (dtype == DataType::Float32()) return run(float{});
  if (dtype == DataType::Float64()) return run(double{});
  throw Error("cumsum: data must be int32, int64, float32 or float64, got " + dtype.name());
}

// k: an int64 scalar or one-element vector, at most the axis's size.
int64_t ReadK(const DLTensor& k, const DLTensor& data, size_t axis) {
  if (DTypeOf(k) != DataType::Int64() || k.ndim > 1 || NumelOf(k) != 1) {
    throw Error("topk: k must be an int64 scalar or a one-element vector, got " +
                DTypeOf(k).name() + " of shape " + ShapeToString(ShapeVector(k)));
  }
  const int64_t value = *DataOf<int64_t>(k);
  if (value < 0) throw Error("topk: k " + std::to_string(value) + " is negative");
  if (value > data.shape[axis]) {
    throw Error("topk: k " + std::to_string(value) + " is larger than axis " +
                std::to_string(axis) + " of data " + ShapeToString(ShapeVector(data)) +
                ", of size " + std::to_string(data.shape[axis]));
  }
  return value;
}

std::vector<Shape> TopKShapeFunc(std::span<const Shape> input_shapes, TensorArgs input_data,
                                 const Attrs& attrs) {
  const StaticDims dims(input_shapes[0].begin(), input_shapes[0].end());
  const size_t axis = indexing::TopKAxis(dims, attrs);
  Shape shape = input_shapes[0];
  shape[axis] = ReadK(*input_data[1], *input_data[0], axis);
  return {shape, shape};
}

// x < y, NaN above every number.
template <typename C>
bool NumberLess(C x, C y) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(y)) return !std::isnan(x);
    if (std::isnan(x)) return false;
  }
  return x < y;
}

void TopKKernel(TensorArgs inputs, TensorArgs outputs, const Attrs& attrs) {
  const DLTensor& data = *inputs[0];
  const DLTensor& values_out = *outputs[0];
  const DLTensor& indices_out = *outputs[1];
  const StaticDims dims(data.shape, data.shape + data.ndim);
  const size_t axis = indexing::TopKAxis(dims, attrs);
  const int64_t k = ReadK(*inputs[1], data, axis);
  if (values_out.shape[axis] != k || indices_out.shape[axis] != k ||
      DTypeOf(indices_out) != DataType::Int64()) {
    throw Error("topk: the outputs " + ShapeToString(ShapeVector(values_out)) + " and " +
                ShapeToString(ShapeVector(indices_out)) + " do not hold k " + std::to_string(k));
  }
  const bool largest = attrs.GetBool("largest");
  const Lanes lanes = LanesOf(ShapeOf(data), axis);
  DispatchDType(DTypeOf(data), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      throw Error("topk: data must be int or float, got bool");
    } else {
      using C = ComputeType<T>;
      const T* src = DataOf<T>(data);
      T* values = DataOf<T>(values_out);
      int64_t* positions = DataOf<int64_t>(indices_out);
      std::vector<C> lane(static_cast<size_t>(lanes.extent));
      std::vector<int64_t> order(static_cast<size_t>(lanes.extent));
      const auto before = [&](int64_t a, int64_t b) {
        const C x = lane[a], y = lane[b];
        if (largest ? NumberLess(y, x) : NumberLess(x, y)) return true;
        if (largest ? NumberLess(x, y) : NumberLess(y, x)) return false;
        return a < b;
      };
      for (int64_t o = 0; o < lanes.outer; ++o) {
        for (int64_t i = 0; i < lanes.inner; ++i) {
          const int64_t base = o * lanes.extent * lanes.inner + i;
          for (int64_t e = 0; e < lanes.extent; ++e)
            lane[e] = LoadElement(src[base + e * lanes.inner]);
          std::iota(order.begin(), order.end(), int64_t{0});
          std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
          const int64_t out_base = o * k * lanes.inner + i;
          for (int64_t j = 0; j < k; ++j) {
            values[out_base + j * lanes.inner] = src[base + order[j] * lanes.inner];
            positions[out_base + j * lanes.inner] = order[j];
          }
        }
      }
    }
  });
}

}  // namespace

void RegisterIndexOpKernels(OpKernelRegistry& registry) {
  transform::RegisterStatic(registry, "gather_elements", indexing::GatherElementsRule<StaticDim>,
                            GatherElementsKernel);
  transform::RegisterStatic(registry, "gather_nd", indexing::GatherNdRule<StaticDim>,
                            GatherNdKernel);
  transform::RegisterStatic(registry, "scatter_nd", indexing::ScatterNdRule<StaticDim>,
                            ScatterNdKernel)
      .shape_rule = ShapeRule::kSameAsFirstInput;
  transform::RegisterStatic(registry, "cumsum", indexing::CumsumRule<StaticDim>, CumsumKernel)
      .shape_rule = ShapeRule::kSameAsFirstInput;
  OpKernelDef& topk = registry.Register("topk");
  topk.shape_func = TopKShapeFunc;
  topk.shape_mode = ShapeFuncMode::kDataDependent;
  topk.kernel = TopKKernel;
  topk.num_outputs = [](const Attrs&) { return 2; };
}

}  // namespace nimble::vm
