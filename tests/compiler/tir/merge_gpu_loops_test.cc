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

// A softmax over rows of c elements as lowering makes one: the rows' maxima
// and sums as block reductions (each thread of a block accumulating a stride
// of the row), then the elementwise quotient over all rows * c elements.
struct Softmax {
  Var rows = MakeVar("rows");
  Expr c = IntImm(3);
  Var b1 = MakeVar("b1");
  Var b2 = MakeVar("b2");
  Var j1 = MakeVar("j1");
  Var j2 = MakeVar("j2");
  Var i = MakeVar("i");
  Buffer x = MakeBuffer("x", {rows, c});
  Buffer out = MakeBuffer("out", {rows, c});
  Buffer max = MakeBuffer("max", {rows});
  Buffer sum = MakeBuffer("sum", {rows});
  Buffer acc1 = MakeBuffer("acc1", {IntImm(1)});
  Buffer acc2 = MakeBuffer("acc2", {IntImm(1)});

  Expr Row(const Var& b, const Var& j) const { return Load(x, Add(Mul(b, c), j)); }
  Stmt MaxLoop(const Expr& stored) const {
    const Expr larger = Compare(CompareOp::kGt, Row(b1, j1), Load(acc1, IntImm(0)));
    return For(b1, rows, ForKind::kGpuBlocks,
               Allocate(acc1, Seq({Store(acc1, IntImm(0), FloatImm(-1e30)),
                                   For(j1, c, ForKind::kGpuBlockStride,
                                       Store(acc1, IntImm(0),
                                             Select(larger, Row(b1, j1), Load(acc1, IntImm(0))))),
                                   Store(max, b1, stored)})));
  }
  Stmt SumLoop(const Expr& max_index) const {
    const Expr term = Call(Intrinsic::kExp, {Sub(Row(b2, j2), Load(max, max_index))});
    return For(
        b2, rows, ForKind::kGpuBlocks,
        Allocate(acc2, Seq({Store(acc2, IntImm(0), FloatImm(0)),
                            For(j2, c, ForKind::kGpuBlockStride,
                                Store(acc2, IntImm(0), Add(Load(acc2, IntImm(0)), term))),
                            Store(sum, b2, Call(Intrinsic::kBlockSum, {Load(acc2, IntImm(0))}))})));
  }
  Stmt QuotientLoop(const Expr& extent, const Expr& row) const {
    const Expr e = Call(Intrinsic::kExp, {Sub(Load(x, i), Load(max, row))});
    return For(i, extent, ForKind::kGpuThreads, Store(out, i, Div(e, Load(sum, row))));
  }
  Stmt Body(const Stmt& max_loop, const Stmt& sum_loop, const Stmt& quotient_loop) const {
    return Allocate(max, Allocate(sum, Seq({max_loop, sum_loop, quotient_loop})));
  }
  Stmt Standard() const {
    return Body(MaxLoop(Call(Intrinsic::kBlockMax, {Load(acc1, IntImm(0))})), SumLoop(b2),
                QuotientLoop(Mul(rows, c), FloorDiv(i, c)));
  }
  std::vector<float> Run(const Stmt& body) const {
    const PrimFunc func{"softmax", {x, out}, 1, body, PrimFunc::Device::kGpu};
    const Tensor input = TensorNode::FromVector<float>({2, 3}, kF32, {1, 2, 3, 0, 0, 0});
    const Tensor output = TensorNode::Empty({2, 3}, kF32);
    testing::Interpret(func, std::vector{input, output});
    return std::vector<float>(output->data<float>(), output->data<float>() + 6);
  }
};

TEST(MergeGpuThreadLoopsTest, ARowsReductionsAndItsElementwiseStageShareTheBlocks) {
  const Softmax k;
  const Stmt merged = MergeGpuThreadLoops(k.Standard());
  EXPECT_EQ(Count(ToString(merged), "gpu_blocks"), 1u);
  EXPECT_EQ(Count(ToString(merged), "gpu_threads"), 0u);
  EXPECT_NE(ToString(merged).find("  let b2 = b1\n"), std::string::npos) << ToString(merged);
  EXPECT_NE(ToString(merged).find("  for i.col in [0, 3) gpu_block_stride {\n"
                                  "    let i = ((b1 * 3) + i.col)\n"
                                  "    out[i] = (exp((x[i] - max[b1])) / sum[b1])\n"),
            std::string::npos)
      << ToString(merged);

  const std::vector<float> unmerged = k.Run(k.Standard());
  const std::vector<float> values = k.Run(merged);
  for (size_t e = 0; e < values.size(); ++e) EXPECT_FLOAT_EQ(values[e], unmerged[e]) << e;
  EXPECT_FLOAT_EQ(values[0] + values[1] + values[2], 1.0f);
  EXPECT_FLOAT_EQ(values[3], 1.0f / 3.0f);
}

TEST(MergeGpuThreadLoopsTest, RowsStayApartWhereABlockMightReadAnotherThreadsValue) {
  const Softmax k;
  const auto launches = [](const Stmt& stmt) {
    const std::string text = ToString(MergeGpuThreadLoops(stmt));
    return Count(text, "gpu_blocks") + Count(text, "gpu_threads");
  };
  const Expr intrinsic = Call(Intrinsic::kBlockMax, {Load(k.acc1, IntImm(0))});
  const Stmt standard_sum = k.SumLoop(k.b2);
  const Stmt standard_quotient = k.QuotientLoop(Mul(k.rows, k.c), FloorDiv(k.i, k.c));
  ASSERT_EQ(launches(k.Standard()), 1u);
  // The maximum stored is the thread's own partial one, not the block's: the
  // sum must wait for every thread's (the quotient may share the sum's blocks).
  EXPECT_EQ(launches(k.Body(k.MaxLoop(Load(k.acc1, IntImm(0))), standard_sum, standard_quotient)),
            2u);
  // The sum reads the next row's maximum.
  EXPECT_EQ(launches(k.Body(k.MaxLoop(intrinsic),
                            k.SumLoop(Min(Add(k.b2, IntImm(1)), Sub(k.rows, IntImm(1)))),
                            standard_quotient)),
            2u);
  // The quotient reads a row the element is not in, or runs over more or
  // fewer elements than the rows hold.
  EXPECT_EQ(launches(k.Body(k.MaxLoop(intrinsic), standard_sum,
                            k.QuotientLoop(Mul(k.rows, k.c), FloorMod(k.i, k.rows)))),
            2u);
  EXPECT_EQ(launches(k.Body(k.MaxLoop(intrinsic), standard_sum,
                            k.QuotientLoop(Mul(k.rows, IntImm(2)), FloorDiv(k.i, k.c)))),
            2u);
}

}  // namespace
}  // namespace nimble::tir
