// PackDenseWeights: a bottom-up rewrite of nn.dense calls on constant
// weights; the packed constant of a weight is made once however many calls
// share it. An add of a constant vector to a packed call that nothing else
// reads is rewritten after its operands, so a chain of them folds into one
// bias.
#include "nimble/compiler/transform/pack_dense_weights.h"

#include <unordered_map>
#include <utility>
#include <vector>

#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/support/deep_stack.h"
#include "nimble/compiler/transform/pass_util.h"
#include "nimble/compiler/transform/repeated_code.h"
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

// How many times each expression of `root` is a child of another (the IR is
// a DAG: a call may feed several).
std::unordered_map<const ir::ExprNode*, int> UseCounts(const Expr& root) {
  std::unordered_map<const ir::ExprNode*, int> uses;
  std::vector<const ir::ExprNode*> stack = {root.get()};
  while (!stack.empty()) {
    const ir::ExprNode* node = stack.back();
    stack.pop_back();
    ir::ForEachChild(node, [&](const ir::ExprNode* child) {
      if (++uses[child] == 1) stack.push_back(child);
    });
  }
  return uses;
}

// The float32 vector of `expr` when it is a constant of shape [units].
const ir::ConstantNode* BiasConstant(const Expr& expr, int64_t units) {
  if (expr->kind != ir::ExprKind::kConstant) return nullptr;
  const auto* constant = static_cast<const ir::ConstantNode*>(expr.get());
  const Tensor& data = constant->data;
  if (data->dtype() != DataType::Float32() || data->ndim() != 1 || data->shape()[0] != units) {
    return nullptr;
  }
  return constant;
}

class DenseWeightPacker : public RepeatedCodeMutator {
 public:
  // `packed`: the packed constant of each weight, shared by all functions.
  DenseWeightPacker(const PackDensePredicate& pack, bool global_repeated,
                    std::unordered_map<const ir::ConstantNode*, Expr>& packed)
      : RepeatedCodeMutator(global_repeated), pack_(pack), packed_(packed) {}

  Expr VisitFunction(const ir::FunctionNode* function) override {
    if (uses_.empty() && !HasFlag(function, kPrimitiveAttr)) uses_ = UseCounts(ir::RefOf(function));
    return RepeatedCodeMutator::VisitFunction(function);
  }

  Expr VisitCall(const ir::CallNode* call) override {
    Expr rewritten = ExprMutator::VisitCall(call);
    if (CalledOpName(*call) == "add") return WithBias(*call, rewritten);
    if (CalledOpName(*call) == "gelu") return WithGelu(*call, rewritten);
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
    if (!pack_(*data_type, *weight_type, InRepeatedCode())) return rewritten;
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
  // gelu(packed), for a float32 packed call without an activation that only
  // this gelu reads, as one packed call that applies it (BERT's feed-forward
  // product, [tokens, 3072]): the kernel applies gelu to each tile while it
  // is in cache, where gelu was one more pass over the product.
  Expr WithGelu(const ir::CallNode& gelu, const Expr& rewritten) {
    const auto& new_gelu = static_cast<const ir::CallNode&>(*rewritten);
    const Expr& product = new_gelu.args[0];
    if (CalledOpName(*product) != "nn.contrib_dense_pack") return rewritten;
    const auto uses = uses_.find(gelu.args[0].get());
    if (uses == uses_.end() || uses->second != 1) return rewritten;
    const auto& packed = static_cast<const ir::CallNode&>(*product);
    if (!packed.attrs.IsNone("activation")) return rewritten;
    Attrs attrs = packed.attrs;
    attrs.Set("activation", std::string("gelu"));
    Expr result = Make<ir::CallNode>(packed.callee, packed.args, std::move(attrs));
    result->span = gelu.span;
    return result;
  }

  // add(packed, b) or add(b, packed), for a packed call that only this add
  // reads and a constant float32 b of shape [units], as one packed call
  // with b (plus the bias it already had) as its bias: the kernel starts
  // its sums from the bias instead of a pass over the product adding it
  // (the LSTM's input projection, [tokens, 2048], plus b_ih, plus b_hh).
  Expr WithBias(const ir::CallNode& add, const Expr& rewritten) {
    const auto& new_add = static_cast<const ir::CallNode&>(*rewritten);
    for (size_t side = 0; side < 2; ++side) {
      const Expr& product = new_add.args[side];
      if (CalledOpName(*product) != "nn.contrib_dense_pack") continue;
      const auto uses = uses_.find(add.args[side].get());
      if (uses == uses_.end() || uses->second != 1) continue;
      const auto& packed = static_cast<const ir::CallNode&>(*product);
      const auto* weight = packed.args[1]->kind == ir::ExprKind::kConstant
                               ? static_cast<const ir::ConstantNode*>(packed.args[1].get())
                               : nullptr;
      if (!weight || weight->data->ndim() != 3) continue;
      const int64_t units = weight->data->shape()[0] * weight->data->shape()[2];
      const ir::ConstantNode* bias = BiasConstant(new_add.args[1 - side], units);
      const ir::ConstantNode* old_bias =
          packed.args.size() > 2 ? BiasConstant(packed.args[2], units) : nullptr;
      if (!bias || (packed.args.size() > 2 && !old_bias)) continue;
      Expr bias_sum = ir::RefOf(bias);
      if (old_bias) {
        Tensor sum = TensorNode::Empty({units}, DataType::Float32());
        for (int64_t u = 0; u < units; ++u) {
          sum->data<float>()[u] = old_bias->data->data<float>()[u] + bias->data->data<float>()[u];
        }
        // Named after both, so that dumps say what was folded.
        const bool named = !old_bias->name.empty() && !bias->name.empty();
        bias_sum = Make<ir::ConstantNode>(std::move(sum),
                                          named ? old_bias->name + "_plus_" + bias->name : "");
        bias_sum->span = bias->span;
      }
      Expr result = Make<ir::CallNode>(
          packed.callee, std::vector<Expr>{packed.args[0], packed.args[1], bias_sum}, packed.attrs);
      result->span = add.span;
      return result;
    }
    return rewritten;
  }

  const PackDensePredicate& pack_;
  std::unordered_map<const ir::ConstantNode*, Expr>& packed_;
  // Of the function being rewritten (a global's; those nested in it count
  // within it).
  std::unordered_map<const ir::ExprNode*, int> uses_;
};

}  // namespace

ir::IRModule PackDenseWeights(const ir::IRModule& module, const PackDensePredicate& pack) {
  return RunWithDeepStack([&] {
    std::unordered_map<const ir::ConstantNode*, Expr> packed;
    const RepeatedCode repeated(module);
    ir::IRModule result = MapFunctions(module, [&](const ir::IRModuleNode::Definition& definition) {
      Expr function = DenseWeightPacker(pack, repeated.Global(definition.global->name), packed)
                          .VisitExpr(definition.function);
      return ir::RefOf(static_cast<const ir::FunctionNode*>(function.get()));
    });
    return Retyped(module, std::move(result));
  });
}

}  // namespace nimble::transform
