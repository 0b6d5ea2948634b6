#include "nimble/compiler/backend/kernel_devices.h"

#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/transform/pass_util.h"

namespace nimble::backend {
namespace {

class KernelDeviceFinder : public ir::ExprVisitor {
 public:
  void VisitLet(const ir::LetNode* node) override {
    VisitExpr(node->value);
    const ir::ExprNode& value = *node->value;
    const std::string_view op = transform::CalledOpName(value);
    if (op == "memory.alloc_storage") {
      const auto& call = static_cast<const ir::CallNode&>(value);
      device_of_[node->var.get()] = call.attrs.GetString("device");
    } else if (op == "memory.alloc_tensor" || op == "memory.reshape_tensor") {
      if (const std::string* device = DeviceOf(static_cast<const ir::CallNode&>(value).args[0])) {
        device_of_[node->var.get()] = *device;
      }
    }
    VisitExpr(node->body);
  }

  void VisitCall(const ir::CallNode* node) override {
    ir::ExprVisitor::VisitCall(node);
    if (transform::CalledOpName(*node) != "memory.invoke_mut" || node->args.size() != 3) return;
    const ir::Expr& callee = node->args[0];
    const ir::Expr& outputs = node->args[2];
    if (!transform::IsPrimitiveFunction(callee) || outputs->kind != ir::ExprKind::kTuple) return;
    const auto& fields = static_cast<const ir::TupleNode&>(*outputs).fields;
    if (fields.empty()) return;
    if (const std::string* device = DeviceOf(fields[0])) {
      devices[static_cast<const ir::FunctionNode*>(callee.get())] = *device;
    }
  }

  KernelDeviceMap devices;

 private:
  const std::string* DeviceOf(const ir::Expr& expr) const {
    if (expr->kind != ir::ExprKind::kVar) return nullptr;
    const auto found = device_of_.find(static_cast<const ir::VarNode*>(expr.get()));
    return found == device_of_.end() ? nullptr : &found->second;
  }

  std::unordered_map<const ir::VarNode*, std::string> device_of_;
};

}  // namespace

KernelDeviceMap KernelDevices(const ir::IRModule& module) {
  KernelDeviceFinder finder;
  for (const ir::IRModuleNode::Definition& definition : module->functions()) {
    finder.VisitExpr(definition.function);
  }
  return std::move(finder.devices);
}

}  // namespace nimble::backend
