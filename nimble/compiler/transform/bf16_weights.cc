#include "nimble/compiler/transform/bf16_weights.h"

#include <unordered_map>
#include <vector>

#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/support/deep_stack.h"
#include "nimble/compiler/transform/pass_util.h"

namespace nimble::transform {

namespace {

using ir::Expr;

bool IsFloat32Tensor(const ir::Type& type) {
  return type && type->kind == ir::TypeKind::kTensor &&
         static_cast<const ir::TensorTypeNode&>(*type).dtype == DataType::Float32();
}

Tensor ToBf16(const Tensor& weight) {
  Tensor converted = TensorNode::Empty(weight->shape(), DataType::BFloat16());
  const float* from = weight->data<float>();
  BFloat16* to = converted->data<BFloat16>();
  for (int64_t i = 0; i < weight->numel(); ++i) to[i] = FloatToBFloat16(from[i]);
  return converted;
}

class DenseWeightConverter : public ir::ExprMutator {
 public:
  // `converted`: the bf16 constant of each weight, shared by all functions.
  explicit DenseWeightConverter(std::unordered_map<const ir::ConstantNode*, Expr>& converted)
      : converted_(converted) {}

  Expr VisitCall(const ir::CallNode* call) override {
    Expr rewritten = ExprMutator::VisitCall(call);
    if (CalledOpName(*call) != "nn.dense") return rewritten;
    const auto* new_call = static_cast<const ir::CallNode*>(rewritten.get());
    const Expr& weight = new_call->args[1];
    if (weight->kind != ir::ExprKind::kConstant) return rewritten;
    const auto* constant = static_cast<const ir::ConstantNode*>(weight.get());
    if (constant->data->dtype() != DataType::Float32() || constant->data->ndim() != 2 ||
        !IsFloat32Tensor(call->args[0]->checked_type) || !IsFloat32Tensor(call->checked_type)) {
      return rewritten;
    }
    Expr& bf16 = converted_[constant];
    if (!bf16) {
      bf16 = Make<ir::ConstantNode>(ToBf16(constant->data),
                                    constant->name.empty() ? "" : constant->name + ".bf16");
      bf16->span = weight->span;
    }
    Expr result = Make<ir::CallNode>(new_call->callee, std::vector<Expr>{new_call->args[0], bf16},
                                     new_call->attrs);
    result->span = call->span;
    return result;
  }

 private:
  std::unordered_map<const ir::ConstantNode*, Expr>& converted_;
};

}  // namespace

ir::IRModule ConvertDenseWeightsToBf16(const ir::IRModule& module) {
  return RunWithDeepStack([&] {
    std::unordered_map<const ir::ConstantNode*, Expr> converted;
    ir::IRModule result = MapFunctions(module, [&](const ir::IRModuleNode::Definition& definition) {
      Expr function = DenseWeightConverter(converted).VisitExpr(definition.function);
      return ir::RefOf(static_cast<const ir::FunctionNode*>(function.get()));
    });
    return converted.empty() ? module : Retyped(module, std::move(result));
  });
}

}  // namespace nimble::transform
