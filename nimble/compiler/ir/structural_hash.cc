#include "nimble/compiler/ir/structural_hash.h"

#include <functional>
#include <string_view>
#include <unordered_map>
#include <variant>

#include "nimble/compiler/ir/scoped_bindings.h"
#include "nimble/compiler/support/deep_stack.h"

namespace nimble::ir {

namespace {

size_t Combine(size_t seed, size_t value) {
  return seed ^ (value + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2));
}

size_t HashString(std::string_view text) {
  return std::hash<std::string_view>()(text);
}

size_t HashDType(DataType dtype) {
  return Combine(static_cast<size_t>(dtype.code()), static_cast<size_t>(dtype.bits()));
}

size_t HashHeld(std::monostate) {
  return 0;
}
size_t HashHeld(bool value) {
  return value;
}
size_t HashHeld(int64_t value) {
  return std::hash<int64_t>()(value);
}
// 0.0 == -0.0, so both must hash alike.
size_t HashHeld(double value) {
  return std::hash<double>()(value == 0 ? 0.0 : value);
}
size_t HashHeld(const std::string& value) {
  return HashString(value);
}
size_t HashHeld(DataType value) {
  return HashDType(value);
}
size_t HashHeld(const std::vector<int64_t>& values) {
  size_t seed = values.size();
  for (int64_t value : values) seed = Combine(seed, HashHeld(value));
  return seed;
}

size_t HashAttrValue(const AttrValue& value) {
  return Combine(value.index(), std::visit([](const auto& held) { return HashHeld(held); }, value));
}

size_t HashAttrs(const Attrs& attrs) {
  size_t seed = attrs.entries().size();
  for (const auto& [name, value] : attrs.entries()) {
    seed = Combine(Combine(seed, HashString(name)), HashAttrValue(value));
  }
  return seed;
}

size_t HashConstant(const ConstantNode* node) {
  const Tensor& data = node->data;
  size_t seed = Combine(HashString(node->name), HashDType(data->dtype()));
  for (int64_t dim : data->shape()) seed = Combine(seed, std::hash<int64_t>()(dim));
  const std::string_view bytes(static_cast<const char*>(data->raw_data()), data->nbytes());
  return Combine(seed, HashString(bytes));
}

struct MemoKey {
  const ExprNode* node;
  uint64_t var_scope;
  uint64_t type_var_scope;
  bool operator==(const MemoKey&) const = default;
};

struct MemoKeyHash {
  size_t operator()(const MemoKey& key) const {
    return Combine(Combine(std::hash<const void*>()(key.node), key.var_scope), key.type_var_scope);
  }
};

class Hasher {
 public:
  size_t Hash(const Expr& expr) {
    if (!expr) return 0;
    if (expr->kind == ExprKind::kVar) return HashVar(static_cast<const VarNode*>(expr.get()));
    // Equal under the same bindings means equal hash: see ScopedBindings.
    const MemoKey key{expr.get(), var_levels_.scope_id(), type_var_levels_.scope_id()};
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    const size_t hash = Combine(static_cast<size_t>(expr->kind), HashNode(expr));
    memo_.emplace(key, hash);
    return hash;
  }

  size_t Hash(const Type& type) {
    if (!type) return 0;
    return Combine(static_cast<size_t>(type->kind) + 0x100, HashTypeNode(type));
  }

 private:
  template <typename T>
  size_t HashAll(const std::vector<T>& items) {
    size_t seed = items.size();
    for (const T& item : items) seed = Combine(seed, Hash(item));
    return seed;
  }

  // A bound variable hashes as its distance from its binder, so alpha-renamed
  // programs hash alike.
  template <typename Node>
  static size_t HashVariable(const ScopedBindings<const Node*, size_t>& levels, const Node* node) {
    const size_t* level = levels.Find(node);
    if (!level) return Combine(1, std::hash<const void*>()(node));
    return Combine(2, levels.depth() - *level);
  }

  size_t HashVar(const VarNode* node) { return HashVariable(var_levels_, node); }

  size_t BindVar(const Var& var) {
    const size_t annotation = Hash(var->type_annotation);
    var_levels_.Bind(var.get(), var_levels_.depth());
    return annotation;
  }

  size_t BindTypeVars(const std::vector<TypeVar>& type_vars) {
    for (const TypeVar& type_var : type_vars) {
      type_var_levels_.Bind(type_var.get(), type_var_levels_.depth());
    }
    return type_vars.size();
  }

  size_t BindPattern(const Pattern& pattern) {
    size_t seed = static_cast<size_t>(pattern->kind);
    switch (pattern->kind) {
      case PatternKind::kWildcard:
        return seed;
      case PatternKind::kVar:
        return Combine(seed, BindVar(static_cast<const PatternVarNode*>(pattern.get())->var));
      case PatternKind::kConstructor: {
        const auto* node = static_cast<const PatternConstructorNode*>(pattern.get());
        seed = Combine(Combine(seed, HashString(node->constructor->name)), node->constructor->tag);
        return Combine(seed, BindPatterns(node->patterns));
      }
      case PatternKind::kTuple:
        return Combine(seed,
                       BindPatterns(static_cast<const PatternTupleNode*>(pattern.get())->patterns));
    }
    return seed;
  }

  size_t BindPatterns(const std::vector<Pattern>& patterns) {
    size_t seed = patterns.size();
    for (const Pattern& pattern : patterns) seed = Combine(seed, BindPattern(pattern));
    return seed;
  }

  size_t HashTypeNode(const Type& type) {
    switch (type->kind) {
      case TypeKind::kTensor: {
        const auto* node = static_cast<const TensorTypeNode*>(type.get());
        size_t seed = Combine(HashDType(node->dtype), node->shape.size());
        for (const Dim& dim : node->shape) {
          seed = Combine(seed, std::hash<int64_t>()(dim.value()));
          seed = Combine(seed, std::hash<int64_t>()(dim.upper_bound().value_or(-1)));
        }
        return seed;
      }
      case TypeKind::kTuple:
        return HashAll(static_cast<const TupleTypeNode*>(type.get())->fields);
      case TypeKind::kFunc: {
        const auto* node = static_cast<const FuncTypeNode*>(type.get());
        const auto mark = type_var_levels_.mark();
        size_t seed = BindTypeVars(node->type_params);
        seed = Combine(Combine(seed, HashAll(node->arg_types)), Hash(node->ret_type));
        type_var_levels_.Restore(mark);
        return seed;
      }
      case TypeKind::kTypeVar:
        return HashVariable(type_var_levels_, static_cast<const TypeVarNode*>(type.get()));
      case TypeKind::kGlobalTypeVar:
        return HashString(static_cast<const GlobalTypeVarNode*>(type.get())->name);
      case TypeKind::kTypeCall: {
        const auto* node = static_cast<const TypeCallNode*>(type.get());
        return Combine(HashString(node->func->name), HashAll(node->args));
      }
      case TypeKind::kIncomplete:
        return 0;
      case TypeKind::kStorage:
        return 1;
    }
    return 0;
  }

  size_t HashFunction(const FunctionNode* node) {
    const auto var_mark = var_levels_.mark();
    const auto type_var_mark = type_var_levels_.mark();
    size_t seed = Combine(BindTypeVars(node->type_params), HashAttrs(node->attrs));
    seed = Combine(seed, node->params.size());
    for (const Var& param : node->params) seed = Combine(seed, BindVar(param));
    seed = Combine(Combine(seed, Hash(node->ret_type)), Hash(node->body));
    var_levels_.Restore(var_mark);
    type_var_levels_.Restore(type_var_mark);
    return seed;
  }

  size_t HashMatch(const MatchNode* node) {
    size_t seed = Combine(Combine(node->complete, node->clauses.size()), Hash(node->data));
    for (const Clause& clause : node->clauses) {
      const auto mark = var_levels_.mark();
      seed = Combine(seed, BindPattern(clause.lhs));  // binds before the rhs is hashed
      seed = Combine(seed, Hash(clause.rhs));
      var_levels_.Restore(mark);
    }
    return seed;
  }

  size_t HashNode(const Expr& expr) {
    switch (expr->kind) {
      case ExprKind::kVar:
        return HashVar(static_cast<const VarNode*>(expr.get()));
      case ExprKind::kGlobalVar:
        return HashString(static_cast<const GlobalVarNode*>(expr.get())->name);
      case ExprKind::kConstant:
        return HashConstant(static_cast<const ConstantNode*>(expr.get()));
      case ExprKind::kTuple:
        return HashAll(static_cast<const TupleNode*>(expr.get())->fields);
      case ExprKind::kTupleGetItem: {
        const auto* node = static_cast<const TupleGetItemNode*>(expr.get());
        return Combine(static_cast<size_t>(node->index), Hash(node->tuple));
      }
      case ExprKind::kOp:
        return HashString(static_cast<const OpNode*>(expr.get())->name);
      case ExprKind::kCall: {
        const auto* node = static_cast<const CallNode*>(expr.get());
        return Combine(Combine(HashAttrs(node->attrs), Hash(node->callee)), HashAll(node->args));
      }
      case ExprKind::kLet: {
        const auto* node = static_cast<const LetNode*>(expr.get());
        const auto mark = var_levels_.mark();
        size_t hash = BindVar(node->var);  // binds before the value: `let` may recurse
        hash = Combine(hash, Hash(node->value));
        hash = Combine(hash, Hash(node->body));
        var_levels_.Restore(mark);
        return hash;
      }
      case ExprKind::kIf: {
        const auto* node = static_cast<const IfNode*>(expr.get());
        return Combine(Combine(Hash(node->cond), Hash(node->then_branch)), Hash(node->else_branch));
      }
      case ExprKind::kFunction:
        return HashFunction(static_cast<const FunctionNode*>(expr.get()));
      case ExprKind::kConstructor: {
        const auto* node = static_cast<const ConstructorNode*>(expr.get());
        return Combine(HashString(node->name), static_cast<size_t>(node->tag));
      }
      case ExprKind::kMatch:
        return HashMatch(static_cast<const MatchNode*>(expr.get()));
    }
    return 0;
  }

  ScopedBindings<const VarNode*, size_t> var_levels_;
  ScopedBindings<const TypeVarNode*, size_t> type_var_levels_;
  std::unordered_map<MemoKey, size_t, MemoKeyHash> memo_;
};

}  // namespace

size_t StructuralHash(const Expr& expr) {
  return RunWithDeepStack([&] { return Hasher().Hash(expr); });
}

size_t StructuralHash(const Type& type) {
  return RunWithDeepStack([&] { return Hasher().Hash(type); });
}

}  // namespace nimble::ir
