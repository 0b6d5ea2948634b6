#include "nimble/compiler/te/gpu_matmul_schedule.h"

#include <string>
#include <utility>
#include <vector>

#include "nimble/vm/error.h"

namespace nimble::te {
namespace {

constexpr int kMaxThreads = 1024;
constexpr int kMaxSumsPerThread = 64;
constexpr int kMaxSharedBytes = 48 * 1024;
constexpr int kMaxSide = 1024;

bool Uses(const Expr& expr, const tir::VarNode* var) {
  if (expr.get() == var) return true;
  bool found = false;
  tir::ForEachOperand(expr, [&](const Expr& operand) { found = found || Uses(operand, var); });
  return found;
}

Expr CeilDiv(const Expr& a, int64_t b) {
  return tir::FloorDiv(tir::Add(a, tir::IntImm(b - 1)), tir::IntImm(b));
}

Expr Less(const Expr& a, const Expr& b) {
  return tir::Compare(tir::CompareOp::kLt, a, b);
}

// Which operand of the product of two values an element is (the first: read
// without the output's column; the second: without its row).
enum class Operand { kFirst, kSecond };

class GpuMatMulScheduler {
 public:
  GpuMatMulScheduler(const MatMulStage& stage, const GpuMatMulTile& tile)
      : stage_(stage),
        tile_(tile),
        rank_(stage.shape.size()),
        threads_(tile.thread_rows * tile.thread_cols),
        block_rows_(tile.thread_rows * tile.sums_rows),
        block_cols_(tile.thread_cols * tile.sums_cols) {}

  // Finds which side of the element's product each operand is; false when
  // the element is no such product.
  bool FindOperands() {
    if (stage_.reduce_kind != ReduceKind::kSum || !stage_.dtype.is_float()) return false;
    const tir::Var row = tir::MakeVar("row"), col = tir::MakeVar("col"), k = tir::MakeVar("k");
    std::vector<Expr> indices;
    for (size_t d = 0; d + 2 < rank_; ++d) indices.push_back(tir::MakeVar("b"));
    indices.push_back(row);
    indices.push_back(col);
    const Expr element = stage_.element(indices, k);
    if (element->kind != tir::ExprKind::kBinary) return false;
    const auto& product = static_cast<const tir::BinaryNode&>(*element);
    if (product.op != tir::BinaryOp::kMul) return false;
    if (!Uses(product.a, col.get()) && !Uses(product.b, row.get())) {
      first_is_a_ = true;
    } else if (!Uses(product.b, col.get()) && !Uses(product.a, row.get())) {
      first_is_a_ = false;
    } else {
      return false;
    }
    return true;
  }

  tir::Stmt Run() {
    const Expr& rows = stage_.shape[rank_ - 2];
    const Expr& cols = stage_.shape[rank_ - 1];
    const Expr row_blocks = CeilDiv(rows, block_rows_);
    const Expr col_blocks = CeilDiv(cols, block_cols_);
    Expr batches = tir::IntImm(1);
    for (size_t d = 0; d + 2 < rank_; ++d) batches = tir::Mul(batches, stage_.shape[d]);

    const tir::Var block = tir::MakeVar(stage_.name + ".block");
    const tir::Var col_block = tir::MakeVar(stage_.name + ".col_block");
    const tir::Var row_block = tir::MakeVar(stage_.name + ".row_block");
    const tir::Var batch = tir::MakeVar(stage_.name + ".batch");
    first_ = Shared("first", block_rows_);
    second_ = Shared("second", block_cols_);
    const tir::Var thread = tir::MakeVar(stage_.name + ".thread");
    // The batch indices, outermost first.
    Expr remaining = batch;
    batch_indices_.resize(rank_ - 2);
    for (size_t d = rank_ - 2; d-- > 0;) {
      batch_indices_[d] = d == 0 ? remaining : tir::FloorMod(remaining, stage_.shape[d]);
      remaining = tir::FloorDiv(remaining, stage_.shape[d]);
    }
    row_begin_ = tir::Mul(row_block, tir::IntImm(block_rows_));
    col_begin_ = tir::Mul(col_block, tir::IntImm(block_cols_));

    tir::Stmt body = tir::For(thread, tir::IntImm(threads_), tir::ForKind::kGpuBlockThreads,
                              ThreadBody(thread, rows, cols));
    body = tir::Allocate(first_, tir::Allocate(second_, body));
    body = tir::Let(batch, tir::FloorDiv(tir::FloorDiv(block, col_blocks), row_blocks), body);
    body = tir::Let(row_block, tir::FloorMod(tir::FloorDiv(block, col_blocks), row_blocks), body);
    body = tir::Let(col_block, tir::FloorMod(block, col_blocks), body);
    return tir::For(block, tir::Mul(batches, tir::Mul(row_blocks, col_blocks)),
                    tir::ForKind::kGpuBlocks, body);
  }

 private:
  // One slice of `depth` values along k for each of `lines` rows or columns,
  // stored as [k][line] so that a thread's sums read one line's neighbours,
  // with a pitch of lines + 1: a copy along k stores neighbouring threads'
  // values a pitch apart, and an odd pitch puts them in different banks.
  tir::Buffer Shared(const std::string& what, int lines) {
    return std::make_shared<tir::BufferNode>(
        stage_.name + "." + what, stage_.dtype,
        std::vector<Expr>{tir::IntImm(static_cast<int64_t>(tile_.depth) * (lines + 1))},
        tir::MemoryScope::kGpuShared);
  }

  // The value of `operand` at output row or column `line` and reduction
  // index `k` (of this block's batch).
  Expr OperandValue(Operand operand, const Expr& line, const Expr& k) {
    std::vector<Expr> indices = batch_indices_;
    // The operand does not read the other index (FindOperands): a variable
    // bound nowhere stands for it, which no constant folding can reshape.
    const tir::Var unread = tir::MakeVar("unread");
    indices.push_back(operand == Operand::kFirst ? line : unread);
    indices.push_back(operand == Operand::kSecond ? line : unread);
    const Expr element = stage_.element(indices, k);
    const auto& product = static_cast<const tir::BinaryNode&>(*element);
    Expr value = (operand == Operand::kFirst) == first_is_a_ ? product.a : product.b;
    if (Uses(value, unread.get())) throw Error("gpu matmul schedule: an operand changed sides");
    return value;
  }

  // What thread `thread` runs: zero its sums, then for each slice of k copy
  // its share of both operands' slices, and add its products; then store.
  tir::Stmt ThreadBody(const tir::Var& thread, const Expr& rows, const Expr& cols) {
    const Expr thread_row = tir::FloorDiv(thread, tir::IntImm(tile_.thread_cols));
    const Expr thread_col = tir::FloorMod(thread, tir::IntImm(tile_.thread_cols));
    const int sums_count = tile_.sums_rows * tile_.sums_cols;
    const tir::Buffer sums = std::make_shared<tir::BufferNode>(
        stage_.name + ".sums", stage_.dtype, std::vector<Expr>{tir::IntImm(sums_count)});
    const tir::Var zeroed = tir::MakeVar(stage_.name + ".s");
    const tir::Stmt zero = tir::For(zeroed, tir::IntImm(sums_count), tir::ForKind::kUnrolled,
                                    tir::Store(sums, zeroed, tir::Constant(stage_.dtype, 0)));

    const tir::Var step = tir::MakeVar(stage_.name + ".step");
    const Expr k_begin = tir::Mul(step, tir::IntImm(tile_.depth));
    const tir::Var kk = tir::MakeVar(stage_.name + ".kk");
    const tir::Var i = tir::MakeVar(stage_.name + ".i");
    const tir::Var j = tir::MakeVar(stage_.name + ".j");
    const Expr local_row = tir::Add(thread_row, tir::Mul(i, tir::IntImm(tile_.thread_rows)));
    const Expr local_col = tir::Add(thread_col, tir::Mul(j, tir::IntImm(tile_.thread_cols)));
    const Expr sum_index = tir::Add(tir::Mul(i, tir::IntImm(tile_.sums_cols)), j);
    const Expr product = tir::Mul(
        tir::Load(first_, tir::Add(tir::Mul(kk, tir::IntImm(block_rows_ + 1)), local_row)),
        tir::Load(second_, tir::Add(tir::Mul(kk, tir::IntImm(block_cols_ + 1)), local_col)));
    const tir::Stmt add = tir::For(
        kk, tir::IntImm(tile_.depth), tir::ForKind::kSerial,
        SumsLoop(i, j, tir::Store(sums, sum_index, tir::Add(tir::Load(sums, sum_index), product))));
    const tir::Stmt slice =
        tir::Seq({Copy(Operand::kFirst, thread, k_begin, rows, block_rows_, /*along_k=*/true),
                  Copy(Operand::kSecond, thread, k_begin, cols, block_cols_,
                       /*along_k=*/stage_.form != ScheduleHint::kOuterProduct),
                  tir::Barrier(), add, tir::Barrier()});

    const Expr row = tir::Add(row_begin_, local_row);
    const Expr col = tir::Add(col_begin_, local_col);
    std::vector<Expr> indices = batch_indices_;
    indices.push_back(row);
    indices.push_back(col);
    const tir::Stmt store =
        SumsLoop(i, j,
                 tir::If(tir::And(Less(row, rows), Less(col, cols)),
                         StoreSum(stage_, indices, tir::Load(sums, sum_index))));
    return tir::Allocate(
        sums,
        tir::Seq({zero,
                  tir::For(step, CeilDiv(stage_.depth, tile_.depth), tir::ForKind::kSerial, slice),
                  store}));
  }

  tir::Stmt SumsLoop(const tir::Var& i, const tir::Var& j, tir::Stmt body) const {
    return tir::For(
        i, tir::IntImm(tile_.sums_rows), tir::ForKind::kUnrolled,
        tir::For(j, tir::IntImm(tile_.sums_cols), tir::ForKind::kUnrolled, std::move(body)));
  }

  // The block's threads copy `operand`'s slice [k_begin, k_begin + depth) of
  // its `lines` rows or columns from `line_begin` on (`extent` of them in
  // all): value e of the slice to thread e mod threads. `along_k`: e's
  // neighbours are neighbours in k (the operand is read along k), else in
  // the line.
  tir::Stmt Copy(Operand operand, const tir::Var& thread, const Expr& k_begin, const Expr& extent,
                 int lines, bool along_k) {
    const tir::Buffer& shared = operand == Operand::kFirst ? first_ : second_;
    const Expr& line_begin = operand == Operand::kFirst ? row_begin_ : col_begin_;
    const int64_t values = static_cast<int64_t>(tile_.depth) * lines;
    const tir::Var round = tir::MakeVar(shared->name + ".copy");
    const tir::Var e = tir::MakeVar(shared->name + ".e");
    const Expr depth = tir::IntImm(tile_.depth), width = tir::IntImm(lines);
    const Expr kk = along_k ? tir::FloorMod(e, depth) : tir::FloorDiv(e, width);
    const Expr line = along_k ? tir::FloorDiv(e, depth) : tir::FloorMod(e, width);
    const Expr k = tir::Add(k_begin, kk);
    const Expr global_line = tir::Add(line_begin, line);
    const Expr slot = tir::Add(tir::Mul(kk, tir::IntImm(lines + 1)), line);
    tir::Stmt copy = tir::If(tir::And(Less(global_line, extent), Less(k, stage_.depth)),
                             tir::Store(shared, slot, OperandValue(operand, global_line, k)),
                             tir::Store(shared, slot, tir::Constant(shared->dtype, 0)));
    if (values % threads_ != 0) copy = tir::If(Less(e, tir::IntImm(values)), copy);
    copy = tir::Let(e, tir::Add(tir::Mul(round, tir::IntImm(threads_)), thread), copy);
    return tir::For(round, tir::IntImm((values + threads_ - 1) / threads_), tir::ForKind::kUnrolled,
                    copy);
  }

  const MatMulStage& stage_;
  const GpuMatMulTile tile_;
  const size_t rank_;
  const int threads_;
  const int block_rows_;
  const int block_cols_;
  bool first_is_a_ = true;
  tir::Buffer first_;
  tir::Buffer second_;
  std::vector<Expr> batch_indices_;
  Expr row_begin_;
  Expr col_begin_;
};

}  // namespace

void CheckGpuMatMulTile(const GpuMatMulTile& tile) {
  const auto check = [](int64_t value, int64_t limit, const std::string& what) {
    if (value < 1 || value > limit) {
      throw Error("gpu matmul schedule: " + what + " must be between 1 and " +
                  std::to_string(limit) + ", got " + std::to_string(value));
    }
  };
  for (int side :
       {tile.thread_rows, tile.thread_cols, tile.sums_rows, tile.sums_cols, tile.depth}) {
    check(side, kMaxSide, "each side of the tile");
  }
  check(static_cast<int64_t>(tile.thread_rows) * tile.thread_cols, kMaxThreads, "threads");
  check(static_cast<int64_t>(tile.sums_rows) * tile.sums_cols, kMaxSumsPerThread,
        "a thread's sums");
  const int64_t lines = static_cast<int64_t>(tile.thread_rows) * tile.sums_rows +
                        static_cast<int64_t>(tile.thread_cols) * tile.sums_cols + 2;
  check(lines * tile.depth * 8, kMaxSharedBytes, "shared bytes for float64");
}

std::optional<tir::Stmt> ScheduleGpuMatMul(const MatMulStage& stage, const GpuMatMulTile& tile) {
  CheckGpuMatMulTile(tile);
  GpuMatMulScheduler scheduler(stage, tile);
  if (!scheduler.FindOperands()) return std::nullopt;
  return scheduler.Run();
}

}  // namespace nimble::te
