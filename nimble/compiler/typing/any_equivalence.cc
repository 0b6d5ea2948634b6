#include "nimble/compiler/typing/any_equivalence.h"

#include <unordered_set>

#include "nimble/compiler/support/deep_stack.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/error.h"

namespace nimble::typing {

namespace {

// Calls `fn(tensor)` for every tensor type in `type`, through tuples, in order.
template <typename Fn>
void ForEachTensor(const ir::Type& type, Fn&& fn) {
  if (type->kind == ir::TypeKind::kTensor) {
    fn(static_cast<const ir::TensorTypeNode*>(type.get()));
  } else if (type->kind == ir::TypeKind::kTuple) {
    for (const ir::Type& field : static_cast<const ir::TupleTypeNode*>(type.get())->fields) {
      ForEachTensor(field, fn);
    }
  }
}

size_t CountAnyDims(const ir::Type& type) {
  size_t count = 0;
  ForEachTensor(type, [&](const ir::TensorTypeNode* tensor) {
    for (const ir::Dim& dim : tensor->shape) count += dim.is_any();
  });
  return count;
}

// `type` with its `*index`-th Any dimension (counting through tuple fields in
// order) replaced by `size`; `*index` counts down the Any dimensions passed.
ir::Type ReplaceAnyDim(const ir::Type& type, size_t* index, int64_t size) {
  if (type->kind == ir::TypeKind::kTuple) {
    std::vector<ir::Type> fields;
    for (const ir::Type& field : static_cast<const ir::TupleTypeNode*>(type.get())->fields) {
      fields.push_back(ReplaceAnyDim(field, index, size));
    }
    return ir::MakeTupleType(std::move(fields));
  }
  if (type->kind != ir::TypeKind::kTensor) return type;
  const auto* tensor = static_cast<const ir::TensorTypeNode*>(type.get());
  std::vector<ir::Dim> shape = tensor->shape;
  for (ir::Dim& dim : shape) {
    if (dim.is_any() && (*index)-- == 0) dim = size;
  }
  return ir::MakeTensorType(std::move(shape), tensor->dtype);
}

// A size for the symbol: a prime no static dimension of the program uses, so
// that it is never 1 and never confused with a real size.
int64_t PickSymbolSize(const TypedExprs& typed) {
  std::unordered_set<int64_t> used;
  for (const auto& [node, type] : typed) {
    ForEachTensor(type, [&](const ir::TensorTypeNode* tensor) {
      for (const ir::Dim& dim : tensor->shape) {
        if (dim.is_static()) used.insert(dim.value());
      }
    });
  }
  for (int64_t candidate : {1000003, 1000033, 1000037, 1000039, 1000081, 1000099}) {
    if (!used.count(candidate)) return candidate;
  }
  throw Error("identical-Any analysis: the program uses every candidate symbol size");
}

// Union-find over the Any dimensions of the original typing.
class DimClasses {
 public:
  size_t Add() {
    parent_.push_back(parent_.size());
    return parent_.size() - 1;
  }
  size_t Find(size_t slot) {
    while (parent_[slot] != slot) slot = parent_[slot] = parent_[parent_[slot]];
    return slot;
  }
  void Unite(size_t a, size_t b) { parent_[Find(a)] = Find(b); }

 private:
  std::vector<size_t> parent_;
};

}  // namespace

int AnyEquivalence::ClassOf(const ir::ExprNode* expr, size_t dim) const {
  auto it = classes_.find(expr);
  if (it == classes_.end() || dim >= it->second.size()) return -1;
  return it->second[dim];
}

AnyEquivalence AnalyzeAnyEquivalence(const ir::IRModule& module) {
  // One deep-stack thread for all the inference runs.
  return RunWithDeepStack([&] {
    AnyEquivalence result;
    const TypedExprs original = InferTypesAssuming(module, {});
    for (const auto& [node, type] : original) node->checked_type = type;
    const ir::Function main = module->Lookup("main");
    if (!main) return result;

    // One slot per Any dimension of a tensor-typed expression.
    DimClasses classes;
    std::vector<AnyDimRef> slots;
    std::unordered_map<const ir::ExprNode*, std::vector<int64_t>> slot_of;  // -1: static
    std::unordered_map<const ir::ExprNode*, ir::Type> original_type;
    for (const auto& [node, type] : original) {
      original_type.emplace(node, type);
      if (type->kind != ir::TypeKind::kTensor || slot_of.count(node)) continue;
      const auto& shape = static_cast<const ir::TensorTypeNode*>(type.get())->shape;
      std::vector<int64_t>& dims = slot_of[node];
      for (size_t d = 0; d < shape.size(); ++d) {
        dims.push_back(shape[d].is_any() ? static_cast<int64_t>(classes.Add()) : -1);
        if (shape[d].is_any()) slots.push_back({node, d});
      }
    }
    const int64_t symbol = PickSymbolSize(original);

    // Each parameter Any dimension in turn: the slots that take its symbol.
    std::vector<size_t> anchors;  // per substitution, the slot that names its class
    std::vector<bool> tied(slots.size(), false);
    for (const ir::Var& param : main->params) {
      const ir::Type type = original_type.at(param.get());
      const size_t count = CountAnyDims(type);
      for (size_t n = 0; n < count; ++n) {
        size_t index = n;
        std::vector<size_t> group;
        if (type->kind == ir::TypeKind::kTensor) {
          // The parameter's own dimension, even if the substitution does not type.
          size_t seen = 0;
          for (int64_t slot : slot_of.at(param.get())) {
            if (slot >= 0 && seen++ == n) group.push_back(slot);
          }
        }
        try {
          const TypedExprs assumed =
              InferTypesAssuming(module, {{param.get(), ReplaceAnyDim(type, &index, symbol)}});
          for (const auto& [node, assumed_type] : assumed) {
            auto dims = slot_of.find(node);
            if (dims == slot_of.end() || assumed_type->kind != ir::TypeKind::kTensor) continue;
            const auto& shape = static_cast<const ir::TensorTypeNode*>(assumed_type.get())->shape;
            if (shape.size() != dims->second.size()) continue;
            for (size_t d = 0; d < shape.size(); ++d) {
              if (dims->second[d] >= 0 && shape[d] == ir::Dim(symbol)) {
                group.push_back(dims->second[d]);
              }
            }
          }
        } catch (const Error&) {
          // A relation pins this dimension (e.g. it must broadcast against 3):
          // it is no free symbol, and only its own class holds it.
        }
        if (group.empty()) continue;
        for (size_t slot : group) {
          classes.Unite(slot, group.front());
          tied[slot] = true;
        }
        anchors.push_back(group.front());
      }
    }

    // Number the classes in parameter order, the defining dimension first.
    std::unordered_map<size_t, int> class_id;
    for (size_t anchor : anchors) {
      if (class_id.emplace(classes.Find(anchor), result.num_classes()).second) {
        result.members_.push_back({slots[anchor]});
      }
    }
    for (size_t slot = 0; slot < slots.size(); ++slot) {
      if (!tied[slot]) continue;
      const int id = class_id.at(classes.Find(slot));
      const AnyDimRef& ref = slots[slot];
      const AnyDimRef& first = result.members_[id].front();
      if (ref.expr != first.expr || ref.dim != first.dim) result.members_[id].push_back(ref);
    }
    for (const auto& [node, dims] : slot_of) {
      std::vector<int>& ids = result.classes_[node];
      for (int64_t slot : dims) {
        ids.push_back(slot >= 0 && tied[slot] ? class_id.at(classes.Find(slot)) : -1);
      }
    }
    return result;
  });
}

}  // namespace nimble::typing
