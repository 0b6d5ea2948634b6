#include "nimble/compiler/transform/share_shapes.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/support/deep_stack.h"
#include "nimble/compiler/transform/dead_code.h"
#include "nimble/compiler/transform/let_chain.h"
#include "nimble/compiler/transform/pass_util.h"
#include "nimble/compiler/transform/shape_numbering.h"

namespace nimble::transform {

namespace {

// The output registers of a memory.shape_func call (its third argument, a
// tuple of variables).
std::vector<const ir::VarNode*> OutputsOf(const ir::CallNode& call) {
  std::vector<const ir::VarNode*> outputs;
  if (call.args.size() < 3 || call.args[2]->kind != ir::ExprKind::kTuple) return outputs;
  for (const ir::Expr& field : static_cast<const ir::TupleNode&>(*call.args[2]).fields) {
    if (field->kind != ir::ExprKind::kVar) return {};
    outputs.push_back(static_cast<const ir::VarNode*>(field.get()));
  }
  return outputs;
}

class ShapeSharer : public ir::ExprMutator {
 public:
  ShapeSharer(const ir::FunctionNode& function, const OutputDimForms& forms)
      : numbering_(function, forms) {}

  ir::Expr VisitVar(const ir::VarNode* var) override {
    const auto found = replaced_.find(var);
    return found != replaced_.end() ? ir::RefOf(found->second) : ir::RefOf(var);
  }

  // A primitive's variables are its own.
  ir::Expr VisitFunction(const ir::FunctionNode* function) override {
    if (HasFlag(function, kPrimitiveAttr)) return ir::RefOf(function);
    return ExprMutator::VisitFunction(function);
  }

  // A chain is a scope: what it computes is available to what follows in it
  // and to the branches inside it, not after it. Looped over: chains run
  // 10,000 deep.
  ir::Expr VisitLet(const ir::LetNode* head) override {
    const size_t scope = undo_.size();
    std::vector<Binding> kept;
    ir::Expr expr = ir::RefOf(head);
    for (; expr->kind == ir::ExprKind::kLet; expr = static_cast<const ir::LetNode&>(*expr).body) {
      const auto* let = static_cast<const ir::LetNode*>(expr.get());
      if (Shared(let->var.get(), *let->value)) continue;
      kept.push_back({let->var, VisitExpr(let->value), let});
      MakeAvailable(let->var.get(), *let->value);
    }
    ir::Expr body = WrapLets(kept, VisitExpr(expr));
    for (; undo_.size() > scope; undo_.pop_back()) {
      const auto [is_call, number] = undo_.back();
      if (is_call) {
        calls_.erase(number);
      } else {
        shapes_.erase(number);
      }
    }
    return body;
  }

 private:
  // The register in scope holding the shape numbered `number`, or null.
  const ir::VarNode* Holder(int number) const {
    const auto found = number < 0 ? shapes_.end() : shapes_.find(number);
    return found == shapes_.end() ? nullptr : found->second;
  }

  // Whether `var = value` computes nothing new, so that it goes and `var`
  // reads as what holds its value already.
  bool Shared(const ir::VarNode* var, const ir::ExprNode& value) {
    const std::string_view op = CalledOpName(value);
    if (op == "shape_of") {
      const ir::VarNode* holder = Holder(numbering_.OfRegister(var));
      if (holder) replaced_[var] = holder;
      return holder;
    }
    if (op != "memory.shape_func") return false;
    const auto& call = static_cast<const ir::CallNode&>(value);
    const ShapeCall numbered = numbering_.OfCall(&call);
    const std::vector<const ir::VarNode*> outputs = OutputsOf(call);
    const bool all_held =
        !outputs.empty() && std::all_of(outputs.begin(), outputs.end(), [&](auto* output) {
          return Holder(numbering_.OfRegister(output)) != nullptr;
        });
    if (!all_held || !(numbered.copies_input || calls_.contains(numbered.number))) return false;
    for (const ir::VarNode* output : outputs) {
      replaced_[output] = Holder(numbering_.OfRegister(output));
    }
    return true;
  }

  // After `var = value` stays: its shapes are held from here on; a call's
  // outputs whose shapes were held already read as the earlier registers
  // past the call, which stays for what it checks.
  void MakeAvailable(const ir::VarNode* var, const ir::ExprNode& value) {
    const std::string_view op = CalledOpName(value);
    if (op == "shape_of") {
      Hold(numbering_.OfRegister(var), var);
      return;
    }
    if (op != "memory.shape_func") return;
    const auto& call = static_cast<const ir::CallNode&>(value);
    const int number = numbering_.OfCall(&call).number;
    if (number >= 0 && calls_.insert(number).second) undo_.emplace_back(true, number);
    for (const ir::VarNode* output : OutputsOf(call)) {
      const int shape = numbering_.OfRegister(output);
      if (const ir::VarNode* holder = Holder(shape)) {
        replaced_[output] = holder;
      } else {
        Hold(shape, output);
      }
    }
  }

  void Hold(int number, const ir::VarNode* var) {
    if (number >= 0 && shapes_.emplace(number, var).second) undo_.emplace_back(false, number);
  }

  const ShapeNumbering numbering_;
  std::unordered_map<int, const ir::VarNode*> shapes_;  // in scope, by number
  std::unordered_set<int> calls_;                       // shape function calls made in scope
  std::vector<std::pair<bool, int>> undo_;              // (is a call, number) added, in order
  std::unordered_map<const ir::VarNode*, const ir::VarNode*> replaced_;
};

}  // namespace

ir::IRModule ShareShapes(const ir::IRModule& module, const std::vector<std::string>& roots,
                         const OutputDimForms& forms) {
  return RunWithDeepStack([&] {
    const ir::IRModule shared =
        MapFunctions(module, [&](const ir::IRModuleNode::Definition& definition) {
          ShapeSharer sharer(*definition.function, forms);
          return ir::RefOf(
              static_cast<const ir::FunctionNode*>(sharer.VisitExpr(definition.function).get()));
        });
    return EliminateDeadCode(shared, roots);
  });
}

}  // namespace nimble::transform
