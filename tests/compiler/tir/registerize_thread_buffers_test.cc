// tir::RegisterizeThreadBuffers: which temporaries of a GPU kernel become a
// thread's values (printed loop IR), and that the kernel computes what it
// did with them in memory (run by the loop-IR interpreter).
#include "nimble/compiler/tir/registerize_thread_buffers.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nimble/compiler/tir/merge_gpu_loops.h"
#include "nimble/compiler/tir/printer.h"
#include "nimble/vm/tensor.h"
#include "tests/compiler/tir/interpreter.h"

namespace nimble::tir {
namespace {

constexpr DataType kF32 = DataType::Float32();

Buffer MakeBuffer(const std::string& name, std::vector<Expr> shape) {
  return std::make_shared<BufferNode>(name, kF32, std::move(shape));
}

std::vector<float> Interpreted(const Buffer& x, const Buffer& out, const Stmt& body) {
  const PrimFunc func{"kernel", {x, out}, 1, body, PrimFunc::Device::kGpu};
  const Tensor input = TensorNode::FromVector<float>({4}, kF32, {1, 2, 3, 4});
  const Tensor output = TensorNode::Empty({4}, kF32);
  testing::Interpret(func, std::vector{input, output});
  return std::vector<float>(output->data<float>(), output->data<float>() + 4);
}

// An LSTM cell's shape in small: a = x * 2 over i; b = a + 1 over j; out =
// a * b over k, each stage a gpu_threads loop of its own until merged.
struct ThreeStages {
  Var n = MakeVar("n");
  Var i = MakeVar("i");
  Var j = MakeVar("j");
  Var k = MakeVar("k");
  Buffer x = MakeBuffer("x", {n});
  Buffer out = MakeBuffer("out", {n});
  Buffer a = MakeBuffer("a", {n});
  Buffer b = MakeBuffer("b", {n});

  Stmt Merged() const {
    return MergeGpuThreadLoops(Allocate(
        a,
        Allocate(b, Seq({For(i, n, ForKind::kGpuThreads, Store(a, i, Mul(Load(x, i), FloatImm(2)))),
                         For(j, n, ForKind::kGpuThreads, Store(b, j, Add(Load(a, j), FloatImm(1)))),
                         For(k, n, ForKind::kGpuThreads,
                             Store(out, k, Mul(Load(a, k), Load(b, k))))}))));
  }
};

TEST(RegisterizeThreadBuffersTest, MergedStagesPassValuesInsteadOfBuffers) {
  const ThreeStages s;
  const Stmt merged = s.Merged();
  const Stmt registerized = RegisterizeThreadBuffers(merged);
  EXPECT_EQ(ToString(registerized),
            "for i in [0, n) gpu_threads {\n"
            "  let a = (x[i] * 2.0f)\n"
            "  let j = i\n"
            "  let b = (a + 1.0f)\n"
            "  let k = i\n"
            "  out[k] = (a * b)\n"
            "}\n");
  EXPECT_EQ(Interpreted(s.x, s.out, merged), (std::vector<float>{6, 20, 42, 72}));
  EXPECT_EQ(Interpreted(s.x, s.out, registerized), (std::vector<float>{6, 20, 42, 72}));
}

// One gpu_threads loop over `body`, which may use temporaries t and u.
struct OneLoop {
  Var n = MakeVar("n");
  Var i = MakeVar("i");
  Buffer x = MakeBuffer("x", {n});
  Buffer out = MakeBuffer("out", {n});
  Buffer t = MakeBuffer("t", {n});

  Stmt Kernel(const Stmt& body) const { return Allocate(t, For(i, n, ForKind::kGpuThreads, body)); }
  Stmt StoreT() const { return Store(t, i, Mul(Load(x, i), FloatImm(2))); }
  Stmt ReadT() const { return Store(out, i, Load(t, i)); }
};

bool KeepsTheBuffer(const Stmt& stmt) {
  return ToString(RegisterizeThreadBuffers(stmt)).find("allocate t") != std::string::npos;
}

TEST(RegisterizeThreadBuffersTest, ABufferStaysWhereAThreadMightSeeAnotherValue) {
  const OneLoop l;
  ASSERT_FALSE(KeepsTheBuffer(l.Kernel(Seq({l.StoreT(), l.ReadT()}))));
  // Read before it is stored: what an earlier launch left there.
  EXPECT_TRUE(KeepsTheBuffer(l.Kernel(Seq({l.ReadT(), l.StoreT()}))));
  // Stored only on one branch.
  const Expr positive = Compare(CompareOp::kGt, Load(l.x, l.i), FloatImm(0));
  EXPECT_TRUE(KeepsTheBuffer(l.Kernel(Seq({If(positive, l.StoreT()), l.ReadT()}))));
  // Stored in an inner loop, once per iteration.
  const Var r = MakeVar("r");
  EXPECT_TRUE(
      KeepsTheBuffer(l.Kernel(Seq({For(r, IntImm(2), ForKind::kSerial, l.StoreT()), l.ReadT()}))));
  // Stored twice.
  EXPECT_TRUE(KeepsTheBuffer(l.Kernel(Seq({l.StoreT(), l.StoreT(), l.ReadT()}))));
  // Read at another thread's element.
  const Expr mirror = Sub(Sub(l.n, IntImm(1)), l.i);
  EXPECT_TRUE(KeepsTheBuffer(l.Kernel(Seq({l.StoreT(), Store(l.out, l.i, Load(l.t, mirror))}))));
  // Stored at another element.
  EXPECT_TRUE(KeepsTheBuffer(l.Kernel(Seq({Store(l.t, mirror, Load(l.x, l.i)), l.ReadT()}))));
  // An accumulation.
  EXPECT_TRUE(KeepsTheBuffer(
      l.Kernel(Seq({Store(l.t, l.i, Load(l.x, l.i), /*reassociate=*/true), l.ReadT()}))));
  // Never read: nothing to pass on.
  EXPECT_TRUE(KeepsTheBuffer(l.Kernel(Seq({l.StoreT(), Store(l.out, l.i, Load(l.x, l.i))}))));
  // Read by a second loop too.
  const Var j = MakeVar("j");
  EXPECT_TRUE(KeepsTheBuffer(
      Allocate(l.t, Seq({For(l.i, l.n, ForKind::kGpuThreads, Seq({l.StoreT(), l.ReadT()})),
                         For(j, l.n, ForKind::kGpuThreads, Store(l.out, j, Load(l.t, j)))}))));
}

// A row sum that the same block then reads in its elementwise stage (a merged
// softmax's shape): the sum is a value of the block.
TEST(RegisterizeThreadBuffersTest, ABlocksReductionBecomesAValueOfTheBlock) {
  const Var rows = MakeVar("rows");
  const Var b = MakeVar("b");
  const Var j = MakeVar("j");
  const Var k = MakeVar("k");
  const Buffer x = MakeBuffer("x", {rows, IntImm(2)});
  const Buffer out = MakeBuffer("out", {rows, IntImm(2)});
  const Buffer sum = MakeBuffer("sum", {rows});
  const Buffer acc = MakeBuffer("acc", {IntImm(1)});
  const Expr element = Add(Mul(b, IntImm(2)), k);
  const Stmt body = Allocate(
      sum,
      For(b, rows, ForKind::kGpuBlocks,
          Seq({Allocate(
                   acc,
                   Seq({Store(acc, IntImm(0), FloatImm(0)),
                        For(j, IntImm(2), ForKind::kGpuBlockStride,
                            Store(acc, IntImm(0),
                                  Add(Load(acc, IntImm(0)), Load(x, Add(Mul(b, IntImm(2)), j))))),
                        Store(sum, b, Call(Intrinsic::kBlockSum, {Load(acc, IntImm(0))}))})),
               For(k, IntImm(2), ForKind::kGpuBlockStride,
                   Store(out, element, Div(Load(x, element), Load(sum, b))))})));
  const std::string registerized = ToString(RegisterizeThreadBuffers(body));
  EXPECT_EQ(registerized.find("allocate sum"), std::string::npos) << registerized;
  EXPECT_NE(registerized.find("  let sum = block_sum(acc[0])\n"), std::string::npos)
      << registerized;
  EXPECT_NE(registerized.find("(x[((b * 2) + k)] / sum)"), std::string::npos) << registerized;
  const PrimFunc func{
      "normalize", {x, out}, 1, RegisterizeThreadBuffers(body), PrimFunc::Device::kGpu};
  const Tensor input = TensorNode::FromVector<float>({2, 2}, kF32, {1, 3, 2, 2});
  const Tensor output = TensorNode::Empty({2, 2}, kF32);
  testing::Interpret(func, std::vector{input, output});
  EXPECT_EQ(std::vector<float>(output->data<float>(), output->data<float>() + 4),
            (std::vector<float>{0.25f, 0.75f, 0.5f, 0.5f}));
}

TEST(RegisterizeThreadBuffersTest, KernelParametersAndCpuLoopsAreLeftAlone) {
  const OneLoop l;
  // The output is a parameter: stored and read back, it stays a store.
  const Stmt parameter = For(l.i, l.n, ForKind::kGpuThreads,
                             Seq({Store(l.out, l.i, Load(l.x, l.i)),
                                  Store(l.out, l.i, Mul(Load(l.out, l.i), FloatImm(3)))}));
  EXPECT_EQ(ToString(RegisterizeThreadBuffers(parameter)), ToString(parameter));
  EXPECT_EQ(Interpreted(l.x, l.out, RegisterizeThreadBuffers(parameter)),
            (std::vector<float>{3, 6, 9, 12}));
  const Stmt cpu = Allocate(l.t, For(l.i, l.n, ForKind::kParallel, Seq({l.StoreT(), l.ReadT()})));
  EXPECT_EQ(ToString(RegisterizeThreadBuffers(cpu)), ToString(cpu));
}

}  // namespace
}  // namespace nimble::tir
