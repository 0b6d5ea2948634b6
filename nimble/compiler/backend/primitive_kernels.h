// The kernels code generation makes for a compiled module [paper 4.5]: every
// primitive function whose operators all have compute definitions becomes
// one loop-IR kernel (their compute definitions composed, injective producers
// inlined, lowered and scheduled by te::Lower), and one whose outputs have `?`
// dimensions also gets a generated shape function: the composed output shapes
// as index arithmetic over the input shapes, with the same run-time checks, so
// a fused primitive costs one shape-function call like a single op does.
// Structurally equal primitives share their kernels.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "nimble/compiler/ir/module.h"
#include "nimble/compiler/te/matmul_schedule.h"
#include "nimble/compiler/tir/stmt.h"
#include "nimble/compiler/transform/shape_numbering.h"

namespace nimble::backend {

struct GeneratedKernel {
  std::string name;        // its symbol in the kernel library
  std::string shape_func;  // the shape function's symbol; empty for static outputs
  std::string fused;       // the ops it computes, "nn.dense+add+tanh"
  std::string signature;   // "(?, 768) float32, (768) float32 -> (?, 768) float32"
  bool gpu = false;        // a GPU kernel (its shape function runs on the CPU)
};

// The matrix-product template's knobs for a primitive (tuning chooses them
// per shape class: backend/template_tuning.h).
using MatMulKnobsOf = std::function<te::MatMulKnobs(const ir::FunctionNode&)>;

class PrimitiveKernels {
 public:
  // The kernels of `primitive`, or null when it runs a built-in kernel.
  const GeneratedKernel* Find(const ir::FunctionNode* primitive) const;
  // Every kernel and shape function, for code generation.
  const std::vector<tir::PrimFunc>& funcs() const { return funcs_; }
  const std::vector<GeneratedKernel>& kernels() const { return kernels_; }

 private:
  friend PrimitiveKernels GenerateKernels(const ir::IRModule&,
                                          const std::function<bool(const ir::FunctionNode&)>&,
                                          const MatMulKnobsOf&,
                                          const std::function<bool(const ir::FunctionNode&)>&);
  std::unordered_map<const ir::FunctionNode*, size_t> kernel_of_;
  std::vector<GeneratedKernel> kernels_;
  std::vector<tir::PrimFunc> funcs_;
};

// Generates kernels for the primitive functions of `module` that `wanted`
// accepts and code generation supports, matrix products with the template
// knobs `matmul` gives their primitive; the others are left to the
// runtime's built-in kernels. Primitives that `on_gpu` accepts are lowered
// for the GPU (te::Lower's GPU schedule); without it, all for the CPU.
// Throws nimble::Error for a multi-op primitive that cannot be generated
// (fusion only groups supported ops).
PrimitiveKernels GenerateKernels(const ir::IRModule& module,
                                 const std::function<bool(const ir::FunctionNode&)>& wanted,
                                 const MatMulKnobsOf& matmul,
                                 const std::function<bool(const ir::FunctionNode&)>& on_gpu = {});

// How the shape function of `primitive` computes each output dimension
// (transform::OutputDimForms): the composition the generated shape function
// is built from, on a variable per `?` input dimension, read after
// simplification. Nullopt when an op has no compute definition or its shape
// function reads values (a data-dependent or upper-bound op).
std::optional<std::vector<std::vector<transform::DimForm>>> OutputDimFormsOf(
    const ir::FunctionNode& primitive);

}  // namespace nimble::backend
