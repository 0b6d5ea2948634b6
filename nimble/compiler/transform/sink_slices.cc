#include "nimble/compiler/transform/sink_slices.h"

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "nimble/compiler/ir/free_vars.h"
#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/support/deep_stack.h"
#include "nimble/compiler/transform/let_chain.h"
#include "nimble/compiler/transform/pass_util.h"

namespace nimble::transform {

namespace {

// What a value's readers read of it: nothing, the range [begin, end) along
// one axis, or all of it.
struct Demand {
  enum class Kind { kNone, kRange, kAll };
  Kind kind = Kind::kNone;
  int64_t axis = 0;
  int64_t begin = 0;
  int64_t end = 0;

  bool operator==(const Demand&) const = default;
  bool is_range() const { return kind == Kind::kRange; }
};

constexpr Demand kWhole{.kind = Demand::Kind::kAll};

Demand RangeAlong(int64_t axis, int64_t begin, int64_t end) {
  return {.kind = Demand::Kind::kRange, .axis = axis, .begin = begin, .end = end};
}

// Two readers of one value: one range only when both read the same.
Demand Join(const Demand& a, const Demand& b) {
  if (a.kind == Demand::Kind::kNone) return b;
  if (b.kind == Demand::Kind::kNone) return a;
  return a == b ? a : kWhole;
}

const ir::TensorTypeNode* TensorTypeOf(const ir::Expr& expr) {
  const ir::Type& type = expr->checked_type;
  return type && type->kind == ir::TypeKind::kTensor
             ? static_cast<const ir::TensorTypeNode*>(type.get())
             : nullptr;
}

// `axis` counted from the front; nullopt when out of range.
std::optional<int64_t> NormalAxis(int64_t axis, size_t rank) {
  const auto r = static_cast<int64_t>(rank);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return std::nullopt;
  return axis;
}

// The product of dims [first, last), or nullopt when one is not static.
std::optional<int64_t> StaticProduct(const std::vector<ir::Dim>& dims, size_t first, size_t last) {
  int64_t product = 1;
  for (size_t i = first; i < last; ++i) {
    if (!dims[i].is_static()) return std::nullopt;
    product *= dims[i].value();
  }
  return product;
}

// The call that computes only a range of its output: the part of each
// argument it reads, and its attributes on the narrowed inputs.
struct NarrowedCall {
  std::vector<Demand> args;
  ir::Attrs attrs;
};

// Broadcast and elementwise ops read each input at the output's index, the
// input's dims aligned to the output's last ones; an input of extent 1
// along the axis (broadcast) is read whole. A run-time extent may be 1 or
// the output's, so only the range [0, 1), right for both, passes through it.
std::optional<std::vector<Demand>> PointwiseArgs(const ir::CallNode& call, const Demand& wanted,
                                                 size_t rank) {
  std::vector<Demand> args;
  for (const ir::Expr& arg : call.args) {
    const ir::TensorTypeNode* type = TensorTypeOf(arg);
    if (!type) return std::nullopt;
    const int64_t axis = wanted.axis - static_cast<int64_t>(rank - type->ndim());
    if (axis < 0) {
      args.push_back(kWhole);
      continue;
    }
    const ir::Dim& extent = type->shape[static_cast<size_t>(axis)];
    if (extent.is_static() && extent.value() == 1) {
      args.push_back(kWhole);
    } else if (extent.is_static() ? wanted.end <= extent.value()
                                  : wanted.begin == 0 && wanted.end == 1) {
      args.push_back(RangeAlong(axis, wanted.begin, wanted.end));
    } else {
      return std::nullopt;
    }
  }
  return args;
}

// An op computes each output element from its inputs' elements at the same
// (broadcast) index when its pattern says so and no attribute names an
// axis or a shape (which expand_dims, bias_add and the fills have).
bool IsPointwise(const op::OpDef& def) {
  if (def.dialect || def.min_inputs < 1 || def.pattern > op::OpPattern::kBroadcast) return false;
  for (const op::AttrSpec& attr : def.attrs) {
    if (attr.name == "axis" || attr.name == "shape" || attr.name == "num_newaxis") return false;
  }
  return true;
}

// Reshape keeps the range when the output axis is one input axis: the dims
// before both and after both multiply to the same static sizes. The new
// shape then infers that axis (-1), which needs every other entry to be a
// plain size.
std::optional<NarrowedCall> NarrowReshape(const ir::CallNode& call, const Demand& wanted,
                                          const ir::TensorTypeNode& out) {
  const ir::TensorTypeNode* in = TensorTypeOf(call.args[0]);
  if (!in) return std::nullopt;
  std::vector<int64_t> newshape = call.attrs.GetIntList("newshape");
  const auto axis = static_cast<size_t>(wanted.axis);
  if (newshape.size() != out.ndim()) return std::nullopt;
  for (size_t i = 0; i < newshape.size(); ++i) {
    if (i != axis && newshape[i] <= 0) return std::nullopt;
  }
  const std::optional<int64_t> before = StaticProduct(out.shape, 0, axis);
  const std::optional<int64_t> after = StaticProduct(out.shape, axis + 1, out.ndim());
  if (!before || !after || *before == 0 || *after == 0) return std::nullopt;
  for (size_t in_axis = 0; in_axis < in->ndim(); ++in_axis) {
    if (StaticProduct(in->shape, 0, in_axis) != before ||
        StaticProduct(in->shape, in_axis + 1, in->ndim()) != after) {
      continue;
    }
    newshape[axis] = -1;
    ir::Attrs attrs = call.attrs;
    attrs.Set("newshape", newshape);
    return NarrowedCall{{RangeAlong(static_cast<int64_t>(in_axis), wanted.begin, wanted.end)},
                        std::move(attrs)};
  }
  return std::nullopt;
}

// How `call` computes only the range `wanted` of its output, or nullopt when
// its op has no rule for that axis or the range is the whole output.
std::optional<NarrowedCall> NarrowCall(const ir::CallNode& call, const Demand& wanted) {
  const ir::TensorTypeNode* out = TensorTypeOf(ir::RefOf(&call));
  if (!out || static_cast<size_t>(wanted.axis) >= out->ndim()) return std::nullopt;
  const ir::Dim& extent = out->shape[static_cast<size_t>(wanted.axis)];
  if (extent.is_static() && extent.value() <= wanted.end - wanted.begin) return std::nullopt;
  const std::string& name = static_cast<const ir::OpNode&>(*call.callee).name;
  const op::OpDef& def = *op::OpRegistry::Global().Find(name);
  const size_t rank = out->ndim();
  // The first argument read in the range along `axis`, the others whole.
  const auto first_along = [&](int64_t axis) {
    NarrowedCall narrowed{std::vector<Demand>(call.args.size(), kWhole), call.attrs};
    narrowed.args[0] = RangeAlong(axis, wanted.begin, wanted.end);
    return narrowed;
  };
  if (IsPointwise(def)) {
    std::optional<std::vector<Demand>> args = PointwiseArgs(call, wanted, rank);
    if (!args) return std::nullopt;
    return NarrowedCall{std::move(*args), call.attrs};
  }
  if (name == "nn.dense" || name == "nn.contrib_dense_pack") {
    if (static_cast<size_t>(wanted.axis) + 1 == rank) return std::nullopt;
    return first_along(wanted.axis);
  }
  if (name == "nn.batch_matmul") {
    // [b, m, n] from a [b, m, k] (or [b, k, m]) and b [b, n, k] (or [b, k, n]).
    if (wanted.axis == 1) return first_along(call.attrs.GetBool("transpose_a") ? 2 : 1);
    if (wanted.axis != 2) return std::nullopt;
    NarrowedCall narrowed{
        {kWhole, RangeAlong(call.attrs.GetBool("transpose_b") ? 1 : 2, wanted.begin, wanted.end)},
        call.attrs};
    return narrowed;
  }
  if (name == "nn.layer_norm" || name == "nn.softmax") {
    const std::optional<int64_t> reduced = NormalAxis(call.attrs.GetInt("axis"), rank);
    if (!reduced || *reduced == wanted.axis) return std::nullopt;
    return first_along(wanted.axis);
  }
  if (name == "transpose") {
    if (call.attrs.IsNone("axes")) return first_along(static_cast<int64_t>(rank) - 1 - wanted.axis);
    const std::vector<int64_t>& axes = call.attrs.GetIntList("axes");
    if (axes.size() != rank) return std::nullopt;
    const std::optional<int64_t> from = NormalAxis(axes[static_cast<size_t>(wanted.axis)], rank);
    if (!from) return std::nullopt;
    return first_along(*from);
  }
  if (name == "reshape") return NarrowReshape(call, wanted, *out);
  return std::nullopt;
}

// The op call `value` is, when it is one outside the memory dialect.
const ir::CallNode* OpCallOf(const ir::Expr& value) {
  const ir::OpNode* op = CalledOp(*value);
  if (!op || op::OpRegistry::Global().Find(op->name)->dialect) return nullptr;
  return static_cast<const ir::CallNode*>(value.get());
}

// A take of one row: `take(%x, c, axis=a)` with a constant index c >= 0 that
// is in range: 0, below a static extent, or any in "fast" mode (which fails
// on an index out of range, as the narrowed take of row 0 of nothing then
// does). Returns the range it reads of %x.
std::optional<Demand> RowTaken(const ir::CallNode& call) {
  if (static_cast<const ir::OpNode&>(*call.callee).name != "take" || call.attrs.IsNone("axis") ||
      call.attrs.GetInt("batch_dims") != 0 || call.args[1]->kind != ir::ExprKind::kConstant) {
    return std::nullopt;
  }
  const Tensor& index = static_cast<const ir::ConstantNode&>(*call.args[1]).data;
  const ir::TensorTypeNode* data = TensorTypeOf(call.args[0]);
  if (!data || index->ndim() != 0 || !index->dtype().is_int()) return std::nullopt;
  const std::optional<int64_t> axis = NormalAxis(call.attrs.GetInt("axis"), data->ndim());
  const int64_t row = index->GetAsInt64(0);
  if (!axis || row < 0) return std::nullopt;
  const ir::Dim& extent = data->shape[static_cast<size_t>(*axis)];
  const bool in_range = row == 0 || (extent.is_static() && row < extent.value()) ||
                        call.attrs.GetString("mode") == "fast";
  if (!in_range) return std::nullopt;
  return RangeAlong(*axis, row, row + 1);
}

// One chain's rewrite: what each variable's readers read, from the chain's
// end back, then the chain again with each call read in one range only
// narrowed, the takes reading their narrowed data, and unread op calls gone.
class ChainNarrowing {
 public:
  ChainNarrowing(const LetChain& chain, ir::FreeVarCache& free_vars)
      : chain_(chain), free_vars_(free_vars) {}

  std::vector<Binding> Run() {
    Plan();
    Rewrite();
    return std::move(rewritten_);
  }

 private:
  void Plan() {
    narrowings_.assign(chain_.bindings.size(), std::nullopt);
    const auto read_whole = [this](const ir::Expr& expr) {
      for (const ir::Var& var : free_vars_(expr)) demands_[var.get()] = kWhole;
    };
    read_whole(chain_.result);
    for (size_t i = chain_.bindings.size(); i-- > 0;) {
      const Binding& binding = chain_.bindings[i];
      const ir::CallNode* call = OpCallOf(binding.value);
      if (!call) {
        read_whole(binding.value);
        continue;
      }
      const Demand wanted = DemandOf(binding.var);
      if (wanted.kind == Demand::Kind::kNone) continue;  // dropped
      std::vector<Demand> reads(call->args.size(), kWhole);
      if (const std::optional<Demand> row = RowTaken(*call)) {
        reads[0] = *row;
      } else if (wanted.is_range()) {
        narrowings_[i] = NarrowCall(*call, wanted);
        if (narrowings_[i]) reads = narrowings_[i]->args;
      }
      for (size_t j = 0; j < call->args.size(); ++j) {
        const ir::Expr& arg = call->args[j];
        if (arg->kind == ir::ExprKind::kVar) {
          Demand& demand = demands_[static_cast<const ir::VarNode*>(arg.get())];
          demand = Join(demand, reads[j]);
        } else {
          read_whole(arg);
        }
      }
    }
  }

  Demand DemandOf(const ir::Var& var) const {
    const auto found = demands_.find(var.get());
    return found == demands_.end() ? Demand{} : found->second;
  }

  void Rewrite() {
    for (size_t i = 0; i < chain_.bindings.size(); ++i) {
      const Binding& binding = chain_.bindings[i];
      const ir::CallNode* call = OpCallOf(binding.value);
      if (!call) {
        rewritten_.push_back(binding);
        continue;
      }
      if (DemandOf(binding.var).kind == Demand::Kind::kNone) continue;
      if (narrowings_[i]) {
        std::vector<ir::Expr> args;
        for (size_t j = 0; j < call->args.size(); ++j) {
          args.push_back(Read(call->args[j], narrowings_[i]->args[j], binding.value->span));
        }
        ir::Expr value = Make<ir::CallNode>(call->callee, std::move(args), narrowings_[i]->attrs);
        value->span = binding.value->span;
        const ir::Var var = ir::MakeVar(binding.var->name_hint);
        narrowed_.emplace(binding.var.get(), var);
        rewritten_.push_back({var, std::move(value)});
        continue;
      }
      ir::Expr take = RowOfNarrowed(*call);
      rewritten_.push_back({binding.var, take ? std::move(take) : binding.value, binding.original});
    }
  }

  // A take of one row from a narrowed value, as the same take of its row 0;
  // null for any other call.
  ir::Expr RowOfNarrowed(const ir::CallNode& call) const {
    if (!RowTaken(call)) return nullptr;
    const auto data = narrowed_.find(static_cast<const ir::VarNode*>(call.args[0].get()));
    if (data == narrowed_.end()) return nullptr;
    const Tensor& index = static_cast<const ir::ConstantNode&>(*call.args[1]).data;
    ir::Expr row = Make<ir::ConstantNode>(TensorNode::Scalar(index->dtype(), 0), "");
    ir::Expr take = Make<ir::CallNode>(
        call.callee, std::vector<ir::Expr>{data->second, std::move(row)}, call.attrs);
    take->span = call.span;
    return take;
  }

  // `arg` as a narrowed call reads it: whole, its narrowed value, or a slice
  // of it (made once, before its first reader).
  ir::Expr Read(const ir::Expr& arg, const Demand& demand, const ir::Span& span) {
    if (!demand.is_range()) return arg;
    if (arg->kind == ir::ExprKind::kVar) {
      const auto narrowed = narrowed_.find(static_cast<const ir::VarNode*>(arg.get()));
      if (narrowed != narrowed_.end()) return narrowed->second;
    }
    const auto key = std::make_tuple(arg.get(), demand.axis, demand.begin, demand.end);
    const auto made = slices_.find(key);
    if (made != slices_.end()) return made->second;
    ir::Expr slice = SliceAlong(arg, demand.axis, demand.begin, demand.end);
    slice->span = span;
    const ir::Var var = ir::MakeVar("slice");
    rewritten_.push_back({var, std::move(slice)});
    slices_.emplace(key, var);
    return var;
  }

  const LetChain& chain_;
  ir::FreeVarCache& free_vars_;
  std::unordered_map<const ir::VarNode*, Demand> demands_;
  std::vector<std::optional<NarrowedCall>> narrowings_;
  std::vector<Binding> rewritten_;
  std::unordered_map<const ir::VarNode*, ir::Var> narrowed_;
  std::map<std::tuple<const ir::ExprNode*, int64_t, int64_t, int64_t>, ir::Var> slices_;
};

class SliceSinker : public ir::ExprMutator {
 public:
  // The whole chain from `head` on, looped over: chains run 10,000 deep.
  ir::Expr VisitLet(const ir::LetNode* head) override {
    LetChain chain = FlattenLets(ir::RefOf(head));
    for (Binding& binding : chain.bindings) binding.value = VisitExpr(binding.value);
    chain.result = VisitExpr(chain.result);
    return WrapLets(ChainNarrowing(chain, free_vars_).Run(), chain.result);
  }

 private:
  // Across the chains: each nests the next one's scopes.
  ir::FreeVarCache free_vars_;
};

}  // namespace

ir::IRModule SinkSlices(const ir::IRModule& module) {
  return RunWithDeepStack([&] {
    ir::IRModule result = MapFunctions(module, [&](const ir::IRModuleNode::Definition& definition) {
      return ir::RefOf(
          static_cast<const ir::FunctionNode*>(SliceSinker().VisitExpr(definition.function).get()));
    });
    return Retyped(module, std::move(result));
  });
}

}  // namespace nimble::transform
