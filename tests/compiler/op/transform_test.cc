#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>

#include "nimble/vm/adt.h"
#include "tests/compiler/op/op_test_util.h"

namespace nimble::op::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

const DataType kI32 = DataType::Int32();
const DataType kI64 = DataType::Int64();

using Ints = std::vector<int64_t>;

// Calls an op that takes one tuple of tensors (concatenate, stack).
Tensor InvokeOnTuple(const std::string& name, const std::vector<Tensor>& fields,
                     const ir::Attrs& attrs = {}) {
  const Ref<Object> tuple = MakeTuple(std::vector<Ref<Object>>(fields.begin(), fields.end()));
  return InvokeValues(name, {tuple}, attrs).as<TensorNode>();
}

ir::Type Tup(std::vector<ir::Type> fields) {
  return ir::MakeTupleType(std::move(fields));
}

// The elements of any dtype, as int64.
Ints IntValues(const Tensor& tensor) {
  Ints values;
  for (int64_t i = 0; i < tensor->numel(); ++i) values.push_back(tensor->GetAsInt64(i));
  return values;
}

Ints Range(int64_t n) {
  Ints values(static_cast<size_t>(n));
  std::iota(values.begin(), values.end(), 0);
  return values;
}

// ---------------------------------------------------------------------------
// Registration metadata.

TEST(TransformOps, RegisteredWithSchemaPatternAndShapeMode) {
  struct Expected {
    const char* name;
    int inputs;
    ShapeFuncMode mode;
    OpPattern pattern;
  };
  const Expected expected[] = {
      {"reshape", 1, ShapeFuncMode::kDataIndependent, OpPattern::kInjective},
      {"dyn.reshape", 2, ShapeFuncMode::kDataDependent, OpPattern::kInjective},
      {"reshape_like", 2, ShapeFuncMode::kDataIndependent, OpPattern::kInjective},
      {"transpose", 1, ShapeFuncMode::kDataIndependent, OpPattern::kInjective},
      {"squeeze", 1, ShapeFuncMode::kDataIndependent, OpPattern::kInjective},
      {"expand_dims", 1, ShapeFuncMode::kDataIndependent, OpPattern::kBroadcast},
      {"concatenate", 1, ShapeFuncMode::kDataIndependent, OpPattern::kInjective},
      {"stack", 1, ShapeFuncMode::kDataIndependent, OpPattern::kInjective},
      {"split", 1, ShapeFuncMode::kDataIndependent, OpPattern::kInjective},
      {"take", 2, ShapeFuncMode::kDataIndependent, OpPattern::kInjective},
      {"strided_slice", 1, ShapeFuncMode::kDataIndependent, OpPattern::kInjective},
      {"dyn.strided_slice", 4, ShapeFuncMode::kDataDependent, OpPattern::kInjective},
  };
  for (const Expected& op : expected) {
    SCOPED_TRACE(op.name);
    const OpDef& def = Def(op.name);
    EXPECT_FALSE(def.description.empty());
    EXPECT_EQ(def.min_inputs, op.inputs);
    EXPECT_EQ(def.max_inputs, op.inputs);
    EXPECT_EQ(def.shape_mode, op.mode);
    EXPECT_EQ(def.pattern, op.pattern);
    EXPECT_TRUE(def.relation && def.shape_func && def.kernel);
  }
}

TEST(TransformOps, AttributeSchemasFollowRelay) {
  const ir::Attrs take = NormalizeAttrs(Def("take"), {});
  EXPECT_TRUE(take.IsNone("axis"));
  EXPECT_EQ(take.GetInt("batch_dims"), 0);
  EXPECT_EQ(take.GetString("mode"), "clip");
  const ir::Attrs slice =
      NormalizeAttrs(Def("strided_slice"), MakeAttrs({{"begin", Ints{0}}, {"end", Ints{1}}}));
  EXPECT_TRUE(slice.IsNone("strides"));
  EXPECT_TRUE(slice.IsNone("axes"));
  EXPECT_EQ(slice.GetString("slice_mode"), "end");
  EXPECT_FALSE(
      NormalizeAttrs(Def("reshape"), MakeAttrs({{"newshape", Ints{-1}}})).GetBool("allowzero"));
  EXPECT_THAT(ErrorOf([] { NormalizeAttrs(Def("reshape"), {}); }), HasSubstr("newshape"));
  EXPECT_THAT(ErrorOf([] { NormalizeAttrs(Def("split"), {}); }), HasSubstr("indices_or_sections"));
}

// ---------------------------------------------------------------------------
// reshape

Tensor Reshape(const Tensor& data, Ints newshape, bool allowzero = false) {
  return Invoke("reshape", {data},
                MakeAttrs({{"newshape", std::move(newshape)}, {"allowzero", allowzero}}));
}

TEST(Reshape, PositiveSizesAndInferredDim) {
  const Tensor out = Reshape(Iota({2, 3, 4}), {4, -1});
  EXPECT_EQ(out->shape(), (Shape{4, 6}));
  EXPECT_EQ(IntValues(out), Range(24));
  EXPECT_EQ(Reshape(Iota({2, 3, 4}), {-1})->shape(), (Shape{24}));
  EXPECT_EQ(Reshape(Iota({5}), {1, 5, 1})->shape(), (Shape{1, 5, 1}));
}

TEST(Reshape, ZeroCopiesTheInputDim) {
  EXPECT_EQ(Reshape(Iota({2, 3, 4}), {0, -1})->shape(), (Shape{2, 12}));
  EXPECT_EQ(Reshape(Iota({2, 3, 4}), {4, 0, 2})->shape(), (Shape{4, 3, 2}));
  EXPECT_THAT(ErrorOf([] { Reshape(Iota({2, 3, 4}), {6, 0}); }), HasSubstr("into (6, 0)"));
  // Zero-size inputs: -1 comes from the dims not copied.
  EXPECT_EQ(Reshape(Iota({0, 3}), {0, -1})->shape(), (Shape{0, 3}));
}

TEST(Reshape, AllowZeroMakesZeroLiteral) {
  EXPECT_EQ(Reshape(Iota({0, 3}), {0, 5}, true)->shape(), (Shape{0, 5}));
  EXPECT_THAT(ErrorOf([] {
                Reshape(Iota({2, 3}), {0, 6}, true);
              }),
              HasSubstr("cannot reshape (2, 3) into (0, 6)"));
}

TEST(Reshape, MinusTwoCopiesTheRest) {
  EXPECT_EQ(Reshape(Iota({2, 3, 4}), {-2})->shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(Reshape(Iota({2, 3, 4}), {2, -2})->shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(Reshape(Iota({2, 3, 4}), {-2, 1})->shape(), (Shape{2, 3, 4, 1}));
}

TEST(Reshape, MinusThreeMergesTwoDims) {
  EXPECT_EQ(Reshape(Iota({2, 3, 4}), {-3, 4})->shape(), (Shape{6, 4}));
  EXPECT_EQ(Reshape(Iota({2, 3, 4}), {0, -3})->shape(), (Shape{2, 12}));
  EXPECT_THAT(ErrorOf([] { Reshape(Iota({2}), {-3}); }), HasSubstr("refers past"));
}

TEST(Reshape, MinusFourSplitsADim) {
  const Tensor out = Reshape(Iota({6, 4}), {-4, 2, 3, 4});
  EXPECT_EQ(out->shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(IntValues(out), Range(24));
  EXPECT_EQ(Reshape(Iota({6, 4}), {-4, -1, 3, 0})->shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(Reshape(Iota({6, 4}), {-4, 3, -1, -2})->shape(), (Shape{3, 2, 4}));
  EXPECT_THAT(ErrorOf([] {
                Reshape(Iota({6, 4}), {-4, 4, -1, 0});
              }),
              HasSubstr("-4 cannot split 6"));
  EXPECT_THAT(ErrorOf([] {
                Reshape(Iota({6, 4}), {-4, 2, 2, 0});
              }),
              HasSubstr("-4 cannot split 6"));
  EXPECT_THAT(ErrorOf([] { Reshape(Iota({6, 4}), {-4, -1, -1, 0}); }), HasSubstr("at most one"));
  EXPECT_THAT(ErrorOf([] {
                Reshape(Iota({6, 4}), {0, -4, 2});
              }),
              HasSubstr("followed by two sizes"));
}

TEST(Reshape, BadNewShapes) {
  EXPECT_THAT(ErrorOf([] {
                Reshape(Iota({6, 4}), {5, -1});
              }),
              HasSubstr("reshape: cannot reshape (6, 4) into (5, -1)"));
  EXPECT_THAT(ErrorOf([] {
                Reshape(Iota({6, 4}), {5, 5});
              }),
              HasSubstr("cannot reshape (6, 4) into (5, 5)"));
  EXPECT_THAT(ErrorOf([] { Reshape(Iota({6, 4}), {-1, -1}); }), HasSubstr("more than one -1"));
  EXPECT_THAT(ErrorOf([] {
                Reshape(Iota({6, 4}), {-5});
              }),
              HasSubstr("unsupported special value -5"));
  EXPECT_THAT(ErrorOf([] { Reshape(Iota({6}), {1, 0}); }), HasSubstr("refers past"));
  EXPECT_THAT(ErrorOf([] { Reshape(Iota({4, 0}), {0, -1}, true); }), HasSubstr("ambiguous"));
}

TEST(Reshape, IntAndBoolDTypes) {
  const Tensor ints = Reshape(TensorFrom({2, 3}, kI64, {1, -2, 3, -4, 5, -6}), {3, 2});
  EXPECT_EQ(ints->dtype(), kI64);
  EXPECT_EQ(IntValues(ints), (Ints{1, -2, 3, -4, 5, -6}));
  const Tensor bools = Reshape(TensorFrom({4}, DataType::Bool(), {1, 0, 0, 1}), {2, 2});
  EXPECT_EQ(bools->dtype(), DataType::Bool());
  EXPECT_EQ(IntValues(bools), (Ints{1, 0, 0, 1}));
}

std::string ReshapeType(std::vector<ir::Dim> shape, Ints newshape) {
  return TypeOf("reshape", {TensorOf(std::move(shape))},
                MakeAttrs({{"newshape", std::move(newshape)}}));
}

TEST(Reshape, TypesWithAnyDims) {
  EXPECT_EQ(ReshapeType({2, 3, 4}, {4, -1}), "Tensor[(4, 6), float32]");
  EXPECT_EQ(ReshapeType({kAny, 3, 4}, {0, -1}), "Tensor[(?, 12), float32]");
  EXPECT_EQ(ReshapeType({kAny, 4}, {-1}), "Tensor[(?,), float32]");
  EXPECT_EQ(ReshapeType({kAny, 4}, {2, -1}), "Tensor[(2, ?), float32]");
  EXPECT_EQ(ReshapeType({kAny, 3, 4}, {-3, 4}), "Tensor[(?, 4), float32]");
  EXPECT_EQ(ReshapeType({kAny, 3, 4}, {-2}), "Tensor[(?, 3, 4), float32]");
  EXPECT_EQ(ReshapeType({kAny, 6}, {-4, 2, -1, 0}), "Tensor[(2, ?, 6), float32]");
  EXPECT_EQ(ReshapeType({6, kAny}, {-4, 2, -1, 0}), "Tensor[(2, 3, ?), float32]");
  EXPECT_EQ(ReshapeType({kAny, 4}, {5, 7}), "Tensor[(5, 7), float32]");
  // A contradiction between static dims is a type error even next to `?`.
  EXPECT_THAT(ErrorOf([] {
                ReshapeType({kAny, 6}, {0, 4, -1});
              }),
              HasSubstr("cannot reshape (?, 6) into (0, 4, -1)"));
}

// A bounded `?` bounds what is made of it: -1 by the element count's bound
// over the other output dims, a merge (-3) by the product of bounds.
TEST(Reshape, BoundsFollowTheElementCount) {
  const ir::Dim at_most_16 = ir::Dim::Any(16);
  EXPECT_EQ(ReshapeType({at_most_16, 4}, {-1}), "Tensor[(?<=64,), float32]");
  EXPECT_EQ(ReshapeType({4, 8, at_most_16}, {1, 32, -1}), "Tensor[(1, 32, ?<=16), float32]");
  EXPECT_EQ(ReshapeType({at_most_16, 3, 4}, {-3, 4}), "Tensor[(?<=48, 4), float32]");
  EXPECT_EQ(ReshapeType({at_most_16, 3}, {0, -1}), "Tensor[(?<=16, 3), float32]");
  EXPECT_EQ(ReshapeType({at_most_16, kAny}, {-1}), "Tensor[(?,), float32]");
}

TEST(Reshape, ShapeFunctionChecksWhatTheTypeDeferred) {
  // Tensor[(?, 4)] reshaped to (5, -1) types as (5, ?); a (6, 4) value fails at run time.
  EXPECT_EQ(ReshapeType({kAny, 4}, {5, -1}), "Tensor[(5, ?), float32]");
  const ir::Attrs attrs = MakeAttrs({{"newshape", Ints{5, -1}}});
  EXPECT_THAT(ErrorOf([&] {
                ShapesOf("reshape", {{6, 4}}, attrs);
              }),
              HasSubstr("reshape: cannot reshape (6, 4) into (5, -1)"));
  EXPECT_EQ(ShapesOf("reshape", {{5, 4}}, attrs), (std::vector<Shape>{{5, 4}}));
  EXPECT_THAT(ErrorOf([] {
                ShapesOf("reshape", {{3, 4}}, MakeAttrs({{"newshape", Ints{5, 7}}}));
              }),
              HasSubstr("cannot reshape (3, 4) into (5, 7)"));
}

// ---------------------------------------------------------------------------
// dyn.reshape

TEST(DynReshape, ReadsTheShapeTensor) {
  const Tensor out = Invoke("dyn.reshape", {Iota({2, 3, 4}), TensorFrom({2}, kI64, {4, -1})});
  EXPECT_EQ(out->shape(), (Shape{4, 6}));
  EXPECT_EQ(IntValues(out), Range(24));
  EXPECT_EQ(Invoke("dyn.reshape", {Iota({2, 3, 4}), TensorFrom({3}, kI32, {0, 0, -1})})->shape(),
            (Shape{2, 3, 4}));
  EXPECT_EQ(Invoke("dyn.reshape", {Iota({2, 3}), TensorFrom({1}, kI32, {6})})->shape(), (Shape{6}));
}

TEST(DynReshape, TypeHasTheShapeTensorsLengthAsRank) {
  EXPECT_EQ(TypeOf("dyn.reshape", {TensorOf({2, 3, 4}), TensorOf({2}, kI64)}),
            "Tensor[(?, ?), float32]");
  EXPECT_EQ(TypeOf("dyn.reshape", {TensorOf({kAny}, kI32), TensorOf({3}, kI32)}),
            "Tensor[(?, ?, ?), int32]");
  EXPECT_THAT(ErrorOf([] {
                TypeOf("dyn.reshape", {TensorOf({4}), TensorOf({kAny}, kI64)});
              }),
              HasSubstr("must be static"));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("dyn.reshape", {TensorOf({4}), TensorOf({2})});
              }),
              HasSubstr("1-D integer tensor"));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("dyn.reshape", {TensorOf({4}), TensorOf({1, 2}, kI64)});
              }),
              HasSubstr("1-D integer tensor"));
}

TEST(DynReshape, RunTimeErrors) {
  EXPECT_THAT(ErrorOf([] {
                Invoke("dyn.reshape", {Iota({6, 4}), TensorFrom({2}, kI64, {5, -1})});
              }),
              HasSubstr("dyn.reshape: cannot reshape (6, 4) into (5, -1)"));
  EXPECT_THAT(ErrorOf([] {
                Invoke("dyn.reshape", {Iota({6, 4}), TensorFrom({1}, kI64, {-2})});
              }),
              HasSubstr("only sizes, 0 and -1"));
}

// ---------------------------------------------------------------------------
// reshape_like

TEST(ReshapeLike, TakesTheOtherShapeAndKeepsTheDType) {
  const Tensor out = Invoke("reshape_like", {Iota({2, 3}, kI32), Iota({3, 2})});
  EXPECT_EQ(out->shape(), (Shape{3, 2}));
  EXPECT_EQ(out->dtype(), kI32);
  EXPECT_EQ(IntValues(out), Range(6));
  EXPECT_EQ(TypeOf("reshape_like", {TensorOf({2, 3}, kI64), TensorOf({6, 1})}),
            "Tensor[(6, 1), int64]");
  EXPECT_EQ(TypeOf("reshape_like", {TensorOf({2, 3}), TensorOf({kAny, 2}, kI32)}),
            "Tensor[(?, 2), float32]");
}

TEST(ReshapeLike, DimRanges) {
  const ir::Attrs attrs = MakeAttrs({{"lhs_begin", int64_t{1}}, {"rhs_end", int64_t{2}}});
  EXPECT_EQ(TypeOf("reshape_like", {TensorOf({2, 6}), TensorOf({3, 2, 7})}, attrs),
            "Tensor[(2, 3, 2), float32]");
  EXPECT_EQ(Invoke("reshape_like", {Iota({2, 6}), Iota({3, 2, 7})}, attrs)->shape(),
            (Shape{2, 3, 2}));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("reshape_like", {TensorOf({2, 6}), TensorOf({3})},
                       MakeAttrs({{"lhs_begin", int64_t{2}}, {"lhs_end", int64_t{1}}}));
              }),
              HasSubstr("invalid range"));
}

TEST(ReshapeLike, ElementCountMustMatch) {
  EXPECT_THAT(ErrorOf([] {
                TypeOf("reshape_like", {TensorOf({2, 3}), TensorOf({4, 2})});
              }),
              HasSubstr("reshape_like: cannot reshape (2, 3) into (4, 2)"));
  EXPECT_THAT(ErrorOf([] {
                ShapesOf("reshape_like", {{2, 3}, {4, 2}});
              }),
              HasSubstr("cannot reshape (2, 3) into (4, 2)"));
}

// ---------------------------------------------------------------------------
// transpose, squeeze, expand_dims

TEST(Transpose, ReversesByDefault) {
  const Tensor out = Invoke("transpose", {Iota({2, 3})});
  EXPECT_EQ(out->shape(), (Shape{3, 2}));
  EXPECT_EQ(IntValues(out), (Ints{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(TypeOf("transpose", {TensorOf({kAny, 3, 5})}), "Tensor[(5, 3, ?), float32]");
}

TEST(Transpose, GeneralPermutations) {
  // out[i][j][k] = in[j][k][i] for in of shape (2, 3, 4): axes (2, 0, 1).
  const Tensor in = Iota({2, 3, 4}, kI64);
  const Tensor out = Invoke("transpose", {in}, MakeAttrs({{"axes", Ints{2, 0, -2}}}));
  EXPECT_EQ(out->shape(), (Shape{4, 2, 3}));
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 2; ++j) {
      for (int64_t k = 0; k < 3; ++k) {
        EXPECT_EQ(out->GetAsInt64((i * 2 + j) * 3 + k), (j * 3 + k) * 4 + i);
      }
    }
  }
  // The last axis stays last: rows are copied whole.
  const Tensor rows = Invoke("transpose", {Iota({3, 2, 5}, DataType::Int8())},
                             MakeAttrs({{"axes", Ints{1, 0, 2}}}));
  EXPECT_EQ(rows->shape(), (Shape{2, 3, 5}));
  EXPECT_EQ(rows->GetAsInt64(5), 10);  // out[0][1][0] = in[1][0][0]
  EXPECT_EQ(rows->GetAsInt64(17), 7);  // out[1][0][2] = in[0][1][2]
  EXPECT_EQ(TypeOf("transpose", {TensorOf({kAny, 3, 5})}, MakeAttrs({{"axes", Ints{0, 2, 1}}})),
            "Tensor[(?, 5, 3), float32]");
  EXPECT_EQ(Invoke("transpose", {Iota({})})->shape(), Shape{});
}

TEST(Transpose, EveryElementSize) {
  for (DataType dtype :
       {DataType::Bool(), DataType::Int8(), DataType::Float16(), kI32, kI64, DataType::Float64()}) {
    SCOPED_TRACE(dtype.name());
    const Tensor in =
        dtype.is_bool() ? TensorFrom({2, 3}, dtype, {1, 0, 0, 0, 1, 1}) : Iota({2, 3}, dtype);
    const Tensor out = Invoke("transpose", {in});
    EXPECT_EQ(out->dtype(), dtype);
    EXPECT_EQ(IntValues(out),
              dtype.is_bool() ? (Ints{1, 0, 0, 1, 0, 1}) : (Ints{0, 3, 1, 4, 2, 5}));
  }
}

TEST(Transpose, BadAxes) {
  EXPECT_THAT(ErrorOf([] {
                TypeOf("transpose", {TensorOf({2, 3})}, MakeAttrs({{"axes", Ints{0}}}));
              }),
              HasSubstr("do not match rank 2"));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("transpose", {TensorOf({2, 3})}, MakeAttrs({{"axes", Ints{0, -2}}}));
              }),
              HasSubstr("not a permutation"));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("transpose", {TensorOf({2, 3})}, MakeAttrs({{"axes", Ints{0, 2}}}));
              }),
              HasSubstr("out of range"));
}

TEST(Squeeze, RemovesSizeOneDims) {
  const Tensor out = Invoke("squeeze", {Iota({1, 3, 1})});
  EXPECT_EQ(out->shape(), (Shape{3}));
  EXPECT_EQ(IntValues(out), Range(3));
  EXPECT_EQ(Invoke("squeeze", {Iota({1, 3, 1})}, MakeAttrs({{"axis", Ints{0}}}))->shape(),
            (Shape{3, 1}));
  EXPECT_EQ(Invoke("squeeze", {Iota({1, 3, 1})}, MakeAttrs({{"axis", Ints{-1}}}))->shape(),
            (Shape{1, 3}));
  EXPECT_EQ(Invoke("squeeze", {Iota({1, 1})})->shape(), Shape{});
}

TEST(Squeeze, AnyDimsAndErrors) {
  EXPECT_EQ(TypeOf("squeeze", {TensorOf({kAny, 3, 1})}, MakeAttrs({{"axis", Ints{0, 2}}})),
            "Tensor[(3,), float32]");
  EXPECT_THAT(ErrorOf([] {
                TypeOf("squeeze", {TensorOf({1, 3})}, MakeAttrs({{"axis", Ints{1}}}));
              }),
              HasSubstr("squeeze: dimension 1 of (1, 3) is 3, not 1"));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("squeeze", {TensorOf({kAny, 1})});
              }),
              HasSubstr("axis must be given"));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("squeeze", {TensorOf({1, 1})}, MakeAttrs({{"axis", Ints{0, -2}}}));
              }),
              HasSubstr("given twice"));
  // The `?` dim squeezed by the type must be 1 at run time.
  EXPECT_THAT(ErrorOf([] {
                ShapesOf("squeeze", {{2, 3}}, MakeAttrs({{"axis", Ints{0}}}));
              }),
              HasSubstr("squeeze: dimension 0 of (2, 3) is 2, not 1"));
}

TEST(ExpandDims, InsertsAxes) {
  const auto expand = [](const Shape& shape, int64_t axis, int64_t count) {
    return Invoke("expand_dims", {Iota(shape)}, MakeAttrs({{"axis", axis}, {"num_newaxis", count}}))
        ->shape();
  };
  EXPECT_EQ(expand({2, 3}, 1, 1), (Shape{2, 1, 3}));
  EXPECT_EQ(expand({2, 3}, -1, 1), (Shape{2, 3, 1}));
  EXPECT_EQ(expand({2, 3}, 0, 2), (Shape{1, 1, 2, 3}));
  EXPECT_EQ(expand({2, 3}, -3, 1), (Shape{1, 2, 3}));
  EXPECT_EQ(expand({2, 3}, 1, 0), (Shape{2, 3}));
  EXPECT_EQ(expand({}, 0, 1), (Shape{1}));
  EXPECT_EQ(TypeOf("expand_dims", {TensorOf({kAny, 3}, kI32)}, MakeAttrs({{"axis", int64_t{1}}})),
            "Tensor[(?, 1, 3), int32]");
  EXPECT_THAT(ErrorOf([&] { expand({2, 3}, 3, 1); }), HasSubstr("axis 3 is out of range"));
  EXPECT_THAT(ErrorOf([&] { expand({2, 3}, -4, 1); }), HasSubstr("axis -4 is out of range"));
  EXPECT_THAT(ErrorOf([&] { expand({2, 3}, 0, -1); }), HasSubstr("num_newaxis"));
  // A rank past kMaxRank is refused by the type relation, before any shape
  // of that many dimensions is made.
  EXPECT_EQ(expand({2, 3}, 0, 30).size(), 32u);
  EXPECT_THAT(ErrorOf([] {
                TypeOf("expand_dims", {TensorOf({2, 3}, kI32)},
                       MakeAttrs({{"axis", int64_t{0}}, {"num_newaxis", int64_t{2147483647}}}));
              }),
              HasSubstr("expand_dims: num_newaxis 2147483647 gives a rank above 32, the most a "
                        "tensor may have"));
}

// ---------------------------------------------------------------------------
// concatenate, stack

TEST(Concatenate, JoinsAlongAnAxis) {
  const Tensor rows = InvokeOnTuple("concatenate", {Iota({2, 3}), Iota({1, 3})});
  EXPECT_EQ(rows->shape(), (Shape{3, 3}));
  EXPECT_EQ(IntValues(rows), (Ints{0, 1, 2, 3, 4, 5, 0, 1, 2}));
  const Tensor cols = InvokeOnTuple("concatenate", {Iota({2, 1}, kI32), Iota({2, 2}, kI32)},
                                    MakeAttrs({{"axis", int64_t{-1}}}));
  EXPECT_EQ(cols->shape(), (Shape{2, 3}));
  EXPECT_EQ(cols->dtype(), kI32);
  EXPECT_EQ(IntValues(cols), (Ints{0, 0, 1, 1, 2, 3}));
  const Tensor three = InvokeOnTuple(
      "concatenate",
      {TensorFrom({1, 1}, DataType::Bool(), {1}), TensorFrom({1, 2}, DataType::Bool(), {0, 1}),
       TensorFrom({1, 0}, DataType::Bool(), {})},
      MakeAttrs({{"axis", int64_t{1}}}));
  EXPECT_EQ(IntValues(three), (Ints{1, 0, 1}));
}

TEST(Concatenate, TypesWithAnyDims) {
  EXPECT_EQ(TypeOf("concatenate", {Tup({TensorOf({kAny, 2}), TensorOf({1, 2})})}),
            "Tensor[(?, 2), float32]");
  EXPECT_EQ(TypeOf("concatenate", {Tup({TensorOf({3, 2}), TensorOf({1, 2})})}),
            "Tensor[(4, 2), float32]");
  EXPECT_EQ(TypeOf("concatenate", {Tup({TensorOf({kAny, 2}), TensorOf({3, 1})})},
                   MakeAttrs({{"axis", int64_t{1}}})),
            "Tensor[(3, 3), float32]");
  EXPECT_EQ(TypeOf("concatenate", {Tup({TensorOf({kAny}), TensorOf({kAny})})}),
            "Tensor[(?,), float32]");
}

TEST(Concatenate, Errors) {
  EXPECT_THAT(ErrorOf([] {
                TypeOf("concatenate", {Tup({TensorOf({2, 2}), TensorOf({3, 1})})});
              }),
              HasSubstr("input 1 (3, 1) and input 0 (2, 2) differ in dimension 1"));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("concatenate", {Tup({TensorOf({2}), TensorOf({2, 1})})});
              }),
              HasSubstr("differ in rank"));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("concatenate", {Tup({TensorOf({2}), TensorOf({2}, kI32)})});
              }),
              HasSubstr("differ in dtype"));
  EXPECT_THAT(ErrorOf([] { TypeOf("concatenate", {TensorOf({2})}); }),
              HasSubstr("must be a tuple of tensors"));
  EXPECT_THAT(ErrorOf([] { TypeOf("concatenate", {Tup({})}); }), HasSubstr("no tensors"));
  // Along axis 1, Tensor[(?, 2)] and Tensor[(3, 1)] type-check; a (2, 2) value fails at run time.
  EXPECT_THAT(ErrorOf([] {
                ShapesOf("concatenate", {{2, 2}, {3, 1}}, MakeAttrs({{"axis", int64_t{1}}}));
              }),
              HasSubstr("concatenate: input 1 (3, 1) and input 0 (2, 2) differ in dimension 0"));
}

TEST(Stack, AddsANewAxis) {
  const Tensor front = InvokeOnTuple("stack", {Iota({2, 3}), Iota({2, 3})});
  EXPECT_EQ(front->shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(IntValues(front), (Ints{0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5}));
  const Tensor back = InvokeOnTuple("stack", {Iota({3}, kI64), TensorFrom({3}, kI64, {7, 8, 9})},
                                    MakeAttrs({{"axis", int64_t{-1}}}));
  EXPECT_EQ(back->shape(), (Shape{3, 2}));
  EXPECT_EQ(IntValues(back), (Ints{0, 7, 1, 8, 2, 9}));
  EXPECT_EQ(
      TypeOf("stack", {Tup({TensorOf({kAny, 3}), TensorOf({2, kAny}), TensorOf({kAny, kAny})})},
             MakeAttrs({{"axis", int64_t{1}}})),
      "Tensor[(2, 3, 3), float32]");
  EXPECT_THAT(ErrorOf([] {
                TypeOf("stack", {Tup({TensorOf({2, 3}), TensorOf({3, 3})})});
              }),
              HasSubstr("stack: input 1 (3, 3) and input 0 (2, 3) differ in dimension 0"));
  EXPECT_THAT(ErrorOf([] { ShapesOf("stack", {{2}, {3}}); }), HasSubstr("differ in dimension 0"));
}

// ---------------------------------------------------------------------------
// split

std::vector<Tensor> Split(const Tensor& data, ir::AttrValue indices_or_sections, int64_t axis = 0) {
  const Ref<Object> result = InvokeValues(
      "split", {data}, MakeAttrs({{"indices_or_sections", indices_or_sections}, {"axis", axis}}));
  const ADT tuple = result.as<ADTNode>();
  if (!tuple) throw Error("test: split did not return a tuple");
  std::vector<Tensor> pieces;
  for (const Ref<Object>& field : tuple->fields()) pieces.push_back(field.as<TensorNode>());
  return pieces;
}

TEST(Split, EqualSections) {
  const std::vector<Tensor> pieces = Split(Iota({6, 2}), int64_t{3});
  ASSERT_EQ(pieces.size(), 3u);
  for (const Tensor& piece : pieces) EXPECT_EQ(piece->shape(), (Shape{2, 2}));
  EXPECT_EQ(IntValues(pieces[2]), (Ints{8, 9, 10, 11}));
  const std::vector<Tensor> one = Split(Iota({3}), int64_t{1});
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(IntValues(one[0]), Range(3));
}

TEST(Split, Indices) {
  const std::vector<Tensor> rows = Split(Iota({6, 2}, kI32), Ints{1, 4});
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]->shape(), (Shape{1, 2}));
  EXPECT_EQ(rows[1]->shape(), (Shape{3, 2}));
  EXPECT_EQ(rows[2]->shape(), (Shape{2, 2}));
  EXPECT_EQ(IntValues(rows[1]), (Ints{2, 3, 4, 5, 6, 7}));
  const std::vector<Tensor> cols =
      Split(TensorFrom({2, 5}, DataType::Bool(), {1, 0, 1, 1, 0, 0, 1, 0, 0, 1}), Ints{2}, -1);
  ASSERT_EQ(cols.size(), 2u);
  EXPECT_EQ(IntValues(cols[0]), (Ints{1, 0, 0, 1}));
  EXPECT_EQ(IntValues(cols[1]), (Ints{1, 1, 0, 0, 0, 1}));
  // Repeated and boundary indices give empty pieces.
  const std::vector<Tensor> edges = Split(Iota({3}), Ints{0, 3, 3});
  ASSERT_EQ(edges.size(), 4u);
  EXPECT_EQ(edges[0]->shape(), (Shape{0}));
  EXPECT_EQ(IntValues(edges[1]), Range(3));
  EXPECT_EQ(edges[3]->shape(), (Shape{0}));
}

TEST(Split, TupleTypesWithAnyDims) {
  const auto type = [](std::vector<ir::Dim> shape, ir::AttrValue split, int64_t axis) {
    return TypeOf("split", {TensorOf(std::move(shape))},
                  MakeAttrs({{"indices_or_sections", split}, {"axis", axis}}));
  };
  EXPECT_EQ(type({6, 2}, int64_t{2}, 0), "(Tensor[(3, 2), float32], Tensor[(3, 2), float32])");
  EXPECT_EQ(type({kAny, 2}, int64_t{2}, 0), "(Tensor[(?, 2), float32], Tensor[(?, 2), float32])");
  EXPECT_EQ(type({kAny, 4}, Ints{1}, 1), "(Tensor[(?, 1), float32], Tensor[(?, 3), float32])");
  EXPECT_EQ(type({kAny, 4}, Ints{2}, 0), "(Tensor[(2, 4), float32], Tensor[(?, 4), float32])");
  EXPECT_EQ(type({4}, int64_t{1}, 0), "(Tensor[(4,), float32],)");
  EXPECT_THAT(ErrorOf([&] {
                type({7, 2}, int64_t{3}, 0);
              }),
              HasSubstr("split: cannot split (7, 2) into 3 equal sections along axis 0"));
  EXPECT_THAT(ErrorOf([&] { type({7, 2}, int64_t{0}, 0); }), HasSubstr("must be positive"));
  EXPECT_THAT(ErrorOf([&] { type({7, 2}, Ints{3, 1}, 0); }), HasSubstr("must ascend"));
  EXPECT_THAT(ErrorOf([&] { type({7, 2}, Ints{8}, 0); }), HasSubstr("must ascend"));
}

TEST(Split, RunTimeChecksOfAnyDims) {
  const ir::Attrs sections = MakeAttrs({{"indices_or_sections", int64_t{3}}});
  EXPECT_EQ(ShapesOf("split", {{6, 2}}, sections), (std::vector<Shape>{{2, 2}, {2, 2}, {2, 2}}));
  EXPECT_THAT(ErrorOf([&] {
                ShapesOf("split", {{7, 2}}, sections);
              }),
              HasSubstr("split: cannot split (7, 2) into 3 equal sections"));
  EXPECT_THAT(ErrorOf([] {
                ShapesOf("split", {{1, 2}}, MakeAttrs({{"indices_or_sections", Ints{2}}}));
              }),
              HasSubstr("must ascend within dimension 0 of (1, 2)"));
}

// ---------------------------------------------------------------------------
// take

Tensor Take(const Tensor& data, const Tensor& indices, ir::AttrValue axis,
            const std::string& mode = "clip", int64_t batch_dims = 0) {
  return Invoke("take", {data, indices},
                MakeAttrs({{"axis", axis}, {"batch_dims", batch_dims}, {"mode", mode}}));
}

TEST(Take, FlattenedDataAndModes) {
  const Tensor data = TensorFrom({2, 3}, kI64, {10, 11, 12, 13, 14, 15});
  const Tensor indices = TensorFrom({2, 2}, kI32, {7, 0, -1, 4});
  const Tensor clipped = Take(data, indices, {});
  EXPECT_EQ(clipped->shape(), (Shape{2, 2}));
  EXPECT_EQ(IntValues(clipped), (Ints{15, 10, 10, 14}));
  EXPECT_EQ(IntValues(Take(data, indices, {}, "wrap")), (Ints{11, 10, 15, 14}));
  EXPECT_EQ(IntValues(Take(data, TensorFrom({2}, kI64, {5, 0}), {}, "fast")), (Ints{15, 10}));
  EXPECT_THAT(ErrorOf([&] { Take(data, indices, {}, "fast"); }),
              HasSubstr("take: index 7 is out of range for the flattened data (2, 3)"));
  EXPECT_THAT(ErrorOf([&] { Take(data, TensorFrom({1}, kI32, {-1}), {}, "fast"); }),
              HasSubstr("index -1 is out of range"));
  EXPECT_THAT(ErrorOf([&] { Take(data, indices, {}, "raise"); }), HasSubstr("mode must be"));
}

TEST(Take, AlongAnAxis) {
  const Tensor data = Iota({3, 4}, kF32);
  const Tensor rows = Take(data, TensorFrom({2}, kI64, {2, 0}), int64_t{0});
  EXPECT_EQ(rows->shape(), (Shape{2, 4}));
  EXPECT_EQ(IntValues(rows), (Ints{8, 9, 10, 11, 0, 1, 2, 3}));
  const Tensor cols = Take(data, TensorFrom({1, 3}, kI32, {3, 1, 5}), int64_t{-1}, "wrap");
  EXPECT_EQ(cols->shape(), (Shape{3, 1, 3}));
  EXPECT_EQ(IntValues(cols), (Ints{3, 1, 1, 7, 5, 5, 11, 9, 9}));
  const Tensor scalar_index = Take(data, TensorFrom({}, kI32, {1}), int64_t{1});
  EXPECT_EQ(scalar_index->shape(), (Shape{3}));
  EXPECT_EQ(IntValues(scalar_index), (Ints{1, 5, 9}));
  EXPECT_THAT(ErrorOf([&] { Take(data, TensorFrom({1}, kI32, {4}), int64_t{1}, "fast"); }),
              HasSubstr("take: index 4 is out of range for axis 1 of (3, 4)"));
  EXPECT_THAT(ErrorOf([] {
                Take(Iota({0, 2}), TensorFrom({1}, kI32, {0}), int64_t{0});
              }),
              HasSubstr("out of range for axis 0 of (0, 2)"));
  EXPECT_EQ(Take(Iota({0, 2}), TensorFrom({0}, kI32, {}), int64_t{0})->shape(), (Shape{0, 2}));
}

TEST(Take, BatchDims) {
  // out[b][k] = data[b][indices[b][k]]
  const Tensor out =
      Take(Iota({2, 3}), TensorFrom({2, 2}, kI64, {2, 0, 1, 1}), int64_t{1}, "clip", 1);
  EXPECT_EQ(out->shape(), (Shape{2, 2}));
  EXPECT_EQ(IntValues(out), (Ints{2, 0, 4, 4}));
  EXPECT_THAT(ErrorOf([] {
                Take(Iota({2, 3}), TensorFrom({2, 2}, kI64, {0, 0, 0, 0}), int64_t{0}, "clip", 1);
              }),
              HasSubstr("batch_dims 1 must lie within [0, 0]"));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("take", {TensorOf({2, 3}), TensorOf({3, 1}, kI32)},
                       MakeAttrs({{"axis", int64_t{1}}, {"batch_dims", int64_t{1}}}));
              }),
              HasSubstr("batch dimension 0 differs"));
}

TEST(Take, Types) {
  const auto type = [](std::vector<ir::Dim> data, std::vector<ir::Dim> indices, DataType dtype,
                       ir::AttrValue axis) {
    return TypeOf("take", {TensorOf(std::move(data), kI32), TensorOf(std::move(indices), dtype)},
                  MakeAttrs({{"axis", axis}}));
  };
  EXPECT_EQ(type({kAny, 3}, {kAny}, kI64, int64_t{0}), "Tensor[(?, 3), int32]");
  EXPECT_EQ(type({kAny, 3}, {2, kAny}, kI32, int64_t{1}), "Tensor[(?, 2, ?), int32]");
  EXPECT_EQ(type({kAny, 3}, {4}, kI32, {}), "Tensor[(4,), int32]");
  EXPECT_THAT(ErrorOf([&] { type({3}, {4}, kF32, int64_t{0}); }),
              HasSubstr("indices must be int32 or int64, got float32"));
  EXPECT_THAT(ErrorOf([&] { type({3}, {4}, kI32, int64_t{1}); }), HasSubstr("out of range"));
}

// ---------------------------------------------------------------------------
// strided_slice, dyn.strided_slice

Tensor Slice(const Tensor& data, Ints begin, Ints end, ir::AttrValue strides = {},
             ir::AttrValue axes = {}, const std::string& mode = "end") {
  return Invoke("strided_slice", {data},
                MakeAttrs({{"begin", std::move(begin)},
                           {"end", std::move(end)},
                           {"strides", std::move(strides)},
                           {"axes", std::move(axes)},
                           {"slice_mode", mode}}));
}

TEST(StridedSlice, PositiveAndNegativeStrides) {
  const Tensor data = Iota({10}, kI32);
  EXPECT_EQ(IntValues(Slice(data, {1}, {8}, Ints{3})), (Ints{1, 4, 7}));
  EXPECT_EQ(IntValues(Slice(data, {8}, {1}, Ints{-3})), (Ints{8, 5, 2}));
  EXPECT_EQ(IntValues(Slice(data, {-1}, {-11}, Ints{-1})), (Ints{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(IntValues(Slice(data, {-3}, {100})), (Ints{7, 8, 9}));
  EXPECT_EQ(IntValues(Slice(data, {-100}, {2})), (Ints{0, 1}));
  EXPECT_EQ(IntValues(Slice(data, {20}, {-20}, Ints{-4})), (Ints{9, 5, 1}));
  EXPECT_EQ(Slice(data, {5}, {2})->shape(), (Shape{0}));
  EXPECT_EQ(Slice(data, {2}, {5}, Ints{-1})->shape(), (Shape{0}));
  EXPECT_EQ(IntValues(Slice(data, {3}, {4}, Ints{std::numeric_limits<int64_t>::min()})), (Ints{}));
  EXPECT_EQ(IntValues(Slice(data, {4}, {3}, Ints{std::numeric_limits<int64_t>::min()})), (Ints{4}));
}

TEST(StridedSlice, MultipleAxesAxesAndSizeMode) {
  const Tensor data = Iota({3, 4}, kF32);
  // Missing entries slice the whole axis.
  EXPECT_EQ(IntValues(Slice(data, {1}, {3})), (Ints{4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(IntValues(Slice(data, {2, 3}, {-4, -5}, Ints{-2, -2})), (Ints{11, 9, 3, 1}));
  EXPECT_EQ(IntValues(Slice(data, {1}, {3}, {}, Ints{1})), (Ints{1, 2, 5, 6, 9, 10}));
  EXPECT_EQ(IntValues(Slice(data, {-1, 0}, {4, 2}, {}, Ints{-1, 0})), (Ints{3, 7}));
  const Tensor sized = Slice(data, {1, 1}, {2, -1}, {}, {}, "size");
  EXPECT_EQ(sized->shape(), (Shape{2, 3}));
  EXPECT_EQ(IntValues(sized), (Ints{5, 6, 7, 9, 10, 11}));
  EXPECT_EQ(Slice(data, {-2, 3}, {9, 9}, {}, {}, "size")->shape(), (Shape{2, 1}));
  EXPECT_EQ(IntValues(Slice(TensorFrom({4}, DataType::Bool(), {1, 0, 0, 1}), {0}, {4}, Ints{3})),
            (Ints{1, 1}));
}

TEST(StridedSlice, TypesAndErrors) {
  const auto type = [](std::vector<ir::Dim> shape, Ints begin, Ints end, ir::AttrValue axes = {}) {
    return TypeOf("strided_slice", {TensorOf(std::move(shape))},
                  MakeAttrs({{"begin", begin}, {"end", end}, {"axes", axes}}));
  };
  EXPECT_EQ(type({kAny, 4}, {0, 1}, {2, 3}), "Tensor[(?, 2), float32]");
  EXPECT_EQ(type({kAny, 4}, {1}, {3}, Ints{1}), "Tensor[(?, 2), float32]");
  EXPECT_EQ(type({5, kAny}, {1}, {3}), "Tensor[(2, ?), float32]");
  EXPECT_THAT(ErrorOf([&] {
                type({5, 5}, {0}, {1}, Ints{0, 1});
              }),
              HasSubstr("one entry per axis"));
  EXPECT_THAT(ErrorOf([&] { type({5}, {0}, {1}, Ints{0, -1}); }), HasSubstr("given twice"));
  EXPECT_THAT(ErrorOf([&] { type({5}, {0, 0}, {1, 1}); }), HasSubstr("more entries than the rank"));
  EXPECT_THAT(ErrorOf([] { Slice(Iota({5}), {0}, {1}, Ints{0}); }), HasSubstr("stride 0"));
  EXPECT_THAT(ErrorOf([] { Slice(Iota({5}), {0}, {1}, {}, {}, "step"); }),
              HasSubstr("slice_mode must be"));
}

// A bounded run-time extent sliced from a non-negative begin to a
// non-negative end holds at most the range's elements (BERT's first token
// of `?<=512` is `?<=1`); a negative index counts from an end not known
// yet, and an unbounded extent stays unbounded (storage is planned for a
// bound, and "to the end" is often written as a huge end).
TEST(StridedSlice, TypeBoundsARunTimeExtentByTheRange) {
  const auto type = [](ir::Dim dim, Ints begin, Ints end, Ints strides = {},
                       std::string mode = "end") {
    return TypeOf("strided_slice", {TensorOf({dim, 8})},
                  MakeAttrs({{"begin", begin},
                             {"end", end},
                             {"strides", strides},
                             {"axes", Ints{0}},
                             {"slice_mode", mode}}));
  };
  const ir::Dim bounded = ir::Dim::Any(512);
  EXPECT_EQ(type(bounded, {0}, {1}), "Tensor[(?<=1, 8), float32]");
  EXPECT_EQ(type(bounded, {3}, {10}, {2}), "Tensor[(?<=4, 8), float32]");
  EXPECT_EQ(type(ir::Dim::Any(2), {0}, {10}), "Tensor[(?<=2, 8), float32]");
  EXPECT_EQ(type(bounded, {4}, {2}), "Tensor[(?<=0, 8), float32]");
  EXPECT_EQ(type(bounded, {-1}, {1000}), "Tensor[(?<=512, 8), float32]");
  EXPECT_EQ(type(bounded, {5}, {-1}), "Tensor[(?<=512, 8), float32]");
  EXPECT_EQ(type(bounded, {-3}, {2}, {}, "size"), "Tensor[(?<=2, 8), float32]");
  EXPECT_EQ(type(bounded, {0}, {-1}, {}, "size"), "Tensor[(?<=512, 8), float32]");
  EXPECT_EQ(type(kAny, {0}, {1}), "Tensor[(?, 8), float32]");
}

// The sliced axes (as many as the longest index tensor) become `?`, at most
// as long as they were; the others keep their dims.
TEST(DynStridedSlice, TypeBoundsEachSlicedAxisByItsLength) {
  EXPECT_EQ(TypeOf("dyn.strided_slice", {TensorOf({512, 8}), TensorOf({1}, kI64),
                                         TensorOf({1}, kI64), TensorOf({1}, kI64)}),
            "Tensor[(?<=512, 8), float32]");
  EXPECT_EQ(TypeOf("dyn.strided_slice", {TensorOf({ir::Dim::Any(9), kAny, 3}), TensorOf({2}, kI64),
                                         TensorOf({1}, kI64), TensorOf({1}, kI64)}),
            "Tensor[(?<=9, ?, 3), float32]");
  EXPECT_EQ(TypeOf("dyn.strided_slice", {TensorOf({5, 6}), TensorOf({kAny}, kI64),
                                         TensorOf({1}, kI64), TensorOf({1}, kI64)}),
            "Tensor[(?<=5, ?<=6), float32]");
}

TEST(DynStridedSlice, ReadsTheIndexTensors) {
  const Tensor out =
      Invoke("dyn.strided_slice", {Iota({3, 4}), TensorFrom({2}, kI64, {1, 0}),
                                   TensorFrom({2}, kI64, {3, 4}), TensorFrom({2}, kI64, {1, 2})});
  EXPECT_EQ(out->shape(), (Shape{2, 2}));
  EXPECT_EQ(IntValues(out), (Ints{4, 6, 8, 10}));
  const Tensor reversed =
      Invoke("dyn.strided_slice", {Iota({5}, kI32), TensorFrom({1}, kI32, {-1}),
                                   TensorFrom({1}, kI32, {-6}), TensorFrom({1}, kI32, {-2})});
  EXPECT_EQ(IntValues(reversed), (Ints{4, 2, 0}));
  const Tensor sized = Invoke("dyn.strided_slice",
                              {Iota({3, 4}), TensorFrom({2}, kI64, {1, 2}),
                               TensorFrom({2}, kI64, {1, -1}), TensorFrom({2}, kI64, {1, 1})},
                              MakeAttrs({{"slice_mode", std::string("size")}}));
  EXPECT_EQ(IntValues(sized), (Ints{6, 7}));
}

TEST(DynStridedSlice, TypesAndErrors) {
  EXPECT_EQ(TypeOf("dyn.strided_slice", {TensorOf({kAny, 4}, kI32), TensorOf({2}, kI64),
                                         TensorOf({2}, kI64), TensorOf({2}, kI64)}),
            "Tensor[(?, ?<=4), int32]");
  EXPECT_THAT(ErrorOf([] {
                TypeOf("dyn.strided_slice",
                       {TensorOf({4}), TensorOf({1}), TensorOf({1}, kI64), TensorOf({1}, kI64)});
              }),
              HasSubstr("begin must be a 1-D integer tensor"));
  EXPECT_THAT(ErrorOf([] {
                Invoke("dyn.strided_slice",
                       {Iota({4}), TensorFrom({1}, kI64, {0}), TensorFrom({1}, kI64, {2}),
                        TensorFrom({1}, kI64, {0})});
              }),
              HasSubstr("dyn.strided_slice: stride 0 on axis 0"));
}

}  // namespace
}  // namespace nimble::op::testing
