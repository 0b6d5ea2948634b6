#include "nimble/compiler/tir/stmt.h"

#include <utility>

#include "nimble/vm/error.h"

namespace nimble::tir {

Stmt For(Var var, Expr extent, ForKind kind, Stmt body, Expr min_chunk) {
  if (kind == ForKind::kParallel && !min_chunk) min_chunk = IntImm(1);
  return std::make_shared<ForNode>(std::move(var), std::move(extent), kind, std::move(body),
                                   std::move(min_chunk));
}

Stmt Store(Buffer buffer, Expr index, Expr value, bool reassociate) {
  if (!(buffer->dtype == value->dtype)) {
    throw Error("tir: store of " + value->dtype.name() + " into " + buffer->dtype.name() +
                " buffer " + buffer->name);
  }
  return std::make_shared<StoreNode>(std::move(buffer), std::move(index), std::move(value),
                                     reassociate);
}

Stmt Let(Var var, Expr value, Stmt body) {
  return std::make_shared<LetNode>(std::move(var), std::move(value), std::move(body));
}

Stmt If(Expr condition, Stmt then_case, Stmt else_case) {
  return std::make_shared<IfNode>(std::move(condition), std::move(then_case), std::move(else_case));
}

Stmt Seq(std::vector<Stmt> stmts) {
  std::vector<Stmt> flat;
  for (Stmt& stmt : stmts) {
    if (!stmt) continue;
    if (stmt->kind == StmtKind::kSeq) {
      const auto& inner = static_cast<const SeqNode&>(*stmt).stmts;
      flat.insert(flat.end(), inner.begin(), inner.end());
    } else {
      flat.push_back(std::move(stmt));
    }
  }
  if (flat.size() == 1) return flat[0];
  return std::make_shared<SeqNode>(std::move(flat));
}

Stmt Allocate(Buffer buffer, Stmt body) {
  return std::make_shared<AllocateNode>(std::move(buffer), std::move(body));
}

Stmt Assert(Expr condition, std::string message, Stmt body) {
  return std::make_shared<AssertNode>(std::move(condition), std::move(message), std::move(body));
}

Stmt Barrier() {
  return std::make_shared<BarrierNode>();
}

Stmt MapExprs(const Stmt& stmt, const std::function<Expr(const Expr&)>& fn) {
  switch (stmt->kind) {
    case StmtKind::kFor: {
      const auto& loop = static_cast<const ForNode&>(*stmt);
      return For(loop.var, fn(loop.extent), loop.for_kind, MapExprs(loop.body, fn),
                 loop.min_chunk ? fn(loop.min_chunk) : nullptr);
    }
    case StmtKind::kStore: {
      const auto& store = static_cast<const StoreNode&>(*stmt);
      return Store(store.buffer, fn(store.index), fn(store.value), store.reassociate);
    }
    case StmtKind::kLet: {
      const auto& let = static_cast<const LetNode&>(*stmt);
      return Let(let.var, fn(let.value), MapExprs(let.body, fn));
    }
    case StmtKind::kIf: {
      const auto& branch = static_cast<const IfNode&>(*stmt);
      return If(fn(branch.condition), MapExprs(branch.then_case, fn),
                branch.else_case ? MapExprs(branch.else_case, fn) : nullptr);
    }
    case StmtKind::kSeq: {
      std::vector<Stmt> stmts;
      for (const Stmt& inner : static_cast<const SeqNode&>(*stmt).stmts) {
        stmts.push_back(MapExprs(inner, fn));
      }
      return Seq(std::move(stmts));
    }
    case StmtKind::kAllocate: {
      const auto& allocate = static_cast<const AllocateNode&>(*stmt);
      return Allocate(allocate.buffer, MapExprs(allocate.body, fn));
    }
    case StmtKind::kAssert: {
      const auto& assertion = static_cast<const AssertNode&>(*stmt);
      return Assert(fn(assertion.condition), assertion.message, MapExprs(assertion.body, fn));
    }
    case StmtKind::kBarrier:
      return stmt;
  }
  return stmt;
}

namespace {

void VisitInOrder(const Stmt& stmt, bool top,
                  const std::function<void(const Stmt&, bool top)>& on_stmt,
                  const std::function<void(const Expr&)>& on_expr) {
  switch (stmt->kind) {
    case StmtKind::kFor: {
      const auto& loop = static_cast<const ForNode&>(*stmt);
      on_expr(loop.extent);
      if (loop.min_chunk) on_expr(loop.min_chunk);
      on_stmt(stmt, top);
      return VisitInOrder(loop.body, false, on_stmt, on_expr);
    }
    case StmtKind::kStore: {
      const auto& store = static_cast<const StoreNode&>(*stmt);
      on_expr(store.index);
      on_expr(store.value);
      return on_stmt(stmt, top);
    }
    case StmtKind::kLet: {
      const auto& let = static_cast<const LetNode&>(*stmt);
      on_expr(let.value);
      on_stmt(stmt, top);
      return VisitInOrder(let.body, top, on_stmt, on_expr);
    }
    case StmtKind::kIf: {
      const auto& branch = static_cast<const IfNode&>(*stmt);
      on_expr(branch.condition);
      on_stmt(stmt, top);
      VisitInOrder(branch.then_case, false, on_stmt, on_expr);
      if (branch.else_case) VisitInOrder(branch.else_case, false, on_stmt, on_expr);
      return;
    }
    case StmtKind::kSeq:
      on_stmt(stmt, top);
      for (const Stmt& inner : static_cast<const SeqNode&>(*stmt).stmts) {
        VisitInOrder(inner, top, on_stmt, on_expr);
      }
      return;
    case StmtKind::kAllocate:
      on_stmt(stmt, top);
      return VisitInOrder(static_cast<const AllocateNode&>(*stmt).body, top, on_stmt, on_expr);
    case StmtKind::kAssert: {
      const auto& assertion = static_cast<const AssertNode&>(*stmt);
      on_expr(assertion.condition);
      on_stmt(stmt, top);
      return VisitInOrder(assertion.body, false, on_stmt, on_expr);
    }
    case StmtKind::kBarrier:
      return on_stmt(stmt, top);
  }
}

}  // namespace

void VisitInOrder(const Stmt& stmt, const std::function<void(const Stmt&, bool top)>& on_stmt,
                  const std::function<void(const Expr&)>& on_expr) {
  VisitInOrder(stmt, true, on_stmt, on_expr);
}

std::string ForKindName(ForKind kind) {
  switch (kind) {
    case ForKind::kSerial:
      return "serial";
    case ForKind::kParallel:
      return "parallel";
    case ForKind::kVectorized:
      return "vectorized";
    case ForKind::kUnrolled:
      return "unrolled";
    case ForKind::kGpuThreads:
      return "gpu_threads";
    case ForKind::kGpuBlocks:
      return "gpu_blocks";
    case ForKind::kGpuBlockStride:
      return "gpu_block_stride";
    case ForKind::kGpuBlockThreads:
      return "gpu_block_threads";
  }
  return "?";
}

}  // namespace nimble::tir
