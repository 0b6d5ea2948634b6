#include "nimble/compiler/op/vm_instructions.h"

#include <map>
#include <string>

#include "nimble/compiler/ir/type.h"
#include "nimble/vm/scalar_ops.h"

namespace nimble::op {
namespace {

using vm::ScalarOperator;

// The rank-0 or 1-D tensor type of `expr` with a scalar dtype, or null.
const ir::TensorTypeNode* ScalarTensorType(const ir::ExprNode& expr, size_t rank) {
  const ir::Type& type = expr.checked_type;
  if (!type || type->kind != ir::TypeKind::kTensor) return nullptr;
  const auto* tensor = static_cast<const ir::TensorTypeNode*>(type.get());
  return tensor->ndim() == rank && vm::IsScalarDType(tensor->dtype) ? tensor : nullptr;
}

std::optional<ScalarOperator> OperatorNamed(const std::string& name) {
  static const std::map<std::string, ScalarOperator> operators = [] {
    std::map<std::string, ScalarOperator> table;
    for (int op = 0; op < vm::kNumScalarOperators; ++op) {
      const auto scalar = static_cast<ScalarOperator>(op);
      table.emplace(vm::ScalarOperatorName(scalar), scalar);
    }
    return table;
  }();
  const auto found = operators.find(name);
  if (found == operators.end()) return std::nullopt;
  return found->second;
}

// take(data, index) of one element of a 1-D tensor.
std::optional<ScalarInstruction> TakeInstruction(const ir::CallNode& call) {
  const ir::Attrs& attrs = call.attrs;
  const bool first_axis = attrs.IsNone("axis") || attrs.GetInt("axis") == 0;
  const bool no_batch = attrs.IsNone("batch_dims") || attrs.GetInt("batch_dims") == 0;
  const std::string mode = attrs.IsNone("mode") ? "clip" : attrs.GetString("mode");
  const std::optional<ScalarOperator> op = OperatorNamed("take." + mode);
  const ir::TensorTypeNode* data = ScalarTensorType(*call.args[0], 1);
  const ir::TensorTypeNode* index = ScalarTensorType(*call.args[1], 0);
  if (!first_axis || !no_batch || !op || !data || !index || index->dtype.is_bool() ||
      !ScalarTensorType(call, 0)) {
    return std::nullopt;
  }
  return ScalarInstruction{*op, data->dtype};
}

}  // namespace

std::optional<ScalarInstruction> ScalarInstructionOf(const ir::CallNode& call) {
  if (call.callee->kind != ir::ExprKind::kOp || call.args.empty()) return std::nullopt;
  const std::string& name = static_cast<const ir::OpNode&>(*call.callee).name;
  if (name == "take") return TakeInstruction(call);
  const std::optional<ScalarOperator> op = OperatorNamed(name);
  const ir::TensorTypeNode* result = ScalarTensorType(call, 0);
  if (!op || !result || name.starts_with("take.")) return std::nullopt;
  if (*op == ScalarOperator::kCast) {
    if (!ScalarTensorType(*call.args[0], 0)) return std::nullopt;
    return ScalarInstruction{*op, result->dtype};
  }
  if (call.args.size() != (vm::IsBinaryScalarOperator(*op) ? 2u : 1u)) return std::nullopt;
  const ir::TensorTypeNode* first = ScalarTensorType(*call.args[0], 0);
  for (const ir::Expr& arg : call.args) {
    const ir::TensorTypeNode* operand = ScalarTensorType(*arg, 0);
    if (!operand || operand->dtype != first->dtype) return std::nullopt;
  }
  if (vm::ScalarResultDType(*op, first->dtype) != result->dtype) return std::nullopt;
  return ScalarInstruction{*op, first->dtype};
}

bool RunsAsVMInstruction(const ir::CallNode& call) {
  if (call.callee->kind != ir::ExprKind::kOp) return false;
  if (static_cast<const ir::OpNode&>(*call.callee).name == "shape_of") {
    const DataType dtype = call.attrs.GetDType("dtype");
    return dtype == DataType::Int32() || dtype == DataType::Int64();
  }
  return ScalarInstructionOf(call).has_value();
}

}  // namespace nimble::op
