#include "nimble/compiler/ir/free_vars.h"

#include <unordered_set>

#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/support/deep_stack.h"

namespace nimble::ir {

namespace {

// Nodes in order of first insertion, each once.
template <typename Node>
class OrderedSet {
 public:
  void Insert(const Node* node) {
    if (members_.insert(node).second) order_.push_back(RefOf(node));
  }
  bool Contains(const Node* node) const { return members_.contains(node); }
  const std::vector<Ref<Node>>& items() const { return order_; }

 private:
  std::unordered_set<const Node*> members_;
  std::vector<Ref<Node>> order_;
};

bool IsScope(ExprKind kind) {
  return kind == ExprKind::kFunction || kind == ExprKind::kIf || kind == ExprKind::kMatch;
}

// Records every variable occurrence and, separately, every binder. With a
// cache, the scopes nested in the walked expression count with the free
// variables the cache has for them, and are not walked.
class VarCollector : public ExprVisitor {
 public:
  VarCollector() = default;
  VarCollector(FreeVarCache* cache, const ExprNode* root) : cache_(cache), root_(root) {}

  void VisitExpr(const Expr& expr) override {
    if (!cache_ || expr.get() == root_ || !IsScope(expr->kind)) return ExprVisitor::VisitExpr(expr);
    if (!visited_.insert(expr.get()).second) return;
    for (const Var& var : cache_->OfScope(expr)) used_.Insert(var.get());
  }

  std::vector<Var> Free() const {
    std::vector<Var> free;
    for (const Var& var : used_.items()) {
      if (!bound_.Contains(var.get())) free.push_back(var);
    }
    return free;
  }
  std::vector<Var> Bound() const { return bound_.items(); }

  void VisitVar(const VarNode* node) override { used_.Insert(node); }

  void VisitLet(const LetNode* node) override {
    bound_.Insert(node->var.get());
    ExprVisitor::VisitLet(node);
  }

  void VisitFunction(const FunctionNode* node) override {
    for (const Var& param : node->params) bound_.Insert(param.get());
    ExprVisitor::VisitFunction(node);
  }

  void VisitPattern(const Pattern& pattern) override {
    if (pattern->kind == PatternKind::kVar) {
      bound_.Insert(static_cast<const PatternVarNode*>(pattern.get())->var.get());
    }
    ExprVisitor::VisitPattern(pattern);
  }

 private:
  FreeVarCache* cache_ = nullptr;
  const ExprNode* root_ = nullptr;
  OrderedSet<VarNode> used_;
  OrderedSet<VarNode> bound_;
};

std::vector<Var> CollectVars(const Expr& expr, std::vector<Var> (VarCollector::*result)() const) {
  return RunWithDeepStack([&] {
    VarCollector collector;
    collector.VisitExpr(expr);
    return (collector.*result)();
  });
}

// Type variables occurring in a type, and those its function types bind.
class TypeVarCollector {
 public:
  void Visit(const Type& type) {
    if (!type) return;
    switch (type->kind) {
      case TypeKind::kTensor:
      case TypeKind::kGlobalTypeVar:
      case TypeKind::kIncomplete:
      case TypeKind::kStorage:
        return;
      case TypeKind::kTuple:
        VisitAll(static_cast<const TupleTypeNode*>(type.get())->fields);
        return;
      case TypeKind::kFunc: {
        const auto* func = static_cast<const FuncTypeNode*>(type.get());
        for (const TypeVar& param : func->type_params) bound_.Insert(param.get());
        VisitAll(func->arg_types);
        Visit(func->ret_type);
        return;
      }
      case TypeKind::kTypeVar:
        used_.Insert(static_cast<const TypeVarNode*>(type.get()));
        return;
      case TypeKind::kTypeCall:
        VisitAll(static_cast<const TypeCallNode*>(type.get())->args);
        return;
    }
  }

  std::vector<TypeVar> Free() const {
    std::vector<TypeVar> free;
    for (const TypeVar& type_var : used_.items()) {
      if (!bound_.Contains(type_var.get())) free.push_back(type_var);
    }
    return free;
  }

 private:
  void VisitAll(const std::vector<Type>& types) {
    for (const Type& type : types) Visit(type);
  }

  OrderedSet<TypeVarNode> used_;
  OrderedSet<TypeVarNode> bound_;
};

}  // namespace

std::vector<Var> FreeVars(const Expr& expr) {
  return CollectVars(expr, &VarCollector::Free);
}

std::vector<Var> FreeVarCache::operator()(const Expr& expr) {
  return IsScope(expr->kind) ? OfScope(expr) : Collect(expr);
}

const std::vector<Var>& FreeVarCache::OfScope(const Expr& scope) {
  if (const auto found = scopes_.find(scope.get()); found != scopes_.end()) {
    return found->second.second;
  }
  std::vector<Var> free = Collect(scope);
  return scopes_.emplace(scope.get(), std::pair{scope, std::move(free)}).first->second.second;
}

std::vector<Var> FreeVarCache::Collect(const Expr& expr) {
  return RunWithDeepStack([&] {
    VarCollector collector(this, expr.get());
    collector.VisitExpr(expr);
    return collector.Free();
  });
}

std::vector<Var> BoundVars(const Expr& expr) {
  return CollectVars(expr, &VarCollector::Bound);
}

std::vector<TypeVar> FreeTypeVars(const Type& type) {
  return RunWithDeepStack([&] {
    TypeVarCollector collector;
    collector.Visit(type);
    return collector.Free();
  });
}

}  // namespace nimble::ir
