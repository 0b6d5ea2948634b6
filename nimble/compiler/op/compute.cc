#include "nimble/compiler/op/compute.h"

#include <string>

#include "nimble/compiler/op/op.h"
#include "nimble/vm/error.h"

namespace nimble::op {
namespace {

void Flatten(const ir::Type& type, std::vector<ir::TensorType>& out) {
  if (type && type->kind == ir::TypeKind::kTensor) {
    out.push_back(ir::RefOf(static_cast<const ir::TensorTypeNode*>(type.get())));
    return;
  }
  if (type && type->kind == ir::TypeKind::kTuple) {
    for (const ir::Type& field : static_cast<const ir::TupleTypeNode*>(type.get())->fields) {
      Flatten(field, out);
    }
    return;
  }
  throw Error("a kernel argument of type " +
              (type ? ir::TypeToString(type) : std::string("unknown")) +
              ", not a tensor or a tuple of tensors");
}

}  // namespace

std::vector<ir::TensorType> FlattenTensorTypes(const ir::Type& type) {
  std::vector<ir::TensorType> out;
  Flatten(type, out);
  return out;
}

std::vector<te::Tensor> PlaceholdersFor(
    const std::string& name, const ir::Type& type,
    const std::function<te::Expr(size_t tensor, size_t dim, int64_t static_size)>& dim) {
  const std::vector<ir::TensorType> types = FlattenTensorTypes(type);
  const bool tuple = type->kind == ir::TypeKind::kTuple;
  std::vector<te::Tensor> placeholders;
  for (size_t i = 0; i < types.size(); ++i) {
    std::vector<te::Expr> shape;
    for (size_t d = 0; d < types[i]->shape.size(); ++d) {
      const ir::Dim& extent = types[i]->shape[d];
      shape.push_back(dim(i, d, extent.is_static() ? extent.value() : -1));
    }
    placeholders.push_back(te::Placeholder(tuple ? name + "." + std::to_string(i) : name,
                                           types[i]->dtype, std::move(shape)));
  }
  return placeholders;
}

std::vector<te::Tensor> ComputeCall(const ir::CallNode& call, std::span<const te::Tensor> inputs,
                                    te::ComputeContext& context) {
  if (call.callee->kind != ir::ExprKind::kOp) return {};
  const OpDef& def = *static_cast<const ir::OpNode*>(call.callee.get())->def;
  if (!def.compute) return {};
  std::vector<DataType> output_dtypes;
  for (const ir::TensorType& output : FlattenTensorTypes(call.checked_type)) {
    output_dtypes.push_back(output->dtype);
  }
  std::vector<te::Tensor> outputs = def.compute(context, inputs, call.attrs, output_dtypes);
  if (!outputs.empty() && outputs.size() != output_dtypes.size()) {
    throw Error(def.name + ": its compute definition gives " + std::to_string(outputs.size()) +
                " outputs for a call with " + std::to_string(output_dtypes.size()));
  }
  return outputs;
}

bool CanGenerate(const ir::CallNode& call) {
  if (call.callee->kind != ir::ExprKind::kOp || !call.checked_type) return false;
  if (!static_cast<const ir::OpNode*>(call.callee.get())->def->compute) return false;
  std::vector<te::Tensor> inputs;
  for (size_t i = 0; i < call.args.size(); ++i) {
    const ir::Type& type = call.args[i]->checked_type;
    if (!type) return false;
    for (te::Tensor& placeholder :
         PlaceholdersFor("p" + std::to_string(i), type, [&](size_t, size_t d, int64_t size) {
           return size >= 0
                      ? tir::IntImm(size)
                      : te::Expr(tir::MakeVar("p" + std::to_string(i) + ".d" + std::to_string(d)));
         })) {
      inputs.push_back(std::move(placeholder));
    }
  }
  te::ComputeContext context;
  return !ComputeCall(call, inputs, context).empty();
}

}  // namespace nimble::op
