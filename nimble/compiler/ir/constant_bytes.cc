#include "nimble/compiler/ir/constant_bytes.h"

#include <set>

#include "nimble/compiler/ir/functor.h"

namespace nimble::ir {
namespace {

class ConstantCounter : public ExprVisitor {
 public:
  void VisitConstant(const ConstantNode* constant) override {
    if (!constant->name.empty() && seen_.insert(constant->data.get()).second) {
      bytes += constant->data->nbytes();
    }
  }
  size_t bytes = 0;

 private:
  std::set<const TensorNode*> seen_;
};

}  // namespace

size_t ConstantBytes(const IRModule& module) {
  ConstantCounter counter;
  for (const IRModuleNode::Definition& definition : module->functions()) {
    counter.VisitExpr(definition.function);
  }
  return counter.bytes;
}

}  // namespace nimble::ir
