// The Tree-LSTM builder (models/treelstm): the program's type, the weights,
// the tree argument and its errors, the VM against the reference evaluator,
// and against an independent PyTorch implementation on the same weights.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "models/treelstm/treelstm.h"
#include "nimble/compiler/ir/type.h"
#include "nimble/vm/adt.h"
#include "nimble/vm/npy.h"
#include "tests/error_of.h"
#include "tests/models/model_test_util.h"

namespace nimble::models {
namespace {

using ::testing::HasSubstr;

// Small enough that every test stays fast.
TreeLstmOptions Small() {
  TreeLstmOptions options;
  options.input_size = 8;
  options.hidden_size = 6;
  return options;
}

// Trees in post-order (see BinaryTree).
BinaryTree SingleLeaf() {
  return {{-1}, {-1}};
}
BinaryTree Pair() {
  return {{-1, -1, 0}, {-1, -1, 1}};
}
// ((a b) c) (d e): both sides deeper than one level.
BinaryTree Balanced() {
  return {{-1, -1, 0, -1, 2, -1, -1, 5, 4}, {-1, -1, 1, -1, 3, -1, -1, 6, 7}};
}
// a (b (c (d e))): a right-leaning chain.
BinaryTree Chain() {
  return {{-1, -1, -1, -1, -1, 3, 2, 1, 0}, {-1, -1, -1, -1, -1, 4, 5, 6, 7}};
}

struct NamedTree {
  std::string name;
  BinaryTree tree;
};

std::vector<NamedTree> Trees() {
  return {{"single leaf", SingleLeaf()},
          {"pair", Pair()},
          {"balanced", Balanced()},
          {"chain", Chain()}};
}

// One seeded word vector per leaf.
Tensor LeafVectors(const BinaryTree& tree, int64_t input_size, uint64_t seed) {
  std::vector<int32_t> ids(tree.num_leaves());
  std::iota(ids.begin(), ids.end(), 0);
  return SeededEmbeddings(ids, input_size, seed);
}

TEST(TreeLstm, ProgramType) {
  const ir::IRModule module = BuildTreeLstm(Small()).Module();
  EXPECT_EQ(ir::TypeToString(module->Lookup("main")->checked_type),
            "fn (Tree, Tensor[(?, 8), float32]) -> Tensor[(1, 6), float32]");
  EXPECT_EQ(module->LookupConstructor("Leaf")->tag, 0);
  EXPECT_EQ(module->LookupConstructor("Node")->tag, 1);
}

TEST(TreeLstm, WeightsAreNamedAsThePeerCell) {
  const Model model = BuildTreeLstm(TreeLstmOptions{});
  ASSERT_EQ(model.weights.size(), 4u);
  EXPECT_EQ(model.weights.at("leaf.weight")->shape(), (Shape{450, 300}));
  EXPECT_EQ(model.weights.at("leaf.bias")->shape(), (Shape{450}));
  EXPECT_EQ(model.weights.at("node.weight")->shape(), (Shape{750, 300}));
  EXPECT_EQ(model.weights.at("node.bias")->shape(), (Shape{750}));
  EXPECT_EQ(ir::TypeToString(model.Module()->Lookup("main")->checked_type),
            "fn (Tree, Tensor[(?, 300), float32]) -> Tensor[(1, 150), float32]");
  TreeLstmOptions zero = Small();
  zero.input_size = 0;
  EXPECT_THAT(ErrorOf([&] { BuildTreeLstm(zero); }), HasSubstr("input 0"));
}

TEST(TreeLstm, TreeArgumentsFollowTheTree) {
  const ir::IRModule module = BuildTreeLstm(Small()).Module();
  const Tensor leaves = LeafVectors(Pair(), 8, 1);
  const std::vector<Ref<Object>> args = TreeArguments(module, Pair(), leaves);
  ASSERT_EQ(args.size(), 2u);
  const ADT root = args[0].as<ADTNode>();
  ASSERT_TRUE(root);
  EXPECT_EQ(root->tag(), 1);
  const ADT right = root->field(1).as<ADTNode>();
  EXPECT_EQ(right->tag(), 0);
  const Tensor row = right->field(0).as<TensorNode>();
  EXPECT_EQ(row->shape(), Shape{});
  EXPECT_EQ(row->GetAsDouble(0), 1.0);  // the second leaf is row 1
  EXPECT_EQ(args[1].get(), leaves.get());
}

TEST(TreeLstm, MalformedTreesAreErrors) {
  const ir::IRModule module = BuildTreeLstm(Small()).Module();
  auto error = [&](const BinaryTree& tree, int64_t rows) {
    return ErrorOf([&] {
      TreeArguments(module, tree, SeededEmbeddings(std::vector<int32_t>(rows, 0), 8, 1));
    });
  };
  EXPECT_THAT(error({{}, {}}, 0), HasSubstr("at least one"));
  EXPECT_THAT(error({{-1, -1}, {-1}}, 2), HasSubstr("got 2 and 1"));
  EXPECT_THAT(error({{-1, 0}, {-1, -1}}, 1), HasSubstr("node 1 has one child"));
  EXPECT_THAT(error({{-1, 2, -1}, {-1, 0, -1}}, 2), HasSubstr("does not come before it"));
  EXPECT_THAT(error({{-1, 0}, {-1, 0}}, 1), HasSubstr("node 0 already has a parent"));
  EXPECT_THAT(error({{-1, -1}, {-1, -1}}, 2), HasSubstr("form 2 trees"));
  EXPECT_THAT(error(Pair(), 3), HasSubstr("2 leaves but there are 3 leaf vectors"));
  EXPECT_THAT(ErrorOf([&] {
                TreeArguments(module, SingleLeaf(), TensorNode::Empty({8}, DataType::Float32()));
              }),
              HasSubstr("(leaves, input) float32"));
}

TEST(TreeLstm, VmMatchesEvaluator) {
  const ir::IRModule module = BuildTreeLstm(Small()).Module();
  CompiledModel compiled(module);
  for (const NamedTree& tree : Trees()) {
    const std::vector<Ref<Object>> args =
        TreeArguments(module, tree.tree, LeafVectors(tree.tree, 8, tree.tree.left.size()));
    ExpectAllClose(compiled.Run(args), Evaluate(module, args), kVmVsEvaluatorTolerance, tree.name);
  }
}

// Products on cuBLAS, then generated.
TEST(TreeLstm, GpuMatchesEvaluator) {
  const ir::IRModule module = BuildTreeLstm(Small()).Module();
  std::string missing;
  for (const char* kernels : {"auto", "generated"}) {
    std::optional<vm::Executable> executable = CompileForGpu(module, "main", &missing, kernels);
    if (!executable) continue;
    CompiledModel compiled(std::move(*executable), "main");
    for (const NamedTree& tree : Trees()) {
      const std::vector<Ref<Object>> args =
          TreeArguments(module, tree.tree, LeafVectors(tree.tree, 8, tree.tree.left.size()));
      ExpectAllClose(compiled.Run(args), Evaluate(module, args), kVmVsEvaluatorTolerance,
                     std::string(kernels) + " kernels, " + tree.name);
    }
  }
  if (!missing.empty()) GTEST_SKIP() << missing;
}

// @main_arrays's form of a tree: (left, right) per node, (-1, j) for leaf j.
Tensor ChildrenArray(const BinaryTree& tree) {
  std::vector<int32_t> rows;
  int32_t next_leaf = 0;
  for (size_t k = 0; k < tree.left.size(); ++k) {
    const bool leaf = tree.left[k] == -1;
    rows.push_back(tree.left[k]);
    rows.push_back(leaf ? next_leaf++ : tree.right[k]);
  }
  return TensorNode::FromVector({static_cast<int64_t>(tree.left.size()), 2}, DataType::Int32(),
                                rows);
}

// The tree as arrays (what `nimble run` can pass) gives what the ADT gives.
TEST(TreeLstm, ArraysEntryMatchesMain) {
  const ir::IRModule module = BuildTreeLstm(Small()).Module();
  CompiledModel main(module);
  CompiledModel arrays(module, "main_arrays");
  for (const NamedTree& tree : Trees()) {
    const Tensor leaves = LeafVectors(tree.tree, 8, 5);
    const Tensor expected = main.Run(TreeArguments(module, tree.tree, leaves));
    const std::vector<Ref<Object>> args{ChildrenArray(tree.tree), leaves};
    ExpectAllClose(arrays.Run(args), expected, 1e-6, tree.name);
    ExpectAllClose(Evaluate(module, args, "main_arrays"), expected, kVmVsEvaluatorTolerance,
                   tree.name);
  }
  // A node that is its own child would recurse forever: it fails at once.
  const std::vector<Ref<Object>> cycle{
      TensorNode::FromVector<int32_t>({2, 2}, DataType::Int32(), {-1, 0, 1, 0}),
      LeafVectors(SingleLeaf(), 8, 1)};
  EXPECT_THAT(ErrorOf([&] { arrays.Run(cycle); }), HasSubstr("@child_after_parent"));
}

// An implementation of the same equations in PyTorch, written separately in
// torch_reference.py, gives the same root state on the same weights.
TEST(TreeLstm, MatchesPyTorch) {
  if (!TorchAvailable())
    GTEST_SKIP() << kTorchPython << " has no torch (apt install python3-torch)";
  ScratchDir dir;
  struct Config {
    std::string name;
    TreeLstmOptions options;
  };
  struct Check {
    std::string label;
    size_t config;
    BinaryTree tree;
    Tensor leaves;
    TorchCase files;
  };
  const std::vector<Config> configs{{"small", Small()}, {"full", TreeLstmOptions{}}};
  std::vector<Model> models;
  std::vector<Check> checks;
  for (size_t c = 0; c < configs.size(); ++c) {
    models.push_back(BuildTreeLstm(configs[c].options));
    const std::string weights = dir.File(configs[c].name + ".npz");
    SaveWeights(models.back(), weights);
    for (const NamedTree& tree : Trees()) {
      const std::string run = dir.File(configs[c].name + "_" + std::to_string(checks.size()));
      Check check{configs[c].name + ", " + tree.name,
                  c,
                  tree.tree,
                  LeafVectors(tree.tree, configs[c].options.input_size, checks.size()),
                  {weights, run + ".npz", run + "_torch.npy"}};
      auto indices = [](const std::vector<int32_t>& values) {
        return TensorNode::FromVector({static_cast<int64_t>(values.size())}, DataType::Int32(),
                                      values);
      };
      WriteNpz(check.files.input, {{"left", indices(tree.tree.left)},
                                   {"right", indices(tree.tree.right)},
                                   {"leaves", check.leaves}});
      checks.push_back(std::move(check));
    }
  }
  std::vector<TorchCase> cases;
  for (const Check& check : checks) cases.push_back(check.files);
  RunTorchReference("treelstm", cases);
  for (size_t c = 0; c < configs.size(); ++c) {
    const ir::IRModule module = models[c].Module();
    CompiledModel compiled(module);
    for (const Check& check : checks) {
      if (check.config != c) continue;
      ExpectAllClose(compiled.Run(TreeArguments(module, check.tree, check.leaves)),
                     ReadNpy(check.files.output), 1e-4, check.label);
    }
  }
}

}  // namespace
}  // namespace nimble::models
