// A batch of products that share their data is one product: nn.batch_matmul
// of data [1, m, k] (a batch of one, broadcast) and a constant weight
// [b, n, k] computes, for every b, the same data times a different [n, k]
// matrix, which is nn.dense of the data and the weight read as [b * n, k],
// its [m, b * n] result laid out as [b, m, n] by a reshape and a transpose.
// BERT's query, key and value projections are such calls (the weights' per-
// head views); as b small products they ran at 60% of the FMA rate that one
// dense reaches, and the dense's weight can then be packed
// (pack_dense_weights.h). The constant may be either side: weight times
// data gives [b, n, m], the same dense transposed the other way. Only a
// packed dense gains: unpacked, the dense runs the same kernel as the
// batch_matmul did, and its layout transpose is one more kernel and
// allocation, so the rewrite asks the packing pass's question first.
#pragma once

#include "nimble/compiler/ir/module.h"
#include "nimble/compiler/transform/pack_dense_weights.h"

namespace nimble::transform {

// Expects a type-checked module; returns a new one (or, when it changes
// nothing, the same one), type-checked again, in
// which every float32 nn.batch_matmul (transpose_b, not transpose_a) of a
// static constant [b, n, k] and a non-constant [1, m, k] (m may be symbolic),
// with b * n a multiple of kDensePackBlock, whose dense `pack` accepts (data
// [1, m, k], weight [b * n, k]) is a dense, reshape and transpose as above
// (each distinct weight reshaped once).
ir::IRModule BatchMatMulToDense(const ir::IRModule& module, const PackDensePredicate& pack);

}  // namespace nimble::transform
