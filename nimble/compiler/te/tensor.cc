#include "nimble/compiler/te/tensor.h"

#include <limits>
#include <utility>

#include "nimble/vm/error.h"

namespace nimble::te {

Tensor Placeholder(std::string name, DataType dtype, std::vector<Expr> shape) {
  return std::make_shared<TensorNode>(std::move(name), dtype, std::move(shape), std::vector<Var>{},
                                      nullptr);
}

Tensor Compute(std::string name, std::vector<Expr> shape,
               const std::function<Expr(const std::vector<Expr>& indices)>& body,
               ScheduleHint hint) {
  std::vector<Var> axes;
  std::vector<Expr> indices;
  for (size_t i = 0; i < shape.size(); ++i) {
    axes.push_back(tir::MakeVar(name + ".i" + std::to_string(i)));
    indices.push_back(axes.back());
  }
  Expr value = body(indices);
  const DataType dtype = value->dtype;
  return std::make_shared<TensorNode>(std::move(name), dtype, std::move(shape), std::move(axes),
                                      std::move(value), hint);
}

Tensor Rearrange(std::string name, const Tensor& data, std::vector<Expr> shape,
                 const IndexMap& source, IndexMap placement) {
  const Tensor moved =
      Compute(std::move(name), std::move(shape),
              [&](const std::vector<Expr>& indices) { return Read(data, source(indices)); });
  return std::make_shared<TensorNode>(moved->name, moved->dtype, moved->shape, moved->axes,
                                      moved->body, moved->hint, std::move(placement));
}

Expr Read(const Tensor& tensor, std::vector<Expr> indices) {
  if (indices.size() != tensor->shape.size()) {
    throw Error("te: " + std::to_string(indices.size()) + " indices into " + tensor->name +
                " of rank " + std::to_string(tensor->shape.size()));
  }
  return std::make_shared<TensorReadNode>(tensor, std::move(indices));
}

ReduceAxis MakeReduceAxis(std::string name, Expr extent) {
  return ReduceAxis{tir::MakeVar(std::move(name)), std::move(extent)};
}

Expr Reduce(ReduceKind kind, Expr source, std::vector<ReduceAxis> axes) {
  return std::make_shared<ReduceNode>(kind, std::move(source), std::move(axes));
}

Expr ReduceIdentity(ReduceKind kind, DataType dtype) {
  switch (kind) {
    case ReduceKind::kSum:
      return tir::Constant(dtype, 0);
    case ReduceKind::kProd:
      return tir::Constant(dtype, 1);
    case ReduceKind::kMax:
      if (dtype.is_float()) return tir::FloatImm(-std::numeric_limits<double>::infinity(), dtype);
      if (dtype.is_bool()) return tir::BoolImm(false);
      if (dtype.code() == DataType::Code::kUInt) return tir::IntImm(0, dtype);
      return tir::IntImm(dtype.bits() == 64 ? std::numeric_limits<int64_t>::min()
                                            : -(int64_t{1} << (dtype.bits() - 1)),
                         dtype);
    case ReduceKind::kMin:
      if (dtype.is_float()) return tir::FloatImm(std::numeric_limits<double>::infinity(), dtype);
      if (dtype.is_bool()) return tir::BoolImm(true);
      if (dtype.code() == DataType::Code::kUInt) {
        return tir::IntImm((int64_t{1} << dtype.bits()) - 1, dtype);
      }
      return tir::IntImm(dtype.bits() == 64 ? std::numeric_limits<int64_t>::max()
                                            : (int64_t{1} << (dtype.bits() - 1)) - 1,
                         dtype);
  }
  throw Error("te: unknown reduction");
}

Expr ReduceCombine(ReduceKind kind, Expr a, Expr b) {
  switch (kind) {
    case ReduceKind::kSum:
      return tir::Add(std::move(a), std::move(b));
    case ReduceKind::kProd:
      return tir::Mul(std::move(a), std::move(b));
    // b replaces a only when strictly better, as in the runtime's reductions:
    // NaNs are skipped (tir::Max is maximum's, which propagates them).
    case ReduceKind::kMax:
      return tir::Select(tir::Compare(tir::CompareOp::kGt, b, a), b, a);
    case ReduceKind::kMin:
      return tir::Select(tir::Compare(tir::CompareOp::kLt, b, a), b, a);
  }
  throw Error("te: unknown reduction");
}

std::string ReduceKindName(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::kSum:
      return "sum";
    case ReduceKind::kProd:
      return "prod";
    case ReduceKind::kMax:
      return "max";
    case ReduceKind::kMin:
      return "min";
  }
  return "?";
}

void ComputeContext::Require(Expr condition, std::string message) {
  int64_t value;
  if (tir::AsInt(condition, &value) && value) return;
  requirements_.push_back(Requirement{std::move(condition), std::move(message)});
}

}  // namespace nimble::te
