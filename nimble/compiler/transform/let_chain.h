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
  const ir::LetNode* original = nullptr;  // the let it was read from, if any
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
    chain.bindings.push_back({let->var, let->value, let});
    expr = let->body;
  }
  chain.result = std::move(expr);
  return chain;
}

// `let` each binding in turn, then `body`; built from the inside out. A
// binding read from a let that is still what it was (the same variable,
// value and chain inside it) is that very let: a chain a pass left as it was
// comes back as the same nodes, so that the module need not be typed again.
inline ir::Expr WrapLets(const std::vector<Binding>& bindings, ir::Expr body) {
  for (auto it = bindings.rbegin(); it != bindings.rend(); ++it) {
    const ir::LetNode* let = it->original;
    if (let && let->var == it->var && let->value == it->value && let->body == body) {
      body = ir::RefOf(let);
      continue;
    }
    body = Make<ir::LetNode>(it->var, it->value, std::move(body));
    if (let) body->span = let->span;
  }
  return body;
}

}  // namespace nimble::transform
