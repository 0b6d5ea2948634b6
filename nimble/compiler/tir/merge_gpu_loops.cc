#include "nimble/compiler/tir/merge_gpu_loops.h"

#include <map>
#include <vector>

#include "nimble/compiler/tir/simplify.h"

namespace nimble::tir {
namespace {

// How a loop body uses a buffer it accesses: whether it stores to it, and
// whether every load and store is at index `own` (the loop variable).
struct BufferUse {
  bool stored = false;
  bool only_own_element = true;
};

class UseCollector {
 public:
  UseCollector(const VarNode* own, std::map<const BufferNode*, BufferUse>* uses)
      : own_(own), uses_(uses) {}

  void Visit(const Stmt& stmt) {
    if (!stmt) return;
    switch (stmt->kind) {
      case StmtKind::kFor: {
        const auto& loop = static_cast<const ForNode&>(*stmt);
        Visit(loop.extent);
        if (loop.min_chunk) Visit(loop.min_chunk);
        return Visit(loop.body);
      }
      case StmtKind::kStore: {
        const auto& store = static_cast<const StoreNode&>(*stmt);
        Access(*store.buffer, store.index, /*store=*/true);
        Visit(store.index);
        return Visit(store.value);
      }
      case StmtKind::kLet: {
        const auto& let = static_cast<const LetNode&>(*stmt);
        Visit(let.value);
        return Visit(let.body);
      }
      case StmtKind::kIf: {
        const auto& branch = static_cast<const IfNode&>(*stmt);
        Visit(branch.condition);
        Visit(branch.then_case);
        return Visit(branch.else_case);
      }
      case StmtKind::kSeq:
        for (const Stmt& inner : static_cast<const SeqNode&>(*stmt).stmts) Visit(inner);
        return;
      case StmtKind::kAllocate:
        return Visit(static_cast<const AllocateNode&>(*stmt).body);
      case StmtKind::kAssert: {
        const auto& assertion = static_cast<const AssertNode&>(*stmt);
        Visit(assertion.condition);
        return Visit(assertion.body);
      }
    }
  }

  void Visit(const Expr& expr) {
    if (expr->kind == ExprKind::kLoad) {
      const auto& load = static_cast<const LoadNode&>(*expr);
      Access(*load.buffer, load.index, /*store=*/false);
    }
    ForEachOperand(expr, [&](const Expr& operand) { Visit(operand); });
  }

 private:
  void Access(const BufferNode& buffer, const Expr& index, bool store) {
    BufferUse& use = (*uses_)[&buffer];
    use.stored |= store;
    if (index.get() != own_) use.only_own_element = false;
  }

  const VarNode* own_;
  std::map<const BufferNode*, BufferUse>* uses_;
};

std::map<const BufferNode*, BufferUse> UsesOf(const ForNode& loop) {
  std::map<const BufferNode*, BufferUse> uses;
  UseCollector(loop.var.get(), &uses).Visit(loop.body);
  return uses;
}

// Whether `next` may run in the threads of `merged` (whose buffer uses are
// `merged_uses`), after its iterations.
bool CanMerge(const ForNode& merged, const std::map<const BufferNode*, BufferUse>& merged_uses,
              const ForNode& next, const std::map<const BufferNode*, BufferUse>& next_uses) {
  if (!StructurallyEqual(Simplify(merged.extent), Simplify(next.extent))) return false;
  for (const auto& [buffer, use] : next_uses) {
    const auto earlier = merged_uses.find(buffer);
    if (earlier == merged_uses.end()) continue;
    // Storing what another thread's earlier iteration reads or stores races.
    if (use.stored) return false;
    if (!earlier->second.stored) continue;
    // Thread i may read what thread i stored, and nothing another thread did.
    if (!use.only_own_element || !earlier->second.only_own_element) return false;
  }
  return true;
}

const ForNode* AsThreadLoop(const Stmt& stmt) {
  if (stmt->kind != StmtKind::kFor) return nullptr;
  const auto* loop = static_cast<const ForNode*>(stmt.get());
  return loop->for_kind == ForKind::kGpuThreads ? loop : nullptr;
}

Stmt MergeSeq(const SeqNode& seq) {
  std::vector<Stmt> result;
  // The loop being grown: its variable, extent, body parts and buffer uses.
  const ForNode* first = nullptr;
  std::vector<Stmt> bodies;
  std::map<const BufferNode*, BufferUse> uses;
  auto flush = [&] {
    if (!first) return;
    result.push_back(For(first->var, first->extent, ForKind::kGpuThreads, Seq(bodies)));
    first = nullptr;
    bodies.clear();
    uses.clear();
  };
  for (const Stmt& stmt : seq.stmts) {
    const Stmt merged_inner = MergeGpuThreadLoops(stmt);
    const ForNode* loop = AsThreadLoop(merged_inner);
    if (!loop) {
      flush();
      result.push_back(merged_inner);
      continue;
    }
    std::map<const BufferNode*, BufferUse> loop_uses = UsesOf(*loop);
    if (first && CanMerge(*first, uses, *loop, loop_uses)) {
      // The later loop's variable is the merged loop's.
      bodies.push_back(Let(loop->var, first->var, loop->body));
    } else {
      flush();
      first = loop;
      bodies.push_back(loop->body);
    }
    for (const auto& [buffer, use] : loop_uses) {
      BufferUse& total = uses[buffer];
      total.stored |= use.stored;
      total.only_own_element &= use.only_own_element;
    }
  }
  flush();
  return Seq(std::move(result));
}

}  // namespace

Stmt MergeGpuThreadLoops(const Stmt& stmt) {
  switch (stmt->kind) {
    case StmtKind::kSeq:
      return MergeSeq(static_cast<const SeqNode&>(*stmt));
    case StmtKind::kAllocate: {
      const auto& allocate = static_cast<const AllocateNode&>(*stmt);
      return Allocate(allocate.buffer, MergeGpuThreadLoops(allocate.body));
    }
    case StmtKind::kAssert: {
      const auto& assertion = static_cast<const AssertNode&>(*stmt);
      return Assert(assertion.condition, assertion.message, MergeGpuThreadLoops(assertion.body));
    }
    case StmtKind::kLet: {
      const auto& let = static_cast<const LetNode&>(*stmt);
      return Let(let.var, let.value, MergeGpuThreadLoops(let.body));
    }
    default:
      return stmt;
  }
}

}  // namespace nimble::tir
