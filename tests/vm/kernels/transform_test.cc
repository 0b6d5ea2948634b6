// The transform family's built-in kernels (nimble/vm/kernels/transform.cc),
// run through the kernel ABI, against the compiler's reference kernels: every
// op over odd, empty, rank-0 and parallel-sized shapes, every attribute form
// and every dtype; and the errors the kernels and shape functions report
// through the ABI.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "nimble/vm/adt.h"
#include "tests/error_of.h"
#include "tests/vm/kernels/kernel_test_util.h"

namespace nimble::vm::testing {
namespace {

using ::testing::HasSubstr;
using Ints = std::vector<int64_t>;

const DataType kF32 = DataType::Float32();
const DataType kI32 = DataType::Int32();
const DataType kI64 = DataType::Int64();
const std::vector<DataType> kAllDTypes = {
    DataType::Bool(), DataType::Int8(), kI32, kI64, DataType::Float16(), kF32, DataType::Float64()};
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

Attrs MakeAttrs(std::vector<std::pair<std::string, AttrValue>> entries) {
  Attrs attrs;
  for (auto& [name, value] : entries) attrs.Set(name, std::move(value));
  return attrs;
}

Tensor Random(const Shape& shape, DataType dtype, uint32_t seed, double low = -2.0,
              double high = 2.0) {
  std::mt19937 rng(seed);
  return RandomTensor(shape, dtype, rng, low, high);
}

Tensor IntTensor(const Ints& values, DataType dtype = kI64) {
  Tensor tensor = TensorNode::Empty({static_cast<int64_t>(values.size())}, dtype);
  for (size_t i = 0; i < values.size(); ++i) {
    tensor->SetFromDouble(static_cast<int64_t>(i), static_cast<double>(values[i]));
  }
  return tensor;
}

Ref<Object> Tuple(const std::vector<Tensor>& fields) {
  return MakeTuple(std::vector<Ref<Object>>(fields.begin(), fields.end()));
}

// One input tensor of `shape`, with `attrs`.
struct UnaryCase {
  Shape shape;
  Attrs attrs;
};

// Every case on random float32 data, and the first case in every dtype.
void CheckUnaryOp(const std::string& op, const std::vector<UnaryCase>& cases) {
  uint32_t seed = 1;
  for (const UnaryCase& c : cases) {
    SCOPED_TRACE(ShapeToString(c.shape));
    ExpectBuiltinMatchesReference(op, {Random(c.shape, kF32, seed++)}, c.attrs);
  }
  for (DataType dtype : kAllDTypes) {
    SCOPED_TRACE(dtype.name());
    ExpectBuiltinMatchesReference(op, {Random(cases[0].shape, dtype, seed++)}, cases[0].attrs);
  }
}

// ---------------------------------------------------------------------------
// Registration.

TEST(TransformKernels, EveryOpHasARuntimeDefinitionWithAKernel) {
  const std::pair<const char*, ShapeFuncMode> ops[] = {
      {"reshape", ShapeFuncMode::kDataIndependent},
      {"reshape_like", ShapeFuncMode::kDataIndependent},
      {"transpose", ShapeFuncMode::kDataIndependent},
      {"squeeze", ShapeFuncMode::kDataIndependent},
      {"expand_dims", ShapeFuncMode::kDataIndependent},
      {"concatenate", ShapeFuncMode::kDataIndependent},
      {"stack", ShapeFuncMode::kDataIndependent},
      {"split", ShapeFuncMode::kDataIndependent},
      {"take", ShapeFuncMode::kDataIndependent},
      {"strided_slice", ShapeFuncMode::kDataIndependent},
      {"dyn.reshape", ShapeFuncMode::kDataDependent},
      {"dyn.strided_slice", ShapeFuncMode::kDataDependent},
  };
  for (const auto& [name, mode] : ops) {
    SCOPED_TRACE(name);
    const OpKernelDef* def = OpKernelRegistry::Global().Find(name);
    ASSERT_NE(def, nullptr);
    EXPECT_TRUE(def->kernel);
    EXPECT_TRUE(def->shape_func);
    EXPECT_EQ(def->shape_mode, mode);
    EXPECT_TRUE(KernelRegistry::Global().Contains(name));
    EXPECT_TRUE(KernelRegistry::Global().Contains(ShapeFuncKernelName(name)));
  }
}

TEST(TransformKernels, SplitHasOneOutputPerPiece) {
  const OpKernelDef& split = *OpKernelRegistry::Global().Find("split");
  EXPECT_EQ(split.NumOutputs(MakeAttrs({{"indices_or_sections", int64_t{3}}})), 3);
  EXPECT_EQ(split.NumOutputs(MakeAttrs({{"indices_or_sections", Ints{1, 4}}})), 3);
  EXPECT_EQ(split.NumOutputs(MakeAttrs({{"indices_or_sections", Ints{}}})), 1);
  EXPECT_THAT(ErrorOf([&] {
                split.NumOutputs(MakeAttrs({{"indices_or_sections", int64_t{0}}}));
              }),
              HasSubstr("must be positive"));
}

// ---------------------------------------------------------------------------
// reshape and its kin: one copy.

TEST(TransformKernels, Reshape) {
  auto reshape = [](Shape shape, Ints newshape, bool allowzero = false) {
    return UnaryCase{std::move(shape),
                     MakeAttrs({{"newshape", std::move(newshape)}, {"allowzero", allowzero}})};
  };
  CheckUnaryOp("reshape",
               {
                   reshape({2, 3, 4}, {4, -1}), reshape({7, 13}, {-1}), reshape({0, 3}, {0, -1}),
                   reshape({}, {1, 1, 1}), reshape({1}, {}), reshape({6, 4}, {-4, 2, 3, 4}),
                   reshape({2, 3, 4}, {-3, 4}), reshape({2, 3, 4}, {2, -2}),
                   reshape({0, 3}, {0, 5}, true), reshape({514, 520}, {-1, 257}),  // parallel
               });
}

TEST(TransformKernels, ReshapeLike) {
  struct Case {
    Shape data;
    Shape like;
    Attrs attrs;
  };
  const Case cases[] = {
      {{2, 6}, {3, 4}, {}},
      {{7, 13}, {91}, {}},
      {{2, 6}, {3, 2, 7}, MakeAttrs({{"lhs_begin", int64_t{1}}, {"rhs_end", int64_t{2}}})},
      {{0, 4}, {2, 0}, {}},
      {{1}, {}, {}},
      {{600, 500}, {500, 600}, {}},
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    for (DataType dtype : {kF32, kI64, DataType::Bool()}) {
      SCOPED_TRACE(ShapeToString(c.data) + " like " + ShapeToString(c.like) + " " + dtype.name());
      ExpectBuiltinMatchesReference(
          "reshape_like", {Random(c.data, dtype, seed), Random(c.like, kI32, seed + 1)}, c.attrs);
      seed += 2;
    }
  }
}

TEST(TransformKernels, Squeeze) {
  auto squeeze = [](Shape shape, AttrValue axis) {
    return UnaryCase{std::move(shape), MakeAttrs({{"axis", std::move(axis)}})};
  };
  CheckUnaryOp("squeeze", {
                              squeeze({1, 3, 1, 7}, {}),
                              squeeze({1, 3, 1, 7}, Ints{-2}),
                              squeeze({1, 3, 1, 7}, Ints{0, 2}),
                              squeeze({1}, Ints{0}),
                              squeeze({0, 1}, Ints{1}),
                              squeeze({}, {}),
                              squeeze({1, 700, 1, 400}, {}),
                          });
}

TEST(TransformKernels, ExpandDims) {
  auto expand = [](Shape shape, int64_t axis, int64_t count = 1) {
    return UnaryCase{std::move(shape), MakeAttrs({{"axis", axis}, {"num_newaxis", count}})};
  };
  CheckUnaryOp("expand_dims", {
                                  expand({3, 7}, 0),
                                  expand({3, 7}, -1),
                                  expand({3, 7}, 1, 2),
                                  expand({3, 7}, 2, 0),
                                  expand({}, 0),
                                  expand({0, 5}, -3),
                                  expand({700, 400}, 1),
                              });
}

TEST(TransformKernels, DynReshape) {
  struct Case {
    Shape shape;
    Ints newshape;
    DataType index_dtype;
  };
  const Case cases[] = {
      {{2, 3, 4}, {4, -1}, kI64}, {{7, 13}, {0, -1}, kI32},
      {{0, 3}, {-1, 0}, kI64},    {{1}, {}, kI64},
      {{}, {1, 1}, kI32},         {{600, 500}, {-1}, kI64},
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    for (DataType dtype : {kF32, DataType::Int8(), DataType::Float64()}) {
      SCOPED_TRACE(ShapeToString(c.shape) + " into " + ShapeToString(c.newshape));
      ExpectBuiltinMatchesReference(
          "dyn.reshape", {Random(c.shape, dtype, seed++), IntTensor(c.newshape, c.index_dtype)});
    }
  }
}

// ---------------------------------------------------------------------------
// transpose

TEST(TransformKernels, Transpose) {
  auto transpose = [](Shape shape, AttrValue axes) {
    return UnaryCase{std::move(shape), MakeAttrs({{"axes", std::move(axes)}})};
  };
  CheckUnaryOp("transpose", {
                                transpose({7, 13}, {}),
                                transpose({3, 5, 7}, Ints{2, 0, 1}),
                                transpose({3, 5, 7}, Ints{1, 0, 2}),  // last axis kept
                                transpose({3, 5, 7}, Ints{-1, 0, -2}),
                                transpose({2, 3, 4, 5}, Ints{0, 2, 1, 3}),
                                transpose({2, 3, 4, 5}, Ints{3, 1, 2, 0}),
                                transpose({2, 3, 4, 5}, Ints{0, 1, 3, 2}),
                                transpose({1, 7, 1, 3}, Ints{3, 2, 1, 0}),
                                transpose({257, 129}, {}),  // tiles with remainders
                                transpose({33, 2, 65}, Ints{2, 1, 0}),
                                transpose({0, 3}, {}),
                                transpose({5, 0, 3}, Ints{2, 0, 1}),
                                transpose({}, {}),
                                transpose({13}, {}),
                                transpose({600, 500}, {}),                // parallel tiles
                                transpose({64, 80, 60}, Ints{2, 0, 1}),   // parallel tiles
                                transpose({40, 50, 150}, Ints{1, 0, 2}),  // parallel rows
                                transpose({100, 3000}, {}),               // few long rows
                                transpose({3000, 2, 50}, Ints{2, 1, 0}),  // short tile rows
                            });
}

// ---------------------------------------------------------------------------
// concatenate, stack, split

TEST(TransformKernels, ConcatenateAlongEveryAxis) {
  const Shape base = {3, 5, 7};
  uint32_t seed = 1;
  for (int64_t axis = -3; axis < 3; ++axis) {
    const size_t d = static_cast<size_t>(axis < 0 ? axis + 3 : axis);
    for (const Ints& lengths : {Ints{2, 0, 5}, Ints{1}, Ints{4, 4}, Ints{0, 0}}) {
      std::vector<Tensor> fields;
      for (int64_t length : lengths) {
        Shape shape = base;
        shape[d] = length;
        fields.push_back(Random(shape, kF32, seed++));
      }
      SCOPED_TRACE("axis " + std::to_string(axis) + " lengths " + ShapeToString(lengths));
      ExpectBuiltinMatchesReference("concatenate", {Tuple(fields)}, MakeAttrs({{"axis", axis}}));
    }
  }
}

TEST(TransformKernels, ConcatenateShapesAndDTypes) {
  struct Case {
    std::vector<Shape> shapes;
    int64_t axis;
  };
  const Case cases[] = {
      {{{3}, {0}, {7}}, 0},
      {{{0, 3}, {0, 5}}, 1},  // no rows
      {{{13, 1}, {13, 1}, {13, 2}}, -1},
      {{{300, 700}, {400, 700}}, 0},    // one block per input
      {{{300, 700}, {300, 300}}, 1},    // parallel rows
      {{{100000, 2}, {100000, 1}}, 1},  // short runs
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    for (DataType dtype : kAllDTypes) {
      std::vector<Tensor> fields;
      for (const Shape& shape : c.shapes) fields.push_back(Random(shape, dtype, seed++));
      SCOPED_TRACE(ShapeToString(c.shapes[0]) + " axis " + std::to_string(c.axis) + " " +
                   dtype.name());
      ExpectBuiltinMatchesReference("concatenate", {Tuple(fields)}, MakeAttrs({{"axis", c.axis}}));
    }
  }
}

TEST(TransformKernels, Stack) {
  struct Case {
    Shape shape;
    int count;
    int64_t axis;
  };
  const Case cases[] = {
      {{3, 5}, 2, 0},     {{3, 5}, 3, 1}, {{3, 5}, 3, 2}, {{3, 5}, 2, -1},    {{3, 5}, 2, -3},
      {{}, 4, 0},         {{0, 7}, 3, 1}, {{13}, 1, 0},   {{500, 300}, 2, 1},  // parallel rows
      {{500, 300}, 2, 0},  // one block per input
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    for (DataType dtype : {kF32, DataType::Float16(), kI64, DataType::Bool()}) {
      std::vector<Tensor> fields;
      for (int i = 0; i < c.count; ++i) fields.push_back(Random(c.shape, dtype, seed++));
      SCOPED_TRACE(ShapeToString(c.shape) + " axis " + std::to_string(c.axis) + " " + dtype.name());
      ExpectBuiltinMatchesReference("stack", {Tuple(fields)}, MakeAttrs({{"axis", c.axis}}));
    }
  }
}

TEST(TransformKernels, SplitBySectionsAndIndices) {
  auto split = [](Shape shape, AttrValue indices_or_sections, int64_t axis) {
    return UnaryCase{std::move(shape),
                     MakeAttrs({{"indices_or_sections", indices_or_sections}, {"axis", axis}})};
  };
  CheckUnaryOp("split", {
                            split({6, 4}, int64_t{3}, 0), split({6, 4}, int64_t{2}, -1),
                            split({7, 13}, int64_t{1}, 1), split({7, 13}, Ints{2, 5}, 1),
                            split({7, 13}, Ints{0, 7, 7}, 0), split({7, 13}, Ints{}, 0),
                            split({3, 0}, int64_t{3}, 0), split({0, 6}, int64_t{2}, 1),
                            split({12, 5, 7}, Ints{1, 4, 11}, -3), split({12, 5, 7}, Ints{3}, 1),
                            split({1000, 300}, int64_t{4}, 0),      // one block per piece
                            split({300, 1000}, Ints{100, 700}, 1),  // parallel rows
                        });
}

// ---------------------------------------------------------------------------
// take

TEST(TransformKernels, TakeModesAxesAndBatchDims) {
  struct Case {
    Shape data;
    Shape indices;
    AttrValue axis;
    int64_t batch_dims;
  };
  const Case cases[] = {
      {{3, 5}, {7}, {}, 0},
      {{3, 5}, {2, 3}, {}, 0},
      {{13, 7}, {2, 5}, int64_t{0}, 0},
      {{3, 13, 5}, {4}, int64_t{1}, 0},
      {{3, 7}, {2, 3}, int64_t{-1}, 0},
      {{3, 13, 5}, {3, 4}, int64_t{1}, 1},
      {{3, 13, 5}, {3, 4}, int64_t{-2}, -1},
      {{2, 3, 13, 5}, {2, 3, 2}, int64_t{2}, 2},
      {{13, 7}, {}, int64_t{0}, 0},
      {{13, 1}, {257}, int64_t{0}, 0},
      {{0, 5}, {0}, int64_t{0}, 0},
      {{4, 0}, {3}, int64_t{0}, 0},
      {{5000, 64}, {4000}, int64_t{0}, 0},  // embedding lookup, parallel
      {{300000}, {250000}, {}, 0},          // element gather, parallel
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    const bool flat = std::holds_alternative<std::monostate>(c.axis);
    int64_t extent = 1;
    if (flat) {
      extent = ShapeNumel(c.data);
    } else {
      const int64_t axis = std::get<int64_t>(c.axis);
      extent = c.data[static_cast<size_t>(axis < 0 ? axis + c.data.size() : axis)];
    }
    for (const std::string mode : {"clip", "wrap", "fast"}) {
      for (DataType index_dtype : {kI32, kI64}) {
        // clip and wrap see indices past both ends; fast only valid ones.
        const double low = mode == "fast" ? 0.0 : -2.0 * extent;
        const double high = mode == "fast" ? extent : 2.0 * extent;
        const Tensor indices = Random(c.indices, index_dtype, seed++, low, high);
        SCOPED_TRACE(ShapeToString(c.data) + " " + ShapeToString(c.indices) + " " + mode + " " +
                     index_dtype.name());
        ExpectBuiltinMatchesReference(
            "take", {Random(c.data, kF32, seed++), indices},
            MakeAttrs({{"axis", c.axis}, {"batch_dims", c.batch_dims}, {"mode", mode}}));
      }
    }
  }
}

TEST(TransformKernels, TakeEveryDType) {
  uint32_t seed = 1;
  for (DataType dtype : kAllDTypes) {
    SCOPED_TRACE(dtype.name());
    ExpectBuiltinMatchesReference(
        "take", {Random({7, 3}, dtype, seed), Random({5}, kI64, seed + 1, -10, 10)},
        MakeAttrs({{"axis", int64_t{0}}, {"mode", std::string("wrap")}}));
    ExpectBuiltinMatchesReference("take",
                                  {Random({7, 3}, dtype, seed), Random({5}, kI32, seed + 2, 0, 21)},
                                  MakeAttrs({{"mode", std::string("fast")}}));
    seed += 3;
  }
}

// ---------------------------------------------------------------------------
// strided_slice, dyn.strided_slice

struct SliceCase {
  Shape shape;
  Ints begin;
  Ints end;
  AttrValue strides;
  AttrValue axes;
  std::string mode = "end";
};

const std::vector<SliceCase>& SliceCases() {
  static const std::vector<SliceCase> cases = {
      {{10}, {1}, {8}, Ints{3}, {}},
      {{10}, {8}, {1}, Ints{-3}, {}},
      {{10}, {-1}, {-11}, Ints{-1}, {}},
      {{10}, {-3}, {100}, {}, {}},
      {{10}, {-100}, {2}, {}, {}},
      {{10}, {20}, {-20}, Ints{-4}, {}},
      {{10}, {5}, {2}, {}, {}},
      {{10}, {3}, {4}, Ints{kMin}, {}},
      {{10}, {4}, {3}, Ints{kMin}, {}},
      {{3, 4}, {1}, {3}, {}, {}},
      {{3, 4}, {2, 3}, {-4, -5}, Ints{-2, -2}, {}},
      {{3, 4}, {1}, {3}, {}, Ints{1}},
      {{3, 4}, {-1, 0}, {4, 2}, {}, Ints{-1, 0}},
      {{3, 4}, {1, 1}, {2, -1}, {}, {}, "size"},
      {{3, 4}, {-2, 3}, {9, 9}, {}, {}, "size"},
      {{7, 13, 5}, {0, 1, 0}, {7, 12, 5}, Ints{2, 3, 1}, {}},
      {{7, 13, 5}, {6, 12, 4}, {-8, -14, -6}, Ints{-1, -1, -1}, {}},
      {{7, 13, 5}, {1, 0, 1}, {5, 13, 4}, Ints{1, 1, 1}, {}},
      {{7, 13, 5}, {0, 0, 0}, {7, 13, 5}, Ints{1, 1, -1}, {}},
      {{7, 13, 5}, {0, 2}, {3, 11}, Ints{-1, 4}, Ints{2, 1}},
      {{0, 5}, {0, 1}, {0, 3}, {}, {}},
      {{}, {}, {}, {}, {}},
      {{700, 500}, {1, 2}, {700, 500}, Ints{1, 1}, {}},        // parallel rows
      {{700, 500}, {-1, -1}, {-701, -501}, Ints{-1, -1}, {}},  // parallel, reversed
      {{1000, 700}, {0, 1}, {1000, 700}, Ints{1, 2}, {}},      // parallel, strided rows
  };
  return cases;
}

TEST(TransformKernels, StridedSlice) {
  uint32_t seed = 1;
  for (const SliceCase& c : SliceCases()) {
    const Attrs attrs = MakeAttrs({{"begin", c.begin},
                                   {"end", c.end},
                                   {"strides", c.strides},
                                   {"axes", c.axes},
                                   {"slice_mode", c.mode}});
    for (DataType dtype : {kF32, DataType::Int8(), DataType::Float16(), DataType::Float64()}) {
      SCOPED_TRACE(ShapeToString(c.shape) + " begin " + ShapeToString(c.begin) + " end " +
                   ShapeToString(c.end) + " " + dtype.name());
      ExpectBuiltinMatchesReference("strided_slice", {Random(c.shape, dtype, seed++)}, attrs);
    }
  }
}

TEST(TransformKernels, DynStridedSlice) {
  uint32_t seed = 1;
  for (const SliceCase& c : SliceCases()) {
    // dyn.strided_slice takes begin, end and strides for every leading axis.
    if (!std::holds_alternative<std::monostate>(c.axes)) continue;
    Ints strides(c.begin.size(), 1);
    if (const Ints* given = std::get_if<Ints>(&c.strides)) strides = *given;
    if (strides.size() != c.begin.size() || c.end.size() != c.begin.size()) continue;
    for (DataType index_dtype : {kI32, kI64}) {
      if (index_dtype == kI32 && std::count(strides.begin(), strides.end(), kMin) > 0) {
        continue;  // kMin does not fit int32
      }
      SCOPED_TRACE(ShapeToString(c.shape) + " begin " + ShapeToString(c.begin) + " " +
                   index_dtype.name());
      ExpectBuiltinMatchesReference(
          "dyn.strided_slice",
          {Random(c.shape, kF32, seed++), IntTensor(c.begin, index_dtype),
           IntTensor(c.end, index_dtype), IntTensor(strides, index_dtype)},
          MakeAttrs({{"slice_mode", c.mode}}));
    }
  }
}

// ---------------------------------------------------------------------------
// Errors through the ABI: an error code and message, never a crash.

// The error of running `op` as the VM does, outputs shaped like `like`.
std::string BuiltinError(const std::string& op, const Attrs& attrs,
                         const std::vector<Tensor>& inputs, const std::vector<Tensor>& like) {
  const nimble::op::OpDef& def = *nimble::op::OpRegistry::Global().Find(op);
  return ErrorOf([&] { RunBuiltin(op, nimble::op::NormalizeAttrs(def, attrs), inputs, like); });
}

TEST(TransformKernels, TakeIndexOutOfRange) {
  const Tensor data = Random({2, 3}, kF32, 1);
  const Tensor like = TensorNode::Empty({2}, kF32);
  const Attrs fast = MakeAttrs({{"mode", std::string("fast")}});
  EXPECT_THAT(BuiltinError("take", fast, {data, IntTensor({5, 7})}, {like}),
              HasSubstr("take: index 7 is out of range for the flattened data (2, 3)"));
  EXPECT_THAT(BuiltinError("take", fast, {data, IntTensor({0, -1}, kI32)}, {like}),
              HasSubstr("index -1 is out of range"));
  const Attrs rows = MakeAttrs({{"axis", int64_t{-1}}, {"mode", std::string("fast")}});
  EXPECT_THAT(BuiltinError("take", rows, {data, IntTensor({3})}, {TensorNode::Empty({2, 1}, kF32)}),
              HasSubstr("take: index 3 is out of range for axis 1 of (2, 3)"));
  // Clipping into no rows at all is out of range too.
  EXPECT_THAT(
      BuiltinError("take", MakeAttrs({{"axis", int64_t{0}}}),
                   {Random({0, 2}, kF32, 2), IntTensor({0})}, {TensorNode::Empty({1, 2}, kF32)}),
      HasSubstr("out of range for axis 0 of (0, 2)"));
  // The parallel path reports the first bad index.
  Ints many(300000, 1);
  many[123456] = 99;
  many[200000] = -99;
  EXPECT_THAT(
      BuiltinError("take", MakeAttrs({{"axis", int64_t{0}}, {"mode", std::string("fast")}}),
                   {Random({4}, kF32, 3), IntTensor(many)}, {TensorNode::Empty({300000}, kF32)}),
      HasSubstr("index 99 is out of range"));
}

TEST(TransformKernels, TakeRejectsNonIntegerIndices) {
  EXPECT_THAT(BuiltinError("take", {}, {Random({4}, kF32, 1), Random({2}, kF32, 2)},
                           {TensorNode::Empty({2}, kF32)}),
              HasSubstr("indices must be int32 or int64, got float32"));
}

TEST(TransformKernels, ShapeFunctionErrors) {
  const Tensor like1 = TensorNode::Empty({0}, kF32);
  const Tensor like2 = TensorNode::Empty({0, 0}, kF32);
  EXPECT_THAT(BuiltinError("reshape", MakeAttrs({{"newshape", Ints{5, -1}}}),
                           {Random({6, 4}, kF32, 1)}, {like2}),
              HasSubstr("reshape: cannot reshape (6, 4) into (5, -1)"));
  EXPECT_THAT(BuiltinError("strided_slice",
                           MakeAttrs({{"begin", Ints{0}}, {"end", Ints{1}}, {"strides", Ints{0}}}),
                           {Random({4}, kF32, 2)}, {like1}),
              HasSubstr("strided_slice: stride 0 on axis 0"));
  EXPECT_THAT(BuiltinError("split", MakeAttrs({{"indices_or_sections", int64_t{3}}}),
                           {Random({7, 2}, kF32, 3)}, {like2, like2, like2}),
              HasSubstr("split: cannot split (7, 2) into 3 equal sections along axis 0"));
  EXPECT_THAT(BuiltinError("concatenate", MakeAttrs({{"axis", int64_t{1}}}),
                           {Random({2, 2}, kF32, 4), Random({3, 1}, kF32, 5)}, {like2}),
              HasSubstr("concatenate: input 1 (3, 1) and input 0 (2, 2) differ in dimension 0"));
  EXPECT_THAT(
      BuiltinError("squeeze", MakeAttrs({{"axis", Ints{0}}}), {Random({2, 1}, kF32, 6)}, {like1}),
      HasSubstr("squeeze: dimension 0 of (2, 1) is 2, not 1"));
  EXPECT_THAT(BuiltinError("dyn.reshape", {}, {Random({6, 4}, kF32, 7), IntTensor({-2})}, {like1}),
              HasSubstr("only sizes, 0 and -1"));
}

}  // namespace
}  // namespace nimble::vm::testing
