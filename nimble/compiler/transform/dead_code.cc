// EliminateDeadCode: a let chain is rebuilt from its end backwards, so a
// binding is judged after every use of its variable has been seen (variables
// are unique nodes, and all uses of one lie in the scope its let opens), and
// dropping a binding also drops the uses in its value, which may make
// earlier bindings dead in the same sweep.
#include "nimble/compiler/transform/dead_code.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/support/deep_stack.h"
#include "nimble/compiler/transform/pass_util.h"
#include "nimble/vm/error.h"

namespace nimble::transform {

namespace {

using ir::Expr;
using ir::ExprKind;

// Whether evaluating an expression can have an effect beyond its value:
// writing through an argument, or (calling a global or a closure) failing to
// terminate or failing. Operator calls are pure; so is building a closure.
class EffectFinder : public ir::ExprFunctor<bool> {
 public:
  bool VisitExpr(const Expr& expr) override {
    auto [it, inserted] = memo_.try_emplace(expr.get(), false);
    if (inserted) it->second = ir::ExprFunctor<bool>::VisitExpr(expr);
    return it->second;
  }

  bool VisitVar(const ir::VarNode*) override { return false; }
  bool VisitGlobalVar(const ir::GlobalVarNode*) override { return false; }
  bool VisitConstant(const ir::ConstantNode*) override { return false; }
  bool VisitOp(const ir::OpNode*) override { return false; }
  bool VisitConstructor(const ir::ConstructorNode*) override { return false; }
  bool VisitFunction(const ir::FunctionNode*) override { return false; }
  bool VisitTuple(const ir::TupleNode* tuple) override { return AnyEffect(tuple->fields); }
  bool VisitTupleGetItem(const ir::TupleGetItemNode* item) override {
    return VisitExpr(item->tuple);
  }
  bool VisitLet(const ir::LetNode* let) override {
    return VisitExpr(let->value) || VisitExpr(let->body);
  }
  bool VisitIf(const ir::IfNode* node) override {
    return VisitExpr(node->cond) || VisitExpr(node->then_branch) || VisitExpr(node->else_branch);
  }
  bool VisitMatch(const ir::MatchNode* match) override {
    // A `match?` with no matching clause fails.
    if (!match->complete || VisitExpr(match->data)) return true;
    return std::any_of(match->clauses.begin(), match->clauses.end(),
                       [&](const ir::Clause& clause) { return VisitExpr(clause.rhs); });
  }
  bool VisitCall(const ir::CallNode* call) override {
    if (AnyEffect(call->args)) return true;
    switch (call->callee->kind) {
      case ExprKind::kOp:
        return IsWritingOp(static_cast<const ir::OpNode*>(call->callee.get())->name);
      case ExprKind::kConstructor:
        return false;
      default:
        // A primitive function is its body's operator calls.
        return !IsPrimitiveFunction(call->callee) ||
               VisitExpr(static_cast<const ir::FunctionNode*>(call->callee.get())->body);
    }
  }

 private:
  static bool IsWritingOp(const std::string& name) {
    return name == "memory.invoke_mut" || name == "memory.shape_func" || name == "memory.kill";
  }

  bool AnyEffect(const std::vector<Expr>& exprs) {
    return std::any_of(exprs.begin(), exprs.end(),
                       [&](const Expr& expr) { return VisitExpr(expr); });
  }

  std::unordered_map<const ir::ExprNode*, bool> memo_;
};

// Records the variables a kept expression uses and removes dead bindings.
class DeadCodeRemover : public ir::ExprMutator {
 public:
  Expr VisitVar(const ir::VarNode* var) override {
    used_.insert(var);
    return ir::RefOf(var);
  }

  Expr VisitLet(const ir::LetNode* let) override {
    // The chain iteratively: it may be 10,000 lets long.
    std::vector<const ir::LetNode*> chain;
    Expr expr = ir::RefOf(let);
    while (expr->kind == ExprKind::kLet) {
      chain.push_back(static_cast<const ir::LetNode*>(expr.get()));
      expr = chain.back()->body;
    }
    Expr result = VisitExpr(expr);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      const ir::LetNode* link = *it;
      if (!used_.count(link->var.get()) && !effects_.VisitExpr(link->value)) continue;
      Expr value = VisitExpr(link->value);
      if (value != link->value || result != link->body) {
        result = Make<ir::LetNode>(link->var, std::move(value), std::move(result));
        result->span = link->span;
      } else {
        result = ir::RefOf(link);
      }
    }
    return result;
  }

 private:
  std::unordered_set<const ir::VarNode*> used_;
  EffectFinder effects_;
};

// The globals reachable from `roots` through the bodies of `functions`.
std::unordered_set<std::string> ReachableGlobals(
    const std::unordered_map<std::string, ir::Function>& functions,
    std::vector<std::string> roots) {
  class GlobalCollector : public ir::ExprVisitor {
   public:
    std::vector<std::string> found;
    void VisitGlobalVar(const ir::GlobalVarNode* global) override { found.push_back(global->name); }
  };
  std::unordered_set<std::string> reached(roots.begin(), roots.end());
  std::vector<std::string> worklist = std::move(roots);
  while (!worklist.empty()) {
    std::string name = std::move(worklist.back());
    worklist.pop_back();
    auto it = functions.find(name);
    if (it == functions.end()) continue;  // undefined: type inference reports it
    GlobalCollector collector;
    collector.VisitExpr(it->second);
    for (std::string& callee : collector.found) {
      if (reached.insert(callee).second) worklist.push_back(std::move(callee));
    }
  }
  return reached;
}

}  // namespace

ir::IRModule EliminateDeadCode(const ir::IRModule& module, const std::vector<std::string>& roots) {
  for (const std::string& root : roots) {
    if (!module->Contains(root)) {
      throw Error("entry function @" + root + " is not defined in the module");
    }
  }
  return RunWithDeepStack([&] {
    std::unordered_map<std::string, ir::Function> functions;
    for (const ir::IRModuleNode::Definition& definition : module->functions()) {
      Expr function = DeadCodeRemover().VisitExpr(definition.function);
      functions.emplace(definition.global->name,
                        ir::RefOf(static_cast<const ir::FunctionNode*>(function.get())));
    }
    std::vector<std::string> entries = roots;
    if (entries.empty()) {
      // A module without @main is a library: every global is an entry point.
      for (const ir::IRModuleNode::Definition& definition : module->functions()) {
        if (!module->Contains("main") || definition.global->name == "main") {
          entries.push_back(definition.global->name);
        }
      }
    }
    const std::unordered_set<std::string> reachable =
        ReachableGlobals(functions, std::move(entries));
    ir::IRModule result = ir::MakeModule();
    for (const ir::TypeData& type_data : module->type_defs()) result->AddTypeDef(type_data);
    for (const ir::IRModuleNode::Definition& definition : module->functions()) {
      if (reachable.count(definition.global->name)) {
        result->Add(definition.global, functions.at(definition.global->name));
      }
    }
    return Retyped(module, std::move(result));
  });
}

}  // namespace nimble::transform
