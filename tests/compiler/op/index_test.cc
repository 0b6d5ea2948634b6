// The indexing family (gather_elements, gather_nd, scatter_nd, cumsum, topk):
// type relations, including `?` and their error texts; the shape functions;
// and the reference kernels against naive definitions written here, on
// random shapes with negative indices, with their out-of-range errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "nimble/vm/adt.h"
#include "tests/compiler/op/op_test_util.h"

namespace nimble::op {
namespace {

using ::testing::HasSubstr;
using namespace testing;  // NOLINT: the op test helpers.

constexpr DataType kI32 = DataType::Int32();
constexpr DataType kI64 = DataType::Int64();
constexpr DataType kF64 = DataType::Float64();

// ---------------------------------------------------------------------------
// Naive definitions, on row-major doubles.

std::vector<int64_t> Unravel(int64_t flat, const Shape& shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

int64_t Ravel(const std::vector<int64_t>& index, const Shape& shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + index[d];
  return flat;
}

int64_t Positive(int64_t index, int64_t extent) {
  return index < 0 ? index + extent : index;
}

std::vector<double> NaiveGatherElements(const Tensor& data, const Tensor& indices, size_t axis) {
  std::vector<double> out;
  for (int64_t k = 0; k < indices->numel(); ++k) {
    std::vector<int64_t> at = Unravel(k, indices->shape());
    at[axis] = Positive(indices->GetAsInt64(k), data->shape()[axis]);
    out.push_back(data->GetAsDouble(Ravel(at, data->shape())));
  }
  return out;
}

// For each batch b and index row r, the slice data[b][row r...].
std::vector<double> NaiveGatherNd(const Tensor& data, const Tensor& indices, size_t batch_dims) {
  const Shape& ds = data->shape();
  const Shape& is = indices->shape();
  const int64_t m = is.back();
  int64_t batches = 1, rows = 1, slice = 1;
  for (size_t d = 0; d < batch_dims; ++d) batches *= ds[d];
  for (size_t d = batch_dims; d + 1 < is.size(); ++d) rows *= is[d];
  for (size_t d = batch_dims + m; d < ds.size(); ++d) slice *= ds[d];
  std::vector<double> out;
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t r = 0; r < rows; ++r) {
      int64_t offset = b;
      for (int64_t j = 0; j < m; ++j) {
        const int64_t extent = ds[batch_dims + j];
        offset = offset * extent + Positive(indices->GetAsInt64((b * rows + r) * m + j), extent);
      }
      for (int64_t e = 0; e < slice; ++e) out.push_back(data->GetAsDouble(offset * slice + e));
    }
  }
  return out;
}

std::vector<double> NaiveScatterNd(const Tensor& data, const Tensor& indices, const Tensor& updates,
                                   const std::string& reduction) {
  std::vector<double> out = Values(data);
  const Shape& ds = data->shape();
  const int64_t m = indices->shape().back();
  const int64_t rows = indices->numel() / m;
  int64_t slice = 1;
  for (size_t d = static_cast<size_t>(m); d < ds.size(); ++d) slice *= ds[d];
  for (int64_t r = 0; r < rows; ++r) {
    int64_t offset = 0;
    for (int64_t j = 0; j < m; ++j) {
      offset = offset * ds[j] + Positive(indices->GetAsInt64(r * m + j), ds[j]);
    }
    for (int64_t e = 0; e < slice; ++e) {
      double& old = out[static_cast<size_t>(offset * slice + e)];
      const double u = updates->GetAsDouble(r * slice + e);
      if (reduction == "none") old = u;
      if (reduction == "add") old += u;
      if (reduction == "mul") old *= u;
      if (reduction == "max") old = std::max(old, u);
      if (reduction == "min") old = std::min(old, u);
    }
  }
  return out;
}

std::vector<double> NaiveCumsum(const Tensor& data, size_t axis, bool exclusive, bool reverse) {
  const Shape& shape = data->shape();
  std::vector<double> out(static_cast<size_t>(data->numel()), 0);
  for (int64_t k = 0; k < data->numel(); ++k) {
    std::vector<int64_t> at = Unravel(k, shape);
    const int64_t i = at[axis];
    for (int64_t j = 0; j < shape[axis]; ++j) {
      const bool in = reverse ? (exclusive ? j > i : j >= i) : (exclusive ? j < i : j <= i);
      if (!in) continue;
      at[axis] = j;
      out[static_cast<size_t>(k)] += data->GetAsDouble(Ravel(at, shape));
    }
  }
  return out;
}

// Values then positions: a stable sort of each lane by value.
std::pair<std::vector<double>, std::vector<double>> NaiveTopK(const Tensor& data, size_t axis,
                                                              int64_t k, bool largest) {
  Shape out_shape = data->shape();
  out_shape[axis] = k;
  std::vector<double> values(static_cast<size_t>(ShapeNumel(out_shape)));
  std::vector<double> positions(values.size());
  Shape lanes = data->shape();
  lanes[axis] = 1;
  for (int64_t l = 0; l < ShapeNumel(lanes); ++l) {
    std::vector<int64_t> at = Unravel(l, lanes);
    std::vector<std::pair<double, int64_t>> lane;
    for (int64_t e = 0; e < data->shape()[axis]; ++e) {
      at[axis] = e;
      lane.emplace_back(data->GetAsDouble(Ravel(at, data->shape())), e);
    }
    std::stable_sort(lane.begin(), lane.end(), [&](const auto& a, const auto& b) {
      return largest ? a.first > b.first : a.first < b.first;
    });
    for (int64_t j = 0; j < k; ++j) {
      at[axis] = j;
      values[static_cast<size_t>(Ravel(at, out_shape))] = lane[j].first;
      positions[static_cast<size_t>(Ravel(at, out_shape))] = static_cast<double>(lane[j].second);
    }
  }
  return {values, positions};
}

// ---------------------------------------------------------------------------
// Random inputs.

Shape RandomShape(std::mt19937& rng, size_t rank, int64_t max_dim = 4) {
  std::uniform_int_distribution<int64_t> dim(1, max_dim);
  Shape shape(rank);
  for (int64_t& d : shape) d = dim(rng);
  return shape;
}

Tensor RandomValues(const Shape& shape, DataType dtype, std::mt19937& rng, int low = -9,
                    int high = 9) {
  std::uniform_int_distribution<int> value(low, high);
  std::vector<double> values(static_cast<size_t>(ShapeNumel(shape)));
  for (double& v : values) v = value(rng) * (dtype.is_float() ? 0.5 : 1);
  return TensorFrom(shape, dtype, values);
}

// Indices in [-extent(k), extent(k)) for each element k.
Tensor RandomIndices(const Shape& shape, DataType dtype, std::mt19937& rng,
                     const std::function<int64_t(int64_t)>& extent) {
  std::vector<double> values(static_cast<size_t>(ShapeNumel(shape)));
  for (size_t k = 0; k < values.size(); ++k) {
    const int64_t n = extent(static_cast<int64_t>(k));
    values[k] = static_cast<double>(std::uniform_int_distribution<int64_t>(-n, n - 1)(rng));
  }
  return TensorFrom(shape, dtype, values);
}

// ---------------------------------------------------------------------------
// gather_elements

TEST(IndexOpsTest, GatherElementsTypes) {
  EXPECT_EQ(TypeOf("gather_elements", {TensorOf({3, 4}), TensorOf({2, 4}, kI64)}),
            "Tensor[(2, 4), float32]");
  EXPECT_EQ(TypeOf("gather_elements", {TensorOf({3, 4}), TensorOf({kAny, 2}, kI32)},
                   MakeAttrs({{"axis", int64_t{-1}}})),
            "Tensor[(?, 2), float32]");
  EXPECT_THAT(ErrorOf([] {
                TypeOf("gather_elements", {TensorOf({3, 4}), TensorOf({4}, kI64)});
              }),
              HasSubstr("gather_elements: data (3, 4) and indices (4,) differ in rank"));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("gather_elements", {TensorOf({3, 4}), TensorOf({2, 5}, kI64)});
              }),
              HasSubstr("gather_elements: indices (2, 5) exceed data (3, 4) in dimension 1"));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("gather_elements", {TensorOf({3}), TensorOf({2})});
              }),
              HasSubstr("gather_elements: indices must be int32 or int64, got float32"));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("gather_elements", {TensorOf({3}), TensorOf({2}, kI64)},
                       MakeAttrs({{"axis", int64_t{1}}}));
              }),
              HasSubstr("gather_elements"));
  // A `?` the relation let through fails in the shape function.
  EXPECT_THAT(ErrorOf([] {
                ShapesOf("gather_elements", {{3, 4}, {2, 6}});
              }),
              HasSubstr("indices (2, 6) exceed data (3, 4) in dimension 1"));
  EXPECT_EQ(ShapesOf("gather_elements", {{3, 4}, {5, 2}}), (std::vector<Shape>{{5, 2}}));
}

TEST(IndexOpsTest, GatherElementsMatchesNaiveOnRandomShapes) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    const size_t rank = 1 + trial % 3;
    const Shape data_shape = RandomShape(rng, rank);
    const size_t axis = static_cast<size_t>(trial) % rank;
    Shape index_shape = data_shape;
    for (size_t d = 0; d < rank; ++d) {
      index_shape[d] =
          d == axis ? 1 + trial % 5 : std::uniform_int_distribution<int64_t>(1, data_shape[d])(rng);
    }
    const Tensor data = RandomValues(data_shape, trial % 2 ? kF32 : kI64, rng);
    const Tensor indices = RandomIndices(index_shape, trial % 3 ? kI64 : kI32, rng,
                                         [&](int64_t) { return data_shape[axis]; });
    const int64_t signed_axis = trial % 4 == 0
                                    ? static_cast<int64_t>(axis) - static_cast<int64_t>(rank)
                                    : static_cast<int64_t>(axis);
    const Tensor out =
        Invoke("gather_elements", {data, indices}, MakeAttrs({{"axis", signed_axis}}));
    EXPECT_EQ(out->shape(), index_shape);
    EXPECT_EQ(out->dtype(), data->dtype());
    EXPECT_EQ(Values(out), NaiveGatherElements(data, indices, axis)) << "trial " << trial;
  }
}

TEST(IndexOpsTest, GatherElementsOnAxisZeroAndOutOfRange) {
  const Tensor data = Iota({3, 2});  // [[0, 1], [2, 3], [4, 5]]
  const Tensor indices = TensorFrom({2, 2}, kI64, {2, -3, -1, 1});
  EXPECT_EQ(Values(Invoke("gather_elements", {data, indices})), (std::vector<double>{4, 1, 4, 3}));
  EXPECT_THAT(InvokeError("gather_elements", {data, TensorFrom({1, 2}, kI64, {0, 3})}),
              HasSubstr("gather_elements: index 3 is out of range for axis 0 of data (3, 2), "
                        "of size 3"));
  EXPECT_THAT(InvokeError("gather_elements", {data, TensorFrom({1, 1}, kI32, {-4})}),
              HasSubstr("gather_elements: index -4 is out of range for axis 0"));
}

// ---------------------------------------------------------------------------
// gather_nd

TEST(IndexOpsTest, GatherNdTypes) {
  EXPECT_EQ(TypeOf("gather_nd", {TensorOf({2, 3, 4}), TensorOf({5, 2}, kI64)}),
            "Tensor[(5, 4), float32]");
  EXPECT_EQ(TypeOf("gather_nd", {TensorOf({kAny, 3, 4}), TensorOf({kAny, 7, 1}, kI64)},
                   MakeAttrs({{"batch_dims", int64_t{1}}})),
            "Tensor[(?, 7, 4), float32]");
  EXPECT_EQ(TypeOf("gather_nd", {TensorOf({2, 3}), TensorOf({2}, kI32)}), "Tensor[(), float32]");
  EXPECT_THAT(ErrorOf([] {
                TypeOf("gather_nd", {TensorOf({2, 3}), TensorOf({4, 3}, kI64)});
              }),
              HasSubstr("gather_nd: indices (4, 3) address 3 dims of data (2, 3), which has 2"));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("gather_nd", {TensorOf({2, 3}), TensorOf({4, kAny}, kI64)});
              }),
              HasSubstr("gather_nd: the last dimension of indices (4, ?) must be static"));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("gather_nd", {TensorOf({2, 3}), TensorOf({3, 1}, kI64)},
                       MakeAttrs({{"batch_dims", int64_t{1}}}));
              }),
              HasSubstr("gather_nd: data (2, 3) and indices (3, 1) differ in batch dimension 0"));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("gather_nd", {TensorOf({2, 3}), TensorOf({2, 1}, kI64)},
                       MakeAttrs({{"batch_dims", int64_t{2}}}));
              }),
              HasSubstr("gather_nd: batch_dims 2 must be in [0, 2)"));
  EXPECT_THAT(ErrorOf([] {
                ShapesOf("gather_nd", {{2, 3}, {4, 3}});
              }),
              HasSubstr("address 3 dims of data (2, 3)"));
}

TEST(IndexOpsTest, GatherNdMatchesNaiveOnRandomShapes) {
  std::mt19937 rng(12);
  for (int trial = 0; trial < 40; ++trial) {
    const size_t batch_dims = trial % 2;
    const size_t rank = batch_dims + 1 + trial % 3;
    const Shape data_shape = RandomShape(rng, rank);
    const int64_t depth =
        std::uniform_int_distribution<int64_t>(1, static_cast<int64_t>(rank - batch_dims))(rng);
    Shape index_shape(data_shape.begin(), data_shape.begin() + batch_dims);
    const Shape rows = RandomShape(rng, trial % 3);
    index_shape.insert(index_shape.end(), rows.begin(), rows.end());
    index_shape.push_back(depth);
    const Tensor data = RandomValues(data_shape, trial % 3 ? kF32 : kI32, rng);
    const Tensor indices = RandomIndices(index_shape, kI64, rng, [&](int64_t k) {
      return data_shape[batch_dims + static_cast<size_t>(k % depth)];
    });
    const Tensor out = Invoke("gather_nd", {data, indices},
                              MakeAttrs({{"batch_dims", static_cast<int64_t>(batch_dims)}}));
    Shape expected_shape(index_shape.begin(), index_shape.end() - 1);
    expected_shape.insert(expected_shape.end(), data_shape.begin() + batch_dims + depth,
                          data_shape.end());
    EXPECT_EQ(out->shape(), expected_shape) << "trial " << trial;
    EXPECT_EQ(Values(out), NaiveGatherNd(data, indices, batch_dims)) << "trial " << trial;
  }
}

TEST(IndexOpsTest, GatherNdBatchDimsOneAndOutOfRange) {
  const Tensor data = Iota({2, 2, 2});
  // ONNX's example 5: batch_dims 1, indices [[1], [0]] -> [[2, 3], [4, 5]].
  const Tensor out = Invoke("gather_nd", {data, TensorFrom({2, 1}, kI64, {1, 0})},
                            MakeAttrs({{"batch_dims", int64_t{1}}}));
  EXPECT_EQ(out->shape(), (Shape{2, 2}));
  EXPECT_EQ(Values(out), (std::vector<double>{2, 3, 4, 5}));
  EXPECT_THAT(InvokeError("gather_nd", {data, TensorFrom({1, 2}, kI64, {0, -3})}),
              HasSubstr("gather_nd: index -3 is out of range for axis 1 of data (2, 2, 2), "
                        "of size 2"));
}

// ---------------------------------------------------------------------------
// scatter_nd

TEST(IndexOpsTest, ScatterNdTypes) {
  EXPECT_EQ(TypeOf("scatter_nd", {TensorOf({4, 3}), TensorOf({2, 1}, kI64), TensorOf({2, 3})}),
            "Tensor[(4, 3), float32]");
  EXPECT_EQ(
      TypeOf("scatter_nd", {TensorOf({kAny, 3}), TensorOf({kAny, 1}, kI64), TensorOf({kAny, 3})}),
      "Tensor[(?, 3), float32]");
  EXPECT_THAT(ErrorOf([] {
                TypeOf("scatter_nd", {TensorOf({4, 3}), TensorOf({2, 1}, kI64), TensorOf({2, 4})});
              }),
              HasSubstr("scatter_nd: updates (2, 4) must have the shape (2, 3) (indices (2, 1)"
                        "[:-1] + data (4, 3)[1:])"));
  EXPECT_THAT(
      ErrorOf([] {
        TypeOf("scatter_nd", {TensorOf({4, 3}), TensorOf({2, 1}, kI64), TensorOf({2, 3}, kF64)});
      }),
      HasSubstr("scatter_nd: updates must have data's dtype float32, got float64"));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("scatter_nd", {TensorOf({4}), TensorOf({2, 1}, kI64), TensorOf({2})},
                       MakeAttrs({{"reduction", std::string("sum")}}));
              }),
              HasSubstr("scatter_nd: reduction must be"));
  EXPECT_THAT(ErrorOf([] {
                ShapesOf("scatter_nd", {{4, 3}, {2, 1}, {3, 3}});
              }),
              HasSubstr("scatter_nd: updates (3, 3) must have the shape (2, 3)"));
}

TEST(IndexOpsTest, ScatterNdEveryReductionMatchesNaive) {
  std::mt19937 rng(13);
  for (const std::string reduction : {"none", "add", "mul", "max", "min"}) {
    for (int trial = 0; trial < 12; ++trial) {
      SCOPED_TRACE(reduction + " trial " + std::to_string(trial));
      const size_t rank = 1 + trial % 3;
      const Shape data_shape = RandomShape(rng, rank);
      const int64_t depth =
          std::uniform_int_distribution<int64_t>(1, static_cast<int64_t>(rank))(rng);
      // "none" with a repeated index is order-dependent: distinct rows there.
      Shape index_shape = RandomShape(rng, trial % 2, 3);
      index_shape.push_back(depth);
      Tensor indices;
      if (reduction == "none") {
        int64_t cells = 1;
        for (int64_t j = 0; j < depth; ++j) cells *= data_shape[j];
        std::vector<int64_t> order(static_cast<size_t>(cells));
        for (size_t c = 0; c < order.size(); ++c) order[c] = static_cast<int64_t>(c);
        std::shuffle(order.begin(), order.end(), rng);
        const int64_t rows = std::min<int64_t>(cells, ShapeNumel(index_shape) / depth);
        index_shape = {rows, depth};
        std::vector<double> values;
        for (int64_t r = 0; r < rows; ++r) {
          std::vector<int64_t> at =
              Unravel(order[r], Shape(data_shape.begin(), data_shape.begin() + depth));
          for (int64_t j = 0; j < depth; ++j) {
            values.push_back(static_cast<double>(at[j] - (r % 2 ? data_shape[j] : 0)));
          }
        }
        indices = TensorFrom(index_shape, kI64, values);
      } else {
        indices = RandomIndices(index_shape, trial % 2 ? kI32 : kI64, rng,
                                [&](int64_t k) { return data_shape[k % depth]; });
      }
      Shape update_shape(index_shape.begin(), index_shape.end() - 1);
      update_shape.insert(update_shape.end(), data_shape.begin() + depth, data_shape.end());
      const DataType dtype = trial % 3 == 0 ? kI64 : kF32;
      const Tensor data = RandomValues(data_shape, dtype, rng, -3, 3);
      const Tensor updates = RandomValues(update_shape, dtype, rng, -3, 3);
      const Tensor out =
          Invoke("scatter_nd", {data, indices, updates}, MakeAttrs({{"reduction", reduction}}));
      EXPECT_EQ(out->shape(), data_shape);
      EXPECT_EQ(Values(out), NaiveScatterNd(data, indices, updates, reduction));
    }
  }
}

TEST(IndexOpsTest, ScatterNdOutOfRange) {
  EXPECT_THAT(
      InvokeError("scatter_nd", {Iota({4, 3}), TensorFrom({1, 1}, kI64, {4}), Iota({1, 3})}),
      HasSubstr("scatter_nd: index 4 is out of range for axis 0 of data (4, 3), of size 4"));
}

// ---------------------------------------------------------------------------
// cumsum

TEST(IndexOpsTest, CumsumTypes) {
  EXPECT_EQ(TypeOf("cumsum", {TensorOf({kAny, 3}, kI32)}, MakeAttrs({{"axis", int64_t{1}}})),
            "Tensor[(?, 3), int32]");
  EXPECT_THAT(ErrorOf([] { TypeOf("cumsum", {TensorOf({3}, DataType::Bool())}); }),
              HasSubstr("cumsum: data must be int32, int64, float32 or float64, got bool"));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("cumsum", {TensorOf({3})}, MakeAttrs({{"axis", int64_t{2}}}));
              }),
              HasSubstr("cumsum"));
}

TEST(IndexOpsTest, CumsumExclusiveAndReverseOnEveryAxis) {
  std::mt19937 rng(14);
  for (int trial = 0; trial < 16; ++trial) {
    const Shape shape = RandomShape(rng, 1 + trial % 3, 5);
    const DataType dtype = std::vector<DataType>{kI32, kI64, kF32, kF64}[trial % 4];
    const Tensor data = RandomValues(shape, dtype, rng);
    for (size_t axis = 0; axis < shape.size(); ++axis) {
      for (bool exclusive : {false, true}) {
        for (bool reverse : {false, true}) {
          const Tensor out = Invoke("cumsum", {data},
                                    MakeAttrs({{"axis", static_cast<int64_t>(axis)},
                                               {"exclusive", exclusive},
                                               {"reverse", reverse}}));
          EXPECT_EQ(out->shape(), shape);
          EXPECT_EQ(Values(out), NaiveCumsum(data, axis, exclusive, reverse))
              << "trial " << trial << " axis " << axis << " exclusive " << exclusive << " reverse "
              << reverse;
        }
      }
    }
  }
  // ONNX's examples.
  const Tensor x = TensorFrom({5}, kF64, {1, 2, 3, 4, 5});
  EXPECT_EQ(Values(Invoke("cumsum", {x}, MakeAttrs({{"exclusive", true}, {"reverse", true}}))),
            (std::vector<double>{14, 12, 9, 5, 0}));
}

// ---------------------------------------------------------------------------
// topk

Tensor K(int64_t k) {
  return TensorNode::Scalar(kI64, k);
}

TEST(IndexOpsTest, TopKTypes) {
  EXPECT_EQ(TypeOf("topk", {TensorOf({3, 5}), TensorOf({}, kI64)}),
            "(Tensor[(3, ?<=5), float32], Tensor[(3, ?<=5), int64])");
  EXPECT_EQ(TypeOf("topk", {TensorOf({kAny, 5}, kI32), TensorOf({1}, kI64)},
                   MakeAttrs({{"axis", int64_t{0}}})),
            "(Tensor[(?, 5), int32], Tensor[(?, 5), int64])");
  EXPECT_THAT(ErrorOf([] {
                TypeOf("topk", {TensorOf({3, 5}), TensorOf({}, kI32)});
              }),
              HasSubstr("topk: k must be an int64 scalar or a one-element vector, got "
                        "Tensor[(), int32]"));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("topk", {TensorOf({3, 5}), TensorOf({2}, kI64)});
              }),
              HasSubstr("topk: k must be an int64 scalar"));
  EXPECT_THAT(ErrorOf([] {
                TypeOf("topk", {TensorOf({}), TensorOf({}, kI64)});
              }),
              HasSubstr("topk: data must have rank 1 or more"));
  // The shape function reads k.
  EXPECT_EQ(ShapesOf("topk", {{3, 5}, {}}, {}, {Iota({3, 5}), K(2)}),
            (std::vector<Shape>{{3, 2}, {3, 2}}));
  EXPECT_THAT(ErrorOf([] {
                ShapesOf("topk", {{3, 5}, {}}, {}, {Iota({3, 5}), K(6)});
              }),
              HasSubstr("topk: k 6 is larger than axis 1 of data (3, 5), of size 5"));
}

std::vector<Tensor> TopK(const Tensor& data, int64_t k, int64_t axis, bool largest) {
  const Ref<Object> result =
      InvokeValues("topk", {data, K(k)}, MakeAttrs({{"axis", axis}, {"largest", largest}}));
  const ADTNode* tuple = result.as<ADTNode>().get();
  return {tuple->field(0).as<TensorNode>(), tuple->field(1).as<TensorNode>()};
}

TEST(IndexOpsTest, TopKLargestAndSmallestWithTies) {
  // Ties: the lower position comes first, for either order.
  const Tensor data = TensorFrom({6}, kF32, {3, 1, 3, 2, 1, 3});
  std::vector<Tensor> out = TopK(data, 4, 0, true);
  EXPECT_EQ(Values(out[0]), (std::vector<double>{3, 3, 3, 2}));
  EXPECT_EQ(Elements<int64_t>(out[1]), (std::vector<int64_t>{0, 2, 5, 3}));
  out = TopK(data, 3, -1, false);
  EXPECT_EQ(Values(out[0]), (std::vector<double>{1, 1, 2}));
  EXPECT_EQ(Elements<int64_t>(out[1]), (std::vector<int64_t>{1, 4, 3}));
  std::mt19937 rng(15);
  for (int trial = 0; trial < 30; ++trial) {
    const Shape shape = RandomShape(rng, 1 + trial % 3, 6);
    const size_t axis = static_cast<size_t>(trial) % shape.size();
    const int64_t k = std::uniform_int_distribution<int64_t>(0, shape[axis])(rng);
    const bool largest = trial % 2 == 0;
    const Tensor x = RandomValues(shape, trial % 3 ? kF32 : kI64, rng, -3, 3);  // many ties
    out = TopK(x, k, static_cast<int64_t>(axis), largest);
    Shape expected_shape = shape;
    expected_shape[axis] = k;
    EXPECT_EQ(out[0]->shape(), expected_shape);
    EXPECT_EQ(out[1]->dtype(), kI64);
    const auto [values, positions] = NaiveTopK(x, axis, k, largest);
    EXPECT_EQ(Values(out[0]), values) << "trial " << trial;
    EXPECT_EQ(Values(out[1]), positions) << "trial " << trial;
  }
  EXPECT_THAT(ErrorOf([&] { TopK(data, 7, 0, true); }),
              HasSubstr("topk: k 7 is larger than axis 0 of data (6,), of size 6"));
}

}  // namespace
}  // namespace nimble::op
