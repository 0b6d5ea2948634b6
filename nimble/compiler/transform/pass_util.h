// Helpers shared by the passes of nimble/compiler/transform: what marks a
// compiler-made function, and the module rebuild every pass ends with.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nimble/compiler/ir/module.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/typing/type_infer.h"

namespace nimble::transform {

// Function attributes (docs/memory-dialect.md §1).
inline constexpr const char* kPrimitiveAttr = "Primitive";
inline constexpr const char* kClosureAttr = "Closure";
// On a primitive of several ops: their names in order, joined by '+'.
inline constexpr const char* kFusedAttr = "Fused";

// Whether `function` carries `attr=1`.
inline bool HasFlag(const ir::FunctionNode* function, const std::string& attr) {
  const ir::AttrValue* value = function->attrs.Find(attr);
  const int64_t* flag = value ? std::get_if<int64_t>(value) : nullptr;
  return flag && *flag == 1;
}

// The operator `expr` calls, or null when it is not a call of an operator.
inline const ir::OpNode* CalledOp(const ir::ExprNode& expr) {
  if (expr.kind != ir::ExprKind::kCall) return nullptr;
  const ir::Expr& callee = static_cast<const ir::CallNode&>(expr).callee;
  return callee->kind == ir::ExprKind::kOp ? static_cast<const ir::OpNode*>(callee.get()) : nullptr;
}

// The name of the operator `expr` calls, or "" (operators are interned, so
// the view stays valid).
inline std::string_view CalledOpName(const ir::ExprNode& expr) {
  const ir::OpNode* op = CalledOp(expr);
  return op ? std::string_view(op->name) : std::string_view();
}

// Whether `expr` is a function literal marked `Primitive=1`.
inline bool IsPrimitiveFunction(const ir::Expr& expr) {
  return expr->kind == ir::ExprKind::kFunction &&
         HasFlag(static_cast<const ir::FunctionNode*>(expr.get()), kPrimitiveAttr);
}

// `strided_slice` of `data`'s range [begin, end) along `axis`.
inline ir::Expr SliceAlong(ir::Expr data, int64_t axis, int64_t begin, int64_t end) {
  ir::Attrs attrs;
  attrs.Set("begin", std::vector<int64_t>{begin});
  attrs.Set("end", std::vector<int64_t>{end});
  attrs.Set("axes", std::vector<int64_t>{axis});
  return op::MakeOpCall("strided_slice", {std::move(data)}, std::move(attrs));
}

// A new module with the ADTs of `module` and `rewrite(definition)` for each of
// its global functions, in order.
template <typename Rewrite>
ir::IRModule MapFunctions(const ir::IRModule& module, Rewrite&& rewrite) {
  ir::IRModule result = ir::MakeModule();
  for (const ir::TypeData& type_data : module->type_defs()) result->AddTypeDef(type_data);
  for (const ir::IRModuleNode::Definition& definition : module->functions()) {
    result->Add(definition.global, rewrite(definition));
  }
  return result;
}

// `rewritten`, the module a pass made of `original`, type-checked; `original`
// itself when the pass changed no function (the same ones, in the same
// order) and those were typed already (a pass may run another on a module it
// has just built), as its types stand: inference over the whole module after
// each pass is most of a long program's compile time.
inline ir::IRModule Retyped(const ir::IRModule& original, ir::IRModule rewritten) {
  const auto& before = original->functions();
  const auto& after = rewritten->functions();
  const bool unchanged =
      before.size() == after.size() &&
      std::equal(before.begin(), before.end(), after.begin(), [](const auto& a, const auto& b) {
        return a.global == b.global && a.function == b.function && a.function->checked_type;
      });
  if (unchanged) return original;
  typing::InferTypes(rewritten);
  return rewritten;
}

}  // namespace nimble::transform
