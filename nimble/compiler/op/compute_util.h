// Helpers shared by the operators' compute definitions (OpDef::compute):
// numpy broadcasting over index expressions, row-major index arithmetic and
// the dtype guard. Shapes are int64 index expressions: constants where the
// size is static, expressions of shape variables where it is `?`, so nothing
// here assumes what a `?` will be at run time.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "nimble/compiler/te/tensor.h"

namespace nimble::op {

using te::Expr;

// Code generation leaves float16 and bfloat16 to the built-in kernels: true
// when an input or an output is either.
bool HasFloat16(std::span<const te::Tensor> inputs, std::span<const DataType> output_dtypes);

// True when `a` and `b` are known to be the same size: equal constants, or
// one expression.
bool SameDim(const Expr& a, const Expr& b);

// True when `dim` is the constant `value`.
bool IsConstant(const Expr& dim, int64_t value);

// Unless `a` and `b` are known to be the same size, the kernel requires them
// to be, failing with `message` (what the shape function checks before the
// built-in kernel runs; a fused kernel may be called without it).
void RequireEqual(te::ComputeContext& context, const Expr& a, const Expr& b,
                  const std::string& message);

// The numpy broadcast of `shapes`, aligned on the right. A pair of sizes that
// may differ at run time without either being 1 becomes a requirement that
// the kernel checks on entry; its message names `op`, the output dimension
// and the two inputs.
std::vector<Expr> BroadcastShape(te::ComputeContext& context, const std::string& op,
                                 const std::vector<std::vector<Expr>>& shapes);

// The indices that an input of `shape` is read at for the element `indices`
// of a broadcast result of `out_shape`: 0 along a size-1 dimension (which a
// `?` size may turn out to be at run time).
std::vector<Expr> BroadcastIndices(const std::vector<Expr>& shape,
                                   const std::vector<Expr>& out_shape,
                                   const std::vector<Expr>& indices);

// The elementwise op `name` on broadcast `inputs`: each element is
// fn(the inputs' elements there).
te::Tensor BroadcastCompute(te::ComputeContext& context, const std::string& name,
                            std::span<const te::Tensor> inputs,
                            const std::function<Expr(const std::vector<Expr>& values)>& fn);

// The indices in `shape` of the row-major position `flat`.
std::vector<Expr> UnravelIndex(Expr flat, const std::vector<Expr>& shape);

}  // namespace nimble::op
