// The output-shape rules of the transform family (reshape, reshape_like,
// transpose, squeeze, expand_dims, concatenate, stack, split, take,
// strided_slice), each written once as a template over the dimension type D
// and run by both halves of the op:
//   - the runtime's shape functions (transform.cc) run it on StaticDim, sizes
//     known exactly, so every check is exact [paper 4.2];
//   - the compiler's type relations (compiler/op/transform.cc) run it on
//     ir::Dim, where Any propagates and only contradictions between static
//     sizes fail [paper 4.1].
// A relation and its shape function therefore cannot disagree, and a check
// the relation deferred on `?` fails at run time with the same message.
//
// D provides D(int64_t), is_any(), is_static(), value(), ToString() and ==. A
// rule never makes an Any of its own, it only passes on an input's, so the
// runtime's StaticDim needs no Any and its is_any() folds the Any branches away.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nimble/vm/attrs.h"
#include "nimble/vm/error.h"
#include "nimble/vm/kernels/op_kernel.h"
#include "nimble/vm/kernels/shape_util.h"
#include "nimble/vm/shape.h"
#include "nimble/vm/tensor.h"

namespace nimble::vm::transform {

// A dimension whose size is known: the shape functions' D.
class StaticDim {
 public:
  constexpr StaticDim(int64_t value) : value_(value) {}  // NOLINT: sizes convert implicitly.
  static constexpr bool is_any() { return false; }
  static constexpr bool is_static() { return true; }
  constexpr int64_t value() const { return value_; }
  std::string ToString() const { return std::to_string(value_); }
  constexpr bool operator==(const StaticDim&) const = default;

 private:
  int64_t value_;
};

template <typename D>
using DimsOf = std::vector<D>;

// A rule: the output dims of every output from the input dims and attributes.
template <typename D>
using Rule = std::vector<DimsOf<D>> (*)(const std::vector<DimsOf<D>>& inputs, const Attrs& attrs);

// ---------------------------------------------------------------------------
// Dimension arithmetic shared by the rules.

template <typename D>
std::string DimsToString(const DimsOf<D>& dims) {
  std::string text = "(";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) text += ", ";
    text += dims[i].ToString();
  }
  if (dims.size() == 1) text += ",";
  return text + ")";
}

template <typename D>
bool AllStatic(const DimsOf<D>& dims) {
  return std::all_of(dims.begin(), dims.end(), [](const D& dim) { return dim.is_static(); });
}

// Only called on static dims.
template <typename D>
Shape ToShape(const DimsOf<D>& dims) {
  Shape shape;
  shape.reserve(dims.size());
  for (const D& dim : dims) shape.push_back(dim.value());
  return shape;
}

// The compiler's dims (ir::Dim) may be Any, with an upper bound or not; the
// shape functions' StaticDim is always a size. These keep a bound where
// there is one.
template <typename D>
constexpr bool kDimsCanBeAny = requires(const D& dim) {
  dim.upper_bound();
};

// The largest size `dim` can take, or nullopt.
template <typename D>
std::optional<int64_t> UpperBound(const D& dim) {
  if constexpr (kDimsCanBeAny<D>) {
    return dim.upper_bound();
  } else {
    return dim.value();
  }
}

// An Any of at most `bound` (unbounded without one). A rule asks for one
// only when an input is Any, which a StaticDim never is.
template <typename D>
D AnyAtMost(std::optional<int64_t> bound) {
  if constexpr (kDimsCanBeAny<D>) {
    return D::AnyAtMost(bound);
  } else {
    throw Error("a shape function's dims are all sizes");
  }
}

// The product of `dims`: 0 when one is 0 (whatever the others are), otherwise
// Any when there is one, bounded by the product of upper bounds when every
// dim has one.
template <typename D>
D DimProduct(const DimsOf<D>& dims) {
  int64_t product = 1;
  std::optional<int64_t> bound = 1;
  bool any = false;
  for (const D& dim : dims) {
    if (dim.is_static() && dim.value() == 0) return D(0);
    const std::optional<int64_t> upper = UpperBound(dim);
    if (bound && (!upper || __builtin_mul_overflow(*bound, *upper, &*bound))) bound.reset();
    if (dim.is_any()) {
      any = true;
    } else if (__builtin_mul_overflow(product, dim.value(), &product)) {
      throw Error("shape " + DimsToString(dims) + " has too many elements");
    }
  }
  if (!any) return D(product);
  return AnyAtMost<D>(bound);
}

// The dimension two inputs must share: the static one when only one is static
// (two Any: the tighter bound); nullopt when two static sizes differ.
template <typename D>
std::optional<D> UnifyDim(D a, D b) {
  if (a.is_any() && b.is_any()) {
    const std::optional<int64_t> x = UpperBound(a), y = UpperBound(b);
    return x && (!y || *x <= *y) ? a : b;
  }
  if (a.is_any()) return b;
  if (b.is_any() || a == b) return a;
  return std::nullopt;
}

// The dimensions shared by `inputs` (all of one rank), except `skip_axis`,
// which is copied from input 0. The error names both shapes and the dimension.
template <typename D>
DimsOf<D> UnifyInputDims(const std::vector<DimsOf<D>>& inputs, size_t skip_axis,
                         const std::string& op) {
  DimsOf<D> unified = inputs[0];
  std::vector<size_t> source(unified.size(), 0);  // the input each static size came from
  for (size_t i = 1; i < inputs.size(); ++i) {
    if (inputs[i].size() != unified.size()) {
      throw Error(op + ": input " + std::to_string(i) + " " + DimsToString(inputs[i]) +
                  " and input 0 " + DimsToString(inputs[0]) + " differ in rank");
    }
    for (size_t d = 0; d < unified.size(); ++d) {
      if (d == skip_axis) continue;
      const std::optional<D> dim = UnifyDim(unified[d], inputs[i][d]);
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
int64_t NormalizeInsertAxis(int64_t axis, int64_t ndim, const std::string& op);

// ---------------------------------------------------------------------------
// reshape, dyn.reshape, reshape_like

// Relay's reshape: a positive value is a size; 0 copies the input dimension at
// the same position (or is a literal 0 with allowzero); -1 is inferred from the
// element count; -2 copies all remaining input dimensions; -3 merges the next
// two; -4 splits the next one into the two values that follow (one may be -1).
// Dims derived from input dims (by 0, -2, -3, -4) are known exactly, so -1 is
// the ratio of the remaining input and output dims and stays static when only
// copied dims are Any: (?, 3, 4) into (0, -1) is (?, 12).
template <typename D>
DimsOf<D> InferReshape(const DimsOf<D>& in, const std::vector<int64_t>& newshape, bool allowzero,
                       const std::string& op) {
  auto fail = [&](const std::string& why) {
    return Error(op + ": cannot reshape " + DimsToString(in) + " into " + ShapeToString(newshape) +
                 (why.empty() ? "" : " (" + why + ")"));
  };
  DimsOf<D> out;
  std::vector<bool> in_derived(in.size(), false);
  std::vector<bool> out_derived;
  std::optional<size_t> infer_at;
  size_t src = 0;
  auto emit = [&](D dim, bool derived) {
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
      const D first = consume(value);
      const D second = consume(value);
      emit(DimProduct(DimsOf<D>{first, second}), true);
    } else if (value == -4) {
      if (i + 2 >= newshape.size()) throw fail("-4 must be followed by two sizes");
      const D whole = consume(value);
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
      // A -1 left here means `whole` is Any.
      emit(first == -1 ? whole : D(first), true);
      emit(second == -1 ? whole : D(second), true);
    } else {
      throw fail("unsupported special value " + std::to_string(value));
    }
  }
  if (infer_at) {
    DimsOf<D> rest_in;
    for (size_t i = 0; i < in.size(); ++i) {
      if (!in_derived[i]) rest_in.push_back(in[i]);
    }
    DimsOf<D> rest_out;
    for (size_t i = 0; i < out.size(); ++i) {
      if (!out_derived[i] && i != *infer_at) rest_out.push_back(out[i]);
    }
    const D numerator = DimProduct(rest_in);
    const int64_t denominator = DimProduct(rest_out).value();
    if (numerator.is_static()) {
      if (denominator == 0) throw fail("-1 is ambiguous next to a size of 0");
      if (numerator.value() % denominator != 0) throw fail("");
      out[*infer_at] = D(numerator.value() / denominator);
    } else {
      // At most the numerator's bound over the other output dims.
      const std::optional<int64_t> bound = UpperBound(numerator);
      out[*infer_at] = AnyAtMost<D>(
          bound && denominator > 0 ? std::optional<int64_t>(*bound / denominator) : std::nullopt);
    }
  }
  // With a static input every output dim is static too.
  if (AllStatic(in) && ShapeNumel(ToShape(in)) != ShapeNumel(ToShape(out))) throw fail("");
  return out;
}

template <typename D>
std::vector<DimsOf<D>> ReshapeRule(const std::vector<DimsOf<D>>& inputs, const Attrs& attrs) {
  return {
      InferReshape(inputs[0], attrs.GetIntList("newshape"), attrs.GetBool("allowzero"), "reshape")};
}

// [begin, end) of a dimension range given as attributes (end None = rank).
std::pair<size_t, size_t> NormalizeRange(const Attrs& attrs, const std::string& begin_name,
                                         const std::string& end_name, size_t rank,
                                         const std::string& op);

// data's dims [0, lhs_begin) and [lhs_end, rank) around shape_like's dims
// [rhs_begin, rhs_end); by default simply shape_like's shape.
template <typename D>
std::vector<DimsOf<D>> ReshapeLikeRule(const std::vector<DimsOf<D>>& inputs, const Attrs& attrs) {
  const DimsOf<D>& data = inputs[0];
  const DimsOf<D>& like = inputs[1];
  const auto [lhs_begin, lhs_end] =
      NormalizeRange(attrs, "lhs_begin", "lhs_end", data.size(), "reshape_like");
  const auto [rhs_begin, rhs_end] =
      NormalizeRange(attrs, "rhs_begin", "rhs_end", like.size(), "reshape_like");
  DimsOf<D> out(data.begin(), data.begin() + lhs_begin);
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
std::vector<size_t> TransposePerm(size_t rank, const Attrs& attrs);

template <typename D>
std::vector<DimsOf<D>> TransposeRule(const std::vector<DimsOf<D>>& inputs, const Attrs& attrs) {
  DimsOf<D> out;
  for (size_t axis : TransposePerm(inputs[0].size(), attrs)) out.push_back(inputs[0][axis]);
  return {out};
}

// Which axes squeeze removes. axis None removes every size-1 dim, which an Any
// dim makes undecidable; a listed Any dim is removed and checked at run time.
template <typename D>
std::vector<bool> SqueezedAxes(const DimsOf<D>& in, const Attrs& attrs) {
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

template <typename D>
std::vector<DimsOf<D>> SqueezeRule(const std::vector<DimsOf<D>>& inputs, const Attrs& attrs) {
  const std::vector<bool> squeezed = SqueezedAxes(inputs[0], attrs);
  DimsOf<D> out;
  for (size_t d = 0; d < inputs[0].size(); ++d) {
    if (!squeezed[d]) out.push_back(inputs[0][d]);
  }
  return {out};
}

template <typename D>
std::vector<DimsOf<D>> ExpandDimsRule(const std::vector<DimsOf<D>>& inputs, const Attrs& attrs) {
  const DimsOf<D>& in = inputs[0];
  const int64_t axis = NormalizeInsertAxis(attrs.GetInt("axis"), in.size(), "expand_dims");
  const int64_t count = attrs.GetInt("num_newaxis");
  if (count < 0) {
    throw Error("expand_dims: num_newaxis must not be negative, got " + std::to_string(count));
  }
  if (count > kMaxRank - static_cast<int64_t>(in.size())) {
    throw Error("expand_dims: num_newaxis " + std::to_string(count) + " gives a rank above " +
                std::to_string(kMaxRank) + ", the most a tensor may have");
  }
  DimsOf<D> out(in.begin(), in.begin() + axis);
  out.insert(out.end(), count, D(1));
  out.insert(out.end(), in.begin() + axis, in.end());
  return {out};
}

// ---------------------------------------------------------------------------
// concatenate, stack, split

template <typename D>
std::vector<DimsOf<D>> ConcatenateRule(const std::vector<DimsOf<D>>& inputs, const Attrs& attrs) {
  if (inputs.empty()) throw Error("concatenate: the tuple holds no tensors");
  const size_t axis =
      static_cast<size_t>(NormalizeAxis(attrs.GetInt("axis"), inputs[0].size(), "concatenate"));
  DimsOf<D> out = UnifyInputDims(inputs, axis, "concatenate");
  int64_t total = 0;
  for (const DimsOf<D>& input : inputs) {
    if (input[axis].is_any()) {
      out[axis] = input[axis];
      return {out};
    }
    total += input[axis].value();
  }
  out[axis] = D(total);
  return {out};
}

template <typename D>
std::vector<DimsOf<D>> StackRule(const std::vector<DimsOf<D>>& inputs, const Attrs& attrs) {
  if (inputs.empty()) throw Error("stack: the tuple holds no tensors");
  const int64_t axis = NormalizeInsertAxis(attrs.GetInt("axis"), inputs[0].size(), "stack");
  DimsOf<D> out = UnifyInputDims(inputs, inputs[0].size(), "stack");
  out.insert(out.begin() + axis, D(static_cast<int64_t>(inputs.size())));
  return {out};
}

// The number of sections, when indices_or_sections holds one.
std::optional<int64_t> SplitSections(const Attrs& attrs);

// An int is a number of equal sections; a list holds the ascending indices
// where the pieces start (numpy.split).
template <typename D>
std::vector<DimsOf<D>> SplitRule(const std::vector<DimsOf<D>>& inputs, const Attrs& attrs) {
  const DimsOf<D>& in = inputs[0];
  const size_t axis = static_cast<size_t>(NormalizeAxis(attrs.GetInt("axis"), in.size(), "split"));
  const D length = in[axis];
  std::vector<DimsOf<D>> pieces;
  if (const std::optional<int64_t> sections = SplitSections(attrs)) {
    if (length.is_static() && length.value() % *sections != 0) {
      throw Error("split: cannot split " + DimsToString(in) + " into " + std::to_string(*sections) +
                  " equal sections along axis " + std::to_string(axis));
    }
    DimsOf<D> piece = in;
    if (length.is_static()) piece[axis] = D(length.value() / *sections);
    pieces.assign(static_cast<size_t>(*sections), piece);
    return pieces;
  }
  const std::vector<int64_t>& indices = attrs.GetIntList("indices_or_sections");
  int64_t start = 0;
  for (int64_t index : indices) {
    if (index < start || (length.is_static() && index > length.value())) {
      throw Error("split: indices " + AttrValueToString(indices) +
                  " must ascend within dimension " + std::to_string(axis) + " of " +
                  DimsToString(in));
    }
    pieces.push_back(in);
    pieces.back()[axis] = D(index - start);
    start = index;
  }
  pieces.push_back(in);
  if (length.is_static()) pieces.back()[axis] = D(length.value() - start);
  return pieces;
}

// ---------------------------------------------------------------------------
// take

enum class TakeMode { kClip, kWrap, kFast };

TakeMode ParseTakeMode(const Attrs& attrs);

struct TakeAxes {
  size_t axis;
  size_t batch_dims;
};

// Only called when the axis attribute is set.
TakeAxes ResolveTakeAxes(size_t data_rank, size_t indices_rank, const Attrs& attrs);

// The row an index selects along an axis of `extent` rows: clip clamps it,
// wrap takes it modulo the extent, fast takes it as it is; nullopt when the
// result is out of range (any index when the extent is 0).
std::optional<int64_t> TakeRow(int64_t index, int64_t extent, TakeMode mode);

// axis None indexes the flattened data; otherwise the result is
// data[:axis] + indices[batch_dims:] + data[axis + 1:], the leading batch_dims
// dims shared by data and indices.
template <typename D>
std::vector<DimsOf<D>> TakeRule(const std::vector<DimsOf<D>>& inputs, const Attrs& attrs) {
  ParseTakeMode(attrs);
  const DimsOf<D>& data = inputs[0];
  const DimsOf<D>& indices = inputs[1];
  if (attrs.IsNone("axis")) return {indices};
  const TakeAxes axes = ResolveTakeAxes(data.size(), indices.size(), attrs);
  DimsOf<D> out(data.begin(), data.begin() + axes.axis);
  for (size_t d = 0; d < axes.batch_dims; ++d) {
    const std::optional<D> dim = UnifyDim(data[d], indices[d]);
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

// Entry k of a slice's begin, end and stride, with the defaults for entries
// the attributes leave out: the whole axis in the stride's direction.
struct SliceEntry {
  int64_t begin, end, stride;
};
inline SliceEntry SliceEntryAt(const SliceSpec& spec, size_t k) {
  const int64_t stride = spec.size_mode || k >= spec.strides.size() ? 1 : spec.strides[k];
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  const int64_t begin = k < spec.begin.size() ? spec.begin[k] : (stride > 0 ? 0 : kMax);
  const int64_t end = k < spec.end.size() ? spec.end[k]
                      : spec.size_mode    ? -1
                      : stride > 0        ? kMax
                                          : kMin;
  return {begin, end, stride};
}

// Per data axis: the first index read and the step (meaningful where the
// extent is static), and the output dims.
template <typename D>
struct SlicePlan {
  std::vector<int64_t> begin;
  std::vector<int64_t> stride;
  DimsOf<D> out;
};

// True for slice_mode "size"; the error names `op`.
bool ParseSliceMode(const Attrs& attrs, const std::string& op);

// Relay's canonicalisation of one axis of a static extent: the first index
// read and the number of elements.
void PlanAxis(int64_t begin, int64_t end, int64_t stride, bool size_mode, int64_t extent,
              int64_t* first, int64_t* size);

// The data axes `spec` slices, in its order; the errors name `op`.
std::vector<size_t> SlicedAxes(const SliceSpec& spec, size_t rank, const std::string& in_text,
                               const std::string& op);

// The most elements a slice of a run-time extent of at most `extent_bound`
// can have: a range from a non-negative begin to a non-negative end holds at
// most its length, whatever the extent. None when the extent is unbounded.
std::optional<int64_t> SliceBound(std::optional<int64_t> extent_bound, int64_t begin, int64_t end,
                                  int64_t stride, bool size_mode);

template <typename D>
SlicePlan<D> PlanSlice(const DimsOf<D>& in, const SliceSpec& spec, const std::string& op) {
  const std::vector<size_t> axes = SlicedAxes(spec, in.size(), DimsToString(in), op);
  SlicePlan<D> plan{std::vector<int64_t>(in.size(), 0), std::vector<int64_t>(in.size(), 1), in};
  for (size_t k = 0; k < axes.size(); ++k) {
    const size_t axis = axes[k];
    const auto [begin, end, stride] = SliceEntryAt(spec, k);
    if (stride == 0) throw Error(op + ": stride 0 on axis " + std::to_string(axis));
    if (in[axis].is_any()) {
      plan.out[axis] =
          AnyAtMost<D>(SliceBound(UpperBound(in[axis]), begin, end, stride, spec.size_mode));
      continue;
    }
    int64_t size = 0;
    PlanAxis(begin, end, stride, spec.size_mode, in[axis].value(), &plan.begin[axis], &size);
    plan.out[axis] = D(size);
    // A step is only taken between two elements; keeping a huge one would
    // overflow the byte strides.
    plan.stride[axis] = size > 1 ? stride : 1;
  }
  return plan;
}

SliceSpec SliceSpecFromAttrs(const Attrs& attrs);
// dyn.strided_slice's inputs are data, begin, end, strides.
SliceSpec SliceSpecFromTensors(TensorArgs inputs, const Attrs& attrs);

template <typename D>
std::vector<DimsOf<D>> StridedSliceRule(const std::vector<DimsOf<D>>& inputs, const Attrs& attrs) {
  return {PlanSlice(inputs[0], SliceSpecFromAttrs(attrs), "strided_slice").out};
}

// The shape function of a rule on concrete shapes (defined in shape_util.cc).
ShapeFunction RuleShapeFunc(Rule<StaticDim> rule);

// Registers `name` with `rule`'s data-independent shape function and `kernel`.
OpKernelDef& RegisterStatic(OpKernelRegistry& registry, const std::string& name,
                            Rule<StaticDim> rule, OpKernelFunc kernel);

}  // namespace nimble::vm::transform
