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
  }
  return "?";
}

}  // namespace nimble::tir
