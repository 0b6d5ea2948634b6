// SinkSlices: computes only the part of a tensor that is read. BERT
// classifies from the first token's vector alone (`take(%x, 0, axis=1)`
// after the last layer), yet its last layer computes every token's. Each op
// between that take and the layer's input computes a row of its output from
// the same row of one input (the dense products, the bias and residual adds,
// the layer norms, the softmax and the attention products, the reshapes and
// transposes between heads and tokens), so the row can be taken before them:
// the last layer's query projection, attention, output projection and
// feed-forward products run on one row instead of one per token, and only
// the keys and values stay whole (about 7% of BERT-base's multiply-adds).
#pragma once

#include "nimble/compiler/ir/module.h"

namespace nimble::transform {

// Expects a type-checked module in A-normal form. Within each `let` chain, a
// `take` of one constant index along an axis (index 0, an index below a
// static extent, or any index in "fast" mode, which promises it is in range)
// reads one row of its data. What each value's readers read travels back up
// the chain; a value read only in one range along one axis, computed by an
// op with a rule for it (broadcast and elementwise ops without shape or axis
// attributes, nn.dense, nn.contrib_dense_pack, nn.batch_matmul,
// nn.layer_norm and nn.softmax off their axis, transpose, reshape where the
// axis maps to one input axis), is computed for that range only, from the
// matching ranges of its inputs; an input that is read whole elsewhere is
// sliced (`strided_slice`) once. The take then reads its row from the
// narrowed value. Op calls whose results nothing reads are dropped. Returns a
// new module, type-checked again.
ir::IRModule SinkSlices(const ir::IRModule& module);

}  // namespace nimble::transform
