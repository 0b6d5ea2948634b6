#include "nimble/compiler/ir/functor.h"

namespace nimble::ir {

void ExprVisitor::VisitExpr(const Expr& expr) {
  if (!visited_.insert(expr.get()).second) return;
  ExprFunctor<void>::VisitExpr(expr);
}

void ExprVisitor::VisitVar(const VarNode*) {}
void ExprVisitor::VisitGlobalVar(const GlobalVarNode*) {}
void ExprVisitor::VisitConstant(const ConstantNode*) {}
void ExprVisitor::VisitOp(const OpNode*) {}
void ExprVisitor::VisitConstructor(const ConstructorNode*) {}

void ExprVisitor::VisitTuple(const TupleNode* node) {
  for (const Expr& field : node->fields) VisitExpr(field);
}

void ExprVisitor::VisitTupleGetItem(const TupleGetItemNode* node) {
  VisitExpr(node->tuple);
}

void ExprVisitor::VisitCall(const CallNode* node) {
  VisitExpr(node->callee);
  for (const Expr& arg : node->args) VisitExpr(arg);
}

void ExprVisitor::VisitLet(const LetNode* node) {
  VisitExpr(node->var);
  VisitExpr(node->value);
  VisitExpr(node->body);
}

void ExprVisitor::VisitIf(const IfNode* node) {
  VisitExpr(node->cond);
  VisitExpr(node->then_branch);
  VisitExpr(node->else_branch);
}

void ExprVisitor::VisitFunction(const FunctionNode* node) {
  for (const Var& param : node->params) VisitExpr(param);
  VisitExpr(node->body);
}

void ExprVisitor::VisitMatch(const MatchNode* node) {
  VisitExpr(node->data);
  for (const Clause& clause : node->clauses) {
    VisitPattern(clause.lhs);
    VisitExpr(clause.rhs);
  }
}

void ExprVisitor::VisitPattern(const Pattern& pattern) {
  switch (pattern->kind) {
    case PatternKind::kWildcard:
      return;
    case PatternKind::kVar:
      VisitExpr(static_cast<const PatternVarNode*>(pattern.get())->var);
      return;
    case PatternKind::kConstructor:
      for (const Pattern& sub :
           static_cast<const PatternConstructorNode*>(pattern.get())->patterns) {
        VisitPattern(sub);
      }
      return;
    case PatternKind::kTuple:
      for (const Pattern& sub : static_cast<const PatternTupleNode*>(pattern.get())->patterns) {
        VisitPattern(sub);
      }
      return;
  }
}

namespace {

// Keeps the source location (and nothing else) of the node a rewrite replaces.
template <typename T>
Expr WithSpan(Ref<T> rebuilt, const ExprNode* original) {
  rebuilt->span = original->span;
  return rebuilt;
}

bool MutateAll(ExprMutator& mutator, const std::vector<Expr>& exprs, std::vector<Expr>* out) {
  bool changed = false;
  out->reserve(exprs.size());
  for (const Expr& expr : exprs) {
    out->push_back(mutator.VisitExpr(expr));
    changed |= out->back() != expr;
  }
  return changed;
}

}  // namespace

Expr ExprMutator::VisitExpr(const Expr& expr) {
  auto it = memo_.find(expr.get());
  if (it != memo_.end()) return it->second;
  Expr result = ExprFunctor<Expr>::VisitExpr(expr);
  memo_.emplace(expr.get(), result);
  return result;
}

Expr ExprMutator::VisitVar(const VarNode* node) {
  return RefOf(node);
}
Expr ExprMutator::VisitGlobalVar(const GlobalVarNode* node) {
  return RefOf(node);
}
Expr ExprMutator::VisitConstant(const ConstantNode* node) {
  return RefOf(node);
}
Expr ExprMutator::VisitOp(const OpNode* node) {
  return RefOf(node);
}
Expr ExprMutator::VisitConstructor(const ConstructorNode* node) {
  return RefOf(node);
}

Expr ExprMutator::VisitTuple(const TupleNode* node) {
  std::vector<Expr> fields;
  if (!MutateAll(*this, node->fields, &fields)) return RefOf(node);
  return WithSpan(Make<TupleNode>(std::move(fields)), node);
}

Expr ExprMutator::VisitTupleGetItem(const TupleGetItemNode* node) {
  Expr tuple = VisitExpr(node->tuple);
  if (tuple == node->tuple) return RefOf(node);
  return WithSpan(Make<TupleGetItemNode>(std::move(tuple), node->index), node);
}

Expr ExprMutator::VisitCall(const CallNode* node) {
  Expr callee = VisitExpr(node->callee);
  std::vector<Expr> args;
  const bool args_changed = MutateAll(*this, node->args, &args);
  if (callee == node->callee && !args_changed) return RefOf(node);
  return WithSpan(Make<CallNode>(std::move(callee), std::move(args), node->attrs), node);
}

Expr ExprMutator::VisitLet(const LetNode* node) {
  Expr var = VisitExpr(node->var);
  Expr value = VisitExpr(node->value);
  Expr body = VisitExpr(node->body);
  if (var == node->var && value == node->value && body == node->body) return RefOf(node);
  Var new_var = var.as<VarNode>();
  if (!new_var) throw Error("let binder must stay a variable after mutation");
  return WithSpan(Make<LetNode>(std::move(new_var), std::move(value), std::move(body)), node);
}

Expr ExprMutator::VisitIf(const IfNode* node) {
  Expr cond = VisitExpr(node->cond);
  Expr then_branch = VisitExpr(node->then_branch);
  Expr else_branch = VisitExpr(node->else_branch);
  if (cond == node->cond && then_branch == node->then_branch && else_branch == node->else_branch) {
    return RefOf(node);
  }
  return WithSpan(Make<IfNode>(std::move(cond), std::move(then_branch), std::move(else_branch)),
                  node);
}

Expr ExprMutator::VisitFunction(const FunctionNode* node) {
  std::vector<Var> params;
  bool changed = false;
  for (const Var& param : node->params) {
    Var new_param = VisitExpr(param).as<VarNode>();
    if (!new_param) throw Error("function parameter must stay a variable after mutation");
    changed |= new_param != param;
    params.push_back(std::move(new_param));
  }
  Expr body = VisitExpr(node->body);
  if (!changed && body == node->body) return RefOf(node);
  return WithSpan(Make<FunctionNode>(std::move(params), std::move(body), node->ret_type,
                                     node->type_params, node->attrs),
                  node);
}

Expr ExprMutator::VisitMatch(const MatchNode* node) {
  Expr data = VisitExpr(node->data);
  bool changed = data != node->data;
  std::vector<Clause> clauses;
  for (const Clause& clause : node->clauses) {
    Pattern lhs = VisitPattern(clause.lhs);
    Expr rhs = VisitExpr(clause.rhs);
    changed |= lhs != clause.lhs || rhs != clause.rhs;
    clauses.push_back({std::move(lhs), std::move(rhs)});
  }
  if (!changed) return RefOf(node);
  return WithSpan(Make<MatchNode>(std::move(data), std::move(clauses), node->complete), node);
}

Pattern ExprMutator::VisitPattern(const Pattern& pattern) {
  return pattern;
}

}  // namespace nimble::ir
