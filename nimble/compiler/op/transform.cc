// Shape-manipulating operators (Relay's "transform" family): reshape and its
// dynamic and `_like` forms, transpose, squeeze, expand_dims, concatenate,
// stack, split, take, and strided_slice (static and dynamic). This is the
// compiler's half: type relations, attribute schemas, fusion patterns and
// reference kernels; the shape functions and built-in kernels are the
// runtime's (nimble/vm/kernels/transform.cc).
//
// Each op with static attributes computes its output dimensions with one rule,
// a template over the dimension type in nimble/vm/kernels/transform_rules.h.
// The type relation runs it on ir::Dim, where Any propagates and only
// contradictions between static sizes fail; the runtime's shape function runs
// the same rule on concrete sizes, so each check the relation deferred becomes
// exact there, with the same message [paper 4.1, 4.2].
//
// The reference kernels copy one output element at a time from the input
// element its multi-index reads.
#include <cstddef>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "nimble/compiler/op/compute_util.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/op/reference_loops.h"
#include "nimble/compiler/op/type_relations.h"
#include "nimble/vm/error.h"
#include "nimble/vm/kernels/transform_rules.h"

namespace nimble::op {

namespace {

namespace rules = vm::transform;
using ir::Dim;
using Dims = std::vector<Dim>;

// ---------------------------------------------------------------------------
// Type relations built from the rules.

using DimsRule = rules::Rule<Dim>;
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
// Reference kernels.

// Where an output element comes from: element `offset` (row-major) of input
// `input`.
struct Source {
  size_t input;
  int64_t offset;
};

int64_t RowMajorOffset(const Shape& shape, std::span<const int64_t> index) {
  int64_t offset = 0;
  for (size_t d = 0; d < shape.size(); ++d) offset = offset * shape[d] + index[d];
  return offset;
}

// Fills `out` one element at a time, copying the bytes of the input element
// source(index) names.
template <typename Fn>
void FillFrom(std::span<const Tensor> inputs, const Tensor& out, const Fn& source) {
  const size_t bytes = out->dtype().bytes();
  std::byte* dst = static_cast<std::byte*>(out->raw_data());
  ForEachIndex(out->shape(), [&](std::span<const int64_t> index) {
    const Source from = source(index);
    const std::byte* src = static_cast<const std::byte*>(inputs[from.input]->raw_data());
    std::memcpy(dst, src + from.offset * static_cast<int64_t>(bytes), bytes);
    dst += bytes;
  });
}

// reshape and its kin: output element k is input element k.
void ReshapeReference(std::span<const Tensor> inputs, std::span<Tensor> outputs, const ir::Attrs&) {
  int64_t k = 0;
  FillFrom(inputs, outputs[0], [&](std::span<const int64_t>) { return Source{0, k++}; });
}

void TransposeReference(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                        const ir::Attrs& attrs) {
  const Shape& in_shape = inputs[0]->shape();
  const std::vector<size_t> perm = rules::TransposePerm(in_shape.size(), attrs);
  std::vector<int64_t> in_index(in_shape.size());
  FillFrom(inputs, outputs[0], [&](std::span<const int64_t> index) {
    for (size_t j = 0; j < perm.size(); ++j) in_index[perm[j]] = index[j];
    return Source{0, RowMajorOffset(in_shape, in_index)};
  });
}

void ConcatenateReference(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                          const ir::Attrs& attrs) {
  const size_t axis = static_cast<size_t>(
      NormalizeAxis(attrs.GetInt("axis"), outputs[0]->shape().size(), "concatenate"));
  FillFrom(inputs, outputs[0], [&](std::span<const int64_t> index) {
    std::vector<int64_t> in_index(index.begin(), index.end());
    size_t input = 0;
    while (in_index[axis] >= inputs[input]->shape()[axis]) {
      in_index[axis] -= inputs[input++]->shape()[axis];
    }
    return Source{input, RowMajorOffset(inputs[input]->shape(), in_index)};
  });
}

void StackReference(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                    const ir::Attrs& attrs) {
  const int64_t axis =
      rules::NormalizeInsertAxis(attrs.GetInt("axis"), inputs[0]->shape().size(), "stack");
  FillFrom(inputs, outputs[0], [&](std::span<const int64_t> index) {
    std::vector<int64_t> in_index(index.begin(), index.end());
    const size_t input = static_cast<size_t>(in_index[axis]);
    in_index.erase(in_index.begin() + axis);
    return Source{input, RowMajorOffset(inputs[input]->shape(), in_index)};
  });
}

void SplitReference(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                    const ir::Attrs& attrs) {
  const Shape& in_shape = inputs[0]->shape();
  const size_t axis =
      static_cast<size_t>(NormalizeAxis(attrs.GetInt("axis"), in_shape.size(), "split"));
  int64_t start = 0;
  for (const Tensor& out : outputs) {
    FillFrom(inputs, out, [&](std::span<const int64_t> index) {
      std::vector<int64_t> in_index(index.begin(), index.end());
      in_index[axis] += start;
      return Source{0, RowMajorOffset(in_shape, in_index)};
    });
    start += out->shape()[axis];
  }
}

void TakeReference(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                   const ir::Attrs& attrs) {
  const Tensor& data = inputs[0];
  const Tensor& indices = inputs[1];
  const rules::TakeMode mode = rules::ParseTakeMode(attrs);
  // The row of `extent` rows that element `offset` of indices selects.
  auto row_of = [&](int64_t offset, int64_t extent, const std::string& where) {
    const int64_t index = indices->GetAsInt64(offset);
    const std::optional<int64_t> row = rules::TakeRow(index, extent, mode);
    if (!row) {
      throw Error("take: index " + std::to_string(index) + " is out of range for " + where);
    }
    return *row;
  };
  if (attrs.IsNone("axis")) {
    const std::string where = "the flattened data " + ShapeToString(data->shape());
    int64_t k = 0;
    FillFrom(inputs, outputs[0], [&](std::span<const int64_t>) {
      return Source{0, row_of(k++, data->numel(), where)};
    });
    return;
  }
  const rules::TakeAxes axes =
      rules::ResolveTakeAxes(data->shape().size(), indices->shape().size(), attrs);
  const size_t taken = indices->shape().size() - axes.batch_dims;
  const std::string where =
      "axis " + std::to_string(axes.axis) + " of " + ShapeToString(data->shape());
  // The output's index is data's [:axis], indices' [batch_dims:], data's [axis + 1:].
  FillFrom(inputs, outputs[0], [&](std::span<const int64_t> index) {
    std::vector<int64_t> index_index(index.begin(), index.begin() + axes.batch_dims);
    index_index.insert(index_index.end(), index.begin() + axes.axis,
                       index.begin() + axes.axis + taken);
    std::vector<int64_t> data_index(index.begin(), index.begin() + axes.axis);
    data_index.push_back(
        row_of(RowMajorOffset(indices->shape(), index_index), data->shape()[axes.axis], where));
    data_index.insert(data_index.end(), index.begin() + axes.axis + taken, index.end());
    return Source{0, RowMajorOffset(data->shape(), data_index)};
  });
}

// Input index d of output index i is begin[d] + i[d] * stride[d].
void SliceReference(std::span<const Tensor> inputs, const Tensor& out, const rules::SliceSpec& spec,
                    const std::string& op) {
  const Shape& in_shape = inputs[0]->shape();
  const rules::SlicePlan<rules::StaticDim> plan =
      rules::PlanSlice(rules::DimsOf<rules::StaticDim>(in_shape.begin(), in_shape.end()), spec, op);
  std::vector<int64_t> in_index(in_shape.size());
  FillFrom(inputs, out, [&](std::span<const int64_t> index) {
    for (size_t d = 0; d < in_index.size(); ++d) {
      in_index[d] = plan.begin[d] + index[d] * plan.stride[d];
    }
    return Source{0, RowMajorOffset(in_shape, in_index)};
  });
}

void StridedSliceReference(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                           const ir::Attrs& attrs) {
  SliceReference(inputs, outputs[0], rules::SliceSpecFromAttrs(attrs), "strided_slice");
}

void DynStridedSliceReference(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                              const ir::Attrs& attrs) {
  const vm::TensorArgViews views(inputs);
  SliceReference(inputs, outputs[0], rules::SliceSpecFromTensors(views.args(), attrs),
                 "dyn.strided_slice");
}

// ---------------------------------------------------------------------------
// Compute definitions: each output element is a read of the input element
// the reference kernel copies (OpDef::compute), for code generation to fuse.
// Every read stays inside its input whichever way a select goes: vectorised
// code evaluates both sides of a select.

using Indices = std::vector<Expr>;
using te::IndexMap;

// The output `name` of `shape` whose element at i is data's at source(i).
te::Tensor Gather(const std::string& name, const te::Tensor& data, Indices shape,
                  const IndexMap& source) {
  return te::Compute(name, std::move(shape),
                     [&](const Indices& indices) { return te::Read(data, source(indices)); });
}

// The shape as the type relations see it, to run their rules: constants are
// static, anything else `?`.
Dims TypeDims(const Indices& shape) {
  Dims dims;
  for (const Expr& dim : shape) {
    int64_t value;
    dims.push_back(tir::AsInt(dim, &value) ? Dim(value) : Dim::Any());
  }
  return dims;
}

// The size that `dims` must share: a constant among them, else the first.
// The kernel requires each of the others to be that size.
Expr SharedDim(te::ComputeContext& context, const Indices& dims, const std::string& message) {
  Expr shared = dims[0];
  for (const Expr& dim : dims) {
    int64_t value;
    if (tir::AsInt(dim, &value)) shared = dim;
  }
  for (const Expr& dim : dims) RequireEqual(context, dim, shared, message);
  return shared;
}

// The output dims of reshape, as InferReshape (transform_rules.h) makes them
// but in index expressions: the dims derived from input dims (by 0, -2, -3
// and -4) are expressions of those, and -1 is the quotient of the other
// input dims by the other output dims (which are newshape's own sizes, so
// the quotient never divides by a `?`). nullopt for newshapes the rule
// rejects.
std::optional<Indices> ReshapeDims(const Indices& in, const std::vector<int64_t>& newshape,
                                   bool allowzero) {
  Indices out;
  std::vector<bool> in_derived(in.size(), false), out_derived;
  std::optional<size_t> infer_at;
  size_t src = 0;
  bool past_end = false;
  const auto emit = [&](Expr dim, bool derived) {
    out.push_back(std::move(dim));
    out_derived.push_back(derived);
  };
  const auto consume = [&] {
    if (src >= in.size()) {
      past_end = true;
      return tir::IntImm(1);
    }
    in_derived[src] = true;
    return in[src++];
  };
  for (size_t i = 0; i < newshape.size() && !past_end; ++i) {
    const int64_t value = newshape[i];
    if (value > 0 || (value == 0 && allowzero)) {
      emit(tir::IntImm(value), false);
      ++src;
    } else if (value == 0) {
      emit(consume(), true);
    } else if (value == -1 && !infer_at) {
      infer_at = out.size();
      emit(tir::IntImm(1), false);
      ++src;
    } else if (value == -2) {
      while (src < in.size()) emit(consume(), true);
    } else if (value == -3) {
      const Expr first = consume();
      emit(tir::Mul(first, consume()), true);
    } else if (value == -4 && i + 2 < newshape.size()) {
      const Expr whole = consume();
      const int64_t first = newshape[++i];
      const int64_t second = newshape[++i];
      if (first == 0 || second == 0 || first < -1 || second < -1 || (first == -1 && second == -1)) {
        return std::nullopt;
      }
      emit(first == -1 ? tir::FloorDiv(whole, tir::IntImm(second)) : tir::IntImm(first), true);
      emit(second == -1 ? tir::FloorDiv(whole, tir::IntImm(first)) : tir::IntImm(second), true);
    } else {
      return std::nullopt;
    }
  }
  if (past_end) return std::nullopt;
  if (infer_at) {
    Expr numerator = tir::IntImm(1);
    for (size_t i = 0; i < in.size(); ++i) {
      if (!in_derived[i]) numerator = tir::Mul(numerator, in[i]);
    }
    Expr denominator = tir::IntImm(1);
    for (size_t i = 0; i < out.size(); ++i) {
      if (!out_derived[i] && i != *infer_at) denominator = tir::Mul(denominator, out[i]);
    }
    if (IsConstant(denominator, 0)) return std::nullopt;
    out[*infer_at] = tir::FloorDiv(numerator, denominator);
  }
  return out;
}

// Element k of the output is element k of data (row-major), as in every
// reshape; literal sizes among `?` ones may not multiply to data's count.
te::Tensor ReshapeTo(te::ComputeContext& context, const std::string& name, const te::Tensor& data,
                     const Indices& shape) {
  RequireEqual(context, tir::NumElements(shape), tir::NumElements(data->shape),
               name + ": the element count changes");
  return te::Rearrange(
      name, data, shape,
      [&](const Indices& indices) {
        return UnravelIndex(tir::FlatIndex(shape, indices), data->shape);
      },
      [data_shape = data->shape, shape](const Indices& source) {
        return UnravelIndex(tir::FlatIndex(data_shape, source), shape);
      });
}

std::vector<te::Tensor> ReshapeCompute(te::ComputeContext& context,
                                       std::span<const te::Tensor> inputs, const ir::Attrs& attrs,
                                       std::span<const DataType> output_dtypes) {
  if (HasFloat16(inputs, output_dtypes)) return {};
  const std::optional<Indices> shape =
      ReshapeDims(inputs[0]->shape, attrs.GetIntList("newshape"), attrs.GetBool("allowzero"));
  if (!shape) return {};
  return {ReshapeTo(context, "reshape", inputs[0], *shape)};
}

std::vector<te::Tensor> ReshapeLikeCompute(te::ComputeContext& context,
                                           std::span<const te::Tensor> inputs,
                                           const ir::Attrs& attrs,
                                           std::span<const DataType> output_dtypes) {
  if (HasFloat16(inputs, output_dtypes)) return {};
  const Indices& data = inputs[0]->shape;
  const Indices& like = inputs[1]->shape;
  const auto [lhs_begin, lhs_end] =
      rules::NormalizeRange(attrs, "lhs_begin", "lhs_end", data.size(), "reshape_like");
  const auto [rhs_begin, rhs_end] =
      rules::NormalizeRange(attrs, "rhs_begin", "rhs_end", like.size(), "reshape_like");
  Indices shape(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(lhs_begin));
  shape.insert(shape.end(), like.begin() + static_cast<std::ptrdiff_t>(rhs_begin),
               like.begin() + static_cast<std::ptrdiff_t>(rhs_end));
  shape.insert(shape.end(), data.begin() + static_cast<std::ptrdiff_t>(lhs_end), data.end());
  return {ReshapeTo(context, "reshape_like", inputs[0], shape)};
}

std::vector<te::Tensor> TransposeCompute(te::ComputeContext&, std::span<const te::Tensor> inputs,
                                         const ir::Attrs& attrs,
                                         std::span<const DataType> output_dtypes) {
  if (HasFloat16(inputs, output_dtypes)) return {};
  const te::Tensor& data = inputs[0];
  const std::vector<size_t> perm = rules::TransposePerm(data->shape.size(), attrs);
  Indices shape;
  for (size_t axis : perm) shape.push_back(data->shape[axis]);
  return {te::Rearrange(
      "transpose", data, shape,
      [&](const Indices& indices) {
        Indices source(indices.size());
        for (size_t j = 0; j < perm.size(); ++j) source[perm[j]] = indices[j];
        return source;
      },
      [perm](const Indices& source) {
        Indices indices(source.size());
        for (size_t j = 0; j < perm.size(); ++j) indices[j] = source[perm[j]];
        return indices;
      })};
}

std::vector<te::Tensor> SqueezeCompute(te::ComputeContext& context,
                                       std::span<const te::Tensor> inputs, const ir::Attrs& attrs,
                                       std::span<const DataType> output_dtypes) {
  if (HasFloat16(inputs, output_dtypes)) return {};
  const te::Tensor& data = inputs[0];
  const std::vector<bool> squeezed = rules::SqueezedAxes(TypeDims(data->shape), attrs);
  Indices shape;
  for (size_t d = 0; d < squeezed.size(); ++d) {
    if (!squeezed[d]) {
      shape.push_back(data->shape[d]);
    } else {
      RequireEqual(context, data->shape[d], tir::IntImm(1),
                   "squeeze: dimension " + std::to_string(d) + " is not 1");
    }
  }
  return {Gather("squeeze", data, shape, [&](const Indices& indices) {
    Indices source;
    size_t next = 0;
    for (size_t d = 0; d < squeezed.size(); ++d) {
      source.push_back(squeezed[d] ? tir::IntImm(0) : indices[next++]);
    }
    return source;
  })};
}

std::vector<te::Tensor> ExpandDimsCompute(te::ComputeContext&, std::span<const te::Tensor> inputs,
                                          const ir::Attrs& attrs,
                                          std::span<const DataType> output_dtypes) {
  if (HasFloat16(inputs, output_dtypes)) return {};
  const te::Tensor& data = inputs[0];
  const auto axis = static_cast<std::ptrdiff_t>(rules::NormalizeInsertAxis(
      attrs.GetInt("axis"), static_cast<int64_t>(data->shape.size()), "expand_dims"));
  const auto count = static_cast<std::ptrdiff_t>(attrs.GetInt("num_newaxis"));
  Indices shape = data->shape;
  shape.insert(shape.begin() + axis, static_cast<size_t>(count), tir::IntImm(1));
  return {Gather("expand_dims", data, shape, [&](Indices indices) {
    indices.erase(indices.begin() + axis, indices.begin() + axis + count);
    return indices;
  })};
}

// The dims that `inputs` share but `skip_axis` (concatenate, stack).
Indices SharedDims(te::ComputeContext& context, const std::string& op,
                   std::span<const te::Tensor> inputs, size_t skip_axis) {
  Indices shape;
  for (size_t d = 0; d < inputs[0]->shape.size(); ++d) {
    Indices dims;
    for (const te::Tensor& input : inputs) dims.push_back(input->shape[d]);
    shape.push_back(d == skip_axis
                        ? dims[0]
                        : SharedDim(context, dims,
                                    op + ": the inputs differ in dimension " + std::to_string(d)));
  }
  return shape;
}

// Each input's part of the axis is a select on the output index; its reads
// are clamped into the input, so every input must have a static, non-zero
// size there (an empty one is skipped): others are left to the built-in
// kernel.
std::vector<te::Tensor> ConcatenateCompute(te::ComputeContext& context,
                                           std::span<const te::Tensor> inputs,
                                           const ir::Attrs& attrs,
                                           std::span<const DataType> output_dtypes) {
  if (HasFloat16(inputs, output_dtypes)) return {};
  const size_t axis = static_cast<size_t>(NormalizeAxis(
      attrs.GetInt("axis"), static_cast<int64_t>(inputs[0]->shape.size()), "concatenate"));
  // Sizes along the axis may be symbolic: an input of size 0 at run time is
  // then never selected, and its clamped read never taken.
  std::vector<Expr> sizes;
  Expr total = tir::IntImm(0);  // constant sizes fold into a constant
  for (const te::Tensor& input : inputs) {
    sizes.push_back(input->shape[axis]);
    total = tir::Add(total, sizes.back());
  }
  Indices shape = SharedDims(context, "concatenate", inputs, axis);
  shape[axis] = total;
  return {te::Compute("concatenate", shape, [&](const Indices& indices) {
    const Expr& at = indices[axis];
    Expr value = tir::Constant(output_dtypes[0], 0);  // stored by no element: total is 0
    bool last = true;
    Expr end = total;
    for (size_t i = inputs.size(); i-- > 0;) {
      const Expr start = tir::Sub(end, sizes[i]);
      int64_t size;
      if (!tir::AsInt(sizes[i], &size) || size > 0) {
        Indices source = indices;
        source[axis] = tir::Min(tir::Max(tir::Sub(at, start), tir::IntImm(0)),
                                tir::Sub(sizes[i], tir::IntImm(1)));
        const Expr read = te::Read(inputs[i], source);
        value = last ? read : tir::Select(tir::Compare(tir::CompareOp::kLt, at, end), read, value);
        last = false;
      }
      end = start;
    }
    return value;
  })};
}

std::vector<te::Tensor> StackCompute(te::ComputeContext& context,
                                     std::span<const te::Tensor> inputs, const ir::Attrs& attrs,
                                     std::span<const DataType> output_dtypes) {
  if (HasFloat16(inputs, output_dtypes)) return {};
  const size_t rank = inputs[0]->shape.size();
  const auto axis = static_cast<size_t>(
      rules::NormalizeInsertAxis(attrs.GetInt("axis"), static_cast<int64_t>(rank), "stack"));
  Indices shape = SharedDims(context, "stack", inputs, rank);
  shape.insert(shape.begin() + static_cast<std::ptrdiff_t>(axis),
               tir::IntImm(static_cast<int64_t>(inputs.size())));
  return {te::Compute("stack", shape, [&](const Indices& indices) {
    Indices source = indices;
    source.erase(source.begin() + static_cast<std::ptrdiff_t>(axis));
    Expr value = te::Read(inputs.back(), source);
    for (size_t i = inputs.size() - 1; i-- > 0;) {
      const Expr at_input =
          tir::Compare(tir::CompareOp::kEq, indices[axis], tir::IntImm(static_cast<int64_t>(i)));
      value = tir::Select(at_input, te::Read(inputs[i], source), value);
    }
    return value;
  })};
}

std::vector<te::Tensor> SplitCompute(te::ComputeContext& context,
                                     std::span<const te::Tensor> inputs, const ir::Attrs& attrs,
                                     std::span<const DataType> output_dtypes) {
  if (HasFloat16(inputs, output_dtypes)) return {};
  const te::Tensor& data = inputs[0];
  const size_t axis = static_cast<size_t>(
      NormalizeAxis(attrs.GetInt("axis"), static_cast<int64_t>(data->shape.size()), "split"));
  const Expr& length = data->shape[axis];
  // Each piece's start and size along the axis.
  std::vector<std::pair<Expr, Expr>> pieces;
  if (const std::optional<int64_t> sections = rules::SplitSections(attrs)) {
    const Expr size = tir::FloorDiv(length, tir::IntImm(*sections));
    context.Require(tir::Compare(tir::CompareOp::kEq, tir::FloorMod(length, tir::IntImm(*sections)),
                                 tir::IntImm(0)),
                    "split: the axis does not divide into equal sections");
    for (int64_t k = 0; k < *sections; ++k)
      pieces.emplace_back(tir::Mul(size, tir::IntImm(k)), size);
  } else {
    const std::vector<int64_t>& indices = attrs.GetIntList("indices_or_sections");
    int64_t start = 0;
    for (int64_t index : indices) {
      pieces.emplace_back(tir::IntImm(start), tir::IntImm(index - start));
      start = index;
    }
    pieces.emplace_back(tir::IntImm(start), tir::Sub(length, tir::IntImm(start)));
  }
  std::vector<te::Tensor> outputs;
  for (size_t k = 0; k < pieces.size(); ++k) {
    Indices shape = data->shape;
    shape[axis] = pieces[k].second;
    outputs.push_back(Gather("split." + std::to_string(k), data, shape, [&](Indices indices) {
      indices[axis] = tir::Add(indices[axis], pieces[k].first);
      return indices;
    }));
  }
  return outputs;
}

// take's "fast" mode fails on an out-of-range index: on the CPU it is left to
// the built-in kernel, which names the index; on the GPU the kernel checks it
// (check_index).
std::vector<te::Tensor> TakeCompute(te::ComputeContext& context, std::span<const te::Tensor> inputs,
                                    const ir::Attrs& attrs,
                                    std::span<const DataType> output_dtypes) {
  const rules::TakeMode mode = rules::ParseTakeMode(attrs);
  if (HasFloat16(inputs, output_dtypes) || (mode == rules::TakeMode::kFast && !context.gpu())) {
    return {};
  }
  const te::Tensor& data = inputs[0];
  const te::Tensor& indices = inputs[1];
  const bool flat = attrs.IsNone("axis");
  const rules::TakeAxes axes =
      flat ? rules::TakeAxes{0, 0}
           : rules::ResolveTakeAxes(data->shape.size(), indices->shape.size(), attrs);
  const Expr extent = flat ? tir::NumElements(data->shape) : data->shape[axes.axis];
  Indices shape;
  if (flat) {
    shape = indices->shape;
  } else {
    shape.assign(data->shape.begin(), data->shape.begin() + static_cast<std::ptrdiff_t>(axes.axis));
    for (size_t d = 0; d < axes.batch_dims; ++d) {
      shape[d] = SharedDim(context, {data->shape[d], indices->shape[d]},
                           "take: data and indices differ in batch dimension " + std::to_string(d));
    }
    shape.insert(shape.end(), indices->shape.begin() + static_cast<std::ptrdiff_t>(axes.batch_dims),
                 indices->shape.end());
    shape.insert(shape.end(), data->shape.begin() + static_cast<std::ptrdiff_t>(axes.axis) + 1,
                 data->shape.end());
  }
  // Every index is out of range for an empty axis (TakeRow).
  context.Require(
      tir::Or(tir::Compare(tir::CompareOp::kNe, extent, tir::IntImm(0)),
              tir::Compare(tir::CompareOp::kEq, tir::NumElements(shape), tir::IntImm(0))),
      "take: an index is out of range for an empty axis");
  // TakeRow's clip and wrap. Wrap takes a negative index as
  // extent - 1 - (-1 - index) mod extent, so that FloorMod's operands are
  // never negative where it counts and nothing overflows.
  const auto row = [&](const Expr& index) {
    const Expr one = tir::IntImm(1);
    if (mode == rules::TakeMode::kFast)
      return tir::Call(tir::Intrinsic::kCheckIndex, {index, extent});
    if (mode == rules::TakeMode::kClip) {
      return tir::Min(tir::Max(index, tir::IntImm(0)), tir::Sub(extent, one));
    }
    return tir::Select(
        tir::Compare(tir::CompareOp::kLt, index, tir::IntImm(0)),
        tir::Sub(tir::Sub(extent, one), tir::FloorMod(tir::Sub(tir::IntImm(-1), index), extent)),
        tir::FloorMod(index, extent));
  };
  const size_t taken = indices->shape.size() - axes.batch_dims;
  return {Gather("take", data, shape, [&](const Indices& out) {
    if (flat) {
      return UnravelIndex(row(tir::Cast(DataType::Int64(), te::Read(indices, out))), data->shape);
    }
    const auto at = [&](size_t begin, size_t end) {
      return Indices(out.begin() + static_cast<std::ptrdiff_t>(begin),
                     out.begin() + static_cast<std::ptrdiff_t>(end));
    };
    Indices index_indices = at(0, axes.batch_dims);
    const Indices taken_indices = at(axes.axis, axes.axis + taken);
    index_indices.insert(index_indices.end(), taken_indices.begin(), taken_indices.end());
    Indices source = at(0, axes.axis);
    source.push_back(row(tir::Cast(DataType::Int64(), te::Read(indices, index_indices))));
    const Indices rest = at(axes.axis + taken, out.size());
    source.insert(source.end(), rest.begin(), rest.end());
    return source;
  })};
}

// PlanAxis (transform_rules.h) where the extent may be `?`: begin, end and
// stride are constants, so PlanAxis's branches on them are taken here and
// only the extent is an expression (a static one folds to PlanAxis's
// numbers). False for a stride whose magnitude does not fit int64.
bool PlanAxisExpr(int64_t begin, int64_t end, int64_t stride, bool size_mode, const Expr& extent,
                  Expr* first, Expr* size) {
  if (stride == std::numeric_limits<int64_t>::min()) return false;
  const Expr zero = tir::IntImm(0), one = tir::IntImm(1);
  const auto canonical = [&](int64_t index) {
    const Expr at = index < 0 ? tir::Add(tir::IntImm(index), extent) : tir::IntImm(index);
    return stride < 0 ? tir::Min(tir::Max(at, tir::IntImm(-1)), tir::Sub(extent, one))
                      : tir::Min(tir::Max(at, zero), extent);
  };
  *first = canonical(begin);
  const Expr rest = tir::Sub(extent, *first);
  if (size_mode) {
    *size = end < 0 ? rest : tir::Min(tir::IntImm(end), rest);
    return true;
  }
  const Expr last = canonical(end);
  const Expr distance = stride > 0 ? tir::Sub(last, *first) : tir::Sub(*first, last);
  *size = tir::Select(
      tir::Compare(tir::CompareOp::kGt, distance, zero),
      tir::Add(tir::FloorDiv(tir::Sub(distance, one), tir::IntImm(stride > 0 ? stride : -stride)),
               one),
      zero);
  return true;
}

std::vector<te::Tensor> StridedSliceCompute(te::ComputeContext&, std::span<const te::Tensor> inputs,
                                            const ir::Attrs& attrs,
                                            std::span<const DataType> output_dtypes) {
  if (HasFloat16(inputs, output_dtypes)) return {};
  const te::Tensor& data = inputs[0];
  const size_t rank = data->shape.size();
  const rules::SliceSpec spec = rules::SliceSpecFromAttrs(attrs);
  const std::vector<size_t> axes =
      rules::SlicedAxes(spec, rank, rules::DimsToString(TypeDims(data->shape)), "strided_slice");
  // Per data axis: the first index read, the step, and the output size.
  Indices first(rank, tir::IntImm(0)), shape = data->shape;
  std::vector<int64_t> step(rank, 1);
  for (size_t k = 0; k < axes.size(); ++k) {
    const size_t axis = axes[k];
    const auto [begin, end, stride] = rules::SliceEntryAt(spec, k);
    if (stride == 0 || !PlanAxisExpr(begin, end, stride, spec.size_mode, data->shape[axis],
                                     &first[axis], &shape[axis])) {
      return {};
    }
    step[axis] = stride;
  }
  return {Gather("strided_slice", data, shape, [&](const Indices& indices) {
    Indices source;
    for (size_t d = 0; d < rank; ++d) {
      source.push_back(tir::Add(first[d], tir::Mul(indices[d], tir::IntImm(step[d]))));
    }
    return source;
  })};
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

bool DynStridedSliceRelation(const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                             TypeReporter& reporter) {
  static const char* const kNames[] = {"data", "begin", "end", "strides"};
  std::vector<ir::TensorType> inputs;
  for (size_t i = 0; i < 4; ++i) {
    inputs.push_back(AsTensorType(types[i], "dyn.strided_slice", kNames[i]));
    if (!inputs.back()) return false;
    if (i > 0) CheckShapeTensor(inputs[i], "dyn.strided_slice", kNames[i]);
  }
  rules::ParseSliceMode(attrs, "dyn.strided_slice");
  // Axes past the longest of begin, end and strides are taken whole; a
  // sliced one is at most as long as the dimension.
  size_t sliced = 0;
  for (size_t i = 1; i < 4; ++i) {
    const Dim length = inputs[i]->shape[0];
    sliced = std::max(sliced,
                      length.is_static() ? static_cast<size_t>(length.value()) : inputs[0]->ndim());
  }
  Dims out = inputs[0]->shape;
  for (size_t d = 0; d < std::min(sliced, out.size()); ++d) {
    out[d] = Dim::AnyAtMost(out[d].upper_bound());
  }
  reporter.Assign(types.back(), ir::MakeTensorType(out, inputs[0]->dtype));
  return true;
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
  ComputeFunction compute = nullptr;
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
  def.pattern = op.pattern;
  def.kernel = std::move(op.kernel);
  def.compute = std::move(op.compute);
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
          .rule = rules::ReshapeRule<Dim>,
          .kernel = ReshapeReference,
          .compute = ReshapeCompute,
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
          .rule = rules::ReshapeLikeRule<Dim>,
          .kernel = ReshapeReference,
          .compute = ReshapeLikeCompute,
      });
  RegisterStatic(registry,
                 {
                     .name = "transpose",
                     .description = "Permutes the axes of data (axes None reverses them).",
                     .attrs = {Optional("axes", K::kIntList)},
                     .rule = rules::TransposeRule<Dim>,
                     .kernel = TransposeReference,
                     .compute = TransposeCompute,
                 });
  RegisterStatic(registry,
                 {
                     .name = "squeeze",
                     .description = "Removes the given size-1 axes (axis None: every size-1 axis).",
                     .attrs = {Optional("axis", K::kIntList)},
                     .rule = rules::SqueezeRule<Dim>,
                     .kernel = ReshapeReference,
                     .compute = SqueezeCompute,
                 });
  RegisterStatic(registry, {
                               .name = "expand_dims",
                               .description = "Inserts num_newaxis size-1 axes at position axis.",
                               .attrs = {Required("axis", K::kInt),
                                         Optional("num_newaxis", K::kInt, int64_t{1})},
                               .rule = rules::ExpandDimsRule<Dim>,
                               .kernel = ReshapeReference,
                               .compute = ExpandDimsCompute,
                               // As in TVM: the output indexes its input like a broadcast does.
                               .pattern = OpPattern::kBroadcast,
                           });
  RegisterStatic(registry, {
                               .name = "concatenate",
                               .description = "Joins a tuple of tensors along axis.",
                               .attrs = {Optional("axis", K::kInt, int64_t{0})},
                               .rule = rules::ConcatenateRule<Dim>,
                               .kernel = ConcatenateReference,
                               .compute = ConcatenateCompute,
                               .tuples = TupleUse::kInput,
                               .check_dtypes = CheckSameDTypes,
                           });
  RegisterStatic(registry,
                 {
                     .name = "stack",
                     .description = "Stacks a tuple of equally shaped tensors along a new axis.",
                     .attrs = {Optional("axis", K::kInt, int64_t{0})},
                     .rule = rules::StackRule<Dim>,
                     .kernel = StackReference,
                     .compute = StackCompute,
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
          .rule = rules::SplitRule<Dim>,
          .kernel = SplitReference,
          .compute = SplitCompute,
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
          .rule = rules::TakeRule<Dim>,
          .kernel = TakeReference,
          .compute = TakeCompute,
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
          .rule = rules::StridedSliceRule<Dim>,
          .kernel = StridedSliceReference,
          .compute = StridedSliceCompute,
      });

  OpDef& dyn_reshape = registry.Register("dyn.reshape");
  dyn_reshape.description =
      "Reshapes data to the shape held by the 1-D tensor newshape (sizes, 0 and -1).";
  dyn_reshape.min_inputs = dyn_reshape.max_inputs = 2;
  dyn_reshape.attrs = {allowzero};
  dyn_reshape.relation = DynReshapeRelation;
  dyn_reshape.pattern = OpPattern::kInjective;
  dyn_reshape.kernel = ReshapeReference;

  OpDef& dyn_slice = registry.Register("dyn.strided_slice");
  dyn_slice.description = "strided_slice with begin, end and strides given as 1-D integer tensors.";
  dyn_slice.min_inputs = dyn_slice.max_inputs = 4;
  dyn_slice.attrs = {slice_mode};
  dyn_slice.relation = DynStridedSliceRelation;
  dyn_slice.pattern = OpPattern::kInjective;
  dyn_slice.kernel = DynStridedSliceReference;
}

}  // namespace nimble::op
