#include "nimble/vm/shape.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace nimble {
namespace {

// A rank past the inline capacity, so the dimensions move to the heap.
constexpr size_t kHeapRank = Shape::kInlineRank + 3;

std::vector<int64_t> Iota(size_t rank) {
  std::vector<int64_t> dims(rank);
  for (size_t i = 0; i < rank; ++i) dims[i] = static_cast<int64_t>(10 + i);
  return dims;
}

TEST(ShapeTest, GrowingPastTheInlineRankKeepsEveryDimension) {
  Shape shape;
  for (int64_t dim : Iota(kHeapRank)) shape.push_back(dim);
  EXPECT_EQ(std::vector<int64_t>(shape), Iota(kHeapRank));
  shape.resize(kHeapRank + 2, 7);
  EXPECT_EQ(shape.size(), kHeapRank + 2);
  EXPECT_EQ(shape[kHeapRank - 1], static_cast<int64_t>(10 + kHeapRank - 1));
  EXPECT_EQ(shape.back(), 7);
}

TEST(ShapeTest, CopiesAndMovesInlineAndHeapShapes) {
  for (size_t rank : {size_t{0}, size_t{2}, Shape::kInlineRank, kHeapRank}) {
    const Shape original(Iota(rank));
    Shape copy = original;
    EXPECT_EQ(copy, original) << "rank " << rank;
    Shape moved = std::move(copy);
    EXPECT_EQ(moved, original) << "rank " << rank;
    EXPECT_TRUE(copy.empty());  // NOLINT: a moved-from shape is empty
    Shape assigned{1, 2};
    assigned = original;
    EXPECT_EQ(assigned, original) << "rank " << rank;
    assigned = Shape{3};
    EXPECT_EQ(std::vector<int64_t>(assigned), std::vector<int64_t>{3});
  }
}

TEST(ShapeTest, InsertsAndErasesLikeAVector) {
  Shape shape{1, 2, 3};
  shape.insert(shape.begin() + 1, 9);
  EXPECT_EQ(shape, (Shape{1, 9, 2, 3}));
  const std::vector<int64_t> more{7, 8};
  shape.insert(shape.end(), more.begin(), more.end());
  EXPECT_EQ(shape, (Shape{1, 9, 2, 3, 7, 8}));
  shape.erase(shape.begin(), shape.begin() + 2);
  EXPECT_EQ(shape, (Shape{2, 3, 7, 8}));
  shape.erase(shape.end() - 1);
  EXPECT_EQ(shape, (Shape{2, 3, 7}));
}

TEST(ShapeTest, OrdersLexicographically) {
  EXPECT_LT((Shape{1, 2}), (Shape{1, 3}));
  EXPECT_LT((Shape{1, 2}), (Shape{1, 2, 0}));
  EXPECT_NE((Shape{1, 2}), (Shape{2, 1}));
  EXPECT_EQ(Shape(3, 5), (Shape{5, 5, 5}));
}

}  // namespace
}  // namespace nimble
