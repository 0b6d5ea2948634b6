// Shape-manipulating operators (Relay's "transform" family): reshape and its
// dynamic and `_like` forms, transpose, squeeze, expand_dims, concatenate,
// stack, split, take, and strided_slice (static and dynamic).
//
// Each op with static attributes computes its output dimensions with one
// function over ir::Dim (a DimsRule). The type relation runs it on the argument
// types, where Any propagates and only contradictions between static sizes
// fail; the shape function runs it on the concrete shapes, where every size is
// known, so each check the relation deferred becomes exact [paper 4.1, 4.2].
// The kernels only move bytes, so one copy loop serves every dtype.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "nimble/compiler/op/op.h"
#include "nimble/compiler/op/type_relations.h"
#include "nimble/vm/error.h"

namespace nimble::op {

namespace {

using ir::Dim;
using Dims = std::vector<Dim>;

// ---------------------------------------------------------------------------
// Dimension arithmetic shared by the rules.

std::string DimsToString(const Dims& dims) {
  std::string text = "(";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) text += ", ";
    text += dims[i].ToString();
  }
  if (dims.size() == 1) text += ",";
  return text + ")";
}

std::string IntsToString(const std::vector<int64_t>& values) {
  return ir::AttrValueToString(values);
}

Dims ToDims(const Shape& shape) {
  return Dims(shape.begin(), shape.end());
}

// Only called on the rules' results for concrete inputs, which are static.
Shape ToShape(const Dims& dims) {
  Shape shape;
  shape.reserve(dims.size());
  for (const Dim& dim : dims) shape.push_back(dim.value());
  return shape;
}

bool AllStatic(const Dims& dims) {
  return std::all_of(dims.begin(), dims.end(), [](const Dim& dim) { return dim.is_static(); });
}

// The product of dims[begin, end): 0 when one is 0 (whatever the others are),
// otherwise Any when one is Any.
Dim DimProduct(const Dims& dims, size_t begin, size_t end) {
  int64_t product = 1;
  bool any = false;
  for (size_t i = begin; i < end; ++i) {
    if (dims[i].is_any()) {
      any = true;
    } else if (dims[i].value() == 0) {
      return 0;
    } else if (__builtin_mul_overflow(product, dims[i].value(), &product)) {
      throw Error("shape " + DimsToString(dims) + " has too many elements");
    }
  }
  return any ? Dim::Any() : Dim(product);
}

// The dimension two inputs must share: the static one when only one is static;
// nullopt when two static sizes differ.
std::optional<Dim> UnifyDim(Dim a, Dim b) {
  if (a.is_any()) return b;
  if (b.is_any() || a == b) return a;
  return std::nullopt;
}

// The dimensions shared by `inputs` (all of one rank), except `skip_axis`, which
// is copied from input 0. The error names both shapes and the dimension.
Dims UnifyInputDims(const std::vector<Dims>& inputs, size_t skip_axis, const std::string& op) {
  Dims unified = inputs[0];
  std::vector<size_t> source(unified.size(), 0);  // the input each static size came from
  for (size_t i = 1; i < inputs.size(); ++i) {
    if (inputs[i].size() != unified.size()) {
      throw Error(op + ": input " + std::to_string(i) + " " + DimsToString(inputs[i]) +
                  " and input 0 " + DimsToString(inputs[0]) + " differ in rank");
    }
    for (size_t d = 0; d < unified.size(); ++d) {
      if (d == skip_axis) continue;
      const std::optional<Dim> dim = UnifyDim(unified[d], inputs[i][d]);
      if (!dim) {
        throw Error(op + ": input " + std::to_string(i) + " " + DimsToString(inputs[i]) +
                    " and input " + std::to_string(source[d]) + " " +
                    DimsToString(inputs[source[d]]) + " differ in dimension " + std::to_string(d));
      }
      if (unified[d].is_any() && dim->is_static()) source[d] = i;
      unified[d] = *dim;
    }
  }
  return unified;
}

// Normalises an insertion position in [-(ndim + 1), ndim] (expand_dims, stack).
int64_t NormalizeInsertAxis(int64_t axis, int64_t ndim, const std::string& op) {
  if (axis < -(ndim + 1) || axis > ndim) {
    throw Error(op + ": axis " + std::to_string(axis) +
                " is out of range for inserting into rank " + std::to_string(ndim));
  }
  return axis < 0 ? axis + ndim + 1 : axis;
}

// ---------------------------------------------------------------------------
// reshape, dyn.reshape, reshape_like

// Relay's reshape: a positive value is a size; 0 copies the input dimension at
// the same position (or is a literal 0 with allowzero); -1 is inferred from the
// element count; -2 copies all remaining input dimensions; -3 merges the next
// two; -4 splits the next one into the two values that follow (one may be -1).
// Dims derived from input dims (by 0, -2, -3, -4) are known exactly, so -1 is
// the ratio of the remaining input and output dims and stays static when only
// copied dims are Any: (?, 3, 4) into (0, -1) is (?, 12).
Dims InferReshape(const Dims& in, const std::vector<int64_t>& newshape, bool allowzero,
                  const std::string& op) {
  auto fail = [&](const std::string& why) {
    return Error(op + ": cannot reshape " + DimsToString(in) + " into " + ShapeToString(newshape) +
                 (why.empty() ? "" : " (" + why + ")"));
  };
  Dims out;
  std::vector<bool> in_derived(in.size(), false);
  std::vector<bool> out_derived;
  std::optional<size_t> infer_at;
  size_t src = 0;
  auto emit = [&](Dim dim, bool derived) {
    out.push_back(dim);
    out_derived.push_back(derived);
  };
  auto consume = [&](int64_t value) {
    if (src >= in.size()) {
      throw fail(std::to_string(value) + " refers past the input's last dimension");
    }
    in_derived[src] = true;
    return in[src++];
  };
  for (size_t i = 0; i < newshape.size(); ++i) {
    const int64_t value = newshape[i];
    if (value > 0 || (value == 0 && allowzero)) {
      emit(value, false);
      ++src;
    } else if (value == 0) {
      emit(consume(value), true);
    } else if (value == -1) {
      if (infer_at) throw fail("more than one -1");
      infer_at = out.size();
      emit(1, false);
      ++src;
    } else if (value == -2) {
      while (src < in.size()) emit(consume(value), true);
    } else if (value == -3) {
      const Dim first = consume(value);
      const Dim second = consume(value);
      emit(DimProduct({first, second}, 0, 2), true);
    } else if (value == -4) {
      if (i + 2 >= newshape.size()) throw fail("-4 must be followed by two sizes");
      const Dim whole = consume(value);
      int64_t first = newshape[++i];
      int64_t second = newshape[++i];
      if (first == 0 || second == 0 || first < -1 || second < -1 || (first == -1 && second == -1)) {
        throw fail("-4 splits into two positive sizes, at most one of them -1");
      }
      if (whole.is_static()) {
        const int64_t size = whole.value();
        const bool divides = first == -1    ? size % second == 0
                             : second == -1 ? size % first == 0
                                            : size % first == 0 && size / first == second;
        if (!divides) throw fail("-4 cannot split " + std::to_string(size));
        if (first == -1) first = size / second;
        if (second == -1) second = size / first;
      }
      emit(first == -1 ? Dim::Any() : Dim(first), true);
      emit(second == -1 ? Dim::Any() : Dim(second), true);
    } else {
      throw fail("unsupported special value " + std::to_string(value));
    }
  }
  if (infer_at) {
    Dims rest_in;
    for (size_t i = 0; i < in.size(); ++i) {
      if (!in_derived[i]) rest_in.push_back(in[i]);
    }
    Dims rest_out;
    for (size_t i = 0; i < out.size(); ++i) {
      if (!out_derived[i] && i != *infer_at) rest_out.push_back(out[i]);
    }
    const Dim numerator = DimProduct(rest_in, 0, rest_in.size());
    const int64_t denominator = DimProduct(rest_out, 0, rest_out.size()).value();
    if (numerator.is_static()) {
      if (denominator == 0) throw fail("-1 is ambiguous next to a size of 0");
      if (numerator.value() % denominator != 0) throw fail("");
      out[*infer_at] = numerator.value() / denominator;
    } else {
      out[*infer_at] = Dim::Any();
    }
  }
  // With a static input every output dim is static too.
  if (AllStatic(in) && ShapeNumel(ToShape(in)) != ShapeNumel(ToShape(out))) throw fail("");
  return out;
}

std::vector<Dims> ReshapeRule(const std::vector<Dims>& inputs, const ir::Attrs& attrs) {
  return {
      InferReshape(inputs[0], attrs.GetIntList("newshape"), attrs.GetBool("allowzero"), "reshape")};
}

// [begin, end) of a dimension range given as attributes (end None = rank).
std::pair<size_t, size_t> NormalizeRange(const ir::Attrs& attrs, const std::string& begin_name,
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

// data's dims [0, lhs_begin) and [lhs_end, rank) around shape_like's dims
// [rhs_begin, rhs_end); by default simply shape_like's shape.
std::vector<Dims> ReshapeLikeRule(const std::vector<Dims>& inputs, const ir::Attrs& attrs) {
  const Dims& data = inputs[0];
  const Dims& like = inputs[1];
  const auto [lhs_begin, lhs_end] =
      NormalizeRange(attrs, "lhs_begin", "lhs_end", data.size(), "reshape_like");
  const auto [rhs_begin, rhs_end] =
      NormalizeRange(attrs, "rhs_begin", "rhs_end", like.size(), "reshape_like");
  Dims out(data.begin(), data.begin() + lhs_begin);
  out.insert(out.end(), like.begin() + rhs_begin, like.begin() + rhs_end);
  out.insert(out.end(), data.begin() + lhs_end, data.end());
  if (AllStatic(data) && AllStatic(out) && ShapeNumel(ToShape(data)) != ShapeNumel(ToShape(out))) {
    throw Error("reshape_like: cannot reshape " + DimsToString(data) + " into " +
                DimsToString(out) + " (from shape_like " + DimsToString(like) + ")");
  }
  return {out};
}

// ---------------------------------------------------------------------------
// transpose, squeeze, expand_dims

// The output's axis j is the input's axis perm[j]; axes None reverses them.
std::vector<size_t> TransposePerm(size_t rank, const ir::Attrs& attrs) {
  std::vector<size_t> perm(rank);
  if (attrs.IsNone("axes")) {
    for (size_t j = 0; j < rank; ++j) perm[j] = rank - 1 - j;
    return perm;
  }
  const std::vector<int64_t>& axes = attrs.GetIntList("axes");
  const int64_t ndim = static_cast<int64_t>(rank);
  if (axes.size() != rank) {
    throw Error("transpose: axes " + IntsToString(axes) + " do not match rank " +
                std::to_string(ndim));
  }
  std::vector<bool> seen(rank, false);
  for (size_t j = 0; j < rank; ++j) {
    perm[j] = static_cast<size_t>(NormalizeAxis(axes[j], ndim, "transpose"));
    if (seen[perm[j]]) {
      throw Error("transpose: axes " + IntsToString(axes) + " are not a permutation");
    }
    seen[perm[j]] = true;
  }
  return perm;
}

std::vector<Dims> TransposeRule(const std::vector<Dims>& inputs, const ir::Attrs& attrs) {
  const std::vector<size_t> perm = TransposePerm(inputs[0].size(), attrs);
  Dims out;
  for (size_t axis : perm) out.push_back(inputs[0][axis]);
  return {out};
}

// Which axes squeeze removes. axis None removes every size-1 dim, which an Any
// dim makes undecidable; a listed Any dim is removed and checked at run time.
std::vector<bool> SqueezedAxes(const Dims& in, const ir::Attrs& attrs) {
  std::vector<bool> squeezed(in.size(), false);
  if (attrs.IsNone("axis")) {
    for (size_t d = 0; d < in.size(); ++d) {
      if (in[d].is_any()) {
        throw Error("squeeze: axis must be given for an input with ? dimensions, got " +
                    DimsToString(in));
      }
      squeezed[d] = in[d].value() == 1;
    }
    return squeezed;
  }
  for (int64_t axis : attrs.GetIntList("axis")) {
    const size_t d = static_cast<size_t>(NormalizeAxis(axis, in.size(), "squeeze"));
    if (squeezed[d]) throw Error("squeeze: axis " + std::to_string(axis) + " is given twice");
    if (in[d].is_static() && in[d].value() != 1) {
      throw Error("squeeze: dimension " + std::to_string(d) + " of " + DimsToString(in) + " is " +
                  in[d].ToString() + ", not 1");
    }
    squeezed[d] = true;
  }
  return squeezed;
}

std::vector<Dims> SqueezeRule(const std::vector<Dims>& inputs, const ir::Attrs& attrs) {
  const std::vector<bool> squeezed = SqueezedAxes(inputs[0], attrs);
  Dims out;
  for (size_t d = 0; d < inputs[0].size(); ++d) {
    if (!squeezed[d]) out.push_back(inputs[0][d]);
  }
  return {out};
}

std::vector<Dims> ExpandDimsRule(const std::vector<Dims>& inputs, const ir::Attrs& attrs) {
  const Dims& in = inputs[0];
  const int64_t axis = NormalizeInsertAxis(attrs.GetInt("axis"), in.size(), "expand_dims");
  const int64_t count = attrs.GetInt("num_newaxis");
  if (count < 0) {
    throw Error("expand_dims: num_newaxis must not be negative, got " + std::to_string(count));
  }
  Dims out(in.begin(), in.begin() + axis);
  out.insert(out.end(), count, Dim(1));
  out.insert(out.end(), in.begin() + axis, in.end());
  return {out};
}

// ---------------------------------------------------------------------------
// concatenate, stack, split

std::vector<Dims> ConcatenateRule(const std::vector<Dims>& inputs, const ir::Attrs& attrs) {
  if (inputs.empty()) throw Error("concatenate: the tuple holds no tensors");
  const size_t axis =
      static_cast<size_t>(NormalizeAxis(attrs.GetInt("axis"), inputs[0].size(), "concatenate"));
  Dims out = UnifyInputDims(inputs, axis, "concatenate");
  Dims lengths;
  for (const Dims& input : inputs) lengths.push_back(input[axis]);
  int64_t total = 0;
  for (const Dim& length : lengths) {
    if (length.is_any()) {
      total = -1;
      break;
    }
    total += length.value();
  }
  out[axis] = total < 0 ? Dim::Any() : Dim(total);
  return {out};
}

std::vector<Dims> StackRule(const std::vector<Dims>& inputs, const ir::Attrs& attrs) {
  if (inputs.empty()) throw Error("stack: the tuple holds no tensors");
  const int64_t axis = NormalizeInsertAxis(attrs.GetInt("axis"), inputs[0].size(), "stack");
  Dims out = UnifyInputDims(inputs, inputs[0].size(), "stack");
  out.insert(out.begin() + axis, Dim(static_cast<int64_t>(inputs.size())));
  return {out};
}

// An int is a number of equal sections; a list holds the ascending indices
// where the pieces start (numpy.split).
std::vector<Dims> SplitRule(const std::vector<Dims>& inputs, const ir::Attrs& attrs) {
  const Dims& in = inputs[0];
  const size_t axis = static_cast<size_t>(NormalizeAxis(attrs.GetInt("axis"), in.size(), "split"));
  const Dim length = in[axis];
  const ir::AttrValue& split = *attrs.Find("indices_or_sections");
  std::vector<Dims> pieces;
  if (const int64_t* sections = std::get_if<int64_t>(&split)) {
    if (*sections <= 0) {
      throw Error("split: the number of sections must be positive, got " +
                  std::to_string(*sections));
    }
    if (length.is_static() && length.value() % *sections != 0) {
      throw Error("split: cannot split " + DimsToString(in) + " into " + std::to_string(*sections) +
                  " equal sections along axis " + std::to_string(axis));
    }
    Dims piece = in;
    piece[axis] = length.is_any() ? Dim::Any() : Dim(length.value() / *sections);
    pieces.assign(static_cast<size_t>(*sections), piece);
    return pieces;
  }
  const std::vector<int64_t>& indices = std::get<std::vector<int64_t>>(split);
  int64_t start = 0;
  for (int64_t index : indices) {
    if (index < start || (length.is_static() && index > length.value())) {
      throw Error("split: indices " + IntsToString(indices) + " must ascend within dimension " +
                  std::to_string(axis) + " of " + DimsToString(in));
    }
    pieces.push_back(in);
    pieces.back()[axis] = index - start;
    start = index;
  }
  pieces.push_back(in);
  pieces.back()[axis] = length.is_any() ? Dim::Any() : Dim(length.value() - start);
  return pieces;
}

// ---------------------------------------------------------------------------
// take

enum class TakeMode { kClip, kWrap, kFast };

TakeMode ParseTakeMode(const ir::Attrs& attrs) {
  const std::string& mode = attrs.GetString("mode");
  if (mode == "clip") return TakeMode::kClip;
  if (mode == "wrap") return TakeMode::kWrap;
  if (mode == "fast") return TakeMode::kFast;
  throw Error("take: mode must be \"clip\", \"wrap\" or \"fast\", got \"" + mode + "\"");
}

struct TakeAxes {
  size_t axis;
  size_t batch_dims;
};

// Only called when the axis attribute is set.
TakeAxes ResolveTakeAxes(size_t data_rank, size_t indices_rank, const ir::Attrs& attrs) {
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

// axis None indexes the flattened data; otherwise the result is
// data[:axis] + indices[batch_dims:] + data[axis + 1:], the leading batch_dims
// dims shared by data and indices.
std::vector<Dims> TakeRule(const std::vector<Dims>& inputs, const ir::Attrs& attrs) {
  ParseTakeMode(attrs);
  const Dims& data = inputs[0];
  const Dims& indices = inputs[1];
  if (attrs.IsNone("axis")) return {indices};
  const TakeAxes axes = ResolveTakeAxes(data.size(), indices.size(), attrs);
  Dims out(data.begin(), data.begin() + axes.axis);
  for (size_t d = 0; d < axes.batch_dims; ++d) {
    const std::optional<Dim> dim = UnifyDim(data[d], indices[d]);
    if (!dim) {
      throw Error("take: batch dimension " + std::to_string(d) + " differs between data " +
                  DimsToString(data) + " and indices " + DimsToString(indices));
    }
    out[d] = *dim;
  }
  out.insert(out.end(), indices.begin() + axes.batch_dims, indices.end());
  out.insert(out.end(), data.begin() + axes.axis + 1, data.end());
  return {out};
}

// ---------------------------------------------------------------------------
// strided_slice, dyn.strided_slice

struct SliceSpec {
  std::vector<int64_t> begin;
  std::vector<int64_t> end;
  std::vector<int64_t> strides;  // missing entries are 1
  std::optional<std::vector<int64_t>> axes;
  bool size_mode = false;  // `end` holds sizes (slice_mode="size"); strides are then 1
};

// Per data axis: the first index read and the step (meaningful where the
// extent is static), and the output dims.
struct SlicePlan {
  std::vector<int64_t> begin;
  std::vector<int64_t> stride;
  Dims out;
};

bool ParseSliceMode(const ir::Attrs& attrs, const std::string& op) {
  const std::string& mode = attrs.GetString("slice_mode");
  if (mode != "end" && mode != "size") {
    throw Error(op + ": slice_mode must be \"end\" or \"size\", got \"" + mode + "\"");
  }
  return mode == "size";
}

// Relay's canonicalisation of one axis: negative indices count from the end,
// then indices clamp to [0, extent] (to [-1, extent - 1] for a negative stride);
// an empty range gives size 0.
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

SlicePlan PlanSlice(const Dims& in, const SliceSpec& spec, const std::string& op) {
  const int64_t ndim = static_cast<int64_t>(in.size());
  std::vector<size_t> axes;
  if (spec.axes) {
    std::vector<bool> seen(in.size(), false);
    for (int64_t axis : *spec.axes) {
      axes.push_back(static_cast<size_t>(NormalizeAxis(axis, ndim, op)));
      if (seen[axes.back()]) throw Error(op + ": axis " + std::to_string(axis) + " is given twice");
      seen[axes.back()] = true;
    }
    if (spec.begin.size() != axes.size() || spec.end.size() != axes.size()) {
      throw Error(op + ": begin " + IntsToString(spec.begin) + " and end " +
                  IntsToString(spec.end) + " must have one entry per axis in " +
                  IntsToString(*spec.axes));
    }
  } else {
    if (spec.begin.size() > in.size() || spec.end.size() > in.size()) {
      throw Error(op + ": begin " + IntsToString(spec.begin) + " and end " +
                  IntsToString(spec.end) + " have more entries than the rank of " +
                  DimsToString(in));
    }
    for (size_t d = 0; d < in.size(); ++d) axes.push_back(d);
  }
  if (spec.strides.size() > axes.size()) {
    throw Error(op + ": strides " + IntsToString(spec.strides) +
                " have more entries than the sliced axes");
  }
  SlicePlan plan{std::vector<int64_t>(in.size(), 0), std::vector<int64_t>(in.size(), 1), in};
  for (size_t k = 0; k < axes.size(); ++k) {
    const size_t axis = axes[k];
    const int64_t stride = spec.size_mode || k >= spec.strides.size() ? 1 : spec.strides[k];
    if (stride == 0) throw Error(op + ": stride 0 on axis " + std::to_string(axis));
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
    const int64_t begin = k < spec.begin.size() ? spec.begin[k] : (stride > 0 ? 0 : kMax);
    const int64_t end = k < spec.end.size() ? spec.end[k]
                        : spec.size_mode    ? -1
                        : stride > 0        ? kMax
                                            : kMin;
    if (in[axis].is_any()) {
      plan.out[axis] = Dim::Any();
      continue;
    }
    int64_t size = 0;
    PlanAxis(begin, end, stride, spec.size_mode, in[axis].value(), &plan.begin[axis], &size);
    plan.out[axis] = size;
    // A step is only taken between two elements; keeping a huge one would
    // overflow the byte strides.
    plan.stride[axis] = size > 1 ? stride : 1;
  }
  return plan;
}

SliceSpec SliceSpecFromAttrs(const ir::Attrs& attrs) {
  SliceSpec spec;
  spec.begin = attrs.GetIntList("begin");
  spec.end = attrs.GetIntList("end");
  if (!attrs.IsNone("strides")) spec.strides = attrs.GetIntList("strides");
  if (!attrs.IsNone("axes")) spec.axes = attrs.GetIntList("axes");
  spec.size_mode = ParseSliceMode(attrs, "strided_slice");
  return spec;
}

// dyn.strided_slice's inputs are data, begin, end, strides.
SliceSpec SliceSpecFromTensors(vm::TensorArgs inputs, const ir::Attrs& attrs) {
  SliceSpec spec;
  spec.begin = vm::ElementsAsInt64(*inputs[1]);
  spec.end = vm::ElementsAsInt64(*inputs[2]);
  spec.strides = vm::ElementsAsInt64(*inputs[3]);
  spec.size_mode = ParseSliceMode(attrs, "dyn.strided_slice");
  return spec;
}

std::vector<Dims> StridedSliceRule(const std::vector<Dims>& inputs, const ir::Attrs& attrs) {
  return {PlanSlice(inputs[0], SliceSpecFromAttrs(attrs), "strided_slice").out};
}

// ---------------------------------------------------------------------------
// Type relations and shape functions built from the rules.

using DimsRule = std::vector<Dims> (*)(const std::vector<Dims>& inputs, const ir::Attrs& attrs);
using DTypeCheck = void (*)(const std::vector<ir::TensorType>& inputs, const std::string& op);

enum class TupleUse {
  kNone,    // tensors in, one tensor out
  kInput,   // one tuple of tensors in (concatenate, stack)
  kOutput,  // a tuple of tensors out (split)
};

// The tensor types of the arguments, a tuple argument contributing its fields.
// False while one of them is still unknown.
bool CollectInputTypes(const std::vector<ir::Type>& types, TupleUse tuples, const std::string& op,
                       std::vector<ir::TensorType>* inputs) {
  for (size_t i = 0; i + 1 < types.size(); ++i) {
    const ir::Type& arg = types[i];
    if (tuples != TupleUse::kInput) {
      ir::TensorType tensor = AsTensorType(arg, op, "argument " + std::to_string(i));
      if (!tensor) return false;
      inputs->push_back(tensor);
      continue;
    }
    if (!arg || arg->kind == ir::TypeKind::kIncomplete || arg->kind == ir::TypeKind::kTypeVar) {
      return false;
    }
    if (arg->kind != ir::TypeKind::kTuple) {
      throw Error(op + ": argument " + std::to_string(i) + " must be a tuple of tensors, got " +
                  ir::TypeToString(arg));
    }
    const std::vector<ir::Type>& fields = arg.as<ir::TupleTypeNode>()->fields;
    for (size_t f = 0; f < fields.size(); ++f) {
      ir::TensorType tensor = AsTensorType(fields[f], op, "tuple field " + std::to_string(f));
      if (!tensor) return false;
      inputs->push_back(tensor);
    }
  }
  return true;
}

TypeRelation DimsRelation(std::string op, DimsRule rule, TupleUse tuples, DTypeCheck check) {
  return [op, rule, tuples, check](const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                                   TypeReporter& reporter) {
    std::vector<ir::TensorType> inputs;
    if (!CollectInputTypes(types, tuples, op, &inputs)) return false;
    std::vector<Dims> input_dims;
    for (const ir::TensorType& input : inputs) input_dims.push_back(input->shape);
    const std::vector<Dims> outputs = rule(input_dims, attrs);
    if (check) check(inputs, op);
    const DataType dtype = inputs[0]->dtype;
    if (tuples == TupleUse::kOutput) {
      std::vector<ir::Type> fields;
      for (const Dims& dims : outputs) fields.push_back(ir::MakeTensorType(dims, dtype));
      reporter.Assign(types.back(), ir::MakeTupleType(std::move(fields)));
    } else {
      reporter.Assign(types.back(), ir::MakeTensorType(outputs[0], dtype));
    }
    return true;
  };
}

ShapeFunction DimsShapeFunc(DimsRule rule) {
  return [rule](std::span<const Shape> input_shapes, vm::TensorArgs, const ir::Attrs& attrs) {
    std::vector<Dims> inputs;
    for (const Shape& shape : input_shapes) inputs.push_back(ToDims(shape));
    std::vector<Shape> outputs;
    for (const Dims& dims : rule(inputs, attrs)) outputs.push_back(ToShape(dims));
    return outputs;
  };
}

void CheckSameDTypes(const std::vector<ir::TensorType>& inputs, const std::string& op) {
  for (size_t i = 1; i < inputs.size(); ++i) {
    if (inputs[i]->dtype != inputs[0]->dtype) {
      throw Error(op + ": tuple fields differ in dtype: " + inputs[0]->dtype.name() + " and " +
                  inputs[i]->dtype.name());
    }
  }
}

void CheckTakeIndices(const std::vector<ir::TensorType>& inputs, const std::string& op) {
  const DataType dtype = inputs[1]->dtype;
  if (dtype != DataType::Int32() && dtype != DataType::Int64()) {
    throw Error(op + ": indices must be int32 or int64, got " + dtype.name());
  }
}

// ---------------------------------------------------------------------------
// Kernels. Outputs come allocated with the shape function's shapes.

std::byte* Bytes(const Tensor& tensor) {
  return static_cast<std::byte*>(tensor->raw_data());
}

int64_t Product(const Shape& shape, size_t begin, size_t end) {
  return ShapeNumel(std::span<const int64_t>(shape).subspan(begin, end - begin));
}

std::vector<int64_t> RowMajorStrides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

// Copies the strided view of `src` with `shape` and per-dimension `strides`
// (in elements, possibly negative) into the dense `dst`. The element size is a
// template argument, so the inner copy compiles to one load and store, and a
// unit inner stride becomes one memcpy per row.
template <size_t kBytes>
void StridedCopyElements(const std::byte* src, std::byte* dst, const Shape& shape,
                         const std::vector<int64_t>& strides) {
  const int64_t numel = ShapeNumel(shape);
  if (numel == 0) return;
  if (shape.empty()) {
    std::memcpy(dst, src, kBytes);
    return;
  }
  const size_t ndim = shape.size();
  const int64_t inner = shape[ndim - 1];
  const int64_t inner_stride = strides[ndim - 1];
  std::vector<int64_t> index(ndim, 0);
  int64_t offset = 0;
  for (int64_t row = 0; row < numel / inner; ++row) {
    const std::byte* from = src + offset * static_cast<int64_t>(kBytes);
    if (inner_stride == 1) {
      std::memcpy(dst, from, static_cast<size_t>(inner) * kBytes);
    } else {
      for (int64_t k = 0; k < inner; ++k) {
        std::memcpy(dst + k * kBytes, from + k * inner_stride * static_cast<int64_t>(kBytes),
                    kBytes);
      }
    }
    dst += inner * kBytes;
    for (size_t d = ndim - 1; d-- > 0;) {
      offset += strides[d];
      if (++index[d] < shape[d]) break;
      offset -= strides[d] * shape[d];
      index[d] = 0;
    }
  }
}

void StridedCopy(const std::byte* src, const Tensor& out, const std::vector<int64_t>& strides) {
  const Shape& shape = out->shape();
  switch (out->dtype().bytes()) {
    case 1:
      return StridedCopyElements<1>(src, Bytes(out), shape, strides);
    case 2:
      return StridedCopyElements<2>(src, Bytes(out), shape, strides);
    case 4:
      return StridedCopyElements<4>(src, Bytes(out), shape, strides);
    case 8:
      return StridedCopyElements<8>(src, Bytes(out), shape, strides);
  }
  throw Error("unsupported element size of " + out->dtype().name());
}

// reshape and friends: the elements keep their row-major order.
void CopyKernel(std::span<const Tensor> inputs, std::span<Tensor> outputs, const ir::Attrs&) {
  std::memcpy(Bytes(outputs[0]), Bytes(inputs[0]), outputs[0]->nbytes());
}

void TransposeKernel(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                     const ir::Attrs& attrs) {
  const std::vector<int64_t> in_strides = RowMajorStrides(inputs[0]->shape());
  const std::vector<size_t> perm = TransposePerm(in_strides.size(), attrs);
  std::vector<int64_t> strides;
  for (size_t axis : perm) strides.push_back(in_strides[axis]);
  StridedCopy(Bytes(inputs[0]), outputs[0], strides);
}

void CopySlice(const Tensor& in, const Tensor& out, const SliceSpec& spec, const std::string& op) {
  if (out->numel() == 0) return;
  const SlicePlan plan = PlanSlice(ToDims(in->shape()), spec, op);
  const std::vector<int64_t> in_strides = RowMajorStrides(in->shape());
  int64_t offset = 0;
  std::vector<int64_t> strides;
  for (size_t d = 0; d < in_strides.size(); ++d) {
    offset += plan.begin[d] * in_strides[d];
    strides.push_back(plan.stride[d] * in_strides[d]);
  }
  StridedCopy(Bytes(in) + offset * static_cast<int64_t>(in->dtype().bytes()), out, strides);
}

void StridedSliceKernel(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                        const ir::Attrs& attrs) {
  CopySlice(inputs[0], outputs[0], SliceSpecFromAttrs(attrs), "strided_slice");
}

void DynStridedSliceKernel(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                           const ir::Attrs& attrs) {
  const vm::TensorArgViews views(inputs);
  CopySlice(inputs[0], outputs[0], SliceSpecFromTensors(views.args(), attrs), "dyn.strided_slice");
}

// For each of `outer` rows, the sources' next blocks (block_bytes[i] bytes of
// source i) are laid out one after another in `dst`.
void JoinBlocks(std::span<const Tensor> sources, const std::vector<size_t>& block_bytes,
                int64_t outer, std::byte* dst) {
  for (int64_t row = 0; row < outer; ++row) {
    for (size_t i = 0; i < sources.size(); ++i) {
      std::memcpy(dst, Bytes(sources[i]) + row * block_bytes[i], block_bytes[i]);
      dst += block_bytes[i];
    }
  }
}

void ConcatenateKernel(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                       const ir::Attrs& attrs) {
  const Shape& shape = outputs[0]->shape();
  const size_t axis =
      static_cast<size_t>(NormalizeAxis(attrs.GetInt("axis"), shape.size(), "concatenate"));
  const size_t inner_bytes = Product(shape, axis + 1, shape.size()) * outputs[0]->dtype().bytes();
  std::vector<size_t> block_bytes;
  for (const Tensor& input : inputs) block_bytes.push_back(input->shape()[axis] * inner_bytes);
  JoinBlocks(inputs, block_bytes, Product(shape, 0, axis), Bytes(outputs[0]));
}

void StackKernel(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                 const ir::Attrs& attrs) {
  const Shape& shape = inputs[0]->shape();
  const size_t axis =
      static_cast<size_t>(NormalizeInsertAxis(attrs.GetInt("axis"), shape.size(), "stack"));
  const size_t block = Product(shape, axis, shape.size()) * inputs[0]->dtype().bytes();
  JoinBlocks(inputs, std::vector<size_t>(inputs.size(), block), Product(shape, 0, axis),
             Bytes(outputs[0]));
}

void SplitKernel(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                 const ir::Attrs& attrs) {
  const Shape& shape = inputs[0]->shape();
  const size_t axis =
      static_cast<size_t>(NormalizeAxis(attrs.GetInt("axis"), shape.size(), "split"));
  const size_t inner_bytes = Product(shape, axis + 1, shape.size()) * inputs[0]->dtype().bytes();
  const std::byte* src = Bytes(inputs[0]);
  const int64_t outer = Product(shape, 0, axis);
  for (int64_t row = 0; row < outer; ++row) {
    for (const Tensor& output : outputs) {
      const size_t block = output->shape()[axis] * inner_bytes;
      std::memcpy(Bytes(output) + row * block, src, block);
      src += block;
    }
  }
}

// take as nested loops: data is (batch, outer, extent, inner) and indices are
// (batch, count); each index selects an `inner` block of data.
struct TakeGeometry {
  int64_t batch = 1;
  int64_t outer = 1;
  int64_t extent = 1;
  int64_t count = 1;
  size_t block_bytes = 0;
};

template <typename Index>
void TakeBlocks(const std::byte* src, const Index* indices, std::byte* dst, const TakeGeometry& g,
                TakeMode mode, const std::string& context) {
  for (int64_t b = 0; b < g.batch; ++b) {
    for (int64_t o = 0; o < g.outer; ++o) {
      const std::byte* rows = src + (b * g.outer + o) * g.extent * g.block_bytes;
      for (int64_t k = 0; k < g.count; ++k) {
        const int64_t index = indices[b * g.count + k];
        int64_t row = index;
        if (g.extent > 0 && mode == TakeMode::kClip) {
          row = std::clamp<int64_t>(index, 0, g.extent - 1);
        } else if (g.extent > 0 && mode == TakeMode::kWrap) {
          row = (index % g.extent + g.extent) % g.extent;
        }
        if (row < 0 || row >= g.extent) {
          throw Error("take: index " + std::to_string(index) + " is out of range for " + context);
        }
        std::memcpy(dst, rows + row * g.block_bytes, g.block_bytes);
        dst += g.block_bytes;
      }
    }
  }
}

void TakeKernel(std::span<const Tensor> inputs, std::span<Tensor> outputs, const ir::Attrs& attrs) {
  const Tensor& data = inputs[0];
  const Tensor& indices = inputs[1];
  const Shape& shape = data->shape();
  TakeGeometry g;
  std::string context;
  if (attrs.IsNone("axis")) {
    g.extent = data->numel();
    g.count = indices->numel();
    g.block_bytes = data->dtype().bytes();
    context = "the flattened data " + ShapeToString(shape);
  } else {
    const TakeAxes axes = ResolveTakeAxes(shape.size(), indices->shape().size(), attrs);
    g.batch = Product(shape, 0, axes.batch_dims);
    g.outer = Product(shape, axes.batch_dims, axes.axis);
    g.extent = shape[axes.axis];
    g.count = Product(indices->shape(), axes.batch_dims, indices->shape().size());
    g.block_bytes = Product(shape, axes.axis + 1, shape.size()) * data->dtype().bytes();
    context = "axis " + std::to_string(axes.axis) + " of " + ShapeToString(shape);
  }
  const TakeMode mode = ParseTakeMode(attrs);
  if (indices->dtype() == DataType::Int32()) {
    TakeBlocks(Bytes(data), indices->data<int32_t>(), Bytes(outputs[0]), g, mode, context);
  } else {
    TakeBlocks(Bytes(data), indices->data<int64_t>(), Bytes(outputs[0]), g, mode, context);
  }
}

// ---------------------------------------------------------------------------
// The data-dependent ops: their output dims are only known from input values.

void CheckShapeTensor(const ir::TensorType& tensor, const std::string& op,
                      const std::string& what) {
  if (tensor->ndim() != 1 || !tensor->dtype.is_int()) {
    throw Error(op + ": " + what + " must be a 1-D integer tensor, got " +
                ir::TypeToString(tensor));
  }
}

bool DynReshapeRelation(const std::vector<ir::Type>& types, const ir::Attrs&,
                        TypeReporter& reporter) {
  const ir::TensorType data = AsTensorType(types[0], "dyn.reshape", "data");
  const ir::TensorType newshape = AsTensorType(types[1], "dyn.reshape", "newshape");
  if (!data || !newshape) return false;
  CheckShapeTensor(newshape, "dyn.reshape", "newshape");
  if (newshape->shape[0].is_any()) {
    throw Error(
        "dyn.reshape: the length of newshape fixes the output rank and must be static, got " +
        ir::TypeToString(newshape));
  }
  const Dims out(static_cast<size_t>(newshape->shape[0].value()), Dim::Any());
  reporter.Assign(types.back(), ir::MakeTensorType(out, data->dtype));
  return true;
}

// Every value is one output dim, so only 0 and -1 keep the rank the type gave.
std::vector<Shape> DynReshapeShapeFunc(std::span<const Shape> input_shapes,
                                       vm::TensorArgs input_data, const ir::Attrs& attrs) {
  const std::vector<int64_t> newshape = vm::ElementsAsInt64(*input_data[1]);
  for (int64_t value : newshape) {
    if (value < -1) {
      throw Error("dyn.reshape: newshape " + ShapeToString(newshape) + " holds " +
                  std::to_string(value) + "; only sizes, 0 and -1 are supported");
    }
  }
  return {ToShape(
      InferReshape(ToDims(input_shapes[0]), newshape, attrs.GetBool("allowzero"), "dyn.reshape"))};
}

bool DynStridedSliceRelation(const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                             TypeReporter& reporter) {
  static const char* const kNames[] = {"data", "begin", "end", "strides"};
  std::vector<ir::TensorType> inputs;
  for (size_t i = 0; i < 4; ++i) {
    inputs.push_back(AsTensorType(types[i], "dyn.strided_slice", kNames[i]));
    if (!inputs.back()) return false;
    if (i > 0) CheckShapeTensor(inputs[i], "dyn.strided_slice", kNames[i]);
  }
  ParseSliceMode(attrs, "dyn.strided_slice");
  const Dims out(inputs[0]->ndim(), Dim::Any());
  reporter.Assign(types.back(), ir::MakeTensorType(out, inputs[0]->dtype));
  return true;
}

std::vector<Shape> DynStridedSliceShapeFunc(std::span<const Shape> input_shapes,
                                            vm::TensorArgs input_data, const ir::Attrs& attrs) {
  const SliceSpec spec = SliceSpecFromTensors(input_data, attrs);
  return {ToShape(PlanSlice(ToDims(input_shapes[0]), spec, "dyn.strided_slice").out)};
}

// ---------------------------------------------------------------------------
// Registration.

struct TransformOp {
  const char* name;
  const char* description;
  int num_inputs = 1;
  std::vector<AttrSpec> attrs;
  DimsRule rule;
  ReferenceKernel kernel;
  TupleUse tuples = TupleUse::kNone;
  DTypeCheck check_dtypes = nullptr;
  OpPattern pattern = OpPattern::kInjective;
};

void RegisterStatic(OpRegistry& registry, TransformOp op) {
  OpDef& def = registry.Register(op.name);
  def.description = op.description;
  def.min_inputs = def.max_inputs = op.num_inputs;
  def.attrs = std::move(op.attrs);
  def.relation = DimsRelation(op.name, op.rule, op.tuples, op.check_dtypes);
  def.shape_func = DimsShapeFunc(op.rule);
  def.shape_mode = ShapeFuncMode::kDataIndependent;
  def.pattern = op.pattern;
  def.kernel = std::move(op.kernel);
}

AttrSpec Required(const char* name, ir::AttrKind kind) {
  return {.name = name, .kind = kind, .default_value = {}, .required = true};
}
AttrSpec Optional(const char* name, ir::AttrKind kind, ir::AttrValue value = {}) {
  return {.name = name, .kind = kind, .default_value = std::move(value)};
}

}  // namespace

void RegisterTransformOps(OpRegistry& registry) {
  using K = ir::AttrKind;
  const AttrSpec allowzero = Optional("allowzero", K::kBool, false);
  const AttrSpec slice_mode = Optional("slice_mode", K::kString, std::string("end"));

  RegisterStatic(
      registry,
      {
          .name = "reshape",
          .description = "Reshapes data to newshape, with Relay's special values 0 (copy a dim), "
                         "-1 (infer), -2 (copy the rest), -3 (merge two dims), -4 (split a dim).",
          .attrs = {Required("newshape", K::kIntList), allowzero},
          .rule = ReshapeRule,
          .kernel = CopyKernel,
      });
  RegisterStatic(
      registry,
      {
          .name = "reshape_like",
          .description = "Reshapes data to the shape of shape_like (or data's dims outside "
                         "[lhs_begin, lhs_end) around shape_like's dims [rhs_begin, rhs_end)).",
          .num_inputs = 2,
          .attrs = {Optional("lhs_begin", K::kInt, int64_t{0}), Optional("lhs_end", K::kInt),
                    Optional("rhs_begin", K::kInt, int64_t{0}), Optional("rhs_end", K::kInt)},
          .rule = ReshapeLikeRule,
          .kernel = CopyKernel,
      });
  RegisterStatic(registry,
                 {
                     .name = "transpose",
                     .description = "Permutes the axes of data (axes None reverses them).",
                     .attrs = {Optional("axes", K::kIntList)},
                     .rule = TransposeRule,
                     .kernel = TransposeKernel,
                 });
  RegisterStatic(registry,
                 {
                     .name = "squeeze",
                     .description = "Removes the given size-1 axes (axis None: every size-1 axis).",
                     .attrs = {Optional("axis", K::kIntList)},
                     .rule = SqueezeRule,
                     .kernel = CopyKernel,
                 });
  RegisterStatic(registry, {
                               .name = "expand_dims",
                               .description = "Inserts num_newaxis size-1 axes at position axis.",
                               .attrs = {Required("axis", K::kInt),
                                         Optional("num_newaxis", K::kInt, int64_t{1})},
                               .rule = ExpandDimsRule,
                               .kernel = CopyKernel,
                               // As in TVM: the output indexes its input like a broadcast does.
                               .pattern = OpPattern::kBroadcast,
                           });
  RegisterStatic(registry, {
                               .name = "concatenate",
                               .description = "Joins a tuple of tensors along axis.",
                               .attrs = {Optional("axis", K::kInt, int64_t{0})},
                               .rule = ConcatenateRule,
                               .kernel = ConcatenateKernel,
                               .tuples = TupleUse::kInput,
                               .check_dtypes = CheckSameDTypes,
                           });
  RegisterStatic(registry,
                 {
                     .name = "stack",
                     .description = "Stacks a tuple of equally shaped tensors along a new axis.",
                     .attrs = {Optional("axis", K::kInt, int64_t{0})},
                     .rule = StackRule,
                     .kernel = StackKernel,
                     .tuples = TupleUse::kInput,
                     .check_dtypes = CheckSameDTypes,
                 });
  RegisterStatic(
      registry,
      {
          .name = "split",
          .description = "Splits data along axis into a tuple: indices_or_sections is a number of "
                         "equal sections or a list of split indices.",
          .attrs = {Required("indices_or_sections", K::kIntOrIntList),
                    Optional("axis", K::kInt, int64_t{0})},
          .rule = SplitRule,
          .kernel = SplitKernel,
          .tuples = TupleUse::kOutput,
      });
  RegisterStatic(
      registry,
      {
          .name = "take",
          .description = "Gathers elements of data at indices along axis (None: of the flattened "
                         "data); out-of-range indices are clipped, wrapped, or (fast) an error.",
          .num_inputs = 2,
          .attrs = {Optional("axis", K::kInt), Optional("batch_dims", K::kInt, int64_t{0}),
                    Optional("mode", K::kString, std::string("clip"))},
          .rule = TakeRule,
          .kernel = TakeKernel,
          .check_dtypes = CheckTakeIndices,
      });
  RegisterStatic(
      registry,
      {
          .name = "strided_slice",
          .description = "Slices data with begin, end and strides per axis (numpy semantics; "
                         "slice_mode \"size\" reads end as sizes).",
          .attrs = {Required("begin", K::kIntList), Required("end", K::kIntList),
                    Optional("strides", K::kIntList), Optional("axes", K::kIntList), slice_mode},
          .rule = StridedSliceRule,
          .kernel = StridedSliceKernel,
      });

  OpDef& dyn_reshape = registry.Register("dyn.reshape");
  dyn_reshape.description =
      "Reshapes data to the shape held by the 1-D tensor newshape (sizes, 0 and -1).";
  dyn_reshape.min_inputs = dyn_reshape.max_inputs = 2;
  dyn_reshape.attrs = {allowzero};
  dyn_reshape.relation = DynReshapeRelation;
  dyn_reshape.shape_func = DynReshapeShapeFunc;
  dyn_reshape.shape_mode = ShapeFuncMode::kDataDependent;
  dyn_reshape.pattern = OpPattern::kInjective;
  dyn_reshape.kernel = CopyKernel;

  OpDef& dyn_slice = registry.Register("dyn.strided_slice");
  dyn_slice.description = "strided_slice with begin, end and strides given as 1-D integer tensors.";
  dyn_slice.min_inputs = dyn_slice.max_inputs = 4;
  dyn_slice.attrs = {slice_mode};
  dyn_slice.relation = DynStridedSliceRelation;
  dyn_slice.shape_func = DynStridedSliceShapeFunc;
  dyn_slice.shape_mode = ShapeFuncMode::kDataDependent;
  dyn_slice.pattern = OpPattern::kInjective;
  dyn_slice.kernel = DynStridedSliceKernel;
}

}  // namespace nimble::op
