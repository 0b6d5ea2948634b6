#include "nimble/compiler/onnx/onnx_control_flow.h"

#include <limits>
#include <map>
#include <string>

#include "nimble/compiler/op/op.h"

namespace nimble::onnx_import {
namespace {

ir::TensorType ScalarType(DataType dtype) {
  return ir::MakeTensorType({}, dtype);
}

Value KnownInt64(int64_t value) {
  return KnownValue(TensorNode::Scalar<int64_t>(DataType::Int64(), value));
}

Value KnownTrue() {
  return KnownValue(TensorNode::Scalar<bool>(DataType::Bool(), true));
}

// `value` as a scalar of `dtype`: ONNX gives conditions and trip counts as
// tensors of one element, of rank 0 or 1.
Value Scalar(const NodeContext& context, const Value& value, DataType dtype,
             const std::string& what) {
  const ir::TensorType type = context.TypeOfExpr(value.expr);
  if (type->dtype != dtype) {
    context.Fail(what + " must be " + dtype.name() + ", not " + ir::TypeToString(type));
  }
  if (type->ndim() == 0) return value;
  if (type->ndim() != 1 || !type->shape[0].is_static() || type->shape[0].value() != 1) {
    context.Fail(what + " must hold one element, not " + ir::TypeToString(type));
  }
  return context.Call("reshape", {value}, AttrsOf({{"newshape", std::vector<int64_t>{}}}));
}

// What a branch or body reads of the graphs around it: each value not known
// at import time becomes a variable of its type (`vars`, standing for
// `values`); known ones stay as they are, so that what depends on them
// still folds.
struct Captures {
  std::map<std::string, Value> bindings;
  std::vector<ir::Var> vars;
  std::vector<ir::Expr> values;
};

// With `keep_variables`, a value that is a variable already (a graph input)
// stays as it is too.
Captures CaptureAsVariables(const NodeContext& context,
                            const std::vector<const onnx::GraphProto*>& graphs,
                            bool keep_variables) {
  Captures captures;
  for (const onnx::GraphProto* graph : graphs) {
    for (const auto& [name, value] : context.subgraphs().Captured(*graph)) {
      if (captures.bindings.contains(name)) continue;
      if (value.known || (keep_variables && value.expr->kind == ir::ExprKind::kVar)) {
        captures.bindings.emplace(name, value);
        continue;
      }
      const ir::Var var = Make<ir::VarNode>(Identifier(name), context.TypeOfExpr(value.expr));
      captures.bindings.emplace(name, Value{var, std::nullopt, {}});
      captures.vars.push_back(var);
      captures.values.push_back(value.expr);
    }
  }
  return captures;
}

ir::Expr Pack(const std::vector<ir::Expr>& exprs) {
  return exprs.size() == 1 ? exprs.front() : Make<ir::TupleNode>(exprs);
}

std::vector<ir::Expr> ExprsOf(const std::vector<Value>& values) {
  std::vector<ir::Expr> exprs;
  for (const Value& value : values) exprs.push_back(value.expr);
  return exprs;
}

// The node's `count` outputs from `result` (a tuple when `tupled`), each
// typed now so that a type error names the node.
std::vector<Value> Unpack(const NodeContext& context, const ir::Expr& result, size_t count,
                          bool tupled) {
  if (!tupled) return {context.Expr(result)};
  std::vector<Value> outputs;
  for (size_t i = 0; i < count; ++i) {
    outputs.push_back(context.Expr(Make<ir::TupleGetItemNode>(result, static_cast<int>(i))));
  }
  return outputs;
}

// The type of a loop-carried value that is `in` going into the body and
// `out` coming out of it: a dimension that differs becomes `?`.
ir::TensorType Generalize(const NodeContext& context, const ir::TensorType& in,
                          const ir::TensorType& out, const std::string& what) {
  if (in->dtype != out->dtype || in->ndim() != out->ndim()) {
    context.Fail(what + " is " + ir::TypeToString(in) + " going into the body and " +
                 ir::TypeToString(out) + " coming out of it");
  }
  std::vector<ir::Dim> shape;
  for (size_t d = 0; d < in->shape.size(); ++d) {
    shape.push_back(in->shape[d] == out->shape[d] ? in->shape[d] : ir::Dim::Any());
  }
  return ir::MakeTensorType(shape, in->dtype);
}


}  // namespace

std::vector<Value> ConvertIf(const NodeContext& context) {
  context.OnlyAttrs({"then_branch", "else_branch"});
  const onnx::GraphProto& then_graph = context.GraphAttr("then_branch");
  const onnx::GraphProto& else_graph = context.GraphAttr("else_branch");
  const Value condition = Scalar(context, context.Input(0), DataType::Bool(), "the condition");
  const size_t count = static_cast<size_t>(context.node().output_size());
  const auto check_count = [&](const std::vector<Value>& outputs, const std::string& what) {
    if (outputs.size() != count) {
      context.Fail(what + " has " + std::to_string(outputs.size()) + " outputs; the node has " +
                   std::to_string(count));
    }
  };
  if (condition.known) {
    // The branch taken is known at import time: its nodes join the graph.
    const bool taken = LoadElementAsInt64((*condition.known)->raw_data(), DataType::Bool(), 0);
    const std::string what = taken ? "then_branch" : "else_branch";
    std::vector<Value> outputs =
        context.subgraphs().Import(taken ? then_graph : else_graph, {}, what);
    check_count(outputs, what);
    return outputs;
  }
  const Captures captures = CaptureAsVariables(context, {&then_graph, &else_graph}, true);
  const auto branch = [&](const onnx::GraphProto& graph, const std::string& what) {
    const std::vector<Value> outputs = context.subgraphs().Import(graph, captures.bindings, what);
    check_count(outputs, what);
    return Pack(ExprsOf(outputs));
  };
  ir::Expr result = Make<ir::IfNode>(condition.expr, branch(then_graph, "then_branch"),
                                     branch(else_graph, "else_branch"));
  // The captured values are computed before the branch, as ONNX computes
  // every node of the enclosing graph.
  for (size_t i = captures.vars.size(); i-- > 0;) {
    result = Make<ir::LetNode>(captures.vars[i], captures.values[i], result);
  }
  return Unpack(context, result, count, count != 1);
}

// Loop(M, cond, v...) with body(iteration, condition, v...) -> (condition,
// v..., scan...) becomes
//
//   def @onnx_loop(%i, %trip_count, %condition, %v..., %scan..., %captured...) {
//     if (%i < %trip_count && %condition) {
//       <body>
//       @onnx_loop(%i + 1, %trip_count, <condition>, <v>...,
//                  concatenate((%scan, expand_dims(<scan>, 0)))..., %captured...)
//     } else { (%v..., %scan...) }
//   }
//
// called with 0, M (or the largest int64), cond (or true), the initial
// values, empty scan outputs and the captured values.
std::vector<Value> ConvertLoop(const NodeContext& context) {
  context.OnlyAttrs({"body"});
  const onnx::GraphProto& body = context.GraphAttr("body");
  if (context.num_inputs() < 2) {
    context.Fail("a Loop takes M and cond (either may be empty) before its loop-carried values");
  }
  const size_t carried = context.num_inputs() - 2;
  if (static_cast<size_t>(body.input_size()) != carried + 2) {
    context.Fail("the body takes " + std::to_string(body.input_size()) + " inputs; with " +
                 std::to_string(carried) + " loop-carried values it takes " +
                 std::to_string(carried + 2) + " (iteration number, condition, the values)");
  }
  if (static_cast<size_t>(body.output_size()) < carried + 1) {
    context.Fail("the body returns " + std::to_string(body.output_size()) + " outputs; with " +
                 std::to_string(carried) + " loop-carried values it returns at least " +
                 std::to_string(carried + 1) + " (condition, the values, any scan outputs)");
  }
  const size_t scans = static_cast<size_t>(body.output_size()) - 1 - carried;
  const size_t count = static_cast<size_t>(context.node().output_size());
  if (count > carried + scans) {
    context.Fail("the node has " + std::to_string(count) + " outputs; its body gives " +
                 std::to_string(carried) + " loop-carried values and " + std::to_string(scans) +
                 " scan outputs");
  }
  const Value trip_count =
      context.Has(0) ? Scalar(context, context.Input(0), DataType::Int64(), "the trip count M")
                     : KnownInt64(std::numeric_limits<int64_t>::max());
  const Value condition = context.Has(1)
                              ? Scalar(context, context.Input(1), DataType::Bool(), "cond")
                              : KnownTrue();
  std::vector<ir::Expr> initial;
  std::vector<ir::TensorType> types;
  for (size_t k = 0; k < carried; ++k) {
    initial.push_back(context.Input(2 + k).expr);
    types.push_back(context.TypeOf(2 + k));
  }
  const Captures captures = CaptureAsVariables(context, {&body}, false);
  const ir::Var iteration = Make<ir::VarNode>("iteration", ScalarType(DataType::Int64()));
  const ir::Var limit = Make<ir::VarNode>("trip_count", ScalarType(DataType::Int64()));
  const ir::Var keep_going = Make<ir::VarNode>("condition", ScalarType(DataType::Bool()));

  // The body imported with the loop-carried values as variables of `types`,
  // until its outputs have those types too: each round only makes
  // dimensions `?`, so it ends.
  std::vector<ir::Var> values;
  std::vector<Value> outputs;
  for (;;) {
    values.clear();
    std::map<std::string, Value> bindings = captures.bindings;
    const auto bind = [&](int input, const ir::Var& var) {
      if (!body.input(input).name().empty()) {
        bindings[body.input(input).name()] = Value{var, std::nullopt, {}};
      }
    };
    bind(0, iteration);
    bind(1, keep_going);
    for (size_t k = 0; k < carried; ++k) {
      values.push_back(Make<ir::VarNode>(Identifier(body.input(2 + k).name()), types[k]));
      bind(static_cast<int>(2 + k), values.back());
    }
    outputs = context.subgraphs().Import(body, bindings, "body");
    bool fixed = true;
    for (size_t k = 0; k < carried; ++k) {
      const ir::TensorType out = context.TypeOfExpr(outputs[1 + k].expr);
      const ir::TensorType general =
          Generalize(context, types[k], out, "loop-carried value " + std::to_string(k));
      if (ir::TypeToString(general) != ir::TypeToString(types[k])) {
        types[k] = general;
        fixed = false;
      }
    }
    if (fixed) break;
  }

  std::vector<ir::Var> scan_params;
  std::vector<ir::Expr> scan_initial, scan_next;
  std::vector<ir::Type> result_types(types.begin(), types.end());
  for (size_t k = 0; k < scans; ++k) {
    const Value& element = outputs[1 + carried + k];
    const ir::TensorType type = context.TypeOfExpr(element.expr);
    if (!type->is_static()) {
      context.Fail("scan output " + std::to_string(k) + " is " + ir::TypeToString(type) +
                   " each iteration: only a static shape is stacked");
    }
    Shape empty{0};
    std::vector<ir::Dim> stacked{ir::Dim::Any()};
    for (const ir::Dim& dim : type->shape) {
      empty.push_back(dim.value());
      stacked.push_back(dim);
    }
    const ir::TensorType stacked_type = ir::MakeTensorType(stacked, type->dtype);
    scan_params.push_back(Make<ir::VarNode>("scan" + std::to_string(k), stacked_type));
    scan_initial.push_back(KnownValue(TensorNode::Empty(empty, type->dtype)).expr);
    const ir::Expr row =
        op::MakeOpCall("expand_dims", {element.expr}, AttrsOf({{"axis", int64_t{0}}}));
    scan_next.push_back(op::MakeOpCall(
        "concatenate", {Make<ir::TupleNode>(std::vector<ir::Expr>{scan_params.back(), row})},
        AttrsOf({{"axis", int64_t{0}}})));
    result_types.push_back(stacked_type);
  }

  const ir::GlobalVar loop = context.subgraphs().FreshGlobal("onnx_loop");
  std::vector<ir::Expr> next{
      op::MakeOpCall("add", {iteration, KnownInt64(1).expr}), limit,
      Scalar(context, outputs[0], DataType::Bool(), "the body's condition output").expr};
  for (size_t k = 0; k < carried; ++k) next.push_back(outputs[1 + k].expr);
  next.insert(next.end(), scan_next.begin(), scan_next.end());
  next.insert(next.end(), captures.vars.begin(), captures.vars.end());
  std::vector<ir::Expr> finished(values.begin(), values.end());
  finished.insert(finished.end(), scan_params.begin(), scan_params.end());
  const ir::Expr keep = op::MakeOpCall(
      "logical_and", {op::MakeOpCall("less", {iteration, limit}), keep_going});
  std::vector<ir::Var> params{iteration, limit, keep_going};
  params.insert(params.end(), values.begin(), values.end());
  params.insert(params.end(), scan_params.begin(), scan_params.end());
  params.insert(params.end(), captures.vars.begin(), captures.vars.end());
  context.subgraphs().AddFunction(
      loop, Make<ir::FunctionNode>(
                params,
                Make<ir::IfNode>(keep, Make<ir::CallNode>(loop, next),
                                 Make<ir::TupleNode>(finished)),
                Make<ir::TupleTypeNode>(result_types), std::vector<ir::TypeVar>{}));

  std::vector<ir::Expr> args{KnownInt64(0).expr, trip_count.expr,
                             condition.expr};
  args.insert(args.end(), initial.begin(), initial.end());
  args.insert(args.end(), scan_initial.begin(), scan_initial.end());
  args.insert(args.end(), captures.values.begin(), captures.values.end());
  return Unpack(context, Make<ir::CallNode>(loop, args), count, true);
}

}  // namespace nimble::onnx_import
