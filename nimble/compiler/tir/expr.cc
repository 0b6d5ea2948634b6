#include "nimble/compiler/tir/expr.h"

#include <cmath>
#include <utility>

#include "nimble/vm/error.h"

namespace nimble::tir {
namespace {

bool IsZero(const Expr& expr) {
  int64_t value;
  return AsInt(expr, &value) && value == 0;
}

bool IsOne(const Expr& expr) {
  int64_t value;
  return AsInt(expr, &value) && value == 1;
}

// The integer result of `op` on two constants, or false when it is not
// foldable here (division by zero is left for run time to report).
bool FoldInts(BinaryOp op, int64_t a, int64_t b, int64_t* out) {
  switch (op) {
    case BinaryOp::kAdd:
      *out = static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
      return true;
    case BinaryOp::kSub:
      *out = static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
      return true;
    case BinaryOp::kMul:
      *out = static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
      return true;
    case BinaryOp::kFloorDiv:
      if (b == 0) return false;
      *out = FloorDivide(a, b);
      return true;
    case BinaryOp::kFloorMod:
      if (b == 0) return false;
      *out = a - FloorDivide(a, b) * b;
      return true;
    case BinaryOp::kMin:
      *out = std::min(a, b);
      return true;
    case BinaryOp::kMax:
      *out = std::max(a, b);
      return true;
    case BinaryOp::kDiv:
      return false;
  }
  return false;
}

}  // namespace

int64_t WrapToDType(int64_t value, DataType dtype) {
  if (dtype.is_bool()) return value != 0;
  if (dtype.bits() >= 64) return value;
  const uint64_t bits = static_cast<uint64_t>(value) & ((uint64_t{1} << dtype.bits()) - 1);
  if (dtype.code() == DataType::Code::kUInt) return static_cast<int64_t>(bits);
  const uint64_t sign = uint64_t{1} << (dtype.bits() - 1);
  return static_cast<int64_t>((bits ^ sign) - sign);
}

int64_t FloorDivide(int64_t a, int64_t b) {
  const int64_t quotient = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? quotient - 1 : quotient;
}

Expr IntImm(int64_t value, DataType dtype) {
  return std::make_shared<IntImmNode>(dtype, dtype.is_int() ? WrapToDType(value, dtype) : value);
}

Expr FloatImm(double value, DataType dtype) {
  return std::make_shared<FloatImmNode>(dtype, value);
}

Expr BoolImm(bool value) {
  return IntImm(value ? 1 : 0, DataType::Bool());
}

Var MakeVar(std::string name, DataType dtype) {
  return std::make_shared<VarNode>(std::move(name), dtype);
}

Expr Binary(BinaryOp op, Expr a, Expr b) {
  if (!(a->dtype == b->dtype)) {
    throw Error("tir: " + BinaryOpName(op) + " of " + a->dtype.name() + " and " + b->dtype.name());
  }
  int64_t x, y, folded;
  if (AsInt(a, &x) && AsInt(b, &y) && a->dtype.is_int() && FoldInts(op, x, y, &folded)) {
    return IntImm(folded, a->dtype);
  }
  switch (op) {
    case BinaryOp::kAdd:
      if (IsZero(a)) return b;
      if (IsZero(b)) return a;
      break;
    case BinaryOp::kSub:
      if (IsZero(b)) return a;
      break;
    case BinaryOp::kMul:
      if (IsOne(a)) return b;
      if (IsOne(b)) return a;
      if (a->dtype.is_int() && (IsZero(a) || IsZero(b))) return IntImm(0, a->dtype);
      break;
    case BinaryOp::kFloorDiv:
      if (IsOne(b)) return a;
      break;
    case BinaryOp::kFloorMod:
      if (IsOne(b)) return IntImm(0, a->dtype);
      break;
    default:
      break;
  }
  return std::make_shared<BinaryNode>(op, std::move(a), std::move(b));
}

Expr Add(Expr a, Expr b) {
  return Binary(BinaryOp::kAdd, std::move(a), std::move(b));
}
Expr Sub(Expr a, Expr b) {
  return Binary(BinaryOp::kSub, std::move(a), std::move(b));
}
Expr Mul(Expr a, Expr b) {
  return Binary(BinaryOp::kMul, std::move(a), std::move(b));
}
Expr Div(Expr a, Expr b) {
  return Binary(BinaryOp::kDiv, std::move(a), std::move(b));
}
Expr FloorDiv(Expr a, Expr b) {
  return Binary(BinaryOp::kFloorDiv, std::move(a), std::move(b));
}
Expr FloorMod(Expr a, Expr b) {
  return Binary(BinaryOp::kFloorMod, std::move(a), std::move(b));
}
Expr Min(Expr a, Expr b) {
  return Binary(BinaryOp::kMin, std::move(a), std::move(b));
}
Expr Max(Expr a, Expr b) {
  return Binary(BinaryOp::kMax, std::move(a), std::move(b));
}

Expr Compare(CompareOp op, Expr a, Expr b) {
  if (!(a->dtype == b->dtype)) {
    throw Error("tir: " + CompareOpName(op) + " of " + a->dtype.name() + " and " + b->dtype.name());
  }
  int64_t x, y;
  if (AsInt(a, &x) && AsInt(b, &y)) {
    switch (op) {
      case CompareOp::kEq:
        return BoolImm(x == y);
      case CompareOp::kNe:
        return BoolImm(x != y);
      case CompareOp::kLt:
        return BoolImm(x < y);
      case CompareOp::kLe:
        return BoolImm(x <= y);
      case CompareOp::kGt:
        return BoolImm(x > y);
      case CompareOp::kGe:
        return BoolImm(x >= y);
    }
  }
  return std::make_shared<CompareNode>(op, std::move(a), std::move(b));
}

Expr And(Expr a, Expr b) {
  int64_t value;
  if (AsInt(a, &value)) return value ? b : a;
  if (AsInt(b, &value)) return value ? a : b;
  return std::make_shared<LogicalNode>(LogicalOp::kAnd, std::move(a), std::move(b));
}

Expr Or(Expr a, Expr b) {
  int64_t value;
  if (AsInt(a, &value)) return value ? a : b;
  if (AsInt(b, &value)) return value ? b : a;
  return std::make_shared<LogicalNode>(LogicalOp::kOr, std::move(a), std::move(b));
}

Expr Not(Expr a) {
  int64_t value;
  if (AsInt(a, &value)) return BoolImm(value == 0);
  return std::make_shared<NotNode>(std::move(a));
}

Expr Select(Expr condition, Expr true_value, Expr false_value) {
  if (!(true_value->dtype == false_value->dtype)) {
    throw Error("tir: select of " + true_value->dtype.name() + " and " + false_value->dtype.name());
  }
  int64_t value;
  if (AsInt(condition, &value)) return value ? true_value : false_value;
  return std::make_shared<SelectNode>(std::move(condition), std::move(true_value),
                                      std::move(false_value));
}

Expr Cast(DataType dtype, Expr value) {
  if (value->dtype == dtype) return value;
  int64_t constant;
  if (AsInt(value, &constant) && dtype.is_int() &&
      (value->dtype.is_int() || value->dtype.is_bool())) {
    return IntImm(constant, dtype);
  }
  return std::make_shared<CastNode>(dtype, std::move(value));
}

Expr Call(Intrinsic intrinsic, std::vector<Expr> args) {
  const size_t arity = intrinsic == Intrinsic::kPow || intrinsic == Intrinsic::kFmod ||
                               intrinsic == Intrinsic::kCheckIndex
                           ? 2
                           : 1;
  if (args.size() != arity) {
    throw Error("tir: " + IntrinsicName(intrinsic) + " takes " + std::to_string(arity) +
                " argument(s), got " + std::to_string(args.size()));
  }
  return std::make_shared<CallNode>(intrinsic, std::move(args));
}

Expr Load(Buffer buffer, Expr index) {
  return std::make_shared<LoadNode>(std::move(buffer), std::move(index));
}

Expr Constant(DataType dtype, double value) {
  if (dtype.is_float()) return FloatImm(value, dtype);
  if (dtype.is_bool()) return BoolImm(value != 0);
  return IntImm(static_cast<int64_t>(std::llround(value)), dtype);
}

bool AsInt(const Expr& expr, int64_t* value) {
  if (expr->kind != ExprKind::kIntImm) return false;
  *value = static_cast<const IntImmNode&>(*expr).value;
  return true;
}

Expr FlatIndex(const std::vector<Expr>& shape, const std::vector<Expr>& indices) {
  if (shape.size() != indices.size()) {
    throw Error("tir: " + std::to_string(indices.size()) + " indices into a rank-" +
                std::to_string(shape.size()) + " buffer");
  }
  Expr flat = IntImm(0);
  for (size_t i = 0; i < shape.size(); ++i) flat = Add(Mul(flat, shape[i]), indices[i]);
  return flat;
}

Expr NumElements(const std::vector<Expr>& shape) {
  Expr count = IntImm(1);
  for (const Expr& extent : shape) count = Mul(count, extent);
  return count;
}

void ForEachOperand(const Expr& expr, const std::function<void(const Expr&)>& fn) {
  switch (expr->kind) {
    case ExprKind::kBinary: {
      const auto& node = static_cast<const BinaryNode&>(*expr);
      fn(node.a);
      fn(node.b);
      return;
    }
    case ExprKind::kCompare: {
      const auto& node = static_cast<const CompareNode&>(*expr);
      fn(node.a);
      fn(node.b);
      return;
    }
    case ExprKind::kLogical: {
      const auto& node = static_cast<const LogicalNode&>(*expr);
      fn(node.a);
      fn(node.b);
      return;
    }
    case ExprKind::kNot:
      fn(static_cast<const NotNode&>(*expr).a);
      return;
    case ExprKind::kSelect: {
      const auto& node = static_cast<const SelectNode&>(*expr);
      fn(node.condition);
      fn(node.true_value);
      fn(node.false_value);
      return;
    }
    case ExprKind::kCast:
      fn(static_cast<const CastNode&>(*expr).value);
      return;
    case ExprKind::kCall:
      for (const Expr& arg : static_cast<const CallNode&>(*expr).args) fn(arg);
      return;
    case ExprKind::kLoad:
      fn(static_cast<const LoadNode&>(*expr).index);
      return;
    case ExprKind::kIntImm:
    case ExprKind::kFloatImm:
    case ExprKind::kVar:
    case ExprKind::kTensorRead:
    case ExprKind::kReduce:
      return;
  }
}

Expr MapOperands(const Expr& expr, const std::function<Expr(const Expr&)>& fn) {
  switch (expr->kind) {
    case ExprKind::kIntImm:
    case ExprKind::kFloatImm:
    case ExprKind::kVar:
      return expr;
    case ExprKind::kBinary: {
      const auto& node = static_cast<const BinaryNode&>(*expr);
      return Binary(node.op, fn(node.a), fn(node.b));
    }
    case ExprKind::kCompare: {
      const auto& node = static_cast<const CompareNode&>(*expr);
      return Compare(node.op, fn(node.a), fn(node.b));
    }
    case ExprKind::kLogical: {
      const auto& node = static_cast<const LogicalNode&>(*expr);
      return node.op == LogicalOp::kAnd ? And(fn(node.a), fn(node.b)) : Or(fn(node.a), fn(node.b));
    }
    case ExprKind::kNot:
      return Not(fn(static_cast<const NotNode&>(*expr).a));
    case ExprKind::kSelect: {
      const auto& node = static_cast<const SelectNode&>(*expr);
      return Select(fn(node.condition), fn(node.true_value), fn(node.false_value));
    }
    case ExprKind::kCast:
      return Cast(expr->dtype, fn(static_cast<const CastNode&>(*expr).value));
    case ExprKind::kCall: {
      const auto& node = static_cast<const CallNode&>(*expr);
      std::vector<Expr> args;
      for (const Expr& arg : node.args) args.push_back(fn(arg));
      return Call(node.intrinsic, std::move(args));
    }
    case ExprKind::kLoad: {
      const auto& node = static_cast<const LoadNode&>(*expr);
      return Load(node.buffer, fn(node.index));
    }
    case ExprKind::kTensorRead:
    case ExprKind::kReduce:
      break;
  }
  throw Error("tir: a tensor read or reduction is left in lowered loop IR");
}

std::string BinaryOpName(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "+";
    case BinaryOp::kSub:
      return "-";
    case BinaryOp::kMul:
      return "*";
    case BinaryOp::kDiv:
      return "/";
    case BinaryOp::kFloorDiv:
      return "floordiv";
    case BinaryOp::kFloorMod:
      return "floormod";
    case BinaryOp::kMin:
      return "min";
    case BinaryOp::kMax:
      return "max";
  }
  return "?";
}

std::string CompareOpName(CompareOp op) {
  switch (op) {
    case CompareOp::kEq:
      return "==";
    case CompareOp::kNe:
      return "!=";
    case CompareOp::kLt:
      return "<";
    case CompareOp::kLe:
      return "<=";
    case CompareOp::kGt:
      return ">";
    case CompareOp::kGe:
      return ">=";
  }
  return "?";
}

std::string IntrinsicName(Intrinsic intrinsic) {
  switch (intrinsic) {
    case Intrinsic::kExp:
      return "exp";
    case Intrinsic::kLog:
      return "log";
    case Intrinsic::kSqrt:
      return "sqrt";
    case Intrinsic::kRsqrt:
      return "rsqrt";
    case Intrinsic::kTanh:
      return "tanh";
    case Intrinsic::kSigmoid:
      return "sigmoid";
    case Intrinsic::kErf:
      return "erf";
    case Intrinsic::kErfc:
      return "erfc";
    case Intrinsic::kAbs:
      return "abs";
    case Intrinsic::kRound:
      return "round";
    case Intrinsic::kFloor:
      return "floor";
    case Intrinsic::kCeil:
      return "ceil";
    case Intrinsic::kPow:
      return "pow";
    case Intrinsic::kFmod:
      return "fmod";
    case Intrinsic::kCheckIndex:
      return "check_index";
    case Intrinsic::kBlockSum:
      return "block_sum";
    case Intrinsic::kBlockProd:
      return "block_prod";
    case Intrinsic::kBlockMax:
      return "block_max";
    case Intrinsic::kBlockMin:
      return "block_min";
  }
  return "?";
}

}  // namespace nimble::tir
