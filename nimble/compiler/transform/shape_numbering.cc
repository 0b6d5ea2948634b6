#include "nimble/compiler/transform/shape_numbering.h"

#include <algorithm>
#include <string>

#include "nimble/compiler/ir/structural_equal.h"
#include "nimble/compiler/ir/type.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/transform/let_chain.h"
#include "nimble/compiler/transform/pass_util.h"

namespace nimble::transform {

namespace {

using ir::ExprKind;

// Kinds of key, the first element of each.
enum KeyKind : int64_t { kStatic, kShapeOfValue, kShapeFunction, kShapeFunctionCall };

const ir::VarNode* AsVar(const ir::Expr& expr) {
  return expr->kind == ExprKind::kVar ? static_cast<const ir::VarNode*>(expr.get()) : nullptr;
}

// The fields of a tuple expression as variables (empty when one is not).
std::vector<const ir::VarNode*> TupleVars(const ir::Expr& expr) {
  std::vector<const ir::VarNode*> vars;
  if (expr->kind != ExprKind::kTuple) return vars;
  for (const ir::Expr& field : static_cast<const ir::TupleNode&>(*expr).fields) {
    const ir::VarNode* var = AsVar(field);
    if (!var) return {};
    vars.push_back(var);
  }
  return vars;
}

}  // namespace

ShapeNumbering::ShapeNumbering(const ir::FunctionNode& function) {
  Scope(function.body);
}

int ShapeNumbering::OfRegister(const ir::VarNode* var) const {
  const auto found = registers_.find(var);
  return found == registers_.end() ? -1 : found->second;
}

ShapeCall ShapeNumbering::OfCall(const ir::CallNode* call) const {
  const auto found = calls_.find(call);
  return found == calls_.end() ? ShapeCall{} : found->second;
}

void ShapeNumbering::Scope(const ir::Expr& expr) {
  const LetChain chain = FlattenLets(expr);
  for (const Binding& binding : chain.bindings) Bind(binding.var.get(), binding.value);
  if (chain.result->kind == ExprKind::kIf || chain.result->kind == ExprKind::kMatch) {
    Bind(nullptr, chain.result);
  }
}

void ShapeNumbering::Bind(const ir::VarNode* var, const ir::Expr& value) {
  auto copy = [](auto& map, const ir::VarNode* to, const ir::VarNode* from) {
    const auto found = map.find(from);
    if (found != map.end()) map[to] = found->second;
  };
  switch (value->kind) {
    case ExprKind::kVar:
      copy(registers_, var, AsVar(value));
      copy(tensor_shapes_, var, AsVar(value));
      copy(tuples_, var, AsVar(value));
      return;
    case ExprKind::kTuple:
      tuples_[var] = TupleVars(value);
      return;
    case ExprKind::kTupleGetItem: {
      const auto& item = static_cast<const ir::TupleGetItemNode&>(*value);
      const ir::VarNode* tuple = AsVar(item.tuple);
      const auto fields = tuple ? tuples_.find(tuple) : tuples_.end();
      if (fields != tuples_.end() && static_cast<size_t>(item.index) < fields->second.size()) {
        const ir::VarNode* field = fields->second[item.index];
        copy(tensor_shapes_, var, field);
        copy(tuples_, var, field);
      }
      return;
    }
    case ExprKind::kIf: {
      const auto& node = static_cast<const ir::IfNode&>(*value);
      Scope(node.then_branch);
      Scope(node.else_branch);
      return;
    }
    case ExprKind::kMatch:
      for (const ir::Clause& clause : static_cast<const ir::MatchNode&>(*value).clauses) {
        Scope(clause.rhs);
      }
      return;
    default:
      break;
  }
  const ir::OpNode* op = CalledOp(*value);
  if (!op) return;
  const auto& call = static_cast<const ir::CallNode&>(*value);
  if (op->name == "shape_of") {
    // An int32 shape_of is data, not a shape register.
    if (call.attrs.GetDType("dtype") != DataType::Int64()) return;
    if (const ir::VarNode* tensor = AsVar(call.args[0])) {
      registers_[var] = ShapeOfTensor(tensor);
    } else if (call.args[0]->kind == ExprKind::kConstant) {
      const int number = StaticShape(call.args[0]->checked_type);
      if (number >= 0) registers_[var] = number;
    }
  } else if (op->name == "memory.alloc_tensor" || op->name == "memory.reshape_tensor") {
    const size_t shape_arg = op->name == "memory.alloc_tensor" ? 2 : 1;
    if (call.args.size() > shape_arg) {
      const ir::VarNode* shape = AsVar(call.args[shape_arg]);
      const int number = shape ? OfRegister(shape) : -1;
      if (number >= 0) tensor_shapes_[var] = number;
    }
  } else if (op->name == "memory.shape_func") {
    NumberShapeFunction(call);
  }
}

void ShapeNumbering::NumberShapeFunction(const ir::CallNode& call) {
  const auto& primitive = static_cast<const ir::FunctionNode&>(*call.args[0]);
  const ir::OpNode* op = CalledOp(*primitive.body);
  // A shape function is a pure function of its inputs' values (shapes, or
  // the data of a data-dependent op): equal inputs, equal outputs.
  std::vector<int64_t> inputs;
  for (const ir::VarNode* input : TupleVars(call.args[1])) {
    const int number = OfRegister(input);
    if (number < 0) return;
    inputs.push_back(number);
  }
  const std::vector<const ir::VarNode*> outputs = TupleVars(call.args[2]);
  const int64_t id = PrimitiveId(call.args[0]);
  std::vector<int64_t> call_key = {kShapeFunctionCall, id};
  call_key.insert(call_key.end(), inputs.begin(), inputs.end());
  ShapeCall& numbered = calls_[&call];
  numbered.number = Number(call_key);
  // A single op applied to the primitive's parameters in order: its shape
  // rule may name the output's shape directly.
  if (op && outputs.size() == 1 && !inputs.empty()) {
    const bool all_equal = std::all_of(inputs.begin(), inputs.end(),
                                       [&](int64_t number) { return number == inputs[0]; });
    const bool broadcast_of_equals = op->def->shape_rule == op::ShapeRule::kBroadcast && all_equal;
    if (op->def->shape_rule == op::ShapeRule::kSameAsFirstInput || broadcast_of_equals) {
      registers_[outputs[0]] = static_cast<int>(inputs[0]);
      numbered.copies_input = inputs.size() == 1 || broadcast_of_equals;
      return;
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::vector<int64_t> key = {kShapeFunction, id, static_cast<int64_t>(i)};
    key.insert(key.end(), inputs.begin(), inputs.end());
    registers_[outputs[i]] = Number(key);
  }
}

int ShapeNumbering::ShapeOfTensor(const ir::VarNode* tensor) {
  const auto known = tensor_shapes_.find(tensor);
  if (known != tensor_shapes_.end()) return known->second;
  const int number = StaticShape(tensor->checked_type);
  return number >= 0 ? number : Number({kShapeOfValue, reinterpret_cast<int64_t>(tensor)});
}

int ShapeNumbering::StaticShape(const ir::Type& type) {
  if (!type || type->kind != ir::TypeKind::kTensor) return -1;
  const auto& tensor_type = static_cast<const ir::TensorTypeNode&>(*type);
  if (!tensor_type.is_static()) return -1;
  std::vector<int64_t> key = {kStatic};
  for (const ir::Dim& dim : tensor_type.shape) key.push_back(dim.value());
  return Number(key);
}

int ShapeNumbering::Number(const std::vector<int64_t>& key) {
  return numbers_.try_emplace(key, static_cast<int>(numbers_.size())).first->second;
}

int ShapeNumbering::PrimitiveId(const ir::Expr& primitive) {
  for (size_t i = 0; i < primitives_.size(); ++i) {
    if (ir::StructuralEqual(primitives_[i], primitive)) return static_cast<int>(i);
  }
  primitives_.push_back(primitive);
  return static_cast<int>(primitives_.size()) - 1;
}

}  // namespace nimble::transform
