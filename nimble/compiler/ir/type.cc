#include "nimble/compiler/ir/type.h"

namespace nimble::ir {

bool TensorTypeNode::is_static() const {
  for (const Dim& dim : shape) {
    if (dim.is_any()) return false;
  }
  return true;
}

TensorType MakeTensorType(std::vector<Dim> shape, DataType dtype) {
  return Make<TensorTypeNode>(std::move(shape), dtype);
}

TupleType MakeTupleType(std::vector<Type> fields) {
  return Make<TupleTypeNode>(std::move(fields));
}

StorageType MakeStorageType() {
  return Make<StorageTypeNode>();
}

namespace {

std::string JoinTypes(const std::vector<Type>& types) {
  std::string text;
  for (size_t i = 0; i < types.size(); ++i) {
    if (i) text += ", ";
    text += TypeToString(types[i]);
  }
  return text;
}

}  // namespace

std::string TypeToString(const Type& type) {
  if (!type) return "_";
  switch (type->kind) {
    case TypeKind::kTensor: {
      const auto* tensor = static_cast<const TensorTypeNode*>(type.get());
      std::string text = "Tensor[(";
      for (size_t i = 0; i < tensor->shape.size(); ++i) {
        if (i) text += ", ";
        text += tensor->shape[i].ToString();
      }
      if (tensor->shape.size() == 1) text += ",";
      return text + "), " + tensor->dtype.name() + "]";
    }
    case TypeKind::kTuple: {
      const auto* tuple = static_cast<const TupleTypeNode*>(type.get());
      return "(" + JoinTypes(tuple->fields) + (tuple->fields.size() == 1 ? ",)" : ")");
    }
    case TypeKind::kFunc: {
      const auto* func = static_cast<const FuncTypeNode*>(type.get());
      std::string text = "fn ";
      if (!func->type_params.empty()) {
        text += "[";
        for (size_t i = 0; i < func->type_params.size(); ++i) {
          if (i) text += ", ";
          text += func->type_params[i]->name;
        }
        text += "]";
      }
      return text + "(" + JoinTypes(func->arg_types) + ") -> " + TypeToString(func->ret_type);
    }
    case TypeKind::kTypeVar:
      return static_cast<const TypeVarNode*>(type.get())->name;
    case TypeKind::kGlobalTypeVar:
      return static_cast<const GlobalTypeVarNode*>(type.get())->name;
    case TypeKind::kTypeCall: {
      const auto* call = static_cast<const TypeCallNode*>(type.get());
      std::string text = call->func->name;
      if (!call->args.empty()) text += "[" + JoinTypes(call->args) + "]";
      return text;
    }
    case TypeKind::kIncomplete:
      return "_";
    case TypeKind::kStorage:
      return "Storage";
  }
  return "_";
}

}  // namespace nimble::ir
