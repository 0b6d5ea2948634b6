// What the matrix-product template suites share (matmul_schedule_test.cc for
// the CPU's, gpu_matmul_schedule_test.cc for the GPU's): the product's shape,
// small random integer operands, and a check of a kernel's output against a
// plain triple loop.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "nimble/compiler/te/lower.h"
#include "nimble/compiler/tir/printer.h"
#include "nimble/compiler/tir/stmt.h"
#include "nimble/vm/tensor.h"
#include "tests/compiler/tir/interpreter.h"

namespace nimble::te::testing {

// c[batch, row, col] = sum over k of a[batch, row, k] * b[col, k] (or
// b[k, col] with `outer`, the outer-product form), without the batch
// dimension unless `batched`; a symbolic dimension is a shape variable of the
// kernel.
struct ProductShape {
  bool batched = false;
  int64_t batch = 1, rows = 0, cols = 0, depth = 0;
  bool symbolic_rows = false;
  bool symbolic_cols = false;
  bool symbolic_depth = false;
  bool outer = false;
};

// The operands' and the output's shapes: m, n and k name the symbolic rows,
// columns and depth.
struct ProductShapes {
  std::vector<Expr> a, b, c;
};

inline ProductShapes ShapesOf(const ProductShape& shape) {
  const auto dim = [](int64_t value, bool symbolic, const std::string& name) -> Expr {
    return symbolic ? Expr(tir::MakeVar(name)) : tir::IntImm(value);
  };
  const Expr rows = dim(shape.rows, shape.symbolic_rows, "m");
  const Expr cols = dim(shape.cols, shape.symbolic_cols, "n");
  const Expr depth = dim(shape.depth, shape.symbolic_depth, "k");
  ProductShapes shapes{.a = {rows, depth},
                       .b = shape.outer ? std::vector{depth, cols} : std::vector{cols, depth},
                       .c = {rows, cols}};
  if (shape.batched) {
    shapes.a.insert(shapes.a.begin(), tir::IntImm(shape.batch));
    shapes.c.insert(shapes.c.begin(), tir::IntImm(shape.batch));
  }
  return shapes;
}

// The product as te::Lower builds it from its compute definition.
inline tir::PrimFunc LowerProduct(const ProductShape& shape, const MatMulKnobs& knobs,
                                  tir::PrimFunc::Device device = tir::PrimFunc::Device::kCpu) {
  const ProductShapes shapes = ShapesOf(shape);
  const Tensor a = Placeholder("a", DataType::Float32(), shapes.a);
  const Tensor b = Placeholder("b", DataType::Float32(), shapes.b);
  const Tensor c = Compute(
      "c", shapes.c,
      [&](const std::vector<Expr>& indices) {
        const ReduceAxis k = MakeReduceAxis("k", shapes.a.back());
        std::vector<Expr> a_indices(indices.begin(), indices.end() - 1);
        a_indices.push_back(k.var);
        const Expr b_element =
            shape.outer ? Read(b, {k.var, indices.back()}) : Read(b, {indices.back(), k.var});
        return Reduce(ReduceKind::kSum, tir::Mul(Read(a, a_indices), b_element), {k});
      },
      shape.outer ? ScheduleHint::kOuterProduct : ScheduleHint::kMatMul);
  return Lower("product", {a, b}, {c}, {}, knobs, device);
}

// Small integers, so that every sum is exact in float32 in any order.
inline nimble::Tensor RandomInts(const Shape& shape, std::mt19937& rng) {
  nimble::Tensor tensor = nimble::TensorNode::Empty(shape, DataType::Float32());
  std::uniform_int_distribution<int> uniform(-3, 3);
  for (int64_t i = 0; i < tensor->numel(); ++i) tensor->data<float>()[i] = uniform(rng);
  return tensor;
}

// Runs `func` (parameters a, b, c) on random operands of `shape` and compares
// c with the triple loop; `what` names the configuration in a failure.
inline void ExpectProduct(const ProductShape& shape, const tir::PrimFunc& func,
                          const std::string& what) {
  static std::mt19937 rng(20261125);
  const int64_t batch = shape.batched ? shape.batch : 1;
  Shape a_shape = {shape.rows, shape.depth};
  Shape c_shape = {shape.rows, shape.cols};
  if (shape.batched) {
    a_shape.insert(a_shape.begin(), shape.batch);
    c_shape.insert(c_shape.begin(), shape.batch);
  }
  const nimble::Tensor a = RandomInts(a_shape, rng);
  const nimble::Tensor b = RandomInts(
      shape.outer ? Shape{shape.depth, shape.cols} : Shape{shape.cols, shape.depth}, rng);
  nimble::Tensor c = nimble::TensorNode::Empty(c_shape, DataType::Float32());
  std::fill_n(c->data<float>(), c->numel(), 1e9f);
  tir::testing::Interpret(func, std::vector{a, b, c});
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t i = 0; i < shape.rows; ++i) {
      for (int64_t j = 0; j < shape.cols; ++j) {
        float expected = 0;
        for (int64_t k = 0; k < shape.depth; ++k) {
          expected += a->data<float>()[(n * shape.rows + i) * shape.depth + k] *
                      b->data<float>()[shape.outer ? k * shape.cols + j : j * shape.depth + k];
        }
        ASSERT_EQ(c->data<float>()[(n * shape.rows + i) * shape.cols + j], expected)
            << "batch " << n << " row " << i << " col " << j << " of " << shape.rows << "x"
            << shape.cols << "x" << shape.depth << (shape.outer ? " outer" : "") << " with " << what
            << "\n"
            << tir::ToString(func);
      }
    }
  }
}

inline size_t Count(const std::string& text, const std::string& word) {
  size_t count = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    ++count;
  }
  return count;
}

}  // namespace nimble::te::testing
