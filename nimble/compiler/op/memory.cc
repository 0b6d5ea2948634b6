// The memory dialect [paper 4.3]: the operators memory manifestation writes,
// so that every allocation, kernel call and device copy of a compiled program
// is explicit IR that later passes (memory planning, device placement) can
// rewrite and tests can read as text. They have no shape function and no
// reference kernel: only compiled programs contain them, and the VM compiler
// turns each into instructions (docs/memory-dialect.md).
#include <algorithm>
#include <string>
#include <vector>

#include "nimble/compiler/op/op.h"
#include "nimble/compiler/op/type_relations.h"
#include "nimble/vm/error.h"

namespace nimble::op {

namespace {

bool IsUnknown(const ir::Type& type) {
  return !type || type->kind == ir::TypeKind::kIncomplete || type->kind == ir::TypeKind::kTypeVar;
}

ir::Type UnitType() {
  return ir::MakeTupleType({});
}

// An int64 tensor of rank `rank`: a size or offset (rank 0) or a shape (rank 1).
void CheckInt64(const ir::Type& type, size_t rank, const std::string& op, const std::string& what) {
  const ir::TensorType tensor = AsTensorType(type, op, what);
  if (!tensor) return;
  if (tensor->dtype != DataType::Int64() || tensor->ndim() != rank) {
    throw Error(what + " must be an int64 tensor of rank " + std::to_string(rank) + ", got " +
                ir::TypeToString(type));
  }
}

// The tensor type of `assert_shape` (-1 for a dimension known only at run
// time) and `dtype`, after checking that the shape argument has that rank.
ir::Type AssertedType(const ir::Type& shape_arg, const std::vector<int64_t>& assert_shape,
                      DataType dtype, const std::string& op) {
  CheckInt64(shape_arg, 1, op, "shape");
  if (const ir::TensorType shape = AsTensorType(shape_arg, op, "shape");
      shape && shape->shape[0].is_static() &&
      shape->shape[0].value() != static_cast<int64_t>(assert_shape.size())) {
    throw Error("shape has " + shape->shape[0].ToString() + " elements but assert_shape " +
                AttrValueToString(assert_shape) + " has rank " +
                std::to_string(assert_shape.size()));
  }
  std::vector<ir::Dim> dims;
  for (int64_t dim : assert_shape) {
    if (dim < -1) throw Error("assert_shape holds " + std::to_string(dim));
    dims.push_back(dim == -1 ? ir::Dim::Any() : ir::Dim(dim));
  }
  return ir::MakeTensorType(std::move(dims), dtype);
}

bool AllocStorageRelation(const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                          TypeReporter& reporter) {
  const ir::TensorType size = AsTensorType(types[0], "memory.alloc_storage", "size");
  if (size) CheckInt64(types[0], size->ndim() == 1 ? 1 : 0, "memory.alloc_storage", "size");
  if (attrs.GetInt("alignment") <= 0) {
    throw Error("alignment must be positive, got " + std::to_string(attrs.GetInt("alignment")));
  }
  reporter.Assign(types.back(), ir::MakeStorageType());
  return true;
}

bool AllocTensorRelation(const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                         TypeReporter& reporter) {
  if (!IsUnknown(types[0]) && types[0]->kind != ir::TypeKind::kStorage) {
    throw Error("storage must be a Storage, got " + ir::TypeToString(types[0]));
  }
  CheckInt64(types[1], 0, "memory.alloc_tensor", "offset");
  const std::vector<int64_t>& assert_shape = attrs.GetIntList("assert_shape");
  // Without a shape argument the shape is assert_shape, which must be static.
  if (types.size() == 3 &&
      std::find(assert_shape.begin(), assert_shape.end(), -1) != assert_shape.end()) {
    throw Error("a dynamic assert_shape " + AttrValueToString(assert_shape) +
                " needs a shape argument");
  }
  const ir::Type shape_arg =
      types.size() == 4
          ? types[2]
          : ir::MakeTensorType({static_cast<int64_t>(assert_shape.size())}, DataType::Int64());
  reporter.Assign(types.back(), AssertedType(shape_arg, assert_shape, attrs.GetDType("dtype"),
                                             "memory.alloc_tensor"));
  return true;
}

// invoke_mut and shape_func: (function, tuple of inputs, tuple of outputs) -> ().
TypeRelation CallWithOutputsRelation(const std::string& op) {
  return [op](const std::vector<ir::Type>& types, const ir::Attrs&, TypeReporter& reporter) {
    if (!IsUnknown(types[0]) && types[0]->kind != ir::TypeKind::kFunc) {
      throw Error("argument 0 must be a primitive function, got " + ir::TypeToString(types[0]));
    }
    for (size_t i = 1; i <= 2; ++i) {
      if (!IsUnknown(types[i]) && types[i]->kind != ir::TypeKind::kTuple) {
        throw Error(std::string(i == 1 ? "inputs" : "outputs") + " must be a tuple, got " +
                    ir::TypeToString(types[i]));
      }
    }
    reporter.Assign(types.back(), UnitType());
    return true;
  };
}

bool KillRelation(const std::vector<ir::Type>& types, const ir::Attrs&, TypeReporter& reporter) {
  reporter.Assign(types.back(), UnitType());
  return true;
}

bool ReshapeTensorRelation(const std::vector<ir::Type>& types, const ir::Attrs& attrs,
                           TypeReporter& reporter) {
  const ir::TensorType data = AsTensorType(types[0], "memory.reshape_tensor", "data");
  if (!data) return false;
  reporter.Assign(types.back(), AssertedType(types[1], attrs.GetIntList("assert_shape"),
                                             data->dtype, "memory.reshape_tensor"));
  return true;
}

AttrSpec DeviceAttr(const std::string& name) {
  return {.name = name, .kind = ir::AttrKind::kString, .default_value = std::string("cpu")};
}

OpDef& RegisterDialectOp(OpRegistry& registry, const std::string& name, int num_inputs,
                         const std::string& description, TypeRelation relation) {
  OpDef& def = registry.Register(name);
  def.description = description;
  def.min_inputs = num_inputs;
  def.max_inputs = num_inputs;
  def.relation = std::move(relation);
  def.pattern = OpPattern::kOpaque;
  def.dialect = true;
  return def;
}

}  // namespace

void RegisterMemoryOps(OpRegistry& registry) {
  OpDef& alloc_storage = RegisterDialectOp(
      registry, "memory.alloc_storage", 1,
      "A Storage on device, aligned to alignment, of size bytes (an int64 scalar) or, when size "
      "is an int64 shape, of the bytes of a dtype tensor of that shape.",
      AllocStorageRelation);
  alloc_storage.attrs = {
      {.name = "alignment", .kind = ir::AttrKind::kInt, .default_value = int64_t{64}},
      DeviceAttr("device"),
      {.name = "dtype", .kind = ir::AttrKind::kDType, .default_value = DataType::UInt8()}};

  OpDef& alloc_tensor = RegisterDialectOp(
      registry, "memory.alloc_tensor", 3,
      "A tensor of dtype viewing storage from byte offset on, with the shape held by the int64 "
      "tensor shape; assert_shape is that shape as far as it is static (-1 elsewhere). A static "
      "shape may be given by assert_shape alone: alloc_tensor(storage, offset, ...).",
      AllocTensorRelation);
  alloc_tensor.min_inputs = 2;
  alloc_tensor.attrs = {
      {.name = "dtype", .kind = ir::AttrKind::kDType, .default_value = {}, .required = true},
      {.name = "assert_shape",
       .kind = ir::AttrKind::kIntList,
       .default_value = {},
       .required = true}};

  RegisterDialectOp(registry, "memory.invoke_mut", 3,
                    "Runs the primitive function's kernel on the inputs tuple, writing into the "
                    "pre-allocated tensors of the outputs tuple (destination passing).",
                    CallWithOutputsRelation("memory.invoke_mut"));

  RegisterDialectOp(registry, "memory.shape_func", 3,
                    "Runs the shape function of the primitive function: the inputs tuple holds "
                    "each input's shape (shape_of) or, for data-dependent ops, the input itself; "
                    "each output receives an output shape as an int64 tensor.",
                    CallWithOutputsRelation("memory.shape_func"));

  RegisterDialectOp(registry, "memory.kill", 1,
                    "Ends the life of a value at its last use, so its storage can be reused.",
                    KillRelation);

  OpDef& reshape_tensor = RegisterDialectOp(
      registry, "memory.reshape_tensor", 2,
      "A zero-copy view of data with the shape held by the int64 tensor shape (assert_shape as "
      "in memory.alloc_tensor); also trims an upper-bound output to its true shape.",
      ReshapeTensorRelation);
  reshape_tensor.attrs = {{.name = "assert_shape",
                           .kind = ir::AttrKind::kIntList,
                           .default_value = {},
                           .required = true}};

  OpDef& device_copy =
      RegisterDialectOp(registry, "device_copy", 1, "A copy of data from src_device to dst_device.",
                        IdentityRelation);
  device_copy.attrs = {DeviceAttr("src_device"), DeviceAttr("dst_device")};
}

}  // namespace nimble::op
