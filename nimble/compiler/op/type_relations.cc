#include "nimble/compiler/op/type_relations.h"

#include "nimble/vm/error.h"

namespace nimble::op {

ir::TensorType AsTensorType(const ir::Type& type, const std::string& op, const std::string& what) {
  if (!type || type->kind == ir::TypeKind::kIncomplete || type->kind == ir::TypeKind::kTypeVar) {
    return nullptr;
  }
  if (type->kind != ir::TypeKind::kTensor) {
    throw Error((op.empty() ? "" : op + ": ") + what + " must be a tensor, got " +
                ir::TypeToString(type));
  }
  return type.as<ir::TensorTypeNode>();
}

std::vector<ir::Dim> BroadcastDims(const std::vector<ir::Dim>& lhs, const std::vector<ir::Dim>& rhs,
                                   const std::string& op) {
  const size_t ndim = std::max(lhs.size(), rhs.size());
  std::vector<ir::Dim> out(ndim);
  for (size_t i = 0; i < ndim; ++i) {
    // Align from the right, numpy style; a missing dimension acts as 1.
    const ir::Dim a = i < ndim - lhs.size() ? ir::Dim(1) : lhs[i - (ndim - lhs.size())];
    const ir::Dim b = i < ndim - rhs.size() ? ir::Dim(1) : rhs[i - (ndim - rhs.size())];
    // Any against 1 is that Any; against d > 1 it is d (checked at run time).
    if (a.is_any() && b.is_any()) {
      out[i] = ir::EitherDim(a, b);
    } else if (a.is_any()) {
      out[i] = b.value() == 1 ? a : b;
    } else if (b.is_any()) {
      out[i] = a.value() == 1 ? b : a;
    } else if (a.value() == b.value() || b.value() == 1) {
      out[i] = a;
    } else if (a.value() == 1) {
      out[i] = b;
    } else {
      throw Error((op.empty() ? "" : op + ": ") + "dimension " + std::to_string(i) +
                  " conflicts: " + std::to_string(a.value()) + " does not match " +
                  std::to_string(b.value()));
    }
  }
  return out;
}

bool IdentityRelation(const std::vector<ir::Type>& types, const ir::Attrs&,
                      TypeReporter& reporter) {
  if (types[0] && types[0]->kind == ir::TypeKind::kTensor) {
    reporter.Assign(types.back(), types[0]);
    return true;
  }
  if (types.back() && types.back()->kind == ir::TypeKind::kTensor) {
    reporter.Assign(types[0], types.back());
    return true;
  }
  return false;
}

namespace {

bool BroadcastRelationWithDType(const std::vector<ir::Type>& types, TypeReporter& reporter,
                                bool bool_output) {
  const size_t num_inputs = types.size() - 1;
  std::vector<ir::TensorType> inputs;
  for (size_t i = 0; i < num_inputs; ++i) {
    ir::TensorType input = AsTensorType(types[i], "", "argument " + std::to_string(i));
    if (!input) return false;
    inputs.push_back(input);
  }
  std::vector<ir::Dim> shape = inputs[0]->shape;
  for (size_t i = 1; i < num_inputs; ++i) {
    if (inputs[i]->dtype != inputs[0]->dtype) {
      throw Error("argument dtypes differ: " + inputs[0]->dtype.name() + " and " +
                  inputs[i]->dtype.name());
    }
    shape = BroadcastDims(shape, inputs[i]->shape, "");
  }
  const DataType dtype = bool_output ? DataType::Bool() : inputs[0]->dtype;
  reporter.Assign(types.back(), ir::MakeTensorType(std::move(shape), dtype));
  return true;
}

}  // namespace

bool BroadcastRelation(const std::vector<ir::Type>& types, const ir::Attrs&,
                       TypeReporter& reporter) {
  return BroadcastRelationWithDType(types, reporter, false);
}

bool BroadcastCompareRelation(const std::vector<ir::Type>& types, const ir::Attrs&,
                              TypeReporter& reporter) {
  return BroadcastRelationWithDType(types, reporter, true);
}

}  // namespace nimble::op
