// ToANormalForm: each block (function body, branch of an `if`, clause of a
// `match`) is rebuilt as a flat chain of lets ending in an atom. A block
// collects its bindings in a Scope while its expression is walked in
// evaluation order (callee before arguments, left to right, a let's value
// before its body), so the chain computes the values in the order the
// original program did. What is in A-normal form already comes back as the
// very same nodes, so that a program the pass leaves as it was is not typed
// again.
#include "nimble/compiler/transform/to_anf.h"

#include <unordered_map>
#include <utility>
#include <vector>

#include "nimble/compiler/support/deep_stack.h"
#include "nimble/compiler/transform/let_chain.h"
#include "nimble/compiler/transform/pass_util.h"
#include "nimble/vm/error.h"

namespace nimble::transform {

namespace {

using ir::Expr;
using ir::ExprKind;

// The bindings of one block and the atoms its compound expressions were bound
// to. An expression shared in the DAG is bound once where it is first met and
// reused from that block and the blocks nested in it; met again outside that
// block (say in the other branch of an `if`), it is bound again there, as the
// first binding is not in scope.
struct Scope {
  const Scope* parent = nullptr;
  std::vector<Binding> bindings;
  std::unordered_map<const ir::ExprNode*, Expr> atoms;

  const Expr* FindAtom(const ir::ExprNode* node) const {
    for (const Scope* scope = this; scope; scope = scope->parent) {
      auto it = scope->atoms.find(node);
      if (it != scope->atoms.end()) return &it->second;
    }
    return nullptr;
  }
};

Expr WithSpan(Expr rebuilt, const Expr& original) {
  rebuilt->span = original->span;
  return rebuilt;
}

class Normalizer {
 public:
  ir::Function Function(const ir::FunctionNode* function, const Scope* parent) {
    Expr body = Block(function->body, parent);
    if (body == function->body) return ir::RefOf(function);
    return Make<ir::FunctionNode>(function->params, std::move(body), function->ret_type,
                                  function->type_params, function->attrs);
  }

 private:
  // `expr` as a let chain ending in an atom.
  Expr Block(const Expr& expr, const Scope* parent) {
    Scope scope{parent, {}, {}};
    Expr result = Atom(expr, &scope);
    return WrapLets(scope.bindings, std::move(result));
  }

  // An atom holding the value of `expr`, binding what it computes in `scope`.
  Expr Atom(const Expr& expr, Scope* scope) {
    if (IsAtom(expr)) return expr;
    if (const Expr* known = scope->FindAtom(expr.get())) return *known;
    Expr atom;
    if (expr->kind == ExprKind::kLet) {
      atom = BindChain(expr, scope);
    } else {
      if (!expr->checked_type) {
        throw Error("ToANormalForm: an expression has no type (at " + expr->span.ToString() +
                    "); run type inference first");
      }
      ir::Var var = ir::MakeVar("x", expr->checked_type);
      Bind(var, Value(expr, scope), expr, scope);
      atom = var;
    }
    scope->atoms.emplace(expr.get(), atom);
    return atom;
  }

  void Bind(const ir::Var& var, Expr value, const Expr& original, Scope* scope,
            const ir::LetNode* let = nullptr) {
    if (!IsAtom(original)) scope->atoms.emplace(original.get(), var);
    scope->bindings.push_back({var, std::move(value), let});
  }

  // Moves the lets of a chain into `scope` (iteratively: chains are long) and
  // returns the atom of its final expression.
  Expr BindChain(Expr expr, Scope* scope) {
    while (expr->kind == ExprKind::kLet) {
      const auto* let = static_cast<const ir::LetNode*>(expr.get());
      Bind(let->var, Value(let->value, scope), let->value, scope, let);
      expr = let->body;
    }
    return Atom(expr, scope);
  }

  // `expr` with atoms for arguments, unbound; what a let binds. `expr`
  // itself when its parts were atoms already.
  Expr Value(const Expr& expr, Scope* scope) {
    switch (expr->kind) {
      case ExprKind::kLet:
        return Atom(expr, scope);
      case ExprKind::kTuple: {
        const auto& original = static_cast<const ir::TupleNode*>(expr.get())->fields;
        std::vector<Expr> fields;
        for (const Expr& field : original) fields.push_back(Atom(field, scope));
        if (fields == original) return expr;
        return WithSpan(Make<ir::TupleNode>(std::move(fields)), expr);
      }
      case ExprKind::kTupleGetItem: {
        const auto* item = static_cast<const ir::TupleGetItemNode*>(expr.get());
        Expr tuple = Atom(item->tuple, scope);
        if (tuple == item->tuple) return expr;
        return WithSpan(Make<ir::TupleGetItemNode>(std::move(tuple), item->index), expr);
      }
      case ExprKind::kCall: {
        const auto* call = static_cast<const ir::CallNode*>(expr.get());
        Expr callee =
            StaysInCalleePosition(call->callee) ? call->callee : Atom(call->callee, scope);
        std::vector<Expr> args;
        for (const Expr& arg : call->args) args.push_back(Atom(arg, scope));
        if (callee == call->callee && args == call->args) return expr;
        return WithSpan(Make<ir::CallNode>(std::move(callee), std::move(args), call->attrs), expr);
      }
      case ExprKind::kIf: {
        const auto* node = static_cast<const ir::IfNode*>(expr.get());
        Expr cond = Atom(node->cond, scope);
        Expr then_branch = Block(node->then_branch, scope);
        Expr else_branch = Block(node->else_branch, scope);
        if (cond == node->cond && then_branch == node->then_branch &&
            else_branch == node->else_branch) {
          return expr;
        }
        return WithSpan(
            Make<ir::IfNode>(std::move(cond), std::move(then_branch), std::move(else_branch)),
            expr);
      }
      case ExprKind::kMatch: {
        const auto* match = static_cast<const ir::MatchNode*>(expr.get());
        Expr data = Atom(match->data, scope);
        std::vector<ir::Clause> clauses;
        bool same = data == match->data;
        for (const ir::Clause& clause : match->clauses) {
          clauses.push_back({clause.lhs, Block(clause.rhs, scope)});
          same = same && clauses.back().rhs == clause.rhs;
        }
        if (same) return expr;
        return WithSpan(Make<ir::MatchNode>(std::move(data), std::move(clauses), match->complete),
                        expr);
      }
      case ExprKind::kFunction:
        if (IsPrimitiveFunction(expr)) return expr;
        if (Expr function = Function(static_cast<const ir::FunctionNode*>(expr.get()), scope);
            function != expr) {
          return WithSpan(std::move(function), expr);
        }
        return expr;
      default:
        return expr;  // an atom
    }
  }

  // Operators, constructors, globals and primitive functions are called
  // directly (InvokePacked, AllocADT, Invoke); only closures need a register.
  static bool StaysInCalleePosition(const Expr& callee) {
    switch (callee->kind) {
      case ExprKind::kOp:
      case ExprKind::kConstructor:
      case ExprKind::kGlobalVar:
        return true;
      default:
        return IsPrimitiveFunction(callee);
    }
  }

  static bool IsAtom(const Expr& expr) {
    switch (expr->kind) {
      case ExprKind::kVar:
      case ExprKind::kGlobalVar:
      case ExprKind::kConstant:
      case ExprKind::kConstructor:
      case ExprKind::kOp:
        return true;
      default:
        return IsPrimitiveFunction(expr);
    }
  }
};

}  // namespace

ir::IRModule ToANormalForm(const ir::IRModule& module) {
  return RunWithDeepStack([&] {
    ir::IRModule result = MapFunctions(module, [](const ir::IRModuleNode::Definition& definition) {
      return Normalizer().Function(definition.function.get(), /*parent=*/nullptr);
    });
    return Retyped(module, std::move(result));
  });
}

}  // namespace nimble::transform
