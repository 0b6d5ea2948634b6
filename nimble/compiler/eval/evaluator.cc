#include "nimble/compiler/eval/evaluator.h"

#include <unordered_map>

#include "nimble/compiler/ir/free_vars.h"
#include "nimble/compiler/op/invoke.h"
#include "nimble/compiler/op/tree_schedule.h"
#include "nimble/compiler/support/deep_stack.h"
#include "nimble/vm/adt.h"
#include "nimble/vm/error.h"
#include "nimble/vm/tensor.h"

namespace nimble::eval {

namespace {

using ir::ExprKind;

// One function activation. Variables are unique nodes, each bound at most once
// per activation, so flat maps need no scoping, and an expression evaluates to
// the same value wherever it occurs in the activation.
struct Frame {
  // Parameters, captured variables, and the let and pattern variables bound
  // so far.
  std::unordered_map<const ir::VarNode*, Ref<Object>> vars;
  // Values of the compound expressions evaluated so far, so that a
  // subexpression shared in the DAG (a graph binding `%0 = e;` used twice) is
  // evaluated once, not once per path to it.
  std::unordered_map<const ir::ExprNode*, Ref<Object>> values;
};

[[noreturn]] void Fail(const ir::Span& span, const std::string& message) {
  throw Error(span.valid() ? span.ToString() + ": " + message : message);
}

// Whether `value` has type `type`. Tensor and tuple types are checked exactly
// (an Any dimension accepts any size); type variables accept anything, ADT
// types any ADT value and function types any closure.
bool ValueFits(const ir::Type& type, const Ref<Object>& value) {
  if (!type) return true;
  switch (type->kind) {
    case ir::TypeKind::kTensor: {
      const auto* tensor_type = static_cast<const ir::TensorTypeNode*>(type.get());
      Tensor tensor = value.as<TensorNode>();
      if (!tensor || tensor->dtype() != tensor_type->dtype ||
          static_cast<size_t>(tensor->ndim()) != tensor_type->ndim()) {
        return false;
      }
      for (size_t i = 0; i < tensor_type->ndim(); ++i) {
        const ir::Dim dim = tensor_type->shape[i];
        if (dim.is_static() && dim.value() != tensor->shape()[i]) return false;
      }
      return true;
    }
    case ir::TypeKind::kTuple: {
      const auto* tuple_type = static_cast<const ir::TupleTypeNode*>(type.get());
      ADT tuple = value.as<ADTNode>();
      if (!tuple || tuple->tag() != 0 || tuple->size() != tuple_type->fields.size()) return false;
      for (size_t i = 0; i < tuple->size(); ++i) {
        if (!ValueFits(tuple_type->fields[i], tuple->field(i))) return false;
      }
      return true;
    }
    case ir::TypeKind::kFunc:
      return value.is<ClosureNode>();
    case ir::TypeKind::kGlobalTypeVar:
    case ir::TypeKind::kTypeCall:
      return value.is<ADTNode>();
    case ir::TypeKind::kStorage:
      return value.is<StorageNode>();
    case ir::TypeKind::kTypeVar:
    case ir::TypeKind::kIncomplete:
      return true;
  }
  return true;
}

// A value's type for error messages; nested ADTs are cut short, since a long
// list would otherwise print in full.
std::string DescribeValue(const Ref<Object>& value, int depth = 0) {
  if (Tensor tensor = value.as<TensorNode>()) return tensor->TypeString();
  if (value.is<ClosureNode>()) return "a function";
  ADT adt = value.as<ADTNode>();
  if (!adt) return "an unknown value";
  if (adt->tag() != 0) return "an ADT value of tag " + std::to_string(adt->tag());
  if (depth >= 2) return "(...)";
  std::string text = "(";
  for (size_t i = 0; i < adt->size(); ++i) {
    if (i) text += ", ";
    text += DescribeValue(adt->field(i), depth + 1);
  }
  return text + (adt->size() == 1 ? ",)" : ")");
}

std::string Plural(size_t count, const std::string& noun) {
  return std::to_string(count) + " " + noun + (count == 1 ? "" : "s");
}

// Binds the variables of `pattern` into `bindings` when `value` matches it.
bool MatchPattern(const ir::Pattern& pattern, const Ref<Object>& value,
                  std::vector<std::pair<const ir::VarNode*, Ref<Object>>>* bindings) {
  switch (pattern->kind) {
    case ir::PatternKind::kWildcard:
      return true;
    case ir::PatternKind::kVar:
      bindings->emplace_back(static_cast<const ir::PatternVarNode*>(pattern.get())->var.get(),
                             value);
      return true;
    case ir::PatternKind::kConstructor: {
      const auto* node = static_cast<const ir::PatternConstructorNode*>(pattern.get());
      ADT adt = value.as<ADTNode>();
      if (!adt || adt->tag() != node->constructor->tag || adt->size() != node->patterns.size()) {
        return false;
      }
      for (size_t i = 0; i < adt->size(); ++i) {
        if (!MatchPattern(node->patterns[i], adt->field(i), bindings)) return false;
      }
      return true;
    }
    case ir::PatternKind::kTuple: {
      const auto* node = static_cast<const ir::PatternTupleNode*>(pattern.get());
      ADT tuple = value.as<ADTNode>();
      if (!tuple || tuple->size() != node->patterns.size()) return false;
      for (size_t i = 0; i < tuple->size(); ++i) {
        if (!MatchPattern(node->patterns[i], tuple->field(i), bindings)) return false;
      }
      return true;
    }
  }
  return false;
}

// Non-tail calls nested deeper than this fail with an error: about 2 KiB of
// stack each, so a program's unbounded recursion stops at a few hundred MiB
// (the VM allows more, VMOptions::max_call_depth, in frames of its own).
constexpr size_t kMaxNestedCalls = 100000;

class Evaluator {
 public:
  Evaluator(ir::IRModule module, int64_t max_tensor_bytes)
      : module_(std::move(module)), max_tensor_bytes_(max_tensor_bytes) {}

  // The closure of global `name` (cached: globals capture nothing).
  Closure GlobalClosure(const std::string& name, const ir::Span& span) {
    auto [it, inserted] = globals_.try_emplace(name);
    if (inserted) {
      ir::Function function = module_->Lookup(name);
      if (!function) {
        globals_.erase(it);
        Fail(span, "undefined global @" + name);
      }
      it->second =
          Make<ClosureNode>("@" + name, std::move(function), ClosureNode::Captured{}, nullptr);
    }
    return it->second;
  }

  // Calls `closure`. Calls in tail position replace the running activation
  // instead of nesting in it, so a loop written as tail recursion runs in
  // constant stack and frees each iteration's values as it goes.
  Ref<Object> Call(Closure closure, std::vector<Ref<Object>> args, ir::Span span) {
    if (nested_calls_ >= kMaxNestedCalls || DeepStackNearlyFull()) {
      Fail(span, "calls to " + closure->name + " nest deeper than the evaluator takes (" +
                     std::to_string(kMaxNestedCalls) +
                     " calls, or its stack's worth): unbounded recursion?");
    }
    ++nested_calls_;
    struct Unnest {
      size_t& calls;
      ~Unnest() { --calls; }
    } unnest{nested_calls_};
    while (true) {
      Frame frame = BindArguments(closure, std::move(args), span);
      TailCall tail;
      Ref<Object> result = EvalBlock(closure->function->body, frame, &tail);
      if (result) return result;
      closure = std::move(tail.callee);
      args = std::move(tail.args);
      span = tail.span;
    }
  }

 private:
  struct TailCall {
    Closure callee;
    std::vector<Ref<Object>> args;
    ir::Span span;
  };

  Frame BindArguments(const Closure& closure, std::vector<Ref<Object>> args, const ir::Span& span) {
    const std::vector<ir::Var>& params = closure->function->params;
    if (args.size() != params.size()) {
      Fail(span, closure->name + " expects " + Plural(params.size(), "argument") + ", got " +
                     std::to_string(args.size()));
    }
    Frame frame;
    for (const auto& [var, value] : closure->captured) frame.vars[var.get()] = value;
    if (closure->self) frame.vars[closure->self.get()] = closure;
    for (size_t i = 0; i < params.size(); ++i) {
      const ir::Type& annotation = params[i]->type_annotation;
      if (!ValueFits(annotation, args[i])) {
        Fail(span, closure->name + ": parameter %" + params[i]->name_hint + " expects " +
                       ir::TypeToString(annotation) + ", got " + DescribeValue(args[i]));
      }
      frame.vars[params[i].get()] = std::move(args[i]);
    }
    return frame;
  }

  // Evaluates `expr` in `frame`, following lets, ifs and matches in a loop so
  // that long let-chains do not nest. With `tail` set, a closing call of a
  // function is not made but stored there, and the result is null.
  Ref<Object> EvalBlock(ir::Expr expr, Frame& frame, TailCall* tail) {
    while (true) {
      switch (expr->kind) {
        case ExprKind::kLet: {
          const auto* let = static_cast<const ir::LetNode*>(expr.get());
          Ref<Object> value =
              let->value->kind == ExprKind::kFunction
                  ? MakeClosure(static_cast<const ir::FunctionNode*>(let->value.get()), frame,
                                let->var)
                  : Eval(let->value, frame);
          frame.vars[let->var.get()] = std::move(value);
          expr = let->body;
          break;
        }
        case ExprKind::kIf: {
          const auto* node = static_cast<const ir::IfNode*>(expr.get());
          expr =
              IsTrue(Eval(node->cond, frame), node->span) ? node->then_branch : node->else_branch;
          break;
        }
        case ExprKind::kMatch:
          expr = SelectClause(static_cast<const ir::MatchNode*>(expr.get()), frame);
          break;
        case ExprKind::kCall:
          return EvalCall(static_cast<const ir::CallNode*>(expr.get()), frame, tail);
        default:
          return Eval(expr, frame);
      }
    }
  }

  Ref<Object> Eval(const ir::Expr& expr, Frame& frame) {
    switch (expr->kind) {
      case ExprKind::kVar: {
        auto it = frame.vars.find(static_cast<const ir::VarNode*>(expr.get()));
        if (it == frame.vars.end()) {
          Fail(expr->span,
               "unbound variable %" + static_cast<const ir::VarNode*>(expr.get())->name_hint);
        }
        return it->second;
      }
      case ExprKind::kGlobalVar:
        return GlobalClosure(static_cast<const ir::GlobalVarNode*>(expr.get())->name, expr->span);
      case ExprKind::kConstant:
        return static_cast<const ir::ConstantNode*>(expr.get())->data;
      case ExprKind::kOp:
        Fail(expr->span, "operator " + static_cast<const ir::OpNode*>(expr.get())->name +
                             " can only be called, not used as a value");
      case ExprKind::kFunction:
        return MakeClosure(static_cast<const ir::FunctionNode*>(expr.get()), frame, nullptr);
      case ExprKind::kConstructor:
        return ConstructorClosure(static_cast<const ir::ConstructorNode*>(expr.get()));
      default:
        break;
    }
    if (auto known = frame.values.find(expr.get()); known != frame.values.end()) {
      return known->second;
    }
    Ref<Object> value = EvalCompound(expr, frame);
    frame.values.emplace(expr.get(), value);
    return value;
  }

  Ref<Object> EvalCompound(const ir::Expr& expr, Frame& frame) {
    switch (expr->kind) {
      case ExprKind::kTuple:
        return MakeTuple(EvalAll(static_cast<const ir::TupleNode*>(expr.get())->fields, frame));
      case ExprKind::kTupleGetItem:
        return Project(static_cast<const ir::TupleGetItemNode*>(expr.get()), frame);
      case ExprKind::kCall:
        return EvalCall(static_cast<const ir::CallNode*>(expr.get()), frame, nullptr);
      default:
        return EvalBlock(expr, frame, nullptr);
    }
  }

  std::vector<Ref<Object>> EvalAll(const std::vector<ir::Expr>& exprs, Frame& frame) {
    std::vector<Ref<Object>> values;
    values.reserve(exprs.size());
    for (const ir::Expr& expr : exprs) values.push_back(Eval(expr, frame));
    return values;
  }

  Ref<Object> EvalCall(const ir::CallNode* call, Frame& frame, TailCall* tail) {
    const ir::Expr& callee = call->callee;
    if (callee->kind == ExprKind::kOp) {
      return InvokeOp(static_cast<const ir::OpNode*>(callee.get()), call,
                      EvalAll(call->args, frame));
    }
    if (callee->kind == ExprKind::kConstructor) {
      return Construct(static_cast<const ir::ConstructorNode*>(callee.get()),
                       EvalAll(call->args, frame), call->span);
    }
    Ref<Object> callee_value = Eval(callee, frame);
    Closure closure = callee_value.as<ClosureNode>();
    if (!closure) Fail(call->span, "cannot call " + DescribeValue(callee_value));
    std::vector<Ref<Object>> args = EvalAll(call->args, frame);
    if (tail) {
      *tail = {std::move(closure), std::move(args), call->span};
      return nullptr;
    }
    return Call(std::move(closure), std::move(args), call->span);
  }

  Ref<Object> InvokeOp(const ir::OpNode* op, const ir::CallNode* call,
                       const std::vector<Ref<Object>>& args) const {
    try {
      // The one operator on an ADT value: no kernel, the VM's instruction.
      if (op->name == "adt.tree_schedule") {
        return vm::ScheduleTree(args.at(0), op::TreeScheduleLayoutOf(call->attrs));
      }
      return op::InvokeOp(*op->def, args, call->attrs, max_tensor_bytes_);
    } catch (const op::OutputTooLarge&) {
      throw;
    } catch (const Error& error) {
      Fail(call->span, error.what());  // InvokeOp's messages already name the op
    }
  }

  static Ref<Object> Construct(const ir::ConstructorNode* constructor,
                               std::vector<Ref<Object>> fields, const ir::Span& span) {
    if (fields.size() != constructor->inputs.size()) {
      Fail(span, "constructor " + constructor->name + " expects " +
                     Plural(constructor->inputs.size(), "argument") + ", got " +
                     std::to_string(fields.size()));
    }
    return Make<ADTNode>(constructor->tag, std::move(fields));
  }

  Ref<Object> Project(const ir::TupleGetItemNode* node, Frame& frame) {
    Ref<Object> value = Eval(node->tuple, frame);
    ADT tuple = value.as<ADTNode>();
    if (!tuple) {
      Fail(node->span,
           "cannot take field " + std::to_string(node->index) + " of " + DescribeValue(value));
    }
    if (node->index < 0 || static_cast<size_t>(node->index) >= tuple->size()) {
      Fail(node->span, "tuple index " + std::to_string(node->index) + " is out of range for " +
                           DescribeValue(value));
    }
    return tuple->field(node->index);
  }

  static bool IsTrue(const Ref<Object>& condition, const ir::Span& span) {
    Tensor tensor = condition.as<TensorNode>();
    if (!tensor || !tensor->dtype().is_bool() || tensor->ndim() != 0) {
      Fail(span, "if: the condition must be a bool scalar tensor, got " + DescribeValue(condition));
    }
    return tensor->GetAsInt64(0) != 0;
  }

  // Binds the variables of the first clause whose pattern matches and returns
  // its body.
  ir::Expr SelectClause(const ir::MatchNode* match, Frame& frame) {
    Ref<Object> value = Eval(match->data, frame);
    std::vector<std::pair<const ir::VarNode*, Ref<Object>>> bindings;
    for (const ir::Clause& clause : match->clauses) {
      bindings.clear();
      if (MatchPattern(clause.lhs, value, &bindings)) {
        for (auto& [var, bound] : bindings) frame.vars[var] = std::move(bound);
        return clause.rhs;
      }
    }
    Fail(match->span, "match: no clause matches " + DescribeMatchedValue(match, value));
  }

  // "value of constructor Nil" when the clauses tell which ADT is matched.
  std::string DescribeMatchedValue(const ir::MatchNode* match, const Ref<Object>& value) const {
    ADT adt = value.as<ADTNode>();
    for (const ir::Clause& clause : match->clauses) {
      if (!adt || clause.lhs->kind != ir::PatternKind::kConstructor) continue;
      // All the clauses' constructors belong to the matched ADT; the first names it.
      const auto* pattern = static_cast<const ir::PatternConstructorNode*>(clause.lhs.get());
      if (ir::TypeData type = module_->LookupTypeDef(pattern->constructor->belong_to->name)) {
        for (const ir::Constructor& constructor : type->constructors) {
          if (constructor->tag == adt->tag()) return "value of constructor " + constructor->name;
        }
      }
      break;
    }
    return "value " + DescribeValue(value);
  }

  Closure MakeClosure(const ir::FunctionNode* function, const Frame& frame,
                      const ir::Var& let_var) {
    auto [it, inserted] = free_vars_.try_emplace(function);
    if (inserted) it->second = ir::FreeVars(ir::RefOf(function));
    ClosureNode::Captured captured;
    ir::Var self;
    for (const ir::Var& var : it->second) {
      if (var == let_var) {
        self = var;
        continue;
      }
      auto value = frame.vars.find(var.get());
      if (value == frame.vars.end()) {
        Fail(function->span, "unbound variable %" + var->name_hint + " in a closure");
      }
      captured.emplace_back(var, value->second);
    }
    return Make<ClosureNode>(let_var ? "%" + let_var->name_hint : "function", ir::RefOf(function),
                             std::move(captured), std::move(self));
  }

  // A constructor used as a value: the function fn(%0, ..., %n) { C(%0, ..., %n) }.
  Closure ConstructorClosure(const ir::ConstructorNode* constructor) {
    auto [it, inserted] = constructors_.try_emplace(constructor);
    if (inserted) {
      std::vector<ir::Var> params;
      std::vector<ir::Expr> args;
      for (size_t i = 0; i < constructor->inputs.size(); ++i) {
        params.push_back(ir::MakeVar(std::to_string(i)));
        args.push_back(params.back());
      }
      ir::Expr body = Make<ir::CallNode>(ir::RefOf(constructor), std::move(args));
      it->second = Make<ClosureNode>(constructor->name,
                                     Make<ir::FunctionNode>(std::move(params), std::move(body),
                                                            nullptr, std::vector<ir::TypeVar>{}),
                                     ClosureNode::Captured{}, nullptr);
    }
    return it->second;
  }

  const ir::IRModule module_;
  const int64_t max_tensor_bytes_;
  size_t nested_calls_ = 0;
  std::unordered_map<std::string, Closure> globals_;
  std::unordered_map<const ir::FunctionNode*, std::vector<ir::Var>> free_vars_;
  std::unordered_map<const ir::ConstructorNode*, Closure> constructors_;
};

}  // namespace

Ref<Object> Evaluate(const ir::IRModule& module, const std::string& function,
                     const std::vector<Ref<Object>>& args, int64_t max_tensor_bytes) {
  return RunWithDeepStack([&]() -> Ref<Object> {
    Evaluator evaluator(module, max_tensor_bytes);
    return evaluator.Call(evaluator.GlobalClosure(function, ir::Span{}), args, ir::Span{});
  });
}

}  // namespace nimble::eval
