// Trees for the TreeSchedule tests (vm/tree_schedule.h, and the
// adt.tree_schedule operator that runs it): a binary Tree ADT of tag 0
// Leaf(row) and tag 1 Node(left, right), the tables of a schedule, and the
// schedule of Node(Node(Leaf(0), Leaf(1)), Leaf(2)) that both suites check.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "nimble/vm/adt.h"
#include "nimble/vm/tensor.h"

namespace nimble::tree_schedule_example {

constexpr int32_t kLeaf = 0;
constexpr int32_t kNode = 1;

inline Ref<Object> Leaf(int32_t row) {
  return Make<ADTNode>(kLeaf, std::vector<Ref<Object>>{TensorNode::Scalar(DataType::Int32(), row)});
}

inline Ref<Object> Node(Ref<Object> left, Ref<Object> right) {
  return Make<ADTNode>(kNode, std::vector<Ref<Object>>{std::move(left), std::move(right)});
}

// Table `field` of `schedule` (int32), and its shape in `shape` when given.
inline std::vector<int32_t> Values(const Ref<Object>& schedule, size_t field,
                                   Shape* shape = nullptr) {
  const Tensor tensor = schedule.as<ADTNode>()->field(field).as<TensorNode>();
  EXPECT_EQ(tensor->dtype(), DataType::Int32());
  if (shape) *shape = tensor->shape();
  return std::vector<int32_t>(tensor->data<int32_t>(), tensor->data<int32_t>() + tensor->numel());
}

// The schedule of Node(Node(Leaf(0), Leaf(1)), Leaf(2)), made `by` a path.
inline void ExpectExampleSchedule(const Ref<Object>& schedule, const std::string& by) {
  SCOPED_TRACE(by);
  ASSERT_EQ(schedule.as<ADTNode>()->size(), 3u);
  Shape shape;
  EXPECT_THAT(Values(schedule, 0, &shape),
              ::testing::ElementsAreArray({0, 0, 3, 0, 1, 3, 1, 0, 1, 4, 1, 1}));
  EXPECT_EQ(shape, (Shape{3, 4}));
  EXPECT_THAT(Values(schedule, 1, &shape),
              ::testing::ElementsAreArray({-1, -1, -1, -1, -1, -1, 0, 1, 3, 2}));
  EXPECT_EQ(shape, (Shape{5, 2}));
  EXPECT_THAT(Values(schedule, 2, &shape), ::testing::ElementsAreArray({0, 1, 2}));
  EXPECT_EQ(shape, (Shape{3}));
}

}  // namespace nimble::tree_schedule_example
