// Reductions with Relay's names and attributes: sum, mean, max, min, prod,
// all, any (axis, keepdims, exclude) and argmax, argmin (also
// select_last_index; int32 indices).
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nimble/compiler/op/compute_util.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/op/reference_loops.h"
#include "nimble/compiler/op/type_relations.h"
#include "nimble/vm/dtype.h"
#include "nimble/vm/error.h"
#include "nimble/vm/kernels/element.h"
#include "nimble/vm/kernels/reduce.h"

namespace nimble::op {

namespace {

using vm::ReducedAxes;
using vm::ReducedShape;

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

// ---------------------------------------------------------------------------
// Reference kernels: each output element on its own, folding the input
// elements it covers in row-major order of the reduced axes. Integers
// accumulate in int64 (wrapping, narrowed at the end), floats in double.

enum class Reduction { kSum, kMean, kMax, kMin, kProd, kAll, kAny };

template <typename T>
using Accumulator = std::conditional_t<std::is_same_v<T, bool>, bool,
                                       std::conditional_t<std::is_integral_v<T>, int64_t, double>>;

template <typename A>
A Lowest() {
  if constexpr (std::is_floating_point_v<A>) return -std::numeric_limits<A>::infinity();
  return std::numeric_limits<A>::lowest();
}
template <typename A>
A Highest() {
  if constexpr (std::is_floating_point_v<A>) return std::numeric_limits<A>::infinity();
  return std::numeric_limits<A>::max();
}

template <typename A>
A Identity(Reduction kind) {
  switch (kind) {
    case Reduction::kMax:
      return Lowest<A>();
    case Reduction::kMin:
      return Highest<A>();
    case Reduction::kProd:
    case Reduction::kAll:
      return A(1);
    default:
      return A(0);
  }
}

// A NaN never replaces the max or min so far: NaNs are skipped.
template <typename A>
A Combine(Reduction kind, A acc, A x) {
  switch (kind) {
    case Reduction::kSum:
    case Reduction::kMean:
      return Wrapping(std::plus<>(), acc, x);
    case Reduction::kProd:
      return Wrapping(std::multiplies<>(), acc, x);
    case Reduction::kMax:
      return x > acc ? x : acc;
    case Reduction::kMin:
      return x < acc ? x : acc;
    case Reduction::kAll:
      return acc && x;
    case Reduction::kAny:
      return acc || x;
  }
  return acc;
}

// Calls fn(out, offsets) for each output element (its flat index) with the
// flat input offsets of the elements it covers, in row-major order of the
// reduced axes; first checks that a reduction without identity has elements.
template <typename Fn>
void ForEachOutput(const Tensor& input, const std::vector<bool>& reduced, bool needs_element,
                   const std::string& op, const Fn& fn) {
  const Shape& shape = input->shape();
  Shape extent = shape;  // the reduced axes' sizes, 1 elsewhere
  for (size_t d = 0; d < shape.size(); ++d) extent[d] = reduced[d] ? shape[d] : 1;
  const Shape kept = ReducedShape(shape, reduced, /*keepdims=*/true);
  if (needs_element && ShapeNumel(extent) == 0 && ShapeNumel(kept) > 0) {
    throw Error(op + ": cannot reduce an empty axis of shape " + ShapeToString(shape) +
                " (the reduction has no identity)");
  }
  int64_t out = 0;
  ForEachIndex(kept, [&](std::span<const int64_t> out_index) {
    std::vector<int64_t> offsets;
    ForEachIndex(extent, [&](std::span<const int64_t> reduced_index) {
      int64_t offset = 0;
      for (size_t d = 0; d < shape.size(); ++d) {
        offset = offset * shape[d] + (reduced[d] ? reduced_index[d] : out_index[d]);
      }
      offsets.push_back(offset);
    });
    fn(out++, offsets);
  });
}

ReferenceKernel ValueReduceKernel(const std::string& op, Reduction kind) {
  return [op, kind](std::span<const Tensor> inputs, std::span<Tensor> outputs,
                    const ir::Attrs& attrs) {
    const Tensor& input = inputs[0];
    const std::vector<bool> reduced = ReducedAxes(input->ndim(), attrs, op);
    const bool needs_element =
        kind == Reduction::kMean || kind == Reduction::kMax || kind == Reduction::kMin;
    DispatchDType(input->dtype(), [&](auto tag) {
      using T = decltype(tag);
      using A = Accumulator<T>;
      const T* in = input->data<T>();
      T* out = outputs[0]->data<T>();
      ForEachOutput(input, reduced, needs_element, op, [&](int64_t i, std::span<const int64_t> at) {
        A acc = Identity<A>(kind);
        for (int64_t offset : at) acc = Combine(kind, acc, static_cast<A>(LoadElement(in[offset])));
        if (kind == Reduction::kMean) acc = acc / static_cast<A>(at.size());
        out[i] = ConvertElement<T>(acc);
      });
    });
  };
}

// argmax / argmin: the position among the covered elements of the first
// strictly better one, or with select_last_index the last better-or-equal.
ReferenceKernel IndexReduceKernel(const std::string& op, bool is_max) {
  return [op, is_max](std::span<const Tensor> inputs, std::span<Tensor> outputs,
                      const ir::Attrs& attrs) {
    const Tensor& input = inputs[0];
    const std::vector<bool> reduced = ReducedAxes(input->ndim(), attrs, op);
    const bool last = attrs.GetBool("select_last_index");
    DispatchDType(input->dtype(), [&](auto tag) {
      using T = decltype(tag);
      using A = Accumulator<T>;
      const T* in = input->data<T>();
      int32_t* out = outputs[0]->data<int32_t>();
      ForEachOutput(input, reduced, true, op, [&](int64_t i, std::span<const int64_t> at) {
        if (at.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
          throw Error(op + ": reducing " + std::to_string(at.size()) +
                      " elements per output overflows the int32 index");
        }
        A best = is_max ? Lowest<A>() : Highest<A>();
        out[i] = 0;
        for (size_t k = 0; k < at.size(); ++k) {
          const A x = static_cast<A>(LoadElement(in[at[k]]));
          const bool better = is_max ? x > best : x < best;
          if (better || (last && x == best)) {
            best = x;
            out[i] = static_cast<int32_t>(k);
          }
        }
      });
    });
  };
}

// ---------------------------------------------------------------------------
// Compute definitions. Floats accumulate in their own dtype (the reference
// kernels in double), so sums agree to rounding; integer sums and products
// wrap alike in any width.

using te::ReduceKind;

// The `kind` reduction of source(out_indices, data_indices, position) over
// the input elements each output element covers, `position` being their
// row-major index among them (int64).
using ReduceSource =
    std::function<Expr(const std::vector<Expr>& out_indices, const std::vector<Expr>& data_indices,
                       const Expr& position)>;

te::Tensor ReduceStage(const std::string& name, ReduceKind kind, const te::Tensor& data,
                       const std::vector<bool>& reduced, bool keepdims,
                       const ReduceSource& source) {
  const std::vector<Expr>& shape = data->shape;
  std::vector<Expr> out_shape;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!reduced[d] || keepdims) out_shape.push_back(reduced[d] ? tir::IntImm(1) : shape[d]);
  }
  return te::Compute(name, out_shape, [&](const std::vector<Expr>& indices) {
    std::vector<te::ReduceAxis> axes;
    std::vector<Expr> data_indices, extents, vars;
    size_t out = 0;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (reduced[d]) {
        axes.push_back(te::MakeReduceAxis(name + ".k" + std::to_string(d), shape[d]));
        data_indices.push_back(axes.back().var);
        extents.push_back(shape[d]);
        vars.push_back(axes.back().var);
        if (keepdims) ++out;
      } else {
        data_indices.push_back(indices[out++]);
      }
    }
    return te::Reduce(kind, source(indices, data_indices, tir::FlatIndex(extents, vars)),
                      std::move(axes));
  });
}

// The number of input elements each output element covers.
Expr ReducedCount(const te::Tensor& data, const std::vector<bool>& reduced) {
  Expr count = tir::IntImm(1);
  for (size_t d = 0; d < reduced.size(); ++d) {
    if (reduced[d]) count = tir::Mul(count, data->shape[d]);
  }
  return count;
}

// What the reference kernel reports: a reduction without identity over no
// elements, unless there is no output element either.
void RequireElements(te::ComputeContext& context, const std::string& op, const te::Tensor& data,
                     const std::vector<bool>& reduced) {
  Expr kept = tir::IntImm(1);
  for (size_t d = 0; d < reduced.size(); ++d) {
    if (!reduced[d]) kept = tir::Mul(kept, data->shape[d]);
  }
  context.Require(
      tir::Or(tir::Compare(tir::CompareOp::kNe, ReducedCount(data, reduced), tir::IntImm(0)),
              tir::Compare(tir::CompareOp::kEq, kept, tir::IntImm(0))),
      op + ": cannot reduce an empty axis (the reduction has no identity)");
}

ComputeFunction ValueReduceCompute(const std::string& op, Reduction kind) {
  return [op, kind](te::ComputeContext& context, std::span<const te::Tensor> inputs,
                    const ir::Attrs& attrs,
                    std::span<const DataType> output_dtypes) -> std::vector<te::Tensor> {
    if (HasFloat16(inputs, output_dtypes)) return {};
    const te::Tensor& data = inputs[0];
    const DataType dtype = data->dtype;
    const std::vector<bool> reduced =
        ReducedAxes(static_cast<int64_t>(data->shape.size()), attrs, op);
    const bool keepdims = attrs.GetBool("keepdims");
    if (kind == Reduction::kMean || kind == Reduction::kMax || kind == Reduction::kMin) {
      RequireElements(context, op, data, reduced);
    }
    // mean sums in int64 for integers, as the reference does: its quotient
    // is not the wrapped sum's.
    const DataType accumulator =
        kind == Reduction::kMean && dtype.is_int() ? DataType::Int64() : dtype;
    const ReduceKind reduce_kind =
        kind == Reduction::kProd                             ? ReduceKind::kProd
        : kind == Reduction::kMax || kind == Reduction::kAny ? ReduceKind::kMax
        : kind == Reduction::kMin || kind == Reduction::kAll ? ReduceKind::kMin
                                                             : ReduceKind::kSum;
    const te::Tensor stage = ReduceStage(
        kind == Reduction::kMean ? op + ".sum" : op, reduce_kind, data, reduced, keepdims,
        [&](const std::vector<Expr>&, const std::vector<Expr>& data_indices, const Expr&) {
          return tir::Cast(accumulator, te::Read(data, data_indices));
        });
    if (kind != Reduction::kMean) return {stage};
    const Expr count = tir::Cast(accumulator, ReducedCount(data, reduced));
    return {te::Compute(op, stage->shape, [&](const std::vector<Expr>& indices) {
      return tir::Cast(dtype, tir::Div(te::Read(stage, indices), count));
    })};
  };
}

// Three stages: the best value (NaNs skipped, as in the reference), the
// first (or last) position holding it, and that position, or 0 where no
// element beats the reduction's identity (the reference's start).
ComputeFunction IndexReduceCompute(const std::string& op, bool is_max) {
  return [op, is_max](te::ComputeContext& context, std::span<const te::Tensor> inputs,
                      const ir::Attrs& attrs,
                      std::span<const DataType> output_dtypes) -> std::vector<te::Tensor> {
    if (HasFloat16(inputs, output_dtypes)) return {};
    const te::Tensor& data = inputs[0];
    const std::vector<bool> reduced =
        ReducedAxes(static_cast<int64_t>(data->shape.size()), attrs, op);
    const bool keepdims = attrs.GetBool("keepdims");
    const bool last = attrs.GetBool("select_last_index");
    RequireElements(context, op, data, reduced);
    const Expr count = ReducedCount(data, reduced);
    context.Require(
        tir::Compare(tir::CompareOp::kLe, count, tir::IntImm(std::numeric_limits<int32_t>::max())),
        op + ": too many elements per output for the int32 index");
    const ReduceKind kind = is_max ? ReduceKind::kMax : ReduceKind::kMin;
    const te::Tensor best =
        ReduceStage(op + ".value", kind, data, reduced, keepdims,
                    [&](const std::vector<Expr>&, const std::vector<Expr>& data_indices,
                        const Expr&) { return te::Read(data, data_indices); });
    const te::Tensor position = ReduceStage(
        op + ".position", last ? ReduceKind::kMax : ReduceKind::kMin, data, reduced, keepdims,
        [&](const std::vector<Expr>& indices, const std::vector<Expr>& data_indices,
            const Expr& at) {
          const Expr hit = tir::Compare(tir::CompareOp::kEq, te::Read(data, data_indices),
                                        te::Read(best, indices));
          return tir::Select(hit, at, last ? tir::IntImm(-1) : count);
        });
    return {te::Compute(op, best->shape, [&](const std::vector<Expr>& indices) {
      const Expr at = te::Read(position, indices);
      const Expr none = last ? tir::Compare(tir::CompareOp::kLt, at, tir::IntImm(0))
                             : tir::Compare(tir::CompareOp::kEq, te::Read(best, indices),
                                            te::ReduceIdentity(kind, data->dtype));
      return tir::Cast(DataType::Int32(), tir::Select(none, tir::IntImm(0), at));
    })};
  };
}

void RegisterReduce(OpRegistry& registry, const std::string& name, const std::string& description,
                    ReduceSignature signature, ReferenceKernel kernel, ComputeFunction compute) {
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
  def.pattern = OpPattern::kCommReduce;
  def.kernel = std::move(kernel);
  def.compute = std::move(compute);
}

}  // namespace

void RegisterReduceOps(OpRegistry& registry) {
  const ReduceSignature numeric;
  const ReduceSignature logical{.logical = true};
  const ReduceSignature index{.index_output = true};
  RegisterReduce(registry, "sum", "Sum of the elements over the given axes.", numeric,
                 ValueReduceKernel("sum", Reduction::kSum),
                 ValueReduceCompute("sum", Reduction::kSum));
  RegisterReduce(registry, "mean",
                 "Mean of the elements over the given axes (integer division for integers).",
                 numeric, ValueReduceKernel("mean", Reduction::kMean),
                 ValueReduceCompute("mean", Reduction::kMean));
  RegisterReduce(registry, "max", "Maximum of the elements over the given axes.", numeric,
                 ValueReduceKernel("max", Reduction::kMax),
                 ValueReduceCompute("max", Reduction::kMax));
  RegisterReduce(registry, "min", "Minimum of the elements over the given axes.", numeric,
                 ValueReduceKernel("min", Reduction::kMin),
                 ValueReduceCompute("min", Reduction::kMin));
  RegisterReduce(registry, "prod", "Product of the elements over the given axes.", numeric,
                 ValueReduceKernel("prod", Reduction::kProd),
                 ValueReduceCompute("prod", Reduction::kProd));
  RegisterReduce(registry, "all", "Logical AND of bool elements over the given axes.", logical,
                 ValueReduceKernel("all", Reduction::kAll),
                 ValueReduceCompute("all", Reduction::kAll));
  RegisterReduce(registry, "any", "Logical OR of bool elements over the given axes.", logical,
                 ValueReduceKernel("any", Reduction::kAny),
                 ValueReduceCompute("any", Reduction::kAny));
  RegisterReduce(registry, "argmax",
                 "Index (int32, row-major over the reduced axes) of the maximum over the given "
                 "axes; ties give the first index, or the last with select_last_index.",
                 index, IndexReduceKernel("argmax", true), IndexReduceCompute("argmax", true));
  RegisterReduce(registry, "argmin",
                 "Index (int32, row-major over the reduced axes) of the minimum over the given "
                 "axes; ties give the first index, or the last with select_last_index.",
                 index, IndexReduceKernel("argmin", false), IndexReduceCompute("argmin", false));
}

}  // namespace nimble::op
