#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "tests/compiler/op/op_test_util.h"

namespace nimble::op::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

template <typename T>
Tensor Scalar(DataType dtype, T value) {
  return TensorNode::Scalar(dtype, value);
}

Tensor Int64Scalar(int64_t value) {
  return TensorFrom<int64_t>({}, DataType::Int64(), {value});
}

Tensor Int64Vector(const std::vector<int64_t>& values) {
  return TensorFrom({static_cast<int64_t>(values.size())}, DataType::Int64(), values);
}

TEST(CreationOps, ZerosAndOnesUseTheShapeAttribute) {
  const ir::Attrs shape23 = MakeAttrs({{"shape", std::vector<int64_t>{2, 3}}});
  EXPECT_EQ(TypeOf("zeros", {}, shape23), "Tensor[(2, 3), float32]");
  Tensor zeros = Invoke("zeros", {}, shape23);
  EXPECT_EQ(zeros->shape(), (Shape{2, 3}));
  EXPECT_THAT(Values(zeros), ElementsAre(0, 0, 0, 0, 0, 0));

  const ir::Attrs ones_int64 =
      MakeAttrs({{"shape", std::vector<int64_t>{2}}, {"dtype", DataType::Int64()}});
  EXPECT_EQ(TypeOf("ones", {}, ones_int64), "Tensor[(2,), int64]");
  EXPECT_THAT(Values(Invoke("ones", {}, ones_int64)), ElementsAre(1, 1));

  for (DataType dtype : {DataType::Float16(), DataType::Bool(), DataType::Int8()}) {
    Tensor ones =
        Invoke("ones", {}, MakeAttrs({{"shape", std::vector<int64_t>{3}}, {"dtype", dtype}}));
    EXPECT_EQ(ones->dtype(), dtype);
    EXPECT_THAT(Values(ones), ElementsAre(1, 1, 1)) << dtype.name();
  }
  Tensor scalar = Invoke("ones", {}, MakeAttrs({{"shape", std::vector<int64_t>{}}}));
  EXPECT_EQ(scalar->ndim(), 0);
  EXPECT_THAT(Values(scalar), ElementsAre(1));
}

TEST(CreationOps, ZerosOverwritesAReusedDestination) {
  // Destination passing: the buffer may be recycled, so zeros must write its zeros.
  Tensor reused = TensorNode::FromVector<float>({2}, DataType::Float32(), {7, 7});
  std::vector<Tensor> outputs = {reused};
  Def("zeros").kernel({}, outputs, NormalizeAttrs(Def("zeros"), MakeAttrs({{"shape", 2}})));
  EXPECT_THAT(Values(reused), ElementsAre(0, 0));
}

TEST(CreationOps, ZerosRejectsBadShapes) {
  EXPECT_THAT(ErrorOf([] {
                TypeOf("zeros", {}, MakeAttrs({{"shape", std::vector<int64_t>{2, -1}}}));
              }),
              HasSubstr("zeros: shape (2, -1) has a negative dimension"));
  EXPECT_THAT(ErrorOf([] { NormalizeAttrs(Def("ones"), {}); }),
              HasSubstr("'ones' requires attribute 'shape'"));
  EXPECT_EQ(Def("zeros").min_inputs, 0);
  EXPECT_EQ(Def("zeros").max_inputs, 0);
}

// Folding bounds what it computes: an output past the bound is refused by
// its shape, before anything is allocated (a 4 TiB zeros here), with its own
// type so that a folder leaves the call to run time.
TEST(CreationOps, AnOutputPastTheBoundIsRefusedBeforeItIsAllocated) {
  const OpDef& def = Def("zeros");
  const ir::Attrs huge =
      NormalizeAttrs(def, MakeAttrs({{"shape", std::vector<int64_t>{1LL << 40}}}));
  try {
    InvokeOp(def, {}, huge, 1024);
    ADD_FAILURE() << "no error";
  } catch (const OutputTooLarge& error) {
    EXPECT_STREQ(error.what(), "zeros: output (1099511627776,) of float32 is past 1024 bytes");
  }
  const ir::Attrs small = NormalizeAttrs(def, MakeAttrs({{"shape", std::vector<int64_t>{256}}}));
  EXPECT_EQ(InvokeOp(def, {}, small, 1024).as<TensorNode>()->numel(), 256);
}

TEST(CreationOps, FullCastsTheFillValue) {
  const Tensor fill = Scalar(DataType::Float32(), 2.5);
  const ir::Attrs shape22 = MakeAttrs({{"shape", std::vector<int64_t>{2, 2}}});
  EXPECT_EQ(TypeOf("full", {TensorOf({}, DataType::Float32())}, shape22),
            "Tensor[(2, 2), float32]");
  EXPECT_THAT(Values(Invoke("full", {fill}, shape22)), ElementsAre(2.5, 2.5, 2.5, 2.5));

  const ir::Attrs as_int = MakeAttrs({{"shape", std::vector<int64_t>{3}}, {"dtype", "int32"}});
  EXPECT_EQ(TypeOf("full", {TensorOf({}, DataType::Float32())}, as_int), "Tensor[(3,), int32]");
  Tensor truncated = Invoke("full", {fill}, as_int);
  EXPECT_EQ(truncated->dtype(), DataType::Int32());
  EXPECT_THAT(Values(truncated), ElementsAre(2, 2, 2));

  // int64 -> int64 keeps every bit (no trip through double).
  const int64_t big = (int64_t{1} << 53) + 1;
  Tensor exact =
      Invoke("full", {Int64Scalar(big)}, MakeAttrs({{"shape", std::vector<int64_t>{2}}}));
  EXPECT_EQ(exact->data<int64_t>()[1], big);

  Tensor half = Invoke("full", {Scalar(DataType::Float16(), 0.5)},
                       MakeAttrs({{"shape", std::vector<int64_t>{2}}, {"dtype", "float64"}}));
  EXPECT_THAT(Values(half), ElementsAre(0.5, 0.5));
}

TEST(CreationOps, FullRequiresAScalarFillValue) {
  EXPECT_THAT(
      ErrorOf([] {
        Invoke("full", {Int64Vector({1, 2})}, MakeAttrs({{"shape", std::vector<int64_t>{2}}}));
      }),
      HasSubstr("full: fill_value must be a scalar, got Tensor[(2,), int64]"));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("full_like",
                       {TensorOf({2}, DataType::Float32()), TensorOf({1}, DataType::Float32())});
              }),
              HasSubstr("full_like: fill_value must be a scalar, got Tensor[(1,), float32]"));
}

TEST(CreationOps, LikeOpsFollowData) {
  const ir::Type any_rows = TensorOf({kAny, 3}, DataType::Float32());
  EXPECT_EQ(TypeOf("zeros_like", {any_rows}), "Tensor[(?, 3), float32]");
  EXPECT_EQ(TypeOf("ones_like", {any_rows}), "Tensor[(?, 3), float32]");
  EXPECT_EQ(TypeOf("full_like", {any_rows, TensorOf({}, DataType::Int64())}),
            "Tensor[(?, 3), float32]");

  const Tensor data = TensorNode::FromVector<int32_t>({2, 2}, DataType::Int32(), {5, 6, 7, 8});
  Tensor zeros = Invoke("zeros_like", {data});
  EXPECT_EQ(zeros->TypeString(), "Tensor[(2, 2), int32]");
  EXPECT_THAT(Values(zeros), ElementsAre(0, 0, 0, 0));
  EXPECT_THAT(Values(Invoke("ones_like", {data})), ElementsAre(1, 1, 1, 1));
  Tensor full = Invoke("full_like", {data, Scalar(DataType::Float32(), 3.75)});
  EXPECT_EQ(full->TypeString(), "Tensor[(2, 2), int32]");
  EXPECT_THAT(Values(full), ElementsAre(3, 3, 3, 3));
}

TEST(CreationOps, DynamicFormsTakeTheShapeAtRunTime) {
  const ir::Type shape_type = TensorOf({2}, DataType::Int64());
  EXPECT_EQ(TypeOf("dyn.zeros", {shape_type}), "Tensor[(?, ?), float32]");
  EXPECT_EQ(TypeOf("dyn.ones", {shape_type}, MakeAttrs({{"dtype", "int32"}})),
            "Tensor[(?, ?), int32]");
  EXPECT_EQ(TypeOf("dyn.full", {TensorOf({}, DataType::Int32()), shape_type}),
            "Tensor[(?, ?), int32]");

  Tensor zeros = Invoke("dyn.zeros", {Int64Vector({2, 3})});
  EXPECT_EQ(zeros->TypeString(), "Tensor[(2, 3), float32]");
  EXPECT_THAT(Values(zeros), ElementsAre(0, 0, 0, 0, 0, 0));

  const Tensor int32_shape = TensorNode::FromVector<int32_t>({1}, DataType::Int32(), {4});
  Tensor ones = Invoke("dyn.ones", {int32_shape}, MakeAttrs({{"dtype", "int64"}}));
  EXPECT_EQ(ones->TypeString(), "Tensor[(4,), int64]");
  EXPECT_THAT(Values(ones), ElementsAre(1, 1, 1, 1));

  Tensor full = Invoke("dyn.full", {Scalar(DataType::Int32(), 4), Int64Vector({3, 1})});
  EXPECT_EQ(full->TypeString(), "Tensor[(3, 1), int32]");
  EXPECT_THAT(Values(full), ElementsAre(4, 4, 4));
  Tensor cast = Invoke("dyn.full", {Scalar(DataType::Int32(), 4), Int64Vector({2})},
                       MakeAttrs({{"dtype", "float16"}}));
  EXPECT_EQ(cast->TypeString(), "Tensor[(2,), float16]");
  EXPECT_THAT(Values(cast), ElementsAre(4, 4));

  Tensor empty = Invoke("dyn.zeros", {Int64Vector({0, 5})});
  EXPECT_EQ(empty->shape(), (Shape{0, 5}));
}

TEST(CreationOps, DynamicFormsRejectBadShapeTensors) {
  EXPECT_THAT(ErrorOf([] {
                Invoke("dyn.zeros", {Int64Vector({2, -1})});
              }),
              HasSubstr("dyn.zeros: the shape tensor holds a negative size: (2, -1)"));
  EXPECT_THAT(ErrorOf([] {
                Invoke("dyn.full", {Scalar(DataType::Float32(), 1.0), Int64Vector({-3})});
              }),
              HasSubstr("dyn.full: the shape tensor holds a negative size: (-3,)"));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("dyn.ones", {TensorOf({2, 2}, DataType::Int64())});
              }),
              HasSubstr("dyn.ones: shape must be a 1-D integer tensor, got Tensor[(2, 2), int64]"));
  EXPECT_THAT(ErrorOf([] { TypeOf("dyn.zeros", {TensorOf({2}, DataType::Float32())}); }),
              HasSubstr("shape must be a 1-D integer tensor, got Tensor[(2,), float32]"));
  EXPECT_THAT(ErrorOf([] { TypeOf("dyn.zeros", {TensorOf({kAny}, DataType::Int64())}); }),
              HasSubstr("must be static, got Tensor[(?,), int64]"));
  EXPECT_THAT(
      ErrorOf([] {
        TypeOf("dyn.full", {TensorOf({2}, DataType::Float32()), TensorOf({2}, DataType::Int64())});
      }),
      HasSubstr("dyn.full: fill_value must be a scalar"));
}

Tensor Arange(DataType dtype, double start, double stop, double step) {
  return Invoke("arange", {Scalar(dtype, start), Scalar(dtype, stop), Scalar(dtype, step)},
                MakeAttrs({{"dtype", dtype}}));
}

TEST(CreationOps, ArangeTypeIsAnyLength) {
  const ir::Type scalar = TensorOf({}, DataType::Float32());
  EXPECT_EQ(TypeOf("arange", {scalar, scalar, scalar}), "Tensor[(?,), float32]");
  const ir::Type int_scalar = TensorOf({}, DataType::Int64());
  EXPECT_EQ(TypeOf("arange", {int_scalar, int_scalar, int_scalar}, MakeAttrs({{"dtype", "int64"}})),
            "Tensor[(?,), int64]");
}

TEST(CreationOps, ArangeValues) {
  Tensor ints = Arange(DataType::Int32(), 0, 10, 3);
  EXPECT_EQ(ints->TypeString(), "Tensor[(4,), int32]");
  EXPECT_THAT(Values(ints), ElementsAre(0, 3, 6, 9));

  EXPECT_THAT(Values(Arange(DataType::Float32(), 0, 1, 0.25)), ElementsAre(0, 0.25, 0.5, 0.75));
  // ceil((1 - 0) / 0.3) = 4: the last value 0.9 is below stop.
  Tensor fractional = Arange(DataType::Float64(), 0, 1, 0.3);
  ASSERT_EQ(fractional->shape(), (Shape{4}));
  EXPECT_THAT(Values(fractional), ElementsAreArray({0.0, 0.3, 0.6, 0.3 * 3}));

  EXPECT_THAT(Values(Arange(DataType::Int64(), 5, 0, -2)), ElementsAre(5, 3, 1));
  EXPECT_THAT(Values(Arange(DataType::Float32(), 1, -1, -0.5)), ElementsAre(1, 0.5, 0, -0.5));
  EXPECT_THAT(Values(Arange(DataType::Float16(), 0, 2, 0.5)), ElementsAre(0, 0.5, 1, 1.5));

  EXPECT_EQ(Arange(DataType::Int32(), 5, 0, 1)->shape(), (Shape{0}));
  EXPECT_EQ(Arange(DataType::Float32(), 0, 5, -1)->shape(), (Shape{0}));

  // Integer ranges are counted without rounding through double.
  const int64_t start = int64_t{1} << 60;
  Tensor huge = Invoke("arange", {Int64Scalar(start), Int64Scalar(start + 3), Int64Scalar(1)},
                       MakeAttrs({{"dtype", "int64"}}));
  ASSERT_EQ(huge->shape(), (Shape{3}));
  EXPECT_EQ(huge->data<int64_t>()[2], start + 2);
}

TEST(CreationOps, ArangeErrors) {
  EXPECT_THAT(ErrorOf([] { Arange(DataType::Int32(), 0, 10, 0); }),
              HasSubstr("arange: step must not be zero (start=0, stop=10, step=0)"));
  EXPECT_THAT(ErrorOf([] { Arange(DataType::Float32(), 0, 1, 0); }),
              HasSubstr("arange: step must not be zero (start=0.0, stop=1.0, step=0.0)"));
  EXPECT_THAT(ErrorOf([] { Arange(DataType::Float32(), 0, INFINITY, 1); }),
              HasSubstr("arange: the range (start=0.0, stop=inf, step=1.0) has no finite length"));
  EXPECT_THAT(ErrorOf([] {
                Invoke("arange", {Scalar(DataType::Int32(), 0), Scalar(DataType::Int32(), 3),
                                  Scalar(DataType::Int32(), 1)});
              }),
              HasSubstr("arange: start must be a scalar of dtype float32, got Tensor[(), int32]"));
  const ir::Type scalar = TensorOf({}, DataType::Float32());
  EXPECT_THAT(ErrorOf([&] {
                TypeOf("arange", {scalar, scalar, TensorOf({1}, DataType::Float32())});
              }),
              HasSubstr("step must be a scalar of dtype float32, got Tensor[(1,), float32]"));
  EXPECT_THAT(ErrorOf([&] {
                TypeOf("arange", {scalar, scalar, scalar}, MakeAttrs({{"dtype", "bool"}}));
              }),
              HasSubstr("dtype must be an integer or float type, got bool"));
}

TEST(CreationOps, RegistrationMetadata) {
  for (const std::string name : {"zeros", "ones", "full", "zeros_like", "ones_like", "full_like"}) {
    EXPECT_EQ(Def(name).shape_mode, ShapeFuncMode::kDataIndependent) << name;
    EXPECT_EQ(Def(name).pattern, OpPattern::kElemWise) << name;
    EXPECT_FALSE(Def(name).description.empty()) << name;
  }
  for (const std::string name : {"dyn.zeros", "dyn.ones", "dyn.full", "arange"}) {
    EXPECT_EQ(Def(name).shape_mode, ShapeFuncMode::kDataDependent) << name;
    EXPECT_EQ(Def(name).pattern, OpPattern::kOpaque) << name;
  }
  EXPECT_EQ(Def("full").min_inputs, 1);
  EXPECT_EQ(Def("full_like").max_inputs, 2);
  EXPECT_EQ(Def("dyn.full").min_inputs, 2);
  EXPECT_EQ(Def("arange").min_inputs, 3);
}

}  // namespace
}  // namespace nimble::op::testing
