// The extent switch: which of its two kernels runs at each size, its errors
// for a dimension that is not there, and a malformed switch in an
// executable refused with the primitive named.
#include "nimble/vm/extent_switch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "nimble/vm/dlpack.h"
#include "nimble/vm/error.h"
#include "nimble/vm/vm.h"
#include "tests/error_of.h"

namespace nimble::vm {
namespace {

using ::testing::HasSubstr;

// Writes `value` into its last argument, an int64 scalar.
template <int64_t value>
int Write(void*, DLTensor* const* args, int32_t num_args) {
  *static_cast<int64_t*>(args[num_args - 1]->data) = value;
  return 0;
}

Attrs SwitchAttrs(int64_t below, int64_t from, int64_t arg, int64_t axis, int64_t extent) {
  Attrs attrs;
  attrs.Set("below", below);
  attrs.Set("from", from);
  attrs.Set("arg", arg);
  attrs.Set("axis", axis);
  attrs.Set("extent", extent);
  return attrs;
}

const std::vector<Kernel> kTwoKernels = {Kernel{"small", Write<1>, nullptr},
                                         Kernel{"large", Write<2>, nullptr}};

// Which kernel the switch calls on a [3, rows] input.
int64_t Chosen(const Kernel& kernel, int64_t rows) {
  const Tensor input = TensorNode::Empty({3, rows}, DataType::Float32());
  const Tensor output = TensorNode::Empty({}, DataType::Int64());
  DLTensor in = AsDLTensor(input), out = AsDLTensor(output);
  DLTensor* args[] = {&in, &out};
  kernel(args, 2);
  return *output->data<int64_t>();
}

TEST(ExtentSwitchTest, TheLargeKernelRunsFromTheExtentOn) {
  const Kernel kernel = BindExtentSwitch(SwitchAttrs(0, 1, 0, 1, 128), kTwoKernels, {false, false});
  EXPECT_EQ(kernel.name, "small, from 128 large");
  EXPECT_EQ(Chosen(kernel, 0), 1);
  EXPECT_EQ(Chosen(kernel, 127), 1);
  EXPECT_EQ(Chosen(kernel, 128), 2);
  EXPECT_EQ(Chosen(kernel, 4096), 2);
}

TEST(ExtentSwitchTest, AMissingDimensionIsAKernelError) {
  const Kernel kernel = BindExtentSwitch(SwitchAttrs(0, 1, 0, 2, 128), kTwoKernels, {false, false});
  EXPECT_THAT(ErrorOf([&] { Chosen(kernel, 5); }),
              HasSubstr("argument 0 has no dimension 2 to choose a kernel by"));
}

TEST(ExtentSwitchTest, BadAttributesAreNamed) {
  EXPECT_THAT(ErrorOf([] {
                BindExtentSwitch(SwitchAttrs(0, 2, 0, 0, 8), kTwoKernels, {false, false});
              }),
              HasSubstr("'from' is 2, not the index of a kernel"));
  EXPECT_THAT(ErrorOf([] {
                BindExtentSwitch(SwitchAttrs(0, 1, 0, 0, 8), kTwoKernels, {true, false});
              }),
              HasSubstr("'below' is 0, not the index of a kernel"));
  EXPECT_THAT(ErrorOf([] {
                BindExtentSwitch(SwitchAttrs(0, 1, -1, 0, 8), kTwoKernels, {false, false});
              }),
              HasSubstr("'arg' is negative (-1)"));
  Attrs missing;
  missing.Set("below", int64_t{0});
  EXPECT_THAT(ErrorOf([&] {
                BindExtentSwitch(missing, kTwoKernels, {false, false});
              }),
              HasSubstr("from"));
}

TEST(ExtentSwitchTest, AnExecutableWithABadSwitchIsRefusedNamingIt) {
  Executable executable;
  executable.functions.push_back(VMFunction{"main", 0, 1, {Instruction::Ret(0)}});
  executable.primitives.push_back(Primitive{"write1", {}});
  executable.primitives.push_back(Primitive{kExtentSwitch, SwitchAttrs(0, 1, 0, 0, 8)});
  VMOptions options;
  options.extra_kernels["write1"] = [](const Attrs&) {
    return Kernel{"write1", Write<1>, nullptr};
  };
  EXPECT_THAT(ErrorOf([&] { VirtualMachine machine(executable, options); }),
              HasSubstr("primitive 1 'vm.extent_switch': vm.extent_switch: 'from' is 1, not the "
                        "index of a kernel"));
}

}  // namespace
}  // namespace nimble::vm
