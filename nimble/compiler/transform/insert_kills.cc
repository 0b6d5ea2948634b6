// Liveness by scope: each let chain (a function body, a branch, a clause)
// is a list of statements; a variable's uses inside a nested scope count at
// the statement holding that scope. A variable and the names that rename it
// share one VM register, so the register dies at the last use of any of them
// and is killed under the name that owns it.
#include "nimble/compiler/transform/insert_kills.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "nimble/compiler/ir/free_vars.h"
#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/support/deep_stack.h"
#include "nimble/compiler/transform/let_chain.h"
#include "nimble/compiler/transform/pass_util.h"

namespace nimble::transform {

namespace {

using ir::ExprKind;

bool IsUnit(const ir::Type& type) {
  return type && type->kind == ir::TypeKind::kTuple &&
         static_cast<const ir::TupleTypeNode&>(*type).fields.empty();
}

// The registers a branch kills that are not its own let binders: those an
// enclosing scope hands down, and a clause's field variables. The owners in
// order, and every name (each owner and its renames) mapped to its owner.
struct Handed {
  std::vector<const ir::VarNode*> owners;
  std::map<const ir::VarNode*, const ir::VarNode*> names;
};

bool IsBranching(const ir::Expr& value) {
  return value->kind == ExprKind::kIf || value->kind == ExprKind::kMatch;
}

// A scope of a branching value, and the variable (if any) that names the
// whole matched value there, sharing the register of the match's variable.
struct Branch {
  ir::Expr body;
  const ir::VarNode* alias_of_data = nullptr;
};

// An if's two branches, a match's clauses.
std::vector<Branch> BranchesOf(const ir::Expr& value) {
  if (value->kind == ExprKind::kIf) {
    const auto& node = static_cast<const ir::IfNode&>(*value);
    return {{node.then_branch}, {node.else_branch}};
  }
  const auto& node = static_cast<const ir::MatchNode&>(*value);
  std::vector<Branch> branches;
  for (const ir::Clause& clause : node.clauses) {
    Branch branch{clause.rhs};
    if (clause.lhs->kind == ir::PatternKind::kVar && node.data->kind == ExprKind::kVar) {
      branch.alias_of_data = static_cast<const ir::PatternVarNode&>(*clause.lhs).var.get();
    }
    branches.push_back(std::move(branch));
  }
  return branches;
}

// The variable a match reads, or null (an if, or a match of another expression).
const ir::VarNode* MatchedVariable(const ir::Expr& value) {
  if (value->kind != ExprKind::kMatch) return nullptr;
  const ir::Expr& data = static_cast<const ir::MatchNode&>(*value).data;
  return data->kind == ExprKind::kVar ? static_cast<const ir::VarNode*>(data.get()) : nullptr;
}

// The variables a clause's pattern binds inside constructors and tuples:
// each gets a register of its own (a field read). A variable matching the
// whole value shares the value's register instead.
void FieldVariables(const ir::Pattern& pattern, bool nested, std::vector<ir::Var>& vars) {
  switch (pattern->kind) {
    case ir::PatternKind::kWildcard:
      return;
    case ir::PatternKind::kVar:
      if (nested) vars.push_back(static_cast<const ir::PatternVarNode&>(*pattern).var);
      return;
    case ir::PatternKind::kTuple:
      for (const ir::Pattern& field : static_cast<const ir::PatternTupleNode&>(*pattern).patterns) {
        FieldVariables(field, true, vars);
      }
      return;
    case ir::PatternKind::kConstructor:
      for (const ir::Pattern& field :
           static_cast<const ir::PatternConstructorNode&>(*pattern).patterns) {
        FieldVariables(field, true, vars);
      }
      return;
  }
}

// Whether `expr` calls a function or closure (not a kernel: those go through
// memory.invoke_mut by now), outside the bodies of functions it makes.
bool ContainsCall(const ir::Expr& expr) {
  class Finder : public ir::ExprVisitor {
   public:
    bool found = false;
    void VisitCall(const ir::CallNode* node) override {
      const ExprKind callee = node->callee->kind;
      found |= callee == ExprKind::kGlobalVar || callee == ExprKind::kVar ||
               callee == ExprKind::kFunction;
      ir::ExprVisitor::VisitCall(node);
    }
    void VisitFunction(const ir::FunctionNode*) override {}
  };
  Finder finder;
  finder.VisitExpr(expr);
  return finder.found;
}

class KillInserter {
 public:
  // Variables `body` kills already (a second run) are left alone.
  explicit KillInserter(const ir::Expr& body) { CollectKilled(body); }

  ir::Expr Function(const ir::FunctionNode& node) {
    return Make<ir::FunctionNode>(node.params, Scope(node.body, /*tail=*/true, node.params, {}),
                                  node.ret_type, node.type_params, node.attrs);
  }

 private:
  static constexpr size_t kUnused = static_cast<size_t>(-1);

  // `expr` with kills inserted; `params` are a function body's parameters,
  // `handed` the other registers it kills besides its let binders. In a
  // `tail` scope nothing follows the statement computing the result.
  ir::Expr Scope(const ir::Expr& expr, bool tail, const std::vector<ir::Var>& params,
                 const Handed& handed) {
    LetChain chain = FlattenLets(expr);
    const size_t n = chain.bindings.size();
    // Whether the last statement computes the result (`let %x = e; %x`).
    const bool result_is_last = n > 0 && chain.result.get() == chain.bindings.back().var.get();
    // Whether statement i (n: the result) computes a tail scope's result.
    const auto is_tail = [&](size_t i) {
      return tail && (i == n || (result_is_last && i + 1 == n));
    };
    // Whether only the result's return follows statement i.
    const auto ends_tail = [&](size_t i) { return tail && i + 1 >= n; };
    const auto value_at = [&](size_t i) -> const ir::Expr& {
      return i == n ? chain.result : chain.bindings[i].value;
    };

    // The owner of each name's register, among those this scope kills.
    std::map<const ir::VarNode*, const ir::VarNode*> owner = handed.names;
    std::vector<const ir::VarNode*> owners = handed.owners;
    auto own = [&](const ir::Var& var) {
      owner[var.get()] = var.get();
      owners.push_back(var.get());
    };
    for (const ir::Var& param : params) own(param);
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
    for (size_t i = 0; i <= n; ++i) {
      for (const ir::Var& used : free_vars_(value_at(i))) {
        const auto found = owner.find(used.get());
        if (found != owner.end()) last_use[found->second] = i;
      }
    }

    // Kills on entry (unused parameters and handed registers), after
    // statement i, or handed on to the branches of statement i.
    std::vector<const ir::VarNode*> kills_on_entry;
    std::vector<std::vector<const ir::VarNode*>> kills_after(n);
    std::vector<Handed> handed_on(n + 1);
    std::map<const ir::VarNode*, size_t> defined_at;
    for (size_t i = 0; i < n; ++i) defined_at[chain.bindings[i].var.get()] = i;
    // calls_back_from[i]: whether statement i or a later one makes a call
    // that returns to this frame.
    std::vector<bool> calls_back_from;
    const auto calls_back = [&](size_t from) -> bool {
      if (calls_back_from.empty()) {
        calls_back_from.assign(n + 2, false);
        for (size_t i = n + 1; i-- > 0;) {
          calls_back_from[i] = calls_back_from[i + 1] || CallsBack(value_at(i), is_tail(i));
        }
      }
      return calls_back_from[from];
    };
    // In a tail scope, a handed register (an enclosing scope's or a clause
    // field's: neither holds memory of its own), or one used last by the
    // statement before the result, is killed only before a call that
    // returns to this frame (a kill right after a call taking it becomes a
    // move, vm_compiler.h, so the callee may drop it while it runs).
    // Otherwise the frame's end, or the tail call reusing it, drops it about
    // as soon, and the kill is one more instruction each time round a loop.
    const auto worth_killing = [&](const ir::VarNode* var, size_t at) -> bool {
      const bool is_handed = std::ranges::find(handed.owners, var) != handed.owners.end();
      if (!tail || !(is_handed || ends_tail(at))) return true;
      return calls_back(at == kUnused ? 0 : at);
    };
    for (const ir::VarNode* var : owners) {
      if (killed_.contains(var) || !Killable(*var)) continue;
      size_t at = last_use[var];
      const bool used = at != kUnused;
      if (!used) {
        const auto defined = defined_at.find(var);
        if (defined == defined_at.end()) {
          if (worth_killing(var, kUnused)) kills_on_entry.push_back(var);
          continue;
        }
        at = defined->second;
      }
      const ir::Expr& value = value_at(at);
      // A branch kills the register after its own last use, rather than
      // the statement after the whole construct: in tail position that is
      // the only kill there is (a recursive function's argument then dies
      // before the recursion, not after it returns).
      if (used && IsBranching(value)) {
        const std::set<const ir::VarNode*> names = NamesOf(var, owner);
        if (is_tail(at) || KillableInBranches(value, names)) {
          handed_on[at].owners.push_back(var);
          for (const ir::VarNode* name : names) handed_on[at].names[name] = var;
          continue;
        }
      }
      if (at == n || is_tail(at) || !worth_killing(var, at)) continue;
      kills_after[at].push_back(var);
    }

    for (size_t i = 0; i < n; ++i) {
      chain.bindings[i].value = Nested(chain.bindings[i].value, is_tail(i), handed_on[i]);
    }
    chain.result = Nested(chain.result, tail, handed_on[n]);

    std::vector<Binding> bindings;
    for (const ir::VarNode* var : kills_on_entry) bindings.push_back(Kill(var));
    for (size_t i = 0; i < n; ++i) {
      bindings.push_back(chain.bindings[i]);
      for (const ir::VarNode* var : kills_after[i]) bindings.push_back(Kill(var));
    }
    return WrapLets(bindings, chain.result);
  }

  // Whether evaluating `expr` (in tail position when `tail`) makes a call
  // that returns to the current frame: a call that is not a tail call.
  // Memoised for the values holding scopes: every scope asks it of the
  // scopes nested in it, all the way down.
  bool CallsBack(const ir::Expr& expr, bool tail) {
    if (!IsBranching(expr) && expr->kind != ExprKind::kLet) return ComputeCallsBack(expr, tail);
    const auto key = std::pair{expr.get(), tail};
    if (const auto found = calls_back_.find(key); found != calls_back_.end()) return found->second;
    const bool calls_back = ComputeCallsBack(expr, tail);
    calls_back_.emplace(key, calls_back);
    return calls_back;
  }

  bool ComputeCallsBack(const ir::Expr& expr, bool tail) {
    if (!tail) return ContainsCall(expr);
    if (expr->kind == ExprKind::kCall) return false;  // the tail call; ANF args are atoms
    if (IsBranching(expr)) {
      return std::ranges::any_of(
          BranchesOf(expr), [&](const Branch& branch) { return CallsBack(branch.body, true); });
    }
    if (expr->kind != ExprKind::kLet) return ContainsCall(expr);
    const LetChain chain = FlattenLets(expr);
    const size_t n = chain.bindings.size();
    const bool result_is_last = n > 0 && chain.result.get() == chain.bindings.back().var.get();
    for (size_t i = 0; i < n; ++i) {
      if (CallsBack(chain.bindings[i].value, result_is_last && i + 1 == n)) return true;
    }
    return CallsBack(chain.result, true);
  }

  static std::set<const ir::VarNode*> NamesOf(
      const ir::VarNode* var, const std::map<const ir::VarNode*, const ir::VarNode*>& owner) {
    std::set<const ir::VarNode*> names;
    for (const auto& [name, name_owner] : owner) {
      if (name_owner == var) names.insert(name);
    }
    return names;
  }

  // Whether every branch of `value` (not in tail position) can kill the
  // register of `names` before its value leaves the branch: it does not
  // use it, or uses it last in a statement rather than as its value.
  // Memoised: the scope of each branch asks it again of the same nested values.
  bool KillableInBranches(const ir::Expr& value, const std::set<const ir::VarNode*>& names) {
    auto key = std::pair{value.get(), names};
    if (const auto found = killable_in_branches_.find(key); found != killable_in_branches_.end()) {
      return found->second;
    }
    const bool killable = ComputeKillableInBranches(value, names);
    killable_in_branches_.emplace(std::move(key), killable);
    return killable;
  }

  bool ComputeKillableInBranches(const ir::Expr& value, const std::set<const ir::VarNode*>& names) {
    for (const Branch& branch : BranchesOf(value)) {
      const LetChain chain = FlattenLets(branch.body);
      std::set<const ir::VarNode*> aliases = names;
      if (branch.alias_of_data && names.contains(MatchedVariable(value))) {
        aliases.insert(branch.alias_of_data);
      }
      for (const Binding& binding : chain.bindings) {
        if (binding.value->kind == ExprKind::kVar &&
            aliases.contains(static_cast<const ir::VarNode*>(binding.value.get()))) {
          aliases.insert(binding.var.get());
        }
      }
      const auto uses = [&](const ir::Expr& expr) {
        for (const ir::Var& used : free_vars_(expr)) {
          if (aliases.contains(used.get())) return true;
        }
        return false;
      };
      if (uses(chain.result) &&
          !(IsBranching(chain.result) && KillableInBranches(chain.result, aliases))) {
        return false;
      }
    }
    return true;
  }

  // The scopes inside a statement's value: branches, clauses and (outside
  // primitives) function bodies; `handed` are registers its branches kill.
  ir::Expr Nested(const ir::Expr& value, bool tail, const Handed& handed) {
    switch (value->kind) {
      case ExprKind::kIf: {
        const auto& node = static_cast<const ir::IfNode&>(*value);
        return Rebuilt(value, Make<ir::IfNode>(node.cond, Scope(node.then_branch, tail, {}, handed),
                                               Scope(node.else_branch, tail, {}, handed)));
      }
      case ExprKind::kMatch: {
        const auto& node = static_cast<const ir::MatchNode&>(*value);
        const std::vector<Branch> branches = BranchesOf(value);
        const auto data = handed.names.find(MatchedVariable(value));
        std::vector<ir::Clause> clauses;
        for (size_t i = 0; i < node.clauses.size(); ++i) {
          const ir::Clause& clause = node.clauses[i];
          std::vector<ir::Var> fields;
          FieldVariables(clause.lhs, false, fields);
          Handed clause_handed = handed;
          for (const ir::Var& field : fields) {
            clause_handed.owners.push_back(field.get());
            clause_handed.names[field.get()] = field.get();
          }
          if (branches[i].alias_of_data && data != handed.names.end()) {
            clause_handed.names[branches[i].alias_of_data] = data->second;
          }
          clauses.push_back({clause.lhs, Scope(clause.rhs, tail, {}, clause_handed)});
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
  // Over the function's original scopes, which every level asks about.
  ir::FreeVarCache free_vars_;
  std::map<std::pair<const ir::ExprNode*, bool>, bool> calls_back_;
  std::map<std::pair<const ir::ExprNode*, std::set<const ir::VarNode*>>, bool>
      killable_in_branches_;
};

}  // namespace

ir::IRModule InsertKills(const ir::IRModule& module) {
  return RunWithDeepStack([&] {
    ir::IRModule result = MapFunctions(module, [](const ir::IRModuleNode::Definition& definition) {
      return KillInserter(definition.function->body)
          .Function(*definition.function)
          .as<ir::FunctionNode>();
    });
    return Retyped(module, std::move(result));
  });
}

}  // namespace nimble::transform
