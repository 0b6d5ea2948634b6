// nn.dense, nn.contrib_dense_pack, nn.batch_matmul, nn.bias_add, nn.softmax and nn.layer_norm,
// run through the shared invocation path (relation, shape function, kernel).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/compiler/op/op_test_util.h"

namespace nimble::op::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Deterministic, irregular values in [-1.25, 1.25].
std::vector<double> Samples(int64_t n, int seed) {
  std::vector<double> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = static_cast<double>((i * 7 + seed * 3) % 11 - 5) / 4;
  return values;
}

// out[r, u] = sum_l data[r, l] * weight[u, l]
std::vector<double> ExpectedDense(const std::vector<double>& data,
                                  const std::vector<double>& weight, int64_t rows, int64_t units,
                                  int64_t k) {
  std::vector<double> out(rows * units, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t u = 0; u < units; ++u) {
      for (int64_t l = 0; l < k; ++l) out[r * units + u] += data[r * k + l] * weight[u * k + l];
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// nn.dense

TEST(DenseTest, OddSizes) {
  const std::vector<double> data = Samples(3 * 7, 1);
  const std::vector<double> weight = Samples(5 * 7, 2);
  const Tensor out =
      Invoke("nn.dense", {TensorFrom({3, 7}, kF32, data), TensorFrom({5, 7}, kF32, weight)});
  EXPECT_EQ(out->shape(), (Shape{3, 5}));
  EXPECT_EQ(out->dtype(), DataType::Float32());
  ExpectValues(out, ExpectedDense(data, weight, 3, 5, 7));
}

TEST(DenseTest, LeadingDimsAndLongRows) {
  // k = 19 has full lanes and a tail; units = 6 has a full row block and a tail.
  const std::vector<double> data = Samples(2 * 2 * 19, 3);
  const std::vector<double> weight = Samples(6 * 19, 4);
  const Tensor out =
      Invoke("nn.dense", {TensorFrom({2, 2, 19}, kF32, data), TensorFrom({6, 19}, kF32, weight)},
             MakeAttrs({{"units", int64_t{6}}}));
  EXPECT_EQ(out->shape(), (Shape{2, 2, 6}));
  ExpectValues(out, ExpectedDense(data, weight, 4, 6, 19));
}

TEST(DenseTest, OneDimensionalDataAndLiteralValues) {
  const Tensor out = Invoke(
      "nn.dense", {TensorFrom({2}, kF32, {1, 2}), TensorFrom({3, 2}, kF32, {1, 0, 0, 1, 1, 1})});
  EXPECT_EQ(out->shape(), (Shape{3}));
  ExpectValues(out, {1, 2, 3});
}

TEST(DenseTest, Float16AndFloat64) {
  const std::vector<double> data = Samples(3 * 9, 5);
  const std::vector<double> weight = Samples(5 * 9, 6);
  const std::vector<double> expected = ExpectedDense(data, weight, 3, 5, 9);
  const Tensor half = Invoke("nn.dense", {TensorFrom({3, 9}, DataType::Float16(), data),
                                          TensorFrom({5, 9}, DataType::Float16(), weight)});
  EXPECT_EQ(half->dtype(), DataType::Float16());
  ExpectValues(half, expected, 1e-2);
  const Tensor dbl = Invoke("nn.dense", {TensorFrom({3, 9}, DataType::Float64(), data),
                                         TensorFrom({5, 9}, DataType::Float64(), weight)});
  EXPECT_EQ(dbl->dtype(), DataType::Float64());
  ExpectValues(dbl, expected, 1e-12);
  const Tensor widened =
      Invoke("nn.dense", {TensorFrom({3, 9}, kF32, data), TensorFrom({5, 9}, kF32, weight)},
             MakeAttrs({{"out_dtype", DataType::Float64()}}));
  EXPECT_EQ(widened->dtype(), DataType::Float64());
  ExpectValues(widened, expected);
}

TEST(DenseTest, AnyShapes) {
  EXPECT_EQ(TypeOf("nn.dense", {TensorOf({ir::Dim::Any(), 300}), TensorOf({512, 300})}),
            "Tensor[(?, 512), float32]");
  EXPECT_EQ(TypeOf("nn.dense", {TensorOf({ir::Dim::Any(), 300}), TensorOf({ir::Dim::Any(), 300})},
                   MakeAttrs({{"units", int64_t{512}}})),
            "Tensor[(?, 512), float32]");
  EXPECT_EQ(TypeOf("nn.dense", {TensorOf({2, ir::Dim::Any()}), TensorOf({ir::Dim::Any(), 300})}),
            "Tensor[(2, ?), float32]");
  EXPECT_EQ(ShapesOf("nn.dense", {{7, 300}, {512, 300}}), (std::vector<Shape>{{7, 512}}));
}

TEST(DenseTest, UnitsInfersAnUnknownWeight) {
  const ir::Type unknown = Make<ir::IncompleteTypeNode>();
  EXPECT_EQ(TypeOf("nn.dense", {TensorOf({3, 7}), unknown}, MakeAttrs({{"units", int64_t{5}}})),
            "Tensor[(3, 5), float32]");
  EXPECT_THAT(ErrorOf([&] {
                TypeOf("nn.dense", {TensorOf({3, 7}), unknown});
              }),
              HasSubstr("cannot infer"));
}

TEST(DenseTest, StaticReductionMismatchIsATypeError) {
  EXPECT_THAT(ErrorOf([] {
                TypeOf("nn.dense", {TensorOf({3, 7}), TensorOf({5, 6})});
              }),
              AllOf(HasSubstr("nn.dense"), HasSubstr("data's last dimension is 7"),
                    HasSubstr("weight's dimension 1 is 6")));
  // InvokeOp reaches the same check before running anything.
  EXPECT_THAT(ErrorOf([] {
                Invoke("nn.dense", {TensorFrom({3, 7}, kF32, Samples(21, 0)),
                                    TensorFrom({5, 6}, kF32, Samples(30, 0))});
              }),
              HasSubstr("data's last dimension is 7"));
}

TEST(DenseTest, RuntimeReductionMismatchNamesOpAndShapes) {
  // A `?` k passes type checking; the shape function catches the mismatch.
  EXPECT_EQ(TypeOf("nn.dense", {TensorOf({ir::Dim::Any(), ir::Dim::Any()}), TensorOf({5, 7})}),
            "Tensor[(?, 5), float32]");
  EXPECT_THAT(ErrorOf([] {
                ShapesOf("nn.dense", {{2, 6}, {5, 7}});
              }),
              AllOf(HasSubstr("nn.dense"), HasSubstr("(2, 6)"), HasSubstr("(5, 7)")));
}

TEST(DenseTest, BadArguments) {
  EXPECT_THAT(ErrorOf([] {
                TypeOf("nn.dense", {TensorOf({3, 7}), TensorOf({5, 7})},
                       MakeAttrs({{"units", int64_t{4}}}));
              }),
              HasSubstr("units=4 does not match weight's dimension 0 (5)"));
  EXPECT_THAT(ErrorOf([] {
                ShapesOf("nn.dense", {{3, 7}, {5, 7}}, MakeAttrs({{"units", int64_t{4}}}));
              }),
              AllOf(HasSubstr("nn.dense"), HasSubstr("units=4")));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("nn.dense",
                       {TensorOf({3, 7}, DataType::Int32()), TensorOf({5, 7}, DataType::Int32())});
              }),
              HasSubstr("float16, float32 or float64, got int32"));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("nn.dense", {TensorOf({3, 7}), TensorOf({5, 7}, DataType::Float64())});
              }),
              HasSubstr("dtypes differ"));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("nn.dense", {TensorOf({3, 7}), TensorOf({7})});
              }),
              HasSubstr("weight must be 2-D"));
}

// ---------------------------------------------------------------------------
// nn.batch_matmul

// x is [bx, m, k] (or [bx, k, m]), y is [by, n, k] (or [by, k, n]).
std::vector<double> ExpectedBatchMatMul(const std::vector<double>& x, const std::vector<double>& y,
                                        int64_t bx, int64_t by, int64_t m, int64_t n, int64_t k,
                                        bool transpose_a, bool transpose_b) {
  const int64_t batch = std::max(bx, by);
  std::vector<double> out(batch * m * n, 0.0);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t xb = bx == 1 ? 0 : b;
    const int64_t yb = by == 1 ? 0 : b;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t l = 0; l < k; ++l) {
          const double a = transpose_a ? x[(xb * k + l) * m + i] : x[(xb * m + i) * k + l];
          const double c = transpose_b ? y[(yb * n + j) * k + l] : y[(yb * k + l) * n + j];
          out[(b * m + i) * n + j] += a * c;
        }
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// nn.contrib_dense_pack

// weight [units, k] as [units / block, k, block].
std::vector<double> PackWeight(const std::vector<double>& weight, int64_t units, int64_t k,
                               int64_t block) {
  std::vector<double> packed(weight.size());
  for (int64_t u = 0; u < units; ++u) {
    for (int64_t l = 0; l < k; ++l)
      packed[((u / block) * k + l) * block + u % block] = weight[u * k + l];
  }
  return packed;
}

TEST(PackedDenseTest, GivesDensesValues) {
  const std::vector<double> data = Samples(2 * 3 * 5, 1);
  const std::vector<double> weight = Samples(8 * 5, 2);
  const Tensor out =
      Invoke("nn.contrib_dense_pack", {TensorFrom({2, 3, 5}, kF32, data),
                                       TensorFrom({2, 5, 4}, kF32, PackWeight(weight, 8, 5, 4))});
  EXPECT_EQ(out->shape(), (Shape{2, 3, 8}));
  ExpectValues(out, ExpectedDense(data, weight, 6, 8, 5));
}

// A bias [units] is added to every row.
TEST(PackedDenseTest, AddsAnOptionalBias) {
  const std::vector<double> data = Samples(3 * 5, 1);
  const std::vector<double> weight = Samples(8 * 5, 2);
  const std::vector<double> bias = Samples(8, 3);
  const Tensor out =
      Invoke("nn.contrib_dense_pack", {TensorFrom({3, 5}, kF32, data),
                                       TensorFrom({2, 5, 4}, kF32, PackWeight(weight, 8, 5, 4)),
                                       TensorFrom({8}, kF32, bias)});
  std::vector<double> expected = ExpectedDense(data, weight, 3, 8, 5);
  for (size_t i = 0; i < expected.size(); ++i) expected[i] += bias[i % 8];
  ExpectValues(out, expected);
  EXPECT_EQ(TypeOf("nn.contrib_dense_pack",
                   {TensorOf({ir::Dim::Any(), 768}), TensorOf({192, 768, 16}), TensorOf({3072})}),
            "Tensor[(?, 3072), float32]");
  EXPECT_THAT(ErrorOf([] {
                TypeOf("nn.contrib_dense_pack",
                       {TensorOf({2, 768}), TensorOf({192, 768, 16}), TensorOf({768})});
              }),
              HasSubstr("bias must have shape (units,) = (3072,), got Tensor[(768,), float32]"));
  EXPECT_THAT(ErrorOf([] {
                ShapesOf("nn.contrib_dense_pack", {{7, 300}, {3, 300, 16}, {47}});
              }),
              HasSubstr("nn.contrib_dense_pack: bias must have shape (48,), got (47,)"));
}

// activation="gelu": gelu of each element of the product plus bias; no other
// activation type-checks.
TEST(PackedDenseTest, AppliesAGeluActivation) {
  const std::vector<double> data = Samples(3 * 5, 1);
  const std::vector<double> weight = Samples(8 * 5, 2);
  const std::vector<double> bias = Samples(8, 3);
  ir::Attrs gelu;
  gelu.Set("activation", std::string("gelu"));
  const Tensor out = Invoke(
      "nn.contrib_dense_pack",
      {TensorFrom({3, 5}, kF32, data), TensorFrom({2, 5, 4}, kF32, PackWeight(weight, 8, 5, 4)),
       TensorFrom({8}, kF32, bias)},
      gelu);
  std::vector<double> expected = ExpectedDense(data, weight, 3, 8, 5);
  for (size_t i = 0; i < expected.size(); ++i) {
    const double x = static_cast<float>(expected[i] + bias[i % 8]);
    expected[i] = 0.5 * x * std::erfc(-x / std::sqrt(2.0));
  }
  ExpectValues(out, expected);
  ir::Attrs relu;
  relu.Set("activation", std::string("relu"));
  EXPECT_THAT(
      ErrorOf([&] {
        TypeOf("nn.contrib_dense_pack", {TensorOf({2, 768}), TensorOf({48, 768, 16})}, relu);
      }),
      HasSubstr("activation must be None or \"gelu\", got \"relu\""));
}

TEST(PackedDenseTest, TypesShapesAndErrors) {
  EXPECT_EQ(
      TypeOf("nn.contrib_dense_pack", {TensorOf({ir::Dim::Any(), 768}), TensorOf({192, 768, 16})}),
      "Tensor[(?, 3072), float32]");
  EXPECT_EQ(
      TypeOf("nn.contrib_dense_pack", {TensorOf({4, 768}), TensorOf({ir::Dim::Any(), 768, 16})}),
      "Tensor[(4, ?), float32]");
  EXPECT_EQ(ShapesOf("nn.contrib_dense_pack", {{7, 300}, {3, 300, 16}}),
            (std::vector<Shape>{{7, 48}}));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("nn.contrib_dense_pack", {TensorOf({3, 7}), TensorOf({48, 7})});
              }),
              HasSubstr("weight must be 3-D (units / b, k, b), got Tensor[(48, 7), float32]"));
  EXPECT_THAT(
      ErrorOf([] {
        TypeOf("nn.contrib_dense_pack", {TensorOf({3, 7}), TensorOf({3, 6, 16})});
      }),
      AllOf(HasSubstr("data's last dimension is 7"), HasSubstr("weight's dimension 1 is 6")));
  EXPECT_THAT(
      ErrorOf([] {
        ShapesOf("nn.contrib_dense_pack", {{2, 6}, {3, 7, 16}});
      }),
      AllOf(HasSubstr("nn.contrib_dense_pack"), HasSubstr("(2, 6)"), HasSubstr("(3, 7, 16)")));
}

TEST(BatchMatMulTest, AllTransposeFlags) {
  const int64_t batch = 2, m = 3, n = 5, k = 7;
  const std::vector<double> x = Samples(batch * m * k, 1);
  const std::vector<double> y = Samples(batch * n * k, 2);
  for (bool transpose_a : {false, true}) {
    for (bool transpose_b : {false, true}) {
      const Shape x_shape = transpose_a ? Shape{batch, k, m} : Shape{batch, m, k};
      const Shape y_shape = transpose_b ? Shape{batch, n, k} : Shape{batch, k, n};
      const Tensor out =
          Invoke("nn.batch_matmul", {TensorFrom(x_shape, kF32, x), TensorFrom(y_shape, kF32, y)},
                 MakeAttrs({{"transpose_a", transpose_a}, {"transpose_b", transpose_b}}));
      SCOPED_TRACE("transpose_a=" + std::to_string(transpose_a) +
                   " transpose_b=" + std::to_string(transpose_b));
      EXPECT_EQ(out->shape(), (Shape{batch, m, n}));
      ExpectValues(out, ExpectedBatchMatMul(x, y, batch, batch, m, n, k, transpose_a, transpose_b));
    }
  }
}

TEST(BatchMatMulTest, DefaultsAreRelays) {
  const ir::Attrs attrs = NormalizeAttrs(Def("nn.batch_matmul"), {});
  EXPECT_FALSE(attrs.GetBool("transpose_a"));
  EXPECT_TRUE(attrs.GetBool("transpose_b"));
  EXPECT_TRUE(attrs.IsNone("out_dtype"));
  // [[1, 2]] x [[3, 4], [5, 6]]^T (y read as [n, k]).
  ExpectValues(Invoke("nn.batch_matmul", {TensorFrom({1, 1, 2}, kF32, {1, 2}),
                                          TensorFrom({1, 2, 2}, kF32, {3, 4, 5, 6})}),
               {11, 17});
}

TEST(BatchMatMulTest, BatchBroadcast) {
  const int64_t m = 3, n = 5, k = 7;
  const std::vector<double> x1 = Samples(1 * m * k, 3);
  const std::vector<double> y4 = Samples(4 * n * k, 4);
  const Tensor left =
      Invoke("nn.batch_matmul", {TensorFrom({1, m, k}, kF32, x1), TensorFrom({4, n, k}, kF32, y4)});
  EXPECT_EQ(left->shape(), (Shape{4, m, n}));
  ExpectValues(left, ExpectedBatchMatMul(x1, y4, 1, 4, m, n, k, false, true));

  const std::vector<double> x3 = Samples(3 * k * m, 5);
  const std::vector<double> y1 = Samples(1 * k * n, 6);
  const Tensor right =
      Invoke("nn.batch_matmul", {TensorFrom({3, k, m}, kF32, x3), TensorFrom({1, k, n}, kF32, y1)},
             MakeAttrs({{"transpose_a", true}, {"transpose_b", false}}));
  EXPECT_EQ(right->shape(), (Shape{3, m, n}));
  ExpectValues(right, ExpectedBatchMatMul(x3, y1, 3, 1, m, n, k, true, false));
}

TEST(BatchMatMulTest, TypesWithAny) {
  const ir::Dim any = ir::Dim::Any();
  EXPECT_EQ(TypeOf("nn.batch_matmul", {TensorOf({any, 3, 4}), TensorOf({1, 5, 4})}),
            "Tensor[(?, 3, 5), float32]");
  EXPECT_EQ(TypeOf("nn.batch_matmul", {TensorOf({any, 3, 4}), TensorOf({2, 5, 4})}),
            "Tensor[(2, 3, 5), float32]");
  EXPECT_EQ(TypeOf("nn.batch_matmul", {TensorOf({2, any, any}), TensorOf({2, 4, any})},
                   MakeAttrs({{"transpose_b", false}, {"out_dtype", DataType::Float64()}})),
            "Tensor[(2, ?, ?), float64]");
  EXPECT_EQ(TypeOf("nn.batch_matmul", {TensorOf({1, 4, 3}), TensorOf({any, 5, 4})},
                   MakeAttrs({{"transpose_a", true}})),
            "Tensor[(?, 3, 5), float32]");
}

TEST(BatchMatMulTest, Errors) {
  EXPECT_THAT(ErrorOf([] {
                TypeOf("nn.batch_matmul", {TensorOf({2, 3, 4}), TensorOf({3, 5, 4})});
              }),
              AllOf(HasSubstr("nn.batch_matmul"), HasSubstr("batch dimensions 2 and 3")));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("nn.batch_matmul", {TensorOf({2, 3, 4}), TensorOf({2, 5, 6})});
              }),
              AllOf(HasSubstr("x's k is 4"), HasSubstr("y's k is 6")));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("nn.batch_matmul", {TensorOf({3, 4}), TensorOf({2, 5, 4})});
              }),
              HasSubstr("x must be 3-D"));
  EXPECT_THAT(ErrorOf([] {
                ShapesOf("nn.batch_matmul", {{2, 3, 4}, {3, 5, 4}});
              }),
              AllOf(HasSubstr("nn.batch_matmul"), HasSubstr("(2, 3, 4)"), HasSubstr("(3, 5, 4)")));
  EXPECT_THAT(ErrorOf([] {
                ShapesOf("nn.batch_matmul", {{2, 3, 4}, {2, 5, 6}});
              }),
              AllOf(HasSubstr("reduction dimensions differ"), HasSubstr("(2, 5, 6)")));
}

// ---------------------------------------------------------------------------
// nn.bias_add

TEST(BiasAddTest, DefaultAxisIsOne) {
  const std::vector<double> data = Samples(2 * 3 * 4, 1);
  const Tensor out = Invoke(
      "nn.bias_add", {TensorFrom({2, 3, 4}, kF32, data), TensorFrom({3}, kF32, {10, 20, 30})});
  std::vector<double> expected(data.size());
  for (int64_t i = 0; i < 24; ++i) expected[i] = data[i] + 10.0 * ((i / 4) % 3 + 1);
  EXPECT_EQ(out->shape(), (Shape{2, 3, 4}));
  ExpectValues(out, expected);
}

TEST(BiasAddTest, LastAxisAndIntegers) {
  const Tensor out = Invoke("nn.bias_add",
                            {TensorFrom({2, 3}, DataType::Int32(), {1, 2, 3, 4, 5, 6}),
                             TensorFrom({3}, DataType::Int32(), {100, 200, 300})},
                            MakeAttrs({{"axis", int64_t{-1}}}));
  EXPECT_EQ(out->dtype(), DataType::Int32());
  ExpectValues(out, {101, 202, 303, 104, 205, 306}, 0);
}

TEST(BiasAddTest, TypesAndErrors) {
  const ir::Dim any = ir::Dim::Any();
  EXPECT_EQ(TypeOf("nn.bias_add", {TensorOf({any, any}), TensorOf({3})}),
            "Tensor[(?, ?), float32]");
  EXPECT_EQ(TypeOf("nn.bias_add", {TensorOf({2, 3}), Make<ir::IncompleteTypeNode>()}),
            "Tensor[(2, 3), float32]");
  EXPECT_THAT(ErrorOf([] {
                TypeOf("nn.bias_add", {TensorOf({2, 3}), TensorOf({4})});
              }),
              AllOf(HasSubstr("nn.bias_add"), HasSubstr("bias has 4 elements but axis 1")));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("nn.bias_add", {TensorOf({2, 3}), TensorOf({3, 1})});
              }),
              HasSubstr("bias must be 1-D"));
  EXPECT_THAT(
      ErrorOf([] {
        TypeOf("nn.bias_add", {TensorOf({2, 3}), TensorOf({3})}, MakeAttrs({{"axis", int64_t{2}}}));
      }),
      HasSubstr("axis 2 is out of range for rank 2"));
  EXPECT_THAT(ErrorOf([] {
                ShapesOf("nn.bias_add", {{2, 3}, {4}});
              }),
              AllOf(HasSubstr("nn.bias_add"), HasSubstr("(4,)"), HasSubstr("(2, 3)")));
}

// ---------------------------------------------------------------------------
// nn.softmax

TEST(SoftmaxTest, LastAxisMatchesHandComputedValues) {
  // softmax([1, 2, 3]) = [e^1, e^2, e^3] / (e^1 + e^2 + e^3); a shifted row is the same.
  const Tensor out = Invoke("nn.softmax", {TensorFrom({2, 3}, kF32, {1, 2, 3, 1001, 1002, 1003})});
  const std::vector<double> row = {0.09003057317038046, 0.24472847105479767, 0.6652409557748219};
  ExpectValues(out, {row[0], row[1], row[2], row[0], row[1], row[2]});
}

TEST(SoftmaxTest, OtherAxisAndDTypes) {
  // Columns [1, 2] and [3, 3] along axis 0.
  const std::vector<double> expected = {0.2689414213699951, 0.5, 0.7310585786300049, 0.5};
  ExpectValues(Invoke("nn.softmax", {TensorFrom({2, 2}, kF32, {1, 3, 2, 3})},
                      MakeAttrs({{"axis", int64_t{0}}})),
               expected);
  const Tensor dbl = Invoke("nn.softmax", {TensorFrom({2, 2}, DataType::Float64(), {1, 3, 2, 3})},
                            MakeAttrs({{"axis", int64_t{-2}}}));
  EXPECT_EQ(dbl->dtype(), DataType::Float64());
  ExpectValues(dbl, expected, 1e-12);
  ExpectValues(Invoke("nn.softmax", {TensorFrom({4}, DataType::Float16(), {0, 0, 0, 0})}),
               {0.25, 0.25, 0.25, 0.25}, 1e-3);
}

TEST(SoftmaxTest, TypesAndErrors) {
  EXPECT_EQ(TypeOf("nn.softmax", {TensorOf({ir::Dim::Any(), 10})}), "Tensor[(?, 10), float32]");
  EXPECT_THAT(ErrorOf([] { TypeOf("nn.softmax", {TensorOf({3}, DataType::Int32())}); }),
              AllOf(HasSubstr("nn.softmax"), HasSubstr("float16, float32 or float64")));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("nn.softmax", {TensorOf({3})}, MakeAttrs({{"axis", int64_t{1}}}));
              }),
              HasSubstr("axis 1 is out of range for rank 1"));
}

// ---------------------------------------------------------------------------
// nn.layer_norm

TEST(LayerNormTest, HandComputedRows) {
  // Row [1, 2, 3, 4]: mean 2.5, variance 1.25. Row [2, 4, 6, 8]: mean 5, variance 5.
  const Tensor out = Invoke("nn.layer_norm", {TensorFrom({2, 4}, kF32, {1, 2, 3, 4, 2, 4, 6, 8}),
                                              TensorFrom({4}, kF32, {1, 2, 1, 0.5}),
                                              TensorFrom({4}, kF32, {0, 0, 1, 1})});
  const double s1 = 1 / std::sqrt(1.25 + 1e-5);
  const double s2 = 1 / std::sqrt(5 + 1e-5);
  ExpectValues(out, {-1.5 * s1, -0.5 * s1 * 2, 0.5 * s1 + 1, 1.5 * s1 * 0.5 + 1,  //
                     -3 * s2, -1 * s2 * 2, 1 * s2 + 1, 3 * s2 * 0.5 + 1});
}

TEST(LayerNormTest, LargeOffsetKeepsPrecision) {
  const Tensor out = Invoke(
      "nn.layer_norm", {TensorFrom({4}, kF32, {10001, 10002, 10003, 10004}),
                        TensorFrom({4}, kF32, {1, 1, 1, 1}), TensorFrom({4}, kF32, {0, 0, 0, 0})});
  const double s = 1 / std::sqrt(1.25 + 1e-5);
  ExpectValues(out, {-1.5 * s, -0.5 * s, 0.5 * s, 1.5 * s});
}

TEST(LayerNormTest, NoScaleNoCenterAlongAxisZero) {
  // Columns [1, 3] and [2, 6]: each normalises to [-1, 1] (variance 1 and 4) up to epsilon.
  const Tensor out = Invoke(
      "nn.layer_norm",
      {TensorFrom({2, 2}, kF32, {1, 2, 3, 6}), TensorFrom({2}, kF32, {5, 5}),
       TensorFrom({2}, kF32, {7, 7})},
      MakeAttrs({{"axis", int64_t{0}}, {"center", false}, {"scale", false}, {"epsilon", 0.0}}));
  ExpectValues(out, {-1, -1, 1, 1});
  const Tensor dbl = Invoke(
      "nn.layer_norm",
      {TensorFrom({2}, DataType::Float64(), {0, 2}), TensorFrom({2}, DataType::Float64(), {2, 2}),
       TensorFrom({2}, DataType::Float64(), {1, 1})},
      MakeAttrs({{"epsilon", 0.0}}));
  ExpectValues(dbl, {-1, 3}, 1e-12);
}

TEST(LayerNormTest, TypesAndErrors) {
  const ir::Dim any = ir::Dim::Any();
  EXPECT_EQ(TypeOf("nn.layer_norm", {TensorOf({any, any}), TensorOf({768}), TensorOf({768})}),
            "Tensor[(?, ?), float32]");
  EXPECT_THAT(ErrorOf([] {
                TypeOf("nn.layer_norm", {TensorOf({2, 4}), TensorOf({4}), TensorOf({3})});
              }),
              AllOf(HasSubstr("nn.layer_norm"), HasSubstr("beta has 3 elements")));
  EXPECT_THAT(ErrorOf([] {
                ShapesOf("nn.layer_norm", {{2, 4}, {5}, {4}});
              }),
              AllOf(HasSubstr("nn.layer_norm: gamma shape (5,)"), HasSubstr("(2, 4)")));
}

// ---------------------------------------------------------------------------
// Registry metadata

TEST(NnRegistryTest, PatternsModesAndSchemas) {
  EXPECT_EQ(Def("nn.dense").pattern, OpPattern::kOutEWiseFusable);
  EXPECT_EQ(Def("nn.batch_matmul").pattern, OpPattern::kOutEWiseFusable);
  EXPECT_EQ(Def("nn.bias_add").pattern, OpPattern::kBroadcast);
  EXPECT_EQ(Def("nn.softmax").pattern, OpPattern::kOpaque);
  EXPECT_EQ(Def("nn.layer_norm").pattern, OpPattern::kOpaque);
  for (const char* name :
       {"nn.dense", "nn.batch_matmul", "nn.bias_add", "nn.softmax", "nn.layer_norm"}) {
    const OpDef& def = Def(name);
    EXPECT_EQ(def.shape_mode, ShapeFuncMode::kDataIndependent) << name;
    EXPECT_FALSE(def.description.empty()) << name;
  }
  EXPECT_EQ(Def("nn.layer_norm").min_inputs, 3);
  const ir::Attrs layer_norm = NormalizeAttrs(Def("nn.layer_norm"), {});
  EXPECT_EQ(layer_norm.GetInt("axis"), -1);
  EXPECT_DOUBLE_EQ(layer_norm.GetFloat("epsilon"), 1e-5);
  EXPECT_TRUE(layer_norm.GetBool("center"));
  EXPECT_TRUE(layer_norm.GetBool("scale"));
  EXPECT_EQ(NormalizeAttrs(Def("nn.bias_add"), {}).GetInt("axis"), 1);
  EXPECT_EQ(NormalizeAttrs(Def("nn.softmax"), {}).GetInt("axis"), -1);
  EXPECT_TRUE(NormalizeAttrs(Def("nn.dense"), {}).IsNone("units"));
}

}  // namespace
}  // namespace nimble::op::testing
