// The kernel chosen by measurement [paper 4.5]: each nn.dense and
// nn.batch_matmul primitive runs whichever of its candidate kernels is
// fastest on this host for its shape class: the generated kernel, the
// runtime's built-in one, oneDNN's or OpenBLAS's (nimble/vm/kernels/dense.h).
// No one of them wins everywhere: on a 2-core Zen3 the built-in dense leads
// on BERT's projections while oneDNN is 1.8x faster on attention's batched
// products at 128 tokens.
//
// A shape class is the primitive's input shapes with each `?` dimension
// measured at kDynamicExtent (matmul_sites.h). A program whose weights
// outgrow the caches has its sites measured with their weights read from
// memory (WeightResidence), recorded apart from the cached measurements. Under auto the libraries
// compete there only where there is no `?`: at one length measured back to
// back their wins did not hold on the dataset's other lengths. At a `?` site
// they are weighed at larger extents instead, where one may take over from
// the choice through a run-time switch (vm/extent_switch.h). Each
// candidate is timed with the same short parallel work on the runtime's
// thread pool after each call, so that a library whose threads spin on after
// a call pays for slowing it; a site's candidates take turns, five rounds of
// one batch each, so that a burst of load from another tenant of a shared
// host falls on all of them. Measurements go to a SQLite tuning database,
// keyed by host (CPU model), threads, kernel, attributes and shape class, and
// later compiles read them instead of measuring again. Only a compile for
// the host's own target measures; a cross compile (--target arm on x86)
// keeps the built-in kernels.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "nimble/compiler/backend/matmul_sites.h"
#include "nimble/compiler/backend/vm_compiler.h"
#include "nimble/compiler/ir/module.h"

namespace nimble::backend {

// The choice for every single-op nn.dense and nn.batch_matmul primitive of
// `module` (after the pipeline) under options.kernels. A site that
// `nimble-bench tune` tuned on this host (tuned_sites) takes the tuned
// choice: under auto its best candidate, under generated its best template
// configuration (unless options.tuned_matmul is off). Otherwise "auto" weighs
// the generated kernel (options.matmul) against the runtime's candidates
// (LibraryCandidates) and "library" oneDNN against OpenBLAS, by measurement.
// Other choices, other targets than the host's, and float types other than
// float32 choose nothing (the primitive keeps what GeneratesOp says). Throws
// nimble::Error when the tuning database cannot be opened or written.
KernelChoices ChooseMatMulKernels(const ir::IRModule& module, const CompileOptions& options);

// The runtime kernels `choice` ("auto" or "library") weighs at a site of
// `op` (nn.dense, nn.batch_matmul), `dynamic` when its shapes have a `?`.
std::vector<std::string> LibraryCandidates(const std::string& op, bool dynamic,
                                           const std::string& choice);

// Whether nn.dense on these data and weight types (float32, the weight a
// static [units, k]) runs faster on the runtime's packed kernel
// (nn.contrib_dense_pack, transform/pack_dense_weights.h) than on the fastest
// candidate ChooseMatMulKernels would give it, measured and recorded the
// same way (kernel "nn.contrib_dense_pack"), the weight where its program
// keeps it (`residence`, from ResidenceOfWeights). False unless options.kernels is "auto" and
// the target is the host's.
bool PackingDenseWins(const ir::TensorTypeNode& data, const ir::TensorTypeNode& weight,
                      WeightResidence residence, const CompileOptions& options);

// The tuning database a compile uses unless told otherwise:
// $NIMBLE_TUNING_DB, else $XDG_CACHE_HOME/nimble/tuning.db, else
// ~/.cache/nimble/tuning.db; empty when none of them can be formed.
std::string DefaultTuningDatabase();

}  // namespace nimble::backend
