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
#include <optional>
#include <span>
#include <string>
#include <vector>

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
  const Dims out(inputs[0]->ndim(), Dim::Any());
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
      });
  RegisterStatic(registry,
                 {
                     .name = "transpose",
                     .description = "Permutes the axes of data (axes None reverses them).",
                     .attrs = {Optional("axes", K::kIntList)},
                     .rule = rules::TransposeRule<Dim>,
                     .kernel = TransposeReference,
                 });
  RegisterStatic(registry,
                 {
                     .name = "squeeze",
                     .description = "Removes the given size-1 axes (axis None: every size-1 axis).",
                     .attrs = {Optional("axis", K::kIntList)},
                     .rule = rules::SqueezeRule<Dim>,
                     .kernel = ReshapeReference,
                 });
  RegisterStatic(registry, {
                               .name = "expand_dims",
                               .description = "Inserts num_newaxis size-1 axes at position axis.",
                               .attrs = {Required("axis", K::kInt),
                                         Optional("num_newaxis", K::kInt, int64_t{1})},
                               .rule = rules::ExpandDimsRule<Dim>,
                               .kernel = ReshapeReference,
                               // As in TVM: the output indexes its input like a broadcast does.
                               .pattern = OpPattern::kBroadcast,
                           });
  RegisterStatic(registry, {
                               .name = "concatenate",
                               .description = "Joins a tuple of tensors along axis.",
                               .attrs = {Optional("axis", K::kInt, int64_t{0})},
                               .rule = rules::ConcatenateRule<Dim>,
                               .kernel = ConcatenateReference,
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
