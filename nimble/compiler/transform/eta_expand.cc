// EtaExpandConstructors, in two rewrites. A constructor node is shared by all
// its uses and its checked type is the generic one (`fn [A](A, List[A]) ->
// List[A]`); the instance a use needs is known only to type inference, which
// solves it from the context (a polymorphic global it is passed to, a tuple,
// a branch join) and keeps no per-use record. So the first rewrite binds each
// use to a variable of its own, `let %c = Cons; %c`, which changes no type,
// and after inference that variable's checked type is exactly the instance
// (`fn (float32, List[float32]) -> List[float32]`). The second rewrite
// replaces each such binding by the function literal of that type.
#include "nimble/compiler/transform/eta_expand.h"

#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/support/deep_stack.h"
#include "nimble/compiler/transform/pass_util.h"
#include "nimble/compiler/typing/type_infer.h"

namespace nimble::transform {

namespace {

using ir::Expr;
using ir::ExprKind;

// Binds every use of a constructor with fields outside callee position to a
// fresh variable; `markers` collects the bindings made.
class UseMarker : public ir::ExprMutator {
 public:
  explicit UseMarker(std::unordered_set<const ir::LetNode*>* markers) : markers_(markers) {}

  Expr VisitExpr(const Expr& expr) override {
    // Not memoised: each use needs a marker (and a type) of its own.
    if (expr->kind == ExprKind::kConstructor) {
      return VisitConstructor(static_cast<const ir::ConstructorNode*>(expr.get()));
    }
    return ExprMutator::VisitExpr(expr);
  }

  Expr VisitConstructor(const ir::ConstructorNode* constructor) override {
    // A nullary constructor is only ever called (the parser makes `Nil` a call).
    if (constructor->inputs.empty()) return ir::RefOf(constructor);
    ir::Var var = ir::MakeVar(constructor->name);
    auto marker = Make<ir::LetNode>(var, ir::RefOf(constructor), var);
    markers_->insert(marker.get());
    return marker;
  }

  Expr VisitCall(const ir::CallNode* call) override {
    if (call->callee->kind != ExprKind::kConstructor) return ExprMutator::VisitCall(call);
    // In callee position the constructor stays; only its arguments change.
    std::vector<Expr> args;
    for (const Expr& arg : call->args) args.push_back(VisitExpr(arg));
    if (args == call->args) return ir::RefOf(call);
    Expr result = Make<ir::CallNode>(call->callee, std::move(args), call->attrs);
    result->span = call->span;
    return result;
  }

 private:
  std::unordered_set<const ir::LetNode*>* markers_;
};

// Replaces each marker `let %c = Cons; %c` by
// `fn (%f0: T0, %f1: T1) -> R { Cons(%f0, %f1) }`, the types from %c's.
class MarkerExpander : public ir::ExprMutator {
 public:
  explicit MarkerExpander(const std::unordered_set<const ir::LetNode*>& markers)
      : markers_(markers) {}

  Expr VisitLet(const ir::LetNode* let) override {
    if (!markers_.count(let)) return ExprMutator::VisitLet(let);
    // Inference gave %c the constructor's type, instantiated.
    const auto* func = static_cast<const ir::FuncTypeNode*>(let->var->checked_type.get());
    std::vector<ir::Var> params;
    std::vector<Expr> args;
    for (size_t i = 0; i < func->arg_types.size(); ++i) {
      params.push_back(ir::MakeVar("f" + std::to_string(i), func->arg_types[i]));
      args.push_back(params.back());
    }
    Expr body = Make<ir::CallNode>(let->value, std::move(args));
    return Make<ir::FunctionNode>(std::move(params), std::move(body), func->ret_type,
                                  std::vector<ir::TypeVar>{});
  }

 private:
  const std::unordered_set<const ir::LetNode*>& markers_;
};

template <typename Mutator, typename State>
ir::IRModule Rewrite(const ir::IRModule& module, State&& state) {
  return MapFunctions(module, [&](const ir::IRModuleNode::Definition& definition) {
    Expr function = Mutator(state).VisitExpr(definition.function);
    return ir::RefOf(static_cast<const ir::FunctionNode*>(function.get()));
  });
}

}  // namespace

ir::IRModule EtaExpandConstructors(const ir::IRModule& module) {
  return RunWithDeepStack([&] {
    std::unordered_set<const ir::LetNode*> markers;
    ir::IRModule marked = Retyped(module, Rewrite<UseMarker>(module, &markers));
    if (markers.empty()) return marked;
    return Retyped(marked, Rewrite<MarkerExpander>(marked, markers));
  });
}

}  // namespace nimble::transform
