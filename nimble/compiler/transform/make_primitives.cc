// MakePrimitives: wraps each operator call in its own primitive function, the
// form memory manifestation and the VM compiler take as "one kernel call".
#include "nimble/compiler/transform/make_primitives.h"

#include <string>
#include <utility>
#include <vector>

#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/support/deep_stack.h"
#include "nimble/compiler/transform/pass_util.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/error.h"

namespace nimble::transform {

namespace {

// Ops the VM runs as instructions rather than kernels.
bool IsInstruction(const ir::OpNode* op, const ir::Attrs& attrs) {
  if (op->def->dialect) return true;
  if (op->name != "shape_of") return false;
  return attrs.GetDType("dtype") == DataType::Int64();
}

ir::Type TypeOf(const ir::ExprNode* expr, const std::string& what) {
  if (!expr->checked_type) {
    throw Error("MakePrimitives: " + what + " has no type (at " + expr->span.ToString() +
                "); run type inference first");
  }
  return expr->checked_type;
}

class PrimitiveMaker : public ir::ExprMutator {
 public:
  ir::Expr VisitFunction(const ir::FunctionNode* function) override {
    // Already primitive: its body is the kernel, not calls to wrap again.
    if (HasFlag(function, kPrimitiveAttr)) return ir::RefOf(function);
    return ExprMutator::VisitFunction(function);
  }

  ir::Expr VisitCall(const ir::CallNode* call) override {
    ir::Expr rewritten = ExprMutator::VisitCall(call);
    if (call->callee->kind != ir::ExprKind::kOp) return rewritten;
    const auto* op = static_cast<const ir::OpNode*>(call->callee.get());
    if (IsInstruction(op, call->attrs)) return rewritten;

    const auto* new_call = static_cast<const ir::CallNode*>(rewritten.get());
    std::vector<ir::Var> params;
    std::vector<ir::Expr> param_uses;
    for (size_t i = 0; i < call->args.size(); ++i) {
      params.push_back(ir::MakeVar(
          "p" + std::to_string(i),
          TypeOf(call->args[i].get(), "argument " + std::to_string(i) + " of " + op->name)));
      param_uses.push_back(params.back());
    }
    ir::Attrs attrs;
    attrs.Set(kPrimitiveAttr, int64_t{1});
    ir::Expr body = Make<ir::CallNode>(call->callee, std::move(param_uses), call->attrs);
    body->span = call->span;
    ir::Expr primitive = Make<ir::FunctionNode>(std::move(params), std::move(body),
                                                TypeOf(call, "the call of " + op->name),
                                                std::vector<ir::TypeVar>{}, std::move(attrs));
    ir::Expr result = Make<ir::CallNode>(std::move(primitive), new_call->args);
    result->span = call->span;
    return result;
  }
};

}  // namespace

ir::IRModule MakePrimitives(const ir::IRModule& module) {
  return RunWithDeepStack([&] {
    ir::IRModule result = MapFunctions(module, [](const ir::IRModuleNode::Definition& definition) {
      return ir::RefOf(static_cast<const ir::FunctionNode*>(
          PrimitiveMaker().VisitExpr(definition.function).get()));
    });
    typing::InferTypes(result);
    return result;
  });
}

}  // namespace nimble::transform
