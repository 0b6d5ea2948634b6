#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <new>
#include <thread>

#include "nimble/vm/adt.h"
#include "nimble/vm/allocator.h"
#include "nimble/vm/dlpack.h"
#include "nimble/vm/error.h"
#include "nimble/vm/npy.h"
#include "nimble/vm/vm.h"
#include "tests/error_of.h"

// Counts heap allocations while `g_count_allocations` is set, to check that
// the interpreter's steady state allocates nothing.
namespace {
std::atomic<bool> g_count_allocations{false};
std::atomic<int64_t> g_allocations{0};
}  // namespace

void* operator new(size_t size) {
  if (g_count_allocations.load(std::memory_order_relaxed)) g_allocations.fetch_add(1);
  if (void* memory = std::malloc(size ? size : 1)) return memory;
  throw std::bad_alloc();
}
// Not inlined, so that GCC does not pair the free with a `new` it can see.
[[gnu::noinline]] void operator delete(void* memory) noexcept {
  std::free(memory);
}
[[gnu::noinline]] void operator delete(void* memory, size_t) noexcept {
  std::free(memory);
}

namespace nimble::vm {
namespace {

using I = Instruction;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr DataType kF32 = DataType::Float32();
constexpr DataType kI64 = DataType::Int64();
constexpr Device kCPU{DeviceType::kCPU, 0};

// ---- Test kernels, bound through VMOptions::extra_kernels ----

int64_t Numel(const DLTensor& tensor) {
  int64_t numel = 1;
  for (int32_t i = 0; i < tensor.ndim; ++i) numel *= tensor.shape[i];
  return numel;
}

// The most CPU bytes live seen by a kernel since the last reset.
size_t g_peak_live_bytes = 0;

size_t LiveBytes() {
  return GetAllocator(kCPU)->Stats().bytes_live;
}

// out = a op b elementwise, for tensors of one element count.
template <typename In, typename Out, typename Op>
int Elementwise(void*, DLTensor* const* args, int32_t num_args) {
  if (num_args != 3) {
    NimbleKernelSetError("elementwise kernels take 3 tensors");
    return 1;
  }
  const int64_t numel = Numel(*args[2]);
  if (Numel(*args[0]) != numel || Numel(*args[1]) != numel) {
    NimbleKernelSetError("element counts differ");
    return 1;
  }
  const In* a = static_cast<const In*>(args[0]->data);
  const In* b = static_cast<const In*>(args[1]->data);
  Out* out = static_cast<Out*>(args[2]->data);
  for (int64_t i = 0; i < numel; ++i) out[i] = static_cast<Out>(Op()(a[i], b[i]));
  g_peak_live_bytes = std::max(g_peak_live_bytes, LiveBytes());
  return 0;
}

int FailLoudly(void*, DLTensor* const*, int32_t) {
  NimbleKernelSetError("deliberate failure");
  return 1;
}

int FailSilently(void*, DLTensor* const*, int32_t) {
  return 5;
}

// Writes the CPU allocator's live bytes into its int64 output.
int WriteLiveBytes(void*, DLTensor* const* args, int32_t) {
  *static_cast<int64_t*>(args[0]->data) = static_cast<int64_t>(LiveBytes());
  return 0;
}

int Write42(void*, DLTensor* const* args, int32_t) {
  *static_cast<int64_t*>(args[0]->data) = 42;
  return 0;
}

int Sleep5ms(void*, DLTensor* const*, int32_t) {
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return 0;
}

// out = in * factor, with `factor` bound from the primitive's attributes.
int Scale(void* state, DLTensor* const* args, int32_t) {
  const float factor = *static_cast<const float*>(state);
  const float* in = static_cast<const float*>(args[0]->data);
  float* out = static_cast<float*>(args[1]->data);
  for (int64_t i = 0; i < Numel(*args[0]); ++i) out[i] = in[i] * factor;
  return 0;
}

KernelFactory Plain(NimbleKernelFunc func) {
  return [func](const Attrs&) { return Kernel{"", func, nullptr}; };
}

VMOptions TestOptions() {
  VMOptions options;
  options.extra_kernels = {
      {"add", Plain(Elementwise<float, float, std::plus<float>>)},
      {"add_i64", Plain(Elementwise<int64_t, int64_t, std::plus<int64_t>>)},
      {"sub_i64", Plain(Elementwise<int64_t, int64_t, std::minus<int64_t>>)},
      {"mul_i64", Plain(Elementwise<int64_t, int64_t, std::multiplies<int64_t>>)},
      {"less_i64", Plain(Elementwise<int64_t, bool, std::less<int64_t>>)},
      {"fail", Plain(FailLoudly)},
      {"fail_silent", Plain(FailSilently)},
      {"live_bytes", Plain(WriteLiveBytes)},
      {"write42", Plain(Write42)},
      {"sleep5ms", Plain(Sleep5ms)},
      {"scale",
       [](const Attrs& attrs) {
         return Kernel{"scale", Scale,
                       std::make_shared<float>(static_cast<float>(attrs.GetFloat("factor")))};
       }},
  };
  return options;
}

// ---- Building executables ----

Executable MakeExecutable(std::vector<VMFunction> functions,
                          std::vector<std::string> primitives = {}) {
  Executable exe;
  exe.functions = std::move(functions);
  for (std::string& name : primitives) exe.primitives.push_back(Primitive{std::move(name), {}});
  return exe;
}

// `storage` = a fresh storage for one tensor; `dst` = that tensor.
void AllocOutput(std::vector<Instruction>& code, RegName storage, RegName dst, const Shape& shape,
                 DataType dtype) {
  code.push_back(
      I::AllocStorage(kNoRegister, ShapeNumel(shape) * dtype.bytes(), 64, dtype, 0, storage));
  code.push_back(I::AllocTensor(storage, kNoRegister, 0, shape, dtype, dst));
}

Tensor I64(int64_t value) {
  return TensorNode::Scalar<int64_t>(kI64, value);
}

Tensor F32(const Shape& shape, const std::vector<float>& values) {
  return TensorNode::FromVector<float>(shape, kF32, values);
}

Tensor Shape1D(const std::vector<int64_t>& dims) {
  return TensorNode::FromVector<int64_t>({static_cast<int64_t>(dims.size())}, kI64, dims);
}

int64_t ScalarOf(const Ref<Object>& value) {
  const Tensor tensor = value.as<TensorNode>();
  EXPECT_TRUE(tensor);
  return tensor ? tensor->GetAsInt64(0) : -1;
}

std::vector<float> ValuesOf(const Ref<Object>& value) {
  const Tensor tensor = value.as<TensorNode>();
  EXPECT_TRUE(tensor);
  if (!tensor) return {};
  return std::vector<float>(tensor->data<float>(), tensor->data<float>() + tensor->numel());
}

// sum_below(n) = 0 + 1 + ... + (n - 1), as a loop of If and Goto.
// Primitives: 0 less_i64, 1 add_i64.
VMFunction SumBelow() {
  std::vector<Instruction> code = {
      I::LoadConsti(0, 1),  // i
      I::LoadConsti(0, 2),  // acc
      I::LoadConsti(1, 5),
  };
  AllocOutput(code, 4, 3, {}, DataType::Bool());    // pc 3, 4
  code.push_back(I::InvokePacked(0, {1, 0}, {3}));  // pc 5: i < n
  code.push_back(I::If(3, kNoRegister, 1, 1, 10));  // pc 6: exit to pc 16
  AllocOutput(code, 4, 6, {}, kI64);                // pc 7, 8
  code.push_back(I::InvokePacked(1, {2, 1}, {6}));  // pc 9: acc + i
  code.push_back(I::Move(6, 2));                    // pc 10
  AllocOutput(code, 4, 7, {}, kI64);                // pc 11, 12
  code.push_back(I::InvokePacked(1, {1, 5}, {7}));  // pc 13: i + 1
  code.push_back(I::Move(7, 1));                    // pc 14
  code.push_back(I::Goto(-12));                     // pc 15: to pc 3
  code.push_back(I::Ret(2));                        // pc 16
  return VMFunction{"sum_below", 1, 8, std::move(code)};
}

// ---- Instructions ----

TEST(VirtualMachineTest, MoveAndRetReturnTheArgument) {
  VirtualMachine vm(MakeExecutable({VMFunction{"main", 1, 2, {I::Move(0, 1), I::Ret(1)}}}));
  const Tensor input = I64(3);
  EXPECT_EQ(vm.Invoke("main", {input}), Ref<Object>(input));
}

TEST(VirtualMachineTest, InvokePassesArgumentsInOrder) {
  // main(a, b) = second(b, a); second(x, y) = x.
  VirtualMachine vm(MakeExecutable({
      VMFunction{"main", 2, 3, {I::Invoke(1, {1, 0}, 2), I::Move(2, 0), I::Ret(0)}},
      VMFunction{"second", 2, 2, {I::Ret(0)}},
  }));
  const Tensor a = I64(1), b = I64(2);
  EXPECT_EQ(vm.Invoke("main", {a, b}), Ref<Object>(b));
}

TEST(VirtualMachineTest, InvokePackedCallsTheKernelOnAllocatedOutputs) {
  std::vector<Instruction> code;
  AllocOutput(code, 2, 3, {3}, kF32);
  code.push_back(I::InvokePacked(0, {0, 1}, {3}));
  code.push_back(I::Ret(3));
  VirtualMachine vm(MakeExecutable({VMFunction{"main", 2, 4, code}}, {"add"}), TestOptions());
  EXPECT_THAT(ValuesOf(vm.Invoke("main", {F32({3}, {1, 2, 3}), F32({3}, {10, 20, 30})})),
              ElementsAre(11, 22, 33));
}

TEST(VirtualMachineTest, InvokePackedFlattensTupleArguments) {
  // main(pair, out): add(pair.0, pair.1; out) with the pair passed whole.
  VirtualMachine vm(
      MakeExecutable({VMFunction{"main", 2, 2, {I::InvokePacked(0, {0}, {1}), I::Ret(1)}}},
                     {"add"}),
      TestOptions());
  const Tensor out = TensorNode::Empty({2}, kF32);
  vm.Invoke("main", {MakeTuple({F32({2}, {1, 2}), F32({2}, {3, 4})}), out});
  EXPECT_THAT(ValuesOf(out), ElementsAre(4, 6));
}

TEST(VirtualMachineTest, InvokePackedBindsAttributes) {
  Executable exe =
      MakeExecutable({VMFunction{"main", 2, 2, {I::InvokePacked(0, {0}, {1}), I::Ret(1)}}});
  Attrs attrs;
  attrs.Set("factor", 2.5);
  exe.primitives.push_back(Primitive{"scale", attrs});
  VirtualMachine vm(exe, TestOptions());
  const Tensor out = TensorNode::Empty({2}, kF32);
  vm.Invoke("main", {F32({2}, {2, 4}), out});
  EXPECT_THAT(ValuesOf(out), ElementsAre(5, 10));
}

TEST(VirtualMachineTest, LoopWithIfAndGoto) {
  VirtualMachine vm(MakeExecutable({SumBelow()}, {"less_i64", "add_i64"}), TestOptions());
  EXPECT_EQ(ScalarOf(vm.Invoke("sum_below", {I64(5)})), 10);
  EXPECT_EQ(ScalarOf(vm.Invoke("sum_below", {I64(0)})), 0);
  EXPECT_EQ(ScalarOf(vm.Invoke("sum_below", {I64(100)})), 4950);
}

// fact(n) = n == 0 ? 1 : n * fact(n - 1), not a tail call.
// Primitives: 0 sub_i64, 1 mul_i64.
VMFunction Factorial() {
  std::vector<Instruction> code = {
      I::If(0, kNoRegister, 0, 1, 3),
      I::LoadConsti(1, 1),
      I::Ret(1),
      I::LoadConsti(1, 2),
  };
  AllocOutput(code, 3, 4, {}, kI64);
  code.push_back(I::InvokePacked(0, {0, 2}, {4}));
  code.push_back(I::Invoke(0, {4}, 5));
  AllocOutput(code, 3, 6, {}, kI64);
  code.push_back(I::InvokePacked(1, {0, 5}, {6}));
  code.push_back(I::Ret(6));
  return VMFunction{"fact", 1, 7, std::move(code)};
}

TEST(VirtualMachineTest, RecursionPushesAFramePerCall) {
  VirtualMachine vm(MakeExecutable({Factorial()}, {"sub_i64", "mul_i64"}), TestOptions());
  EXPECT_EQ(ScalarOf(vm.Invoke("fact", {I64(0)})), 1);
  EXPECT_EQ(ScalarOf(vm.Invoke("fact", {I64(10)})), 3628800);
  EXPECT_EQ(ScalarOf(vm.Invoke("fact", {I64(20)})), 2432902008176640000);
  EXPECT_EQ(vm.peak_call_depth(), 21u);
}

TEST(VirtualMachineTest, CallDepthIsLimited) {
  // forever(x) = { forever(x); x }: never a tail call.
  VMOptions options;
  options.max_call_depth = 50;
  VirtualMachine vm(
      MakeExecutable({VMFunction{"forever", 1, 2, {I::Invoke(0, {0}, 1), I::Ret(0)}}}), options);
  const std::string error = ErrorOf([&] { vm.Invoke("forever", {I64(1)}); });
  EXPECT_THAT(error, HasSubstr("call depth exceeds 50 frames"));
  EXPECT_THAT(error, HasSubstr("... 42 more frames"));
}

// count_down(i, acc) = i == 0 ? acc : count_down(i - 1, acc + i), a tail call.
// Primitives: 0 add_i64, 1 sub_i64.
VMFunction CountDown() {
  std::vector<Instruction> code = {
      I::If(0, kNoRegister, 0, 1, 2),
      I::Ret(1),
  };
  AllocOutput(code, 2, 3, {}, kI64);
  code.push_back(I::InvokePacked(0, {1, 0}, {3}));
  code.push_back(I::LoadConsti(1, 4));
  AllocOutput(code, 2, 5, {}, kI64);
  code.push_back(I::InvokePacked(1, {0, 4}, {5}));
  code.push_back(I::Invoke(0, {5, 3}, 6));
  code.push_back(I::Ret(6));
  return VMFunction{"count_down", 2, 7, std::move(code)};
}

TEST(VirtualMachineTest, TailCallsRunInConstantStackAndMemory) {
  VirtualMachine vm(MakeExecutable({CountDown()}, {"add_i64", "sub_i64"}), TestOptions());
  const size_t live_before = LiveBytes();
  g_peak_live_bytes = 0;
  EXPECT_EQ(ScalarOf(vm.Invoke("count_down", {I64(100000), I64(0)})), 5000050000);
  EXPECT_EQ(vm.peak_call_depth(), 1u);
  EXPECT_EQ(vm.register_stack_size(), 7u);
  EXPECT_LT(g_peak_live_bytes, live_before + 16 * 1024)
      << "the values of finished iterations are freed";
}

TEST(VirtualMachineTest, TailCallThroughAClosure) {
  // loop(self, i) = i == 0 ? i : self(self, i - 1); main(n) = loop(loop, n).
  std::vector<Instruction> loop = {I::If(1, kNoRegister, 0, 1, 2), I::Ret(1), I::LoadConsti(1, 2)};
  AllocOutput(loop, 3, 4, {}, kI64);
  loop.push_back(I::InvokePacked(0, {1, 2}, {4}));
  loop.push_back(I::InvokeClosure(0, {0, 4}, 5));
  loop.push_back(I::Ret(5));
  VirtualMachine vm(
      MakeExecutable(
          {VMFunction{"main",
                      1,
                      3,
                      {I::AllocClosure(1, {}, 1), I::InvokeClosure(1, {1, 0}, 2), I::Ret(2)}},
           VMFunction{"loop", 2, 6, loop}},
          {"sub_i64"}),
      TestOptions());
  EXPECT_EQ(ScalarOf(vm.Invoke("main", {I64(20000)})), 0);
  EXPECT_EQ(vm.peak_call_depth(), 1u);
}

TEST(VirtualMachineTest, ClosuresPassCapturedValuesFirst) {
  // sub(a, b) = a - b; main(x, y) = (fn(b) => sub(x, b))(y).
  std::vector<Instruction> sub;
  AllocOutput(sub, 2, 3, {}, kI64);
  sub.push_back(I::InvokePacked(0, {0, 1}, {3}));
  sub.push_back(I::Ret(3));
  VirtualMachine vm(
      MakeExecutable(
          {VMFunction{
               "main",
               2,
               4,
               {I::AllocClosure(1, {0}, 2), I::InvokeClosure(2, {1}, 3), I::Move(3, 0), I::Ret(0)}},
           VMFunction{"sub", 2, 4, sub},
           // make(x) returns the closure; apply(x, y) = make(x)(y).
           VMFunction{"make", 1, 2, {I::AllocClosure(1, {0}, 1), I::Ret(1)}},
           VMFunction{
               "apply", 2, 4, {I::Invoke(2, {0}, 2), I::InvokeClosure(2, {1}, 3), I::Ret(3)}},
           VMFunction{"bad_arity",
                      2,
                      4,
                      {I::AllocClosure(1, {0}, 2), I::InvokeClosure(2, {1, 1}, 3), I::Ret(3)}},
           VMFunction{"not_closure", 1, 2, {I::InvokeClosure(0, {}, 1), I::Ret(1)}}},
          {"sub_i64"}),
      TestOptions());
  EXPECT_EQ(ScalarOf(vm.Invoke("main", {I64(10), I64(3)})), 7);
  EXPECT_EQ(ScalarOf(vm.Invoke("apply", {I64(10), I64(4)})), 6);
  const Ref<Object> closure = vm.Invoke("make", {I64(1)});
  ASSERT_TRUE(closure.is<ClosureNode>());
  EXPECT_EQ(closure.as<ClosureNode>()->function_index(), 1);
  EXPECT_EQ(closure.as<ClosureNode>()->captured().size(), 1u);
  EXPECT_THAT(ErrorOf([&] {
                vm.Invoke("bad_arity", {I64(1), I64(2)});
              }),
              HasSubstr("closure of @sub takes 1 arguments, got 2"));
  EXPECT_THAT(ErrorOf([&] { vm.Invoke("not_closure", {I64(1)}); }),
              HasSubstr("the invoked value must be a closure, got a tensor of type "
                        "Tensor[(), int64] on cpu(0)"));
}

// classify(v) = match v { A(x) => x, B(_, y) => y } with a third tag unmatched.
Executable MatchExecutable() {
  Executable exe =
      MakeExecutable({VMFunction{"classify",
                                 1,
                                 3,
                                 {
                                     I::GetTag(0, 1),
                                     I::If(1, kNoRegister, 0, 1, 3),
                                     I::GetField(0, 0, 2),
                                     I::Ret(2),
                                     I::If(1, kNoRegister, 1, 1, 3),
                                     I::GetField(0, 1, 2),
                                     I::Ret(2),
                                     I::Fatal(0),
                                 }},
                      VMFunction{"pair", 2, 3, {I::AllocADT(0, {0, 1}, 2), I::Ret(2)}},
                      VMFunction{"tag_of_tensor", 1, 2, {I::GetTag(0, 1), I::Ret(1)}}});
  exe.messages = {"match at 4:3 is not exhaustive"};
  return exe;
}

TEST(VirtualMachineTest, AdtConstructionAndMatch) {
  VirtualMachine vm(MatchExecutable());
  const Tensor a = I64(1), b = I64(2);
  EXPECT_EQ(vm.Invoke("classify", {Make<ADTNode>(0, std::vector<Ref<Object>>{a})}), Ref<Object>(a));
  EXPECT_EQ(vm.Invoke("classify", {Make<ADTNode>(1, std::vector<Ref<Object>>{a, b})}),
            Ref<Object>(b));

  const ADT pair = vm.Invoke("pair", {a, b}).as<ADTNode>();
  ASSERT_TRUE(pair);
  EXPECT_EQ(pair->tag(), 0);
  EXPECT_EQ(pair->field(0), Ref<Object>(a));
  EXPECT_EQ(pair->field(1), Ref<Object>(b));
  EXPECT_EQ(vm.Invoke("classify", {pair}), Ref<Object>(a)) << "tuples have tag 0";
}

TEST(VirtualMachineTest, NonExhaustiveMatchReachesFatal) {
  VirtualMachine vm(MatchExecutable());
  const std::string error =
      ErrorOf([&] { vm.Invoke("classify", {Make<ADTNode>(2, std::vector<Ref<Object>>{})}); });
  EXPECT_THAT(error, HasSubstr("match at 4:3 is not exhaustive"));
  EXPECT_THAT(error, HasSubstr("at @classify pc 7: fatal message[0]"));
  EXPECT_THAT(
      ErrorOf([&] { vm.Invoke("classify", {Make<ADTNode>(1, std::vector<Ref<Object>>{I64(1)})}); }),
      HasSubstr("field 1 out of range for an ADT value with tag 1 and 1 fields"));
  EXPECT_THAT(ErrorOf([&] { vm.Invoke("tag_of_tensor", {I64(1)}); }),
              HasSubstr("get_tag's object must be an ADT value"));
}

TEST(VirtualMachineTest, IfElseMergesIntoOneRegister) {
  // select(c, a, b) = if c then a else b; select_reg compares c with b's register.
  VirtualMachine vm(MakeExecutable({
      VMFunction{
          "select",
          3,
          4,
          {I::If(0, kNoRegister, 1, 1, 3), I::Move(1, 3), I::Goto(2), I::Move(2, 3), I::Ret(3)}},
      VMFunction{"equal", 2, 3, {I::If(0, 1, 0, 1, 2), I::Ret(0), I::Ret(1)}},
  }));
  const Tensor a = I64(10), b = I64(20);
  EXPECT_EQ(vm.Invoke("select", {TensorNode::Scalar<bool>(DataType::Bool(), true), a, b}),
            Ref<Object>(a));
  EXPECT_EQ(vm.Invoke("select", {TensorNode::Scalar<bool>(DataType::Bool(), false), a, b}),
            Ref<Object>(b));
  EXPECT_EQ(vm.Invoke("select", {TensorNode::Scalar<int32_t>(DataType::Int32(), 1), a, b}),
            Ref<Object>(a));
  EXPECT_EQ(vm.Invoke("select", {TensorNode::FromVector<int64_t>({1}, kI64, {0}), a, b}),
            Ref<Object>(b));
  const Tensor seven = I64(7);
  EXPECT_EQ(vm.Invoke("equal", {seven, I64(7)}), Ref<Object>(seven));
  const Tensor eight = I64(8);
  EXPECT_EQ(vm.Invoke("equal", {seven, eight}), Ref<Object>(eight));
  EXPECT_THAT(ErrorOf([&] {
                vm.Invoke("select", {F32({2}, {1, 1}), a, b});
              }),
              HasSubstr("the test of if must be an integer or bool scalar on the CPU, got a "
                        "tensor of type Tensor[(2,), float32]"));
}

TEST(VirtualMachineTest, LoadConstIsLoadedOnceAndLoadConstiMakesInt64Scalars) {
  Executable exe = MakeExecutable({
      VMFunction{"constant", 0, 1, {I::LoadConst(0, 0), I::Ret(0)}},
      VMFunction{"immediate", 0, 1, {I::LoadConsti(-7, 0), I::Ret(0)}},
  });
  exe.constants.push_back(ConstantEntry{F32({2}, {1.5, 2.5}), 0});
  VirtualMachine vm(exe);
  const Ref<Object> first = vm.Invoke("constant", {});
  EXPECT_THAT(ValuesOf(first), ElementsAre(1.5, 2.5));
  EXPECT_EQ(vm.Invoke("constant", {}), first);

  const Tensor immediate = vm.Invoke("immediate", {}).as<TensorNode>();
  ASSERT_TRUE(immediate);
  EXPECT_EQ(immediate->dtype(), kI64);
  EXPECT_TRUE(immediate->shape().empty());
  EXPECT_EQ(immediate->device(), kCPU);
  EXPECT_EQ(immediate->data<int64_t>()[0], -7);
}

TEST(VirtualMachineTest, AllocTensorViewsStorageAtOffsets) {
  // views(size, offset) = (tensor at offset, tensor at 0), both float32[2].
  VirtualMachine vm(MakeExecutable({VMFunction{"views",
                                               2,
                                               6,
                                               {
                                                   I::AllocStorage(0, 0, 64, kF32, 0, 2),
                                                   I::AllocTensor(2, 1, 0, {2}, kF32, 3),
                                                   I::AllocTensor(2, kNoRegister, 0, {2}, kF32, 4),
                                                   I::AllocADT(0, {3, 4}, 5),
                                                   I::Ret(5),
                                               }}}));
  const ADT views = vm.Invoke("views", {I64(16), I64(8)}).as<ADTNode>();
  ASSERT_TRUE(views);
  const Tensor at_offset = views->field(0).as<TensorNode>();
  const Tensor at_zero = views->field(1).as<TensorNode>();
  EXPECT_EQ(at_offset->storage(), at_zero->storage());
  EXPECT_EQ(at_offset->storage()->size(), 16u);
  EXPECT_EQ(at_offset->byte_offset(), 8u);
  EXPECT_EQ(at_offset->shape(), Shape({2}));

  EXPECT_THAT(ErrorOf([&] {
                vm.Invoke("views", {I64(16), I64(12)});
              }),
              HasSubstr("a tensor of shape (2,) and dtype float32 at offset 12 does not fit in a "
                        "storage of 16 bytes"));
  EXPECT_THAT(ErrorOf([&] {
                vm.Invoke("views", {I64(16), I64(-8)});
              }),
              HasSubstr("at offset -8 does not fit"));
  EXPECT_THAT(ErrorOf([&] {
                vm.Invoke("views", {I64(-1), I64(0)});
              }),
              HasSubstr("negative storage size -1"));
  EXPECT_THAT(ErrorOf([&] {
                vm.Invoke("views", {F32({}, {16}), I64(0)});
              }),
              HasSubstr("the storage size must be an integer or bool scalar on the CPU"));
  // A rank-1 size is a shape: the storage holds a float32 tensor of it.
  const ADT from_shape =
      vm.Invoke("views", {TensorNode::FromVector<int64_t>({2}, DataType::Int64(), {2, 3}), I64(8)})
          .as<ADTNode>();
  EXPECT_EQ(from_shape->field(0).as<TensorNode>()->storage()->size(), 24u);
  EXPECT_THAT(ErrorOf([&] {
                vm.Invoke("views", {F32({1}, {16}), I64(0)});
              }),
              HasSubstr("the storage size must be a 1-D int64 tensor on the CPU"));
}

TEST(VirtualMachineTest, ShapeOfAndAllocTensorReg) {
  // like(x) = (shape_of(x), a new tensor of x's shape).
  VirtualMachine vm(
      MakeExecutable({VMFunction{"like",
                                 1,
                                 5,
                                 {
                                     I::ShapeOf(0, DataType::Int64(), 1),
                                     I::AllocStorage(kNoRegister, 256, 64, kF32, 0, 2),
                                     I::AllocTensorReg(2, 0, 1, kF32, 3),
                                     I::AllocADT(0, {1, 3}, 4),
                                     I::Ret(4),
                                 }}}));
  const ADT result = vm.Invoke("like", {TensorNode::Empty({2, 3, 4}, kF32)}).as<ADTNode>();
  const Tensor shape = result->field(0).as<TensorNode>();
  EXPECT_EQ(shape->dtype(), kI64);
  EXPECT_EQ(shape->shape(), Shape({3}));
  EXPECT_EQ(shape->device(), kCPU);
  EXPECT_THAT(std::vector<int64_t>(shape->data<int64_t>(), shape->data<int64_t>() + 3),
              ElementsAre(2, 3, 4));
  EXPECT_EQ(result->field(1).as<TensorNode>()->shape(), Shape({2, 3, 4}));

  EXPECT_THAT(ErrorOf([&] {
                vm.Invoke("like", {TensorNode::Empty({8, 9}, kF32)});
              }),
              HasSubstr("a tensor of shape (8, 9) and dtype float32 at offset 0 does not fit in "
                        "a storage of 256 bytes"));
}

TEST(VirtualMachineTest, ReshapeTensorIsAZeroCopyView) {
  VirtualMachine vm(
      MakeExecutable({VMFunction{"reshape", 2, 3, {I::ReshapeTensor(0, 1, 2), I::Ret(2)}}}));
  const Tensor x = F32({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor y = vm.Invoke("reshape", {x, Shape1D({3, 2})}).as<TensorNode>();
  EXPECT_EQ(y->shape(), Shape({3, 2}));
  EXPECT_EQ(y->raw_data(), x->raw_data());
  EXPECT_THAT(ErrorOf([&] {
                vm.Invoke("reshape", {x, Shape1D({4, 2})});
              }),
              HasSubstr("cannot view a tensor of shape (2, 3) as shape (4, 2)"));
  // Fewer elements: the leading ones, as an upper-bound op's output is trimmed.
  const Tensor leading = vm.Invoke("reshape", {x, Shape1D({2, 2})}).as<TensorNode>();
  EXPECT_EQ(leading->shape(), Shape({2, 2}));
  EXPECT_EQ(leading->raw_data(), x->raw_data());
  EXPECT_THAT(ErrorOf([&] {
                vm.Invoke("reshape", {x, F32({2}, {3, 2})});
              }),
              HasSubstr("the new shape must be a 1-D int64 tensor on the CPU"));
}

TEST(VirtualMachineTest, DeviceCopyOnTheCpu) {
  VirtualMachine vm(
      MakeExecutable({VMFunction{"copy", 1, 2, {I::DeviceCopy(0, 0, 0, 1), I::Ret(1)}}}));
  const Tensor x = F32({3}, {1, 2, 3});
  const Tensor y = vm.Invoke("copy", {x}).as<TensorNode>();
  EXPECT_NE(y->storage(), x->storage());
  EXPECT_EQ(y->device(), kCPU);
  EXPECT_THAT(ValuesOf(y), ElementsAre(1, 2, 3));
}

TEST(VirtualMachineTest, OptionsChooseTheDevices) {
  Executable exe =
      MakeExecutable({VMFunction{"copy", 1, 2, {I::DeviceCopy(0, 0, 0, 1), I::Ret(1)}}});
  exe.devices = {Device{DeviceType::kCPU, 1}};
  EXPECT_THAT(ErrorOf([&] { VirtualMachine vm(exe); }), HasSubstr("no device cpu(1)"));
  VMOptions options;
  options.devices = {kCPU};
  VirtualMachine vm(exe, options);
  EXPECT_THAT(ValuesOf(vm.Invoke("copy", {F32({1}, {5})})), ElementsAre(5));
}

TEST(VirtualMachineTest, CopiesToAndFromAGpu) {
  const Device gpu{DeviceType::kCUDA, 0};
  try {
    DeviceAPI::Get(gpu);
  } catch (const Error& error) {
    GTEST_SKIP() << error.what();
  }
  // round_trip(x) = (x on the GPU, x back, a GPU constant back, a GPU tensor).
  Executable exe =
      MakeExecutable({VMFunction{"round_trip",
                                 1,
                                 8,
                                 {
                                     I::DeviceCopy(0, 0, 1, 1),
                                     I::DeviceCopy(1, 1, 0, 2),
                                     I::LoadConst(0, 3),
                                     I::DeviceCopy(3, 1, 0, 4),
                                     I::AllocStorage(kNoRegister, 64, 64, kF32, 1, 5),
                                     I::AllocTensor(5, kNoRegister, 0, {4}, kF32, 6),
                                     I::AllocADT(0, {1, 2, 4, 6}, 7),
                                     I::Ret(7),
                                 }},
                      VMFunction{"wrong_device", 1, 2, {I::DeviceCopy(0, 1, 0, 1), I::Ret(1)}}});
  exe.devices = {kCPU, gpu};
  exe.constants.push_back(ConstantEntry{F32({2}, {7, 8}), 1});
  VirtualMachine vm(exe);
  const ADT result = vm.Invoke("round_trip", {F32({3}, {1, 2, 3})}).as<ADTNode>();
  EXPECT_EQ(result->field(0).as<TensorNode>()->device(), gpu);
  EXPECT_THAT(ValuesOf(result->field(1)), ElementsAre(1, 2, 3));
  EXPECT_THAT(ValuesOf(result->field(2)), ElementsAre(7, 8));
  EXPECT_EQ(result->field(3).as<TensorNode>()->device(), gpu);
  EXPECT_THAT(ErrorOf([&] { vm.Invoke("wrong_device", {F32({1}, {1})}); }),
              HasSubstr("device_copy expects a tensor on cuda(0), got one on cpu(0)"));
}

TEST(VirtualMachineTest, KillRegisterDropsTheValue) {
  // Allocates 1 MiB, measures live bytes, kills it, measures again.
  std::vector<Instruction> code = {I::AllocStorage(kNoRegister, 1 << 20, 64, kF32, 0, 0)};
  AllocOutput(code, 1, 2, {}, kI64);
  code.push_back(I::InvokePacked(0, {}, {2}));
  code.push_back(I::KillRegister(0));
  AllocOutput(code, 1, 3, {}, kI64);
  code.push_back(I::InvokePacked(0, {}, {3}));
  code.push_back(I::AllocADT(0, {2, 3}, 4));
  code.push_back(I::Ret(4));
  VirtualMachine vm(
      MakeExecutable(
          {VMFunction{"main", 0, 5, code},
           VMFunction{"use_killed", 1, 2, {I::Move(0, 1), I::KillRegister(1), I::Ret(1)}}},
          {"live_bytes"}),
      TestOptions());
  const ADT live = vm.Invoke("main", {}).as<ADTNode>();
  // The second measurement also counts the second probe's own small buffer.
  EXPECT_GE(ScalarOf(live->field(0)) - ScalarOf(live->field(1)), (1 << 20) - 1024);
  EXPECT_THAT(ErrorOf([&] { vm.Invoke("use_killed", {I64(1)}); }),
              HasSubstr("@use_killed returned no value"));
}

// A moved argument leaves the caller's register empty, so a callee that
// drops its parameter frees the value while it runs.
TEST(VirtualMachineTest, AMovedArgumentLeavesItsRegister) {
  std::vector<Instruction> probe = {I::KillRegister(0)};
  AllocOutput(probe, 1, 2, {}, kI64);
  probe.push_back(I::InvokePacked(0, {}, {2}));
  probe.push_back(I::Ret(2));
  const auto caller = [](bool move) {
    Instruction call = I::Invoke(1, {0}, 1);
    if (move) {
      EXPECT_TRUE(call.SetMoves(0));
    }
    // Not a tail call: the caller's frame stays while the probe runs.
    return std::vector<Instruction>{I::AllocStorage(kNoRegister, 1 << 20, 64, kF32, 0, 0), call,
                                    I::Move(1, 0), I::Ret(0)};
  };
  Instruction moving_adt = I::AllocADT(0, {0}, 1);
  EXPECT_TRUE(moving_adt.SetMoves(0));
  VirtualMachine vm(
      MakeExecutable({VMFunction{"moving", 0, 2, caller(true)}, VMFunction{"probe", 1, 3, probe},
                      VMFunction{"copying", 0, 2, caller(false)},
                      VMFunction{"read_after_move", 1, 2, {moving_adt, I::Ret(0)}},
                      VMFunction{"adt", 1, 2, {moving_adt, I::Ret(1)}}},
                     {"live_bytes"}),
      TestOptions());
  const int64_t moved_live = ScalarOf(vm.Invoke("moving", {}));
  const int64_t copied_live = ScalarOf(vm.Invoke("copying", {}));
  EXPECT_GE(copied_live - moved_live, (1 << 20) - 1024);
  EXPECT_THAT(ErrorOf([&] { vm.Invoke("read_after_move", {I64(1)}); }),
              HasSubstr("@read_after_move returned no value"));
  const Tensor x = I64(7);
  EXPECT_EQ(vm.Invoke("adt", {x}).as<ADTNode>()->field(0), Ref<Object>(x));
}

// ---- Kernels and errors ----

TEST(VirtualMachineTest, KernelErrorsPropagateWithTheKernelsMessage) {
  std::vector<Instruction> code;
  AllocOutput(code, 1, 2, {}, kI64);
  code.push_back(I::InvokePacked(0, {0}, {2}));
  code.push_back(I::Ret(2));
  std::vector<Instruction> silent = code;
  silent[2] = I::InvokePacked(1, {0}, {2});
  VirtualMachine vm(
      MakeExecutable({VMFunction{"outer", 1, 2, {I::Invoke(1, {0}, 1), I::Move(1, 0), I::Ret(0)}},
                      VMFunction{"loud", 1, 3, code}, VMFunction{"silent", 1, 3, silent},
                      VMFunction{"ok", 1, 1, {I::Ret(0)}}},
                     {"fail", "fail_silent"}),
      TestOptions());
  const std::string error = ErrorOf([&] { vm.Invoke("outer", {I64(1)}); });
  EXPECT_THAT(error, HasSubstr("kernel fail: deliberate failure"));
  EXPECT_THAT(error, HasSubstr("at @loud pc 2: invoke_packed kernel[0]"));
  EXPECT_THAT(error, HasSubstr("at @outer pc 0: $1 = invoke func[1]($0)"));
  EXPECT_THAT(ErrorOf([&] { vm.Invoke("silent", {I64(1)}); }),
              HasSubstr("kernel fail_silent: failed with status 5"));
  const Tensor x = I64(3);
  EXPECT_EQ(vm.Invoke("ok", {x}), Ref<Object>(x)) << "the VM is usable after an error";
}

TEST(VirtualMachineTest, KernelArgumentsMustBeTensors) {
  VirtualMachine vm(
      MakeExecutable(
          {VMFunction{
              "main", 1, 3, {I::AllocClosure(0, {}, 1), I::InvokePacked(0, {1}, {0}), I::Ret(0)}}},
          {"add"}),
      TestOptions());
  EXPECT_THAT(ErrorOf([&] { vm.Invoke("main", {I64(1)}); }),
              HasSubstr("argument $1 of kernel add must be a tensor or a tuple of tensors, got a "
                        "closure of function 0"));
}

TEST(VirtualMachineTest, KernelsOnlyReadTensorsOnTheirDevice) {
  std::vector<Instruction> code;
  AllocOutput(code, 2, 3, {3}, kF32);
  code.push_back(I::InvokePacked(0, {0, 1}, {3}));
  code.push_back(I::Ret(3));
  VMOptions options = TestOptions();
  bool called = false;
  options.extra_kernels["add"] = [&called](const Attrs&) {
    Kernel kernel{"gpu_add", [](void*, DLTensor* const*, int32_t) { return 0; }, nullptr};
    kernel.device = DeviceType::kCUDA;
    called = true;
    return kernel;
  };
  VirtualMachine vm(MakeExecutable({VMFunction{"main", 2, 4, code}}, {"add"}), options);
  ASSERT_TRUE(called);
  EXPECT_EQ(ErrorOf([&] {
              vm.Invoke("main", {F32({3}, {1, 2, 3}), F32({3}, {1, 2, 3})});
            }),
            "kernel gpu_add: argument 0 (Tensor[(3,), float32]) is on cpu(0), and the kernel "
            "reads cuda memory\n  at @main pc 2: invoke_packed kernel[0](in: $0, $1; out: $3)");
}

TEST(VirtualMachineTest, PrimitivesAreBoundAtLoad) {
  EXPECT_THAT(
      ErrorOf([] {
        VirtualMachine vm(
            MakeExecutable({VMFunction{"main", 1, 1, {I::Ret(0)}}}, {"add", "no_such_kernel"}),
            TestOptions());
      }),
      HasSubstr("primitive 1 'no_such_kernel' has no kernel: it is not in the executable's kernel "
                "library (the executable embeds no kernel library)"));
  EXPECT_THAT(ErrorOf([] {
                VirtualMachine vm(
                    MakeExecutable({VMFunction{"main", 1, 1, {I::Ret(0)}}}, {"scale"}),
                    TestOptions());
              }),
              HasSubstr("primitive 0 'scale': "));
}

TEST(VirtualMachineTest, ExtraKernelsComeBeforeBuiltInOnes) {
  const std::vector<std::string> builtin = KernelRegistry::Global().Names();
  ASSERT_FALSE(builtin.empty());
  VMOptions options;
  options.extra_kernels[builtin.front()] = Plain(Write42);
  std::vector<Instruction> code;
  AllocOutput(code, 0, 1, {}, kI64);
  code.push_back(I::InvokePacked(0, {}, {1}));
  code.push_back(I::Ret(1));
  VirtualMachine vm(MakeExecutable({VMFunction{"main", 0, 2, code}}, {builtin.front()}), options);
  EXPECT_EQ(ScalarOf(vm.Invoke("main", {})), 42);
}

std::vector<std::byte> TestLibraryBytes() {
  std::ifstream file(NIMBLE_TEST_KERNELS, std::ios::binary);
  const std::vector<char> chars((std::istreambuf_iterator<char>(file)),
                                std::istreambuf_iterator<char>());
  const auto* begin = reinterpret_cast<const std::byte*>(chars.data());
  return std::vector<std::byte>(begin, begin + chars.size());
}

TEST(VirtualMachineTest, EmbeddedKernelLibraryComesFirst) {
  std::vector<Instruction> code;
  AllocOutput(code, 1, 2, {3}, kF32);
  code.push_back(I::InvokePacked(0, {0}, {2}));
  code.push_back(I::Ret(2));
  std::vector<Instruction> failing = code;
  failing[2] = I::InvokePacked(1, {0}, {2});
  Executable exe =
      MakeExecutable({VMFunction{"main", 1, 3, code}, VMFunction{"fails", 1, 3, failing}},
                     {"nimble_test_add_one", "nimble_test_fail"});
  exe.kernel_library = TestLibraryBytes();
  // A library built for this host, which the VM checks against the target.
#if defined(__aarch64__)
  exe.target = "arm";
#else
  exe.target = "intel";
#endif
  VMOptions options = TestOptions();
  options.extra_kernels["nimble_test_add_one"] = Plain(FailLoudly);
  VirtualMachine vm(exe, options);
  EXPECT_THAT(ValuesOf(vm.Invoke("main", {F32({3}, {1, 2, 3})})), ElementsAre(2, 3, 4));
  EXPECT_THAT(ErrorOf([&] {
                vm.Invoke("fails", {F32({3}, {1, 2, 3})});
              }),
              HasSubstr("kernel nimble_test_fail: the library kernel refuses"));

  exe.primitives[1].name = "absent_from_library";
  EXPECT_THAT(ErrorOf([&] { VirtualMachine missing(exe, options); }),
              HasSubstr("primitive 1 'absent_from_library' has no kernel: it is not in the "
                        "executable's kernel library ("));
}

// ---- The C++ API ----

TEST(VirtualMachineTest, InvokeChecksItsArguments) {
  VirtualMachine vm(MakeExecutable({VMFunction{"main", 2, 2, {I::Ret(0)}}}));
  EXPECT_THAT(ErrorOf([&] { vm.Invoke("main", {I64(1)}); }),
              HasSubstr("@main takes 2 arguments, got 1"));
  EXPECT_THAT(ErrorOf([&] {
                vm.Invoke("main", {I64(1), nullptr});
              }),
              HasSubstr("argument 1 of @main must be a tensor or an ADT of tensors, got no value"));
  const Ref<Object> closure = Make<ClosureNode>(0, std::vector<Ref<Object>>{});
  EXPECT_THAT(ErrorOf([&] {
                vm.Invoke("main", {I64(1), MakeTuple({I64(2), closure})});
              }),
              HasSubstr("argument 1 of @main must be a tensor or an ADT of tensors, got an ADT"));
  EXPECT_THAT(ErrorOf([&] { vm.Invoke("absent", {}); }), HasSubstr("no function @absent"));
}

// @main(%h: Tensor[(1, ?), float32], %n: Tensor[(), int64], %p: (Tensor[(2,),
// float32], List)) returns %h.
Executable SignedExecutable() {
  VMFunction main{"main", 3, 3, {I::Ret(0)}};
  main.params = {
      {"h", ParamType::Tensor(kF32, {1, ParamType::kAnyDim}, {ParamType::kNoBound, 4})},
      {"n", ParamType::Tensor(kI64, {})},
      {"p", ParamType::Tuple({ParamType::Tensor(kF32, {2}), ParamType::Other("List")})},
  };
  return MakeExecutable({main});
}

TEST(VirtualMachineTest, InvokeChecksArgumentsAgainstTheSignature) {
  VirtualMachine vm(SignedExecutable());
  const Ref<Object> pair = MakeTuple({F32({2}, {1, 2}), MakeTuple({})});
  const Tensor h = F32({1, 3}, {1, 2, 3});
  EXPECT_EQ(vm.Invoke("main", {h, I64(4), pair}), Ref<Object>(h));
  // `?` takes any size, 0 included.
  const Tensor empty = TensorNode::Empty({1, 0}, kF32);
  EXPECT_EQ(vm.Invoke("main", {empty, I64(4), pair}), Ref<Object>(empty));

  EXPECT_THAT(ErrorOf([&] {
                vm.Invoke("main", {h, I64(4)});
              }),
              HasSubstr("@main takes 3 arguments, got 2"));
  EXPECT_EQ(ErrorOf([&] {
              vm.Invoke("main", {F32({2, 3}, {1, 2, 3, 4, 5, 6}), I64(4), pair});
            }),
            "@main: argument 0 (%h): expected Tensor[(1, ?<=4), float32], got Tensor[(2, 3), "
            "float32]");
  EXPECT_EQ(
      ErrorOf([&] {
        vm.Invoke("main", {F32({3}, {1, 2, 3}), I64(4), pair});
      }),
      "@main: argument 0 (%h): expected Tensor[(1, ?<=4), float32], got Tensor[(3,), float32]");
  // A bounded `?` takes sizes up to its bound.
  const Tensor at_bound = TensorNode::Empty({1, 4}, kF32);
  EXPECT_EQ(vm.Invoke("main", {at_bound, I64(4), pair}), Ref<Object>(at_bound));
  EXPECT_EQ(ErrorOf([&] {
              vm.Invoke("main", {TensorNode::Empty({1, 5}, kF32), I64(4), pair});
            }),
            "@main: argument 0 (%h): expected Tensor[(1, ?<=4), float32], got Tensor[(1, 5), "
            "float32]");
  EXPECT_EQ(ErrorOf([&] {
              vm.Invoke("main", {h, F32({}, {4}), pair});
            }),
            "@main: argument 1 (%n): expected Tensor[(), int64], got Tensor[(), float32]");
  EXPECT_EQ(ErrorOf([&] {
              vm.Invoke("main", {h, MakeTuple({}), pair});
            }),
            "@main: argument 1 (%n): expected Tensor[(), int64], got ()");
  EXPECT_EQ(ErrorOf([&] {
              vm.Invoke("main", {h, I64(4), MakeTuple({F32({3}, {1, 2, 3})})});
            }),
            "@main: argument 2 (%p): expected (Tensor[(2,), float32], List), got (Tensor[(3,), "
            "float32],)");
  EXPECT_EQ(ErrorOf([&] {
              vm.Invoke("main", {h, I64(4), F32({2}, {1, 2})});
            }),
            "@main: argument 2 (%p): expected (Tensor[(2,), float32], List), got Tensor[(2,), "
            "float32]");

  // The stateful interface checks each input as it is set.
  EXPECT_EQ(ErrorOf([&] { vm.SetInput("main", 1, I64(1)->View({1})); }),
            "@main: argument 1 (%n): expected Tensor[(), int64], got Tensor[(1,), int64]");
  EXPECT_THAT(ErrorOf([&] {
                vm.SetInputs("main", {h, h, pair});
              }),
              HasSubstr("@main: argument 1 (%n): expected Tensor[(), int64]"));
  vm.SetInputs("main", {h, I64(4), pair});
  vm.Run("main");
  EXPECT_EQ(vm.GetOutput(0), h);
}

TEST(VirtualMachineTest, RunTimeErrorsNameTheSourcePosition) {
  Executable exe = MatchExecutable();
  VMFunction& classify = exe.functions[0];
  classify.positions.resize(classify.instructions.size());
  classify.positions[0] = {4, 3};  // get_tag
  classify.positions[7] = {4, 3};  // fatal
  exe.source_name = "prog.relay";
  VirtualMachine vm(exe);
  const std::string fatal =
      ErrorOf([&] { vm.Invoke("classify", {Make<ADTNode>(2, std::vector<Ref<Object>>{})}); });
  EXPECT_THAT(fatal, ::testing::StartsWith("prog.relay:4:3: match at 4:3 is not exhaustive\n"));
  EXPECT_THAT(fatal, HasSubstr("at @classify pc 7: fatal message[0]"));
  EXPECT_THAT(ErrorOf([&] { vm.Invoke("classify", {I64(1)}); }),
              ::testing::StartsWith("prog.relay:4:3: get_tag's object must be an ADT value"));
  // No position for the failing instruction: the message as it was.
  EXPECT_THAT(
      ErrorOf([&] { vm.Invoke("classify", {Make<ADTNode>(1, std::vector<Ref<Object>>{I64(1)})}); }),
      ::testing::StartsWith("field 1 out of range"));

  exe.source_name.clear();
  VirtualMachine unnamed(exe);
  EXPECT_THAT(ErrorOf([&] { unnamed.Invoke("classify", {I64(1)}); }),
              ::testing::StartsWith("4:3: get_tag's object"));
}

TEST(VirtualMachineTest, InvalidExecutablesAreRejectedAtLoad) {
  EXPECT_THAT(ErrorOf([] {
                VirtualMachine vm(MakeExecutable({VMFunction{"main", 1, 1, {I::Ret(3)}}}));
              }),
              HasSubstr("register $3 out of range"));
}

TEST(VirtualMachineTest, SetInputRunAndFlattenedOutputs) {
  // nest(a, b) = ((a, b), a)
  VirtualMachine vm(MakeExecutable({VMFunction{
      "nest", 2, 4, {I::AllocADT(0, {0, 1}, 2), I::AllocADT(0, {2, 0}, 3), I::Ret(3)}}}));
  const Tensor a = F32({2}, {1, 2});
  const std::filesystem::path npy =
      std::filesystem::temp_directory_path() / ("vm_test_" + std::to_string(getpid()) + ".npy");
  WriteNpy(npy.string(), F32({1}, {7}));

  EXPECT_THAT(ErrorOf([&] { vm.Run("nest"); }), HasSubstr("input 0 of @nest is not set"));
  vm.SetInput("nest", 0, FromDLPack(ToDLPack(a)));
  EXPECT_THAT(ErrorOf([&] { vm.Run("nest"); }), HasSubstr("input 1 of @nest is not set"));
  vm.SetInput("nest", 1, ReadNpy(npy.string()));
  std::filesystem::remove(npy);
  vm.Run("nest");
  ASSERT_EQ(vm.NumOutputs(), 3u);
  EXPECT_THAT(ValuesOf(vm.GetOutput(0)), ElementsAre(1, 2));
  EXPECT_EQ(vm.GetOutput(0)->raw_data(), a->raw_data()) << "DLPack input is not copied";
  EXPECT_THAT(ValuesOf(vm.GetOutput(1)), ElementsAre(7));
  EXPECT_THAT(ValuesOf(vm.GetOutput(2)), ElementsAre(1, 2));
  EXPECT_THAT(ErrorOf([&] { vm.GetOutput(3); }),
              HasSubstr("output index 3 out of range (3 outputs)"));

  vm.SetInputs("nest", {I64(5), I64(6)});
  vm.Run("nest");
  EXPECT_EQ(ScalarOf(vm.GetOutput(1)), 6);
  EXPECT_THAT(ErrorOf([&] { vm.SetInput("nest", 2, a); }),
              HasSubstr("input index 2 out of range: @nest takes 2 inputs"));
  EXPECT_THAT(ErrorOf([&] { vm.SetInputs("nest", {a}); }),
              HasSubstr("@nest takes 2 inputs, got 1"));
}

TEST(VirtualMachineTest, OutputsMustBeTensors) {
  VirtualMachine vm(
      MakeExecutable({VMFunction{"make", 0, 1, {I::AllocClosure(0, {}, 0), I::Ret(0)}}}));
  EXPECT_THAT(ErrorOf([&] { vm.Run("make"); }),
              HasSubstr("the result of @make must be a tensor or a tuple of tensors"));
}

// ---- Performance properties ----

TEST(VirtualMachineTest, SteadyStateDispatchDoesNotAllocate) {
  // spin(c, a, b, out): branches, moves, calls a small function and a kernel.
  VirtualMachine vm(MakeExecutable({VMFunction{"spin",
                                               4,
                                               7,
                                               {
                                                   I::If(0, kNoRegister, 1, 1, 2),
                                                   I::Goto(1),
                                                   I::Move(1, 4),
                                                   I::Invoke(1, {4}, 5),
                                                   I::Invoke(1, {5}, 6),
                                                   I::InvokePacked(0, {6, 2}, {3}),
                                                   I::Ret(3),
                                               }},
                                    VMFunction{"identity", 1, 2, {I::Move(0, 1), I::Ret(1)}}},
                                   {"add"}),
                    TestOptions());
  const std::vector<Ref<Object>> args = {I64(1), F32({2}, {1, 2}), F32({2}, {3, 4}),
                                         TensorNode::Empty({2}, kF32)};
  vm.Invoke("spin", args);
  g_allocations = 0;
  g_count_allocations = true;
  for (int i = 0; i < 100; ++i) vm.Invoke("spin", args);
  g_count_allocations = false;
  EXPECT_EQ(g_allocations.load(), 0);
  EXPECT_THAT(ValuesOf(args[3]), ElementsAre(4, 6));
}

TEST(ProfilerTest, CountsInstructionsExactly) {
  VMOptions options = TestOptions();
  options.profiling = true;
  VirtualMachine vm(MakeExecutable({SumBelow()}, {"less_i64", "add_i64"}), options);
  ASSERT_NE(vm.profiler(), nullptr);
  vm.Invoke("sum_below", {I64(7)});
  const Tensor three = I64(3);
  vm.profiler()->Reset();
  EXPECT_EQ(ScalarOf(vm.Invoke("sum_below", {three})), 3);
  const ProfileStats stats = vm.profiler()->Stats();
  EXPECT_EQ(stats.count(Opcode::kLoadConsti), 3u);
  EXPECT_EQ(stats.count(Opcode::kAllocStorage), 10u);
  EXPECT_EQ(stats.count(Opcode::kAllocTensor), 10u);
  EXPECT_EQ(stats.count(Opcode::kInvokePacked), 10u);
  EXPECT_EQ(stats.count(Opcode::kIf), 4u);
  EXPECT_EQ(stats.count(Opcode::kMove), 6u);
  EXPECT_EQ(stats.count(Opcode::kGoto), 3u);
  EXPECT_EQ(stats.count(Opcode::kRet), 1u);
  EXPECT_EQ(stats.instructions(), 47u);
  ASSERT_EQ(stats.kernels.size(), 2u);
  EXPECT_EQ(stats.kernels[0].name, "less_i64");
  EXPECT_EQ(stats.kernels[0].calls, 4u);
  EXPECT_EQ(stats.kernels[1].calls, 6u);
  ASSERT_EQ(stats.allocations.size(), 1u);
  EXPECT_EQ(stats.allocations[0].device, kCPU);
  // load_consti's scalars come from the VM's recycled tensors, not the pool.
  EXPECT_EQ(stats.allocations[0].stats.requests, 10u) << "10 alloc_storage";
}

TEST(ProfilerTest, SplitsKernelTimeFromTheRest) {
  VMOptions options = TestOptions();
  options.profiling = true;
  std::vector<Instruction> code;
  AllocOutput(code, 0, 1, {}, kI64);
  code.push_back(I::InvokePacked(0, {}, {1}));
  code.push_back(I::InvokePacked(0, {}, {1}));
  code.push_back(I::Ret(1));
  VirtualMachine vm(MakeExecutable({VMFunction{"main", 0, 2, code}}, {"sleep5ms"}), options);
  vm.Invoke("main", {});
  const ProfileStats stats = vm.profiler()->Stats();
  EXPECT_GE(stats.kernel_time, std::chrono::milliseconds(10));
  EXPECT_GE(stats.total_time, stats.kernel_time);
  EXPECT_EQ(stats.other_time(), stats.total_time - stats.kernel_time);
  EXPECT_EQ(stats.kernels[0].calls, 2u);
  const std::string report = vm.profiler()->Report();
  EXPECT_THAT(report, HasSubstr("kernels"));
  EXPECT_THAT(report, HasSubstr("others"));
  EXPECT_THAT(report, HasSubstr("invoke_packed"));
  EXPECT_THAT(report, HasSubstr("sleep5ms"));
  EXPECT_THAT(report, HasSubstr("cpu(0)"));

  VirtualMachine unprofiled(MakeExecutable({VMFunction{"main", 0, 2, code}}, {"sleep5ms"}),
                            TestOptions());
  EXPECT_EQ(unprofiled.profiler(), nullptr);
}

}  // namespace
}  // namespace nimble::vm
