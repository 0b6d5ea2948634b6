// Statements of the loop IR and the kernel they make up (PrimFunc): what a
// schedule lowers a fused primitive to, and what code generation emits.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nimble/compiler/tir/expr.h"

namespace nimble::tir {

enum class StmtKind { kFor, kStore, kLet, kIf, kSeq, kAllocate, kAssert, kBarrier };

// How a loop runs. kParallel splits its range over the process's thread pool
// in chunks of at least `min_chunk` iterations; kVectorized asks for SIMD
// lanes over the loop (the body must be free of loop-carried dependences
// except reductions marked `reassociate`); kUnrolled is a hint. kGpuThreads
// runs each iteration on a GPU thread of its own: the loop is one kernel
// launch, and its body reads and writes only device memory. kGpuBlocks is one
// launch too, an iteration per block of GPU threads: every thread of the block
// runs the body, except that a kGpuBlockStride loop in it deals its iterations
// out to the block's threads (thread t runs t, t + threads, ...), and a block
// intrinsic (expr.h) combines a value over the block's threads. The block's
// size is the code generator's; a block of one thread runs the same program.
// Unless the body holds a kGpuBlockThreads loop (at most one, not inside
// another GPU loop or a branch): its extent, a constant of at most 1024, is
// the block's size, and iteration t is thread t, so what the iteration
// keeps (its allocations, its lets) is that thread's own across the barriers
// (Barrier below) in it. Tiled kernels that stage data in kGpuShared buffers
// (expr.h) take that form: a thread's sums stay in its registers while the
// block loads tile after tile.
enum class ForKind {
  kSerial,
  kParallel,
  kVectorized,
  kUnrolled,
  kGpuThreads,
  kGpuBlocks,
  kGpuBlockStride,
  kGpuBlockThreads
};

struct StmtNode {
  explicit StmtNode(StmtKind kind) : kind(kind) {}
  virtual ~StmtNode() = default;
  const StmtKind kind;
};
using Stmt = std::shared_ptr<const StmtNode>;

// for (var = 0; var < extent; ++var) body
struct ForNode : StmtNode {
  ForNode(Var var, Expr extent, ForKind for_kind, Stmt body, Expr min_chunk)
      : StmtNode(StmtKind::kFor),
        var(std::move(var)),
        extent(std::move(extent)),
        for_kind(for_kind),
        body(std::move(body)),
        min_chunk(std::move(min_chunk)) {}
  const Var var;
  const Expr extent;
  const ForKind for_kind;
  const Stmt body;
  const Expr min_chunk;  // kParallel only
};

// buffer[index] = value. `reassociate`: the value accumulates into the same
// element across iterations (a reduction), and the code generator may
// reorder that accumulation (float sums vectorise only so).
struct StoreNode : StmtNode {
  StoreNode(Buffer buffer, Expr index, Expr value, bool reassociate)
      : StmtNode(StmtKind::kStore),
        buffer(std::move(buffer)),
        index(std::move(index)),
        value(std::move(value)),
        reassociate(reassociate) {}
  const Buffer buffer;
  const Expr index;
  const Expr value;
  const bool reassociate;
};

struct LetNode : StmtNode {
  LetNode(Var var, Expr value, Stmt body)
      : StmtNode(StmtKind::kLet),
        var(std::move(var)),
        value(std::move(value)),
        body(std::move(body)) {}
  const Var var;
  const Expr value;
  const Stmt body;
};

struct IfNode : StmtNode {
  IfNode(Expr condition, Stmt then_case, Stmt else_case)
      : StmtNode(StmtKind::kIf),
        condition(std::move(condition)),
        then_case(std::move(then_case)),
        else_case(std::move(else_case)) {}
  const Expr condition;
  const Stmt then_case;
  const Stmt else_case;  // may be null
};

struct SeqNode : StmtNode {
  explicit SeqNode(std::vector<Stmt> stmts) : StmtNode(StmtKind::kSeq), stmts(std::move(stmts)) {}
  const std::vector<Stmt> stmts;
};

// A temporary buffer, live in `body`: on the stack when its size is a small
// constant, else on the heap (freed on every exit).
struct AllocateNode : StmtNode {
  AllocateNode(Buffer buffer, Stmt body)
      : StmtNode(StmtKind::kAllocate), buffer(std::move(buffer)), body(std::move(body)) {}
  const Buffer buffer;
  const Stmt body;
};

// Fails the kernel with `message` unless `condition` holds, then runs `body`.
struct AssertNode : StmtNode {
  AssertNode(Expr condition, std::string message, Stmt body)
      : StmtNode(StmtKind::kAssert),
        condition(std::move(condition)),
        message(std::move(message)),
        body(std::move(body)) {}
  const Expr condition;
  const std::string message;
  const Stmt body;
};

// Every thread of the block waits here until all of them have arrived; what
// any of them stored to kGpuShared buffers before it, all of them read after
// it. Only in a kGpuBlockThreads loop, where every thread must reach it the
// same number of times (outside branches on the thread; loops around it run
// alike on every thread).
struct BarrierNode : StmtNode {
  BarrierNode() : StmtNode(StmtKind::kBarrier) {}
};

Stmt For(Var var, Expr extent, ForKind kind, Stmt body, Expr min_chunk = nullptr);
Stmt Store(Buffer buffer, Expr index, Expr value, bool reassociate = false);
Stmt Let(Var var, Expr value, Stmt body);
Stmt If(Expr condition, Stmt then_case, Stmt else_case = nullptr);
// Flattens nested sequences; one statement is returned as it is.
Stmt Seq(std::vector<Stmt> stmts);
Stmt Allocate(Buffer buffer, Stmt body);
Stmt Assert(Expr condition, std::string message, Stmt body);
Stmt Barrier();

// `stmt` with `fn` applied to each whole expression in it (extents, indices,
// stored values, let values, conditions), nested statements included.
Stmt MapExprs(const Stmt& stmt, const std::function<Expr(const Expr&)>& fn);

// Walks `stmt` in the order a thread runs it: `on_expr` sees each whole
// expression of a statement, then `on_stmt` the statement, then its nested
// statements. `top` is true for a statement on `stmt`'s chain of sequences,
// lets and allocations, which runs once and after everything before it on
// that chain (not inside an inner loop, a branch or an assertion).
void VisitInOrder(const Stmt& stmt, const std::function<void(const Stmt&, bool top)>& on_stmt,
                  const std::function<void(const Expr&)>& on_expr);

// A kernel with the runtime's calling convention (nimble/vm/kernel.h): its
// parameters are the DLTensor arguments, inputs then outputs, in order. On
// entry it checks the argument count, each argument's device, dtype and rank,
// binds each shape variable at its first occurrence and checks every other
// dimension against the buffer's shape; then it runs `body`.
struct PrimFunc {
  // Where the buffers live: kGpu kernels take device pointers, and their
  // stores and loads happen only inside kGpuThreads and kGpuBlocks loops.
  enum class Device { kCpu, kGpu };

  std::string name;
  std::vector<Buffer> params;
  int num_inputs = 0;
  Stmt body;
  Device device = Device::kCpu;
};

std::string ForKindName(ForKind kind);

}  // namespace nimble::tir
