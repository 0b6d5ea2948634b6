// BatchTreeRecursion: which recursive functions it batches and which it must
// leave alone, and the batched programs on the VM against the same programs
// compiled without the pass (the default; --batch-trees runs it) and against
// the reference evaluator: the Tree-LSTM on a single leaf, one node, a full
// tree, a chain (one node a group) and random trees; a tree of vector
// payloads with a tensor result.
#include "nimble/compiler/transform/tree_batching.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "models/treelstm/treelstm.h"
#include "nimble/compiler/backend/pipeline.h"
#include "nimble/compiler/text/printer.h"
#include "nimble/vm/adt.h"
#include "nimble/vm/vm.h"
#include "tests/compiler/transform/normalize_test_util.h"
#include "tests/models/model_test_util.h"

namespace nimble::transform {
namespace {

using testing::ParseTyped;

// The program compiled with --batch-trees and without.
struct BothPrograms {
  explicit BothPrograms(const ir::IRModule& module)
      : batched(backend::Compile(module, {.batch_trees = true})),
        unbatched(backend::Compile(module, {})) {}
  vm::VirtualMachine batched;
  vm::VirtualMachine unbatched;
};

// A binary tree of `leaves` leaves in post-order (models::BinaryTree): a
// node of n leaves has split(n) of them on its left.
template <typename Split>
models::BinaryTree GrowTree(int leaves, Split&& split) {
  models::BinaryTree tree;
  const auto grow = [&](auto& self, int count) -> int32_t {
    int32_t left = -1, right = -1;
    if (count > 1) {
      const int left_count = split(count);
      left = self(self, left_count);
      right = self(self, count - left_count);
    }
    tree.left.push_back(left);
    tree.right.push_back(right);
    return static_cast<int32_t>(tree.left.size() - 1);
  };
  grow(grow, leaves);
  return tree;
}

models::TreeLstmOptions Small() {
  models::TreeLstmOptions options;
  options.input_size = 8;
  options.hidden_size = 6;
  return options;
}

TEST(BatchTreeRecursion, BatchesTheTreeLstm) {
  const ir::IRModule module = models::BuildTreeLstm(Small()).Module();
  const ir::IRModule batched = BatchTreeRecursion(module);
  ASSERT_NE(batched.get(), module.get());
  ASSERT_TRUE(batched->Contains("state_batched_groups"));
  const std::string text = text::PrintModule(batched);
  EXPECT_THAT(text, ::testing::HasSubstr("adt.tree_schedule(%tree, max_children=2"));
  // One product per group, in the loop; none left in @state.
  const ir::Function state = batched->Lookup("state");
  EXPECT_THAT(text::PrintModule([&] {
                ir::IRModule only = ir::MakeModule();
                for (const ir::TypeData& data : batched->type_defs()) only->AddTypeDef(data);
                only->Add(batched->GetGlobalVar("state"), state);
                return only;
              }()),
              ::testing::Not(::testing::HasSubstr("nn.dense")));
  // The other functions are as they were.
  EXPECT_EQ(batched->Lookup("tree_at").get(), module->Lookup("tree_at").get());
}

TEST(BatchTreeRecursion, TreeLstmEqualsTheUnbatchedProgram) {
  const ir::IRModule module = models::BuildTreeLstm(Small()).Module();
  BothPrograms programs(module);
  std::mt19937 random(7);
  std::vector<std::pair<std::string, models::BinaryTree>> trees{
      {"single leaf", {{-1}, {-1}}},
      {"one node", {{-1, -1, 0}, {-1, -1, 1}}},
      {"full tree of depth 4", GrowTree(16, [](int count) { return count / 2; })},
      // Every height holds one node: nothing to batch.
      {"chain of 12", GrowTree(12, [](int) { return 1; })}};
  for (int leaves : {3, 7, 19, 40}) {
    trees.emplace_back("random tree of " + std::to_string(leaves), GrowTree(leaves, [&](int count) {
                         return std::uniform_int_distribution<int>(1, count - 1)(random);
                       }));
  }
  for (const auto& [name, tree] : trees) {
    std::vector<int32_t> ids(tree.num_leaves());
    std::iota(ids.begin(), ids.end(), 0);
    const std::vector<Ref<Object>> args =
        models::TreeArguments(module, tree, models::SeededEmbeddings(ids, 8, tree.left.size()));
    const Tensor want = models::TensorResult(programs.unbatched.Invoke("main", args));
    const Tensor got = models::TensorResult(programs.batched.Invoke("main", args));
    models::ExpectAllClose(got, want, 1e-5, name);
    models::ExpectAllClose(got, models::Evaluate(module, args), models::kVmVsEvaluatorTolerance,
                           name);
  }
}

// Leaves carry (1, 3) vectors; a node adds its children's through a shared
// weight. The result is one tensor, not a tuple.
const char* const kVectorTree = R"(
type T {
  L(Tensor[(1, 3), float32]),
  N(T, T),
}

def @sum(%t: T, %w: Tensor[(3, 3), float32]) -> Tensor[(1, 3), float32] {
  match (%t) {
    L(%v) => tanh(%v),
    N(%a, %b) => {
      let %x = @sum(%a, %w);
      let %y = @sum(%b, %w);
      tanh(add(nn.dense(%x, %w), multiply(%y, 0.5f)))
    },
  }
}

def @main(%t: T, %w: Tensor[(3, 3), float32]) -> Tensor[(1, 3), float32] {
  @sum(%t, %w)
}
)";

Ref<Object> VectorLeaf(int32_t tag, float value) {
  return Make<ADTNode>(tag, std::vector<Ref<Object>>{TensorNode::FromVector<float>(
                                {1, 3}, DataType::Float32(), {value, -value, 0.25f * value})});
}

Ref<Object> VectorNode(int32_t tag, Ref<Object> left, Ref<Object> right) {
  return Make<ADTNode>(tag, std::vector<Ref<Object>>{std::move(left), std::move(right)});
}

TEST(BatchTreeRecursion, TreeOfVectorPayloadsEqualsTheUnbatchedProgram) {
  const ir::IRModule module = ParseTyped(kVectorTree);
  ASSERT_TRUE(BatchTreeRecursion(module)->Contains("sum_batched_groups"));
  const int32_t leaf = module->LookupConstructor("L")->tag;
  const int32_t node = module->LookupConstructor("N")->tag;
  const Tensor weight = TensorNode::FromVector<float>(
      {3, 3}, DataType::Float32(), {0.5f, -0.25f, 0.125f, 1, 0.75f, -0.5f, 0.25f, 0.5f, -1});
  // A shared subtree is one node of the schedule and two uses.
  const Ref<Object> shared = VectorNode(node, VectorLeaf(leaf, 1), VectorLeaf(leaf, 2));
  const Ref<Object> tree = VectorNode(node, VectorNode(node, shared, VectorLeaf(leaf, -3)), shared);
  BothPrograms programs(module);
  for (const Ref<Object>& input : {VectorLeaf(leaf, 4), shared, tree}) {
    const std::vector<Ref<Object>> args{input, weight};
    const Tensor want = models::TensorResult(programs.unbatched.Invoke("main", args));
    models::ExpectAllClose(models::TensorResult(programs.batched.Invoke("main", args)), want, 1e-6,
                           "vector tree");
    models::ExpectAllClose(want, models::Evaluate(module, args), models::kVmVsEvaluatorTolerance,
                           "vector tree");
  }
}

// Each program must come back as the same module: batching would change
// what it computes or compute what it never would.
TEST(BatchTreeRecursion, LeavesDependentOrIrregularRecursionAlone) {
  const std::string tree_type = R"(
type T {
  L(Tensor[(1, 3), float32]),
  N(T, T),
}
)";
  const std::vector<std::pair<std::string, std::string>> programs{
      {"the right call reads the left call's result", R"(
def @f(%t: T, %h: Tensor[(1, 3), float32]) -> Tensor[(1, 3), float32] {
  match (%t) {
    L(%v) => add(%v, %h),
    N(%a, %b) => {
      let %x = @f(%a, %h);
      @f(%b, %x)
    },
  }
})"},
      {"a subtree the clause never reads", R"(
def @f(%t: T) -> Tensor[(1, 3), float32] {
  match (%t) {
    L(%v) => %v,
    N(%a, _) => @f(%a),
  }
})"},
      {"an operator that mixes the rows", R"(
def @f(%t: T) -> Tensor[(1, 3), float32] {
  match (%t) {
    L(%v) => %v,
    N(%a, %b) => reshape(add(@f(%a), @f(%b)), newshape=[1, 3]),
  }
})"},
      {"control flow inside a clause", R"(
def @f(%t: T) -> Tensor[(1, 3), float32] {
  match (%t) {
    L(%v) => %v,
    N(%a, %b) => if (less(0, 1)) { @f(%a) } else { @f(%b) },
  }
})"},
      {"a result of dynamic shape", R"(
def @f(%t: T) -> Tensor[(?, 3), float32] {
  match (%t) {
    L(%v) => %v,
    N(%a, %b) => concatenate((@f(%a), @f(%b))),
  }
})"}};
  for (const auto& [name, program] : programs) {
    const ir::IRModule module = ParseTyped(tree_type + program);
    EXPECT_EQ(BatchTreeRecursion(module).get(), module.get()) << name;
  }
}

}  // namespace
}  // namespace nimble::transform
