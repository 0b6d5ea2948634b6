#include "nimble/compiler/ir/bind_params.h"

#include <set>
#include <unordered_map>

#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/support/deep_stack.h"
#include "nimble/vm/error.h"

namespace nimble::ir {

namespace {

void CheckBindable(const Var& param, const Tensor& tensor) {
  if (!param->type_annotation) return;
  const auto* expected = param->type_annotation.as<TensorTypeNode>().get();
  bool matches = expected && expected->dtype == tensor->dtype() &&
                 static_cast<int64_t>(expected->ndim()) == tensor->ndim();
  for (size_t i = 0; matches && i < expected->ndim(); ++i) {
    matches = expected->shape[i].is_any() || expected->shape[i].value() == tensor->shape()[i];
  }
  if (!matches) {
    throw Error("cannot bind parameter '" + param->name_hint + "' of type " +
                TypeToString(param->type_annotation) + " to a tensor of type " +
                tensor->TypeString());
  }
}

class ParamSubstituter : public ExprMutator {
 public:
  explicit ParamSubstituter(std::unordered_map<const VarNode*, Constant> constants)
      : constants_(std::move(constants)) {}

  Expr VisitVar(const VarNode* node) override {
    auto it = constants_.find(node);
    return it == constants_.end() ? RefOf(node) : Expr(it->second);
  }

 private:
  std::unordered_map<const VarNode*, Constant> constants_;
};

}  // namespace

Function BindParamsByName(const Function& function, const std::map<std::string, Tensor>& params) {
  std::unordered_map<const VarNode*, Constant> constants;
  std::vector<Var> kept;
  std::set<std::string> seen;
  for (const Var& param : function->params) {
    const bool first = seen.insert(param->name_hint).second;
    auto bound = params.find(param->name_hint);
    if (bound == params.end()) {
      kept.push_back(param);
      continue;
    }
    if (!first) {
      throw Error("cannot bind parameter '" + param->name_hint +
                  "' by name: the function has several parameters of that name");
    }
    CheckBindable(param, bound->second);
    constants.emplace(param.get(), Make<ConstantNode>(bound->second, param->name_hint));
  }
  if (constants.empty()) return function;
  Expr body = RunWithDeepStack(
      [&] { return ParamSubstituter(std::move(constants)).VisitExpr(function->body); });
  auto bound_function = Make<FunctionNode>(std::move(kept), std::move(body), function->ret_type,
                                           function->type_params, function->attrs);
  bound_function->span = function->span;
  return bound_function;
}

}  // namespace nimble::ir
