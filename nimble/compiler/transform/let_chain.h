// A function body in A-normal form is a chain of `let`s ending in a result.
// Passes walk such chains as a list, in a loop: chains run 10,000 deep, too
// deep for recursion.
#pragma once

#include <utility>
#include <vector>

#include "nimble/compiler/ir/expr.h"

namespace nimble::transform {

struct Binding {
  ir::Var var;
  ir::Expr value;
};

// The lets at the head of `expr`, in order, and the expression they scope over.
struct LetChain {
  std::vector<Binding> bindings;
  ir::Expr result;
};

inline LetChain FlattenLets(ir::Expr expr) {
  LetChain chain;
  while (expr->kind == ir::ExprKind::kLet) {
    const auto* let = static_cast<const ir::LetNode*>(expr.get());
    chain.bindings.push_back({let->var, let->value});
    expr = let->body;
  }
  chain.result = std::move(expr);
  return chain;
}

// `let` each binding in turn, then `body`; built from the inside out.
inline ir::Expr WrapLets(const std::vector<Binding>& bindings, ir::Expr body) {
  for (auto it = bindings.rbegin(); it != bindings.rend(); ++it) {
    body = Make<ir::LetNode>(it->var, it->value, std::move(body));
  }
  return body;
}

}  // namespace nimble::transform
