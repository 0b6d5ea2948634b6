#include "nimble/compiler/tir/printer.h"

#include <sstream>

#include "nimble/vm/error.h"

namespace nimble::tir {
namespace {

std::string Pad(int indent) {
  return std::string(static_cast<size_t>(indent) * 2, ' ');
}

std::string FloatText(double value) {
  std::ostringstream text;
  text.precision(9);
  text << value;
  std::string result = text.str();
  if (result.find_first_of(".eEn") == std::string::npos) result += ".0";
  return result;
}

}  // namespace

std::string ToString(const Expr& expr) {
  switch (expr->kind) {
    case ExprKind::kIntImm: {
      const int64_t value = static_cast<const IntImmNode&>(*expr).value;
      if (expr->dtype.is_bool()) return value ? "true" : "false";
      const std::string text = std::to_string(value);
      return expr->dtype == DataType::Int64() ? text : text + "_" + expr->dtype.name();
    }
    case ExprKind::kFloatImm: {
      const std::string text = FloatText(static_cast<const FloatImmNode&>(*expr).value);
      return expr->dtype == DataType::Float32() ? text + "f" : text;
    }
    case ExprKind::kVar:
      return static_cast<const VarNode&>(*expr).name;
    case ExprKind::kBinary: {
      const auto& node = static_cast<const BinaryNode&>(*expr);
      const std::string op = BinaryOpName(node.op);
      if (op.size() > 1) return op + "(" + ToString(node.a) + ", " + ToString(node.b) + ")";
      return "(" + ToString(node.a) + " " + op + " " + ToString(node.b) + ")";
    }
    case ExprKind::kCompare: {
      const auto& node = static_cast<const CompareNode&>(*expr);
      return "(" + ToString(node.a) + " " + CompareOpName(node.op) + " " + ToString(node.b) + ")";
    }
    case ExprKind::kLogical: {
      const auto& node = static_cast<const LogicalNode&>(*expr);
      const char* op = node.op == LogicalOp::kAnd ? " && " : " || ";
      return "(" + ToString(node.a) + op + ToString(node.b) + ")";
    }
    case ExprKind::kNot:
      return "!" + ToString(static_cast<const NotNode&>(*expr).a);
    case ExprKind::kSelect: {
      const auto& node = static_cast<const SelectNode&>(*expr);
      return "select(" + ToString(node.condition) + ", " + ToString(node.true_value) + ", " +
             ToString(node.false_value) + ")";
    }
    case ExprKind::kCast:
      return expr->dtype.name() + "(" + ToString(static_cast<const CastNode&>(*expr).value) + ")";
    case ExprKind::kCall: {
      const auto& node = static_cast<const CallNode&>(*expr);
      std::string text = IntrinsicName(node.intrinsic) + "(";
      for (size_t i = 0; i < node.args.size(); ++i) {
        text += (i ? ", " : "") + ToString(node.args[i]);
      }
      return text + ")";
    }
    case ExprKind::kLoad: {
      const auto& node = static_cast<const LoadNode&>(*expr);
      return node.buffer->name + "[" + ToString(node.index) + "]";
    }
    case ExprKind::kTensorRead:
    case ExprKind::kReduce:
      break;
  }
  throw Error("tir: a tensor expression left in the loop IR");
}

std::string ToString(const Stmt& stmt, int indent) {
  const std::string pad = Pad(indent);
  switch (stmt->kind) {
    case StmtKind::kFor: {
      const auto& node = static_cast<const ForNode&>(*stmt);
      std::string text = pad + "for " + node.var->name + " in [0, " + ToString(node.extent) + ")";
      if (node.for_kind != ForKind::kSerial) text += " " + ForKindName(node.for_kind);
      if (node.for_kind == ForKind::kParallel) text += " chunk " + ToString(node.min_chunk);
      return text + " {\n" + ToString(node.body, indent + 1) + pad + "}\n";
    }
    case StmtKind::kStore: {
      const auto& node = static_cast<const StoreNode&>(*stmt);
      return pad + node.buffer->name + "[" + ToString(node.index) + "]" +
             (node.reassociate ? " =reassoc " : " = ") + ToString(node.value) + "\n";
    }
    case StmtKind::kLet: {
      const auto& node = static_cast<const LetNode&>(*stmt);
      return pad + "let " + node.var->name + " = " + ToString(node.value) + "\n" +
             ToString(node.body, indent);
    }
    case StmtKind::kIf: {
      const auto& node = static_cast<const IfNode&>(*stmt);
      std::string text = pad + "if " + ToString(node.condition) + " {\n" +
                         ToString(node.then_case, indent + 1) + pad + "}";
      if (node.else_case) text += " else {\n" + ToString(node.else_case, indent + 1) + pad + "}";
      return text + "\n";
    }
    case StmtKind::kSeq: {
      std::string text;
      for (const Stmt& inner : static_cast<const SeqNode&>(*stmt).stmts) {
        text += ToString(inner, indent);
      }
      return text;
    }
    case StmtKind::kAllocate: {
      const auto& node = static_cast<const AllocateNode&>(*stmt);
      std::string shape;
      for (const Expr& extent : node.buffer->shape) {
        shape += (shape.empty() ? "" : ", ") + ToString(extent);
      }
      const bool shared = node.buffer->scope == MemoryScope::kGpuShared;
      return pad + "allocate " + (shared ? "shared " : "") + node.buffer->name + ": " +
             node.buffer->dtype.name() + "[" + shape + "]\n" + ToString(node.body, indent);
    }
    case StmtKind::kAssert: {
      const auto& node = static_cast<const AssertNode&>(*stmt);
      return pad + "assert " + ToString(node.condition) + ", \"" + node.message + "\"\n" +
             ToString(node.body, indent);
    }
    case StmtKind::kBarrier:
      return pad + "barrier\n";
  }
  return pad + "?\n";
}

std::string ToString(const PrimFunc& func) {
  std::string text = std::string(func.device == PrimFunc::Device::kGpu ? "gpu " : "") + "kernel " +
                     func.name + "(";
  for (size_t i = 0; i < func.params.size(); ++i) {
    const Buffer& buffer = func.params[i];
    std::string shape;
    for (const Expr& extent : buffer->shape)
      shape += (shape.empty() ? "" : ", ") + ToString(extent);
    text += std::string(i ? ", " : "") + (static_cast<int>(i) < func.num_inputs ? "" : "out ") +
            buffer->name + ": " + buffer->dtype.name() + "[" + shape + "]";
  }
  return text + ") {\n" + ToString(func.body, 1) + "}\n";
}

}  // namespace nimble::tir
