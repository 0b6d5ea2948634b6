// FuseOps: per `let` chain, the dataflow graph of its operator calls, TVM's
// graph partitioner over it (src/relay/analysis/graph_partitioner.cc), and
// each group rewritten as one primitive function.
#include "nimble/compiler/transform/fuse_ops.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "nimble/compiler/ir/free_vars.h"
#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/op/vm_instructions.h"
#include "nimble/compiler/support/deep_stack.h"
#include "nimble/compiler/transform/let_chain.h"
#include "nimble/compiler/transform/pass_util.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/error.h"

namespace nimble::transform {

namespace {

using op::OpPattern;

// The memory dialect and the ops the VM runs as instructions: no kernel.
bool IsInstruction(const ir::OpNode* op, const ir::CallNode& call) {
  return op->def->dialect || op::RunsAsVMInstruction(call);
}

ir::Type TypeOf(const ir::ExprNode* expr, const std::string& what) {
  if (!expr->checked_type) {
    throw Error("FuseOps: " + what + " has no type (at " + expr->span.ToString() +
                "); run type inference first");
  }
  return expr->checked_type;
}

const ir::TensorTypeNode* AsTensor(const ir::Type& type) {
  return type->kind == ir::TypeKind::kTensor ? static_cast<const ir::TensorTypeNode*>(type.get())
                                             : nullptr;
}

// A kernel call on variables and constants (as A-normal form writes
// arguments): a node of the fusion graph. Null for anything else.
const ir::CallNode* GraphCall(const ir::Expr& expr) {
  const ir::OpNode* op = CalledOp(*expr);
  if (!op) return nullptr;
  const auto* call = static_cast<const ir::CallNode*>(expr.get());
  if (IsInstruction(op, *call)) return nullptr;
  for (const ir::Expr& arg : call->args) {
    if (arg->kind != ir::ExprKind::kVar && arg->kind != ir::ExprKind::kConstant) return nullptr;
  }
  return call;
}

using FusiblePredicate = std::function<bool(const ir::CallNode&)>;

// How a call may fuse: its op's pattern, or kOpaque where it keeps a
// primitive of its own. A data-dependent or upper-bound shape function would
// need a fused intermediate's values, which only exist inside the kernel; a
// fused primitive's inputs and result are tensors.
OpPattern FusionPattern(const ir::CallNode* call, const FusiblePredicate& fusible) {
  const auto* op = static_cast<const ir::OpNode*>(call->callee.get());
  bool tensors = true;
  for (size_t i = 0; i < call->args.size(); ++i) {
    const ir::Type type =
        TypeOf(call->args[i].get(), "argument " + std::to_string(i) + " of " + op->name);
    tensors = tensors && AsTensor(type);
  }
  tensors = tensors && AsTensor(TypeOf(call, "the call of " + op->name));
  if (!tensors || op->def->shape_mode != op::ShapeFuncMode::kDataIndependent ||
      (fusible && !fusible(*call))) {
    return OpPattern::kOpaque;
  }
  return op->def->pattern;
}

// A node's use by another node, with the pattern of that edge.
struct Edge {
  int node;
  OpPattern pattern;
};

// No use outside the graph.
constexpr int kNoOutsideUse = std::numeric_limits<int>::max();

// A kernel call of the chain (TVM's IndexedForwardGraph node).
struct Node {
  const ir::CallNode* call;
  ir::Var var;  // its let binder; null for the chain's result
  OpPattern pattern;
  std::vector<Edge> consumers;  // in chain order, each node once
  // The first position in the chain (the index of a let; the chain's result
  // comes after them all) where its value is used other than as an argument
  // of a node: by another kind of expression, in a nested scope, or in the
  // result. A group may hold it other than as its last node only when that
  // use comes after the group's last node, which then returns it too.
  int outside_use = kNoOutsideUse;
};

// TVM's GraphPartitioner on the nodes of one chain, in chain order (a
// topological order). Groups are union-find sets whose root is their last
// node, the only one whose value is used outside the group.
class Partitioner {
 public:
  // `positions` holds each node's position in the chain, ascending.
  Partitioner(const std::vector<Node>& nodes, const std::vector<int>& positions, int max_group_ops,
              bool anchors_take_injective)
      : nodes_(nodes),
        positions_(positions),
        max_group_ops_(max_group_ops),
        anchors_take_injective_(anchors_take_injective),
        dominators_(nodes.size()) {
    for (const Node& node : nodes) {
      const bool anchor =
          node.pattern == OpPattern::kOutEWiseFusable || node.pattern == OpPattern::kCommReduce;
      groups_.push_back(
          {static_cast<int>(groups_.size()), node.pattern, 1, anchor, node.outside_use});
    }
    BuildPostDominators();
  }

  // The root of each node's group.
  std::vector<int> Partition() {
    // Phase 0 fuses anchors with their epilogues and elementwise ops;
    // injective ops wait for phase 1, so that the anchors' groups are
    // complete first (TVM: "so conv2d always finishes fusing").
    for (int phase = 0; phase < 2; ++phase) RunFuse(phase);
    std::vector<int> roots;
    for (size_t i = 0; i < nodes_.size(); ++i) roots.push_back(Find(static_cast<int>(i)));
    return roots;
  }

 private:
  struct Group {
    int parent;
    // The root's pattern, raised to the anchor's when the group has one.
    OpPattern pattern;
    int num_nodes;
    // Holds an nn.dense-like op or a reduction.
    bool anchored;
    // The first outside use of any of its nodes' values.
    int outside_use;
  };

  // A node's immediate post-dominator (-1: none, the value leaves the graph
  // or is unused) and the most general edge pattern on the paths to it.
  struct PostDominator {
    int parent = -1;
    int depth = 1;
    OpPattern pattern = OpPattern::kOpaque;
  };

  // One pass from the last node up: each node's post-dominator is the least
  // common ancestor of its consumers in the tree built so far. Outside uses
  // do not count: TryFuse keeps them after the group.
  void BuildPostDominators() {
    for (int i = static_cast<int>(nodes_.size()) - 1; i >= 0; --i) {
      const Node& node = nodes_[i];
      if (node.consumers.empty()) continue;
      OpPattern pattern = node.consumers[0].pattern;
      int parent = node.consumers[0].node;
      for (size_t k = 1; k < node.consumers.size(); ++k) {
        parent = LeastCommonAncestor(parent, node.consumers[k].node, &pattern);
        pattern = std::max(pattern, node.consumers[k].pattern);
      }
      PostDominator& dominator = dominators_[i];
      dominator.parent = parent;
      dominator.depth = parent < 0 ? 1 : dominators_[parent].depth + 1;
      dominator.pattern = pattern;
    }
  }

  int LeastCommonAncestor(int a, int b, OpPattern* pattern) const {
    while (a != b) {
      if (a < 0 || b < 0) return -1;
      const int depth_a = dominators_[a].depth;
      const int depth_b = dominators_[b].depth;
      if (depth_a >= depth_b) {
        *pattern = std::max(*pattern, dominators_[a].pattern);
        a = dominators_[a].parent;
      }
      if (depth_b >= depth_a) {
        *pattern = std::max(*pattern, dominators_[b].pattern);
        b = dominators_[b].parent;
      }
    }
    return a;
  }

  int Find(int node) {
    int root = node;
    while (groups_[root].parent != root) root = groups_[root].parent;
    while (groups_[node].parent != root) node = std::exchange(groups_[node].parent, root);
    return root;
  }

  void RunFuse(int phase) {
    for (int i = 0; i < static_cast<int>(nodes_.size()); ++i) {
      const int sink = dominators_[i].parent;
      if (sink < 0 || Find(i) == Find(sink)) continue;
      const OpPattern pattern = groups_[Find(i)].pattern;
      const OpPattern path = dominators_[i].pattern;
      if (pattern == OpPattern::kOutEWiseFusable) {
        // An anchor takes an epilogue of elementwise and broadcast ops, and
        // (once those have their groups) with anchors_take_injective
        // injective ones; never a second anchor, whose group's pattern is
        // above kInjective.
        if (phase == 0 && path == OpPattern::kElemWise) {
          TryFuse(i, sink, [](OpPattern kind, bool) { return kind <= OpPattern::kBroadcast; });
        } else if (phase == 1 && anchors_take_injective_ && path <= OpPattern::kInjective) {
          TryFuse(i, sink, [](OpPattern kind, bool) { return kind <= OpPattern::kInjective; });
        }
      } else if (pattern <= OpPattern::kBroadcast) {
        if (path <= OpPattern::kInjective || path == OpPattern::kCommReduce) {
          TryFuse(i, sink, [](OpPattern kind, bool is_sink) {
            return kind <= (is_sink ? OpPattern::kOutEWiseFusable : OpPattern::kInjective);
          });
        }
      } else if (pattern == OpPattern::kInjective) {
        // With anchors_take_injective, into an anchor's group too: an LSTM
        // step's take of its input row joins the cell that adds it.
        if (phase == 1) {
          TryFuse(i, sink, [this](OpPattern kind, bool is_sink) {
            return kind <= OpPattern::kInjective ||
                   (anchors_take_injective_ && is_sink && kind == OpPattern::kOutEWiseFusable);
          });
        }
      }
      // Reductions and opaque ops never start a fusion.
    }
  }

  // Merges `src`, every node on the paths from it to `sink` and their groups
  // into `sink`'s group, when every group on the way satisfies `condition`
  // and the result stays within the size limit. The conditions keep one
  // anchor per group, as the code generator needs: a group with an anchor
  // has its pattern, above kInjective, so it can only be the sink, and an
  // anchor starting a fusion needs a sink of at most kBroadcast.
  template <typename Condition>
  void TryFuse(int src, int sink, Condition condition) {
    std::vector<int> path = {src};
    std::unordered_set<int> visited;
    std::vector<int> pending;
    for (const Edge& edge : nodes_[src].consumers) pending.push_back(edge.node);
    while (!pending.empty()) {
      const int node = pending.back();
      pending.pop_back();
      if (!visited.insert(node).second) continue;
      if (!condition(groups_[Find(node)].pattern, node == sink)) return;
      if (node == sink) continue;
      path.push_back(node);
      // The path and the sink all join the group: give up as soon as they
      // cannot fit, rather than walk a long way to a far post-dominator.
      if (static_cast<int>(path.size()) >= max_group_ops_) return;
      for (const Edge& edge : nodes_[node].consumers) pending.push_back(edge.node);
    }
    const int target = Find(sink);
    std::vector<int> merged;
    int num_nodes = groups_[target].num_nodes;
    std::unordered_set<int> seen = {target};
    for (int node : path) {
      const int root = Find(node);
      if (!seen.insert(root).second) continue;
      // A value used outside before the group's last node would have to
      // exist before the fused kernel runs.
      if (groups_[root].outside_use <= positions_[target]) return;
      merged.push_back(root);
      num_nodes += groups_[root].num_nodes;
    }
    if (num_nodes > max_group_ops_) return;
    for (int root : merged) {
      Group& group = groups_[root];
      Group& into = groups_[target];
      group.parent = target;
      into.num_nodes += group.num_nodes;
      if (group.anchored) into.pattern = std::max(into.pattern, group.pattern);
      into.anchored = into.anchored || group.anchored;
      into.outside_use = std::min(into.outside_use, group.outside_use);
    }
  }

  const std::vector<Node>& nodes_;
  const std::vector<int>& positions_;
  const int max_group_ops_;
  const bool anchors_take_injective_;
  std::vector<PostDominator> dominators_;
  std::vector<Group> groups_;
};

// Rewrites each `let` chain of a function (its body, branches, clauses and
// nested functions) into calls of primitives, a group's at its last node.
class Fuser : public ir::ExprMutator {
 public:
  Fuser(int max_group_ops, FusiblePredicate fusible, bool anchors_take_injective)
      : max_group_ops_(max_group_ops),
        fusible_(std::move(fusible)),
        anchors_take_injective_(anchors_take_injective) {}

  ir::Expr VisitFunction(const ir::FunctionNode* function) override {
    // Already primitive: its body is the kernel, not calls to wrap again.
    if (HasFlag(function, kPrimitiveAttr)) return ir::RefOf(function);
    return ExprMutator::VisitFunction(function);
  }

  // A call outside any group: a primitive of its own when it is a kernel.
  ir::Expr VisitCall(const ir::CallNode* call) override {
    ir::Expr rewritten = ExprMutator::VisitCall(call);
    const ir::OpNode* op = CalledOp(*call);
    if (!op || IsInstruction(op, *call)) return rewritten;

    const auto* new_call = static_cast<const ir::CallNode*>(rewritten.get());
    std::vector<ir::Var> params;
    std::vector<ir::Expr> param_uses;
    for (size_t i = 0; i < call->args.size(); ++i) {
      params.push_back(ir::MakeVar(
          "p" + std::to_string(i),
          TypeOf(call->args[i].get(), "argument " + std::to_string(i) + " of " + op->name)));
      param_uses.push_back(params.back());
    }
    ir::Expr body = Make<ir::CallNode>(call->callee, std::move(param_uses), call->attrs);
    body->span = call->span;
    return CallPrimitive(std::move(params), std::move(body),
                         TypeOf(call, "the call of " + op->name), "", new_call->args, call->span);
  }

  // The whole chain from `head` on, looped over: chains run 10,000 deep.
  ir::Expr VisitLet(const ir::LetNode* head) override {
    std::vector<const ir::LetNode*> lets;
    ir::Expr result = ir::RefOf(head);
    while (result->kind == ir::ExprKind::kLet) {
      lets.push_back(static_cast<const ir::LetNode*>(result.get()));
      result = lets.back()->body;
    }

    std::vector<Node> nodes;
    std::vector<int> positions;
    std::unordered_map<const ir::VarNode*, int> node_of_var;
    const auto note_uses = [&](const ir::Expr& expr, int position) {
      for (const ir::Var& var : free_vars_(expr)) {
        const auto found = node_of_var.find(var.get());
        if (found == node_of_var.end()) continue;
        int& first = nodes[found->second].outside_use;
        first = std::min(first, position);
      }
    };
    std::vector<int> node_of_let;
    for (size_t i = 0; i < lets.size(); ++i) {
      const ir::CallNode* call = GraphCall(lets[i]->value);
      node_of_let.push_back(call ? AddNode(call, lets[i]->var, node_of_var, fusible_, nodes) : -1);
      if (call) {
        node_of_var.emplace(lets[i]->var.get(), node_of_let.back());
        positions.push_back(static_cast<int>(i));
      } else {
        note_uses(lets[i]->value, static_cast<int>(i));
      }
    }
    const int result_position = static_cast<int>(lets.size());
    int result_node = -1;
    if (const ir::CallNode* call = GraphCall(result)) {
      result_node = AddNode(call, nullptr, node_of_var, fusible_, nodes);
      positions.push_back(result_position);
      nodes[result_node].outside_use = result_position;
    } else {
      note_uses(result, result_position);
    }

    const std::vector<int> roots =
        Partitioner(nodes, positions, max_group_ops_, anchors_take_injective_).Partition();
    std::vector<std::vector<int>> members(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) members[roots[i]].push_back(static_cast<int>(i));
    // A group's fused call at its last node; nothing at its other nodes.
    const auto fused = [&](int node) { return node >= 0 && members[roots[node]].size() > 1; };

    ir::Expr body =
        fused(result_node) ? FusedCall(nodes, members[result_node]).call : VisitExpr(result);
    for (size_t i = lets.size(); i-- > 0;) {
      const int node = node_of_let[i];
      if (!fused(node)) {
        body = Make<ir::LetNode>(lets[i]->var, VisitExpr(lets[i]->value), std::move(body));
        body->span = lets[i]->span;
      } else if (roots[node] == node) {
        body = BindOutputs(FusedCall(nodes, members[node]), lets[i]->span, std::move(body));
      }
    }
    return body;
  }

 private:
  // Adds the node for `call`, bound to `var`, with the edges from the nodes
  // it reads. An edge takes the consumer's pattern; a broadcast whose input
  // already has the output's shape is elementwise on that edge.
  static int AddNode(const ir::CallNode* call, ir::Var var,
                     const std::unordered_map<const ir::VarNode*, int>& node_of_var,
                     const FusiblePredicate& fusible, std::vector<Node>& nodes) {
    const int index = static_cast<int>(nodes.size());
    const OpPattern pattern = FusionPattern(call, fusible);
    for (const ir::Expr& arg : call->args) {
      if (arg->kind != ir::ExprKind::kVar) continue;
      const auto found = node_of_var.find(static_cast<const ir::VarNode*>(arg.get()));
      if (found == node_of_var.end()) continue;
      OpPattern edge = pattern;
      if (edge == OpPattern::kBroadcast &&
          AsTensor(arg->checked_type)->shape == AsTensor(call->checked_type)->shape) {
        edge = OpPattern::kElemWise;
      }
      std::vector<Edge>& consumers = nodes[found->second].consumers;
      if (!consumers.empty() && consumers.back().node == index) {
        consumers.back().pattern = std::max(consumers.back().pattern, edge);
      } else {
        consumers.push_back({index, edge});
      }
    }
    nodes.push_back({call, std::move(var), pattern, {}});
    return index;
  }

  // A group's primitive call and the binders of what it returns: its last
  // node's value, then those of its other nodes used outside it (as a tuple
  // when there are several).
  struct GroupCall {
    ir::Expr call;
    std::vector<ir::Var> outputs;
  };

  // `let`s binding what `group` returns, in `body`.
  static ir::Expr BindOutputs(const GroupCall& group, const ir::Span& span, ir::Expr body) {
    if (group.outputs.size() == 1) {
      body = Make<ir::LetNode>(group.outputs[0], group.call, std::move(body));
      body->span = span;
      return body;
    }
    const ir::Var tuple = ir::MakeVar("outputs");
    for (size_t k = group.outputs.size(); k-- > 0;) {
      body = Make<ir::LetNode>(group.outputs[k],
                               Make<ir::TupleGetItemNode>(tuple, static_cast<int>(k)),
                               std::move(body));
      body->span = span;
    }
    body = Make<ir::LetNode>(tuple, group.call, std::move(body));
    body->span = span;
    return body;
  }

  // The call of one primitive computing the group `members` (in chain order)
  // on the group's inputs, each passed once; scalar constants stay inside.
  static GroupCall FusedCall(const std::vector<Node>& nodes, const std::vector<int>& members) {
    std::vector<ir::Var> params;
    std::vector<ir::Expr> inputs;
    // A value from outside the group, or a member's binder, to what the body
    // reads instead.
    std::unordered_map<const ir::ExprNode*, ir::Expr> inside;
    std::vector<Binding> bindings;
    std::string fused;
    ir::Expr body;
    // The values it returns besides the last node's.
    std::vector<ir::Expr> extra_values;
    std::vector<ir::Type> extra_types;
    std::vector<ir::Var> outputs = {nodes[members.back()].var};
    for (int member : members) {
      const Node& node = nodes[member];
      const auto* op = static_cast<const ir::OpNode*>(node.call->callee.get());
      std::vector<ir::Expr> args;
      for (const ir::Expr& arg : node.call->args) {
        const auto found = inside.find(arg.get());
        if (found != inside.end()) {
          args.push_back(found->second);
        } else if (arg->kind == ir::ExprKind::kConstant &&
                   static_cast<const ir::ConstantNode*>(arg.get())->is_scalar()) {
          args.push_back(arg);
        } else {
          params.push_back(ir::MakeVar("p" + std::to_string(params.size()), arg->checked_type));
          inputs.push_back(arg);
          inside.emplace(arg.get(), params.back());
          args.push_back(params.back());
        }
      }
      ir::Expr value = Make<ir::CallNode>(node.call->callee, std::move(args), node.call->attrs);
      value->span = node.call->span;
      fused += (fused.empty() ? "" : "+") + op->name;
      if (member == members.back()) {
        body = std::move(value);
      } else {
        ir::Var var = ir::MakeVar(node.var->name_hint);
        inside.emplace(node.var.get(), var);
        bindings.push_back({var, std::move(value)});
        if (node.outside_use != kNoOutsideUse) {
          extra_types.push_back(node.call->checked_type);
          extra_values.push_back(var);
          outputs.push_back(node.var);
        }
      }
    }
    const ir::CallNode* last = nodes[members.back()].call;
    ir::Type type = last->checked_type;
    if (!extra_values.empty()) {
      std::vector<ir::Expr> fields = {std::move(body)};
      std::vector<ir::Type> types = {type};
      fields.insert(fields.end(), extra_values.begin(), extra_values.end());
      types.insert(types.end(), extra_types.begin(), extra_types.end());
      body = Make<ir::TupleNode>(std::move(fields));
      type = Make<ir::TupleTypeNode>(std::move(types));
    }
    return {CallPrimitive(std::move(params), WrapLets(bindings, std::move(body)), std::move(type),
                          std::move(fused), std::move(inputs), last->span),
            std::move(outputs)};
  }

  // The call on `inputs` of a primitive function of `params` and `body`;
  // `fused` names its ops when it has several.
  static ir::Expr CallPrimitive(std::vector<ir::Var> params, ir::Expr body, ir::Type ret_type,
                                std::string fused, std::vector<ir::Expr> inputs, ir::Span span) {
    ir::Attrs attrs;
    attrs.Set(kPrimitiveAttr, int64_t{1});
    if (!fused.empty()) attrs.Set(kFusedAttr, std::move(fused));
    ir::Expr primitive =
        Make<ir::FunctionNode>(std::move(params), std::move(body), std::move(ret_type),
                               std::vector<ir::TypeVar>{}, std::move(attrs));
    ir::Expr call = Make<ir::CallNode>(std::move(primitive), std::move(inputs));
    call->span = span;
    return call;
  }

  const int max_group_ops_;
  const FusiblePredicate fusible_;
  const bool anchors_take_injective_;
  // Across the chains: each nests the next one's scopes.
  ir::FreeVarCache free_vars_;
};

}  // namespace

ir::IRModule FuseOps(const ir::IRModule& module, const FuseOptions& options) {
  if (options.max_group_ops < 1) {
    throw Error("FuseOps: max_group_ops must be at least 1, got " +
                std::to_string(options.max_group_ops));
  }
  const int max_group_ops = options.enabled ? options.max_group_ops : 1;
  return RunWithDeepStack([&] {
    ir::IRModule result = MapFunctions(module, [&](const ir::IRModuleNode::Definition& definition) {
      return ir::RefOf(static_cast<const ir::FunctionNode*>(
          Fuser(max_group_ops, options.fusible, options.anchors_take_injective)
              .VisitExpr(definition.function)
              .get()));
    });
    typing::InferTypes(result);
    return result;
  });
}

}  // namespace nimble::transform
