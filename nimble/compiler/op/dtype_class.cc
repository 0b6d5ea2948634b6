#include "nimble/compiler/op/dtype_class.h"

#include "nimble/vm/error.h"

namespace nimble::op {

namespace {

bool DTypeInClass(DataType dtype, DTypeClass accepted) {
  switch (accepted) {
    case DTypeClass::kAny:
      return true;
    case DTypeClass::kNumeric:
      return !dtype.is_bool();
    case DTypeClass::kFloat:
      return dtype.is_float();
    case DTypeClass::kBool:
      return dtype.is_bool();
  }
  return false;
}

std::string DTypeClassName(DTypeClass accepted) {
  switch (accepted) {
    case DTypeClass::kAny:
      return "any";
    case DTypeClass::kNumeric:
      return "an integer or floating-point";
    case DTypeClass::kFloat:
      return "a floating-point";
    case DTypeClass::kBool:
      return "a bool";
  }
  return "?";
}

}  // namespace

TypeRelation RequireDTypeClass(DTypeClass accepted, TypeRelation base, bool check_output) {
  return [accepted, base = std::move(base), check_output](
             const std::vector<ir::Type>& types, const ir::Attrs& attrs, TypeReporter& reporter) {
    const size_t checked = check_output ? types.size() : types.size() - 1;
    for (size_t i = 0; i < checked; ++i) {
      const std::string what = i + 1 == types.size() ? "result" : "argument " + std::to_string(i);
      const ir::Type& type = types[i];
      if (!type || type->kind == ir::TypeKind::kIncomplete ||
          type->kind == ir::TypeKind::kTypeVar) {
        continue;
      }
      if (type->kind != ir::TypeKind::kTensor) {
        throw Error(what + " must be a tensor, got " + ir::TypeToString(type));
      }
      if (!DTypeInClass(type.as<ir::TensorTypeNode>()->dtype, accepted)) {
        throw Error(what + " must be " + DTypeClassName(accepted) + " tensor, got " +
                    ir::TypeToString(types[i]));
      }
    }
    return base(types, attrs, reporter);
  };
}

}  // namespace nimble::op
