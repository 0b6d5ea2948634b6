// Visitor and mutator infrastructure over expressions.
//
// ExprFunctor dispatches on the node kind. ExprVisitor walks every node once
// (the IR is a DAG: shared subexpressions are visited once). ExprMutator
// rebuilds a node only when a child changed and otherwise returns it as is,
// memoising so shared subexpressions stay shared.
//
// These recurse; entry points that may meet deep programs run through
// RunWithDeepStack (support/deep_stack.h).
#pragma once

#include <unordered_map>
#include <unordered_set>

#include "nimble/compiler/ir/expr.h"
#include "nimble/vm/error.h"

namespace nimble::ir {

template <typename R>
class ExprFunctor {
 public:
  virtual ~ExprFunctor() = default;

  virtual R VisitExpr(const Expr& expr) {
    switch (expr->kind) {
      case ExprKind::kVar:
        return VisitVar(static_cast<const VarNode*>(expr.get()));
      case ExprKind::kGlobalVar:
        return VisitGlobalVar(static_cast<const GlobalVarNode*>(expr.get()));
      case ExprKind::kConstant:
        return VisitConstant(static_cast<const ConstantNode*>(expr.get()));
      case ExprKind::kTuple:
        return VisitTuple(static_cast<const TupleNode*>(expr.get()));
      case ExprKind::kTupleGetItem:
        return VisitTupleGetItem(static_cast<const TupleGetItemNode*>(expr.get()));
      case ExprKind::kOp:
        return VisitOp(static_cast<const OpNode*>(expr.get()));
      case ExprKind::kCall:
        return VisitCall(static_cast<const CallNode*>(expr.get()));
      case ExprKind::kLet:
        return VisitLet(static_cast<const LetNode*>(expr.get()));
      case ExprKind::kIf:
        return VisitIf(static_cast<const IfNode*>(expr.get()));
      case ExprKind::kFunction:
        return VisitFunction(static_cast<const FunctionNode*>(expr.get()));
      case ExprKind::kConstructor:
        return VisitConstructor(static_cast<const ConstructorNode*>(expr.get()));
      case ExprKind::kMatch:
        return VisitMatch(static_cast<const MatchNode*>(expr.get()));
    }
    throw Error("unknown expression kind");
  }

  virtual R VisitVar(const VarNode* node) = 0;
  virtual R VisitGlobalVar(const GlobalVarNode* node) = 0;
  virtual R VisitConstant(const ConstantNode* node) = 0;
  virtual R VisitTuple(const TupleNode* node) = 0;
  virtual R VisitTupleGetItem(const TupleGetItemNode* node) = 0;
  virtual R VisitOp(const OpNode* node) = 0;
  virtual R VisitCall(const CallNode* node) = 0;
  virtual R VisitLet(const LetNode* node) = 0;
  virtual R VisitIf(const IfNode* node) = 0;
  virtual R VisitFunction(const FunctionNode* node) = 0;
  virtual R VisitConstructor(const ConstructorNode* node) = 0;
  virtual R VisitMatch(const MatchNode* node) = 0;
};

// Calls visit(child) for each expression `node` holds directly (a call's
// callee and arguments, a let's value and body, a function's body, and so
// on; not the variables that lets, parameters and patterns bind), in order.
template <typename F>
void ForEachChild(const ExprNode* node, F&& visit) {
  switch (node->kind) {
    case ExprKind::kTuple:
      for (const Expr& field : static_cast<const TupleNode*>(node)->fields) {
        visit(field.get());
      }
      break;
    case ExprKind::kTupleGetItem:
      visit(static_cast<const TupleGetItemNode*>(node)->tuple.get());
      break;
    case ExprKind::kCall: {
      const auto* call = static_cast<const CallNode*>(node);
      visit(call->callee.get());
      for (const Expr& arg : call->args) visit(arg.get());
      break;
    }
    case ExprKind::kLet: {
      const auto* let = static_cast<const LetNode*>(node);
      visit(let->value.get());
      visit(let->body.get());
      break;
    }
    case ExprKind::kIf: {
      const auto* branch = static_cast<const IfNode*>(node);
      visit(branch->cond.get());
      visit(branch->then_branch.get());
      visit(branch->else_branch.get());
      break;
    }
    case ExprKind::kFunction:
      visit(static_cast<const FunctionNode*>(node)->body.get());
      break;
    case ExprKind::kMatch: {
      const auto* match = static_cast<const MatchNode*>(node);
      visit(match->data.get());
      for (const Clause& clause : match->clauses) visit(clause.rhs.get());
      break;
    }
    default:
      break;
  }
}

class ExprVisitor : public ExprFunctor<void> {
 public:
  // Visits `expr` unless it was visited already.
  void VisitExpr(const Expr& expr) override;

  void VisitVar(const VarNode* node) override;
  void VisitGlobalVar(const GlobalVarNode* node) override;
  void VisitConstant(const ConstantNode* node) override;
  void VisitTuple(const TupleNode* node) override;
  void VisitTupleGetItem(const TupleGetItemNode* node) override;
  void VisitOp(const OpNode* node) override;
  void VisitCall(const CallNode* node) override;
  void VisitLet(const LetNode* node) override;
  void VisitIf(const IfNode* node) override;
  void VisitFunction(const FunctionNode* node) override;
  void VisitConstructor(const ConstructorNode* node) override;
  void VisitMatch(const MatchNode* node) override;
  virtual void VisitPattern(const Pattern& pattern);

 protected:
  std::unordered_set<const ExprNode*> visited_;
};

class ExprMutator : public ExprFunctor<Expr> {
 public:
  // Mutates `expr`, returning the memoised result if it was seen already.
  Expr VisitExpr(const Expr& expr) override;

  Expr VisitVar(const VarNode* node) override;
  Expr VisitGlobalVar(const GlobalVarNode* node) override;
  Expr VisitConstant(const ConstantNode* node) override;
  Expr VisitTuple(const TupleNode* node) override;
  Expr VisitTupleGetItem(const TupleGetItemNode* node) override;
  Expr VisitOp(const OpNode* node) override;
  Expr VisitCall(const CallNode* node) override;
  Expr VisitLet(const LetNode* node) override;
  Expr VisitIf(const IfNode* node) override;
  Expr VisitFunction(const FunctionNode* node) override;
  Expr VisitConstructor(const ConstructorNode* node) override;
  Expr VisitMatch(const MatchNode* node) override;
  // Patterns bind variables; the default keeps them unchanged.
  virtual Pattern VisitPattern(const Pattern& pattern);

 protected:
  std::unordered_map<const ExprNode*, Expr> memo_;
};

}  // namespace nimble::ir
