// tir::MergeGpuThreadLoops: which consecutive gpu_threads loops share their
// threads (printed loop IR), and that a merged kernel computes what the
// separate loops did (run by the loop-IR interpreter).
#include "nimble/compiler/tir/merge_gpu_loops.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nimble/compiler/tir/printer.h"
#include "nimble/vm/tensor.h"
#include "tests/compiler/tir/interpreter.h"

namespace nimble::tir {
namespace {

constexpr DataType kF32 = DataType::Float32();

Buffer MakeBuffer(const std::string& name, std::vector<Expr> shape) {
  return std::make_shared<BufferNode>(name, kF32, std::move(shape));
}

size_t Count(const std::string& text, const std::string& part) {
  size_t count = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
  return count;
}

// tmp[i] = x[i] * 2 over `first`, then out[i] = f(tmp, i) over `second`:
// a two-stage GPU kernel as lowering makes one, tmp a temporary.
struct TwoStages {
  Var n = MakeVar("n");
  Var i = MakeVar("i");
  Var j = MakeVar("j");
  Buffer x = MakeBuffer("x", {n});
  Buffer out = MakeBuffer("out", {n});
  Buffer tmp = MakeBuffer("tmp", {n});

  Stmt Body(const Expr& first, const Expr& second, const Stmt& second_body) const {
    return Allocate(
        tmp, Seq({For(i, first, ForKind::kGpuThreads, Store(tmp, i, Mul(Load(x, i), FloatImm(2)))),
                  For(j, second, ForKind::kGpuThreads, second_body)}));
  }
  Stmt ReadOwn() const { return Store(out, j, Add(Load(tmp, j), Load(x, j))); }

  PrimFunc Func(const Stmt& body) const {
    return {"two_stages", {x, out}, 1, body, PrimFunc::Device::kGpu};
  }
};

TEST(MergeGpuThreadLoopsTest, AStageReadingItsOwnElementSharesTheThreads) {
  const TwoStages k;
  const Stmt merged = MergeGpuThreadLoops(k.Body(k.n, k.n, k.ReadOwn()));
  EXPECT_EQ(ToString(merged),
            "allocate tmp: float32[n]\n"
            "for i in [0, n) gpu_threads {\n"
            "  tmp[i] = (x[i] * 2.0f)\n"
            "  let j = i\n"
            "  out[j] = (tmp[j] + x[j])\n"
            "}\n");

  const Tensor input = TensorNode::FromVector<float>({4}, kF32, {1, 2, 3, 4});
  const Tensor output = TensorNode::Empty({4}, kF32);
  testing::Interpret(k.Func(merged), std::vector{input, output});
  EXPECT_EQ(std::vector<float>(output->data<float>(), output->data<float>() + 4),
            (std::vector<float>{3, 6, 9, 12}));
}

TEST(MergeGpuThreadLoopsTest, WhatAnotherThreadMayTouchKeepsTheLoopsApart) {
  const TwoStages k;
  auto loops = [](const Stmt& stmt) { return Count(ToString(stmt), "gpu_threads"); };
  // Thread j reads element j + 1, which another thread stores.
  const Expr next = Load(k.tmp, Add(k.j, IntImm(1)));
  EXPECT_EQ(loops(MergeGpuThreadLoops(k.Body(k.n, Sub(k.n, IntImm(1)), Store(k.out, k.j, next)))),
            2u);
  // The second loop stores what the first reads.
  EXPECT_EQ(loops(MergeGpuThreadLoops(k.Body(k.n, k.n, Store(k.x, k.j, Load(k.tmp, k.j))))), 2u);
  // Extents that may differ.
  EXPECT_EQ(loops(MergeGpuThreadLoops(k.Body(k.n, Mul(k.n, IntImm(2)), k.ReadOwn()))), 2u);
  // Equal extents written differently merge.
  EXPECT_EQ(
      loops(MergeGpuThreadLoops(k.Body(Mul(k.n, IntImm(2)), Mul(IntImm(2), k.n), k.ReadOwn()))),
      1u);
}

}  // namespace
}  // namespace nimble::tir
