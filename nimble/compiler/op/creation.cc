// Tensor-creation operators, with Relay's names and signatures:
//   zeros / ones / full          shape from the `shape` attribute (static);
//   zeros_like / ones_like / full_like   shape and dtype of `data`;
//   dyn.zeros / dyn.ones / dyn.full      shape from a 1-D integer tensor, known
//                                        only at run time (data-dependent);
//   arange                       a range whose length depends on its inputs'
//                                values (data-dependent).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "nimble/compiler/op/op.h"
#include "nimble/compiler/op/type_relations.h"
#include "nimble/vm/attrs.h"
#include "nimble/vm/error.h"

namespace nimble::op {

namespace {

// `value` converted as a C++ cast (TVM's `cast`) converts it; float16 goes
// through float.
template <typename To, typename From>
To CastElement(From value) {
  if constexpr (std::is_same_v<From, Half>) {
    return CastElement<To>(HalfToFloat(value));
  } else if constexpr (std::is_same_v<To, Half>) {
    return FloatToHalf(static_cast<float>(value));
  } else {
    return static_cast<To>(value);
  }
}

// Fills `out` with `value` converted to out's dtype.
template <typename From>
void FillWith(const Tensor& out, From value) {
  DispatchDType(out->dtype(), [&](auto tag) {
    using To = decltype(tag);
    To* data = out->data<To>();
    std::fill(data, data + out->numel(), CastElement<To>(value));
  });
}

// Fills `out` with the element of the scalar tensor `fill_value`.
void FillWithScalar(const Tensor& out, const Tensor& fill_value) {
  DispatchDType(fill_value->dtype(), [&](auto tag) {
    using From = decltype(tag);
    FillWith(out, fill_value->data<From>()[0]);
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

std::vector<Shape> AttrShapeFunc(std::span<const Shape>, vm::TensorArgs, const ir::Attrs& attrs) {
  return {attrs.GetIntList("shape")};
}

// dyn.*: the output shape is the value of input `index`.
ShapeFunction ShapeTensorShapeFunc(const std::string& op, size_t index) {
  return [op, index](std::span<const Shape>, vm::TensorArgs input_data, const ir::Attrs&) {
    const Shape shape = vm::ElementsAsInt64(*input_data[index]);
    if (std::any_of(shape.begin(), shape.end(), [](int64_t dim) { return dim < 0; })) {
      throw Error(op + ": the shape tensor holds a negative size: " + ShapeToString(shape));
    }
    ShapeNumel(shape);  // rejects an overflowing element count before anything allocates
    return std::vector<Shape>{shape};
  };
}

std::string ScalarToString(const DLTensor& scalar) {
  return vm::DTypeOf(scalar).is_float() ? ir::FormatFloatLiteral(vm::ElementAsDouble(scalar, 0))
                                        : std::to_string(vm::ElementAsInt64(scalar, 0));
}

// The number of elements of arange(start, stop, step). Integer ranges are
// counted exactly (no rounding through double for int64); float ranges as
// numpy does, ceil((stop - start) / step).
int64_t ArangeLength(const DLTensor& start, const DLTensor& stop, const DLTensor& step) {
  const std::string args = "(start=" + ScalarToString(start) + ", stop=" + ScalarToString(stop) +
                           ", step=" + ScalarToString(step) + ")";
  if (vm::DTypeOf(start).is_float()) {
    const double step_value = vm::ElementAsDouble(step, 0);
    if (step_value == 0) throw Error("arange: step must not be zero " + args);
    const double length =
        std::ceil((vm::ElementAsDouble(stop, 0) - vm::ElementAsDouble(start, 0)) / step_value);
    if (!(length < static_cast<double>(std::numeric_limits<int64_t>::max()))) {
      throw Error("arange: the range " + args + " has no finite length");
    }
    return std::max<int64_t>(0, static_cast<int64_t>(length));
  }
  const int64_t first = vm::ElementAsInt64(start, 0);
  const int64_t last = vm::ElementAsInt64(stop, 0);
  const int64_t stride = vm::ElementAsInt64(step, 0);
  if (stride == 0) throw Error("arange: step must not be zero " + args);
  if (stride > 0 ? last <= first : last >= first) return 0;
  // Unsigned arithmetic: the distance between two int64 values may not fit int64.
  const uint64_t distance = stride > 0 ? static_cast<uint64_t>(last) - static_cast<uint64_t>(first)
                                       : static_cast<uint64_t>(first) - static_cast<uint64_t>(last);
  const uint64_t magnitude =
      stride > 0 ? static_cast<uint64_t>(stride) : 0 - static_cast<uint64_t>(stride);
  const uint64_t length = distance / magnitude + (distance % magnitude != 0);
  if (length > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    throw Error("arange: the range " + args + " is too long");
  }
  return static_cast<int64_t>(length);
}

std::vector<Shape> ArangeShapeFunc(std::span<const Shape>, vm::TensorArgs input_data,
                                   const ir::Attrs&) {
  return {{ArangeLength(*input_data[0], *input_data[1], *input_data[2])}};
}

void ArangeKernel(std::span<const Tensor> inputs, std::span<Tensor> outputs, const ir::Attrs&) {
  const Tensor& out = outputs[0];
  DispatchDType(out->dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* data = out->data<T>();
    const int64_t length = out->numel();
    if constexpr (std::is_integral_v<T>) {
      const int64_t start = inputs[0]->GetAsInt64(0);
      const int64_t step = inputs[2]->GetAsInt64(0);
      for (int64_t i = 0; i < length; ++i) data[i] = static_cast<T>(start + i * step);
    } else {
      const double start = inputs[0]->GetAsDouble(0);
      const double step = inputs[2]->GetAsDouble(0);
      for (int64_t i = 0; i < length; ++i) {
        data[i] = CastElement<T>(start + static_cast<double>(i) * step);
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
  init.shape_func = AttrShapeFunc;
  init.pattern = OpPattern::kElemWise;
  init.kernel = kernel;

  OpDef& like = registry.Register(name + "_like");
  like.description =
      "A tensor of data's shape and dtype filled with " + std::to_string(value) + "s.";
  like.relation = IdentityRelation;
  like.shape_func = IdentityShapeFunc;
  like.pattern = OpPattern::kElemWise;
  like.kernel = kernel;

  // Opaque: fusing would make the data-dependent shape function read a value
  // computed inside the fused kernel.
  OpDef& dynamic = registry.Register("dyn." + name);
  dynamic.description = "A tensor filled with " + std::to_string(value) +
                        "s whose shape is the value of a 1-D integer tensor, known at run time.";
  dynamic.attrs = {DTypeAttr(DataType::Float32())};
  dynamic.relation = DynamicInitRelation(dynamic.name);
  dynamic.shape_func = ShapeTensorShapeFunc(dynamic.name, 0);
  dynamic.shape_mode = ShapeFuncMode::kDataDependent;
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
  full.shape_func = AttrShapeFunc;
  full.pattern = OpPattern::kElemWise;
  full.kernel = FullKernel;

  OpDef& full_like = registry.Register("full_like");
  full_like.description = "A tensor of data's shape and dtype filled with the scalar fill_value.";
  full_like.min_inputs = full_like.max_inputs = 2;
  full_like.relation = FullLikeRelation;
  full_like.shape_func = IdentityShapeFunc;
  full_like.pattern = OpPattern::kElemWise;
  full_like.kernel = FullLikeKernel;

  OpDef& dynamic_full = registry.Register("dyn.full");
  dynamic_full.description =
      "full with the shape given by the value of a 1-D integer tensor, known at run time.";
  dynamic_full.min_inputs = dynamic_full.max_inputs = 2;
  dynamic_full.attrs = {DTypeAttr({})};
  dynamic_full.relation = DynamicFullRelation;
  dynamic_full.shape_func = ShapeTensorShapeFunc(dynamic_full.name, 1);
  dynamic_full.shape_mode = ShapeFuncMode::kDataDependent;
  dynamic_full.pattern = OpPattern::kOpaque;
  dynamic_full.kernel = FullKernel;

  OpDef& arange = registry.Register("arange");
  arange.description =
      "The values start, start + step, ... up to but excluding stop; start, stop and step are "
      "scalars of dtype, so the length is known only at run time.";
  arange.min_inputs = arange.max_inputs = 3;
  arange.attrs = {DTypeAttr(DataType::Float32())};
  arange.relation = ArangeRelation;
  arange.shape_func = ArangeShapeFunc;
  arange.shape_mode = ShapeFuncMode::kDataDependent;
  arange.pattern = OpPattern::kOpaque;
  arange.kernel = ArangeKernel;
}

}  // namespace nimble::op
