#include "nimble/compiler/transform/slice_splits.h"

#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "nimble/compiler/ir/free_vars.h"
#include "nimble/compiler/ir/functor.h"
#include "nimble/compiler/support/deep_stack.h"
#include "nimble/compiler/transform/let_chain.h"
#include "nimble/compiler/transform/pass_util.h"

namespace nimble::transform {

namespace {

// A split whose pieces can be sliced: its input, axis, and each piece's
// [begin, end) along the axis.
struct SlicedSplit {
  ir::Expr data;
  int64_t axis = 0;
  std::vector<std::pair<int64_t, int64_t>> pieces;
};

// The pieces of `value` when it is a type-checked split of a tensor with
// static piece sizes along its axis.
std::optional<SlicedSplit> PiecesOf(const ir::Expr& value) {
  if (CalledOpName(*value) != "split" || !value->checked_type ||
      value->checked_type->kind != ir::TypeKind::kTuple) {
    return std::nullopt;
  }
  const auto& call = static_cast<const ir::CallNode&>(*value);
  const ir::Type& data_type = call.args[0]->checked_type;
  if (!data_type || data_type->kind != ir::TypeKind::kTensor) return std::nullopt;
  const int64_t rank = static_cast<const ir::TensorTypeNode&>(*data_type).ndim();
  SlicedSplit split{.data = call.args[0], .axis = call.attrs.GetInt("axis"), .pieces = {}};
  if (split.axis < 0) split.axis += rank;
  int64_t begin = 0;
  for (const ir::Type& field : static_cast<const ir::TupleTypeNode&>(*value->checked_type).fields) {
    const ir::Dim& size = static_cast<const ir::TensorTypeNode&>(*field).shape[split.axis];
    if (!size.is_static()) return std::nullopt;
    split.pieces.emplace_back(begin, begin + size.value());
    begin += size.value();
  }
  return split;
}

// `strided_slice` of piece `index` of `split`, typed as the piece.
ir::Expr SliceOf(const SlicedSplit& split, int64_t index, const ir::Type& piece_type) {
  ir::Expr slice =
      SliceAlong(split.data, split.axis, split.pieces[index].first, split.pieces[index].second);
  slice->checked_type = piece_type;
  return slice;
}

class SplitSlicer : public ir::ExprMutator {
 public:
  explicit SplitSlicer(const std::function<bool(const ir::CallNode&)>& fusible)
      : fusible_(fusible) {}

  // The whole chain from `head` on, looped over: chains run 10,000 deep.
  ir::Expr VisitLet(const ir::LetNode* head) override {
    LetChain chain = FlattenLets(ir::RefOf(head));
    std::unordered_map<const ir::VarNode*, SlicedSplit> splits;
    std::unordered_set<const ir::VarNode*> sliced;
    for (Binding& binding : chain.bindings) {
      binding.value = VisitExpr(binding.value);
      if (std::optional<SlicedSplit> split = PiecesOf(binding.value)) {
        splits.emplace(binding.var.get(), std::move(*split));
        continue;
      }
      if (binding.value->kind != ir::ExprKind::kTupleGetItem) continue;
      const auto& get = static_cast<const ir::TupleGetItemNode&>(*binding.value);
      if (get.tuple->kind != ir::ExprKind::kVar) continue;
      const auto split = splits.find(static_cast<const ir::VarNode*>(get.tuple.get()));
      if (split == splits.end()) continue;
      ir::Expr slice = SliceOf(split->second, get.index, binding.value->checked_type);
      if (!fusible_(static_cast<const ir::CallNode&>(*slice))) continue;
      slice->span = binding.value->span;
      binding.value = std::move(slice);
      sliced.insert(split->first);
    }
    chain.result = VisitExpr(chain.result);
    // A split still read (a field in a nested scope, the tuple itself) stays.
    std::unordered_set<const ir::VarNode*> read;
    const auto note_reads = [&](const ir::Expr& expr) {
      for (const ir::Var& var : free_vars_(expr)) read.insert(var.get());
    };
    for (const Binding& binding : chain.bindings) note_reads(binding.value);
    note_reads(chain.result);
    std::erase_if(chain.bindings, [&](const Binding& binding) {
      return sliced.contains(binding.var.get()) && !read.contains(binding.var.get());
    });
    return WrapLets(chain.bindings, std::move(chain.result));
  }

 private:
  const std::function<bool(const ir::CallNode&)>& fusible_;
  // Across the chains: each nests the next one's scopes.
  ir::FreeVarCache free_vars_;
};

}  // namespace

ir::IRModule SliceSplits(const ir::IRModule& module,
                         const std::function<bool(const ir::CallNode&)>& fusible) {
  return RunWithDeepStack([&] {
    ir::IRModule result = MapFunctions(module, [&](const ir::IRModuleNode::Definition& definition) {
      return ir::RefOf(static_cast<const ir::FunctionNode*>(
          SplitSlicer(fusible).VisitExpr(definition.function).get()));
    });
    return Retyped(module, std::move(result));
  });
}

}  // namespace nimble::transform
