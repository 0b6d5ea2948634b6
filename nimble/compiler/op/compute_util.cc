#include "nimble/compiler/op/compute_util.h"

#include <algorithm>
#include <utility>

namespace nimble::op {

namespace {

Expr Equal(Expr a, Expr b) {
  return tir::Compare(tir::CompareOp::kEq, std::move(a), std::move(b));
}

// The size of the broadcast of two sizes. A constant other than 1 is the
// result whenever the other is `?`: the requirement makes the other that
// size or 1.
Expr BroadcastDim(const Expr& a, const Expr& b) {
  int64_t value;
  if (SameDim(a, b) || IsConstant(b, 1)) return a;
  if (IsConstant(a, 1)) return b;
  if (tir::AsInt(a, &value)) return a;
  if (tir::AsInt(b, &value)) return b;
  return tir::Select(Equal(a, tir::IntImm(1)), b, a);
}

}  // namespace

bool HasFloat16(std::span<const te::Tensor> inputs, std::span<const DataType> output_dtypes) {
  const auto is_half = [](DataType dtype) {
    return dtype == DataType::Float16() || dtype == DataType::BFloat16();
  };
  return std::any_of(inputs.begin(), inputs.end(),
                     [&](const te::Tensor& input) { return is_half(input->dtype); }) ||
         std::any_of(output_dtypes.begin(), output_dtypes.end(), is_half);
}

bool SameDim(const Expr& a, const Expr& b) {
  int64_t x, y;
  return a == b || (tir::AsInt(a, &x) && tir::AsInt(b, &y) && x == y);
}

bool IsConstant(const Expr& dim, int64_t value) {
  int64_t constant;
  return tir::AsInt(dim, &constant) && constant == value;
}

void RequireEqual(te::ComputeContext& context, const Expr& a, const Expr& b,
                  const std::string& message) {
  if (!SameDim(a, b)) context.Require(Equal(a, b), message);
}

std::vector<Expr> BroadcastShape(te::ComputeContext& context, const std::string& op,
                                 const std::vector<std::vector<Expr>>& shapes) {
  size_t rank = 0;
  for (const std::vector<Expr>& shape : shapes) rank = std::max(rank, shape.size());
  std::vector<Expr> out(rank, tir::IntImm(1));
  for (size_t d = 0; d < rank; ++d) {
    // Input i's size along output dimension d (1 where it has none).
    const auto dim = [&](size_t i) {
      const size_t skip = rank - shapes[i].size();
      return d < skip ? tir::IntImm(1) : shapes[i][d - skip];
    };
    for (size_t i = 0; i < shapes.size(); ++i) {
      out[d] = BroadcastDim(out[d], dim(i));
      for (size_t j = 0; j < i; ++j) {
        const Expr a = dim(j), b = dim(i);
        if (SameDim(a, b)) continue;
        context.Require(
            tir::Or(Equal(a, b), tir::Or(Equal(a, tir::IntImm(1)), Equal(b, tir::IntImm(1)))),
            op + ": cannot broadcast dimension " + std::to_string(d) + ": input " +
                std::to_string(j) + " and input " + std::to_string(i) +
                " differ in size and neither is 1");
      }
    }
  }
  return out;
}

std::vector<Expr> BroadcastIndices(const std::vector<Expr>& shape,
                                   const std::vector<Expr>& out_shape,
                                   const std::vector<Expr>& indices) {
  const size_t skip = out_shape.size() - shape.size();
  std::vector<Expr> result;
  for (size_t d = 0; d < shape.size(); ++d) {
    const Expr& dim = shape[d];
    const Expr& index = indices[skip + d];
    int64_t value;
    if (IsConstant(dim, 1)) {
      result.push_back(tir::IntImm(0));
    } else if (SameDim(dim, out_shape[skip + d]) || tir::AsInt(dim, &value)) {
      result.push_back(index);
    } else {
      result.push_back(tir::Select(Equal(dim, tir::IntImm(1)), tir::IntImm(0), index));
    }
  }
  return result;
}

te::Tensor BroadcastCompute(te::ComputeContext& context, const std::string& name,
                            std::span<const te::Tensor> inputs,
                            const std::function<Expr(const std::vector<Expr>& values)>& fn) {
  std::vector<std::vector<Expr>> shapes;
  for (const te::Tensor& input : inputs) shapes.push_back(input->shape);
  const std::vector<Expr> out_shape = BroadcastShape(context, name, shapes);
  return te::Compute(name, out_shape, [&](const std::vector<Expr>& indices) {
    std::vector<Expr> values;
    for (const te::Tensor& input : inputs) {
      values.push_back(te::Read(input, BroadcastIndices(input->shape, out_shape, indices)));
    }
    return fn(values);
  });
}

std::vector<Expr> UnravelIndex(Expr flat, const std::vector<Expr>& shape) {
  std::vector<Expr> indices(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    indices[d] = d == 0 ? flat : tir::FloorMod(flat, shape[d]);
    flat = tir::FloorDiv(flat, shape[d]);
  }
  return indices;
}

}  // namespace nimble::op
