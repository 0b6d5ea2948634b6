// LambdaLift: lifts nested function literals innermost first, so that when a
// literal is lifted the literals inside it are already calls of their
// globals, and its free variables include what those capture.
//
// A lifted function gets fresh, fully annotated parameters (captured values
// and its own parameters, typed from inference): a global is typed on its own,
// and a literal whose parameter types came from its call site would otherwise
// be under-constrained there.
#include "nimble/compiler/transform/lambda_lift.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "nimble/compiler/ir/free_vars.h"
#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/support/deep_stack.h"
#include "nimble/compiler/transform/pass_util.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/error.h"

namespace nimble::transform {

namespace {

using ir::Expr;

ir::Type TypeOf(const ir::Expr& expr) {
  if (!expr->checked_type) {
    throw Error("LambdaLift: an expression has no type (at " + expr->span.ToString() +
                "); run type inference first");
  }
  return expr->checked_type;
}

// Replaces variables by expressions.
class Substituter : public ir::ExprMutator {
 public:
  explicit Substituter(std::unordered_map<const ir::VarNode*, Expr> replacements)
      : replacements_(std::move(replacements)) {}

  Expr VisitVar(const ir::VarNode* var) override {
    auto it = replacements_.find(var);
    return it == replacements_.end() ? ir::RefOf(var) : it->second;
  }

 private:
  std::unordered_map<const ir::VarNode*, Expr> replacements_;
};

// Type variables free in `types` and not bound by `bound`, in order of first
// occurrence: what a lifted global must bind as its own type parameters.
std::vector<ir::TypeVar> FreeTypeParams(const std::vector<ir::Type>& types,
                                        const std::vector<ir::TypeVar>& bound) {
  std::vector<ir::TypeVar> free;
  for (const ir::Type& type : types) {
    for (const ir::TypeVar& var : ir::FreeTypeVars(type)) {
      if (std::find(bound.begin(), bound.end(), var) == bound.end() &&
          std::find(free.begin(), free.end(), var) == free.end()) {
        free.push_back(var);
      }
    }
  }
  return free;
}

class LambdaLifter : public ir::ExprMutator {
 public:
  struct Lifted {
    ir::GlobalVar global;
    ir::Function function;
  };

  LambdaLifter(const ir::IRModule& module, std::vector<std::string>* taken_names,
               std::string enclosing)
      : module_(module), taken_names_(taken_names), enclosing_(std::move(enclosing)) {}

  // The global `function` with its nested literals lifted.
  ir::Function LiftBody(const ir::FunctionNode* function) {
    Expr body = VisitExpr(function->body);
    if (body == function->body) return ir::RefOf(function);
    return Make<ir::FunctionNode>(function->params, std::move(body), function->ret_type,
                                  function->type_params, function->attrs);
  }

  std::vector<Lifted>& lifted() { return lifted_; }

  Expr VisitLet(const ir::LetNode* let) override {
    if (let->value->kind != ir::ExprKind::kFunction || IsPrimitiveFunction(let->value)) {
      return ExprMutator::VisitLet(let);
    }
    // Let-bound, the literal may call itself through the binder.
    Expr value = Lift(static_cast<const ir::FunctionNode*>(let->value.get()), let->var);
    memo_.emplace(let->value.get(), value);
    Expr body = VisitExpr(let->body);
    Expr result = Make<ir::LetNode>(let->var, std::move(value), std::move(body));
    result->span = let->span;
    return result;
  }

  Expr VisitFunction(const ir::FunctionNode* function) override {
    if (HasFlag(function, kPrimitiveAttr)) return ir::RefOf(function);
    return Lift(function, nullptr);
  }

 private:
  // The global for `function` and what replaces the literal: the global, or
  // its call on the captured values. `self` is the let binder through which a
  // recursive literal refers to itself (null when not let-bound).
  Expr Lift(const ir::FunctionNode* function, const ir::Var& self) {
    const ir::Type function_type = TypeOf(ir::RefOf(function));
    const auto* type = static_cast<const ir::FuncTypeNode*>(function_type.get());
    Expr lifted_body = VisitExpr(function->body);

    std::vector<ir::Var> captured;
    bool recursive = false;
    for (const ir::Var& var : ir::FreeVars(Make<ir::FunctionNode>(
             function->params, lifted_body, nullptr, std::vector<ir::TypeVar>{}))) {
      if (var == self) {
        recursive = true;
      } else {
        captured.push_back(var);
      }
    }

    ir::GlobalVar global = Make<ir::GlobalVarNode>(FreshName());
    std::unordered_map<const ir::VarNode*, Expr> replacements;
    std::vector<ir::Var> captured_params;
    std::vector<ir::Expr> captured_args;
    for (const ir::Var& var : captured) {
      captured_params.push_back(ir::MakeVar(var->name_hint, TypeOf(var)));
      captured_args.push_back(captured_params.back());
      replacements.emplace(var.get(), captured_params.back());
    }
    std::vector<ir::Var> params;
    for (size_t i = 0; i < function->params.size(); ++i) {
      params.push_back(ir::MakeVar(function->params[i]->name_hint, type->arg_types[i]));
      replacements.emplace(function->params[i].get(), params.back());
    }
    // The closure of a recursive literal is rebuilt from its global at each
    // call rather than captured, which would make it own itself.
    ir::Var rebuilt_self;
    if (recursive) {
      if (captured.empty()) {
        replacements.emplace(self.get(), global);
      } else {
        rebuilt_self = ir::MakeVar(self->name_hint, TypeOf(self));
        replacements.emplace(self.get(), rebuilt_self);
      }
    }
    Expr body = Substituter(std::move(replacements)).VisitExpr(lifted_body);
    if (rebuilt_self) {
      body = Make<ir::LetNode>(rebuilt_self, Make<ir::CallNode>(global, captured_args),
                               std::move(body));
    }
    // In the order the lifted global's signature mentions them.
    std::vector<ir::Type> signature;
    for (const ir::Var& var : captured) signature.push_back(TypeOf(var));
    signature.push_back(function_type);
    std::vector<ir::TypeVar> type_params = FreeTypeParams(signature, function->type_params);
    if (captured.empty()) {
      type_params.insert(type_params.begin(), function->type_params.begin(),
                         function->type_params.end());
      lifted_.push_back(
          {global, Make<ir::FunctionNode>(std::move(params), std::move(body), type->ret_type,
                                          std::move(type_params), function->attrs)});
      return global;
    }
    ir::Function inner = Make<ir::FunctionNode>(std::move(params), std::move(body), type->ret_type,
                                                function->type_params, function->attrs);
    inner->span = function->span;
    ir::Attrs attrs;
    attrs.Set(kClosureAttr, int64_t{1});
    lifted_.push_back(
        {global, Make<ir::FunctionNode>(std::move(captured_params), std::move(inner), function_type,
                                        std::move(type_params), std::move(attrs))});
    Expr call = Make<ir::CallNode>(global, std::vector<Expr>(captured.begin(), captured.end()));
    call->span = function->span;
    return call;
  }

  // `<enclosing>_lambda_<n>`, unused by the module and by earlier lifts.
  std::string FreshName() {
    for (int n = 0;; ++n) {
      std::string name = enclosing_ + "_lambda_" + std::to_string(n);
      if (!module_->Contains(name) &&
          std::find(taken_names_->begin(), taken_names_->end(), name) == taken_names_->end()) {
        taken_names_->push_back(name);
        return name;
      }
    }
  }

  const ir::IRModule& module_;
  std::vector<std::string>* taken_names_;
  const std::string enclosing_;
  std::vector<Lifted> lifted_;
};

}  // namespace

ir::IRModule LambdaLift(const ir::IRModule& module) {
  return RunWithDeepStack([&] {
    ir::IRModule result = ir::MakeModule();
    for (const ir::TypeData& type_data : module->type_defs()) result->AddTypeDef(type_data);
    std::vector<std::string> taken_names;
    for (const ir::IRModuleNode::Definition& definition : module->functions()) {
      LambdaLifter lifter(module, &taken_names, definition.global->name);
      result->Add(definition.global, lifter.LiftBody(definition.function.get()));
      for (LambdaLifter::Lifted& lifted : lifter.lifted()) {
        result->Add(lifted.global, std::move(lifted.function));
      }
    }
    return Retyped(module, std::move(result));
  });
}

}  // namespace nimble::transform
