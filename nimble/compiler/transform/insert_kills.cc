// Liveness by scope: each let chain (a function body, a branch, a clause)
// is a list of statements; a variable's uses inside a nested scope count at
// the statement holding that scope. A variable and the names that rename it
// share one VM register, so the register dies at the last use of any of them
// and is killed under the name that owns it.
#include "nimble/compiler/transform/insert_kills.h"

#include <map>
#include <set>
#include <vector>

#include "nimble/compiler/ir/free_vars.h"
#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/support/deep_stack.h"
#include "nimble/compiler/transform/let_chain.h"
#include "nimble/compiler/transform/pass_util.h"
#include "nimble/compiler/typing/type_infer.h"

namespace nimble::transform {

namespace {

using ir::ExprKind;

bool IsUnit(const ir::Type& type) {
  return type && type->kind == ir::TypeKind::kTuple &&
         static_cast<const ir::TupleTypeNode&>(*type).fields.empty();
}

class KillInserter {
 public:
  // Variables `body` kills already (a second run) are left alone.
  explicit KillInserter(const ir::Expr& body) { CollectKilled(body); }

  ir::Expr Function(const ir::FunctionNode& node) {
    return Make<ir::FunctionNode>(node.params, Scope(node.body, /*tail=*/true, node.params),
                                  node.ret_type, node.type_params, node.attrs);
  }

 private:
  static constexpr size_t kUnused = static_cast<size_t>(-1);

  // `expr` with kills inserted; `owned` are the variables whose registers
  // this scope owns besides its let binders (a function's parameters). In a
  // `tail` scope nothing follows the statement computing the result.
  ir::Expr Scope(const ir::Expr& expr, bool tail, const std::vector<ir::Var>& owned) {
    LetChain chain = FlattenLets(expr);
    const size_t n = chain.bindings.size();
    // Whether the last statement computes the result (`let %x = e; %x`).
    const bool result_is_last = n > 0 && chain.result.get() == chain.bindings.back().var.get();

    for (size_t i = 0; i < n; ++i) {
      chain.bindings[i].value =
          Nested(chain.bindings[i].value, tail && result_is_last && i + 1 == n);
    }
    chain.result = Nested(chain.result, tail);

    // The owner of each name's register, among those this scope owns.
    std::map<const ir::VarNode*, const ir::VarNode*> owner;
    std::vector<const ir::VarNode*> owners;
    auto own = [&](const ir::Var& var) {
      owner[var.get()] = var.get();
      owners.push_back(var.get());
    };
    for (const ir::Var& param : owned) own(param);
    for (const Binding& binding : chain.bindings) {
      if (binding.value->kind == ExprKind::kVar) {
        const auto found = owner.find(static_cast<const ir::VarNode*>(binding.value.get()));
        if (found != owner.end()) owner[binding.var.get()] = found->second;
      } else {
        own(binding.var);
      }
    }

    // Statement index of each owner's last use; n stands for the result.
    std::map<const ir::VarNode*, size_t> last_use;
    for (const ir::VarNode* var : owners) last_use[var] = kUnused;
    auto note_uses = [&](const ir::Expr& value, size_t index) {
      for (const ir::Var& used : ir::FreeVars(value)) {
        const auto found = owner.find(used.get());
        if (found != owner.end()) last_use[found->second] = index;
      }
    };
    for (size_t i = 0; i < n; ++i) note_uses(chain.bindings[i].value, i);
    note_uses(chain.result, n);

    // Kills after statement i; an unused parameter dies on entry.
    std::vector<std::vector<const ir::VarNode*>> kills_after(n);
    std::vector<const ir::VarNode*> kills_on_entry;
    std::map<const ir::VarNode*, size_t> defined_at;
    for (size_t i = 0; i < n; ++i) defined_at[chain.bindings[i].var.get()] = i;
    for (const ir::VarNode* var : owners) {
      if (killed_.contains(var) || !Killable(*var)) continue;
      size_t at = last_use[var];
      if (at == kUnused) {
        const auto defined = defined_at.find(var);
        if (defined == defined_at.end()) {
          kills_on_entry.push_back(var);
          continue;
        }
        at = defined->second;
      }
      if (at >= n || (tail && at + 1 == n)) continue;
      kills_after[at].push_back(var);
    }

    std::vector<Binding> bindings;
    for (const ir::VarNode* var : kills_on_entry) bindings.push_back(Kill(var));
    for (size_t i = 0; i < n; ++i) {
      bindings.push_back(chain.bindings[i]);
      for (const ir::VarNode* var : kills_after[i]) bindings.push_back(Kill(var));
    }
    return WrapLets(bindings, chain.result);
  }

  // The scopes inside a statement's value: branches, clauses and (outside
  // primitives) function bodies.
  ir::Expr Nested(const ir::Expr& value, bool tail) {
    switch (value->kind) {
      case ExprKind::kIf: {
        const auto& node = static_cast<const ir::IfNode&>(*value);
        return Rebuilt(value, Make<ir::IfNode>(node.cond, Scope(node.then_branch, tail, {}),
                                               Scope(node.else_branch, tail, {})));
      }
      case ExprKind::kMatch: {
        const auto& node = static_cast<const ir::MatchNode&>(*value);
        std::vector<ir::Clause> clauses;
        for (const ir::Clause& clause : node.clauses) {
          clauses.push_back({clause.lhs, Scope(clause.rhs, tail, {})});
        }
        return Rebuilt(value, Make<ir::MatchNode>(node.data, std::move(clauses), node.complete));
      }
      case ExprKind::kFunction: {
        if (IsPrimitiveFunction(value)) return value;
        const auto& node = static_cast<const ir::FunctionNode&>(*value);
        return Rebuilt(value, Function(node));
      }
      default:
        return value;
    }
  }

  static ir::Expr Rebuilt(const ir::Expr& old, ir::Expr fresh) {
    fresh->span = old->span;
    return fresh;
  }

  // Only values that live in a register: not `()` (invoke_mut's result).
  static bool Killable(const ir::VarNode& var) {
    const ir::Type& type = var.checked_type ? var.checked_type : var.type_annotation;
    return !IsUnit(type);
  }

  static Binding Kill(const ir::VarNode* var) {
    return {ir::MakeVar("k", ir::MakeTupleType({})),
            op::MakeOpCall("memory.kill", {ir::RefOf(var)})};
  }

  void CollectKilled(const ir::Expr& body) {
    class Finder : public ir::ExprVisitor {
     public:
      explicit Finder(std::set<const ir::VarNode*>* killed) : killed_(*killed) {}
      void VisitCall(const ir::CallNode* node) override {
        if (CalledOpName(*node) == "memory.kill" && node->args.size() == 1 &&
            node->args[0]->kind == ExprKind::kVar) {
          killed_.insert(static_cast<const ir::VarNode*>(node->args[0].get()));
        }
        ir::ExprVisitor::VisitCall(node);
      }

     private:
      std::set<const ir::VarNode*>& killed_;
    };
    Finder(&killed_).VisitExpr(body);
  }

  std::set<const ir::VarNode*> killed_;
};

}  // namespace

ir::IRModule InsertKills(const ir::IRModule& module) {
  return RunWithDeepStack([&] {
    ir::IRModule result = MapFunctions(module, [](const ir::IRModuleNode::Definition& definition) {
      return KillInserter(definition.function->body)
          .Function(*definition.function)
          .as<ir::FunctionNode>();
    });
    typing::InferTypes(result);
    return result;
  });
}

}  // namespace nimble::transform
