// Weight packing for matrix products (TVM's alter-op-layout of nn.dense): a
// float32 nn.dense whose weight is a constant [units, k], units a multiple of
// 16, becomes nn.contrib_dense_pack on that weight laid out once, here, as
// [units / 16, k, 16]. The runtime's kernel then reads each block of 16
// output columns contiguously in register-tile order, where the plain layout
// costs the built-in kernel horizontal sums and the libraries a packing copy
// on every call. Only the caller knows whether a site gains (`pack`, which
// backend/kernel_tuning.h answers by measurement); a weight that is not a
// constant, such as a function parameter, is left alone. A constant vector
// [units] added to a packed product that nothing else reads becomes the
// product's bias (a chain of them, their sum): the kernel starts its sums
// from it, where the add was one more pass over the product, written by
// both cores, read back by one (an LSTM's input projection plus b_ih plus
// b_hh: 12-18 us a 23-token sentence, the whole pass saved). Likewise a gelu
// of a packed product that nothing else reads becomes the product's
// activation, applied by the kernel to each tile while it is in cache
// (BERT's feed-forward layer: 0.9 ms of a 53-token inference's 50 was that
// separate pass).
#pragma once

#include <functional>

#include "nimble/compiler/ir/module.h"

namespace nimble::transform {

// Columns per block of a packed weight: two AVX2 vectors, one AVX-512 vector.
inline constexpr int64_t kDensePackBlock = 16;

// Whether to pack the nn.dense call of these data and weight types; the call
// may run more than once per run of the program when `repeated`
// (repeated_code.h), so that its weight may stay in cache between calls.
using PackDensePredicate = std::function<bool(const ir::TensorTypeNode& data,
                                              const ir::TensorTypeNode& weight, bool repeated)>;

// Expects a type-checked module; returns a new one (or, when it changes
// nothing, the same one), type-checked again, in
// which every packable nn.dense call that `pack` accepts is rewritten (each
// distinct weight packed once), and the constant biases added to them are
// folded in as above.
ir::IRModule PackDenseWeights(const ir::IRModule& module, const PackDensePredicate& pack);

}  // namespace nimble::transform
