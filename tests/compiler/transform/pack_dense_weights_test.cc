// PackDenseWeights: text in, text out; the evaluator's values before and
// after; the packed program on the VM; and which calls are left alone.
#include "nimble/compiler/transform/pack_dense_weights.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "nimble/compiler/backend/pipeline.h"
#include "nimble/compiler/op/op.h"
#include "nimble/compiler/transform/pass_util.h"
#include "nimble/vm/vm.h"
#include "tests/compiler/transform/normalize_test_util.h"

namespace nimble::transform {
namespace {

using testing::ExactValues;
using testing::ExpectProgram;
using testing::ExpectSameResult;
using testing::ParseTyped;

// weight [units, k] as the pass lays it out, written independently of it.
Tensor PackedByHand(const Tensor& weight) {
  const int64_t units = weight->shape()[0];
  const int64_t k = weight->shape()[1];
  Tensor packed = TensorNode::Empty({units / 16, k, 16}, DataType::Float32());
  for (int64_t block = 0; block < units / 16; ++block) {
    for (int64_t l = 0; l < k; ++l) {
      for (int64_t lane = 0; lane < 16; ++lane) {
        packed->data<float>()[(block * k + l) * 16 + lane] =
            weight->data<float>()[(block * 16 + lane) * k + l];
      }
    }
  }
  return packed;
}

const PackDensePredicate kAlways = [](const ir::TensorTypeNode&, const ir::TensorTypeNode&, bool) {
  return true;
};

// A 32 x 5 weight w and a bias b for it, and the constants packing makes of
// them (w.packed, b).
struct WeightAndBias {
  text::ParamMap params{{"w", ExactValues({32, 5}, 1)}, {"b", ExactValues({32}, 2)}};
  text::ParamMap packed{{"w.packed", PackedByHand(params.at("w"))}, {"b", params.at("b")}};
};

TEST(PackDenseWeights, AConstantWeightIsPackedOnce) {
  const WeightAndBias constants;
  const text::ParamMap& params = constants.params;
  const ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(?, 5), float32]) {
  let %h = add(nn.dense(%x, meta[relay.Constant][w]), meta[relay.Constant][b]);
  (%h, nn.dense(%x, meta[relay.Constant][w], units=32))
})",
                                         &params);
  const ir::IRModule packed = PackDenseWeights(module, kAlways);
  const text::ParamMap& expected_params = constants.packed;
  ExpectProgram(packed, R"(
def @main(%x: Tensor[(?, 5), float32]) {
  let %h = nn.contrib_dense_pack(%x, meta[relay.Constant][w.packed], meta[relay.Constant][b]);
  (%h, nn.contrib_dense_pack(%x, meta[relay.Constant][w.packed]))
})",
                &expected_params);
  // Both calls share one packed constant, not two copies of it.
  const auto& tuple = static_cast<const ir::TupleNode&>(
      *static_cast<const ir::LetNode&>(*packed->Lookup("main")->body).body);
  const auto& first = static_cast<const ir::CallNode&>(
      *static_cast<const ir::LetNode&>(*packed->Lookup("main")->body).value);
  EXPECT_EQ(first.args[1].get(), static_cast<const ir::CallNode&>(*tuple.fields[1]).args[1].get());
  ExpectSameResult(module, packed, {ExactValues({3, 5}, 3)});
}

// Constant vectors added to a packed product become its bias, a chain of
// them one bias (their sum, named after both), on either side of the add.
TEST(PackDenseWeights, ConstantVectorsAddedToTheProductBecomeItsBias) {
  const text::ParamMap params{
      {"w", ExactValues({32, 5}, 1)}, {"b1", ExactValues({32}, 2)}, {"b2", ExactValues({32}, 3)}};
  const ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(?, 5), float32]) {
  add(meta[relay.Constant][b2], add(nn.dense(%x, meta[relay.Constant][w]), meta[relay.Constant][b1]))
})",
                                         &params);
  const ir::IRModule packed = PackDenseWeights(module, kAlways);
  Tensor sum = ExactValues({32}, 2);
  for (int64_t u = 0; u < 32; ++u) sum->data<float>()[u] += params.at("b2")->data<float>()[u];
  const text::ParamMap expected_params{{"w.packed", PackedByHand(params.at("w"))},
                                       {"b1_plus_b2", sum}};
  ExpectProgram(packed, R"(
def @main(%x: Tensor[(?, 5), float32]) {
  nn.contrib_dense_pack(%x, meta[relay.Constant][w.packed], meta[relay.Constant][b1_plus_b2])
})",
                &expected_params);
  ExpectSameResult(module, packed, {ExactValues({3, 5}, 4)});
}

// A product something else also reads, and vectors that are not constants
// [units], stay adds.
TEST(PackDenseWeights, OtherAddsStayAdds) {
  const text::ParamMap params{{"w", ExactValues({32, 5}, 1)},
                              {"b", ExactValues({32}, 2)},
                              {"row", ExactValues({1, 32}, 3)}};
  const std::string program = R"(
def @main(%x: Tensor[(?, 5), float32], %p: Tensor[(32), float32]) {
  let %y = nn.dense(%x, meta[relay.Constant][w]);
  (add(%y, meta[relay.Constant][b]), %y,
   add(nn.dense(%x, meta[relay.Constant][w]), %p),
   add(nn.dense(%x, meta[relay.Constant][w]), meta[relay.Constant][row]))
})";
  const ir::IRModule module = ParseTyped(program, &params);
  const text::ParamMap expected_params{
      {"w.packed", PackedByHand(params.at("w"))}, {"b", params.at("b")}, {"row", params.at("row")}};
  ExpectProgram(PackDenseWeights(module, kAlways), R"(
def @main(%x: Tensor[(?, 5), float32], %p: Tensor[(32), float32]) {
  let %y = nn.contrib_dense_pack(%x, meta[relay.Constant][w.packed]);
  (add(%y, meta[relay.Constant][b]), %y,
   add(nn.contrib_dense_pack(%x, meta[relay.Constant][w.packed]), %p),
   add(nn.contrib_dense_pack(%x, meta[relay.Constant][w.packed]), meta[relay.Constant][row]))
})",
                &expected_params);
  // The same call read by the add and by the tuple (the IR is a DAG).
  const ir::Var x =
      Make<ir::VarNode>("x", ir::MakeTensorType({ir::Dim::Any(), 5}, DataType::Float32()));
  const ir::Expr product = Make<ir::CallNode>(
      op::GetOp("nn.dense"), std::vector<ir::Expr>{x, Make<ir::ConstantNode>(params.at("w"), "w")},
      op::NormalizeAttrs(*op::OpRegistry::Global().Find("nn.dense"), {}));
  const ir::Expr bias_add = Make<ir::CallNode>(
      op::GetOp("add"),
      std::vector<ir::Expr>{product, Make<ir::ConstantNode>(params.at("b"), "b")});
  ir::IRModule shared = ir::MakeModule();
  shared->Add(Make<ir::GlobalVarNode>("main"),
              Make<ir::FunctionNode>(std::vector<ir::Var>{x},
                                     Make<ir::TupleNode>(std::vector<ir::Expr>{bias_add, product}),
                                     nullptr, std::vector<ir::TypeVar>{}));
  typing::InferTypes(shared);
  const ir::IRModule rewritten = PackDenseWeights(shared, kAlways);
  const auto& fields = static_cast<const ir::TupleNode&>(*rewritten->Lookup("main")->body).fields;
  EXPECT_EQ(CalledOpName(*fields[0]), "add");
  EXPECT_EQ(static_cast<const ir::CallNode&>(*fields[0]).args[0].get(), fields[1].get());
}

// A gelu of a packed product that only it reads becomes the product's
// activation, after its bias; a gelu of a product read elsewhere, or of a
// product already activated, stays a gelu.
TEST(PackDenseWeights, AGeluOfTheProductBecomesItsActivation) {
  const WeightAndBias constants;
  const text::ParamMap& params = constants.params;
  const ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(?, 5), float32]) {
  let %y = nn.dense(%x, meta[relay.Constant][w]);
  (gelu(add(nn.dense(%x, meta[relay.Constant][w]), meta[relay.Constant][b])), gelu(%y), %y,
   gelu(gelu(nn.dense(%x, meta[relay.Constant][w]))))
})",
                                         &params);
  const ir::IRModule packed = PackDenseWeights(module, kAlways);
  const text::ParamMap& expected_params = constants.packed;
  ExpectProgram(packed, R"(
def @main(%x: Tensor[(?, 5), float32]) {
  let %y = nn.contrib_dense_pack(%x, meta[relay.Constant][w.packed]);
  (nn.contrib_dense_pack(%x, meta[relay.Constant][w.packed], meta[relay.Constant][b], activation="gelu"),
   gelu(%y), %y,
   gelu(nn.contrib_dense_pack(%x, meta[relay.Constant][w.packed], activation="gelu")))
})",
                &expected_params);
  ExpectSameResult(module, packed, {ExactValues({3, 5}, 4)});
}

TEST(PackDenseWeights, LeavesWhatItCannotOrIsToldNotToPack) {
  const text::ParamMap params{{"w24", ExactValues({24, 5}, 1)},
                              {"w16", ExactValues({16, 5}, 2)},
                              {"w64", TensorNode::Empty({16, 5}, DataType::Float64())}};
  const std::string program = R"(
def @main(%x: Tensor[(?, 5), float32], %w: Tensor[(16, 5), float32],
          %x64: Tensor[(2, 5), float64]) {
  (nn.dense(%x, %w), nn.dense(%x, meta[relay.Constant][w24]),
   nn.dense(%x64, meta[relay.Constant][w64]), nn.dense(%x, meta[relay.Constant][w16]))
})";
  const ir::IRModule module = ParseTyped(program, &params);
  const text::ParamMap expected_params{{"w24", params.at("w24")},
                                       {"w64", params.at("w64")},
                                       {"w16.packed", PackedByHand(params.at("w16"))}};
  // A parameter weight, 24 units (not whole blocks of 16), float64: never.
  ExpectProgram(PackDenseWeights(module, kAlways),
                R"(
def @main(%x: Tensor[(?, 5), float32], %w: Tensor[(16, 5), float32],
          %x64: Tensor[(2, 5), float64]) {
  (nn.dense(%x, %w), nn.dense(%x, meta[relay.Constant][w24]),
   nn.dense(%x64, meta[relay.Constant][w64]),
   nn.contrib_dense_pack(%x, meta[relay.Constant][w16.packed]))
})",
                &expected_params);
  // The predicate sees the call's types and may refuse.
  std::vector<std::string> asked;
  const ir::IRModule refused = PackDenseWeights(
      module, [&](const ir::TensorTypeNode& data, const ir::TensorTypeNode& weight, bool repeated) {
        asked.push_back(ir::TypeToString(ir::RefOf(&data)) + " " +
                        ir::TypeToString(ir::RefOf(&weight)) + (repeated ? " repeated" : " once"));
        return false;
      });
  EXPECT_THAT(asked,
              ::testing::ElementsAre("Tensor[(?, 5), float32] Tensor[(16, 5), float32] once"));
  ExpectProgram(refused, program, &params);
}

// The predicate is told whether the call may run more than once per run:
// in a recursion and what it calls, and in a function literal, yes; in
// @main's own body, no. (Each place has a weight of its own width.)
TEST(PackDenseWeights, TellsThePredicateWhetherTheCallRepeats) {
  const text::ParamMap params{{"w16", ExactValues({16, 5}, 1)},
                              {"w32", ExactValues({32, 5}, 2)},
                              {"w48", ExactValues({48, 5}, 3)}};
  const ir::IRModule module = ParseTyped(R"(
def @project(%x: Tensor[(?, 5), float32]) -> Tensor[(?, 16), float32] {
  nn.dense(%x, meta[relay.Constant][w16])
}

def @loop(%x: Tensor[(?, 5), float32], %n: int32) -> Tensor[(?, 16), float32] {
  if (less(%n, 1)) {
    @project(%x)
  } else {
    @loop(%x, subtract(%n, 1))
  }
}

def @main(%x: Tensor[(?, 5), float32]) {
  let %f = fn (%y: Tensor[(?, 5), float32]) { nn.dense(%y, meta[relay.Constant][w48]) };
  (nn.dense(%x, meta[relay.Constant][w32]), @loop(%x, 2), %f(%x))
})",
                                         &params);
  std::map<int64_t, bool> repeated_by_units;
  PackDenseWeights(module,
                   [&](const ir::TensorTypeNode&, const ir::TensorTypeNode& weight, bool repeated) {
                     repeated_by_units[weight.shape[0].value()] = repeated;
                     return false;
                   });
  EXPECT_EQ(repeated_by_units, (std::map<int64_t, bool>{{16, true}, {32, false}, {48, true}}));
}

// The packed program compiled and run on the VM (the runtime's packed
// kernel) gives the unpacked program's values, on a length that leaves a
// partial row tile, with a bias and a reduction of two depth slices.
TEST(PackDenseWeights, PackedProgramRunsOnTheVm) {
  const text::ParamMap params{{"w", ExactValues({48, 300}, 1)}, {"b", ExactValues({48}, 2)}};
  const ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(?, 300), float32]) {
  tanh(gelu(add(nn.dense(%x, meta[relay.Constant][w]), meta[relay.Constant][b])))
})",
                                         &params);
  backend::CompileOptions options;
  options.kernels = "builtin";
  const vm::Executable executable = backend::Compile(PackDenseWeights(module, kAlways), options);
  // The gelu runs in the packed kernel: no kernel of its own.
  const std::string kernels = vm::KernelTableToString(executable);
  EXPECT_THAT(kernels, ::testing::HasSubstr("nn.contrib_dense_pack"));
  EXPECT_THAT(kernels, ::testing::Not(::testing::HasSubstr("gelu")));
  const Tensor x = ExactValues({7, 300}, 4);
  vm::VirtualMachine machine(executable);
  const Tensor got = machine.Invoke("main", {x}).as<TensorNode>();
  const Tensor want = eval::Evaluate(module, "main", {x}).as<TensorNode>();
  ASSERT_EQ(got->shape(), want->shape());
  for (int64_t i = 0; i < want->numel(); ++i) {
    EXPECT_NEAR(got->GetAsDouble(i), want->GetAsDouble(i), 1e-6) << "element " << i;
  }
}

}  // namespace
}  // namespace nimble::transform
