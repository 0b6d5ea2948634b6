// Run-time errors leak nothing. This suite is linked with AddressSanitizer,
// whose leak checker fails the run at exit if anything allocated while the
// VM raised an error (frames, registers, tensors half computed, storage from
// the pool) is never freed. Each program runs from source through the whole
// compile pipeline, fails several times in one VM, and then the same VM must
// still run correct inputs.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "nimble/compiler/backend/pipeline.h"
#include "nimble/compiler/text/parser.h"
#include "nimble/compiler/typing/type_infer.h"
#include "nimble/vm/error.h"
#include "nimble/vm/vm.h"

namespace nimble {
namespace {

vm::Executable CompileProgram(const std::string& name) {
  const std::string path = std::string(NIMBLE_SOURCE_DIR) + "/tests/programs/" + name + ".relay";
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  ir::IRModule module = text::ParseModule(text.str(), path);
  typing::InferTypes(module);
  return backend::Compile(module, {.source_name = path});
}

Tensor Floats(const Shape& shape) {
  Tensor tensor = TensorNode::Empty(shape, DataType::Float32());
  for (int64_t i = 0; i < tensor->numel(); ++i) tensor->SetFromDouble(i, 0.5 * i);
  return tensor;
}

// Runs `args` three times, each must fail with `message`; then `good` must run.
void ExpectErrorsThenSuccess(const std::string& program, const std::vector<Ref<Object>>& args,
                             const std::string& message, const std::vector<Ref<Object>>& good) {
  vm::VirtualMachine machine(CompileProgram(program));
  for (int run = 0; run < 3; ++run) {
    try {
      machine.Invoke("main", args);
      ADD_FAILURE() << program << ": expected an error containing " << message;
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(message), std::string::npos) << error.what();
    }
  }
  EXPECT_NO_THROW(machine.Invoke("main", good));
}

TEST(VmErrorLeakTest, ShapeMismatchAtRunTime) {
  ExpectErrorsThenSuccess("runtime_shape_mismatch", {Floats({3, 2}), Floats({4, 2})},
                          "runtime_shape_mismatch.relay:4:3: ", {Floats({3, 2}), Floats({3, 2})});
}

TEST(VmErrorLeakTest, ErrorInsideACalledFunction) {
  ExpectErrorsThenSuccess("error_in_callee", {Floats({2}), Floats({3})},
                          "error_in_callee.relay:", {Floats({3}), Floats({3})});
}

TEST(VmErrorLeakTest, NonExhaustiveMatch) {
  vm::VirtualMachine machine(CompileProgram("incomplete_match"));
  for (int run = 0; run < 3; ++run) {
    try {
      machine.Invoke("main", {TensorNode::Scalar(DataType::Float32(), 1.0)});
      ADD_FAILURE() << "expected a non-exhaustive match";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("non-exhaustive match in @head"), std::string::npos)
          << error.what();
    }
  }
}

TEST(VmErrorLeakTest, BadArgumentsAtEntry) {
  ExpectErrorsThenSuccess("runtime_shape_mismatch", {Floats({3, 3}), Floats({3, 2})},
                          "@main: argument 0 (%x): expected Tensor[(?, 2), float32]",
                          {Floats({1, 2}), Floats({1, 2})});
  ExpectErrorsThenSuccess("runtime_shape_mismatch", {Floats({3, 2})}, "takes 2 arguments, got 1",
                          {Floats({0, 2}), Floats({0, 2})});
  ExpectErrorsThenSuccess("runtime_shape_mismatch",
                          {TensorNode::Empty({3, 2}, DataType::Int32()), Floats({3, 2})},
                          "expected Tensor[(?, 2), float32], got Tensor[(3, 2), int32]",
                          {Floats({2, 2}), Floats({2, 2})});
}

}  // namespace
}  // namespace nimble
