// Generated kernels end to end: programs compiled with kernels="generated"
// run in the VM from the executable's embedded kernel library and give the
// values of the same program on the runtime's built-in kernels (exactly for
// exact ops, to the code generator's documented accuracy for the
// transcendental approximations); dynamic shapes go through the generated
// shape functions, including their run-time broadcast checks.
#include "nimble/compiler/backend/primitive_kernels.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "nimble/compiler/backend/pipeline.h"
#include "nimble/compiler/text/parser.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/error.h"
#include "nimble/vm/vm.h"
#include "tests/error_of.h"

namespace nimble::backend {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

// Relative error the generated float32 approximations stay within (exp,
// tanh, sigmoid, erf: a few ulps; docs/codegen.md).
constexpr double kApproxTolerance = 2e-6;

vm::Executable CompileText(const std::string& text, const std::string& kernels,
                           bool fuse_ops = true) {
  ir::IRModule module = text::ParseModule(text, "test.relay");
  typing::InferTypes(module);
  return Compile(module, {.fuse_ops = fuse_ops, .kernels = kernels});
}

Tensor Random(const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-3.0f, 3.0f);
  std::vector<float> values(static_cast<size_t>(ShapeNumel(shape)));
  for (float& value : values) value = uniform(rng);
  return TensorNode::FromVector<float>(shape, DataType::Float32(), values);
}

Tensor RunMain(const vm::Executable& executable, const std::vector<Tensor>& args) {
  vm::VirtualMachine machine(executable);
  std::vector<Ref<Object>> objects(args.begin(), args.end());
  Ref<Object> result = machine.Invoke("main", objects);
  return Ref<TensorNode>(dynamic_cast<TensorNode*>(result.get()));
}

void ExpectClose(const Tensor& expected, const Tensor& actual, double tolerance) {
  ASSERT_EQ(expected->TypeString(), actual->TypeString());
  for (int64_t i = 0; i < expected->numel(); ++i) {
    const double want = expected->GetAsDouble(i);
    EXPECT_NEAR(actual->GetAsDouble(i), want, tolerance * std::max(1.0, std::fabs(want)))
        << "element " << i;
  }
}

// The same program on built-in and on generated kernels, fused and unfused.
void ExpectGeneratedMatchesBuiltin(const std::string& text, const std::vector<Tensor>& args,
                                   double tolerance) {
  const Tensor expected = RunMain(CompileText(text, "builtin"), args);
  for (bool fuse_ops : {true, false}) {
    SCOPED_TRACE(fuse_ops ? "fused" : "unfused");
    const vm::Executable generated = CompileText(text, "generated", fuse_ops);
    ASSERT_FALSE(generated.kernel_library.empty()) << vm::KernelTableToString(generated);
    ExpectClose(expected, RunMain(generated, args), tolerance);
  }
}

constexpr const char* kElementwise = R"(#[version = "0.0.5"]
def @main(%x: Tensor[(?, 5), float32], %y: Tensor[(1, 5), float32]) -> Tensor[(?, 5), float32] {
  multiply(tanh(add(%x, %y)), sigmoid(%x))
}
)";

TEST(PrimitiveKernelsTest, ElementwiseOpsOnSymbolicRowsMatchBuiltinKernels) {
  for (int64_t rows : {0, 1, 3, 17}) {
    SCOPED_TRACE("rows " + std::to_string(rows));
    ExpectGeneratedMatchesBuiltin(kElementwise, {Random({rows, 5}, 1), Random({1, 5}, 2)},
                                  kApproxTolerance);
  }
}

TEST(PrimitiveKernelsTest, KernelTableNamesGeneratedKernelsAndTheirShapeFunctions) {
  EXPECT_EQ(vm::KernelTableToString(CompileText(kElementwise, "generated")),
            "kernel[0] shape_func.fused_add_tanh_sigmoid_multiply_0: generated shape function, "
            "fuses add+tanh+sigmoid+multiply, (?, 5) float32, (1, 5) float32 -> (?, 5) float32\n"
            "kernel[1] fused_add_tanh_sigmoid_multiply_0: generated, fuses "
            "add+tanh+sigmoid+multiply, (?, 5) float32, (1, 5) float32 -> (?, 5) float32\n");
  const std::string unfused =
      vm::KernelTableToString(CompileText(kElementwise, "generated", /*fuse_ops=*/false));
  EXPECT_THAT(unfused, HasSubstr("fused_add_0: generated, fuses add, (?, 5) float32, (1, 5) "
                                 "float32 -> (?, 5) float32"));
  EXPECT_THAT(unfused, HasSubstr("shape_func.fused_add_0: generated shape function, fuses add"));
  EXPECT_THAT(vm::KernelTableToString(CompileText(kElementwise, "builtin")),
              HasSubstr("] add: built-in"));
}

TEST(PrimitiveKernelsTest, ExactOpsAreBitExact) {
  constexpr const char* kProgram = R"(#[version = "0.0.5"]
def @main(%x: Tensor[(?, 7), float32], %y: Tensor[(7), float32]) -> Tensor[(?, 7), float32] {
  where(greater(%x, %y), maximum(%x, %y), nn.relu(subtract(%x, multiply(%y, 2f))))
}
)";
  ExpectGeneratedMatchesBuiltin(kProgram, {Random({9, 7}, 3), Random({7}, 4)}, 0.0);
}

TEST(PrimitiveKernelsTest, ReductionsAndNormalisationMatchBuiltinKernels) {
  constexpr const char* kProgram = R"(#[version = "0.0.5"]
def @main(%x: Tensor[(?, 33), float32], %g: Tensor[(33), float32], %b: Tensor[(33), float32])
    -> Tensor[(?, 33), float32] {
  nn.softmax(nn.layer_norm(%x, %g, %b, axis=-1, epsilon=1e-5f), axis=-1)
}
)";
  ExpectGeneratedMatchesBuiltin(kProgram, {Random({6, 33}, 5), Random({33}, 6), Random({33}, 7)},
                                1e-5);
}

TEST(PrimitiveKernelsTest, DenseMatchesBuiltinKernel) {
  constexpr const char* kProgram = R"(#[version = "0.0.5"]
def @main(%x: Tensor[(?, 40), float32], %w: Tensor[(24, 40), float32]) -> Tensor[(?, 24), float32] {
  nn.dense(%x, %w)
}
)";
  for (int64_t rows : {1, 5}) {
    ExpectGeneratedMatchesBuiltin(kProgram, {Random({rows, 40}, 8), Random({24, 40}, 9)}, 1e-5);
  }
}

TEST(PrimitiveKernelsTest, ShapeFunctionChecksBroadcastAtRunTime) {
  constexpr const char* kProgram = R"(#[version = "0.0.5"]
def @main(%x: Tensor[(?, 3), float32], %y: Tensor[(?, 3), float32]) -> Tensor[(?, 3), float32] {
  add(%x, %y)
}
)";
  const vm::Executable executable = CompileText(kProgram, "generated");
  ExpectClose(RunMain(CompileText(kProgram, "builtin"), {Random({4, 3}, 1), Random({1, 3}, 2)}),
              RunMain(executable, {Random({4, 3}, 1), Random({1, 3}, 2)}), 0.0);
  EXPECT_THAT(ErrorOf([&] {
                RunMain(executable, {Random({4, 3}, 1), Random({2, 3}, 2)});
              }),
              HasSubstr("add"));
}

// Under auto, nn.dense runs the kernel measured fastest (kernel_tuning_test)
// and stays out of fusion; the ops around it are generated.
TEST(PrimitiveKernelsTest, AutoKeepsDenseOutOfFusion) {
  constexpr const char* kProgram = R"(#[version = "0.0.5"]
def @main(%x: Tensor[(2, 4), float32], %w: Tensor[(3, 4), float32]) -> Tensor[(2, 3), float32] {
  tanh(nn.dense(%x, %w))
}
)";
  const vm::Executable executable = CompileText(kProgram, "auto");
  EXPECT_THAT(
      vm::KernelTableToString(executable),
      AllOf(HasSubstr(": generated, fuses tanh, (2, 3) float32"), Not(HasSubstr("nn.dense+"))));
  const std::vector<Tensor> args = {Random({2, 4}, 1), Random({3, 4}, 2)};
  ExpectClose(RunMain(CompileText(kProgram, "builtin"), args), RunMain(executable, args),
              kApproxTolerance);
  EXPECT_THAT(ErrorOf([] { CompileText(kProgram, "fast"); }), HasSubstr("unknown kernel choice"));
}

// The primitive function @main calls.
ir::Function PrimitiveOf(const std::string& text) {
  ir::IRModule module = text::ParseModule(text, "test.relay");
  typing::InferTypes(module);
  const ir::Expr& body = module->Lookup("main")->body;
  EXPECT_EQ(body->kind, ir::ExprKind::kCall);
  const ir::Expr& callee = static_cast<const ir::CallNode&>(*body).callee;
  EXPECT_EQ(callee->kind, ir::ExprKind::kFunction);
  return callee.as<ir::FunctionNode>();
}

// A form as text: "8" for a constant, "in2.0" for input 2's dimension 0,
// candidates joined by '|', "?" for none.
std::vector<std::string> FormsText(const ir::FunctionNode& primitive) {
  const auto forms = OutputDimFormsOf(primitive);
  if (!forms) return {"none"};
  std::vector<std::string> outputs;
  for (const std::vector<transform::DimForm>& output : *forms) {
    std::string text;
    for (const transform::DimForm& form : output) {
      std::string dim;
      for (const transform::DimSource& source : form) {
        dim += (dim.empty() ? "" : "|") + (source.constant ? std::to_string(source.value)
                                                           : "in" + std::to_string(source.input) +
                                                                 "." + std::to_string(source.axis));
      }
      text += (text.empty() ? "" : ", ") + (dim.empty() ? "?" : dim);
    }
    outputs.push_back("(" + text + ")");
  }
  return outputs;
}

// Where each output dimension comes from: what share-shapes numbers a shape
// function's outputs by.
TEST(OutputDimFormsTest, ConstantsInputDimensionsAndBroadcasts) {
  // A reshape's -1 is the element count over the other sizes: simplified, the
  // input's dimension itself.
  EXPECT_EQ(FormsText(*PrimitiveOf(R"(
def @main(%x: Tensor[(?, 8), float32]) {
  %0 = fn (%p0: Tensor[(?, 8), float32], Primitive=1) {
    transpose(reshape(%p0, newshape=[-1, 2, 4]), axes=[2, 0, 1])
  };
  %0(%x)
})")),
            std::vector<std::string>{"(4, in0.0, 2)"});
  // Broadcasting takes either operand's dimension.
  EXPECT_EQ(FormsText(*PrimitiveOf(R"(
def @main(%x: Tensor[(?, 8), float32], %y: Tensor[(?, 8), float32]) {
  %0 = fn (%p0: Tensor[(?, 8), float32], %p1: Tensor[(?, 8), float32], Primitive=1) {
    add(%p0, %p1)
  };
  %0(%x, %y)
})")),
            std::vector<std::string>{"(in1.0|in0.0, 8)"});
  // A sum of dimensions is neither; inputs count a tuple's tensors each.
  EXPECT_EQ(FormsText(*PrimitiveOf(R"(
def @main(%x: Tensor[(?, 8), float32], %y: Tensor[(?, 8), float32], %z: Tensor[(?, 4), float32]) {
  %0 = fn (%p0: (Tensor[(?, 8), float32], Tensor[(?, 8), float32]), %p1: Tensor[(?, 4), float32], Primitive=1) {
    (concatenate(%p0), transpose(%p1))
  };
  %0((%x, %y), %z)
})")),
            (std::vector<std::string>{"(?, 8)", "(4, in2.0)"}));
}

// No composition (nn.contrib_dense_pack runs the runtime's kernel), or a
// shape function that reads values (argwhere's bound): nothing is known.
TEST(OutputDimFormsTest, UnknownWithoutAComputeDefinitionOrForValueShapes) {
  EXPECT_EQ(FormsText(*PrimitiveOf(R"(
def @main(%x: Tensor[(?, 8), float32], %w: Tensor[(1, 8, 16), float32]) {
  %0 = fn (%p0: Tensor[(?, 8), float32], %p1: Tensor[(1, 8, 16), float32], Primitive=1) {
    nn.contrib_dense_pack(%p0, %p1)
  };
  %0(%x, %w)
})")),
            std::vector<std::string>{"none"});
  EXPECT_EQ(FormsText(*PrimitiveOf(R"(
def @main(%c: Tensor[(?,), bool]) {
  %0 = fn (%p0: Tensor[(?,), bool], Primitive=1) { argwhere(%p0) };
  %0(%c)
})")),
            std::vector<std::string>{"none"});
}

}  // namespace
}  // namespace nimble::backend
