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

namespace {

// What differs between a Loop and a Scan around the recursion they share.
struct LoopForm {
  Value trip_count;
  Value condition;
  std::vector<Value> initial;  // the loop-carried values
  // Scan's inputs: iteration i reads slice i (from the end when reversed)
  // along its axis.
  std::vector<Value> sequences;
  std::vector<int64_t> sequence_axes;
  std::vector<bool> sequence_reversed;
  // Per scan output: each iteration's slice goes first (Scan's reverse
  // direction) rather than last.
  std::vector<bool> prepend;
  // Loop's body takes (iteration, condition) before the values and gives a
  // condition before them.
  bool loop_body = false;
};

// The loop `form` of `body` as a tail-recursive global function,
//
//   def @onnx_loop(%i, %trip_count, %condition, %v..., %scan..., %sequence..., %captured...) {
//     if (%i < %trip_count && %condition) {
//       <body>
//       @onnx_loop(%i + 1, %trip_count, <condition>, <v>...,
//                  concatenate((%scan, expand_dims(<scan>, 0)))..., %sequence..., %captured...)
//     } else { (%v..., %scan...) }
//   }
//
// called with 0, the trip count, the condition, the initial values, empty
// scan outputs, the sequences and the captured values; returns the final
// values and the scan outputs (stacked on axis 0).
std::vector<Value> ImportLoop(const NodeContext& context, const onnx::GraphProto& body,
                              const LoopForm& form) {
  const size_t carried = form.initial.size();
  const size_t before = form.loop_body ? 2 : 0;  // the body's inputs before the values
  const size_t condition_outputs = form.loop_body ? 1 : 0;
  const size_t inputs = before + carried + form.sequences.size();
  if (static_cast<size_t>(body.input_size()) != inputs) {
    context.Fail("the body takes " + std::to_string(body.input_size()) + " inputs; with " +
                 std::to_string(carried) + " loop-carried values it takes " +
                 std::to_string(inputs) +
                 (form.loop_body ? " (iteration number, condition, the values)"
                                 : " (the values, then one slice of each scan input)"));
  }
  if (static_cast<size_t>(body.output_size()) < condition_outputs + carried) {
    context.Fail("the body returns " + std::to_string(body.output_size()) + " outputs; with " +
                 std::to_string(carried) + " loop-carried values it returns at least " +
                 std::to_string(condition_outputs + carried) +
                 (form.loop_body ? " (condition, the values, any scan outputs)"
                                 : " (the values, any scan outputs)"));
  }
  const size_t scans = static_cast<size_t>(body.output_size()) - condition_outputs - carried;
  const size_t count = static_cast<size_t>(context.node().output_size());
  if (count > carried + scans) {
    context.Fail("the node has " + std::to_string(count) + " outputs; its body gives " +
                 std::to_string(carried) + " loop-carried values and " + std::to_string(scans) +
                 " scan outputs");
  }
  std::vector<ir::TensorType> types;
  for (const Value& value : form.initial) types.push_back(context.TypeOfExpr(value.expr));
  const Captures captures = CaptureAsVariables(context, {&body}, false);
  const ir::Var iteration = Make<ir::VarNode>("iteration", ScalarType(DataType::Int64()));
  const ir::Var limit = Make<ir::VarNode>("trip_count", ScalarType(DataType::Int64()));
  const ir::Var keep_going = Make<ir::VarNode>("condition", ScalarType(DataType::Bool()));
  std::vector<ir::Var> sequences;
  for (size_t j = 0; j < form.sequences.size(); ++j) {
    sequences.push_back(Make<ir::VarNode>("sequence" + std::to_string(j),
                                          context.TypeOfExpr(form.sequences[j].expr)));
  }

  // The body imported with the loop-carried values as variables of `types`,
  // until its outputs have those types too: each round only makes
  // dimensions `?`, so it ends.
  std::vector<ir::Var> values;
  std::vector<Value> outputs;
  for (;;) {
    values.clear();
    std::map<std::string, Value> bindings = captures.bindings;
    const auto bind = [&](size_t input, const ir::Expr& expr) {
      const std::string& name = body.input(static_cast<int>(input)).name();
      if (!name.empty()) bindings[name] = Value{expr, std::nullopt, {}};
    };
    if (form.loop_body) {
      bind(0, iteration);
      bind(1, keep_going);
    }
    for (size_t k = 0; k < carried; ++k) {
      values.push_back(
          Make<ir::VarNode>(Identifier(body.input(static_cast<int>(before + k)).name()), types[k]));
      bind(before + k, values.back());
    }
    for (size_t j = 0; j < sequences.size(); ++j) {
      const int64_t axis = form.sequence_axes[j];
      ir::Expr index = iteration;
      if (form.sequence_reversed[j]) {
        const ir::Expr length = op::MakeOpCall(
            "take",
            {op::MakeOpCall("shape_of", {sequences[j]}, AttrsOf({{"dtype", DataType::Int64()}})),
             KnownInt64(axis).expr},
            AttrsOf({{"axis", int64_t{0}}}));
        index = op::MakeOpCall(
            "subtract", {op::MakeOpCall("subtract", {length, KnownInt64(1).expr}), iteration});
      }
      bind(before + carried + j,
           op::MakeOpCall("take", {sequences[j], index}, AttrsOf({{"axis", axis}})));
    }
    outputs = context.subgraphs().Import(body, bindings, "body");
    bool fixed = true;
    for (size_t k = 0; k < carried; ++k) {
      const ir::TensorType out = context.TypeOfExpr(outputs[condition_outputs + k].expr);
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
    const Value& element = outputs[condition_outputs + carried + k];
    const ir::TensorType type = context.TypeOfExpr(element.expr);
    // The scan output before any iteration: (0, the element's sizes), a `?`
    // size 0. An element of a `?` size (read from a tensor of the enclosing
    // graph) is stacked by the first iteration rather than concatenated to
    // that empty start, whose size there is not the element's.
    Shape empty{0};
    std::vector<ir::Dim> stacked{ir::Dim::Any()};
    for (const ir::Dim& dim : type->shape) {
      empty.push_back(dim.is_static() ? dim.value() : 0);
      stacked.push_back(dim.is_static() ? dim : ir::Dim::Any());
    }
    const ir::TensorType stacked_type = ir::MakeTensorType(stacked, type->dtype);
    const ir::Var scan = Make<ir::VarNode>("scan" + std::to_string(k), stacked_type);
    scan_params.push_back(scan);
    scan_initial.push_back(KnownValue(TensorNode::Empty(empty, type->dtype)).expr);
    const ir::Expr expanded =
        op::MakeOpCall("expand_dims", {element.expr}, AttrsOf({{"axis", int64_t{0}}}));
    const ir::Var row = Make<ir::VarNode>("row" + std::to_string(k), context.TypeOfExpr(expanded));
    const bool first = k < form.prepend.size() && form.prepend[k];
    ir::Expr grown = op::MakeOpCall("concatenate",
                                    {Make<ir::TupleNode>(first ? std::vector<ir::Expr>{row, scan}
                                                               : std::vector<ir::Expr>{scan, row})},
                                    AttrsOf({{"axis", int64_t{0}}}));
    if (!type->is_static()) {
      grown = Make<ir::IfNode>(op::MakeOpCall("equal", {iteration, KnownInt64(0).expr}),
                               ir::Expr(row), grown);
    }
    scan_next.push_back(Make<ir::LetNode>(row, expanded, grown));
    result_types.push_back(stacked_type);
  }

  const ir::GlobalVar loop = context.subgraphs().FreshGlobal("onnx_loop");
  const ir::Expr next_condition =
      form.loop_body
          ? Scalar(context, outputs[0], DataType::Bool(), "the body's condition output").expr
          : ir::Expr(keep_going);
  std::vector<ir::Expr> next{op::MakeOpCall("add", {iteration, KnownInt64(1).expr}), limit,
                             next_condition};
  for (size_t k = 0; k < carried; ++k) next.push_back(outputs[condition_outputs + k].expr);
  next.insert(next.end(), scan_next.begin(), scan_next.end());
  next.insert(next.end(), sequences.begin(), sequences.end());
  next.insert(next.end(), captures.vars.begin(), captures.vars.end());
  std::vector<ir::Expr> finished(values.begin(), values.end());
  finished.insert(finished.end(), scan_params.begin(), scan_params.end());
  const ir::Expr keep =
      op::MakeOpCall("logical_and", {op::MakeOpCall("less", {iteration, limit}), keep_going});
  std::vector<ir::Var> params{iteration, limit, keep_going};
  params.insert(params.end(), values.begin(), values.end());
  params.insert(params.end(), scan_params.begin(), scan_params.end());
  params.insert(params.end(), sequences.begin(), sequences.end());
  params.insert(params.end(), captures.vars.begin(), captures.vars.end());
  context.subgraphs().AddFunction(
      loop,
      Make<ir::FunctionNode>(
          params,
          Make<ir::IfNode>(keep, Make<ir::CallNode>(loop, next), Make<ir::TupleNode>(finished)),
          Make<ir::TupleTypeNode>(result_types), std::vector<ir::TypeVar>{}));

  std::vector<ir::Expr> args{KnownInt64(0).expr, form.trip_count.expr, form.condition.expr};
  for (const Value& value : form.initial) args.push_back(value.expr);
  args.insert(args.end(), scan_initial.begin(), scan_initial.end());
  for (const Value& sequence : form.sequences) args.push_back(sequence.expr);
  args.insert(args.end(), captures.values.begin(), captures.values.end());
  return Unpack(context, Make<ir::CallNode>(loop, args), count, true);
}

}  // namespace

// Loop(M, cond, v...) with body(iteration, condition, v...) -> (condition,
// v..., scan...): M's iterations at most (none: no limit) while the
// condition holds (none: true).
std::vector<Value> ConvertLoop(const NodeContext& context) {
  context.OnlyAttrs({"body"});
  const onnx::GraphProto& body = context.GraphAttr("body");
  if (context.num_inputs() < 2) {
    context.Fail("a Loop takes M and cond (either may be empty) before its loop-carried values");
  }
  LoopForm form;
  form.trip_count = context.Has(0)
                        ? Scalar(context, context.Input(0), DataType::Int64(), "the trip count M")
                        : KnownInt64(std::numeric_limits<int64_t>::max());
  form.condition =
      context.Has(1) ? Scalar(context, context.Input(1), DataType::Bool(), "cond") : KnownTrue();
  form.loop_body = true;
  for (size_t k = 2; k < context.num_inputs(); ++k) form.initial.push_back(context.Input(k));
  return ImportLoop(context, body, form);
}

// Scan(v..., x...) with body(v..., x slice...) -> (v..., scan...): one
// iteration per slice of the scan inputs along their axes (all the same
// length), each in its direction; scan outputs stacked along their axes, in
// their directions.
std::vector<Value> ConvertScan(const NodeContext& context) {
  context.OnlyAttrs({"body", "num_scan_inputs", "scan_input_axes", "scan_input_directions",
                     "scan_output_axes", "scan_output_directions"});
  const onnx::GraphProto& body = context.GraphAttr("body");
  const std::optional<int64_t> scan_inputs = context.IntAttr("num_scan_inputs");
  if (!scan_inputs || *scan_inputs < 1 ||
      *scan_inputs > static_cast<int64_t>(context.num_inputs())) {
    context.Fail("num_scan_inputs must be between 1 and the node's " +
                 std::to_string(context.num_inputs()) + " inputs");
  }
  const size_t sequences = static_cast<size_t>(*scan_inputs);
  const size_t carried = context.num_inputs() - sequences;
  const size_t scans =
      static_cast<size_t>(std::max<int64_t>(0, body.output_size() - static_cast<int64_t>(carried)));
  // An attribute of one entry per input or output, its ONNX default 0.
  const auto per = [&](const std::string& name, size_t size) {
    const std::vector<int64_t> values =
        context.IntsAttr(name).value_or(std::vector<int64_t>(size, 0));
    if (values.size() != size) {
      context.Fail(name + " has " + std::to_string(values.size()) + " entries for " +
                   std::to_string(size));
    }
    return values;
  };
  const std::vector<int64_t> input_axes = per("scan_input_axes", sequences);
  const std::vector<int64_t> input_directions = per("scan_input_directions", sequences);
  const std::vector<int64_t> output_axes = per("scan_output_axes", scans);
  const std::vector<int64_t> output_directions = per("scan_output_directions", scans);
  LoopForm form;
  form.condition = KnownTrue();
  for (size_t k = 0; k < carried; ++k) form.initial.push_back(context.Input(k));
  for (size_t j = 0; j < sequences; ++j) {
    const Value& sequence = context.Input(carried + j);
    const int64_t rank = static_cast<int64_t>(context.TypeOf(carried + j)->ndim());
    int64_t axis = input_axes[j];
    if (axis < -rank || axis >= rank) {
      context.Fail("scan input " + std::to_string(j) + " has no axis " + std::to_string(axis) +
                   " (rank " + std::to_string(rank) + ")");
    }
    if (axis < 0) axis += rank;
    form.sequences.push_back(sequence);
    form.sequence_axes.push_back(axis);
    form.sequence_reversed.push_back(input_directions[j] != 0);
  }
  for (int64_t direction : output_directions) form.prepend.push_back(direction != 0);
  // The first scan input's length; ONNX asks that they all have it.
  form.trip_count = context.Call(
      "take",
      {context.Call("shape_of", {form.sequences[0]}, AttrsOf({{"dtype", DataType::Int64()}})),
       KnownInt64(form.sequence_axes[0])},
      AttrsOf({{"axis", int64_t{0}}}));
  std::vector<Value> outputs = ImportLoop(context, body, form);
  // Scan outputs stacked along another axis than the first.
  for (size_t k = 0; k < scans && carried + k < outputs.size(); ++k) {
    const int64_t rank =
        static_cast<int64_t>(context.TypeOfExpr(outputs[carried + k].expr)->ndim());
    int64_t axis = output_axes[k];
    if (axis < -rank || axis >= rank) {
      context.Fail("scan output " + std::to_string(k) + " has no axis " + std::to_string(axis) +
                   " (rank " + std::to_string(rank) + ")");
    }
    if (axis < 0) axis += rank;
    if (axis == 0) continue;
    std::vector<int64_t> axes;
    for (int64_t d = 1; d <= axis; ++d) axes.push_back(d);
    axes.push_back(0);
    for (int64_t d = axis + 1; d < rank; ++d) axes.push_back(d);
    outputs[carried + k] =
        context.Call("transpose", {outputs[carried + k]}, AttrsOf({{"axes", axes}}));
  }
  return outputs;
}

}  // namespace nimble::onnx_import
