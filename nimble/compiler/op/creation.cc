// Tensor-creation operators, with Relay's names and signatures:
//   zeros / ones / full          shape from the `shape` attribute (static);
//   zeros_like / ones_like / full_like   shape and dtype of `data`;
//   dyn.zeros / dyn.ones / dyn.full      shape from a 1-D integer tensor, known
//                                        only at run time (data-dependent);
//   arange                       a range whose length depends on its inputs'
//                                values (data-dependent).
// Here: their type relations and plain reference kernels; their shape
// functions and fast kernels are in nimble/vm/kernels/creation.cc.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "nimble/compiler/op/compute_util.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/op/type_relations.h"
#include "nimble/vm/error.h"
#include "nimble/vm/kernels/element.h"

namespace nimble::op {

namespace {

// The reference kernels: every element of the output is the fill value
// converted to the output's dtype.
template <typename From>
void FillWith(const Tensor& out, From value) {
  DispatchDType(out->dtype(), [&](auto tag) {
    using To = decltype(tag);
    const int64_t numel = out->numel();
    for (int64_t i = 0; i < numel; ++i) out->data<To>()[i] = ConvertElement<To>(value);
  });
}

// Fills `out` with the element of the scalar tensor `fill_value`.
void FillWithScalar(const Tensor& out, const Tensor& fill_value) {
  DispatchDType(fill_value->dtype(), [&](auto tag) {
    using From = decltype(tag);
    FillWith(out, LoadElement(fill_value->data<From>()[0]));
  });
}

AttrSpec ShapeAttr() {
  return {"shape", ir::AttrKind::kIntList, {}, /*required=*/true};
}
AttrSpec DTypeAttr(ir::AttrValue default_value) {
  return {"dtype", ir::AttrKind::kDType, std::move(default_value)};
}

// The type of a fill_value argument, which must be a scalar; null while unknown.
ir::TensorType FillValueType(const ir::Type& type, const std::string& op) {
  ir::TensorType fill_value = AsTensorType(type, op, "fill_value");
  if (fill_value && fill_value->ndim() != 0) {
    throw Error("fill_value must be a scalar, got " + ir::TypeToString(fill_value));
  }
  return fill_value;
}

// full's output dtype: the `dtype` attribute, or fill_value's when it is None.
DataType FillDType(const ir::Attrs& attrs, const ir::TensorType& fill_value) {
  return attrs.IsNone("dtype") ? fill_value->dtype : attrs.GetDType("dtype");
}

// The output rank of a dyn.* op: the static length of its shape tensor, which
// must be a 1-D integer tensor. -1 while the argument's type is unknown.
int64_t ShapeTensorLength(const ir::Type& type, const std::string& op) {
  ir::TensorType shape = AsTensorType(type, op, "shape");
  if (!shape) return -1;
  if (shape->ndim() != 1 || !shape->dtype.is_int()) {
    throw Error("shape must be a 1-D integer tensor, got " + ir::TypeToString(shape));
  }
  if (shape->shape[0].is_any()) {
    throw Error("the shape tensor's length fixes the output rank and must be static, got " +
                ir::TypeToString(shape));
  }
  return shape->shape[0].value();
}

ir::Type AnyShapeType(int64_t rank, DataType dtype) {
  return ir::MakeTensorType(std::vector<ir::Dim>(rank, ir::Dim::Any()), dtype);
}

// Tensor[shape, dtype] for the static `shape` attribute of zeros, ones and full.
ir::Type AttrShapeType(const ir::Attrs& attrs, DataType dtype) {
  const std::vector<int64_t>& shape = attrs.GetIntList("shape");
  if (std::any_of(shape.begin(), shape.end(), [](int64_t dim) { return dim < 0; })) {
    throw Error("shape " + ShapeToString(shape) + " has a negative dimension");
  }
  return ir::MakeTensorType({shape.begin(), shape.end()}, dtype);
}

bool InitRelation(const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                  TypeReporter& reporter) {
  reporter.Assign(types.back(), AttrShapeType(attrs, attrs.GetDType("dtype")));
  return true;
}

bool FullRelation(const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                  TypeReporter& reporter) {
  ir::TensorType fill_value = FillValueType(types[0], "full");
  if (!fill_value) return false;
  reporter.Assign(types.back(), AttrShapeType(attrs, FillDType(attrs, fill_value)));
  return true;
}

bool FullLikeRelation(const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                      TypeReporter& reporter) {
  FillValueType(types[1], "full_like");
  return IdentityRelation({types[0], types[2]}, attrs, reporter);
}

TypeRelation DynamicInitRelation(const std::string& op) {
  return [op](const std::vector<ir::Type>& types, const ir::Attrs& attrs, TypeReporter& reporter) {
    const int64_t rank = ShapeTensorLength(types[0], op);
    if (rank < 0) return false;
    reporter.Assign(types.back(), AnyShapeType(rank, attrs.GetDType("dtype")));
    return true;
  };
}

bool DynamicFullRelation(const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                         TypeReporter& reporter) {
  ir::TensorType fill_value = FillValueType(types[0], "dyn.full");
  const int64_t rank = ShapeTensorLength(types[1], "dyn.full");
  if (!fill_value || rank < 0) return false;
  reporter.Assign(types.back(), AnyShapeType(rank, FillDType(attrs, fill_value)));
  return true;
}

// Relay's ArangeRel: start, stop and step are scalars of the output dtype.
bool ArangeRelation(const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                    TypeReporter& reporter) {
  const DataType dtype = attrs.GetDType("dtype");
  if (!dtype.is_int() && !dtype.is_float()) {
    throw Error("dtype must be an integer or float type, got " + dtype.name());
  }
  const ir::Type scalar = ir::MakeTensorType({}, dtype);
  const char* names[] = {"start", "stop", "step"};
  for (int i = 0; i < 3; ++i) {
    ir::TensorType given = AsTensorType(types[i], "arange", names[i]);
    if (given && (given->ndim() != 0 || given->dtype != dtype)) {
      throw Error(std::string(names[i]) + " must be a scalar of dtype " + dtype.name() + ", got " +
                  ir::TypeToString(given));
    }
    reporter.Assign(types[i], scalar);
  }
  reporter.Assign(types.back(), ir::MakeTensorType({ir::Dim::Any()}, dtype));
  return true;
}

// out[i] = start + i * step, in int64 arithmetic (wrapping, like the runtime's
// kernel, where i * step alone overflows) or in double.
void ArangeKernel(std::span<const Tensor> inputs, std::span<Tensor> outputs, const ir::Attrs&) {
  const Tensor& out = outputs[0];
  DispatchDType(out->dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < out->numel(); ++i) {
      if constexpr (std::is_integral_v<T>) {
        const int64_t offset = Wrapping(std::multiplies<>(), i, inputs[2]->GetAsInt64(0));
        const int64_t value = Wrapping(std::plus<>(), inputs[0]->GetAsInt64(0), offset);
        out->data<T>()[i] = static_cast<T>(value);
      } else {
        const double step = inputs[2]->GetAsDouble(0);
        out->data<T>()[i] = ConvertElement<T>(inputs[0]->GetAsDouble(0) + i * step);
      }
    }
  });
}

void FullKernel(std::span<const Tensor> inputs, std::span<Tensor> outputs, const ir::Attrs&) {
  FillWithScalar(outputs[0], inputs[0]);
}

void FullLikeKernel(std::span<const Tensor> inputs, std::span<Tensor> outputs, const ir::Attrs&) {
  FillWithScalar(outputs[0], inputs[1]);
}

// Compute definitions: each element is the fill value converted to the
// output dtype (tir::Cast converts as ConvertElement does).

// The fill value from the inputs, in the output dtype.
using FillValue = std::function<Expr(std::span<const te::Tensor> inputs, DataType dtype)>;

FillValue ConstantFill(int64_t value) {
  return [value](std::span<const te::Tensor>, DataType dtype) {
    return tir::Constant(dtype, static_cast<double>(value));
  };
}

FillValue ScalarInputFill(size_t input) {
  return [input](std::span<const te::Tensor> inputs, DataType dtype) {
    return tir::Cast(dtype, te::Read(inputs[input], {}));
  };
}

// `like`: the shape is input 0's, else the `shape` attribute.
ComputeFunction FillCompute(const std::string& name, bool like, FillValue fill) {
  return [name, like, fill](te::ComputeContext&, std::span<const te::Tensor> inputs,
                            const ir::Attrs& attrs,
                            std::span<const DataType> output_dtypes) -> std::vector<te::Tensor> {
    if (HasFloat16(inputs, output_dtypes)) return {};
    std::vector<Expr> shape;
    if (like) {
      shape = inputs[0]->shape;
    } else {
      for (int64_t dim : attrs.GetIntList("shape")) shape.push_back(tir::IntImm(dim));
    }
    const Expr value = fill(inputs, output_dtypes[0]);
    return {te::Compute(name, shape, [&](const std::vector<Expr>&) { return value; })};
  };
}

// zeros or ones (`name`, filled with `value`) in their three forms: static
// shape, `_like`, and `dyn.` with a shape tensor.
void RegisterConstantFill(OpRegistry& registry, const std::string& name, int64_t value) {
  const ReferenceKernel kernel = [value](std::span<const Tensor>, std::span<Tensor> outputs,
                                         const ir::Attrs&) { FillWith(outputs[0], value); };

  OpDef& init = registry.Register(name);
  init.description = "A tensor of the given shape and dtype filled with " + std::to_string(value) +
                     "s; the shape is a static attribute.";
  init.min_inputs = init.max_inputs = 0;
  init.attrs = {ShapeAttr(), DTypeAttr(DataType::Float32())};
  init.relation = InitRelation;
  init.pattern = OpPattern::kElemWise;
  init.kernel = kernel;
  init.compute = FillCompute(name, /*like=*/false, ConstantFill(value));

  OpDef& like = registry.Register(name + "_like");
  like.description =
      "A tensor of data's shape and dtype filled with " + std::to_string(value) + "s.";
  like.relation = IdentityRelation;
  like.pattern = OpPattern::kElemWise;
  like.kernel = kernel;
  like.compute = FillCompute(like.name, /*like=*/true, ConstantFill(value));

  // Opaque: fusing would make the data-dependent shape function read a value
  // computed inside the fused kernel.
  OpDef& dynamic = registry.Register("dyn." + name);
  dynamic.description = "A tensor filled with " + std::to_string(value) +
                        "s whose shape is the value of a 1-D integer tensor, known at run time.";
  dynamic.attrs = {DTypeAttr(DataType::Float32())};
  dynamic.relation = DynamicInitRelation(dynamic.name);
  dynamic.pattern = OpPattern::kOpaque;
  dynamic.kernel = kernel;
}

}  // namespace

void RegisterCreationOps(OpRegistry& registry) {
  RegisterConstantFill(registry, "zeros", 0);
  RegisterConstantFill(registry, "ones", 1);

  OpDef& full = registry.Register("full");
  full.description =
      "A tensor of the given static shape filled with the scalar fill_value, cast to dtype "
      "(fill_value's dtype when dtype is None).";
  full.attrs = {ShapeAttr(), DTypeAttr({})};
  full.relation = FullRelation;
  full.pattern = OpPattern::kElemWise;
  full.kernel = FullKernel;
  full.compute = FillCompute("full", /*like=*/false, ScalarInputFill(0));

  OpDef& full_like = registry.Register("full_like");
  full_like.description = "A tensor of data's shape and dtype filled with the scalar fill_value.";
  full_like.min_inputs = full_like.max_inputs = 2;
  full_like.relation = FullLikeRelation;
  full_like.pattern = OpPattern::kElemWise;
  full_like.kernel = FullLikeKernel;
  full_like.compute = FillCompute("full_like", /*like=*/true, ScalarInputFill(1));

  OpDef& dynamic_full = registry.Register("dyn.full");
  dynamic_full.description =
      "full with the shape given by the value of a 1-D integer tensor, known at run time.";
  dynamic_full.min_inputs = dynamic_full.max_inputs = 2;
  dynamic_full.attrs = {DTypeAttr({})};
  dynamic_full.relation = DynamicFullRelation;
  dynamic_full.pattern = OpPattern::kOpaque;
  dynamic_full.kernel = FullKernel;

  OpDef& arange = registry.Register("arange");
  arange.description =
      "The values start, start + step, ... up to but excluding stop; start, stop and step are "
      "scalars of dtype, so the length is known only at run time.";
  arange.min_inputs = arange.max_inputs = 3;
  arange.attrs = {DTypeAttr(DataType::Float32())};
  arange.relation = ArangeRelation;
  arange.pattern = OpPattern::kOpaque;
  arange.kernel = ArangeKernel;
}

}  // namespace nimble::op
