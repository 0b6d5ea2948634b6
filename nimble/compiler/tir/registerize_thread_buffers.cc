#include "nimble/compiler/tir/registerize_thread_buffers.h"

#include <map>
#include <set>
#include <utility>
#include <vector>

namespace nimble::tir {
namespace {

std::vector<Stmt> Items(const Stmt& stmt) {
  if (stmt->kind == StmtKind::kSeq) return static_cast<const SeqNode&>(*stmt).stmts;
  return {stmt};
}

// `items` as one sequence in which each let and each allocation of a
// thread's own buffer scopes everything after it: [A, let x = e { B }, C]
// becomes [A, let x = e { B, C }]. Variables and buffers are distinct nodes,
// so C computes the same with x in scope; afterwards a store at the top of
// the sequence precedes, in one scope, everything that runs after it in the
// thread.
Stmt WidenScopes(std::vector<Stmt> items) {
  for (size_t k = 0; k < items.size(); ++k) {
    const Stmt item = items[k];
    if (item->kind != StmtKind::kLet && item->kind != StmtKind::kAllocate) continue;
    const Stmt& body = item->kind == StmtKind::kLet ? static_cast<const LetNode&>(*item).body
                                                    : static_cast<const AllocateNode&>(*item).body;
    std::vector<Stmt> rest = Items(body);
    rest.insert(rest.end(), items.begin() + static_cast<std::ptrdiff_t>(k) + 1, items.end());
    items.resize(k);
    Stmt widened = WidenScopes(std::move(rest));
    if (item->kind == StmtKind::kLet) {
      const auto& let = static_cast<const LetNode&>(*item);
      items.push_back(Let(let.var, let.value, std::move(widened)));
    } else {
      items.push_back(Allocate(static_cast<const AllocateNode&>(*item).buffer, std::move(widened)));
    }
    break;
  }
  return Seq(std::move(items));
}

// Which of a thread loop's buffers can be values, from one walk over its
// widened body in the order the thread runs it.
class ThreadValueFinder {
 public:
  ThreadValueFinder(const Var& thread, const std::set<const BufferNode*>& candidates)
      : candidates_(candidates) {
    own_.insert(thread.get());
  }

  std::set<const BufferNode*> Find(const Stmt& body) {
    VisitInOrder(
        body, [&](const Stmt& stmt, bool top) { Note(stmt, top); },
        [&](const Expr& expr) { Note(expr); });
    std::set<const BufferNode*> found;
    for (const BufferNode* buffer : candidates_) {
      if (!refused_.count(buffer) && loaded_.count(buffer)) found.insert(buffer);
    }
    return found;
  }

 private:
  // A store at the top of the body runs exactly once in the thread and
  // before all that follows it.
  void Note(const Stmt& stmt, bool top) {
    if (stmt->kind == StmtKind::kLet) {
      const auto& let = static_cast<const LetNode&>(*stmt);
      if (IsOwn(let.value)) own_.insert(let.var.get());
    } else if (stmt->kind == StmtKind::kStore) {
      const auto& store = static_cast<const StoreNode&>(*stmt);
      const BufferNode* buffer = store.buffer.get();
      if (!candidates_.count(buffer)) return;
      if (!top || store.reassociate || !IsOwn(store.index) || !stored_.insert(buffer).second) {
        refused_.insert(buffer);
      }
    }
  }

  void Note(const Expr& expr) {
    if (expr->kind == ExprKind::kLoad) {
      const auto& load = static_cast<const LoadNode&>(*expr);
      const BufferNode* buffer = load.buffer.get();
      if (candidates_.count(buffer)) {
        // A load before the store would read what an earlier launch left.
        if (!stored_.count(buffer) || !IsOwn(load.index)) refused_.insert(buffer);
        loaded_.insert(buffer);
      }
    }
    ForEachOperand(expr, [&](const Expr& operand) { Note(operand); });
  }

  bool IsOwn(const Expr& index) const { return own_.count(index.get()) > 0; }

  const std::set<const BufferNode*>& candidates_;
  std::set<const ExprNode*> own_;  // the loop variable and its let-bound copies
  std::set<const BufferNode*> stored_, loaded_, refused_;
};

// The widened body with each store of a buffer in `values` bound as a let
// over the rest of its sequence, and each load of it that variable.
class ThreadValueRewriter {
 public:
  explicit ThreadValueRewriter(const std::set<const BufferNode*>& values) : values_(values) {}

  // Stores of value buffers sit only on the chain of sequences, lets and
  // allocations (ThreadValueFinder); below it only loads change.
  Stmt Rewrite(const Stmt& stmt) {
    switch (stmt->kind) {
      case StmtKind::kSeq:
        return RewriteItems(static_cast<const SeqNode&>(*stmt).stmts, 0);
      case StmtKind::kLet: {
        const auto& let = static_cast<const LetNode&>(*stmt);
        return Let(let.var, Rewrite(let.value), Rewrite(let.body));
      }
      case StmtKind::kAllocate: {
        const auto& allocate = static_cast<const AllocateNode&>(*stmt);
        return Allocate(allocate.buffer, Rewrite(allocate.body));
      }
      default:
        return MapExprs(stmt, [&](const Expr& expr) { return Rewrite(expr); });
    }
  }

 private:
  Stmt RewriteItems(const std::vector<Stmt>& items, size_t from) {
    std::vector<Stmt> result;
    for (size_t k = from; k < items.size(); ++k) {
      const Stmt& item = items[k];
      if (item->kind == StmtKind::kStore) {
        const auto& store = static_cast<const StoreNode&>(*item);
        if (values_.count(store.buffer.get())) {
          // The finder saw a load after this store, so the rest is not empty.
          const Var value = MakeVar(store.buffer->name, store.buffer->dtype);
          const Expr bound = Rewrite(store.value);
          bound_[store.buffer.get()] = value;
          result.push_back(Let(value, bound, RewriteItems(items, k + 1)));
          return Seq(std::move(result));
        }
      }
      result.push_back(Rewrite(item));
    }
    return Seq(std::move(result));
  }

  Expr Rewrite(const Expr& expr) {
    if (expr->kind == ExprKind::kLoad) {
      const auto found = bound_.find(static_cast<const LoadNode&>(*expr).buffer.get());
      if (found != bound_.end()) return found->second;
    }
    return MapOperands(expr, [&](const Expr& operand) { return Rewrite(operand); });
  }

  const std::set<const BufferNode*>& values_;
  std::map<const BufferNode*, Var> bound_;
};

// The allocated buffers of `stmt` and, for each buffer, the thread loops that
// touch it (nullptr for an access outside every thread loop).
class AccessCollector {
 public:
  std::set<const BufferNode*> allocated;
  std::map<const BufferNode*, std::set<const ForNode*>> loops;

  void Visit(const Stmt& stmt, const ForNode* loop) {
    switch (stmt->kind) {
      case StmtKind::kFor: {
        const auto& inner = static_cast<const ForNode&>(*stmt);
        Visit(inner.extent, loop);
        if (inner.min_chunk) Visit(inner.min_chunk, loop);
        const bool gpu =
            inner.for_kind == ForKind::kGpuThreads || inner.for_kind == ForKind::kGpuBlocks;
        return Visit(inner.body, gpu ? &inner : loop);
      }
      case StmtKind::kStore: {
        const auto& store = static_cast<const StoreNode&>(*stmt);
        loops[store.buffer.get()].insert(loop);
        Visit(store.index, loop);
        return Visit(store.value, loop);
      }
      case StmtKind::kLet: {
        const auto& let = static_cast<const LetNode&>(*stmt);
        Visit(let.value, loop);
        return Visit(let.body, loop);
      }
      case StmtKind::kIf: {
        const auto& branch = static_cast<const IfNode&>(*stmt);
        Visit(branch.condition, loop);
        Visit(branch.then_case, loop);
        if (branch.else_case) Visit(branch.else_case, loop);
        return;
      }
      case StmtKind::kSeq:
        for (const Stmt& inner : static_cast<const SeqNode&>(*stmt).stmts) Visit(inner, loop);
        return;
      case StmtKind::kAllocate: {
        const auto& allocate = static_cast<const AllocateNode&>(*stmt);
        // A block's shared buffer is never one thread's value.
        if (allocate.buffer->scope == MemoryScope::kDefault)
          allocated.insert(allocate.buffer.get());
        return Visit(allocate.body, loop);
      }
      case StmtKind::kAssert: {
        const auto& assertion = static_cast<const AssertNode&>(*stmt);
        Visit(assertion.condition, loop);
        return Visit(assertion.body, loop);
      }
      case StmtKind::kBarrier:
        return;
    }
  }

  void Visit(const Expr& expr, const ForNode* loop) {
    if (expr->kind == ExprKind::kLoad) {
      loops[static_cast<const LoadNode&>(*expr).buffer.get()].insert(loop);
    }
    ForEachOperand(expr, [&](const Expr& operand) { Visit(operand, loop); });
  }
};

// `stmt` with the thread loops' value buffers rewritten and their
// allocations dropped; `candidates` lists each thread loop's buffers that no
// other code touches.
class KernelRewriter {
 public:
  explicit KernelRewriter(std::map<const ForNode*, std::set<const BufferNode*>> candidates)
      : candidates_(std::move(candidates)) {}

  Stmt Rewrite(const Stmt& stmt) {
    switch (stmt->kind) {
      case StmtKind::kFor: {
        const auto& loop = static_cast<const ForNode&>(*stmt);
        const auto found = candidates_.find(&loop);
        if (found != candidates_.end()) return RewriteThreadLoop(loop, found->second);
        return For(loop.var, loop.extent, loop.for_kind, Rewrite(loop.body), loop.min_chunk);
      }
      case StmtKind::kLet: {
        const auto& let = static_cast<const LetNode&>(*stmt);
        return Let(let.var, let.value, Rewrite(let.body));
      }
      case StmtKind::kIf: {
        const auto& branch = static_cast<const IfNode&>(*stmt);
        return If(branch.condition, Rewrite(branch.then_case),
                  branch.else_case ? Rewrite(branch.else_case) : nullptr);
      }
      case StmtKind::kSeq: {
        std::vector<Stmt> items;
        for (const Stmt& inner : static_cast<const SeqNode&>(*stmt).stmts) {
          items.push_back(Rewrite(inner));
        }
        return Seq(std::move(items));
      }
      case StmtKind::kAllocate: {
        const auto& allocate = static_cast<const AllocateNode&>(*stmt);
        Stmt body = Rewrite(allocate.body);
        if (registerized_.count(allocate.buffer.get())) return body;
        return Allocate(allocate.buffer, std::move(body));
      }
      case StmtKind::kAssert: {
        const auto& assertion = static_cast<const AssertNode&>(*stmt);
        return Assert(assertion.condition, assertion.message, Rewrite(assertion.body));
      }
      case StmtKind::kStore:
      case StmtKind::kBarrier:
        return stmt;
    }
    return stmt;
  }

 private:
  Stmt RewriteThreadLoop(const ForNode& loop, const std::set<const BufferNode*>& candidates) {
    const Stmt widened = WidenScopes(Items(loop.body));
    const std::set<const BufferNode*> values =
        ThreadValueFinder(loop.var, candidates).Find(widened);
    if (values.empty()) return For(loop.var, loop.extent, loop.for_kind, loop.body);
    registerized_.insert(values.begin(), values.end());
    return For(loop.var, loop.extent, loop.for_kind, ThreadValueRewriter(values).Rewrite(widened));
  }

  std::map<const ForNode*, std::set<const BufferNode*>> candidates_;
  std::set<const BufferNode*> registerized_;
};

}  // namespace

Stmt RegisterizeThreadBuffers(const Stmt& stmt) {
  AccessCollector accesses;
  accesses.Visit(stmt, nullptr);
  std::map<const ForNode*, std::set<const BufferNode*>> candidates;
  for (const BufferNode* buffer : accesses.allocated) {
    const auto& loops = accesses.loops[buffer];
    if (loops.size() == 1 && *loops.begin() != nullptr) candidates[*loops.begin()].insert(buffer);
  }
  if (candidates.empty()) return stmt;
  return KernelRewriter(std::move(candidates)).Rewrite(stmt);
}

}  // namespace nimble::tir
