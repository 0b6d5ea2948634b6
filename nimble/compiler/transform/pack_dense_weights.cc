// PackDenseWeights: a bottom-up rewrite of nn.dense calls on constant
// weights; the packed constant of a weight is made once however many calls
// share it.
#include "nimble/compiler/transform/pack_dense_weights.h"

#include <unordered_map>
#include <utility>
#include <vector>

#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/support/deep_stack.h"
#include "nimble/compiler/transform/pass_util.h"
#include "nimble/compiler/typing/type_infer.h"

namespace nimble::transform {

namespace {

using ir::Expr;

const ir::TensorTypeNode* Float32TensorType(const ir::Type& type) {
  if (!type || type->kind != ir::TypeKind::kTensor) return nullptr;
  const auto* tensor = static_cast<const ir::TensorTypeNode*>(type.get());
  return tensor->dtype == DataType::Float32() ? tensor : nullptr;
}

// weight [units, k] as [units / 16, k, 16]: column u of the product is
// packed[u / 16, :, u % 16].
Tensor Pack(const Tensor& weight) {
  const int64_t units = weight->shape()[0];
  const int64_t k = weight->shape()[1];
  Tensor packed =
      TensorNode::Empty({units / kDensePackBlock, k, kDensePackBlock}, DataType::Float32());
  const float* from = weight->data<float>();
  float* to = packed->data<float>();
  for (int64_t u = 0; u < units; ++u) {
    for (int64_t l = 0; l < k; ++l) {
      to[((u / kDensePackBlock) * k + l) * kDensePackBlock + u % kDensePackBlock] = from[u * k + l];
    }
  }
  return packed;
}

class DenseWeightPacker : public ir::ExprMutator {
 public:
  explicit DenseWeightPacker(const PackDensePredicate& pack) : pack_(pack) {}

  Expr VisitFunction(const ir::FunctionNode* function) override {
    if (HasFlag(function, kPrimitiveAttr)) return ir::RefOf(function);
    return ExprMutator::VisitFunction(function);
  }

  Expr VisitCall(const ir::CallNode* call) override {
    Expr rewritten = ExprMutator::VisitCall(call);
    if (CalledOpName(*call) != "nn.dense") return rewritten;
    const auto* new_call = static_cast<const ir::CallNode*>(rewritten.get());
    const Expr& weight = new_call->args[1];
    if (weight->kind != ir::ExprKind::kConstant) return rewritten;
    const ir::TensorTypeNode* data_type = Float32TensorType(call->args[0]->checked_type);
    const ir::TensorTypeNode* weight_type = Float32TensorType(call->args[1]->checked_type);
    if (!data_type || !weight_type || weight_type->ndim() != 2 || !weight_type->is_static()) {
      return rewritten;
    }
    const int64_t units = weight_type->shape[0].value();
    if (units == 0 || units % kDensePackBlock != 0) return rewritten;
    if (!call->attrs.IsNone("out_dtype") &&
        call->attrs.GetDType("out_dtype") != DataType::Float32()) {
      return rewritten;
    }
    if (!pack_(*data_type, *weight_type)) return rewritten;
    const auto* constant = static_cast<const ir::ConstantNode*>(weight.get());
    Expr& packed = packed_[constant];
    if (!packed) {
      // Named after the weight, so that dumps say what was packed.
      packed = Make<ir::ConstantNode>(Pack(constant->data),
                                      constant->name.empty() ? "" : constant->name + ".packed");
      packed->span = weight->span;
    }
    const op::OpDef& def = *op::OpRegistry::Global().Find("nn.contrib_dense_pack");
    Attrs attrs;
    if (!call->attrs.IsNone("out_dtype")) attrs.Set("out_dtype", DataType::Float32());
    Expr result =
        Make<ir::CallNode>(op::GetOp(def.name), std::vector<Expr>{new_call->args[0], packed},
                           op::NormalizeAttrs(def, attrs));
    result->span = call->span;
    return result;
  }

 private:
  const PackDensePredicate& pack_;
  std::unordered_map<const ir::ConstantNode*, Expr> packed_;
};

}  // namespace

ir::IRModule PackDenseWeights(const ir::IRModule& module, const PackDensePredicate& pack) {
  return RunWithDeepStack([&] {
    DenseWeightPacker packer(pack);
    ir::IRModule result = MapFunctions(module, [&](const ir::IRModuleNode::Definition& definition) {
      Expr function = packer.VisitExpr(definition.function);
      return ir::RefOf(static_cast<const ir::FunctionNode*>(function.get()));
    });
    typing::InferTypes(result);
    return result;
  });
}

}  // namespace nimble::transform
