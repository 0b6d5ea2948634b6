// Reduced precision as an opt-in (`--precision bf16`): every float32 nn.dense
// whose weight is a constant [units, k] gets that weight rounded once, here,
// to bfloat16 (round to nearest even), so the runtime's kernels multiply in
// bf16 with float32 sums (AVX512-BF16 dot products, or oneDNN's bf16 matmul,
// which takes AMX tiles where the CPU has them: vm/kernels/dense.h). Only the
// weights change: data, outputs and every other op stay float32, and a
// product of two computed values (attention's batch_matmul) is left in
// float32. The weights' bytes halve, which is most of what a weight-bound
// product (an LSTM step, BERT at a short length) reads.
#pragma once

#include "nimble/compiler/ir/module.h"

namespace nimble::transform {

// Expects a type-checked module; returns it type-checked again with the
// dense weights above in bfloat16 (each distinct constant converted once,
// named NAME.bf16), or the same module when there is none.
ir::IRModule ConvertDenseWeightsToBf16(const ir::IRModule& module);

}  // namespace nimble::transform
