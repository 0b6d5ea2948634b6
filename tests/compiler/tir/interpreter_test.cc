// The tests' loop-IR interpreter (interpreter.h) as the GPU suites rely on
// it: a gpu_block_threads loop runs its iterations as threads that share
// the block's shared buffers and meet at barriers; an access to a shared
// element that another thread writes between the same two barriers is an
// error, whatever order the threads happened to run in; a barrier or a
// shared allocation out of place is an error.
#include <gtest/gtest.h>

#include <vector>

#include "nimble/vm/tensor.h"
#include "tests/compiler/tir/interpreter.h"
#include "tests/error_of.h"

namespace nimble::tir::testing {
namespace {

constexpr int64_t kThreads = 4;

// out[block * 4 + t] = (shared value of thread t + 1 mod 4), where each
// thread t of a block first stores block * 10 + t in the shared buffer;
// with `barrier` the block waits between the two.
PrimFunc NeighbourExchange(bool barrier) {
  const Var block = MakeVar("block"), t = MakeVar("t");
  const Buffer out = std::make_shared<BufferNode>("out", DataType::Float32(),
                                                  std::vector<Expr>{IntImm(2 * kThreads)});
  const Buffer shared = std::make_shared<BufferNode>(
      "s", DataType::Float32(), std::vector<Expr>{IntImm(kThreads)}, MemoryScope::kGpuShared);
  std::vector<Stmt> steps = {
      Store(shared, t, Cast(DataType::Float32(), Add(Mul(block, IntImm(10)), t)))};
  if (barrier) steps.push_back(Barrier());
  steps.push_back(Store(out, Add(Mul(block, IntImm(kThreads)), t),
                        Load(shared, FloorMod(Add(t, IntImm(1)), IntImm(kThreads)))));
  const Stmt body = For(
      block, IntImm(2), ForKind::kGpuBlocks,
      Allocate(shared, For(t, IntImm(kThreads), ForKind::kGpuBlockThreads, Seq(std::move(steps)))));
  return {"exchange", {out}, 0, body, PrimFunc::Device::kGpu};
}

TEST(InterpreterTest, BlockThreadsExchangeValuesThroughSharedMemoryAtABarrier) {
  const Tensor out = TensorNode::Empty({2 * kThreads}, DataType::Float32());
  Interpret(NeighbourExchange(/*barrier=*/true), std::vector{out});
  std::vector<float> values(out->data<float>(), out->data<float>() + out->numel());
  EXPECT_EQ(values, (std::vector<float>{1, 2, 3, 0, 11, 12, 13, 10}));
}

TEST(InterpreterTest, ASharedElementWrittenAndReadBetweenTheSameBarriersIsARace) {
  const Tensor out = TensorNode::Empty({2 * kThreads}, DataType::Float32());
  // Threads run in whatever order; the check does not depend on it.
  for (int run = 0; run < 3; ++run) {
    EXPECT_EQ(ErrorOf([&] { Interpret(NeighbourExchange(/*barrier=*/false), std::vector{out}); }),
              "tir interpreter: threads 0 and 1 of a block touch shared s[1] between two "
              "barriers, and one writes it");
  }
}

TEST(InterpreterTest, BarriersAndSharedBuffersOutOfPlaceAreErrors) {
  const Var block = MakeVar("block"), t = MakeVar("t");
  const Buffer shared = std::make_shared<BufferNode>(
      "s", DataType::Float32(), std::vector<Expr>{IntImm(kThreads)}, MemoryScope::kGpuShared);
  const auto run = [](Stmt body) {
    return ErrorOf([&] {
      Interpret(PrimFunc{"k", {}, 0, std::move(body), PrimFunc::Device::kGpu}, {});
    });
  };
  EXPECT_EQ(run(For(block, IntImm(1), ForKind::kGpuBlocks, Barrier())),
            "tir interpreter: a barrier outside a gpu_block_threads loop");
  EXPECT_EQ(run(For(block, IntImm(1), ForKind::kGpuBlocks,
                    For(t, IntImm(2), ForKind::kGpuBlockThreads,
                        Allocate(shared, Store(shared, t, FloatImm(0)))))),
            "tir interpreter: shared buffer s is allocated by one thread of its block");
  EXPECT_EQ(run(For(block, IntImm(1), ForKind::kGpuBlocks,
                    For(t, IntImm(2), ForKind::kGpuBlockThreads,
                        For(block, IntImm(2), ForKind::kGpuBlockThreads, Barrier())))),
            "tir interpreter: gpu_block_threads loop block inside another");
}

}  // namespace
}  // namespace nimble::tir::testing
