// InlineFunctions: which globals may be inlined is decided once for the
// module (the call graph's cycles, the callees' sizes); then each function's
// calls of those globals are replaced, a callee's own calls first, so a
// chain of helpers collapses in one pass. No callee that is inlined can reach
// the function being rewritten (it would then reach itself), so the
// recursion over callees ends.
#include "nimble/compiler/transform/inline_functions.h"

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/support/deep_stack.h"
#include "nimble/compiler/transform/pass_util.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/error.h"

namespace nimble::transform {

namespace {

using ir::Expr;

// The globals an expression names, called or not, its count of nodes, and
// whether it holds a `match?`, which fails naming its function.
class Census : public ir::ExprVisitor {
 public:
  void VisitExpr(const Expr& expr) override {
    if (!visited_.count(expr.get())) ++nodes;
    ir::ExprVisitor::VisitExpr(expr);
  }
  void VisitGlobalVar(const ir::GlobalVarNode* global) override { globals.insert(global->name); }
  void VisitMatch(const ir::MatchNode* match) override {
    may_fail_naming_function |= !match->complete;
    ir::ExprVisitor::VisitMatch(match);
  }

  std::unordered_set<std::string> globals;
  int nodes = 0;
  bool may_fail_naming_function = false;
};

// Whether `from`'s references to globals lead back to `target`.
bool Reaches(const std::unordered_map<std::string, Census>& census, const std::string& from,
             const std::string& target) {
  std::unordered_set<std::string> seen;
  std::vector<std::string> worklist = {from};
  while (!worklist.empty()) {
    const std::string name = std::move(worklist.back());
    worklist.pop_back();
    auto it = census.find(name);
    if (it == census.end()) continue;
    for (const std::string& callee : it->second.globals) {
      if (callee == target) return true;
      if (seen.insert(callee).second) worklist.push_back(callee);
    }
  }
  return false;
}

// A copy of a closed function's body with its parameters replaced as given
// and a new variable for each binder in it (lets, nested functions'
// parameters, match patterns): the copies inlined at two call sites must not
// share variables, which are unique nodes.
class FreshBinders : public ir::ExprMutator {
 public:
  FreshBinders(const ir::FunctionNode& function, const std::vector<Expr>& params) {
    for (size_t i = 0; i < params.size(); ++i) memo_[function.params[i].get()] = params[i];
  }

  Expr VisitVar(const ir::VarNode* var) override {
    Expr fresh = Make<ir::VarNode>(var->name_hint, var->type_annotation);
    fresh->span = var->span;
    return fresh;
  }

  ir::Pattern VisitPattern(const ir::Pattern& pattern) override {
    switch (pattern->kind) {
      case ir::PatternKind::kWildcard:
        return pattern;
      case ir::PatternKind::kVar: {
        const auto& bound = static_cast<const ir::PatternVarNode&>(*pattern);
        return Make<ir::PatternVarNode>(VisitExpr(bound.var).as<ir::VarNode>());
      }
      case ir::PatternKind::kConstructor: {
        const auto& node = static_cast<const ir::PatternConstructorNode&>(*pattern);
        return Make<ir::PatternConstructorNode>(node.constructor, VisitPatterns(node.patterns));
      }
      case ir::PatternKind::kTuple:
        return Make<ir::PatternTupleNode>(
            VisitPatterns(static_cast<const ir::PatternTupleNode&>(*pattern).patterns));
    }
    return pattern;
  }

 private:
  std::vector<ir::Pattern> VisitPatterns(const std::vector<ir::Pattern>& patterns) {
    std::vector<ir::Pattern> result;
    for (const ir::Pattern& sub : patterns) result.push_back(VisitPattern(sub));
    return result;
  }
};

class Inliner {
 public:
  explicit Inliner(const ir::IRModule& module) : module_(module) {
    std::unordered_map<std::string, Census> census;
    for (const ir::IRModuleNode::Definition& definition : module->functions()) {
      census[definition.global->name].VisitExpr(definition.function);
    }
    for (const ir::IRModuleNode::Definition& definition : module->functions()) {
      const std::string& name = definition.global->name;
      const Census& counts = census.at(name);
      if (Reaches(census, name, name)) {
        recursive_.insert(name);
        continue;
      }
      // The function node itself is one of the census's nodes.
      const bool small = counts.nodes <= kMaxInlinedNodes + 1;
      if (definition.function->type_params.empty() && small && !counts.may_fail_naming_function) {
        inlinable_.insert(name);
      }
    }
  }

  // `name`'s function, with its calls of inlinable globals inlined when it
  // is recursive.
  ir::Function Rewritten(const std::string& name) {
    const ir::Function function = module_->Lookup(name);
    return recursive_.count(name) ? CallInliner(*this).VisitExpr(function).as<ir::FunctionNode>()
                                  : function;
  }

 private:
  // Inlinable `name` with its own calls of inlinable globals inlined.
  ir::Function Expanded(const std::string& name) {
    if (auto it = expanded_.find(name); it != expanded_.end()) return it->second;
    ir::Function function =
        CallInliner(*this).VisitExpr(module_->Lookup(name)).as<ir::FunctionNode>();
    expanded_.emplace(name, function);
    return function;
  }

  class CallInliner : public ir::ExprMutator {
   public:
    explicit CallInliner(Inliner& owner) : owner_(owner) {}

    Expr VisitCall(const ir::CallNode* call) override {
      if (call->callee->kind != ir::ExprKind::kGlobalVar) return ir::ExprMutator::VisitCall(call);
      const std::string& name = static_cast<const ir::GlobalVarNode&>(*call->callee).name;
      if (!owner_.inlinable_.count(name)) return ir::ExprMutator::VisitCall(call);
      const ir::Function callee = owner_.Expanded(name);
      if (callee->params.size() != call->args.size()) {
        throw Error("@" + name + " takes " + std::to_string(callee->params.size()) +
                    " arguments, got " + std::to_string(call->args.size()));
      }
      // A variable argument stands for its parameter; any other is bound
      // first, to a fresh copy of the parameter.
      std::vector<Expr> params;
      std::vector<std::pair<ir::Var, Expr>> bindings;
      for (size_t i = 0; i < call->args.size(); ++i) {
        Expr arg = VisitExpr(call->args[i]);
        if (arg->kind == ir::ExprKind::kVar) {
          params.push_back(std::move(arg));
          continue;
        }
        const ir::Var& param = callee->params[i];
        ir::Var fresh = Make<ir::VarNode>(param->name_hint, param->type_annotation);
        fresh->span = param->span;
        params.push_back(fresh);
        bindings.emplace_back(std::move(fresh), std::move(arg));
      }
      Expr result = FreshBinders(*callee, params).VisitExpr(callee->body);
      for (auto it = bindings.rbegin(); it != bindings.rend(); ++it) {
        result = Make<ir::LetNode>(it->first, std::move(it->second), std::move(result));
        result->span = call->span;
      }
      return result;
    }

   private:
    Inliner& owner_;
  };

  const ir::IRModule& module_;
  std::unordered_set<std::string> recursive_;
  std::unordered_set<std::string> inlinable_;
  std::unordered_map<std::string, ir::Function> expanded_;
};

}  // namespace

ir::IRModule InlineFunctions(const ir::IRModule& module) {
  return RunWithDeepStack([&] {
    Inliner inliner(module);
    ir::IRModule result = MapFunctions(module, [&](const ir::IRModuleNode::Definition& definition) {
      return inliner.Rewritten(definition.global->name);
    });
    return Retyped(module, std::move(result));
  });
}

}  // namespace nimble::transform
