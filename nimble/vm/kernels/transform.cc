// The runtime half of the transform family (reshape, reshape_like, transpose,
// squeeze, expand_dims, concatenate, stack, split, take, strided_slice,
// dyn.reshape, dyn.strided_slice): shape functions and built-in kernels.
//
// The shape functions run the family's rules (transform_rules.h) on StaticDim.
// The rules are templates over the dimension type because the compiler's type
// relations run the very same rules on ir::Dim, with Any: one definition of
// every output dimension and every error message, where writing the shape
// functions apart over concrete shapes would have copied all of them.
//
// The kernels only move bytes, so they dispatch once on the element size, not
// the dtype, and every dtype works:
//   - reshape and its kin keep the row-major order: one memcpy;
//   - transpose and strided_slice read a strided view of their input: dims
//     are merged where the view is contiguous, then rows are copied whole
//     when the last axis is read in order, or in square tiles (a blocked
//     transpose) when another axis is;
//   - concatenate, stack and split move one contiguous block per tensor and
//     row;
//   - take resolves its indices first (so an index error is raised before
//     anything is written, for the first bad index) and then copies whole rows.
// Large outputs are split over the thread pool in chunks of ~32K elements.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "nimble/vm/error.h"
#include "nimble/vm/kernels/element.h"
#include "nimble/vm/kernels/op_kernel.h"
#include "nimble/vm/kernels/shape_util.h"
#include "nimble/vm/kernels/transform_rules.h"
#include "nimble/vm/thread_pool.h"

namespace nimble::vm {

namespace transform {

int64_t NormalizeInsertAxis(int64_t axis, int64_t ndim, const std::string& op) {
  if (axis < -(ndim + 1) || axis > ndim) {
    throw Error(op + ": axis " + std::to_string(axis) +
                " is out of range for inserting into rank " + std::to_string(ndim));
  }
  return axis < 0 ? axis + ndim + 1 : axis;
}

std::pair<size_t, size_t> NormalizeRange(const Attrs& attrs, const std::string& begin_name,
                                         const std::string& end_name, size_t rank,
                                         const std::string& op) {
  const int64_t ndim = static_cast<int64_t>(rank);
  int64_t begin = attrs.GetInt(begin_name);
  int64_t end = attrs.IsNone(end_name) ? ndim : attrs.GetInt(end_name);
  if (begin < 0) begin += ndim;
  if (end < 0) end += ndim;
  if (begin < 0 || end > ndim || begin > end) {
    throw Error(op + ": " + begin_name + " and " + end_name + " give an empty or invalid range [" +
                std::to_string(begin) + ", " + std::to_string(end) + ") for rank " +
                std::to_string(ndim));
  }
  return {static_cast<size_t>(begin), static_cast<size_t>(end)};
}

std::vector<size_t> TransposePerm(size_t rank, const Attrs& attrs) {
  std::vector<size_t> perm(rank);
  if (attrs.IsNone("axes")) {
    for (size_t j = 0; j < rank; ++j) perm[j] = rank - 1 - j;
    return perm;
  }
  const std::vector<int64_t>& axes = attrs.GetIntList("axes");
  const int64_t ndim = static_cast<int64_t>(rank);
  if (axes.size() != rank) {
    throw Error("transpose: axes " + AttrValueToString(axes) + " do not match rank " +
                std::to_string(ndim));
  }
  std::vector<bool> seen(rank, false);
  for (size_t j = 0; j < rank; ++j) {
    perm[j] = static_cast<size_t>(NormalizeAxis(axes[j], ndim, "transpose"));
    if (seen[perm[j]]) {
      throw Error("transpose: axes " + AttrValueToString(axes) + " are not a permutation");
    }
    seen[perm[j]] = true;
  }
  return perm;
}

std::optional<int64_t> SplitSections(const Attrs& attrs) {
  const int64_t* sections = std::get_if<int64_t>(attrs.Find("indices_or_sections"));
  if (!sections) return std::nullopt;
  if (*sections <= 0) {
    throw Error("split: the number of sections must be positive, got " + std::to_string(*sections));
  }
  return *sections;
}

TakeMode ParseTakeMode(const Attrs& attrs) {
  const std::string& mode = attrs.GetString("mode");
  if (mode == "clip") return TakeMode::kClip;
  if (mode == "wrap") return TakeMode::kWrap;
  if (mode == "fast") return TakeMode::kFast;
  throw Error("take: mode must be \"clip\", \"wrap\" or \"fast\", got \"" + mode + "\"");
}

TakeAxes ResolveTakeAxes(size_t data_rank, size_t indices_rank, const Attrs& attrs) {
  const size_t axis = static_cast<size_t>(NormalizeAxis(attrs.GetInt("axis"), data_rank, "take"));
  int64_t batch_dims = attrs.GetInt("batch_dims");
  if (batch_dims < 0) batch_dims += static_cast<int64_t>(indices_rank);
  if (batch_dims < 0 || batch_dims > static_cast<int64_t>(std::min(axis, indices_rank))) {
    throw Error("take: batch_dims " + std::to_string(attrs.GetInt("batch_dims")) +
                " must lie within [0, " + std::to_string(std::min(axis, indices_rank)) +
                "] (at most axis and the rank of indices)");
  }
  return {axis, static_cast<size_t>(batch_dims)};
}

std::optional<int64_t> TakeRow(int64_t index, int64_t extent, TakeMode mode) {
  int64_t row = index;
  if (extent > 0 && mode == TakeMode::kClip) {
    row = std::clamp<int64_t>(index, 0, extent - 1);
  } else if (extent > 0 && mode == TakeMode::kWrap) {
    row = (index % extent + extent) % extent;
  }
  if (row < 0 || row >= extent) return std::nullopt;
  return row;
}

bool ParseSliceMode(const Attrs& attrs, const std::string& op) {
  const std::string& mode = attrs.GetString("slice_mode");
  if (mode != "end" && mode != "size") {
    throw Error(op + ": slice_mode must be \"end\" or \"size\", got \"" + mode + "\"");
  }
  return mode == "size";
}

// Negative indices count from the end, then indices clamp to [0, extent] (to
// [-1, extent - 1] for a negative stride); an empty range gives size 0.
void PlanAxis(int64_t begin, int64_t end, int64_t stride, bool size_mode, int64_t extent,
              int64_t* first, int64_t* size) {
  auto canonical = [&](int64_t index) {
    if (index < 0) index += extent;
    return stride < 0 ? std::clamp<int64_t>(index, -1, extent - 1)
                      : std::clamp<int64_t>(index, 0, extent);
  };
  *first = canonical(begin);
  if (size_mode) {
    *size = end < 0 || end >= extent - *first ? extent - *first : end;
    return;
  }
  const int64_t last = canonical(end);
  const int64_t distance = stride > 0 ? last - *first : *first - last;
  // Divides by the negative stride itself, which cannot overflow as -stride could.
  *size =
      distance <= 0 ? 0 : 1 + (stride > 0 ? (distance - 1) / stride : -((distance - 1) / stride));
}

std::optional<int64_t> SliceBound(std::optional<int64_t> extent_bound, int64_t begin, int64_t end,
                                  int64_t stride, bool size_mode) {
  // An unbounded extent stays so: a bound is also what storage is planned
  // for, and "to the end" is often written as a huge end.
  if (!extent_bound) return std::nullopt;
  std::optional<int64_t> length;
  if (size_mode && end >= 0) {
    length = end;
  } else if (!size_mode && stride > 0 && begin >= 0 && end >= 0) {
    length = end <= begin ? 0 : 1 + (end - begin - 1) / stride;
  }
  return length ? std::min(*extent_bound, *length) : *extent_bound;
}

std::vector<size_t> SlicedAxes(const SliceSpec& spec, size_t rank, const std::string& in_text,
                               const std::string& op) {
  std::vector<size_t> axes;
  if (spec.axes) {
    std::vector<bool> seen(rank, false);
    for (int64_t axis : *spec.axes) {
      axes.push_back(static_cast<size_t>(NormalizeAxis(axis, static_cast<int64_t>(rank), op)));
      if (seen[axes.back()]) throw Error(op + ": axis " + std::to_string(axis) + " is given twice");
      seen[axes.back()] = true;
    }
    if (spec.begin.size() != axes.size() || spec.end.size() != axes.size()) {
      throw Error(op + ": begin " + AttrValueToString(spec.begin) + " and end " +
                  AttrValueToString(spec.end) + " must have one entry per axis in " +
                  AttrValueToString(*spec.axes));
    }
  } else {
    if (spec.begin.size() > rank || spec.end.size() > rank) {
      throw Error(op + ": begin " + AttrValueToString(spec.begin) + " and end " +
                  AttrValueToString(spec.end) + " have more entries than the rank of " + in_text);
    }
    for (size_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  if (spec.strides.size() > axes.size()) {
    throw Error(op + ": strides " + AttrValueToString(spec.strides) +
                " have more entries than the sliced axes");
  }
  return axes;
}

SliceSpec SliceSpecFromAttrs(const Attrs& attrs) {
  SliceSpec spec;
  spec.begin = attrs.GetIntList("begin");
  spec.end = attrs.GetIntList("end");
  if (!attrs.IsNone("strides")) spec.strides = attrs.GetIntList("strides");
  if (!attrs.IsNone("axes")) spec.axes = attrs.GetIntList("axes");
  spec.size_mode = ParseSliceMode(attrs, "strided_slice");
  return spec;
}

SliceSpec SliceSpecFromTensors(TensorArgs inputs, const Attrs& attrs) {
  SliceSpec spec;
  spec.begin = ElementsAsInt64(*inputs[1]);
  spec.end = ElementsAsInt64(*inputs[2]);
  spec.strides = ElementsAsInt64(*inputs[3]);
  spec.size_mode = ParseSliceMode(attrs, "dyn.strided_slice");
  return spec;
}

}  // namespace transform

namespace {

using transform::StaticDim;
using StaticDims = transform::DimsOf<StaticDim>;

// ---------------------------------------------------------------------------
// Shape functions.

StaticDims ToDims(const Shape& shape) {
  return StaticDims(shape.begin(), shape.end());
}

// Every value is one output dim, so only 0 and -1 keep the rank the type gave.
std::vector<Shape> DynReshapeShapeFunc(std::span<const Shape> input_shapes, TensorArgs input_data,
                                       const Attrs& attrs) {
  const std::vector<int64_t> newshape = ElementsAsInt64(*input_data[1]);
  for (int64_t value : newshape) {
    if (value < -1) {
      throw Error("dyn.reshape: newshape " + ShapeToString(newshape) + " holds " +
                  std::to_string(value) + "; only sizes, 0 and -1 are supported");
    }
  }
  return {transform::ToShape(transform::InferReshape(ToDims(input_shapes[0]), newshape,
                                                     attrs.GetBool("allowzero"), "dyn.reshape"))};
}

std::vector<Shape> DynStridedSliceShapeFunc(std::span<const Shape> input_shapes,
                                            TensorArgs input_data, const Attrs& attrs) {
  const transform::SliceSpec spec = transform::SliceSpecFromTensors(input_data, attrs);
  return {transform::ToShape(
      transform::PlanSlice(ToDims(input_shapes[0]), spec, "dyn.strided_slice").out)};
}

// ---------------------------------------------------------------------------
// Kernel building blocks.

// The least work worth a chunk of its own on the thread pool.
constexpr int64_t kMinChunkElements = int64_t{1} << 15;
constexpr int64_t kMinChunkBytes = kMinChunkElements * 4;
// Runs shorter than this are copied by a loop; longer ones by memcpy.
constexpr int64_t kShortRun = 16;
// A blocked transpose moves square tiles of kTile x kTile elements, each in
// blocks of kBlock x kBlock.
constexpr int64_t kTile = 64;
constexpr int64_t kBlock = 8;

int64_t CeilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

std::byte* BytesOf(const DLTensor& tensor) {
  return DataOf<std::byte>(tensor);
}

int64_t NbytesOf(const DLTensor& tensor) {
  return NumelOf(tensor) * static_cast<int64_t>(DTypeOf(tensor).bytes());
}

template <typename T>
inline void CopyRun(T* dst, const T* src, int64_t count) {
  if (count < kShortRun) {
    for (int64_t k = 0; k < count; ++k) dst[k] = src[k];
  } else {
    std::memcpy(dst, src, static_cast<size_t>(count) * sizeof(T));
  }
}

// dst = src, split over the pool when large.
void ParallelCopy(std::byte* dst, const std::byte* src, int64_t bytes) {
  ParallelFor(0, CeilDiv(bytes, kMinChunkBytes), 1, [&](int64_t begin, int64_t end) {
    const int64_t lo = begin * kMinChunkBytes;
    const int64_t hi = std::min(bytes, end * kMinChunkBytes);
    std::memcpy(dst + lo, src + lo, static_cast<size_t>(hi - lo));
  });
}

std::vector<int64_t> DenseStrides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

// ---------------------------------------------------------------------------
// Strided views: transpose and strided_slice.

// The dense output's element at multi-index i is the input's element at
// offset sum(i[d] * stride[d]) (in elements, possibly negative) from the first
// one read.
struct StridedView {
  Shape shape;
  std::vector<int64_t> stride;
};

// Drops size-1 dims and merges neighbours that the input holds as one run, so
// the loops see the fewest and longest dims.
StridedView Simplify(const StridedView& view) {
  StridedView out;
  for (size_t d = 0; d < view.shape.size(); ++d) {
    if (view.shape[d] == 1) continue;
    if (!out.shape.empty() && out.stride.back() == view.stride[d] * view.shape[d]) {
      out.shape.back() *= view.shape[d];
      out.stride.back() = view.stride[d];
    } else {
      out.shape.push_back(view.shape[d]);
      out.stride.push_back(view.stride[d]);
    }
  }
  return out;
}

// The input and output offsets of a multi-index over `shape`, advanced in
// row-major order.
class OffsetWalker {
 public:
  OffsetWalker(const Shape& shape, const std::vector<int64_t>& in_stride,
               const std::vector<int64_t>& out_stride, int64_t position)
      : shape_(shape), in_stride_(in_stride), out_stride_(out_stride), index_(shape.size()) {
    for (size_t d = shape.size(); d-- > 0;) {
      index_[d] = position % shape[d];
      position /= shape[d];
      in_ += index_[d] * in_stride[d];
      out_ += index_[d] * out_stride[d];
    }
  }

  int64_t in() const { return in_; }
  int64_t out() const { return out_; }

  void Next() {
    for (size_t d = shape_.size(); d-- > 0;) {
      in_ += in_stride_[d];
      out_ += out_stride_[d];
      if (++index_[d] < shape_[d]) return;
      in_ -= in_stride_[d] * shape_[d];
      out_ -= out_stride_[d] * shape_[d];
      index_[d] = 0;
    }
  }

 private:
  const Shape& shape_;
  const std::vector<int64_t>& in_stride_;
  const std::vector<int64_t>& out_stride_;
  std::vector<int64_t> index_;
  int64_t in_ = 0;
  int64_t out_ = 0;
};

// One output row of a view: `n` elements `step` apart.
template <typename T>
void CopyRow(const T* from, T* to, int64_t n, int64_t step) {
  if (step == 1) {
    CopyRun(to, from, n);
  } else {
    for (int64_t k = 0; k < n; ++k) to[k] = from[k * step];
  }
}

// to[i * row_stride + j] = from[i + j * step] for i in [i_begin, i_end) and j
// in [0, n): a transpose of kTile x kTile tiles, each moved in kBlock x kBlock
// blocks through a local buffer, so that both sides are read and written
// kBlock contiguous elements at a time and a tile's lines stay in cache.
template <typename T>
void CopyTiles(const T* from, T* to, int64_t i_begin, int64_t i_end, int64_t n, int64_t step,
               int64_t row_stride) {
  for (int64_t j_tile = 0; j_tile < n; j_tile += kTile) {
    const int64_t j_tile_end = std::min(n, j_tile + kTile);
    for (int64_t i0 = i_begin; i0 < i_end; i0 += kBlock) {
      for (int64_t j0 = j_tile; j0 < j_tile_end; j0 += kBlock) {
        if (i0 + kBlock <= i_end && j0 + kBlock <= j_tile_end) {
          T block[kBlock][kBlock];
          for (int64_t a = 0; a < kBlock; ++a) {
            for (int64_t b = 0; b < kBlock; ++b) block[a][b] = from[i0 + b + (j0 + a) * step];
          }
          for (int64_t b = 0; b < kBlock; ++b) {
            for (int64_t a = 0; a < kBlock; ++a) to[(i0 + b) * row_stride + j0 + a] = block[a][b];
          }
          continue;
        }
        for (int64_t i = i0; i < std::min(i_end, i0 + kBlock); ++i) {
          for (int64_t j = j0; j < std::min(j_tile_end, j0 + kBlock); ++j) {
            to[i * row_stride + j] = from[i + j * step];
          }
        }
      }
    }
  }
}

// Copies the view of `src` into the dense `dst`. The last output axis is the
// inner loop. When it reads the input with a stride and another axis p reads
// the input in order (a transpose), the two are copied in tiles (CopyTiles).
// The work is split into units, each a row or a band of kTile rows along p.
template <typename T>
void CopyStridedView(const T* src, T* dst, const StridedView& full) {
  const StridedView view = Simplify(full);
  if (view.shape.empty()) {
    *dst = *src;
    return;
  }
  const size_t last = view.shape.size() - 1;
  const std::vector<int64_t> dense = DenseStrides(view.shape);
  std::optional<size_t> p;
  for (size_t d = 0; d < last && view.stride[last] != 1; ++d) {
    if (view.stride[d] == 1) p = d;
  }
  // The dims walked one index at a time around the units.
  Shape outer;
  std::vector<int64_t> outer_in;
  std::vector<int64_t> outer_out;
  for (size_t d = 0; d < last; ++d) {
    if (d == p) continue;
    outer.push_back(view.shape[d]);
    outer_in.push_back(view.stride[d]);
    outer_out.push_back(dense[d]);
  }
  const int64_t n = view.shape[last];
  const int64_t step = view.stride[last];
  const int64_t rows = p ? view.shape[*p] : 1;
  const int64_t bands = CeilDiv(rows, kTile);
  const int64_t unit_elements = std::min(rows, kTile) * n;
  ParallelFor(0, ShapeNumel(outer) * bands, std::max<int64_t>(1, kMinChunkElements / unit_elements),
              [&](int64_t begin, int64_t end) {
                OffsetWalker walk(outer, outer_in, outer_out, begin / bands);
                int64_t band = begin % bands;
                for (int64_t unit = begin; unit < end; ++unit) {
                  if (p) {
                    CopyTiles(src + walk.in(), dst + walk.out(), band * kTile,
                              std::min(rows, (band + 1) * kTile), n, step, dense[*p]);
                  } else {
                    CopyRow(src + walk.in(), dst + walk.out(), n, step);
                  }
                  if (++band == bands) {
                    band = 0;
                    walk.Next();
                  }
                }
              });
}

// Fills `out` from the view of `in` that starts `offset` elements in.
void CopyView(const DLTensor& in, int64_t offset, const DLTensor& out, const StridedView& view) {
  if (NumelOf(out) == 0) return;
  DispatchElementSize(DTypeOf(out), [&]<typename T>(T) {
    CopyStridedView(DataOf<const T>(in) + offset, DataOf<T>(out), view);
  });
}

// ---------------------------------------------------------------------------
// Kernels.

// reshape and its kin: the elements keep their row-major order.
void CopyKernel(TensorArgs inputs, TensorArgs outputs, const Attrs&) {
  ParallelCopy(BytesOf(*outputs[0]), BytesOf(*inputs[0]), NbytesOf(*outputs[0]));
}

void TransposeKernel(TensorArgs inputs, TensorArgs outputs, const Attrs& attrs) {
  const Shape in_shape(ShapeOf(*inputs[0]).begin(), ShapeOf(*inputs[0]).end());
  const std::vector<int64_t> in_strides = DenseStrides(in_shape);
  StridedView view{Shape(ShapeOf(*outputs[0]).begin(), ShapeOf(*outputs[0]).end()), {}};
  for (size_t axis : transform::TransposePerm(in_shape.size(), attrs)) {
    view.stride.push_back(in_strides[axis]);
  }
  CopyView(*inputs[0], 0, *outputs[0], view);
}

void CopySlice(const DLTensor& in, const DLTensor& out, const transform::SliceSpec& spec,
               const std::string& op) {
  const Shape shape(ShapeOf(in).begin(), ShapeOf(in).end());
  const transform::SlicePlan<StaticDim> plan = transform::PlanSlice(ToDims(shape), spec, op);
  const std::vector<int64_t> in_strides = DenseStrides(shape);
  StridedView view{transform::ToShape(plan.out), {}};
  int64_t offset = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    offset += plan.begin[d] * in_strides[d];
    view.stride.push_back(plan.stride[d] * in_strides[d]);
  }
  CopyView(in, offset, out, view);
}

void StridedSliceKernel(TensorArgs inputs, TensorArgs outputs, const Attrs& attrs) {
  CopySlice(*inputs[0], *outputs[0], transform::SliceSpecFromAttrs(attrs), "strided_slice");
}

void DynStridedSliceKernel(TensorArgs inputs, TensorArgs outputs, const Attrs& attrs) {
  CopySlice(*inputs[0], *outputs[0], transform::SliceSpecFromTensors(inputs, attrs),
            "dyn.strided_slice");
}

// One tensor's share of each row of a joined tensor: `length` elements per row.
struct Piece {
  std::byte* data;
  int64_t length;
};

// The tensor `whole` is `outer` rows, each the pieces' rows one after another:
// joins the pieces into it (concatenate, stack) or splits it into them (split).
void MovePieces(const DLTensor& whole, const std::vector<Piece>& pieces, int64_t outer, bool join) {
  int64_t row_length = 0;
  for (const Piece& piece : pieces) row_length += piece.length;
  if (outer == 0 || row_length == 0) return;
  const size_t element_bytes = DTypeOf(whole).bytes();
  if (outer == 1) {  // one block per piece, each split over the pool when large
    std::byte* at = BytesOf(whole);
    for (const Piece& piece : pieces) {
      const int64_t bytes = piece.length * static_cast<int64_t>(element_bytes);
      ParallelCopy(join ? at : piece.data, join ? piece.data : at, bytes);
      at += bytes;
    }
    return;
  }
  DispatchElementSize(DTypeOf(whole), [&]<typename T>(T) {
    T* base = DataOf<T>(whole);
    ParallelFor(0, outer, std::max<int64_t>(1, kMinChunkElements / row_length),
                [&](int64_t begin, int64_t end) {
                  for (int64_t row = begin; row < end; ++row) {
                    T* at = base + row * row_length;
                    for (const Piece& piece : pieces) {
                      T* part = reinterpret_cast<T*>(piece.data) + row * piece.length;
                      if (join) {
                        CopyRun(at, part, piece.length);
                      } else {
                        CopyRun(part, at, piece.length);
                      }
                      at += piece.length;
                    }
                  }
                });
  });
}

int64_t Product(std::span<const int64_t> shape, size_t begin, size_t end) {
  return ShapeNumel(shape.subspan(begin, end - begin));
}

void ConcatenateKernel(TensorArgs inputs, TensorArgs outputs, const Attrs& attrs) {
  const std::span<const int64_t> shape = ShapeOf(*outputs[0]);
  const size_t axis =
      static_cast<size_t>(NormalizeAxis(attrs.GetInt("axis"), shape.size(), "concatenate"));
  const int64_t inner = Product(shape, axis + 1, shape.size());
  std::vector<Piece> pieces;
  for (const DLTensor* input : inputs) {
    pieces.push_back({BytesOf(*input), input->shape[axis] * inner});
  }
  MovePieces(*outputs[0], pieces, Product(shape, 0, axis), true);
}

void StackKernel(TensorArgs inputs, TensorArgs outputs, const Attrs& attrs) {
  const std::span<const int64_t> shape = ShapeOf(*inputs[0]);
  const size_t axis = static_cast<size_t>(
      transform::NormalizeInsertAxis(attrs.GetInt("axis"), shape.size(), "stack"));
  const int64_t block = Product(shape, axis, shape.size());
  std::vector<Piece> pieces;
  for (const DLTensor* input : inputs) pieces.push_back({BytesOf(*input), block});
  MovePieces(*outputs[0], pieces, Product(shape, 0, axis), true);
}

void SplitKernel(TensorArgs inputs, TensorArgs outputs, const Attrs& attrs) {
  const std::span<const int64_t> shape = ShapeOf(*inputs[0]);
  const size_t axis =
      static_cast<size_t>(NormalizeAxis(attrs.GetInt("axis"), shape.size(), "split"));
  const int64_t inner = Product(shape, axis + 1, shape.size());
  std::vector<Piece> pieces;
  for (const DLTensor* output : outputs) {
    pieces.push_back({BytesOf(*output), output->shape[axis] * inner});
  }
  MovePieces(*inputs[0], pieces, Product(shape, 0, axis), false);
}

// take as nested loops: data is (batch, outer, extent, inner) and indices are
// (batch, count); each index selects a row of `inner` elements of data.
struct TakeGeometry {
  int64_t batch = 1;
  int64_t outer = 1;
  int64_t extent = 1;
  int64_t count = 1;
  int64_t inner = 1;
};

// The row of data each index selects, in the order of `indices`.
std::vector<int64_t> TakeRows(const DLTensor& indices, int64_t extent, transform::TakeMode mode,
                              const std::string& where) {
  const DataType dtype = DTypeOf(indices);
  if (dtype != DataType::Int32() && dtype != DataType::Int64()) {
    throw Error("take: indices must be int32 or int64, got " + dtype.name());
  }
  std::vector<int64_t> rows(static_cast<size_t>(NumelOf(indices)));
  auto resolve = [&]<typename Index>(const Index* values) {
    for (size_t k = 0; k < rows.size(); ++k) {
      const std::optional<int64_t> row = transform::TakeRow(values[k], extent, mode);
      if (!row) {
        throw Error("take: index " + std::to_string(values[k]) + " is out of range for " + where);
      }
      rows[k] = *row;
    }
  };
  if (dtype == DataType::Int32()) {
    resolve(DataOf<const int32_t>(indices));
  } else {
    resolve(DataOf<const int64_t>(indices));
  }
  return rows;
}

void TakeKernel(TensorArgs inputs, TensorArgs outputs, const Attrs& attrs) {
  const DLTensor& data = *inputs[0];
  const DLTensor& indices = *inputs[1];
  if (NumelOf(*outputs[0]) == 0) return;
  const std::span<const int64_t> shape = ShapeOf(data);
  TakeGeometry g;
  std::string where;
  if (attrs.IsNone("axis")) {
    g.extent = NumelOf(data);
    g.count = NumelOf(indices);
    where = "the flattened data " + ShapeToString(shape);
  } else {
    const std::span<const int64_t> index_shape = ShapeOf(indices);
    const transform::TakeAxes axes =
        transform::ResolveTakeAxes(shape.size(), index_shape.size(), attrs);
    g.batch = Product(shape, 0, axes.batch_dims);
    g.outer = Product(shape, axes.batch_dims, axes.axis);
    g.extent = shape[axes.axis];
    g.count = Product(index_shape, axes.batch_dims, index_shape.size());
    g.inner = Product(shape, axes.axis + 1, shape.size());
    where = "axis " + std::to_string(axes.axis) + " of " + ShapeToString(shape);
  }
  const std::vector<int64_t> rows =
      TakeRows(indices, g.extent, transform::ParseTakeMode(attrs), where);
  DispatchElementSize(DTypeOf(data), [&]<typename T>(T) {
    const T* src = DataOf<const T>(data);
    T* dst = DataOf<T>(*outputs[0]);
    // One unit per (batch, outer, index): a row of `inner` elements.
    ParallelFor(0, g.batch * g.outer * g.count, std::max<int64_t>(1, kMinChunkElements / g.inner),
                [&](int64_t begin, int64_t end) {
                  for (int64_t unit = begin; unit < end; ++unit) {
                    const int64_t k = unit % g.count;
                    const int64_t batch_outer = unit / g.count;
                    const int64_t row = rows[(batch_outer / g.outer) * g.count + k];
                    const T* from = src + (batch_outer * g.extent + row) * g.inner;
                    if (g.inner == 1) {
                      dst[unit] = *from;
                    } else {
                      CopyRun(dst + unit * g.inner, from, g.inner);
                    }
                  }
                });
  });
}

// ---------------------------------------------------------------------------
// Registration.

OpKernelDef& RegisterDataDependent(OpKernelRegistry& registry, const std::string& name,
                                   ShapeFunction shape_func, OpKernelFunc kernel) {
  OpKernelDef& def = registry.Register(name);
  def.shape_func = std::move(shape_func);
  def.shape_mode = ShapeFuncMode::kDataDependent;
  def.kernel = std::move(kernel);
  return def;
}

int SplitOutputs(const Attrs& attrs) {
  const std::optional<int64_t> sections = transform::SplitSections(attrs);
  return static_cast<int>(sections ? *sections
                                   : attrs.GetIntList("indices_or_sections").size() + 1);
}

}  // namespace

void RegisterTransformOpKernels(OpKernelRegistry& registry) {
  transform::RegisterStatic(registry, "reshape", transform::ReshapeRule<StaticDim>, CopyKernel);
  transform::RegisterStatic(registry, "reshape_like", transform::ReshapeLikeRule<StaticDim>,
                            CopyKernel);
  transform::RegisterStatic(registry, "transpose", transform::TransposeRule<StaticDim>,
                            TransposeKernel);
  transform::RegisterStatic(registry, "squeeze", transform::SqueezeRule<StaticDim>, CopyKernel);
  transform::RegisterStatic(registry, "expand_dims", transform::ExpandDimsRule<StaticDim>,
                            CopyKernel);
  transform::RegisterStatic(registry, "concatenate", transform::ConcatenateRule<StaticDim>,
                            ConcatenateKernel);
  transform::RegisterStatic(registry, "stack", transform::StackRule<StaticDim>, StackKernel);
  transform::RegisterStatic(registry, "split", transform::SplitRule<StaticDim>, SplitKernel)
      .num_outputs = SplitOutputs;
  transform::RegisterStatic(registry, "take", transform::TakeRule<StaticDim>, TakeKernel);
  transform::RegisterStatic(registry, "strided_slice", transform::StridedSliceRule<StaticDim>,
                            StridedSliceKernel);
  RegisterDataDependent(registry, "dyn.reshape", DynReshapeShapeFunc, CopyKernel);
  RegisterDataDependent(registry, "dyn.strided_slice", DynStridedSliceShapeFunc,
                        DynStridedSliceKernel);
}

}  // namespace nimble::vm
