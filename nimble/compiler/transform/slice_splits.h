// SliceSplits: rewrites each field taken from a `split` into a
// `strided_slice` of the split's input. A split returns a tuple, so FuseOps
// gives it a kernel of its own, which writes every piece out only for its
// consumers to read them back; a slice is an injective op on a tensor, so
// each piece fuses into the kernel that reads it (an LSTM's or Tree-LSTM's
// gate activations read their gates straight from the matrix product).
#pragma once

#include <functional>

#include "nimble/compiler/ir/module.h"

namespace nimble::transform {

// Expects a type-checked module in A-normal form. Within each `let` chain,
// `let %v = %parts.k`, where `%parts` is bound earlier in the chain to a
// split whose pieces have static sizes along the split axis, becomes
// `let %v = strided_slice(x, begin=[b], end=[e], axes=[axis])` when
// `fusible` (given the type-checked slice) says the slice can fuse; the
// split's own binding goes once nothing reads it. Returns a new module,
// type-checked again.
ir::IRModule SliceSplits(const ir::IRModule& module,
                         const std::function<bool(const ir::CallNode&)>& fusible);

}  // namespace nimble::transform
