// Float32 matrix products (nn.dense also on a bfloat16 weight: below):
// Relay's nn.dense and nn.batch_matmul, each in three implementations chosen
// by kernel name, so that tuning can measure them against each other:
//
//   nn.dense, nn.batch_matmul                    built-in: cache-blocked tiles of
//                                                dot products on the thread pool
//                                                (one row: a matrix-vector loop)
//   nn.dense.dnnl, nn.batch_matmul.dnnl          oneDNN's matmul primitive, created
//                                                once per shape and cached
//   nn.dense.openblas, nn.batch_matmul.openblas  cblas_sgemm, or cblas_sgemv for a
//                                                single row
//
// and nn.contrib_dense_pack, built-in only: nn.dense on a weight packed at
// compile time as [units / 16, k, 16] (transform/pack_dense_weights.h), in
// register tiles of outer products (6 rows x 16 columns on AVX2), plus an
// optional bias, from which the tiles' sums start.
//
// Arguments (kernel.h: inputs, then the output):
//   nn.dense        data [d1..dn, k], weight [units, k], out [d1..dn, units].
//                   Attrs: units (None or weight's dimension 0), out_dtype.
//   nn.contrib_dense_pack  data [d1..dn, k], weight [units / 16, k, 16],
//                   optionally bias [units], out [d1..dn, units]. Attrs:
//                   out_dtype, activation (None or "gelu": gelu of each
//                   element, applied while the tile is in cache).
//   nn.batch_matmul x [b, m, k] ([b, k, m] with transpose_a), y [b, n, k]
//                   ([b, k, n] with transpose_b=False), out [b, m, n]; x's or
//                   y's batch may be 1 and broadcasts. Attrs: out_dtype,
//                   transpose_a (default False), transpose_b (default True).
// out_dtype must be None or float32. Binding rejects other attributes.
//
// nn.dense's weight may also be bfloat16 (DLPack {kDLBfloat, 16}: the upper
// halves of float32s, as --precision bf16 stores constant weights), with
// data and out still float32: the data is rounded to bfloat16 (nearest
// even) once per call, and the products are bf16 with float32 sums. nn.dense
// runs AVX512-BF16 dot products (kernels/dense_bf16.h), nn.dense.dnnl oneDNN's
// bf16 matmul (AMX where the CPU has it), and nn.dense.openblas refuses the
// weight (OpenBLAS has no bf16 product here). Without AVX512-BF16 (including
// NIMBLE_CPU_FEATURES_OFF=avx512_bf16, and every non-x86 host) a bf16 weight
// throws nimble::Error (cpu_features.h: RequireBf16Products) rather than
// running in float32. Every other operand of every op is float32 only.
//
// oneDNN is optional (NIMBLE_HAVE_DNNL): in a build without it, such as the
// aarch64 one, binding a .dnnl kernel throws nimble::Error saying so.
//
// Threads: the built-in kernels run on the process's ThreadPool. The library
// kernels are given the same number of threads, so nothing oversubscribes the
// cores: OpenBLAS's count (process-wide) is set once, and OpenMP's (oneDNN's
// CPU runtime; the count belongs to the calling thread) once per thread that
// runs a oneDNN kernel.
#pragma once

#include "nimble/vm/kernel.h"

namespace nimble::vm {

void RegisterDenseKernels(KernelRegistry& registry);

}  // namespace nimble::vm
