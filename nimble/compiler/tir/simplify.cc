#include "nimble/compiler/tir/simplify.h"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

namespace nimble::tir {
namespace {

// An inclusive range of values; a missing end is unbounded.
struct Range {
  std::optional<int64_t> lo, hi;
};

std::optional<int64_t> CheckedAdd(std::optional<int64_t> a, std::optional<int64_t> b) {
  int64_t sum;
  if (!a || !b || __builtin_add_overflow(*a, *b, &sum)) return std::nullopt;
  return sum;
}

std::optional<int64_t> CheckedSub(std::optional<int64_t> a, std::optional<int64_t> b) {
  int64_t difference;
  if (!a || !b || __builtin_sub_overflow(*a, *b, &difference)) return std::nullopt;
  return difference;
}

std::optional<int64_t> CheckedMul(std::optional<int64_t> a, std::optional<int64_t> b) {
  int64_t product;
  if (!a || !b || __builtin_mul_overflow(*a, *b, &product)) return std::nullopt;
  return product;
}

// Only int64 arithmetic is index arithmetic; narrower integers wrap, and
// ranges would not hold for them.
bool IsIndex(const Expr& expr) {
  return expr->dtype == DataType::Int64();
}

const BinaryNode* AsBinary(const Expr& expr, BinaryOp op) {
  if (expr->kind != ExprKind::kBinary) return nullptr;
  const auto* node = static_cast<const BinaryNode*>(expr.get());
  return node->op == op ? node : nullptr;
}

std::vector<Expr> Operands(const Expr& expr) {
  std::vector<Expr> operands;
  ForEachOperand(expr, [&](const Expr& operand) { operands.push_back(operand); });
  return operands;
}

// Whether `a` and `b` compute the same value by their structure: the same
// nodes up to the order of commutative operands.
bool Equal(const Expr& a, const Expr& b) {
  if (a == b) return true;
  if (a->kind != b->kind || !(a->dtype == b->dtype)) return false;
  switch (a->kind) {
    case ExprKind::kIntImm:
      return static_cast<const IntImmNode&>(*a).value == static_cast<const IntImmNode&>(*b).value;
    case ExprKind::kFloatImm:
      return static_cast<const FloatImmNode&>(*a).value ==
             static_cast<const FloatImmNode&>(*b).value;
    case ExprKind::kBinary: {
      const auto& x = static_cast<const BinaryNode&>(*a);
      const auto& y = static_cast<const BinaryNode&>(*b);
      if (x.op != y.op) return false;
      if (Equal(x.a, y.a) && Equal(x.b, y.b)) return true;
      const bool commutative = x.op == BinaryOp::kAdd || x.op == BinaryOp::kMul ||
                               x.op == BinaryOp::kMin || x.op == BinaryOp::kMax;
      return commutative && Equal(x.a, y.b) && Equal(x.b, y.a);
    }
    case ExprKind::kCompare:
      if (static_cast<const CompareNode&>(*a).op != static_cast<const CompareNode&>(*b).op) {
        return false;
      }
      break;
    case ExprKind::kLogical:
      if (static_cast<const LogicalNode&>(*a).op != static_cast<const LogicalNode&>(*b).op) {
        return false;
      }
      break;
    case ExprKind::kCall:
      if (static_cast<const CallNode&>(*a).intrinsic !=
          static_cast<const CallNode&>(*b).intrinsic) {
        return false;
      }
      break;
    case ExprKind::kLoad:
      if (static_cast<const LoadNode&>(*a).buffer != static_cast<const LoadNode&>(*b).buffer) {
        return false;
      }
      break;
    case ExprKind::kNot:
    case ExprKind::kSelect:
    case ExprKind::kCast:
      break;
    case ExprKind::kVar:
    case ExprKind::kTensorRead:
    case ExprKind::kReduce:
      return false;
  }
  const std::vector<Expr> x = Operands(a);
  const std::vector<Expr> y = Operands(b);
  return std::equal(x.begin(), x.end(), y.begin(), y.end(), Equal);
}

// The terms of a sum; a sum times a constant is distributed, so that
// (i * 2 + b) * 16 shows its multiple of 32 (reshapes and transposes of
// symbolic shapes compose such indices).
void CollectTerms(const Expr& expr, std::vector<Expr>* terms) {
  if (const BinaryNode* add = AsBinary(expr, BinaryOp::kAdd)) {
    CollectTerms(add->a, terms);
    CollectTerms(add->b, terms);
    return;
  }
  if (const BinaryNode* product = AsBinary(expr, BinaryOp::kMul)) {
    int64_t factor;
    for (const auto& [sum, constant] :
         {std::pair(product->a, product->b), std::pair(product->b, product->a)}) {
      const BinaryNode* add = AsBinary(sum, BinaryOp::kAdd);
      if (add && AsInt(constant, &factor)) {
        CollectTerms(Mul(add->a, constant), terms);
        CollectTerms(Mul(add->b, constant), terms);
        return;
      }
    }
  }
  terms->push_back(expr);
}

Expr SumOf(const std::vector<Expr>& terms) {
  Expr sum = IntImm(0);
  for (const Expr& term : terms) sum = Add(sum, term);
  return sum;
}

// q such that term == q * divisor, or null when the structure does not show one.
Expr QuotientOf(const Expr& term, const Expr& divisor) {
  if (Equal(term, divisor)) return IntImm(1);
  int64_t value, factor;
  if (AsInt(divisor, &factor) && factor != 0 && AsInt(term, &value) && value % factor == 0) {
    return IntImm(value / factor);
  }
  if (const BinaryNode* product = AsBinary(term, BinaryOp::kMul)) {
    if (Expr q = QuotientOf(product->b, divisor)) return Mul(product->a, q);
    if (Expr q = QuotientOf(product->a, divisor)) return Mul(q, product->b);
    // (x * 2) * 16 over 32: x * 2 over 2.
    int64_t multiplier;
    if (AsInt(divisor, &factor) && factor > 0 && AsInt(product->b, &multiplier) && multiplier > 0 &&
        factor % multiplier == 0) {
      return QuotientOf(product->a, IntImm(factor / multiplier));
    }
  }
  return nullptr;
}

struct VarFacts {
  Range range;
  Expr extent;       // a loop variable's exclusive bound; null for a let
  Expr replacement;  // a let's constant value, substituted for it
};

class Simplifier {
 public:
  PrimFunc Run(const PrimFunc& func) {
    PrimFunc result;
    result.name = func.name;
    result.num_inputs = func.num_inputs;
    result.device = func.device;
    for (const Buffer& param : func.params) result.params.push_back(MapBuffer(param));
    result.body = Visit(func.body);
    return result;
  }

  Expr Visit(const Expr& expr) {
    if (expr->kind == ExprKind::kVar) {
      const auto found = facts_.find(static_cast<const VarNode*>(expr.get()));
      return found != facts_.end() && found->second.replacement ? found->second.replacement : expr;
    }
    if (expr->kind == ExprKind::kIntImm || expr->kind == ExprKind::kFloatImm) return expr;
    const auto found = memo_.find(expr.get());
    if (found != memo_.end()) return found->second;
    Expr result;
    if (expr->kind == ExprKind::kLoad) {
      const auto& load = static_cast<const LoadNode&>(*expr);
      result = Load(MapBuffer(load.buffer), Visit(load.index));
    } else {
      result = Rewrite(MapOperands(expr, [this](const Expr& operand) { return Visit(operand); }));
    }
    memo_.emplace(expr.get(), result);
    return result;
  }

 private:
  Stmt Visit(const Stmt& stmt) {
    if (!stmt) return stmt;
    switch (stmt->kind) {
      case StmtKind::kFor: {
        const auto& loop = static_cast<const ForNode&>(*stmt);
        const Expr extent = VisitInScope(loop.extent);
        const Expr min_chunk = loop.min_chunk ? VisitInScope(loop.min_chunk) : nullptr;
        const Range extent_range = RangeOf(extent);
        Stmt body = WithFacts(loop.var, {{0, CheckedSub(extent_range.hi, 1)}, extent, nullptr},
                              [&] { return Visit(loop.body); });
        return For(loop.var, extent, loop.for_kind, std::move(body), min_chunk);
      }
      case StmtKind::kStore: {
        const auto& store = static_cast<const StoreNode&>(*stmt);
        return tir::Store(MapBuffer(store.buffer), VisitInScope(store.index),
                          VisitInScope(store.value), store.reassociate);
      }
      case StmtKind::kLet: {
        const auto& let = static_cast<const LetNode&>(*stmt);
        const Expr value = VisitInScope(let.value);
        const Range range = IsIndex(value) ? RangeOf(value) : Range{};
        if (value->kind == ExprKind::kIntImm) {
          return WithFacts(let.var, {range, nullptr, value}, [&] { return Visit(let.body); });
        }
        Stmt body = WithFacts(let.var, {range, nullptr, nullptr}, [&] { return Visit(let.body); });
        return Let(let.var, value, std::move(body));
      }
      case StmtKind::kIf: {
        const auto& branch = static_cast<const IfNode&>(*stmt);
        const Expr condition = VisitInScope(branch.condition);
        int64_t known;
        if (AsInt(condition, &known)) {
          const Stmt taken = known ? branch.then_case : branch.else_case;
          return taken ? Visit(taken) : Seq({});
        }
        return If(condition, Visit(branch.then_case), Visit(branch.else_case));
      }
      case StmtKind::kSeq: {
        std::vector<Stmt> stmts;
        for (const Stmt& inner : static_cast<const SeqNode&>(*stmt).stmts) {
          stmts.push_back(Visit(inner));
        }
        return Seq(std::move(stmts));
      }
      case StmtKind::kAllocate: {
        const auto& allocate = static_cast<const AllocateNode&>(*stmt);
        return Allocate(MapBuffer(allocate.buffer), Visit(allocate.body));
      }
      case StmtKind::kAssert: {
        const auto& check = static_cast<const AssertNode&>(*stmt);
        const Expr condition = VisitInScope(check.condition);
        int64_t known;
        if (AsInt(condition, &known) && known) return Visit(check.body);
        return Assert(condition, check.message, Visit(check.body));
      }
      case StmtKind::kBarrier:
        return stmt;
    }
    return stmt;
  }

  // Memoised results hold only for the facts they were found under.
  Expr VisitInScope(const Expr& expr) {
    memo_.clear();
    return Visit(expr);
  }

  template <typename Body>
  Stmt WithFacts(const Var& var, VarFacts facts, const Body& body) {
    facts_[var.get()] = std::move(facts);
    Stmt result = body();
    facts_.erase(var.get());
    return result;
  }

  // Buffers keep their identity unless their shape simplifies; a replaced
  // buffer replaces the old one everywhere.
  Buffer MapBuffer(const Buffer& buffer) {
    const auto found = buffers_.find(buffer.get());
    if (found != buffers_.end()) return found->second;
    std::vector<Expr> shape;
    bool changed = false;
    for (const Expr& dim : buffer->shape) {
      shape.push_back(Simplify(dim));
      changed = changed || shape.back() != dim;
    }
    Buffer mapped = changed ? std::make_shared<BufferNode>(buffer->name, buffer->dtype,
                                                           std::move(shape), buffer->scope)
                            : buffer;
    buffers_.emplace(buffer.get(), mapped);
    return mapped;
  }

  Range RangeOf(const Expr& expr) const {
    if (!IsIndex(expr)) {
      if (expr->kind == ExprKind::kCast &&
          static_cast<const CastNode&>(*expr).value->dtype.is_bool()) {
        return {0, 1};
      }
      return {};
    }
    int64_t value;
    if (AsInt(expr, &value)) return {value, value};
    switch (expr->kind) {
      case ExprKind::kVar: {
        const auto found = facts_.find(static_cast<const VarNode*>(expr.get()));
        // Any other index variable is a dimension.
        return found == facts_.end() ? Range{0, std::nullopt} : found->second.range;
      }
      case ExprKind::kBinary:
        return BinaryRange(static_cast<const BinaryNode&>(*expr));
      case ExprKind::kSelect: {
        const auto& select = static_cast<const SelectNode&>(*expr);
        const Range a = RangeOf(select.true_value);
        const Range b = RangeOf(select.false_value);
        return {a.lo && b.lo ? std::optional(std::min(*a.lo, *b.lo)) : std::nullopt,
                a.hi && b.hi ? std::optional(std::max(*a.hi, *b.hi)) : std::nullopt};
      }
      case ExprKind::kCast:
        if (static_cast<const CastNode&>(*expr).value->dtype.is_bool()) return {0, 1};
        return {};
      default:
        return {};
    }
  }

  Range BinaryRange(const BinaryNode& node) const {
    const Range a = RangeOf(node.a);
    const Range b = RangeOf(node.b);
    switch (node.op) {
      case BinaryOp::kAdd:
        return {CheckedAdd(a.lo, b.lo), CheckedAdd(a.hi, b.hi)};
      case BinaryOp::kSub:
        return {CheckedSub(a.lo, b.hi), CheckedSub(a.hi, b.lo)};
      case BinaryOp::kMul: {
        if (a.lo && a.hi && b.lo && b.hi) {
          const std::optional<int64_t> products[] = {CheckedMul(a.lo, b.lo), CheckedMul(a.lo, b.hi),
                                                     CheckedMul(a.hi, b.lo),
                                                     CheckedMul(a.hi, b.hi)};
          Range range{products[0], products[0]};
          for (const auto& product : products) {
            if (!product) return {};
            range.lo = std::min(*range.lo, *product);
            range.hi = std::max(*range.hi, *product);
          }
          return range;
        }
        if (a.lo && *a.lo >= 0 && b.lo && *b.lo >= 0) {
          return {CheckedMul(a.lo, b.lo), CheckedMul(a.hi, b.hi)};
        }
        return {};
      }
      case BinaryOp::kFloorDiv: {
        int64_t divisor;
        if (AsInt(node.b, &divisor) && divisor > 0) {
          return {a.lo ? std::optional(FloorDivide(*a.lo, divisor)) : std::nullopt,
                  a.hi ? std::optional(FloorDivide(*a.hi, divisor)) : std::nullopt};
        }
        if (b.lo && *b.lo >= 1 && a.lo && *a.lo >= 0) return {0, a.hi};
        return {};
      }
      case BinaryOp::kFloorMod: {
        if (!b.lo || *b.lo < 1) return {};
        Range range{0, CheckedSub(b.hi, 1)};
        if (a.lo && *a.lo >= 0 && a.hi) range.hi = range.hi ? std::min(*range.hi, *a.hi) : *a.hi;
        return range;
      }
      case BinaryOp::kMin:
        return {a.lo && b.lo ? std::optional(std::min(*a.lo, *b.lo)) : std::nullopt,
                a.hi && b.hi ? std::optional(std::min(*a.hi, *b.hi))
                : a.hi       ? a.hi
                             : b.hi};
      case BinaryOp::kMax:
        return {a.lo && b.lo ? std::optional(std::max(*a.lo, *b.lo))
                : a.lo       ? a.lo
                             : b.lo,
                a.hi && b.hi ? std::optional(std::max(*a.hi, *b.hi)) : std::nullopt};
      case BinaryOp::kDiv:
        return {};
    }
    return {};
  }

  bool ProveNonNegative(const Expr& expr) const {
    const Range range = RangeOf(expr);
    return range.lo && *range.lo >= 0;
  }

  // An expression U with expr < U, from the loops' bounds: a loop variable's
  // extent, a remainder's divisor, and for p * s + r with r < s the bound
  // U(p) * s (how flattened indices nest).
  Expr ExclusiveBound(const Expr& expr) const {
    if (expr->kind == ExprKind::kVar) {
      const auto found = facts_.find(static_cast<const VarNode*>(expr.get()));
      if (found != facts_.end() && found->second.extent) return found->second.extent;
    }
    if (const BinaryNode* mod = AsBinary(expr, BinaryOp::kFloorMod)) {
      const Range divisor = RangeOf(mod->b);
      if (divisor.lo && *divisor.lo >= 1) return mod->b;
    }
    if (const BinaryNode* add = AsBinary(expr, BinaryOp::kAdd)) {
      for (const auto& [scaled, rest] : {std::pair(add->a, add->b), std::pair(add->b, add->a)}) {
        if (!ProveNonNegative(rest)) continue;
        const Expr stride = ExclusiveBound(rest);
        if (!stride) continue;
        const Expr outer = QuotientOf(scaled, stride);
        if (!outer || !ProveNonNegative(outer)) continue;
        if (const Expr outer_bound = ExclusiveBound(outer)) return Mul(outer_bound, stride);
      }
    }
    const Range range = RangeOf(expr);
    if (const std::optional<int64_t> bound = CheckedAdd(range.hi, 1)) return IntImm(*bound);
    return nullptr;
  }

  // Whether expr < bound holds wherever the facts do.
  bool ProveLess(const Expr& expr, const Expr& bound) const {
    const Range x = RangeOf(expr);
    const Range y = RangeOf(bound);
    if (x.hi && y.lo && *x.hi < *y.lo) return true;
    const Expr exclusive = ExclusiveBound(expr);
    if (!exclusive) return false;
    int64_t value;
    return Equal(exclusive, bound) || (AsInt(exclusive, &value) && y.lo && value <= *y.lo);
  }

  // Splits `expr`'s terms into multiples of `divisor` (their quotients) and
  // the rest.
  void SplitMultiples(const Expr& expr, const Expr& divisor, std::vector<Expr>* quotients,
                      std::vector<Expr>* rest) const {
    std::vector<Expr> terms;
    CollectTerms(expr, &terms);
    for (const Expr& term : terms) {
      if (Expr quotient = QuotientOf(term, divisor)) {
        quotients->push_back(std::move(quotient));
      } else {
        rest->push_back(term);
      }
    }
  }

  Expr Rewrite(const Expr& expr) {
    if (expr->kind == ExprKind::kSelect) {
      const auto& select = static_cast<const SelectNode&>(*expr);
      return Equal(select.true_value, select.false_value) ? select.true_value : expr;
    }
    if (expr->kind == ExprKind::kCompare)
      return RewriteCompare(static_cast<const CompareNode&>(*expr), expr);
    if (expr->kind != ExprKind::kBinary || !IsIndex(expr)) return expr;
    const auto& node = static_cast<const BinaryNode&>(*expr);
    switch (node.op) {
      case BinaryOp::kFloorDiv:
        return RewriteFloorDiv(node.a, node.b, expr);
      case BinaryOp::kFloorMod:
        return RewriteFloorMod(node.a, node.b, expr);
      case BinaryOp::kAdd:
        return RewriteSum(expr);
      default:
        return expr;
    }
  }

  // floordiv(q * e + r, e) = q + floordiv(r, e), and floordiv(r, e) = 0 for
  // 0 <= r < e; floordiv(floordiv(x, a), b) = floordiv(x, a * b) for a, b > 0.
  Expr RewriteFloorDiv(const Expr& dividend, const Expr& divisor, const Expr& original) {
    if (ProveNonNegative(dividend) && ProveLess(dividend, divisor)) return IntImm(0);
    int64_t outer, inner;
    if (const BinaryNode* nested = AsBinary(dividend, BinaryOp::kFloorDiv)) {
      if (AsInt(divisor, &outer) && outer > 0 && AsInt(nested->b, &inner) && inner > 0 &&
          CheckedMul(outer, inner)) {
        return Rewrite(FloorDiv(nested->a, IntImm(outer * inner)));
      }
    }
    std::vector<Expr> quotients, rest;
    SplitMultiples(dividend, divisor, &quotients, &rest);
    if (quotients.empty()) return original;
    return Rewrite(
        Add(SumOf(quotients), rest.empty() ? IntImm(0) : Rewrite(FloorDiv(SumOf(rest), divisor))));
  }

  // floormod(q * e + r, e) = floormod(r, e), which is r for 0 <= r < e.
  Expr RewriteFloorMod(const Expr& dividend, const Expr& divisor, const Expr& original) {
    if (ProveNonNegative(dividend) && ProveLess(dividend, divisor)) return dividend;
    if (const BinaryNode* nested = AsBinary(dividend, BinaryOp::kFloorMod)) {
      if (Equal(nested->b, divisor)) return dividend;
    }
    std::vector<Expr> quotients, rest;
    SplitMultiples(dividend, divisor, &quotients, &rest);
    if (quotients.empty()) return original;
    return rest.empty() ? IntImm(0) : Rewrite(FloorMod(SumOf(rest), divisor));
  }

  // floordiv(x, e) * e + floormod(x, e) = x, and constants summed last.
  Expr RewriteSum(const Expr& sum) {
    std::vector<Expr> terms;
    CollectTerms(sum, &terms);
    bool changed = false;
    for (size_t i = 0; i < terms.size(); ++i) {
      const BinaryNode* mod = AsBinary(terms[i], BinaryOp::kFloorMod);
      if (!mod) continue;
      for (size_t j = 0; j < terms.size(); ++j) {
        const Expr quotient = j == i ? nullptr : QuotientOf(terms[j], mod->b);
        const BinaryNode* div = quotient ? AsBinary(quotient, BinaryOp::kFloorDiv) : nullptr;
        if (!div || !Equal(div->a, mod->a) || !Equal(div->b, mod->b)) continue;
        terms[i] = mod->a;
        terms.erase(terms.begin() + static_cast<std::ptrdiff_t>(j));
        changed = true;
        break;
      }
    }
    int64_t constant = 0, value;
    size_t constants = 0;
    std::vector<Expr> variable;
    for (const Expr& term : terms) {
      if (AsInt(term, &value)) {
        constant =
            static_cast<int64_t>(static_cast<uint64_t>(constant) + static_cast<uint64_t>(value));
        ++constants;
      } else {
        variable.push_back(term);
      }
    }
    if (!changed && constants <= 1) return sum;
    return Rewrite(Add(SumOf(variable), IntImm(constant)));
  }

  Expr RewriteCompare(const CompareNode& node, const Expr& original) const {
    if (!IsIndex(node.a)) return original;
    const bool equal = Equal(node.a, node.b);
    const Range a = RangeOf(node.a);
    const Range b = RangeOf(node.b);
    // Whether x < y, x <= y is proven.
    const auto less = [&](const Expr& x, const Range& rx, const Expr& y, const Range& ry) {
      return (rx.hi && ry.lo && *rx.hi < *ry.lo) || ProveLess(x, y);
    };
    const auto less_equal = [&](const Range& rx, const Range& ry) {
      return rx.hi && ry.lo && *rx.hi <= *ry.lo;
    };
    switch (node.op) {
      case CompareOp::kEq:
        if (equal) return BoolImm(true);
        if (less(node.a, a, node.b, b) || less(node.b, b, node.a, a)) return BoolImm(false);
        return original;
      case CompareOp::kNe:
        if (equal) return BoolImm(false);
        if (less(node.a, a, node.b, b) || less(node.b, b, node.a, a)) return BoolImm(true);
        return original;
      case CompareOp::kLt:
        if (less(node.a, a, node.b, b)) return BoolImm(true);
        if (equal || less_equal(b, a)) return BoolImm(false);
        return original;
      case CompareOp::kLe:
        if (equal || less_equal(a, b)) return BoolImm(true);
        if (less(node.b, b, node.a, a)) return BoolImm(false);
        return original;
      case CompareOp::kGt:
        if (less(node.b, b, node.a, a)) return BoolImm(true);
        if (equal || less_equal(a, b)) return BoolImm(false);
        return original;
      case CompareOp::kGe:
        if (equal || less_equal(b, a)) return BoolImm(true);
        if (less(node.a, a, node.b, b)) return BoolImm(false);
        return original;
    }
    return original;
  }

  std::unordered_map<const VarNode*, VarFacts> facts_;
  std::unordered_map<const ExprNode*, Expr> memo_;
  std::unordered_map<const BufferNode*, Buffer> buffers_;
};

}  // namespace

PrimFunc Simplify(const PrimFunc& func) {
  return Simplifier().Run(func);
}

Expr Simplify(const Expr& expr) {
  return Simplifier().Visit(expr);
}

bool StructurallyEqual(const Expr& a, const Expr& b) {
  return Equal(a, b);
}

}  // namespace nimble::tir
