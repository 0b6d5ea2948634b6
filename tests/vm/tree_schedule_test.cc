// ScheduleTree and its layout encoding: the groups, children and payload
// tables of small trees, a deep chain, a shared subtree, payloads copied from
// the GPU (where there is one), and the errors for nodes the layout does not
// allow and for malformed encodings.
#include "nimble/vm/tree_schedule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nimble/vm/adt.h"
#include "nimble/vm/closure.h"
#include "nimble/vm/error.h"
#include "nimble/vm/tensor.h"
#include "tests/cuda_device.h"
#include "tests/error_of.h"
#include "tests/vm/tree_schedule_example.h"

namespace nimble::vm {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using namespace tree_schedule_example;

TreeScheduleLayout LeafRows() {
  return {.max_children = 2,
          .payloads = {{.tag = kLeaf, .field = 0, .dtype = DataType::Int32(), .shape = {}}}};
}

TEST(ScheduleTree, GroupsByHeightAndTag) {
  const Ref<Object> schedule = ScheduleTree(Node(Node(Leaf(0), Leaf(1)), Leaf(2)), LeafRows());
  ExpectExampleSchedule(schedule, "ScheduleTree");
}

TEST(ScheduleTree, SingleLeafIsOneGroup) {
  const Ref<Object> schedule = ScheduleTree(Leaf(5), LeafRows());
  EXPECT_THAT(Values(schedule, 0), ElementsAreArray({0, 0, 1, 0}));
  EXPECT_THAT(Values(schedule, 1), ElementsAreArray({-1, -1}));
  EXPECT_THAT(Values(schedule, 2), ElementsAreArray({5}));
}

// Deeper than any recursion would go; every height holds one node.
TEST(ScheduleTree, DeepChainNeedsNoRecursion) {
  constexpr int kNodes = 100000;
  Ref<Object> tree = Leaf(0);
  for (int i = 1; i < kNodes; ++i) tree = Node(Leaf(i), tree);
  Shape shape;
  const std::vector<int32_t> groups = Values(ScheduleTree(tree, LeafRows()), 0, &shape);
  // All leaves share height 0; then one node a height.
  EXPECT_EQ(shape, (Shape{kNodes, 4}));
  EXPECT_EQ(groups[2], kNodes);
  EXPECT_EQ(groups[4 * (kNodes - 1) + 1], 2 * kNodes - 2);
}

TEST(ScheduleTree, SharedSubtreeIsOneNode) {
  const Ref<Object> shared = Node(Leaf(0), Leaf(1));
  const Ref<Object> schedule = ScheduleTree(Node(shared, shared), LeafRows());
  EXPECT_THAT(Values(schedule, 1), ElementsAreArray({-1, -1, -1, -1, 0, 1, 2, 2}));
}

TEST(ScheduleTree, StacksVectorPayloadsAndEmptyTables) {
  const TreeScheduleLayout layout{
      .max_children = 1,
      .payloads = {{.tag = 0, .field = 0, .dtype = DataType::Float32(), .shape = {2}},
                   {.tag = 1, .field = 1, .dtype = DataType::Float32(), .shape = {2}}}};
  const Ref<Object> tree =
      Make<ADTNode>(1, std::vector<Ref<Object>>{
                           Make<ADTNode>(0, std::vector<Ref<Object>>{TensorNode::FromVector<float>(
                                                {2}, DataType::Float32(), {1.5f, -2})}),
                           TensorNode::FromVector<float>({2}, DataType::Float32(), {3, 4})});
  const ADT schedule = ScheduleTree(tree, layout).as<ADTNode>();
  const Tensor leaves = schedule->field(2).as<TensorNode>();
  EXPECT_EQ(leaves->shape(), (Shape{1, 2}));
  EXPECT_EQ(leaves->data<float>()[0], 1.5f);
  EXPECT_EQ(leaves->data<float>()[1], -2);
  EXPECT_EQ(schedule->field(3).as<TensorNode>()->data<float>()[1], 4);
  // A tag without nodes gives an empty table of its payload's shape.
  const Ref<Object> leaf = Make<ADTNode>(
      0, std::vector<Ref<Object>>{TensorNode::FromVector<float>({2}, DataType::Float32(), {0, 0})});
  const ADT single = ScheduleTree(leaf, layout).as<ADTNode>();
  EXPECT_EQ(single->field(3).as<TensorNode>()->shape(), (Shape{0, 2}));
}

// Device placement may leave payloads on the GPU; the tables are on the CPU.
TEST(ScheduleTree, CopiesPayloadsFromTheDevice) {
  if (const std::string missing = nimble::testing::CudaMissing(); !missing.empty()) {
    GTEST_SKIP() << missing;
  }
  const auto on_gpu = [](int32_t row) {
    return Make<ADTNode>(
        kLeaf,
        std::vector<Ref<Object>>{
            TensorNode::Scalar(DataType::Int32(), row)->CopyTo(Device{DeviceType::kCUDA, 0})});
  };
  const Ref<Object> schedule = ScheduleTree(Node(on_gpu(7), on_gpu(9)), LeafRows());
  const Tensor rows = schedule.as<ADTNode>()->field(2).as<TensorNode>();
  EXPECT_EQ(rows->device().type, DeviceType::kCPU);
  EXPECT_THAT(Values(schedule, 2), ElementsAreArray({7, 9}));
}

TEST(ScheduleTree, RefusesNodesTheLayoutDoesNotAllow) {
  EXPECT_THAT(ErrorOf([&] {
                ScheduleTree(Make<ADTNode>(kLeaf, std::vector<Ref<Object>>{TensorNode::Scalar(
                                                      DataType::Float32(), 1.0f)}),
                             LeafRows());
              }),
              HasSubstr("node with tag 0 has field 0 of type Tensor[(), float32], but the layout "
                        "expects Tensor[(), int32]"));
  EXPECT_THAT(
      ErrorOf([&] { ScheduleTree(Node(Leaf(0), Leaf(1)), {.max_children = 2, .payloads = {}}); }),
      HasSubstr("which the layout has no table for"));
  const Ref<Object> three =
      Make<ADTNode>(kNode, std::vector<Ref<Object>>{Leaf(0), Leaf(1), Leaf(2)});
  EXPECT_THAT(ErrorOf([&] { ScheduleTree(three, LeafRows()); }),
              HasSubstr("beyond the layout's 2 children"));
  EXPECT_THAT(ErrorOf([&] { ScheduleTree(TensorNode::Scalar(DataType::Int32(), 0), LeafRows()); }),
              HasSubstr("the tree is not an ADT value"));
  const Ref<Object> with_closure = Make<ADTNode>(
      kNode, std::vector<Ref<Object>>{Leaf(0), Make<ClosureNode>(0, std::vector<Ref<Object>>{})});
  EXPECT_THAT(ErrorOf([&] { ScheduleTree(with_closure, LeafRows()); }),
              HasSubstr("tree_schedule: node with tag 1 has field 1 that is neither a tensor nor "
                        "an ADT value"));
}

// The message names the node's tag, the field and both types.
TEST(ScheduleTree, MismatchedPayloadNamesBothTypes) {
  const TreeScheduleLayout layout{
      .max_children = 0,
      .payloads = {{.tag = 1, .field = 0, .dtype = DataType::Int32(), .shape = {}}}};
  const Ref<Object> node = Make<ADTNode>(
      1, std::vector<Ref<Object>>{TensorNode::FromVector<float>({2}, DataType::Float32(), {1, 2})});
  EXPECT_EQ(ErrorOf([&] { ScheduleTree(node, layout); }),
            "tree_schedule: node with tag 1 has field 0 of type Tensor[(2,), float32], but the "
            "layout expects Tensor[(), int32]");
}

// A node of a payload's tag without that tensor field has no row to give:
// refused, not read past its fields.
TEST(ScheduleTree, RefusesANodeWithoutItsTagsPayload) {
  const TreeScheduleLayout second_field{
      .max_children = 2,
      .payloads = {{.tag = kLeaf, .field = 1, .dtype = DataType::Int32(), .shape = {}}}};
  EXPECT_THAT(ErrorOf([&] { ScheduleTree(Node(Leaf(0), Leaf(1)), second_field); }),
              HasSubstr("node with tag 0 has field 0 of type Tensor[(), int32], which the layout "
                        "has no table for"));
  const Ref<Object> empty_leaf = Make<ADTNode>(kLeaf, std::vector<Ref<Object>>{});
  EXPECT_EQ(ErrorOf([&] { ScheduleTree(Node(empty_leaf, empty_leaf), LeafRows()); }),
            "tree_schedule: node with tag 0 has no tensor field 0 (it has 0 fields), but the "
            "layout expects Tensor[(), int32] there");
  // The payload's field holds a child instead.
  const TreeScheduleLayout node_payload{
      .max_children = 2,
      .payloads = {{.tag = kLeaf, .field = 0, .dtype = DataType::Int32(), .shape = {}},
                   {.tag = kNode, .field = 0, .dtype = DataType::Int32(), .shape = {}}}};
  EXPECT_THAT(ErrorOf([&] { ScheduleTree(Node(Leaf(0), Leaf(1)), node_payload); }),
              HasSubstr("node with tag 1 has no tensor field 0 (it has 2 fields)"));
}

TEST(TreeScheduleLayout, EncodingRoundTripsAndMalformedOnesAreErrors) {
  const TreeScheduleLayout layout{
      .max_children = 3,
      .payloads = {{.tag = 2, .field = 1, .dtype = DataType::Float32(), .shape = {1, 300}},
                   {.tag = 0, .field = 0, .dtype = DataType::Int64(), .shape = {}}}};
  EXPECT_EQ(DecodeTreeScheduleLayout(3, EncodeTreeScheduleLayout(layout)), layout);
  const auto error = [](int64_t children, std::vector<int64_t> encoded) {
    return ErrorOf([&] { DecodeTreeScheduleLayout(children, encoded); });
  };
  EXPECT_THAT(error(-1, {}), HasSubstr("max_children must be in [0, 2^31), got -1"));
  EXPECT_THAT(error(int64_t{1} << 40, {}), HasSubstr("max_children must be in [0, 2^31)"));
  EXPECT_THAT(error(2, {0, 0, 0, 32}), HasSubstr("ends before a payload's rank"));
  EXPECT_THAT(error(2, {0, 0, 9, 32, 0}), HasSubstr("is not one"));
  // In range, but no dtype: a float8 and a 32-bit bool.
  EXPECT_THAT(error(2, {0, 0, 2, 8, 0}), HasSubstr("(code 2, 8 bits) is not one"));
  EXPECT_THAT(error(2, {0, 0, 3, 32, 0}), HasSubstr("(code 3, 32 bits) is not one"));
  EXPECT_THAT(error(2, {0, 0, 0, 1000, 0}), HasSubstr("is not one"));
  EXPECT_THAT(error(2, {-1, 0, 0, 32, 0}), HasSubstr("must be non-negative int32s"));
  EXPECT_THAT(error(2, {0, 0, 0, 32, 33}), HasSubstr("rank 33 is out of range"));
  EXPECT_THAT(error(2, {0, 0, 0, 32, 1}), HasSubstr("ends before a payload's dimension"));
  EXPECT_THAT(error(2, {0, 0, 0, 32, 1, -4}), HasSubstr("dimension is negative"));
  EXPECT_THAT(error(2, {0, 0, 0, 32, 0, 0, 0, 0, 32, 0}), HasSubstr("in the layout twice"));
}

}  // namespace
}  // namespace nimble::vm
