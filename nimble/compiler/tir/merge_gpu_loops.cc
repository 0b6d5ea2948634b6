#include "nimble/compiler/tir/merge_gpu_loops.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "nimble/compiler/tir/simplify.h"

namespace nimble::tir {
namespace {

// How a loop body uses a buffer it accesses: whether it stores to it,
// whether every load and store is at index `own` (the loop variable), and,
// in a block loop, whether every store gives each thread of the block the
// same value at the same time: at the top of the body (not in an inner loop
// or a branch) and computed from block intrinsics' results, never from a
// thread's own partial values.
struct BufferUse {
  bool stored = false;
  bool only_own_element = true;
  bool stored_alike = true;
};

bool IsBlockIntrinsic(Intrinsic intrinsic) {
  return intrinsic == Intrinsic::kBlockSum || intrinsic == Intrinsic::kBlockProd ||
         intrinsic == Intrinsic::kBlockMax || intrinsic == Intrinsic::kBlockMin;
}

class UseCollector {
 public:
  UseCollector(const VarNode* own, std::map<const BufferNode*, BufferUse>* uses)
      : own_(own), uses_(uses) {}

  void Collect(const Stmt& body) {
    VisitInOrder(
        body, [&](const Stmt& stmt, bool top) { Note(stmt, top); },
        [&](const Expr& expr) { Note(expr); });
  }

 private:
  void Note(const Stmt& stmt, bool top) {
    if (stmt->kind == StmtKind::kStore) {
      const auto& store = static_cast<const StoreNode&>(*stmt);
      Access(*store.buffer, store.index, /*store=*/true);
      if (!top || !Alike(store.value)) (*uses_)[store.buffer.get()].stored_alike = false;
    } else if (stmt->kind == StmtKind::kLet) {
      const auto& let = static_cast<const LetNode&>(*stmt);
      if (!top || !Alike(let.value)) unlike_.insert(let.var.get());
    } else if (stmt->kind == StmtKind::kAllocate) {
      locals_.insert(static_cast<const AllocateNode&>(*stmt).buffer.get());
    }
  }

  void Note(const Expr& expr) {
    if (expr->kind == ExprKind::kLoad) {
      const auto& load = static_cast<const LoadNode&>(*expr);
      Access(*load.buffer, load.index, /*store=*/false);
    }
    ForEachOperand(expr, [&](const Expr& operand) { Note(operand); });
  }

  void Access(const BufferNode& buffer, const Expr& index, bool store) {
    BufferUse& use = (*uses_)[&buffer];
    use.stored |= store;
    if (index.get() != own_) use.only_own_element = false;
  }

  // Whether every thread of a block computes the same `expr`: it reads no
  // thread's own temporary and no variable bound from one, except through a
  // block intrinsic, whose result every thread shares.
  bool Alike(const Expr& expr) const {
    if (expr->kind == ExprKind::kCall &&
        IsBlockIntrinsic(static_cast<const CallNode&>(*expr).intrinsic)) {
      return true;
    }
    if (expr->kind == ExprKind::kLoad &&
        locals_.count(static_cast<const LoadNode&>(*expr).buffer.get())) {
      return false;
    }
    if (expr->kind == ExprKind::kVar && unlike_.count(static_cast<const VarNode*>(expr.get()))) {
      return false;
    }
    bool alike = true;
    ForEachOperand(expr, [&](const Expr& operand) { alike = alike && Alike(operand); });
    return alike;
  }

  const VarNode* own_;
  std::map<const BufferNode*, BufferUse>* uses_;
  std::set<const BufferNode*> locals_;
  std::set<const VarNode*> unlike_;
};

std::map<const BufferNode*, BufferUse> UsesOf(const ForNode& loop) {
  std::map<const BufferNode*, BufferUse> uses;
  UseCollector(loop.var.get(), &uses).Collect(loop.body);
  return uses;
}

void AddUses(const std::map<const BufferNode*, BufferUse>& uses,
             std::map<const BufferNode*, BufferUse>* total) {
  for (const auto& [buffer, use] : uses) {
    BufferUse& sum = (*total)[buffer];
    sum.stored |= use.stored;
    sum.only_own_element &= use.only_own_element;
    sum.stored_alike &= use.stored_alike;
  }
}

// Whether a later loop that uses its buffers as `later_uses` may run in the
// merged loop's threads (whose uses are `merged_uses`), after its iterations:
// it stores nothing the merged loop touches, and reads what the merged loop
// stored only where `reads_own(buffer)` says it reads its own element.
template <typename ReadsOwn>
bool MayFollow(bool blocks, const std::map<const BufferNode*, BufferUse>& merged_uses,
               const std::map<const BufferNode*, BufferUse>& later_uses, ReadsOwn reads_own) {
  for (const auto& [buffer, use] : later_uses) {
    const auto earlier = merged_uses.find(buffer);
    if (earlier == merged_uses.end()) continue;
    // Storing what another thread's earlier iteration reads or stores races.
    if (use.stored) return false;
    if (!earlier->second.stored) continue;
    // Thread i may read what thread i stored, and nothing another thread did;
    // in a block, what every thread stored alike.
    if (!earlier->second.only_own_element || (blocks && !earlier->second.stored_alike) ||
        !reads_own(buffer, use)) {
      return false;
    }
  }
  return true;
}

bool HoldsBlockThreads(const Stmt& body) {
  bool found = false;
  VisitInOrder(
      body,
      [&](const Stmt& stmt, bool) {
        found = found || (stmt->kind == StmtKind::kFor &&
                          static_cast<const ForNode&>(*stmt).for_kind == ForKind::kGpuBlockThreads);
      },
      [](const Expr&) {});
  return found;
}

// A launch that may merge with its neighbours: not one whose block size and
// threads its own kGpuBlockThreads loop fixes (a tiled kernel).
const ForNode* AsGpuLoop(const Stmt& stmt) {
  if (stmt->kind != StmtKind::kFor) return nullptr;
  const auto* loop = static_cast<const ForNode*>(stmt.get());
  const bool gpu = loop->for_kind == ForKind::kGpuThreads || loop->for_kind == ForKind::kGpuBlocks;
  return gpu && !HoldsBlockThreads(loop->body) ? loop : nullptr;
}

// The divisor C where `index` is floordiv(var, C), else null.
Expr RowDivisor(const Expr& index, const VarNode* var) {
  if (index->kind != ExprKind::kBinary) return nullptr;
  const auto& division = static_cast<const BinaryNode&>(*index);
  if (division.op != BinaryOp::kFloorDiv || division.a.get() != var) return nullptr;
  return division.b;
}

// The factors of a product (simplified), constants multiplied into one.
void Factors(const Expr& expr, std::vector<Expr>* factors, int64_t* constant) {
  int64_t value = 0;
  if (AsInt(expr, &value)) {
    *constant *= value;
    return;
  }
  if (expr->kind == ExprKind::kBinary &&
      static_cast<const BinaryNode&>(*expr).op == BinaryOp::kMul) {
    const auto& product = static_cast<const BinaryNode&>(*expr);
    Factors(product.a, factors, constant);
    return Factors(product.b, factors, constant);
  }
  factors->push_back(expr);
}

// Whether two extents are the same product in any order of its factors:
// (d2 * d1) * 12 and (d1 * 12) * d2, which the simplifier keeps apart.
bool SameProduct(const Expr& a, const Expr& b) {
  std::vector<Expr> a_factors, b_factors;
  int64_t a_constant = 1, b_constant = 1;
  Factors(Simplify(a), &a_factors, &a_constant);
  Factors(Simplify(b), &b_factors, &b_constant);
  if (a_constant != b_constant || a_factors.size() != b_factors.size()) return false;
  for (const Expr& factor : a_factors) {
    const auto match = std::find_if(b_factors.begin(), b_factors.end(), [&](const Expr& other) {
      return other && StructurallyEqual(factor, other);
    });
    if (match == b_factors.end()) return false;
    *match = nullptr;
  }
  return true;
}

// The row length C of a thread loop that reads rows of the block loop's
// results: each of its loads of a buffer the block loop stores (per
// `block_uses`) is at floordiv(i, C) for one C, and its extent is the block
// loop's times C. Null otherwise.
Expr RowLength(const ForNode& blocks, const ForNode& threads,
               const std::map<const BufferNode*, BufferUse>& block_uses) {
  Expr length;
  bool consistent = true;
  std::function<void(const Expr&)> visit = [&](const Expr& expr) {
    if (expr->kind == ExprKind::kLoad) {
      const auto& load = static_cast<const LoadNode&>(*expr);
      const auto use = block_uses.find(load.buffer.get());
      if (use != block_uses.end() && use->second.stored) {
        const Expr divisor = RowDivisor(load.index, threads.var.get());
        if (!divisor || (length && !StructurallyEqual(length, divisor))) {
          consistent = false;
        } else {
          length = divisor;
        }
      }
    }
    ForEachOperand(expr, visit);
  };
  VisitInOrder(
      threads.body, [](const Stmt&, bool) {}, visit);
  if (!consistent || !length) return nullptr;
  return SameProduct(threads.extent, Mul(blocks.extent, length)) ? length : nullptr;
}

// `threads` (over rows of `length` elements) as a gpu_block_stride loop over
// one row in the block loop whose variable is `row`: element i is row *
// length + j, so floordiv(i, length) is the row and floormod(i, length) is j.
Stmt AsRowLoop(const ForNode& threads, const Var& row, const Expr& length) {
  const Var column = MakeVar(threads.var->name + ".col");
  const VarNode* element = threads.var.get();
  std::function<Expr(const Expr&)> rewrite = [&](const Expr& expr) -> Expr {
    if (expr->kind == ExprKind::kBinary) {
      const auto& node = static_cast<const BinaryNode&>(*expr);
      if (node.a.get() == element && StructurallyEqual(node.b, length)) {
        if (node.op == BinaryOp::kFloorDiv) return row;
        if (node.op == BinaryOp::kFloorMod) return column;
      }
    }
    return MapOperands(expr, rewrite);
  };
  return For(column, length, ForKind::kGpuBlockStride,
             Let(threads.var, Add(Mul(row, length), column), MapExprs(threads.body, rewrite)));
}

Stmt MergeSeq(const SeqNode& seq) {
  std::vector<Stmt> result;
  // The loop being grown: its first loop, body parts and buffer uses.
  const ForNode* first = nullptr;
  std::vector<Stmt> bodies;
  std::map<const BufferNode*, BufferUse> uses;
  auto flush = [&] {
    if (!first) return;
    result.push_back(For(first->var, first->extent, first->for_kind, Seq(bodies)));
    first = nullptr;
    bodies.clear();
    uses.clear();
  };
  const auto reads_own = [](const BufferNode*, const BufferUse& use) {
    return use.only_own_element;
  };
  for (const Stmt& stmt : seq.stmts) {
    const Stmt merged_inner = MergeGpuThreadLoops(stmt);
    const ForNode* loop = AsGpuLoop(merged_inner);
    if (!loop) {
      flush();
      result.push_back(merged_inner);
      continue;
    }
    const bool blocks = first && first->for_kind == ForKind::kGpuBlocks;
    std::map<const BufferNode*, BufferUse> loop_uses = UsesOf(*loop);
    if (first && loop->for_kind == first->for_kind &&
        StructurallyEqual(Simplify(first->extent), Simplify(loop->extent)) &&
        MayFollow(blocks, uses, loop_uses, reads_own)) {
      // The later loop's variable is the merged loop's.
      bodies.push_back(Let(loop->var, first->var, loop->body));
      AddUses(loop_uses, &uses);
      continue;
    }
    // An elementwise loop over the block loop's rows runs in its blocks, a
    // launch saved: a softmax's or layer norm's last stage after its row
    // reductions.
    if (blocks && loop->for_kind == ForKind::kGpuThreads) {
      const Expr length = RowLength(*first, *loop, uses);
      if (length && MayFollow(true, uses, loop_uses, [](const BufferNode*, const BufferUse&) {
            return true;  // RowLength saw each read at the thread's own row
          })) {
        const Stmt row_loop = AsRowLoop(*loop, first->var, length);
        bodies.push_back(row_loop);
        std::map<const BufferNode*, BufferUse> row_uses;
        UseCollector(first->var.get(), &row_uses).Collect(row_loop);
        AddUses(row_uses, &uses);
        continue;
      }
    }
    flush();
    first = loop;
    bodies.push_back(loop->body);
    AddUses(loop_uses, &uses);
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
