// Lowering: tensor expressions to one loop-IR kernel, scheduled by the shape
// of each stage. A stage is a tensor that gets written to memory: each output,
// each reduction (its consumers read it many times), and each tensor read in
// several places whose inlined expression is not small. Every other compute
// tensor is inlined into its readers, so an elementwise chain or an epilogue
// costs no memory traffic of its own [paper 4.5; TVM's injective inlining].
//
// A matrix product (ScheduleHint::kMatMul or kOuterProduct) takes the
// template of matmul_schedule.h with `matmul_knobs`; when the next stage is
// its only reader, elementwise and of its shape, reading it at its own
// indices (a bias, a residual add, an activation: not, on the CPU after a
// dot-product tile, one with a transcendental call, which its own loop
// vectorises), the template stores that stage from each sum instead, and the
// product is never written to memory. Where that stage's shape may broadcast
// the product's (a residual add's `?` rows beside the product's), a GPU
// kernel branches: that where the two shapes are equal as it runs, the
// product written out and the stage's own loops elsewhere. Any other stage:
// its spatial loops but the innermost are fused into one outer loop, run in
// parallel on the process's thread pool in chunks of about 32K elements of
// work; the innermost loop is vectorised, or, when the outer loop is
// statically one iteration (a row vector), it is the parallel one. A reduction stage
// accumulates in a one-element temporary over its reduction loops, the
// innermost vectorised with reassociation.
//
// For the GPU (device kGpu) every stage is one launch over all its elements:
// a kGpuBlocks loop, a block of threads per element, for a reduction whose
// innermost axis may be long (the block's threads share that axis, then
// combine their sums); else a kGpuThreads loop, a thread per element, which
// accumulates a short reduction serially. Consecutive kGpuThreads loops
// that can share their threads are then merged (tir/merge_gpu_loops.h), so
// an elementwise chain's stages are one launch. A reduction that gets no
// template and is read only by elementwise stages, no element more than once
// in all, is computed inside their launches where they read it (an LSTM
// step's gate rows in the cell's blocks). A matrix product of 16 rows
// or more (or symbolic rows) whose element multiplies a value of each operand
// takes the GPU's template (gpu_matmul_schedule.h: a block per output tile,
// its operands staged in shared memory); one of fewer rows (a matrix-vector
// product) keeps a block per element. A next stage that only moves the
// product's elements (transposes and reshapes: TensorNode::placement) is
// stored by the product too, each sum at its place. (Under --kernels auto
// cuBLAS runs the unfused products instead.)
#pragma once

#include <string>
#include <vector>

#include "nimble/compiler/te/matmul_schedule.h"
#include "nimble/compiler/te/tensor.h"
#include "nimble/compiler/tir/stmt.h"

namespace nimble::te {

// The kernel `name` computing `outputs` from `inputs` (placeholders whose
// shapes are made of constants and shape variables). Its parameters are the
// inputs' buffers then the outputs', named after the tensors; the kernel
// checks `requirements` before touching memory. Throws nimble::Error for a
// tensor read that is neither an input nor computable from them.
tir::PrimFunc Lower(const std::string& name, const std::vector<Tensor>& inputs,
                    const std::vector<Tensor>& outputs,
                    const std::vector<Requirement>& requirements,
                    const MatMulKnobs& matmul_knobs = {},
                    tir::PrimFunc::Device device = tir::PrimFunc::Device::kCpu);

}  // namespace nimble::te
