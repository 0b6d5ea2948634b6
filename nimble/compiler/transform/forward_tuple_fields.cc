#include "nimble/compiler/transform/forward_tuple_fields.h"

#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "nimble/compiler/ir/free_vars.h"
#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/support/deep_stack.h"
#include "nimble/compiler/transform/let_chain.h"
#include "nimble/compiler/transform/pass_util.h"

namespace nimble::transform {

namespace {

bool IsAtom(const ir::Expr& expr) {
  return expr->kind == ir::ExprKind::kVar || expr->kind == ir::ExprKind::kConstant;
}

// A tuple literal of variables and constants.
bool IsAtomTuple(const ir::Expr& expr) {
  if (expr->kind != ir::ExprKind::kTuple) return false;
  for (const ir::Expr& field : static_cast<const ir::TupleNode&>(*expr).fields) {
    if (!IsAtom(field)) return false;
  }
  return true;
}

class TupleForwarder : public ir::ExprMutator {
 public:
  ir::Expr VisitVar(const ir::VarNode* var) override {
    const auto found = renamed_.find(var);
    return found != renamed_.end() ? found->second : ir::RefOf(var);
  }

  ir::Expr VisitTupleGetItem(const ir::TupleGetItemNode* get) override {
    ir::Expr tuple = VisitExpr(get->tuple);
    const ir::Expr literal = LiteralOr(tuple);
    if (literal->kind == ir::ExprKind::kTuple) {
      return static_cast<const ir::TupleNode&>(*literal).fields[get->index];
    }
    if (tuple == get->tuple) return ir::RefOf(get);
    ir::Expr result = Make<ir::TupleGetItemNode>(std::move(tuple), get->index);
    result->span = get->span;
    return result;
  }

  ir::Expr VisitCall(const ir::CallNode* call) override {
    const std::string_view op = CalledOpName(*call);
    if (op != "memory.invoke_mut" && op != "memory.shape_func") {
      return ExprMutator::VisitCall(call);
    }
    std::vector<ir::Expr> args = {VisitExpr(call->args[0])};
    for (size_t i = 1; i < call->args.size(); ++i) {
      const ir::Expr& arg = call->args[i];
      if (arg->kind != ir::ExprKind::kTuple) {
        args.push_back(VisitExpr(arg));
        continue;
      }
      const auto& original = static_cast<const ir::TupleNode&>(*arg).fields;
      std::vector<ir::Expr> fields;
      for (const ir::Expr& field : original) fields.push_back(LiteralOr(VisitExpr(field)));
      if (fields == original) {
        args.push_back(arg);
        continue;
      }
      args.push_back(Make<ir::TupleNode>(std::move(fields)));
      args.back()->span = arg->span;
    }
    if (args == call->args) return ir::RefOf(call);
    ir::Expr result = Make<ir::CallNode>(call->callee, std::move(args), call->attrs);
    result->span = call->span;
    return result;
  }

  // The whole chain from `head` on, looped over: chains run 10,000 deep.
  ir::Expr VisitLet(const ir::LetNode* head) override {
    LetChain chain = FlattenLets(ir::RefOf(head));
    std::vector<Binding> kept;
    for (Binding& binding : chain.bindings) {
      const ir::ExprKind kind = binding.value->kind;
      binding.value = VisitExpr(binding.value);
      if ((kind == ir::ExprKind::kTupleGetItem || kind == ir::ExprKind::kVar) &&
          IsAtom(binding.value)) {
        renamed_[binding.var.get()] = std::move(binding.value);
        continue;
      }
      if (IsAtomTuple(binding.value)) literals_[binding.var.get()] = binding.value;
      kept.push_back(std::move(binding));
    }
    ir::Expr body = VisitExpr(chain.result);
    // A tuple still read as a whole stays.
    std::unordered_set<const ir::VarNode*> read;
    const auto note_reads = [&](const ir::Expr& value) {
      for (const ir::Var& var : free_vars_(value)) read.insert(var.get());
    };
    for (const Binding& binding : kept) note_reads(binding.value);
    note_reads(body);
    std::erase_if(kept, [&](const Binding& binding) {
      return literals_.contains(binding.var.get()) && !read.contains(binding.var.get());
    });
    return WrapLets(kept, std::move(body));
  }

 private:
  // The tuple literal bound to `expr` when it is such a variable; else `expr`.
  ir::Expr LiteralOr(const ir::Expr& expr) const {
    if (expr->kind != ir::ExprKind::kVar) return expr;
    const auto found = literals_.find(static_cast<const ir::VarNode*>(expr.get()));
    return found != literals_.end() ? found->second : expr;
  }

  // Tuple literals by the variable bound to them, and variables that read a
  // field of one or name another variable, by what they read.
  std::unordered_map<const ir::VarNode*, ir::Expr> literals_;
  std::unordered_map<const ir::VarNode*, ir::Expr> renamed_;
  // Across the chains: each nests the next one's scopes.
  ir::FreeVarCache free_vars_;
};

}  // namespace

ir::IRModule ForwardTupleFields(const ir::IRModule& module) {
  return RunWithDeepStack([&] {
    ir::IRModule result = MapFunctions(module, [&](const ir::IRModuleNode::Definition& definition) {
      return ir::RefOf(static_cast<const ir::FunctionNode*>(
          TupleForwarder().VisitExpr(definition.function).get()));
    });
    return Retyped(module, std::move(result));
  });
}

}  // namespace nimble::transform
