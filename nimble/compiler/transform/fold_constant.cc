// FoldConstants: a bottom-up rewrite. A let whose value folds to a constant
// is dropped and its variable replaced by the constant, so folding goes on
// through chains of shape arithmetic; a let-bound tuple of constants is
// remembered (not inlined: a tuple is no atom) so that an op taking it, such
// as concatenate, folds too.
#include "nimble/compiler/transform/fold_constant.h"

#include <unordered_map>
#include <utility>
#include <vector>

#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/op/invoke.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/support/deep_stack.h"
#include "nimble/compiler/transform/pass_util.h"
#include "nimble/vm/adt.h"
#include "nimble/vm/error.h"

namespace nimble::transform {

namespace {

using ir::Expr;
using ir::ExprKind;

class ConstantFolder : public ir::ExprMutator {
 public:
  Expr VisitVar(const ir::VarNode* var) override {
    auto it = constants_.find(var);
    return it == constants_.end() ? ir::RefOf(var) : it->second;
  }

  Expr VisitFunction(const ir::FunctionNode* function) override {
    // A primitive's body calls its op on parameters: nothing to fold.
    if (HasFlag(function, kPrimitiveAttr)) return ir::RefOf(function);
    return ExprMutator::VisitFunction(function);
  }

  Expr VisitLet(const ir::LetNode* let) override {
    Expr value = VisitExpr(let->value);
    if (value->kind == ExprKind::kConstant) {
      constants_.emplace(let->var.get(), value);
      return VisitExpr(let->body);
    }
    if (Ref<Object> tuple = ValueOf(value)) tuples_.emplace(let->var.get(), tuple);
    Expr body = VisitExpr(let->body);
    if (value == let->value && body == let->body) return ir::RefOf(let);
    Expr result = Make<ir::LetNode>(let->var, std::move(value), std::move(body));
    result->span = let->span;
    return result;
  }

  Expr VisitCall(const ir::CallNode* call) override {
    Expr rewritten = ExprMutator::VisitCall(call);
    if (call->callee->kind != ExprKind::kOp) return rewritten;
    const op::OpDef& def = *static_cast<const ir::OpNode*>(call->callee.get())->def;
    if (def.dialect) return rewritten;
    const auto* new_call = static_cast<const ir::CallNode*>(rewritten.get());
    if (def.name == "shape_of") {
      if (Expr shape = StaticShape(call)) return shape;
    }
    std::vector<Ref<Object>> args;
    size_t input_bytes = 0;
    for (const Expr& arg : new_call->args) {
      Ref<Object> value = ValueOf(arg);
      if (!value) return rewritten;
      input_bytes += Bytes(value);
      args.push_back(std::move(value));
    }
    Tensor result;
    try {
      // A result larger than its inputs is not kept (it would grow the
      // program), so it is not computed either: `zeros` of a large static
      // shape was allocated whole at compile time. A scalar (at most 8
      // bytes) is always kept.
      const int64_t kept_bytes = std::max<int64_t>(static_cast<int64_t>(input_bytes), 8);
      result = op::InvokeOp(def, args, call->attrs, kept_bytes).as<TensorNode>();
    } catch (const Error&) {
      return rewritten;  // the program fails here at run time, which reports it
    }
    if (!result || (result->ndim() > 0 && result->nbytes() > input_bytes)) return rewritten;
    Expr constant = Make<ir::ConstantNode>(result, "");
    constant->span = call->span;
    return constant;
  }

 private:
  // shape_of of a tensor whose type is static, whatever its value.
  static Expr StaticShape(const ir::CallNode* call) {
    const ir::Type& type = call->args[0]->checked_type;
    if (!type || type->kind != ir::TypeKind::kTensor) return nullptr;
    const auto* tensor_type = static_cast<const ir::TensorTypeNode*>(type.get());
    if (!tensor_type->is_static()) return nullptr;
    Tensor shape = TensorNode::Empty({static_cast<int64_t>(tensor_type->ndim())},
                                     call->attrs.GetDType("dtype"));
    for (size_t i = 0; i < tensor_type->ndim(); ++i) {
      shape->SetFromDouble(static_cast<int64_t>(i),
                           static_cast<double>(tensor_type->shape[i].value()));
    }
    Expr constant = Make<ir::ConstantNode>(shape, "");
    constant->span = call->span;
    return constant;
  }

  // The value of a constant, or of a tuple (inline or let-bound) of constants;
  // null otherwise.
  Ref<Object> ValueOf(const Expr& expr) const {
    switch (expr->kind) {
      case ExprKind::kConstant:
        return static_cast<const ir::ConstantNode*>(expr.get())->data;
      case ExprKind::kVar: {
        auto it = tuples_.find(static_cast<const ir::VarNode*>(expr.get()));
        return it == tuples_.end() ? nullptr : it->second;
      }
      case ExprKind::kTuple: {
        std::vector<Ref<Object>> fields;
        for (const Expr& field : static_cast<const ir::TupleNode*>(expr.get())->fields) {
          fields.push_back(ValueOf(field));
          if (!fields.back()) return nullptr;
        }
        return MakeTuple(std::move(fields));
      }
      default:
        return nullptr;
    }
  }

  static size_t Bytes(const Ref<Object>& value) {
    if (Tensor tensor = value.as<TensorNode>()) return tensor->nbytes();
    size_t bytes = 0;
    ADT tuple = value.as<ADTNode>();
    for (size_t i = 0; i < tuple->size(); ++i) bytes += Bytes(tuple->field(i));
    return bytes;
  }

  std::unordered_map<const ir::VarNode*, Expr> constants_;
  std::unordered_map<const ir::VarNode*, Ref<Object>> tuples_;
};

}  // namespace

ir::IRModule FoldConstants(const ir::IRModule& module) {
  return RunWithDeepStack([&] {
    ir::IRModule result = MapFunctions(module, [](const ir::IRModuleNode::Definition& definition) {
      Expr function = ConstantFolder().VisitExpr(definition.function);
      return ir::RefOf(static_cast<const ir::FunctionNode*>(function.get()));
    });
    return Retyped(module, std::move(result));
  });
}

}  // namespace nimble::transform
