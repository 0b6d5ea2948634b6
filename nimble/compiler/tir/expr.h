// Scalar expressions of the loop IR, shared with the tensor-expression layer
// (nimble/compiler/te), which adds two kinds of its own: a read of a tensor at
// multi-dimensional indices and a reduction. Lowering (te/lower.h) replaces
// both by loads and loops, so code generation only ever sees the others.
//
// Nodes are immutable and shared; a variable is identified by its node, not
// by its name (names only make printed IR readable). Index arithmetic is
// int64; `kFloorDiv`/`kFloorMod` are the index divisions (operands there are
// never negative, and floor semantics keep the simplifier's facts simple).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nimble/vm/dtype.h"

namespace nimble::tir {

enum class ExprKind {
  kIntImm,
  kFloatImm,
  kVar,
  kBinary,
  kCompare,
  kLogical,
  kNot,
  kSelect,
  kCast,
  kCall,
  kLoad,
  kTensorRead,  // te only
  kReduce,      // te only
};

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kFloorDiv, kFloorMod, kMin, kMax };
enum class CompareOp { kEq, kNe, kLt, kLe, kGt, kGe };
enum class LogicalOp { kAnd, kOr };
// Math functions of one float argument (kPow and kFmod, C's fmod: two). Code generation expands
// each into inline instructions so that loops around them vectorise.
// kCheckIndex(i, n) is the integer i, checked to lie in [0, n): the kernel
// fails otherwise (a GPU thread traps). kBlockSum, kBlockProd, kBlockMax and
// kBlockMin(x) combine x over the threads of a GPU block (stmt.h's
// kGpuBlocks), as the reduction of that kind combines two values (max and min
// skip NaNs), and give every thread the result: every thread of the block must
// reach them, so they sit outside kGpuBlockStride loops and branches.
enum class Intrinsic {
  kExp,
  kLog,
  kSqrt,
  kRsqrt,
  kTanh,
  kSigmoid,
  kErf,
  kErfc,
  kAbs,
  kRound,
  kFloor,
  kCeil,
  kPow,
  kFmod,
  kCheckIndex,
  kBlockSum,
  kBlockProd,
  kBlockMax,
  kBlockMin
};

struct ExprNode {
  ExprNode(ExprKind kind, DataType dtype) : kind(kind), dtype(dtype) {}
  virtual ~ExprNode() = default;
  const ExprKind kind;
  const DataType dtype;
};
using Expr = std::shared_ptr<const ExprNode>;

struct IntImmNode : ExprNode {
  IntImmNode(DataType dtype, int64_t value) : ExprNode(ExprKind::kIntImm, dtype), value(value) {}
  const int64_t value;  // bool: 0 or 1
};

struct FloatImmNode : ExprNode {
  FloatImmNode(DataType dtype, double value) : ExprNode(ExprKind::kFloatImm, dtype), value(value) {}
  const double value;
};

struct VarNode : ExprNode {
  VarNode(std::string name, DataType dtype)
      : ExprNode(ExprKind::kVar, dtype), name(std::move(name)) {}
  const std::string name;
};
using Var = std::shared_ptr<const VarNode>;

struct BinaryNode : ExprNode {
  BinaryNode(BinaryOp op, Expr a, Expr b)
      : ExprNode(ExprKind::kBinary, a->dtype), op(op), a(std::move(a)), b(std::move(b)) {}
  const BinaryOp op;
  const Expr a, b;
};

struct CompareNode : ExprNode {
  CompareNode(CompareOp op, Expr a, Expr b)
      : ExprNode(ExprKind::kCompare, DataType::Bool()), op(op), a(std::move(a)), b(std::move(b)) {}
  const CompareOp op;
  const Expr a, b;
};

struct LogicalNode : ExprNode {
  LogicalNode(LogicalOp op, Expr a, Expr b)
      : ExprNode(ExprKind::kLogical, DataType::Bool()), op(op), a(std::move(a)), b(std::move(b)) {}
  const LogicalOp op;
  const Expr a, b;
};

struct NotNode : ExprNode {
  explicit NotNode(Expr a) : ExprNode(ExprKind::kNot, DataType::Bool()), a(std::move(a)) {}
  const Expr a;
};

struct SelectNode : ExprNode {
  SelectNode(Expr condition, Expr true_value, Expr false_value)
      : ExprNode(ExprKind::kSelect, true_value->dtype),
        condition(std::move(condition)),
        true_value(std::move(true_value)),
        false_value(std::move(false_value)) {}
  const Expr condition, true_value, false_value;
};

// Conversion with the runtime's semantics: float to int saturates (NaN gives
// 0), anything to bool is "!= 0".
struct CastNode : ExprNode {
  CastNode(DataType dtype, Expr value)
      : ExprNode(ExprKind::kCast, dtype), value(std::move(value)) {}
  const Expr value;
};

struct CallNode : ExprNode {
  CallNode(Intrinsic intrinsic, std::vector<Expr> args)
      : ExprNode(ExprKind::kCall, args.at(0)->dtype), intrinsic(intrinsic), args(std::move(args)) {}
  const Intrinsic intrinsic;
  const std::vector<Expr> args;
};

// Where a temporary lives. kDefault: where the code allocating it runs (the
// CPU's stack or heap; a GPU thread's own registers or local memory; device
// memory for the host side of a GPU kernel). kGpuShared: one copy per block
// of a kGpuBlocks loop, which all its threads read and write (stmt.h's
// kGpuBlockThreads and barrier say when a thread sees another's stores).
enum class MemoryScope { kDefault, kGpuShared };

// A flat, row-major buffer: a kernel parameter or a temporary. Its shape is
// in index expressions (int64), whose variables a kernel binds on entry from
// its arguments' DLTensor shapes.
struct BufferNode {
  BufferNode(std::string name, DataType dtype, std::vector<Expr> shape,
             MemoryScope scope = MemoryScope::kDefault)
      : name(std::move(name)), dtype(dtype), shape(std::move(shape)), scope(scope) {}
  const std::string name;
  const DataType dtype;
  const std::vector<Expr> shape;
  const MemoryScope scope;
};
using Buffer = std::shared_ptr<const BufferNode>;

struct LoadNode : ExprNode {
  LoadNode(Buffer buffer, Expr index)
      : ExprNode(ExprKind::kLoad, buffer->dtype),
        buffer(std::move(buffer)),
        index(std::move(index)) {}
  const Buffer buffer;
  const Expr index;  // in elements
};

// Constructors; the arithmetic ones fold constants and drop identities (x + 0,
// x * 1), which keeps index expressions of static shapes short before any
// simplification pass runs. Binary operands must have equal dtypes.
Expr IntImm(int64_t value, DataType dtype = DataType::Int64());
Expr FloatImm(double value, DataType dtype = DataType::Float32());
Expr BoolImm(bool value);
Var MakeVar(std::string name, DataType dtype = DataType::Int64());
Expr Binary(BinaryOp op, Expr a, Expr b);
Expr Add(Expr a, Expr b);
Expr Sub(Expr a, Expr b);
Expr Mul(Expr a, Expr b);
Expr Div(Expr a, Expr b);
Expr FloorDiv(Expr a, Expr b);
Expr FloorMod(Expr a, Expr b);
Expr Min(Expr a, Expr b);
Expr Max(Expr a, Expr b);
Expr Compare(CompareOp op, Expr a, Expr b);
Expr And(Expr a, Expr b);
Expr Or(Expr a, Expr b);
Expr Not(Expr a);
Expr Select(Expr condition, Expr true_value, Expr false_value);
Expr Cast(DataType dtype, Expr value);
Expr Call(Intrinsic intrinsic, std::vector<Expr> args);
Expr Load(Buffer buffer, Expr index);
// A constant of `dtype` with `value` (rounded to an integer for int dtypes).
Expr Constant(DataType dtype, double value);

// `value` wrapped into the range of the integer or bool `dtype`, as
// run-time arithmetic and casts wrap it (bool: value != 0).
int64_t WrapToDType(int64_t value, DataType dtype);
// a / b rounded towards negative infinity; b != 0.
int64_t FloorDivide(int64_t a, int64_t b);

// The value of an integer constant; false for anything else.
bool AsInt(const Expr& expr, int64_t* value);
// The row-major flat index of `indices` in a buffer of `shape`.
Expr FlatIndex(const std::vector<Expr>& shape, const std::vector<Expr>& indices);
// The product of `shape`'s extents (1 for a scalar).
Expr NumElements(const std::vector<Expr>& shape);

// Calls `fn` on each direct operand of `expr`, in order; constants,
// variables and te's own kinds have none here.
void ForEachOperand(const Expr& expr, const std::function<void(const Expr&)>& fn);
// `expr` rebuilt through the constructors above (so it folds again) with
// each direct operand replaced by `fn(operand)`; loads keep their buffer.
// Leaves come back as they are; te's own kinds throw nimble::Error.
Expr MapOperands(const Expr& expr, const std::function<Expr(const Expr&)>& fn);

std::string BinaryOpName(BinaryOp op);
std::string CompareOpName(CompareOp op);
std::string IntrinsicName(Intrinsic intrinsic);

}  // namespace nimble::tir
