// Storage coalescing by scope. Each let chain is a list of statements; a
// candidate is a statement `let %s = memory.alloc_storage(<constant>)` whose
// only uses are `memory.alloc_tensor(%s, <constant offset>, ...)` in the same
// chain. A points-to analysis over the chain (which candidates each variable
// may reference) gives each candidate's lifetime; candidates are then packed
// into one region per device by first fit, largest first, and the region is
// allocated at the head of the chain.
#include "nimble/compiler/transform/coalesce_storage.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "nimble/compiler/ir/free_vars.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/support/deep_stack.h"
#include "nimble/compiler/transform/let_chain.h"
#include "nimble/compiler/transform/pass_util.h"
#include "nimble/compiler/transform/shape_numbering.h"

namespace nimble::transform {

namespace {

using ir::ExprKind;

// The value of an integer scalar constant, if `expr` is one.
std::optional<int64_t> ConstantScalar(const ir::Expr& expr) {
  if (expr->kind != ExprKind::kConstant) return std::nullopt;
  const auto& constant = static_cast<const ir::ConstantNode&>(*expr);
  if (!constant.is_scalar()) return std::nullopt;
  return constant.data->GetAsInt64(0);
}

int64_t RoundUp(int64_t value, int64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

struct Candidate {
  const ir::VarNode* var;
  size_t start;           // the allocating statement
  size_t end;             // the last statement using a value that may point into it
  int64_t size;           // bytes; -1 when sized at run time by a shape register
  int shape_number = -1;  // of that shape register (ShapeNumbering)
  int64_t alignment;
  std::string device;
  DataType dtype;
  bool escapes = false;
  bool coalescible = true;
  int64_t offset = 0;  // in the region, once packed
};

using PointsTo = std::set<size_t>;  // candidate indices

class Coalescer {
 public:
  ir::Expr Function(const ir::FunctionNode& node) {
    const ShapeNumbering shapes(node);
    const ShapeNumbering* outer = shapes_;
    shapes_ = &shapes;
    ir::Expr result = Make<ir::FunctionNode>(node.params, Scope(node.body), node.ret_type,
                                             node.type_params, node.attrs);
    shapes_ = outer;
    return result;
  }

 private:
  ir::Expr Scope(const ir::Expr& expr) {
    LetChain chain = FlattenLets(expr);
    for (Binding& binding : chain.bindings) binding.value = Nested(binding.value);
    chain.result = Nested(chain.result);

    std::vector<Candidate> candidates;
    std::map<const ir::VarNode*, size_t> candidate_of;
    for (size_t i = 0; i < chain.bindings.size(); ++i) {
      const Binding& binding = chain.bindings[i];
      if (CalledOpName(*binding.value) != "memory.alloc_storage") continue;
      const auto& call = static_cast<const ir::CallNode&>(*binding.value);
      const std::optional<int64_t> size = ConstantScalar(call.args[0]);
      const int shape_number =
          call.args[0]->kind == ExprKind::kVar
              ? shapes_->OfRegister(static_cast<const ir::VarNode*>(call.args[0].get()))
              : -1;
      if (!size && shape_number < 0) continue;
      candidate_of[binding.var.get()] = candidates.size();
      candidates.push_back(Candidate{.var = binding.var.get(),
                                     .start = i,
                                     .end = i,
                                     .size = size.value_or(-1),
                                     .shape_number = shape_number,
                                     .alignment = call.attrs.GetInt("alignment"),
                                     .device = call.attrs.GetString("device"),
                                     .dtype = call.attrs.GetDType("dtype")});
    }
    if (candidates.size() < 2) return WrapLets(chain.bindings, chain.result);
    std::map<const ir::VarNode*, std::pair<ir::Var, int64_t>> moved;  // storage -> region, offset

    std::map<const ir::VarNode*, PointsTo> points_to;
    auto points_into = [&](const ir::Var& var) -> const PointsTo* {
      const auto found = points_to.find(var.get());
      return found == points_to.end() ? nullptr : &found->second;
    };
    for (size_t i = 0; i < chain.bindings.size(); ++i) {
      const Binding& binding = chain.bindings[i];
      const std::vector<ir::Var> used = free_vars_(binding.value);
      for (const ir::Var& var : used) {
        const auto candidate = candidate_of.find(var.get());
        if (candidate != candidate_of.end() && !AllocatesTensorIn(binding.value, var.get())) {
          candidates[candidate->second].coalescible = false;
        }
        if (const PointsTo* targets = points_into(var)) {
          for (size_t target : *targets) candidates[target].end = i;
        }
      }
      points_to[binding.var.get()] = PointsToOf(binding, used, candidate_of, points_to);
    }
    for (const ir::Var& var : free_vars_(chain.result)) {
      if (const PointsTo* targets = points_into(var)) {
        for (size_t target : *targets) candidates[target].escapes = true;
      }
    }

    ReuseDynamic(candidates, &moved);

    // One region per device for two or more static candidates that do not
    // escape, and another for those that do. Escaping storage lives past the
    // scope, so its slices never share bytes.
    std::map<std::pair<std::string, bool>, std::vector<size_t>> groups;
    for (size_t i = 0; i < candidates.size(); ++i) {
      Candidate& candidate = candidates[i];
      if (candidate.size < 0 || !candidate.coalescible) continue;
      if (candidate.escapes) candidate.end = chain.bindings.size();
      groups[{candidate.device, candidate.escapes}].push_back(i);
    }
    std::vector<Binding> regions;
    for (auto& [key, members] : groups) {
      const std::string& device = key.first;
      if (members.size() < 2) continue;
      const Binding region = Pack(device, members, candidates);
      regions.push_back(region);
      for (size_t member : members) {
        moved[candidates[member].var] = {region.var, candidates[member].offset};
      }
    }

    std::vector<Binding> bindings = regions;
    for (const Binding& binding : chain.bindings) {
      if (moved.contains(binding.var.get())) continue;
      bindings.push_back({binding.var, Relocated(binding.value, moved)});
    }
    return WrapLets(bindings, chain.result);
  }

  // A run-time sized storage whose buffers are all dead takes the next
  // allocation of the same shape number, dtype, device and alignment: the
  // same size in bytes whatever the inputs.
  static void ReuseDynamic(std::vector<Candidate>& candidates,
                           std::map<const ir::VarNode*, std::pair<ir::Var, int64_t>>* moved) {
    struct Owner {
      size_t candidate;
      size_t end;  // the last use of any buffer it has held so far
      bool escapes;
    };
    std::vector<Owner> owners;
    for (size_t i = 0; i < candidates.size(); ++i) {
      const Candidate& candidate = candidates[i];
      if (candidate.size >= 0 || !candidate.coalescible) continue;
      auto same_size = [&](const Owner& owner) {
        const Candidate& held = candidates[owner.candidate];
        return held.shape_number == candidate.shape_number && held.dtype == candidate.dtype &&
               held.device == candidate.device && held.alignment == candidate.alignment &&
               !owner.escapes && owner.end < candidate.start;
      };
      const auto free = std::find_if(owners.begin(), owners.end(), same_size);
      if (free == owners.end()) {
        owners.push_back({i, candidate.end, candidate.escapes});
        continue;
      }
      (*moved)[candidate.var] = {ir::RefOf(candidates[free->candidate].var), 0};
      free->end = candidate.end;
      free->escapes = candidate.escapes;
    }
  }

  ir::Expr Nested(const ir::Expr& value) {
    ir::Expr fresh;
    switch (value->kind) {
      case ExprKind::kIf: {
        const auto& node = static_cast<const ir::IfNode&>(*value);
        fresh = Make<ir::IfNode>(node.cond, Scope(node.then_branch), Scope(node.else_branch));
        break;
      }
      case ExprKind::kMatch: {
        const auto& node = static_cast<const ir::MatchNode&>(*value);
        std::vector<ir::Clause> clauses;
        for (const ir::Clause& clause : node.clauses)
          clauses.push_back({clause.lhs, Scope(clause.rhs)});
        fresh = Make<ir::MatchNode>(node.data, std::move(clauses), node.complete);
        break;
      }
      case ExprKind::kFunction:
        if (IsPrimitiveFunction(value)) return value;
        fresh = Function(static_cast<const ir::FunctionNode&>(*value));
        break;
      default:
        return value;
    }
    fresh->span = value->span;
    return fresh;
  }

  // Whether `value` is `memory.alloc_tensor(storage, <constant>, ...)` and
  // uses `storage` nowhere else.
  static bool AllocatesTensorIn(const ir::Expr& value, const ir::VarNode* storage) {
    if (CalledOpName(*value) != "memory.alloc_tensor") return false;
    const auto& call = static_cast<const ir::CallNode&>(*value);
    if (call.args[0].get() != storage || !ConstantScalar(call.args[1])) return false;
    return std::none_of(call.args.begin() + 1, call.args.end(),
                        [&](const ir::Expr& arg) { return arg.get() == storage; });
  }

  // The candidates the value bound by `binding` may reference. Tensors keep
  // their storage; views, tuples, projections, constructors, closures and
  // calls may hold anything they are given; kernels, shape functions, kills,
  // shape_of and adt.tree_schedule (new tensors) return nothing that aliases.
  static PointsTo PointsToOf(const Binding& binding, const std::vector<ir::Var>& used,
                             const std::map<const ir::VarNode*, size_t>& candidate_of,
                             const std::map<const ir::VarNode*, PointsTo>& points_to) {
    const std::string_view op = CalledOpName(*binding.value);
    if (op == "memory.alloc_storage") {
      const auto candidate = candidate_of.find(binding.var.get());
      return candidate == candidate_of.end() ? PointsTo{} : PointsTo{candidate->second};
    }
    if (op == "memory.invoke_mut" || op == "memory.shape_func" || op == "memory.kill" ||
        op == "shape_of" || op == "adt.tree_schedule") {
      return {};
    }
    std::vector<ir::Var> sources = used;
    if (op == "memory.alloc_tensor" || op == "memory.reshape_tensor") {
      // Not the shape register: its values are read, not kept.
      const ir::Expr& data = static_cast<const ir::CallNode&>(*binding.value).args[0];
      sources.clear();
      if (data->kind == ExprKind::kVar) sources.push_back(data.as<ir::VarNode>());
    }
    PointsTo result;
    for (const ir::Var& source : sources) {
      const auto found = points_to.find(source.get());
      if (found != points_to.end()) result.insert(found->second.begin(), found->second.end());
    }
    return result;
  }

  // Assigns offsets to `members` (first fit, largest first, sharing bytes
  // between disjoint lifetimes) and returns the region's allocation.
  static Binding Pack(const std::string& device, std::vector<size_t> members,
                      std::vector<Candidate>& candidates) {
    int64_t alignment = 1;
    bool one_dtype = true;
    for (size_t member : members) {
      alignment = std::max(alignment, candidates[member].alignment);
      one_dtype = one_dtype && candidates[member].dtype == candidates[members[0]].dtype;
    }
    std::stable_sort(members.begin(), members.end(),
                     [&](size_t a, size_t b) { return candidates[a].size > candidates[b].size; });
    // Slices start at multiples of the alignment; a slice's bytes are its
    // size, so the region ends at the end of its last slice.
    auto bytes = [&](size_t member) { return std::max<int64_t>(candidates[member].size, 1); };
    std::vector<size_t> placed;
    int64_t total = 0;
    for (size_t member : members) {
      Candidate& candidate = candidates[member];
      std::vector<size_t> live;  // placed members whose lifetimes overlap
      for (size_t other : placed) {
        if (candidates[other].start <= candidate.end && candidate.start <= candidates[other].end) {
          live.push_back(other);
        }
      }
      std::sort(live.begin(), live.end(),
                [&](size_t a, size_t b) { return candidates[a].offset < candidates[b].offset; });
      int64_t offset = 0;
      for (size_t other : live) {
        if (candidates[other].offset >= offset + bytes(member)) break;
        offset = std::max(offset, RoundUp(candidates[other].offset + bytes(other), alignment));
      }
      candidate.offset = offset;
      total = std::max(total, offset + bytes(member));
      placed.push_back(member);
    }
    Attrs attrs;
    attrs.Set("alignment", alignment);
    attrs.Set("device", device);
    attrs.Set("dtype", one_dtype ? candidates[members[0]].dtype : DataType::UInt8());
    return {ir::MakeVar("region", ir::MakeStorageType()),
            op::MakeOpCall("memory.alloc_storage",
                           {ir::MakeScalar(DataType::Int64(), static_cast<double>(total))},
                           std::move(attrs))};
  }

  // `value` with alloc_tensor of a moved storage pointing into its region.
  static ir::Expr Relocated(
      const ir::Expr& value,
      const std::map<const ir::VarNode*, std::pair<ir::Var, int64_t>>& moved) {
    if (CalledOpName(*value) != "memory.alloc_tensor") return value;
    const auto& call = static_cast<const ir::CallNode&>(*value);
    const auto found = moved.find(static_cast<const ir::VarNode*>(call.args[0].get()));
    if (found == moved.end()) return value;
    std::vector<ir::Expr> args = call.args;
    args[0] = found->second.first;
    const int64_t offset = *ConstantScalar(call.args[1]) + found->second.second;
    args[1] = ir::MakeScalar(DataType::Int64(), static_cast<double>(offset));
    ir::Call relocated = Make<ir::CallNode>(call.callee, std::move(args), call.attrs);
    relocated->span = call.span;
    return relocated;
  }

  const ShapeNumbering* shapes_ = nullptr;
  // Across the scopes: each nests the next one's.
  ir::FreeVarCache free_vars_;
};

}  // namespace

ir::IRModule CoalesceStorage(const ir::IRModule& module) {
  return RunWithDeepStack([&] {
    ir::IRModule result = MapFunctions(module, [](const ir::IRModuleNode::Definition& definition) {
      return Coalescer().Function(*definition.function).as<ir::FunctionNode>();
    });
    return Retyped(module, std::move(result));
  });
}

}  // namespace nimble::transform
