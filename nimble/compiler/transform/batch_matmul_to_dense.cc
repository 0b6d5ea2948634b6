// BatchMatMulToDense: a bottom-up rewrite of nn.batch_matmul calls whose one
// side is a constant and whose other side is a batch of one.
#include "nimble/compiler/transform/batch_matmul_to_dense.h"

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

// The rank-3 float32 tensor type of `expr`, or null.
const ir::TensorTypeNode* Float32Rank3(const Expr& expr) {
  const ir::Type& type = expr->checked_type;
  if (!type || type->kind != ir::TypeKind::kTensor) return nullptr;
  const auto* tensor = static_cast<const ir::TensorTypeNode*>(type.get());
  return tensor->dtype == DataType::Float32() && tensor->ndim() == 3 ? tensor : nullptr;
}

Expr CallOp(const std::string& name, std::vector<Expr> args, const Attrs& attrs,
            const Expr& origin) {
  const op::OpDef& def = *op::OpRegistry::Global().Find(name);
  Expr call =
      Make<ir::CallNode>(op::GetOp(def.name), std::move(args), op::NormalizeAttrs(def, attrs));
  call->span = origin->span;
  return call;
}

class BatchMatMulRewriter : public RepeatedCodeMutator {
 public:
  BatchMatMulRewriter(const PackDensePredicate& pack, bool global_repeated)
      : RepeatedCodeMutator(global_repeated), pack_(pack) {}

  Expr VisitCall(const ir::CallNode* call) override {
    Expr rewritten = ExprMutator::VisitCall(call);
    if (CalledOpName(*call) != "nn.batch_matmul" || call->attrs.GetBool("transpose_a") ||
        !call->attrs.GetBool("transpose_b")) {
      return rewritten;
    }
    if (!call->attrs.IsNone("out_dtype") &&
        call->attrs.GetDType("out_dtype") != DataType::Float32()) {
      return rewritten;
    }
    const auto& args = static_cast<const ir::CallNode*>(rewritten.get())->args;
    const ir::TensorTypeNode* x_type = Float32Rank3(call->args[0]);
    const ir::TensorTypeNode* y_type = Float32Rank3(call->args[1]);
    if (!x_type || !y_type) return rewritten;
    // Which side is the weight: the data x [1, m, k] times it gives [b, m, n],
    // it times the data y gives [b, n, m].
    const bool weight_second = args[1]->kind == ir::ExprKind::kConstant &&
                               args[0]->kind != ir::ExprKind::kConstant && IsBatchOfOne(*x_type);
    const bool weight_first = args[0]->kind == ir::ExprKind::kConstant &&
                              args[1]->kind != ir::ExprKind::kConstant && IsBatchOfOne(*y_type);
    if (!weight_second && !weight_first) return rewritten;
    const Expr& weight = weight_second ? args[1] : args[0];
    const Expr& data = weight_second ? args[0] : args[1];
    const auto* constant = static_cast<const ir::ConstantNode*>(weight.get());
    const Shape& shape = constant->data->shape();
    const int64_t batch = shape[0];
    const int64_t units = shape[1];
    if ((batch * units) % kDensePackBlock != 0) return rewritten;
    const ir::TensorType stacked_type =
        ir::MakeTensorType({ir::Dim(batch * units), ir::Dim(shape[2])}, DataType::Float32());
    if (!pack_(weight_second ? *x_type : *y_type,
               static_cast<const ir::TensorTypeNode&>(*stacked_type), InRepeatedCode())) {
      return rewritten;
    }
    Expr product = CallOp("nn.dense", {data, Flattened(constant)}, Attrs(), rewritten);
    if (weight_second && batch == 1) return product;  // [1, m, n] already
    Attrs split;
    split.Set("newshape", std::vector<int64_t>{-1, batch, units});
    Attrs order;
    order.Set("axes",
              weight_second ? std::vector<int64_t>{1, 0, 2} : std::vector<int64_t>{1, 2, 0});
    return CallOp("transpose", {CallOp("reshape", {product}, split, rewritten)}, order, rewritten);
  }

 private:
  static bool IsBatchOfOne(const ir::TensorTypeNode& type) {
    return type.shape[0].is_static() && type.shape[0].value() == 1;
  }

  // weight [b, n, k] as the dense's [b * n, k]: a view of the same values,
  // made once per weight.
  Expr Flattened(const ir::ConstantNode* constant) {
    Expr& flat = flattened_[constant];
    if (!flat) {
      const Shape& shape = constant->data->shape();
      flat = Make<ir::ConstantNode>(constant->data->View({shape[0] * shape[1], shape[2]}),
                                    constant->name);
      flat->span = constant->span;
    }
    return flat;
  }

  const PackDensePredicate& pack_;
  std::unordered_map<const ir::ConstantNode*, Expr> flattened_;
};

}  // namespace

ir::IRModule BatchMatMulToDense(const ir::IRModule& module, const PackDensePredicate& pack) {
  return RunWithDeepStack([&] {
    const RepeatedCode repeated(module);
    ir::IRModule result = MapFunctions(module, [&](const ir::IRModuleNode::Definition& definition) {
      Expr function = BatchMatMulRewriter(pack, repeated.Global(definition.global->name))
                          .VisitExpr(definition.function);
      return ir::RefOf(static_cast<const ir::FunctionNode*>(function.get()));
    });
    return Retyped(module, std::move(result));
  });
}

}  // namespace nimble::transform
