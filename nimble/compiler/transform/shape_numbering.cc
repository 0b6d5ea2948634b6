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
enum KeyKind : int64_t {
  kDims,               // a shape by its dimensions' numbers
  kStaticDim,          // a dimension by its value
  kDimOfValue,         // a `?` dimension by the tensor and axis
  kShapeFunctionDim,   // a dimension a shape function computes, by the call's number and where
  kShapeOfValue,       // a shape by the tensor, where its type says nothing
  kShapeFunction,      // a shape function's output by the call's number and which
  kShapeFunctionCall,  // a shape function call by the primitive and its inputs' numbers
};

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

ShapeNumbering::ShapeNumbering(const ir::FunctionNode& function, OutputDimForms forms)
    : forms_(std::move(forms)) {
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
      const int number = ShapeOfType(call.args[0]->checked_type, nullptr);
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
  // An input that is no register (a constant argument of a data-dependent
  // op, as `arange(0f, %n, 1f)`) leaves the call unnumbered: numbered by its
  // other inputs alone, two aranges to different lengths would share a shape.
  const std::vector<const ir::VarNode*> input_vars = TupleVars(call.args[1]);
  if (call.args[1]->kind != ExprKind::kTuple ||
      input_vars.size() != static_cast<const ir::TupleNode&>(*call.args[1]).fields.size()) {
    return;
  }
  std::vector<int64_t> inputs;
  for (const ir::VarNode* input : input_vars) {
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
    const auto input_dims = dims_.find(static_cast<int>(inputs[0]));
    const ir::Type& output_type = primitive.body->checked_type;
    if (op->def->shape_rule == op::ShapeRule::kReplacesLastDim && input_dims != dims_.end() &&
        !input_dims->second.empty() && output_type && output_type->kind == ir::TypeKind::kTensor) {
      const std::vector<ir::Dim>& shape =
          static_cast<const ir::TensorTypeNode&>(*output_type).shape;
      if (shape.size() == input_dims->second.size() && shape.back().is_static()) {
        std::vector<int> dims = input_dims->second;
        dims.back() = Number({kStaticDim, shape.back().value()});
        registers_[outputs[0]] = ShapeOfDims(dims);
        return;
      }
    }
  }
  const std::vector<std::vector<DimForm>>* forms = FormsOf(id);
  if (forms && forms->size() == outputs.size()) {
    for (size_t j = 0; j < outputs.size(); ++j) {
      std::vector<int> dims;
      for (size_t axis = 0; axis < (*forms)[j].size(); ++axis) {
        int dim = -1;
        for (const DimSource& source : (*forms)[j][axis]) {
          const int number = DimNumber(source, inputs);
          dim = (dim == -1 || dim == number) && number >= 0 ? number : -2;
        }
        if (dim < 0) {
          dim = Number({kShapeFunctionDim, numbered.number, static_cast<int64_t>(j),
                        static_cast<int64_t>(axis)});
        }
        dims.push_back(dim);
      }
      registers_[outputs[j]] = ShapeOfDims(dims);
    }
    return;
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    registers_[outputs[i]] = Number({kShapeFunction, numbered.number, static_cast<int64_t>(i)});
  }
}

int ShapeNumbering::DimNumber(const DimSource& source, const std::vector<int64_t>& inputs) {
  if (source.constant) return Number({kStaticDim, source.value});
  if (source.input >= inputs.size()) return -1;
  const auto dims = dims_.find(static_cast<int>(inputs[source.input]));
  return dims != dims_.end() && source.axis < dims->second.size() ? dims->second[source.axis] : -1;
}

int ShapeNumbering::ShapeOfTensor(const ir::VarNode* tensor) {
  const auto known = tensor_shapes_.find(tensor);
  if (known != tensor_shapes_.end()) return known->second;
  const int number = ShapeOfType(tensor->checked_type, tensor);
  return number >= 0 ? number : Number({kShapeOfValue, reinterpret_cast<int64_t>(tensor)});
}

int ShapeNumbering::ShapeOfType(const ir::Type& type, const ir::VarNode* tensor) {
  if (!type || type->kind != ir::TypeKind::kTensor) return -1;
  std::vector<int> dims;
  const std::vector<ir::Dim>& shape = static_cast<const ir::TensorTypeNode&>(*type).shape;
  for (size_t axis = 0; axis < shape.size(); ++axis) {
    if (shape[axis].is_static()) {
      dims.push_back(Number({kStaticDim, shape[axis].value()}));
    } else if (tensor) {
      dims.push_back(
          Number({kDimOfValue, reinterpret_cast<int64_t>(tensor), static_cast<int64_t>(axis)}));
    } else {
      return -1;
    }
  }
  return ShapeOfDims(dims);
}

int ShapeNumbering::ShapeOfDims(const std::vector<int>& dims) {
  std::vector<int64_t> key = {kDims};
  key.insert(key.end(), dims.begin(), dims.end());
  const int number = Number(key);
  dims_.try_emplace(number, dims);
  return number;
}

const std::vector<std::vector<DimForm>>* ShapeNumbering::FormsOf(int64_t primitive_id) {
  if (!forms_) return nullptr;
  while (forms_by_primitive_.size() < primitives_.size()) {
    const ir::Expr& primitive = primitives_[forms_by_primitive_.size()];
    forms_by_primitive_.push_back(forms_(static_cast<const ir::FunctionNode&>(*primitive)));
  }
  const auto& forms = forms_by_primitive_[static_cast<size_t>(primitive_id)];
  return forms ? &*forms : nullptr;
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
