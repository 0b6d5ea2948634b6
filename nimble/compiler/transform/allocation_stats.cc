#include "nimble/compiler/transform/allocation_stats.h"

#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/support/deep_stack.h"

namespace nimble::transform {

namespace {

class AllocationCounter : public ir::ExprVisitor {
 public:
  AllocationStats stats;

  void VisitCall(const ir::CallNode* node) override {
    if (node->callee->kind == ir::ExprKind::kOp &&
        static_cast<const ir::OpNode*>(node->callee.get())->name == "memory.alloc_storage") {
      ++stats.allocations;
      const ir::Expr& size = node->args[0];
      const bool constant = size->kind == ir::ExprKind::kConstant &&
                            static_cast<const ir::ConstantNode&>(*size).is_scalar();
      if (constant) {
        stats.static_bytes += static_cast<const ir::ConstantNode&>(*size).data->GetAsInt64(0);
      } else {
        ++stats.dynamic_allocations;
      }
    }
    ir::ExprVisitor::VisitCall(node);
  }
};

}  // namespace

AllocationStats CountAllocations(const ir::IRModule& module) {
  return RunWithDeepStack([&] {
    AllocationCounter counter;
    for (const ir::IRModuleNode::Definition& definition : module->functions()) {
      counter.VisitExpr(definition.function);
    }
    return counter.stats;
  });
}

}  // namespace nimble::transform
