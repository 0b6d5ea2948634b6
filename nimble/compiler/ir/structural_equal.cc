#include "nimble/compiler/ir/structural_equal.h"

#include <cstring>
#include <functional>
#include <unordered_set>

#include "nimble/compiler/ir/scoped_bindings.h"
#include "nimble/compiler/support/deep_stack.h"

namespace nimble::ir {

namespace {

// A one-to-one correspondence between the variables bound on the current
// paths through the two programs.
template <typename Node>
class Bijection {
 public:
  using Mark = std::pair<typename ScopedBindings<const Node*, const Node*>::Mark,
                         typename ScopedBindings<const Node*, const Node*>::Mark>;

  void Bind(const Node* lhs, const Node* rhs) {
    forward_.Bind(lhs, rhs);
    backward_.Bind(rhs, lhs);
  }

  // Bound variables correspond when bound to each other; free ones when they
  // are the same variable.
  bool Corresponds(const Node* lhs, const Node* rhs) const {
    const Node* const* partner = forward_.Find(lhs);
    const Node* const* back_partner = backward_.Find(rhs);
    if (!partner && !back_partner) return lhs == rhs;
    return partner && back_partner && *partner == rhs && *back_partner == lhs;
  }

  uint64_t scope_id() const { return forward_.scope_id(); }
  Mark mark() const { return {forward_.mark(), backward_.mark()}; }
  void Restore(const Mark& mark) {
    forward_.Restore(mark.first);
    backward_.Restore(mark.second);
  }

 private:
  ScopedBindings<const Node*, const Node*> forward_;
  ScopedBindings<const Node*, const Node*> backward_;
};

// Two expressions compared under the same bindings give the same answer, so
// pairs found equal are remembered per (pair, bindings).
struct MemoKey {
  const ExprNode* lhs;
  const ExprNode* rhs;
  uint64_t var_scope;
  uint64_t type_var_scope;
  bool operator==(const MemoKey&) const = default;
};

struct MemoKeyHash {
  size_t operator()(const MemoKey& key) const {
    size_t seed = std::hash<const void*>()(key.lhs);
    for (size_t part :
         {std::hash<const void*>()(key.rhs), size_t(key.var_scope), size_t(key.type_var_scope)}) {
      seed ^= part + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2);
    }
    return seed;
  }
};

class EqualityChecker {
 public:
  bool Equal(const Expr& lhs, const Expr& rhs) {
    if (!lhs || !rhs) return lhs == rhs;
    if (lhs->kind != rhs->kind) return false;
    if (lhs->kind == ExprKind::kVar) {
      return vars_.Corresponds(static_cast<const VarNode*>(lhs.get()),
                               static_cast<const VarNode*>(rhs.get()));
    }
    const MemoKey key{lhs.get(), rhs.get(), vars_.scope_id(), type_vars_.scope_id()};
    if (equal_pairs_.contains(key)) return true;
    if (!EqualNodes(lhs, rhs)) return false;
    equal_pairs_.insert(key);
    return true;
  }

  bool Equal(const Type& lhs, const Type& rhs) {
    if (!lhs || !rhs) return lhs == rhs;
    if (lhs->kind != rhs->kind) return false;
    switch (lhs->kind) {
      case TypeKind::kTensor: {
        const auto* a = static_cast<const TensorTypeNode*>(lhs.get());
        const auto* b = static_cast<const TensorTypeNode*>(rhs.get());
        return a->dtype == b->dtype && a->shape == b->shape;
      }
      case TypeKind::kTuple:
        return AllEqual(static_cast<const TupleTypeNode*>(lhs.get())->fields,
                        static_cast<const TupleTypeNode*>(rhs.get())->fields);
      case TypeKind::kFunc: {
        const auto* a = static_cast<const FuncTypeNode*>(lhs.get());
        const auto* b = static_cast<const FuncTypeNode*>(rhs.get());
        const auto mark = type_vars_.mark();
        const bool equal = BindTypeVars(a->type_params, b->type_params) &&
                           AllEqual(a->arg_types, b->arg_types) && Equal(a->ret_type, b->ret_type);
        type_vars_.Restore(mark);
        return equal;
      }
      case TypeKind::kTypeVar:
        return type_vars_.Corresponds(static_cast<const TypeVarNode*>(lhs.get()),
                                      static_cast<const TypeVarNode*>(rhs.get()));
      case TypeKind::kGlobalTypeVar:
        return static_cast<const GlobalTypeVarNode*>(lhs.get())->name ==
               static_cast<const GlobalTypeVarNode*>(rhs.get())->name;
      case TypeKind::kTypeCall: {
        const auto* a = static_cast<const TypeCallNode*>(lhs.get());
        const auto* b = static_cast<const TypeCallNode*>(rhs.get());
        return a->func->name == b->func->name && AllEqual(a->args, b->args);
      }
      case TypeKind::kIncomplete:
      case TypeKind::kStorage:
        return true;
    }
    return false;
  }

  bool Equal(const TypeData& lhs, const TypeData& rhs) {
    if (lhs->header->name != rhs->header->name ||
        lhs->constructors.size() != rhs->constructors.size()) {
      return false;
    }
    const auto mark = type_vars_.mark();
    bool equal = BindTypeVars(lhs->type_vars, rhs->type_vars);
    for (size_t i = 0; equal && i < lhs->constructors.size(); ++i) {
      const Constructor& a = lhs->constructors[i];
      const Constructor& b = rhs->constructors[i];
      equal = a->name == b->name && a->tag == b->tag && AllEqual(a->inputs, b->inputs);
    }
    type_vars_.Restore(mark);
    return equal;
  }

 private:
  template <typename T>
  bool AllEqual(const std::vector<T>& lhs, const std::vector<T>& rhs) {
    if (lhs.size() != rhs.size()) return false;
    for (size_t i = 0; i < lhs.size(); ++i) {
      if (!Equal(lhs[i], rhs[i])) return false;
    }
    return true;
  }

  // Binders correspond when their annotations are equal.
  bool BindVar(const Var& lhs, const Var& rhs) {
    if (!Equal(lhs->type_annotation, rhs->type_annotation)) return false;
    vars_.Bind(lhs.get(), rhs.get());
    return true;
  }

  bool BindTypeVars(const std::vector<TypeVar>& lhs, const std::vector<TypeVar>& rhs) {
    if (lhs.size() != rhs.size()) return false;
    for (size_t i = 0; i < lhs.size(); ++i) type_vars_.Bind(lhs[i].get(), rhs[i].get());
    return true;
  }

  // Binds the variables of two patterns as it compares them.
  bool BindPattern(const Pattern& lhs, const Pattern& rhs) {
    if (lhs->kind != rhs->kind) return false;
    switch (lhs->kind) {
      case PatternKind::kWildcard:
        return true;
      case PatternKind::kVar:
        return BindVar(static_cast<const PatternVarNode*>(lhs.get())->var,
                       static_cast<const PatternVarNode*>(rhs.get())->var);
      case PatternKind::kConstructor: {
        const auto* a = static_cast<const PatternConstructorNode*>(lhs.get());
        const auto* b = static_cast<const PatternConstructorNode*>(rhs.get());
        return a->constructor->name == b->constructor->name &&
               a->constructor->tag == b->constructor->tag && BindPatterns(a->patterns, b->patterns);
      }
      case PatternKind::kTuple:
        return BindPatterns(static_cast<const PatternTupleNode*>(lhs.get())->patterns,
                            static_cast<const PatternTupleNode*>(rhs.get())->patterns);
    }
    return false;
  }

  bool BindPatterns(const std::vector<Pattern>& lhs, const std::vector<Pattern>& rhs) {
    if (lhs.size() != rhs.size()) return false;
    for (size_t i = 0; i < lhs.size(); ++i) {
      if (!BindPattern(lhs[i], rhs[i])) return false;
    }
    return true;
  }

  static bool EqualConstants(const ConstantNode* a, const ConstantNode* b) {
    return a->name == b->name && a->data->dtype() == b->data->dtype() &&
           a->data->shape() == b->data->shape() &&
           std::memcmp(a->data->raw_data(), b->data->raw_data(), a->data->nbytes()) == 0;
  }

  bool EqualFunctions(const FunctionNode* a, const FunctionNode* b) {
    if (a->params.size() != b->params.size() || !(a->attrs == b->attrs)) return false;
    const auto var_mark = vars_.mark();
    const auto type_var_mark = type_vars_.mark();
    bool equal = BindTypeVars(a->type_params, b->type_params);
    for (size_t i = 0; equal && i < a->params.size(); ++i) {
      equal = BindVar(a->params[i], b->params[i]);
    }
    equal = equal && Equal(a->ret_type, b->ret_type) && Equal(a->body, b->body);
    vars_.Restore(var_mark);
    type_vars_.Restore(type_var_mark);
    return equal;
  }

  bool EqualMatches(const MatchNode* a, const MatchNode* b) {
    if (a->complete != b->complete || a->clauses.size() != b->clauses.size() ||
        !Equal(a->data, b->data)) {
      return false;
    }
    for (size_t i = 0; i < a->clauses.size(); ++i) {
      const auto mark = vars_.mark();
      const bool equal = BindPattern(a->clauses[i].lhs, b->clauses[i].lhs) &&
                         Equal(a->clauses[i].rhs, b->clauses[i].rhs);
      vars_.Restore(mark);
      if (!equal) return false;
    }
    return true;
  }

  // Both nodes have the same kind, which is not kVar.
  bool EqualNodes(const Expr& lhs, const Expr& rhs) {
    switch (lhs->kind) {
      case ExprKind::kVar:
        return false;
      case ExprKind::kGlobalVar:
        return static_cast<const GlobalVarNode*>(lhs.get())->name ==
               static_cast<const GlobalVarNode*>(rhs.get())->name;
      case ExprKind::kConstant:
        return EqualConstants(static_cast<const ConstantNode*>(lhs.get()),
                              static_cast<const ConstantNode*>(rhs.get()));
      case ExprKind::kTuple:
        return AllEqual(static_cast<const TupleNode*>(lhs.get())->fields,
                        static_cast<const TupleNode*>(rhs.get())->fields);
      case ExprKind::kTupleGetItem: {
        const auto* a = static_cast<const TupleGetItemNode*>(lhs.get());
        const auto* b = static_cast<const TupleGetItemNode*>(rhs.get());
        return a->index == b->index && Equal(a->tuple, b->tuple);
      }
      case ExprKind::kOp:
        return lhs == rhs;
      case ExprKind::kCall: {
        const auto* a = static_cast<const CallNode*>(lhs.get());
        const auto* b = static_cast<const CallNode*>(rhs.get());
        return a->attrs == b->attrs && Equal(a->callee, b->callee) && AllEqual(a->args, b->args);
      }
      case ExprKind::kLet: {
        // The binder is in scope in its own value: Relay's recursive `let`.
        const auto* a = static_cast<const LetNode*>(lhs.get());
        const auto* b = static_cast<const LetNode*>(rhs.get());
        const auto mark = vars_.mark();
        const bool equal =
            BindVar(a->var, b->var) && Equal(a->value, b->value) && Equal(a->body, b->body);
        vars_.Restore(mark);
        return equal;
      }
      case ExprKind::kIf: {
        const auto* a = static_cast<const IfNode*>(lhs.get());
        const auto* b = static_cast<const IfNode*>(rhs.get());
        return Equal(a->cond, b->cond) && Equal(a->then_branch, b->then_branch) &&
               Equal(a->else_branch, b->else_branch);
      }
      case ExprKind::kFunction:
        return EqualFunctions(static_cast<const FunctionNode*>(lhs.get()),
                              static_cast<const FunctionNode*>(rhs.get()));
      case ExprKind::kConstructor: {
        const auto* a = static_cast<const ConstructorNode*>(lhs.get());
        const auto* b = static_cast<const ConstructorNode*>(rhs.get());
        return a->name == b->name && a->tag == b->tag;
      }
      case ExprKind::kMatch:
        return EqualMatches(static_cast<const MatchNode*>(lhs.get()),
                            static_cast<const MatchNode*>(rhs.get()));
    }
    return false;
  }

  Bijection<VarNode> vars_;
  Bijection<TypeVarNode> type_vars_;
  std::unordered_set<MemoKey, MemoKeyHash> equal_pairs_;
};

}  // namespace

bool StructuralEqual(const Expr& lhs, const Expr& rhs) {
  if (lhs == rhs) return true;
  return RunWithDeepStack([&] { return EqualityChecker().Equal(lhs, rhs); });
}

bool StructuralEqual(const Type& lhs, const Type& rhs) {
  if (lhs == rhs) return true;
  return RunWithDeepStack([&] { return EqualityChecker().Equal(lhs, rhs); });
}

bool StructuralEqual(const IRModule& lhs, const IRModule& rhs) {
  if (lhs->functions().size() != rhs->functions().size() ||
      lhs->type_defs().size() != rhs->type_defs().size()) {
    return false;
  }
  return RunWithDeepStack([&] {
    EqualityChecker checker;
    for (const TypeData& type_data : lhs->type_defs()) {
      const TypeData other = rhs->LookupTypeDef(type_data->header->name);
      if (!other || !checker.Equal(type_data, other)) return false;
    }
    for (const IRModuleNode::Definition& definition : lhs->functions()) {
      const Function other = rhs->Lookup(definition.global->name);
      if (!other || !checker.Equal(Expr(definition.function), Expr(other))) return false;
    }
    return true;
  });
}

}  // namespace nimble::ir
