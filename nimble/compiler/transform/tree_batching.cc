// BatchTreeRecursion: recognises a recursive function over a tree ADT, then
// rewrites each of its clauses with a leading batch axis on every value that
// differs between the nodes (a vectorising map, like JAX's vmap) and wraps
// them in a loop over the groups of adt.tree_schedule.
#include "nimble/compiler/transform/tree_batching.h"

#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "nimble/compiler/op/op.h"
#include "nimble/compiler/op/tree_schedule.h"
#include "nimble/compiler/transform/pass_util.h"
#include "nimble/vm/error.h"

namespace nimble::transform {

namespace {

using ir::Expr;

// Why a function does not qualify; caught per function, which is then left
// as it was.
struct NotBatchable {
  std::string why;
};

[[noreturn]] void Refuse(std::string why) {
  throw NotBatchable{std::move(why)};
}

Expr Op(const std::string& name, std::vector<Expr> args, ir::Attrs attrs = {}) {
  return op::MakeOpCall(name, std::move(args), std::move(attrs));
}

Expr Int32(int64_t value) {
  return ir::MakeScalar(DataType::Int32(), static_cast<double>(value));
}

Expr Field(Expr tuple, int index) {
  return Make<ir::TupleGetItemNode>(std::move(tuple), index);
}

Expr TakeAlong(Expr data, Expr indices, int64_t axis) {
  ir::Attrs attrs;
  attrs.Set("axis", axis);
  return Op("take", {std::move(data), std::move(indices)}, std::move(attrs));
}

// take(shape_of(tensor), axis): one dimension of a tensor as an int32 scalar.
Expr DimOf(Expr tensor, int64_t axis) {
  ir::Attrs attrs;
  attrs.Set("dtype", DataType::Int32());
  return TakeAlong(Op("shape_of", {std::move(tensor)}, std::move(attrs)), Int32(axis), 0);
}

const ir::TensorTypeNode* TensorTypeOf(const ir::Type& type) {
  if (!type || type->kind != ir::TypeKind::kTensor) return nullptr;
  return static_cast<const ir::TensorTypeNode*>(type.get());
}

// The rank of the tensor `expr` computes for one node.
int64_t RankOf(const Expr& expr) {
  const ir::TensorTypeNode* tensor = TensorTypeOf(expr->checked_type);
  if (!tensor)
    Refuse("a value of type " + ir::TypeToString(expr->checked_type) + " is not a tensor");
  return static_cast<int64_t>(tensor->ndim());
}

// `axis` of a tensor of rank `rank` (negative counts from the end) as
// non-negative; `extra` widens the range for axes that insert one.
int64_t NormalizedAxis(int64_t axis, int64_t rank, int64_t extra = 0) {
  const int64_t size = rank + extra;
  if (axis < -size || axis >= size) Refuse("axis " + std::to_string(axis) + " out of range");
  return axis < 0 ? axis + size : axis;
}

// What the tree looks like: its ADT and the role of each constructor field.
struct TreeType {
  ir::TypeData data;
  // Per constructor (by tag), per field: its index among the constructor's
  // tree fields (the column of adt.tree_schedule's children), or -1 for a
  // tensor (payload) field.
  std::vector<std::vector<int>> child_column;
  // Per constructor and payload field: its index among the schedule's
  // payload tables.
  std::vector<std::vector<int>> payload_table;
  std::vector<ir::TensorType> payload_types;
  std::vector<int64_t> payload_tags, payload_fields;
  int64_t max_children = 0;
};

bool IsType(const ir::Type& type, const ir::TypeData& data) {
  if (!type) return false;
  if (type->kind == ir::TypeKind::kGlobalTypeVar) {
    return static_cast<const ir::GlobalTypeVarNode&>(*type).name == data->header->name;
  }
  if (type->kind == ir::TypeKind::kTypeCall) {
    const auto& call = static_cast<const ir::TypeCallNode&>(*type);
    return call.args.empty() && call.func->name == data->header->name;
  }
  return false;
}

bool IsStaticTensor(const ir::Type& type) {
  const ir::TensorTypeNode* tensor = TensorTypeOf(type);
  return tensor && tensor->is_static();
}

std::optional<TreeType> TreeTypeOf(const ir::Type& type, const ir::IRModule& module) {
  std::string name;
  if (type && type->kind == ir::TypeKind::kGlobalTypeVar) {
    name = static_cast<const ir::GlobalTypeVarNode&>(*type).name;
  } else if (type && type->kind == ir::TypeKind::kTypeCall) {
    name = static_cast<const ir::TypeCallNode&>(*type).func->name;
  } else {
    return std::nullopt;
  }
  TreeType tree;
  tree.data = module->LookupTypeDef(name);
  if (!tree.data || !tree.data->type_vars.empty()) return std::nullopt;
  for (const ir::Constructor& constructor : tree.data->constructors) {
    std::vector<int>& columns = tree.child_column.emplace_back();
    std::vector<int>& tables = tree.payload_table.emplace_back();
    int children = 0;
    for (size_t field = 0; field < constructor->inputs.size(); ++field) {
      const ir::Type& input = constructor->inputs[field];
      if (IsType(input, tree.data)) {
        columns.push_back(children++);
        tables.push_back(-1);
      } else if (IsStaticTensor(input)) {
        columns.push_back(-1);
        tables.push_back(static_cast<int>(tree.payload_types.size()));
        tree.payload_types.push_back(ir::RefOf(TensorTypeOf(input)));
        tree.payload_tags.push_back(constructor->tag);
        tree.payload_fields.push_back(static_cast<int64_t>(field));
      } else {
        return std::nullopt;
      }
    }
    tree.max_children = std::max<int64_t>(tree.max_children, children);
  }
  return tree;
}

// The adt.tree_schedule call of `tree` for this tree type.
Expr ScheduleCall(Expr tree, const TreeType& type) {
  vm::TreeScheduleLayout layout{.max_children = type.max_children, .payloads = {}};
  for (size_t p = 0; p < type.payload_types.size(); ++p) {
    const ir::TensorType& payload = type.payload_types[p];
    Shape shape;
    for (const ir::Dim& dim : payload->shape) shape.push_back(dim.value());
    layout.payloads.push_back({.tag = static_cast<int32_t>(type.payload_tags[p]),
                               .field = static_cast<int32_t>(type.payload_fields[p]),
                               .dtype = payload->dtype,
                               .shape = shape});
  }
  return op::MakeTreeScheduleCall(std::move(tree), layout);
}

// A tensor type with a leading `?` axis before `type`'s dims: a table of rows.
ir::TensorType RowsOf(const ir::TensorTypeNode& type) {
  std::vector<ir::Dim> shape{ir::Dim::Any()};
  shape.insert(shape.end(), type.shape.begin(), type.shape.end());
  return ir::MakeTensorType(std::move(shape), type.dtype);
}

ir::Type ScheduleType(const TreeType& tree) {
  std::vector<ir::Type> fields{
      ir::MakeTensorType({ir::Dim::Any(), 4}, DataType::Int32()),
      ir::MakeTensorType({ir::Dim::Any(), tree.max_children}, DataType::Int32())};
  for (const ir::TensorType& payload : tree.payload_types) fields.push_back(RowsOf(*payload));
  return ir::MakeTupleType(std::move(fields));
}

// A qualifying function, as far as its signature and match tell.
struct Candidate {
  ir::GlobalVar global;
  ir::Function function;
  const ir::MatchNode* match = nullptr;
  TreeType tree;
  // The per-node result: one tensor, or a tuple of them.
  bool tuple_result = false;
  std::vector<ir::TensorType> results;
};

std::optional<Candidate> CandidateOf(const ir::IRModuleNode::Definition& definition,
                                     const ir::IRModule& module) {
  const ir::Function& function = definition.function;
  if (HasFlag(function.get(), kPrimitiveAttr) || function->params.empty() ||
      !function->type_params.empty() || function->body->kind != ir::ExprKind::kMatch) {
    return std::nullopt;
  }
  const auto* match = static_cast<const ir::MatchNode*>(function->body.get());
  const ir::Var& tree_param = function->params[0];
  if (!match->complete || match->data != tree_param) return std::nullopt;
  std::optional<TreeType> tree = TreeTypeOf(tree_param->checked_type, module);
  if (!tree) return std::nullopt;
  Candidate candidate;
  candidate.global = definition.global;
  candidate.function = function;
  candidate.match = match;
  candidate.tree = std::move(*tree);
  const ir::Type& result = function->body->checked_type;
  if (IsStaticTensor(result)) {
    candidate.results.push_back(ir::RefOf(TensorTypeOf(result)));
  } else if (result && result->kind == ir::TypeKind::kTuple) {
    candidate.tuple_result = true;
    for (const ir::Type& field : static_cast<const ir::TupleTypeNode&>(*result).fields) {
      if (!IsStaticTensor(field)) return std::nullopt;
      candidate.results.push_back(ir::RefOf(TensorTypeOf(field)));
    }
    if (candidate.results.empty()) return std::nullopt;
  } else {
    return std::nullopt;
  }
  return candidate;
}

// A value of a batched clause: a tensor, with or without the batch axis
// (values the nodes share, such as weights and the function's other
// parameters, have none), a tuple of such values, or a tree field (only
// ever passed to a recursive call).
struct Value {
  enum class Kind { kTensor, kTuple, kTree } kind = Kind::kTensor;
  Expr expr;
  bool batched = false;
  std::vector<Value> fields;
  int child = -1;  // kTree: its column of the schedule's children
};

Value TensorValue(Expr expr, bool batched) {
  Value value;
  value.expr = std::move(expr);
  value.batched = batched;
  return value;
}

Value TupleValue() {
  Value value;
  value.kind = Value::Kind::kTuple;
  return value;
}

bool AnyBatched(const Value& value) {
  if (value.kind == Value::Kind::kTree) return true;
  if (value.kind == Value::Kind::kTensor) return value.batched;
  for (const Value& field : value.fields) {
    if (AnyBatched(field)) return true;
  }
  return false;
}

// What a clause's batched code reads from the loop over the groups.
struct GroupInputs {
  Expr schedule, ids, count, offset;
  std::vector<Expr> tables;
  // The original function's parameters (but the tree) as the loop's.
  std::unordered_map<const ir::VarNode*, Expr> params;
};

// Rewrites one clause's right-hand side over all the nodes of a group.
class ClauseBatcher {
 public:
  ClauseBatcher(const Candidate& candidate, const GroupInputs& inputs)
      : candidate_(candidate), inputs_(inputs) {}

  // The clause's batched code: lets ending in the tuple of the group's rows
  // of each result table.
  Expr Run(const ir::Clause& clause) {
    if (clause.lhs->kind != ir::PatternKind::kConstructor) Refuse("a clause is not a constructor");
    const auto& pattern = static_cast<const ir::PatternConstructorNode&>(*clause.lhs);
    const int32_t tag = pattern.constructor->tag;
    for (size_t field = 0; field < pattern.patterns.size(); ++field) {
      const ir::Pattern& sub = pattern.patterns[field];
      const int column = candidate_.tree.child_column[tag][field];
      if (sub->kind == ir::PatternKind::kWildcard) {
        // A subtree the clause never reads would still be computed.
        if (column >= 0) Refuse("a clause ignores a subtree");
        continue;
      }
      if (sub->kind != ir::PatternKind::kVar) Refuse("a nested pattern");
      const ir::Var& var = static_cast<const ir::PatternVarNode&>(*sub).var;
      if (column >= 0) {
        Value subtree;
        subtree.kind = Value::Kind::kTree;
        subtree.child = column;
        env_[var.get()] = subtree;
        unused_children_.emplace(var.get(), true);
      } else {
        env_[var.get()] = TensorValue(Payload(candidate_.tree.payload_table[tag][field]), true);
      }
    }
    const Value result = Visit(clause.rhs);
    for (const auto& [var, unused] : unused_children_) {
      if (unused) Refuse("subtree %" + var->name_hint + " is not passed to a recursive call");
    }
    std::vector<Expr> rows;
    const auto add_row = [&](const Value& value) {
      if (value.kind != Value::Kind::kTensor) Refuse("a result that is not a tensor");
      rows.push_back(value.batched ? value.expr : Broadcast(value.expr));
    };
    if (candidate_.tuple_result) {
      if (result.kind != Value::Kind::kTuple) Refuse("a result tuple of unknown fields");
      for (const Value& field : result.fields) add_row(field);
    } else {
      add_row(result);
    }
    Expr body = ir::MakeTupleExpr(std::move(rows));
    for (auto it = lets_.rbegin(); it != lets_.rend(); ++it) {
      body = Make<ir::LetNode>(it->first, it->second, std::move(body));
    }
    return body;
  }

 private:
  Expr Emit(Expr value) {
    ir::Var var = ir::MakeVar("b" + std::to_string(lets_.size()));
    lets_.emplace_back(var, std::move(value));
    return var;
  }

  // Rows [offset, offset + count) of payload table `table`.
  Expr Payload(int table) {
    if (!payload_rows_) {
      payload_rows_ = Emit(
          Op("arange", {inputs_.offset, Op("add", {inputs_.offset, inputs_.count}), Int32(1)}, [] {
            ir::Attrs attrs;
            attrs.Set("dtype", DataType::Int32());
            return attrs;
          }()));
    }
    return Emit(TakeAlong(Field(inputs_.schedule, 2 + table), payload_rows_, 0));
  }

  // The results of the children in column `column`, gathered from the tables.
  Value ChildResults(int column) {
    const auto found = children_.find(column);
    if (found != children_.end()) return found->second;
    if (!child_rows_) child_rows_ = Emit(TakeAlong(Field(inputs_.schedule, 1), inputs_.ids, 0));
    const Expr ids = Emit(TakeAlong(child_rows_, Int32(column), 1));
    Value value = TupleValue();
    for (const Expr& table : inputs_.tables) {
      value.fields.push_back(TensorValue(Emit(TakeAlong(table, ids, 0)), true));
    }
    if (!candidate_.tuple_result) value = value.fields[0];
    return children_.emplace(column, value).first->second;
  }

  // A value the nodes share, repeated once per node of the group.
  Expr Broadcast(const Expr& shared) {
    if (!zero_rows_) zero_rows_ = Emit(Op("multiply", {inputs_.ids, Int32(0)}));
    ir::Attrs attrs;
    attrs.Set("axis", int64_t{0});
    return Emit(TakeAlong(Op("expand_dims", {shared}, std::move(attrs)), zero_rows_, 0));
  }

  Expr Rebuild(const Value& value) {
    if (value.kind == Value::Kind::kTree) Refuse("a subtree used other than in a recursive call");
    if (value.kind == Value::Kind::kTensor) return value.expr;
    std::vector<Expr> fields;
    for (const Value& field : value.fields) fields.push_back(Rebuild(field));
    return ir::MakeTupleExpr(std::move(fields));
  }

  // `value` of the type of `original`: tuples come back field by field.
  Value Result(Expr value, const Expr& original, bool batched) {
    const ir::Type& type = original->checked_type;
    if (type && type->kind == ir::TypeKind::kTuple) {
      const Expr bound = Emit(std::move(value));
      Value tuple = TupleValue();
      const size_t size = static_cast<const ir::TupleTypeNode&>(*type).fields.size();
      for (size_t i = 0; i < size; ++i) {
        tuple.fields.push_back(TensorValue(Field(bound, static_cast<int>(i)), batched));
      }
      return tuple;
    }
    return TensorValue(Emit(std::move(value)), batched);
  }

  Value Visit(const Expr& expr) {
    switch (expr->kind) {
      case ir::ExprKind::kVar: {
        const auto* var = static_cast<const ir::VarNode*>(expr.get());
        const auto bound = env_.find(var);
        if (bound != env_.end()) {
          if (bound->second.kind == Value::Kind::kTree) {
            Refuse("subtree %" + var->name_hint + " used other than in a recursive call");
          }
          return bound->second;
        }
        const auto param = inputs_.params.find(var);
        if (param == inputs_.params.end()) Refuse("the clause reads the tree itself");
        return TensorValue(param->second, false);
      }
      case ir::ExprKind::kConstant:
        return TensorValue(expr, false);
      case ir::ExprKind::kLet: {
        const auto* let = static_cast<const ir::LetNode*>(expr.get());
        env_[let->var.get()] = Visit(let->value);
        return Visit(let->body);
      }
      case ir::ExprKind::kTuple: {
        Value tuple = TupleValue();
        for (const Expr& field : static_cast<const ir::TupleNode&>(*expr).fields) {
          tuple.fields.push_back(Visit(field));
        }
        return tuple;
      }
      case ir::ExprKind::kTupleGetItem: {
        const auto& item = static_cast<const ir::TupleGetItemNode&>(*expr);
        const Value tuple = Visit(item.tuple);
        if (tuple.kind == Value::Kind::kTuple) return tuple.fields.at(item.index);
        return TensorValue(Field(tuple.expr, item.index), false);
      }
      case ir::ExprKind::kCall:
        return VisitCall(static_cast<const ir::CallNode&>(*expr), expr);
      default:
        Refuse("control flow or a function value in a clause");
    }
  }

  Value VisitCall(const ir::CallNode& call, const Expr& original) {
    if (call.callee == candidate_.global) return RecursiveCall(call);
    if (call.callee->kind != ir::ExprKind::kOp) Refuse("a call of a function in a clause");
    const std::string& name = static_cast<const ir::OpNode&>(*call.callee).name;
    std::vector<Value> args;
    for (const Expr& arg : call.args) args.push_back(Visit(arg));
    bool batched = false;
    for (const Value& arg : args) batched = batched || AnyBatched(arg);
    std::vector<Expr> exprs;
    for (const Value& arg : args) exprs.push_back(Rebuild(arg));
    if (!batched) {
      return Result(Make<ir::CallNode>(call.callee, std::move(exprs), call.attrs), original, false);
    }
    return Result(BatchedCall(name, call, args, std::move(exprs)), original, true);
  }

  Value RecursiveCall(const ir::CallNode& call) {
    const std::vector<ir::Var>& params = candidate_.function->params;
    if (call.args.size() != params.size() || call.args[0]->kind != ir::ExprKind::kVar) {
      Refuse("a recursive call not on a subtree");
    }
    for (size_t i = 1; i < params.size(); ++i) {
      if (call.args[i] != params[i]) {
        Refuse("a recursive call whose argument " + std::to_string(i) +
               " is not the function's own parameter (it may depend on another call)");
      }
    }
    const auto* var = static_cast<const ir::VarNode*>(call.args[0].get());
    const auto bound = env_.find(var);
    if (bound == env_.end() || bound->second.kind != Value::Kind::kTree) {
      Refuse("a recursive call not on a subtree");
    }
    unused_children_[var] = false;
    return ChildResults(bound->second.child);
  }

  // The call of `name` on values of which some have the batch axis.
  Expr BatchedCall(const std::string& name, const ir::CallNode& call,
                   const std::vector<Value>& args, std::vector<Expr> exprs) {
    ir::Attrs attrs = call.attrs;
    const auto shift = [&](const std::string& attr, int64_t rank, int64_t extra = 0) {
      attrs.Set(attr, NormalizedAxis(call.attrs.GetInt(attr), rank, extra) + 1);
    };
    const auto only_first_batched = [&] {
      if (args[0].kind != Value::Kind::kTensor || !args[0].batched)
        Refuse(name + " of shared data");
      for (size_t i = 1; i < args.size(); ++i) {
        if (AnyBatched(args[i])) Refuse(name + " with a batched " + std::to_string(i) + "th input");
      }
    };
    const auto rank = [&] { return RankOf(call.args[0]); };
    if (name == "split" || name == "expand_dims" || name == "nn.softmax" ||
        name == "nn.log_softmax" || name == "nn.bias_add") {
      only_first_batched();
      shift("axis", rank(), name == "expand_dims" ? 1 : 0);
    } else if (name == "squeeze" || name == "sum" || name == "mean" || name == "max" ||
               name == "min" || name == "prod") {
      only_first_batched();
      if (call.attrs.IsNone("axis")) Refuse(name + " over every axis");
      if (call.attrs.Has("exclude") && call.attrs.GetBool("exclude")) Refuse(name + " exclude");
      const ir::AttrValue* axis = call.attrs.Find("axis");
      if (const int64_t* single = std::get_if<int64_t>(axis)) {
        attrs.Set("axis", NormalizedAxis(*single, rank()) + 1);
      } else {
        std::vector<int64_t> axes = std::get<std::vector<int64_t>>(*axis);
        for (int64_t& each : axes) each = NormalizedAxis(each, rank()) + 1;
        attrs.Set("axis", axes);
      }
    } else if (name == "nn.dense") {
      only_first_batched();
      return RowsDense(call, std::move(exprs));
    } else if (name == "concatenate") {
      const Value& tuple = args[0];
      if (tuple.kind != Value::Kind::kTuple) Refuse("concatenate of a tuple value");
      std::vector<Expr> fields;
      for (const Value& field : tuple.fields) {
        if (field.kind != Value::Kind::kTensor) Refuse("concatenate of a nested tuple");
        fields.push_back(field.batched ? field.expr : Broadcast(field.expr));
      }
      const auto& tuple_type = static_cast<const ir::TupleTypeNode&>(*call.args[0]->checked_type);
      const int64_t field_rank = static_cast<int64_t>(TensorTypeOf(tuple_type.fields[0])->ndim());
      exprs = {ir::MakeTupleExpr(std::move(fields))};
      shift("axis", field_rank);
    } else if (name == "take") {
      if (call.attrs.IsNone("axis")) Refuse("take of the flattened data");
      if (!call.attrs.IsNone("batch_dims") && call.attrs.GetInt("batch_dims") != 0) {
        Refuse("take with batch_dims");
      }
      const int64_t axis = NormalizedAxis(call.attrs.GetInt("axis"), rank());
      if (args[0].batched && !args[1].batched) {
        attrs.Set("axis", axis + 1);
      } else if (args[0].batched || axis != 0) {
        Refuse("take of batched indices along axis " + std::to_string(axis));
      }
    } else {
      ElementwiseCall(name, call, args);
    }
    return Make<ir::CallNode>(call.callee, std::move(exprs), std::move(attrs));
  }

  // nn.dense over all the group's rows as one 2-D product: on data of rank 3
  // a kernel multiplies each node's (1, k) rows by the weight in turn,
  // reading the weight once a node, which is what batching is to avoid.
  Expr RowsDense(const ir::CallNode& call, std::vector<Expr> exprs) {
    const ir::TensorTypeNode* data = TensorTypeOf(call.args[0]->checked_type);
    const ir::TensorTypeNode* result = TensorTypeOf(call.checked_type);
    if (!data || !result || !result->is_static()) Refuse("nn.dense of a dynamic shape");
    const ir::Dim k = data->shape.back();
    if (!k.is_static()) Refuse("nn.dense of a dynamic reduction");
    const auto reshape = [&](Expr value, std::vector<int64_t> shape) {
      ir::Attrs attrs;
      attrs.Set("newshape", std::move(shape));
      return Emit(Op("reshape", {std::move(value)}, std::move(attrs)));
    };
    exprs[0] = reshape(exprs[0], {-1, k.value()});
    const Expr product = Emit(Make<ir::CallNode>(call.callee, std::move(exprs), call.attrs));
    std::vector<int64_t> shape{-1};
    for (const ir::Dim& dim : result->shape) shape.push_back(dim.value());
    return Op("reshape", {product}, [&] {
      ir::Attrs attrs;
      attrs.Set("newshape", shape);
      return attrs;
    }());
  }

  // Elementwise and broadcasting operators keep their meaning when every
  // batched operand has the result's rank (its batch axis then lines up with
  // the result's) and no shared one has more.
  void ElementwiseCall(const std::string& name, const ir::CallNode& call,
                       const std::vector<Value>& args) {
    const op::OpDef& def = *static_cast<const ir::OpNode&>(*call.callee).def;
    if (def.pattern > op::OpPattern::kBroadcast || call.attrs.Has("axis") ||
        call.attrs.Has("axes")) {
      Refuse(name + " is not row-wise");
    }
    const ir::TensorTypeNode* result = TensorTypeOf(call.checked_type);
    if (!result) Refuse(name + " returns no tensor");
    const int64_t result_rank = static_cast<int64_t>(result->ndim());
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i].kind != Value::Kind::kTensor) Refuse(name + " of a tuple");
      const int64_t arg_rank = RankOf(call.args[i]);
      if (args[i].batched ? arg_rank != result_rank : arg_rank > result_rank) {
        Refuse(name + " broadcasts a batched operand of rank " + std::to_string(arg_rank));
      }
    }
  }

  const Candidate& candidate_;
  const GroupInputs& inputs_;
  std::unordered_map<const ir::VarNode*, Value> env_;
  std::unordered_map<const ir::VarNode*, bool> unused_children_;
  std::vector<std::pair<ir::Var, Expr>> lets_;
  std::unordered_map<int, Value> children_;
  Expr child_rows_, payload_rows_, zero_rows_;
};

struct BatchedFunctions {
  ir::Function wrapper;
  ir::GlobalVar loop_global;
  ir::Function loop;
};

ir::Type ParamType(const ir::Var& param) {
  return param->type_annotation ? param->type_annotation : param->checked_type;
}

// The loop over the groups and the function's new body, or NotBatchable.
BatchedFunctions Batch(const Candidate& candidate, const ir::IRModule& module) {
  const ir::Function& function = candidate.function;
  const std::string loop_name = candidate.global->name + "_batched_groups";
  if (module->Contains(loop_name)) Refuse("@" + loop_name + " exists");
  const ir::GlobalVar loop_global = Make<ir::GlobalVarNode>(loop_name);

  // The loop: @f_batched_groups(%g, %schedule, params..., tables...).
  const ir::Var group = ir::MakeVar("g", ir::MakeTensorType({}, DataType::Int32()));
  const ir::Var schedule = ir::MakeVar("schedule", ScheduleType(candidate.tree));
  std::vector<ir::Var> loop_params{group, schedule};
  GroupInputs inputs;
  inputs.schedule = schedule;
  for (size_t i = 1; i < function->params.size(); ++i) {
    const ir::Var& param = function->params[i];
    ir::Var copy = ir::MakeVar(param->name_hint, ParamType(param));
    inputs.params.emplace(param.get(), copy);
    loop_params.push_back(copy);
  }
  std::vector<ir::Type> table_types;
  for (size_t k = 0; k < candidate.results.size(); ++k) {
    table_types.push_back(RowsOf(*candidate.results[k]));
    ir::Var table = ir::MakeVar("table" + std::to_string(k), table_types.back());
    inputs.tables.push_back(table);
    loop_params.push_back(table);
  }
  const ir::Var row = ir::MakeVar("group");
  const ir::Var tag = ir::MakeVar("tag");
  const ir::Var start = ir::MakeVar("start");
  const ir::Var count = ir::MakeVar("count");
  const ir::Var offset = ir::MakeVar("offset");
  const ir::Var ids = ir::MakeVar("ids");
  inputs.ids = ids;
  inputs.count = count;
  inputs.offset = offset;

  // The clauses, by tag; the last one needs no test.
  std::vector<Expr> clauses(candidate.tree.data->constructors.size());
  for (const ir::Clause& clause : candidate.match->clauses) {
    if (clause.lhs->kind != ir::PatternKind::kConstructor) Refuse("a clause is not a constructor");
    const int32_t clause_tag =
        static_cast<const ir::PatternConstructorNode&>(*clause.lhs).constructor->tag;
    if (clauses[clause_tag]) Refuse("two clauses of one constructor");
    clauses[clause_tag] = ClauseBatcher(candidate, inputs).Run(clause);
  }
  for (const Expr& clause : clauses) {
    if (!clause) Refuse("a constructor without a clause");
  }
  Expr dispatch = clauses.back();
  for (size_t t = clauses.size() - 1; t-- > 0;) {
    dispatch = Make<ir::IfNode>(Op("equal", {tag, Int32(static_cast<int64_t>(t))}), clauses[t],
                                std::move(dispatch));
  }
  const ir::Var results = ir::MakeVar("rows");
  std::vector<Expr> next{Op("add", {group, Int32(1)}), schedule};
  for (size_t i = 1; i < function->params.size(); ++i) {
    next.push_back(inputs.params.at(function->params[i].get()));
  }
  for (size_t k = 0; k < inputs.tables.size(); ++k) {
    ir::Attrs attrs;
    attrs.Set("axis", int64_t{0});
    next.push_back(Op("concatenate",
                      {ir::MakeTupleExpr({inputs.tables[k], Field(results, static_cast<int>(k))})},
                      std::move(attrs)));
  }
  Expr step = Make<ir::CallNode>(loop_global, std::move(next));
  step = Make<ir::LetNode>(results, std::move(dispatch), std::move(step));
  ir::Attrs arange_attrs;
  arange_attrs.Set("dtype", DataType::Int32());
  step = Make<ir::LetNode>(
      ids, Op("arange", {start, Op("add", {start, count}), Int32(1)}, std::move(arange_attrs)),
      std::move(step));
  const std::vector<std::pair<ir::Var, int>> columns{{tag, 0}, {start, 1}, {count, 2}, {offset, 3}};
  for (auto it = columns.rbegin(); it != columns.rend(); ++it) {
    step = Make<ir::LetNode>(it->first, TakeAlong(row, Int32(it->second), 0), std::move(step));
  }
  step = Make<ir::LetNode>(row, TakeAlong(Field(schedule, 0), group, 0), std::move(step));
  Expr loop_body = Make<ir::IfNode>(Op("less", {group, DimOf(Field(schedule, 0), 0)}),
                                    std::move(step), ir::MakeTupleExpr(inputs.tables));
  const ir::Type tables_type = ir::MakeTupleType(table_types);
  ir::Function loop = Make<ir::FunctionNode>(loop_params, std::move(loop_body), tables_type,
                                             std::vector<ir::TypeVar>{});

  // The new body: schedule, loop from empty tables, the root's row.
  const ir::Var schedule_value = ir::MakeVar("schedule");
  const ir::Var tables = ir::MakeVar("tables");
  const ir::Var root = ir::MakeVar("root");
  std::vector<Expr> first{Int32(0), schedule_value};
  for (size_t i = 1; i < function->params.size(); ++i) first.push_back(function->params[i]);
  for (const ir::TensorType& result : candidate.results) {
    std::vector<int64_t> empty{0};
    for (const ir::Dim& dim : result->shape) empty.push_back(dim.value());
    ir::Attrs attrs;
    attrs.Set("shape", empty);
    attrs.Set("dtype", result->dtype);
    first.push_back(Op("zeros", {}, std::move(attrs)));
  }
  std::vector<Expr> root_rows;
  for (size_t k = 0; k < candidate.results.size(); ++k) {
    root_rows.push_back(TakeAlong(Field(tables, static_cast<int>(k)), root, 0));
  }
  Expr body = candidate.tuple_result ? ir::MakeTupleExpr(std::move(root_rows)) : root_rows[0];
  body = Make<ir::LetNode>(root, Op("subtract", {DimOf(Field(schedule_value, 1), 0), Int32(1)}),
                           std::move(body));
  body =
      Make<ir::LetNode>(tables, Make<ir::CallNode>(loop_global, std::move(first)), std::move(body));
  body = Make<ir::LetNode>(schedule_value, ScheduleCall(function->params[0], candidate.tree),
                           std::move(body));
  ir::Function wrapper =
      Make<ir::FunctionNode>(function->params, std::move(body), function->ret_type,
                             function->type_params, function->attrs);
  wrapper->span = function->span;
  return {std::move(wrapper), loop_global, std::move(loop)};
}

}  // namespace

ir::IRModule BatchTreeRecursion(const ir::IRModule& module) {
  std::vector<std::pair<size_t, BatchedFunctions>> batched;
  const auto& definitions = module->functions();
  for (size_t i = 0; i < definitions.size(); ++i) {
    const std::optional<Candidate> candidate = CandidateOf(definitions[i], module);
    if (!candidate) continue;
    try {
      batched.emplace_back(i, Batch(*candidate, module));
    } catch (const NotBatchable&) {
      // Left as it was: it runs one node at a time.
    }
  }
  if (batched.empty()) return module;
  ir::IRModule result = ir::MakeModule();
  for (const ir::TypeData& type_data : module->type_defs()) result->AddTypeDef(type_data);
  size_t next = 0;
  for (size_t i = 0; i < definitions.size(); ++i) {
    if (next < batched.size() && batched[next].first == i) {
      const BatchedFunctions& functions = batched[next++].second;
      result->Add(definitions[i].global, functions.wrapper);
      result->Add(functions.loop_global, functions.loop);
    } else {
      result->Add(definitions[i].global, definitions[i].function);
    }
  }
  return Retyped(module, std::move(result));
}

}  // namespace nimble::transform
