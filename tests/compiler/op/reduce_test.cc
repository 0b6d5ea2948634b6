// Reductions (sum, mean, max, min, prod, all, any, argmax, argmin), run
// through the shared invocation path (relation, shape function, kernel).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/compiler/op/op_test_util.h"

namespace nimble::op::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

ir::Attrs Axis(std::vector<int64_t> axis, bool keepdims = false, bool exclude = false) {
  return MakeAttrs({{"axis", std::move(axis)}, {"keepdims", keepdims}, {"exclude", exclude}});
}

// 1, 2, ..., n.
std::vector<double> OneTo(int64_t n) {
  std::vector<double> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = static_cast<double>(i + 1);
  return values;
}

void Expect(const Tensor& tensor, const Shape& shape, const std::vector<double>& expected,
            double tolerance = 1e-5) {
  EXPECT_EQ(tensor->shape(), shape);
  ExpectValues(tensor, expected, tolerance);
}

// ---------------------------------------------------------------------------
// Axis handling, on sum over [[1, 2, 3], [4, 5, 6]]

TEST(ReduceAxesTest, SingleAxes) {
  const Tensor x = TensorFrom({2, 3}, kF32, OneTo(6));
  Expect(Invoke("sum", {x}, Axis({1})), {2}, {6, 15});
  Expect(Invoke("sum", {x}, Axis({-1})), {2}, {6, 15});
  Expect(Invoke("sum", {x}, Axis({0})), {3}, {5, 7, 9});
  Expect(Invoke("sum", {x}, Axis({-2}, true)), {1, 3}, {5, 7, 9});
  Expect(Invoke("sum", {x}, Axis({1}, true)), {2, 1}, {6, 15});
}

TEST(ReduceAxesTest, NoneEmptyAndExclude) {
  const Tensor x = TensorFrom({2, 3}, kF32, OneTo(6));
  Expect(Invoke("sum", {x}), {}, {21});
  Expect(Invoke("sum", {x}, Axis({})), {}, {21});
  Expect(Invoke("sum", {x}, MakeAttrs({{"keepdims", true}})), {1, 1}, {21});
  // exclude reduces the axes that are not listed.
  Expect(Invoke("sum", {x}, Axis({1}, false, true)), {3}, {5, 7, 9});
  Expect(Invoke("sum", {x}, Axis({0}, true, true)), {2, 1}, {6, 15});
  Expect(Invoke("sum", {x}, Axis({0, 1}, false, true)), {2, 3}, OneTo(6));
}

TEST(ReduceAxesTest, StridedAxesOfARank3Tensor) {
  // x[i, j, l] = 12 i + 4 j + l + 1 over shape (2, 3, 4).
  const Tensor x = TensorFrom({2, 3, 4}, kF32, OneTo(24));
  std::vector<double> over_0_2(3, 0.0), over_1(8, 0.0), over_0(12, 0.0);
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int l = 0; l < 4; ++l) {
        const double v = 12 * i + 4 * j + l + 1;
        over_0_2[j] += v;
        over_1[i * 4 + l] += v;
        over_0[j * 4 + l] += v;
      }
    }
  }
  Expect(Invoke("sum", {x}, Axis({0, 2})), {3}, over_0_2);
  Expect(Invoke("sum", {x}, Axis({2, 0}, true)), {1, 3, 1}, over_0_2);
  Expect(Invoke("sum", {x}, Axis({1}, false, true)), {3}, over_0_2);
  Expect(Invoke("sum", {x}, Axis({1})), {2, 4}, over_1);
  Expect(Invoke("sum", {x}, Axis({0})), {3, 4}, over_0);
}

TEST(ReduceAxesTest, SizeOneAxesAndScalars) {
  const Tensor x = TensorFrom({1, 3, 1}, kF32, {1, 2, 3});
  Expect(Invoke("sum", {x}, Axis({1})), {1, 1}, {6});
  Expect(Invoke("sum", {x}, Axis({0, 2})), {3}, {1, 2, 3});
  Expect(Invoke("sum", {TensorFrom({}, kF32, {4})}), {}, {4});
}

TEST(ReduceAxesTest, LongRowsInnerAndOuter) {
  // 37 = several vector lanes plus a tail, along the contiguous axis and across rows.
  std::vector<double> values(3 * 37);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>((i * 5) % 13) - 6.5;
  std::vector<double> rows(3, 0.0), columns(37, 0.0);
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 37; ++c) {
      rows[r] += values[r * 37 + c];
      columns[c] += values[r * 37 + c];
    }
  }
  const Tensor x = TensorFrom({3, 37}, kF32, values);
  Expect(Invoke("sum", {x}, Axis({1})), {3}, rows, 1e-4);
  Expect(Invoke("sum", {x}, Axis({0})), {37}, columns, 1e-4);
}

// ---------------------------------------------------------------------------
// The reducers

TEST(ReduceOpsTest, MeanMaxMinProd) {
  const Tensor x = TensorFrom({2, 3}, kF32, {1, -2, 3, 4, 5, -6});
  Expect(Invoke("mean", {x}, Axis({1})), {2}, {2.0 / 3, 1});
  Expect(Invoke("mean", {x}), {}, {5.0 / 6});
  Expect(Invoke("max", {x}, Axis({1})), {2}, {3, 5});
  Expect(Invoke("max", {x}, Axis({0})), {3}, {4, 5, 3});
  Expect(Invoke("min", {x}, Axis({1})), {2}, {-2, -6});
  Expect(Invoke("min", {x}), {}, {-6});
  Expect(Invoke("prod", {x}, Axis({1})), {2}, {-6, -120});
  Expect(Invoke("prod", {x}, Axis({0})), {3}, {4, -10, -18});
}

TEST(ReduceOpsTest, IntegerAndHalfDTypes) {
  const Tensor ints = TensorFrom({2, 2}, DataType::Int32(), {1, 2, 7, -4});
  const Tensor sum = Invoke("sum", {ints}, Axis({1}));
  EXPECT_EQ(sum->dtype(), DataType::Int32());
  Expect(sum, {2}, {3, 3}, 0);
  Expect(Invoke("mean", {ints}, Axis({1})), {2}, {1, 1}, 0);  // integer division: 3 / 2
  Expect(Invoke("max", {TensorFrom({3}, DataType::Int8(), {-128, 5, 127})}), {}, {127}, 0);
  Expect(Invoke("min", {TensorFrom({3}, DataType(DataType::Code::kUInt, 8), {200, 5, 255})}), {},
         {5}, 0);
  const Tensor half =
      Invoke("sum", {TensorFrom({2, 2}, DataType::Float16(), {0.5, 1.5, 2, 3})}, Axis({0}));
  EXPECT_EQ(half->dtype(), DataType::Float16());
  Expect(half, {2}, {2.5, 4.5}, 1e-3);
  Expect(Invoke("prod", {TensorFrom({3}, DataType::Int64(), {2, 3, 4})}), {}, {24}, 0);
}

TEST(ReduceOpsTest, AllAndAny) {
  const Tensor x = TensorFrom({2, 3}, DataType::Bool(), {1, 1, 0, 1, 1, 1});
  const Tensor all = Invoke("all", {x}, Axis({1}));
  EXPECT_EQ(all->dtype(), DataType::Bool());
  Expect(all, {2}, {0, 1}, 0);
  Expect(Invoke("all", {x}, Axis({0})), {3}, {1, 1, 0}, 0);
  Expect(Invoke("all", {x}), {}, {0}, 0);
  Expect(Invoke("any", {x}, Axis({1})), {2}, {1, 1}, 0);
  Expect(Invoke("any", {TensorFrom({2, 2}, DataType::Bool(), {0, 0, 0, 1})}, Axis({1}, true)),
         {2, 1}, {0, 1}, 0);
}

TEST(ReduceOpsTest, EmptyReductions) {
  const Tensor empty = TensorFrom({0, 3}, kF32, {});
  Expect(Invoke("sum", {empty}, Axis({0})), {3}, {0, 0, 0});
  Expect(Invoke("prod", {empty}, Axis({0})), {3}, {1, 1, 1});
  Expect(Invoke("all", {TensorFrom({0}, DataType::Bool(), {})}), {}, {1}, 0);
  Expect(Invoke("max", {empty}, Axis({1})), {0}, {});
  EXPECT_THAT(ErrorOf([&] { Invoke("max", {empty}, Axis({0})); }),
              AllOf(HasSubstr("max"), HasSubstr("empty axis"), HasSubstr("(0, 3)")));
  EXPECT_THAT(ErrorOf([&] { Invoke("mean", {empty}); }), HasSubstr("mean"));
  EXPECT_THAT(ErrorOf([&] { Invoke("argmin", {empty}, Axis({0})); }), HasSubstr("argmin"));
}

// ---------------------------------------------------------------------------
// argmax / argmin

TEST(ArgReduceTest, TiesAndSelectLastIndex) {
  const Tensor x = TensorFrom({2, 3}, kF32, {1, 3, 3, 2, 2, 1});
  const Tensor first = Invoke("argmax", {x}, Axis({1}));
  EXPECT_EQ(first->dtype(), DataType::Int32());
  Expect(first, {2}, {1, 0}, 0);
  const ir::Attrs last =
      MakeAttrs({{"axis", std::vector<int64_t>{1}}, {"select_last_index", true}});
  Expect(Invoke("argmax", {x}, last), {2}, {2, 1}, 0);
  Expect(Invoke("argmin", {x}, Axis({1})), {2}, {0, 2}, 0);
  Expect(Invoke("argmin", {x}, last), {2}, {0, 2}, 0);
  // Along axis 0 (the innermost axis is kept): columns [1, 2], [3, 2], [3, 1].
  Expect(Invoke("argmax", {x}, Axis({0})), {3}, {1, 0, 0}, 0);
  Expect(Invoke("argmin", {TensorFrom({2, 2}, kF32, {5, 5, 5, 4})},
                MakeAttrs({{"axis", std::vector<int64_t>{0}}, {"select_last_index", true}})),
         {2}, {1, 1}, 0);
}

TEST(ArgReduceTest, AllAxesKeepdimsAndMultipleAxes) {
  const Tensor x = TensorFrom({2, 3}, kF32, {4, 9, 1, 9, 0, 2});
  Expect(Invoke("argmax", {x}), {}, {1}, 0);  // flat index of the first 9
  Expect(Invoke("argmax", {x}, MakeAttrs({{"select_last_index", true}})), {}, {3}, 0);
  Expect(Invoke("argmin", {x}, MakeAttrs({{"keepdims", true}})), {1, 1}, {4}, 0);
  // Over axes 0 and 2 of a (2, 3, 2) tensor the index is row-major over (2, 2).
  const Tensor y = TensorFrom({2, 3, 2}, kF32,
                              {0, 1, 5, 0, 0, 0,  //
                               2, 0, 0, 6, 7, 3});
  Expect(Invoke("argmax", {y}, Axis({0, 2})), {3}, {2, 3, 2}, 0);
  Expect(Invoke("argmax", {y}, Axis({1}, true, true)), {1, 3, 1}, {2, 3, 2}, 0);
  Expect(Invoke("argmax", {TensorFrom({4}, DataType::Int64(), {1, 7, 7, 2})}), {}, {1}, 0);
}

// ---------------------------------------------------------------------------
// Types, shape functions and errors

TEST(ReduceTypesTest, AnyDimensions) {
  const ir::Dim any = ir::Dim::Any();
  EXPECT_EQ(TypeOf("sum", {TensorOf({any, 3})}, Axis({1})), "Tensor[(?,), float32]");
  EXPECT_EQ(TypeOf("sum", {TensorOf({any, 3})}, Axis({0})), "Tensor[(3,), float32]");
  EXPECT_EQ(TypeOf("max", {TensorOf({any, 3})}, Axis({1}, true)), "Tensor[(?, 1), float32]");
  EXPECT_EQ(TypeOf("mean", {TensorOf({any, any, 4})}), "Tensor[(), float32]");
  EXPECT_EQ(TypeOf("argmax", {TensorOf({any, 5})}, Axis({-1})), "Tensor[(?,), int32]");
  EXPECT_EQ(TypeOf("any", {TensorOf({2, any}, DataType::Bool())}, Axis({0}, false, true)),
            "Tensor[(2,), bool]");
  EXPECT_EQ(Def("sum").shape_func(std::vector<Shape>{{7, 3}}, {},
                                  NormalizeAttrs(Def("sum"), Axis({1}, true))),
            (std::vector<Shape>{{7, 1}}));
}

TEST(ReduceTypesTest, Errors) {
  EXPECT_THAT(ErrorOf([] {
                TypeOf("sum", {TensorOf({2, 3})}, Axis({2}));
              }),
              AllOf(HasSubstr("sum"), HasSubstr("axis 2 is out of range for rank 2")));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("argmin", {TensorOf({2, 3})}, Axis({-3}));
              }),
              AllOf(HasSubstr("argmin"), HasSubstr("axis -3 is out of range")));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("mean", {TensorOf({2, 3})}, Axis({0, -2}));
              }),
              AllOf(HasSubstr("mean"), HasSubstr("listed twice")));
  EXPECT_THAT(ErrorOf([] { TypeOf("sum", {TensorOf({2}, DataType::Bool())}); }),
              AllOf(HasSubstr("sum"), HasSubstr("numeric")));
  EXPECT_THAT(ErrorOf([] { TypeOf("all", {TensorOf({2})}); }),
              AllOf(HasSubstr("all"), HasSubstr("bool tensor")));
  EXPECT_THAT(ErrorOf([] { TypeOf("argmax", {TensorOf({})}); }),
              AllOf(HasSubstr("argmax"), HasSubstr("rank >= 1")));
}

TEST(ReduceRegistryTest, SchemasAndPatterns) {
  for (const char* name : {"sum", "mean", "max", "min", "prod", "all", "any", "argmax", "argmin"}) {
    const OpDef& def = Def(name);
    EXPECT_EQ(def.pattern, OpPattern::kCommReduce) << name;
    EXPECT_EQ(def.shape_mode, ShapeFuncMode::kDataIndependent) << name;
    EXPECT_FALSE(def.description.empty()) << name;
  }
  const ir::Attrs sum = NormalizeAttrs(Def("sum"), {});
  ASSERT_EQ(sum.entries().size(), 3u);
  EXPECT_EQ(sum.entries()[0].first, "axis");
  EXPECT_TRUE(sum.IsNone("axis"));
  EXPECT_FALSE(sum.GetBool("keepdims"));
  EXPECT_FALSE(sum.GetBool("exclude"));
  const ir::Attrs argmax = NormalizeAttrs(Def("argmax"), MakeAttrs({{"axis", int64_t{1}}}));
  ASSERT_EQ(argmax.entries().size(), 4u);
  EXPECT_EQ(argmax.GetIntList("axis"), (std::vector<int64_t>{1}));
  EXPECT_EQ(argmax.entries()[2].first, "select_last_index");
  EXPECT_FALSE(argmax.GetBool("select_last_index"));
}

}  // namespace
}  // namespace nimble::op::testing
