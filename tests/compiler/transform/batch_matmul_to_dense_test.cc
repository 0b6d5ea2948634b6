// BatchMatMulToDense: text in, text out; the evaluator's values before and
// after (exact: small integers and halves); the calls it leaves alone and
// what it asks the packing predicate; and the rewritten program on the VM.
#include "nimble/compiler/transform/batch_matmul_to_dense.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nimble/compiler/backend/pipeline.h"
#include "nimble/vm/vm.h"
#include "tests/compiler/transform/normalize_test_util.h"

namespace nimble::transform {
namespace {

using testing::ExactValues;
using testing::ExpectProgram;
using testing::ExpectSameResult;
using testing::F32;
using testing::ParseTyped;

const PackDensePredicate kAlways = [](const ir::TensorTypeNode&, const ir::TensorTypeNode&, bool) {
  return true;
};

// The same values as `weight` [b, n, k], typed [b * n, k].
Tensor Stacked(const Tensor& weight) {
  const Shape& shape = weight->shape();
  std::vector<float> values(weight->data<float>(), weight->data<float>() + weight->numel());
  return F32({shape[0] * shape[1], shape[2]}, values);
}

TEST(BatchMatMulToDense, AConstantEitherSideBecomesOneDense) {
  const text::ParamMap params{{"w", ExactValues({2, 8, 5}, 1)}};
  const ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(1, ?, 5), float32]) {
  (nn.batch_matmul(%x, meta[relay.Constant][w]), nn.batch_matmul(meta[relay.Constant][w], %x))
})",
                                         &params);
  const ir::IRModule rewritten = BatchMatMulToDense(module, kAlways);
  const text::ParamMap stacked{{"w", Stacked(params.at("w"))}};
  ExpectProgram(rewritten, R"(
def @main(%x: Tensor[(1, ?, 5), float32]) {
  (transpose(reshape(nn.dense(%x, meta[relay.Constant][w]), newshape=[-1, 2, 8]), axes=[1, 0, 2]),
   transpose(reshape(nn.dense(%x, meta[relay.Constant][w]), newshape=[-1, 2, 8]), axes=[1, 2, 0]))
})",
                &stacked);
  // One stacked constant serves both calls.
  const auto& tuple = static_cast<const ir::TupleNode&>(*rewritten->Lookup("main")->body);
  auto weight_of = [](const ir::Expr& transpose) {
    const auto& reshape =
        static_cast<const ir::CallNode&>(*static_cast<const ir::CallNode&>(*transpose).args[0]);
    return static_cast<const ir::CallNode&>(*reshape.args[0]).args[1].get();
  };
  EXPECT_EQ(weight_of(tuple.fields[0]), weight_of(tuple.fields[1]));
  for (int64_t length : {0, 1, 6}) {
    ExpectSameResult(module, rewritten, {ExactValues({1, length, 5}, 2)});
  }
}

TEST(BatchMatMulToDense, ABatchOfOneWeightNeedsNoTranspose) {
  const text::ParamMap params{{"w", ExactValues({1, 16, 5}, 1)}};
  const ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(1, 2, 5), float32]) {
  nn.batch_matmul(%x, meta[relay.Constant][w])
})",
                                         &params);
  const ir::IRModule rewritten = BatchMatMulToDense(module, kAlways);
  const text::ParamMap stacked{{"w", Stacked(params.at("w"))}};
  ExpectProgram(rewritten, R"(
def @main(%x: Tensor[(1, 2, 5), float32]) {
  nn.dense(%x, meta[relay.Constant][w])
})",
                &stacked);
  ExpectSameResult(module, rewritten, {ExactValues({1, 2, 5}, 3)});
}

TEST(BatchMatMulToDense, LeavesOtherProducts) {
  const text::ParamMap params{{"w", ExactValues({2, 8, 5}, 1)},
                              {"t", ExactValues({2, 5, 8}, 2)},
                              {"w12", ExactValues({3, 4, 5}, 3)}};
  // Two parameters; data with a batch of 2 (not one product); the weight
  // read transposed (transpose_b=False); the data transposed; two
  // constants; 3 x 4 columns (not whole blocks of 16, so never packed).
  const std::string program = R"(
def @main(%x: Tensor[(1, 2, 5), float32], %y: Tensor[(2, 8, 5), float32],
          %x2: Tensor[(2, 2, 5), float32], %xt: Tensor[(1, 5, 2), float32]) {
  (nn.batch_matmul(%x, %y), nn.batch_matmul(%x2, meta[relay.Constant][w]),
   nn.batch_matmul(%x, meta[relay.Constant][t], transpose_b=False),
   nn.batch_matmul(%xt, meta[relay.Constant][w], transpose_a=True),
   nn.batch_matmul(meta[relay.Constant][w], meta[relay.Constant][w]),
   nn.batch_matmul(%x, meta[relay.Constant][w12]))
})";
  const ir::IRModule module = ParseTyped(program, &params);
  ExpectProgram(BatchMatMulToDense(module, kAlways), program, &params);
}

// The packing predicate decides: it is asked about the dense the call would
// become, and a refusal leaves the call as it is.
TEST(BatchMatMulToDense, AsksWhetherTheDenseWouldBePacked) {
  const text::ParamMap params{{"w", ExactValues({2, 8, 5}, 1)}};
  const std::string program = R"(
def @main(%x: Tensor[(1, ?, 5), float32]) {
  nn.batch_matmul(meta[relay.Constant][w], %x)
})";
  const ir::IRModule module = ParseTyped(program, &params);
  std::vector<std::string> asked;
  const ir::IRModule refused = BatchMatMulToDense(
      module, [&](const ir::TensorTypeNode& data, const ir::TensorTypeNode& weight, bool repeated) {
        asked.push_back(ir::TypeToString(ir::RefOf(&data)) + " " +
                        ir::TypeToString(ir::RefOf(&weight)) + (repeated ? " repeated" : " once"));
        return false;
      });
  EXPECT_THAT(asked,
              ::testing::ElementsAre("Tensor[(1, ?, 5), float32] Tensor[(16, 5), float32] once"));
  ExpectProgram(refused, program, &params);
}

// The rewritten program compiled and run on the VM: the projection runs as
// a dense (only the product of two computed values stays a batch_matmul) and
// gives the evaluator's values on the original program. The pipeline itself
// rewrites nothing where the dense would not be packed (built-in kernels
// measure nothing), so the program keeps its two batch_matmul kernels there.
TEST(BatchMatMulToDense, RewrittenProgramRunsOnTheVm) {
  const text::ParamMap params{{"w", ExactValues({2, 32, 24}, 1)},
                              {"b", ExactValues({2, 1, 32}, 2)}};
  const ir::IRModule module = ParseTyped(R"(
def @main(%x: Tensor[(1, ?, 24), float32]) {
  let %q = add(nn.batch_matmul(%x, meta[relay.Constant][w]), meta[relay.Constant][b]);
  nn.batch_matmul(%q, %q)
})",
                                         &params);
  backend::CompileOptions options;
  options.kernels = "builtin";
  const std::string unchanged = vm::KernelTableToString(backend::Compile(module, options));
  EXPECT_EQ(unchanged.find("nn.dense"), std::string::npos) << unchanged;
  const vm::Executable executable = backend::Compile(BatchMatMulToDense(module, kAlways), options);
  const std::string kernels = vm::KernelTableToString(executable);
  EXPECT_THAT(kernels, ::testing::HasSubstr("] nn.dense: built-in"));
  EXPECT_THAT(kernels, ::testing::HasSubstr("] nn.batch_matmul: built-in"));
  EXPECT_EQ(kernels.find("] nn.batch_matmul"), kernels.rfind("] nn.batch_matmul")) << kernels;
  for (int64_t length : {1, 13}) {
    const Tensor x = ExactValues({1, length, 24}, 4);
    vm::VirtualMachine machine(executable);
    const Tensor got = machine.Invoke("main", {x}).as<TensorNode>();
    const Tensor want = eval::Evaluate(module, "main", {x}).as<TensorNode>();
    ASSERT_EQ(got->shape(), want->shape());
    for (int64_t i = 0; i < want->numel(); ++i) {
      EXPECT_NEAR(got->GetAsDouble(i), want->GetAsDouble(i), 1e-4) << "element " << i;
    }
  }
}

}  // namespace
}  // namespace nimble::transform
