#include "nimble/compiler/ir/expr.h"

namespace nimble::ir {

Var MakeVar(std::string name_hint, Type type_annotation) {
  return Make<VarNode>(std::move(name_hint), std::move(type_annotation));
}

Constant MakeScalar(DataType dtype, double value) {
  Tensor tensor = TensorNode::Empty({}, dtype);
  tensor->SetFromDouble(0, value);
  return Make<ConstantNode>(std::move(tensor), "");
}

Tuple MakeTupleExpr(std::vector<Expr> fields) {
  return Make<TupleNode>(std::move(fields));
}

}  // namespace nimble::ir
