// Reductions with Relay's names and attributes: sum, mean, max, min, prod,
// all, any (axis, keepdims, exclude) and argmax, argmin (also
// select_last_index; int32 indices).
#include <cstdint>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "nimble/compiler/op/elemwise.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/op/type_relations.h"
#include "nimble/vm/error.h"

namespace nimble::op {

namespace {

// Which axes of a rank-`ndim` input are reduced, under Relay's rules: `axis`
// None or empty means every axis; `exclude` reduces the axes not listed.
std::vector<bool> ReducedAxes(int64_t ndim, const ir::Attrs& attrs, const std::string& op) {
  std::vector<bool> reduced(ndim, true);
  if (attrs.IsNone("axis") || attrs.GetIntList("axis").empty()) return reduced;
  std::vector<bool> listed(ndim, false);
  for (int64_t axis : attrs.GetIntList("axis")) {
    const int64_t normalized = NormalizeAxis(axis, ndim, op);
    if (listed[normalized]) {
      throw Error(op + ": axis " + std::to_string(axis) +
                  " is listed twice in axis=" + ir::AttrValueToString(attrs.GetIntList("axis")));
    }
    listed[normalized] = true;
  }
  const bool exclude = attrs.GetBool("exclude");
  for (int64_t d = 0; d < ndim; ++d) reduced[d] = listed[d] != exclude;
  return reduced;
}

// The result shape: reduced axes dropped, or kept as 1 with keepdims. Serves
// both static types (ir::Dim) and run-time shapes (int64_t).
template <typename D>
std::vector<D> ReducedShape(const std::vector<D>& shape, const std::vector<bool>& reduced,
                            bool keepdims) {
  std::vector<D> out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!reduced[d]) {
      out.push_back(shape[d]);
    } else if (keepdims) {
      out.push_back(D(1));
    }
  }
  return out;
}

// What a reduction accepts and returns.
struct ReduceSignature {
  bool logical = false;       // all/any: bool in, bool out
  bool index_output = false;  // argmax/argmin: int32 out, rank >= 1 in
};

TypeRelation ReduceRelation(const std::string& op, ReduceSignature signature) {
  return [op, signature](const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                         TypeReporter& reporter) {
    const ir::TensorType data = AsTensorType(types[0], op, "data");
    if (!data) return false;
    if (signature.logical && !data->dtype.is_bool()) {
      throw Error("expects a bool tensor, got " + ir::TypeToString(data));
    }
    if (!signature.logical && data->dtype.is_bool()) {
      throw Error("expects a numeric tensor, got " + ir::TypeToString(data));
    }
    if (signature.index_output && data->ndim() == 0) {
      throw Error("expects a tensor of rank >= 1, got " + ir::TypeToString(data));
    }
    const std::vector<bool> reduced = ReducedAxes(static_cast<int64_t>(data->ndim()), attrs, op);
    const DataType dtype = signature.index_output ? DataType::Int32() : data->dtype;
    reporter.Assign(
        types.back(),
        ir::MakeTensorType(ReducedShape(data->shape, reduced, attrs.GetBool("keepdims")), dtype));
    return true;
  };
}

ShapeFunction ReduceShapeFunc(const std::string& op) {
  return [op](std::span<const Shape> input_shapes, vm::TensorArgs, const ir::Attrs& attrs) {
    const Shape& shape = input_shapes[0];
    const std::vector<bool> reduced = ReducedAxes(static_cast<int64_t>(shape.size()), attrs, op);
    return std::vector<Shape>{ReducedShape(shape, reduced, attrs.GetBool("keepdims"))};
  };
}

// ---------------------------------------------------------------------------
// Kernels

// The reduction as an iteration space over the input in memory order: runs
// of adjacent axes that are all reduced or all kept, merged into one dim
// (size-1 axes dropped). Each dim has its stride in the output (0 when
// reduced) and in the row-major index over the reduced axes that argmax and
// argmin return (0 when kept).
struct ReduceSpace {
  std::vector<int64_t> dims;
  std::vector<bool> reduced;
  std::vector<int64_t> out_strides;
  std::vector<int64_t> index_strides;
};

ReduceSpace MakeReduceSpace(const Shape& shape, const std::vector<bool>& reduced) {
  ReduceSpace space;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!space.dims.empty() && space.reduced.back() == reduced[d]) {
      space.dims.back() *= shape[d];
    } else {
      space.dims.push_back(shape[d]);
      space.reduced.push_back(reduced[d]);
    }
  }
  if (space.dims.empty()) {  // a single element
    space.dims.push_back(1);
    space.reduced.push_back(false);
  }
  const size_t rank = space.dims.size();
  space.out_strides.resize(rank);
  space.index_strides.resize(rank);
  int64_t out_stride = 1;
  int64_t index_stride = 1;
  for (size_t d = rank; d-- > 0;) {
    space.out_strides[d] = space.reduced[d] ? 0 : out_stride;
    space.index_strides[d] = space.reduced[d] ? index_stride : 0;
    (space.reduced[d] ? index_stride : out_stride) *= space.dims[d];
  }
  return space;
}

// Calls row_fn(in_offset, out_offset, index_offset) for each row of the
// innermost dim, in memory order; an odometer walks the outer dims.
template <typename RowFn>
void ForEachRow(const ReduceSpace& space, int64_t numel, const RowFn& row_fn) {
  const size_t outer = space.dims.size() - 1;
  const int64_t row = space.dims.back();
  std::vector<int64_t> index(outer, 0);
  int64_t out_offset = 0;
  int64_t index_offset = 0;
  for (int64_t in_offset = 0; in_offset < numel; in_offset += row) {
    row_fn(in_offset, out_offset, index_offset);
    for (size_t d = outer; d-- > 0;) {
      out_offset += space.out_strides[d];
      index_offset += space.index_strides[d];
      if (++index[d] < space.dims[d]) break;
      out_offset -= space.out_strides[d] * space.dims[d];
      index_offset -= space.index_strides[d] * space.dims[d];
      index[d] = 0;
    }
  }
}

// The number of input elements folded into each output element.
int64_t ReducedCount(const Shape& shape, const std::vector<bool>& reduced) {
  int64_t count = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (reduced[d]) count *= shape[d];
  }
  return count;
}

void CheckNonEmpty(const Tensor& input, const Tensor& output, int64_t count,
                   const std::string& op) {
  if (count == 0 && output->numel() > 0) {
    throw Error(op + ": cannot reduce an empty axis of shape " + ShapeToString(input->shape()) +
                " (the reduction has no identity)");
  }
}

// Integers accumulate in int64 (narrowed to the output type at the end, as a
// wrapping accumulator of that type would be); float16 in float.
template <typename T>
using Accumulator =
    std::conditional_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int64_t, ComputeType<T>>;

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

// Integer sums and products wrap modulo 2^64 instead of overflowing int64.
template <typename A>
A WrappingAdd(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    return static_cast<A>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  } else {
    return a + b;
  }
}
template <typename A>
A WrappingMultiply(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    return static_cast<A>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  } else {
    return a * b;
  }
}

// A reducer: Identity, Combine (associative and commutative) and Finalize
// (from the combined value and the element count to the result). kLogical
// reducers take bool; kNeedsElement ones fail on an empty reduction.
struct SumReducer {
  static constexpr bool kLogical = false;
  static constexpr bool kNeedsElement = false;
  template <typename A>
  static A Identity() {
    return A(0);
  }
  template <typename A>
  static A Combine(A acc, A x) {
    return WrappingAdd(acc, x);
  }
  template <typename A>
  static A Finalize(A acc, int64_t) {
    return acc;
  }
};

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
    return WrappingMultiply(acc, x);
  }
};

struct MaxReducer : SumReducer {
  static constexpr bool kNeedsElement = true;
  template <typename A>
  static A Identity() {
    return Lowest<A>();
  }
  template <typename A>
  static A Combine(A acc, A x) {
    return x > acc ? x : acc;
  }
};

struct MinReducer : SumReducer {
  static constexpr bool kNeedsElement = true;
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
  static constexpr bool kLogical = true;
  template <typename A>
  static A Identity() {
    return true;
  }
  template <typename A>
  static A Combine(A acc, A x) {
    return acc && x;
  }
};

struct AnyReducer : SumReducer {
  static constexpr bool kLogical = true;
  template <typename A>
  static A Identity() {
    return false;
  }
  template <typename A>
  static A Combine(A acc, A x) {
    return acc || x;
  }
};

constexpr int64_t kLanes = 8;

// Reduces a contiguous row. kLanes independent accumulators let the lane
// loop vectorise without reassociating floating-point operations.
template <typename Reducer, typename A, typename T>
A ReduceRow(const T* row, int64_t n) {
  A lanes[kLanes];
  for (A& lane : lanes) lane = Reducer::template Identity<A>();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int64_t lane = 0; lane < kLanes; ++lane) {
      lanes[lane] = Reducer::Combine(lanes[lane], static_cast<A>(LoadElement(row[i + lane])));
    }
  }
  A acc = Reducer::template Identity<A>();
  for (const A& lane : lanes) acc = Reducer::Combine(acc, lane);
  for (; i < n; ++i) acc = Reducer::Combine(acc, static_cast<A>(LoadElement(row[i])));
  return acc;
}

template <typename Reducer, typename T>
void ReduceValues(const Tensor& input, const Tensor& output, const std::vector<bool>& reduced,
                  const std::string& op) {
  using A = Accumulator<T>;
  const int64_t out_numel = output->numel();
  const int64_t count = ReducedCount(input->shape(), reduced);
  if (Reducer::kNeedsElement) CheckNonEmpty(input, output, count, op);
  // Not std::vector: vector<bool> (all, any) has no addressable elements.
  std::unique_ptr<A[]> acc(new A[out_numel]);
  for (int64_t i = 0; i < out_numel; ++i) acc[i] = Reducer::template Identity<A>();

  const ReduceSpace space = MakeReduceSpace(input->shape(), reduced);
  const T* in = input->data<T>();
  const int64_t row = space.dims.back();
  if (space.reduced.back()) {
    // Innermost axes reduced: each contiguous row folds into one output.
    ForEachRow(space, input->numel(), [&](int64_t in_offset, int64_t out_offset, int64_t) {
      acc[out_offset] =
          Reducer::Combine(acc[out_offset], ReduceRow<Reducer, A>(in + in_offset, row));
    });
  } else {
    // Innermost axes kept: each contiguous row folds elementwise into a row of outputs.
    ForEachRow(space, input->numel(), [&](int64_t in_offset, int64_t out_offset, int64_t) {
      A* dst = acc.get() + out_offset;
      const T* src = in + in_offset;
      for (int64_t j = 0; j < row; ++j) {
        dst[j] = Reducer::Combine(dst[j], static_cast<A>(LoadElement(src[j])));
      }
    });
  }
  T* out = output->data<T>();
  for (int64_t i = 0; i < out_numel; ++i) {
    out[i] = ConvertElement<T>(Reducer::Finalize(acc[i], count));
  }
}

template <typename Reducer>
ReferenceKernel ValueReduceKernel(const std::string& op) {
  return [op](std::span<const Tensor> inputs, std::span<Tensor> outputs, const ir::Attrs& attrs) {
    const Tensor& input = inputs[0];
    const std::vector<bool> reduced = ReducedAxes(input->ndim(), attrs, op);
    DispatchDType(input->dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool> == Reducer::kLogical) {
        ReduceValues<Reducer, T>(input, outputs[0], reduced, op);
      } else {
        throw Error(op + ": unsupported dtype " + input->dtype().name());
      }
    });
  };
}

// argmax / argmin. Elements are visited in increasing reduced index for each
// output, so a strictly better value wins ties for the first index and, with
// select_last_index, a better-or-equal one for the last.
template <bool kMax, typename T>
void ReduceIndices(const Tensor& input, const Tensor& output, const std::vector<bool>& reduced,
                   bool select_last_index, const std::string& op) {
  using A = ComputeType<T>;
  const int64_t count = ReducedCount(input->shape(), reduced);
  CheckNonEmpty(input, output, count, op);
  if (count > std::numeric_limits<int32_t>::max()) {
    throw Error(op + ": reducing " + std::to_string(count) +
                " elements per output overflows the int32 index");
  }
  std::vector<A> best(output->numel(), kMax ? Lowest<A>() : Highest<A>());
  int32_t* indices = output->data<int32_t>();  // zero-filled: index 0 until beaten
  const auto replaces = [select_last_index](A x, A current) {
    if (select_last_index) return kMax ? x >= current : x <= current;
    return kMax ? x > current : x < current;
  };

  const ReduceSpace space = MakeReduceSpace(input->shape(), reduced);
  const T* in = input->data<T>();
  const int64_t row = space.dims.back();
  const bool row_reduced = space.reduced.back();
  ForEachRow(
      space, input->numel(), [&](int64_t in_offset, int64_t out_offset, int64_t index_offset) {
        for (int64_t j = 0; j < row; ++j) {
          const A x = LoadElement(in[in_offset + j]);
          // Along a reduced row the index advances; along a kept row the output does.
          const int64_t out = row_reduced ? out_offset : out_offset + j;
          if (replaces(x, best[out])) {
            best[out] = x;
            indices[out] = static_cast<int32_t>(row_reduced ? index_offset + j : index_offset);
          }
        }
      });
}

template <bool kMax>
ReferenceKernel IndexReduceKernel(const std::string& op) {
  return [op](std::span<const Tensor> inputs, std::span<Tensor> outputs, const ir::Attrs& attrs) {
    const Tensor& input = inputs[0];
    const std::vector<bool> reduced = ReducedAxes(input->ndim(), attrs, op);
    const bool select_last_index = attrs.GetBool("select_last_index");
    DispatchDType(input->dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!std::is_same_v<T, bool>) {
        ReduceIndices<kMax, T>(input, outputs[0], reduced, select_last_index, op);
      } else {
        throw Error(op + ": unsupported dtype bool");
      }
    });
  };
}

void RegisterReduce(OpRegistry& registry, const std::string& name, const std::string& description,
                    ReduceSignature signature, ReferenceKernel kernel) {
  using ir::AttrKind;
  OpDef& def = registry.Register(name);
  def.description = description;
  def.min_inputs = 1;
  def.max_inputs = 1;
  if (signature.index_output) {
    def.attrs = {{"axis", AttrKind::kIntList, std::monostate{}},
                 {"keepdims", AttrKind::kBool, false},
                 {"select_last_index", AttrKind::kBool, false},
                 {"exclude", AttrKind::kBool, false}};
  } else {
    def.attrs = {{"axis", AttrKind::kIntList, std::monostate{}},
                 {"keepdims", AttrKind::kBool, false},
                 {"exclude", AttrKind::kBool, false}};
  }
  def.relation = ReduceRelation(name, signature);
  def.shape_func = ReduceShapeFunc(name);
  def.shape_mode = ShapeFuncMode::kDataIndependent;
  def.pattern = OpPattern::kCommReduce;
  def.kernel = std::move(kernel);
}

}  // namespace

void RegisterReduceOps(OpRegistry& registry) {
  const ReduceSignature numeric;
  const ReduceSignature logical{.logical = true};
  const ReduceSignature index{.index_output = true};
  RegisterReduce(registry, "sum", "Sum of the elements over the given axes.", numeric,
                 ValueReduceKernel<SumReducer>("sum"));
  RegisterReduce(registry, "mean",
                 "Mean of the elements over the given axes (integer division for integers).",
                 numeric, ValueReduceKernel<MeanReducer>("mean"));
  RegisterReduce(registry, "max", "Maximum of the elements over the given axes.", numeric,
                 ValueReduceKernel<MaxReducer>("max"));
  RegisterReduce(registry, "min", "Minimum of the elements over the given axes.", numeric,
                 ValueReduceKernel<MinReducer>("min"));
  RegisterReduce(registry, "prod", "Product of the elements over the given axes.", numeric,
                 ValueReduceKernel<ProdReducer>("prod"));
  RegisterReduce(registry, "all", "Logical AND of bool elements over the given axes.", logical,
                 ValueReduceKernel<AllReducer>("all"));
  RegisterReduce(registry, "any", "Logical OR of bool elements over the given axes.", logical,
                 ValueReduceKernel<AnyReducer>("any"));
  RegisterReduce(registry, "argmax",
                 "Index (int32, row-major over the reduced axes) of the maximum over the given "
                 "axes; ties give the first index, or the last with select_last_index.",
                 index, IndexReduceKernel<true>("argmax"));
  RegisterReduce(registry, "argmin",
                 "Index (int32, row-major over the reduced axes) of the minimum over the given "
                 "axes; ties give the first index, or the last with select_last_index.",
                 index, IndexReduceKernel<false>("argmin"));
}

}  // namespace nimble::op
