#include "nimble/compiler/backend/pipeline.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <sstream>

#include "nimble/compiler/backend/kernel_tuning.h"
#include "nimble/compiler/backend/primitive_kernels.h"
#include "nimble/compiler/ir/constant_bytes.h"
#include "nimble/compiler/op/compute.h"
#include "nimble/compiler/support/deep_stack.h"
#include "nimble/compiler/transform/batch_matmul_to_dense.h"
#include "nimble/compiler/transform/bf16_weights.h"
#include "nimble/compiler/transform/coalesce_storage.h"
#include "nimble/compiler/transform/dead_code.h"
#include "nimble/compiler/transform/eta_expand.h"
#include "nimble/compiler/transform/fold_constant.h"
#include "nimble/compiler/transform/forward_tuple_fields.h"
#include "nimble/compiler/transform/fuse_ops.h"
#include "nimble/compiler/transform/inline_functions.h"
#include "nimble/compiler/transform/insert_kills.h"
#include "nimble/compiler/transform/lambda_lift.h"
#include "nimble/compiler/transform/manifest_alloc.h"
#include "nimble/compiler/transform/pack_dense_weights.h"
#include "nimble/compiler/transform/plan_devices.h"
#include "nimble/compiler/transform/share_shapes.h"
#include "nimble/compiler/transform/sink_slices.h"
#include "nimble/compiler/transform/slice_splits.h"
#include "nimble/compiler/transform/to_anf.h"
#include "nimble/compiler/transform/tree_batching.h"
#include "nimble/vm/error.h"

namespace nimble::backend {
namespace {

// A pass that needs no options.
PassInfo Plain(std::string name, ir::IRModule (*pass)(const ir::IRModule&)) {
  return {std::move(name),
          [pass](const ir::IRModule& module, const CompileOptions&) { return pass(module); }};
}

// Whether `call` may join a fused primitive: only a generated kernel can run
// one.
std::function<bool(const ir::CallNode&)> Fusible(const CompileOptions& options) {
  return [&options](const ir::CallNode& call) {
    return GeneratesOp(static_cast<const ir::OpNode&>(*call.callee).name, options) &&
           op::CanGenerate(call);
  };
}

// Whether a dense of these types in `module` runs faster on a packed weight
// (measured with the weight where the program keeps it).
transform::PackDensePredicate PackingWins(const ir::IRModule& module,
                                          const CompileOptions& options) {
  return [&options, constant_bytes = ir::ConstantBytes(module)](
             const ir::TensorTypeNode& data, const ir::TensorTypeNode& weight, bool repeated) {
    return PackingDenseWins(data, weight, ResidenceOfWeights(constant_bytes, repeated), options);
  };
}

// A memory-planning pass, skipped when the options turn planning off.
PassInfo Planning(std::string name, ir::IRModule (*pass)(const ir::IRModule&)) {
  return {std::move(name), [pass](const ir::IRModule& module, const CompileOptions& options) {
            return options.plan_memory ? pass(module) : module;
          }};
}

}  // namespace

const std::vector<PassInfo>& Passes() {
  static const std::vector<PassInfo> passes = {
      Plain("inline", transform::InlineFunctions),
      Plain("fold-constant", transform::FoldConstants),
      {"tree-batching",
       [](const ir::IRModule& module, const CompileOptions& options) {
         return options.batch_trees ? transform::BatchTreeRecursion(module) : module;
       }},
      {"batch-matmul-to-dense",
       [](const ir::IRModule& module, const CompileOptions& options) {
         // In bf16 a product on a constant weight is a dense, so that its
         // weight goes to bf16 too.
         if (options.precision == "bf16") {
           return transform::BatchMatMulToDense(
               module,
               [](const ir::TensorTypeNode&, const ir::TensorTypeNode&, bool) { return true; });
         }
         return transform::BatchMatMulToDense(module, PackingWins(module, options));
       }},
      {"bf16-weights",
       [](const ir::IRModule& module, const CompileOptions& options) {
         return options.precision == "bf16" ? transform::ConvertDenseWeightsToBf16(module) : module;
       }},
      {"pack-dense-weights",
       [](const ir::IRModule& module, const CompileOptions& options) {
         return transform::PackDenseWeights(module, PackingWins(module, options));
       }},
      Plain("eta-expand", transform::EtaExpandConstructors),
      Plain("anf", transform::ToANormalForm),
      Plain("lambda-lift", transform::LambdaLift),
      Plain("sink-slices", transform::SinkSlices),
      {"slice-splits",
       [](const ir::IRModule& module, const CompileOptions& options) {
         // A split's pieces as slices pay only when they fuse into their readers.
         return options.fuse_ops ? transform::SliceSplits(module, Fusible(options)) : module;
       }},
      {"fuse",
       [](const ir::IRModule& module, const CompileOptions& options) {
         return transform::FuseOps(module,
                                   {.enabled = options.fuse_ops,
                                    .fusible = Fusible(options),
                                    .anchors_take_injective = options.kernels == "generated"});
       }},
      {"dead-code",
       [](const ir::IRModule& module, const CompileOptions& options) {
         return transform::EliminateDeadCode(module, options.entry_functions);
       }},
      Plain("manifest-alloc", transform::ManifestAlloc),
      Plain("forward-tuple-fields", transform::ForwardTupleFields),
      {"share-shapes",
       [](const ir::IRModule& module, const CompileOptions& options) {
         return transform::ShareShapes(module, options.entry_functions, OutputDimFormsOf);
       }},
      {"plan-devices",
       [](const ir::IRModule& module, const CompileOptions& options) {
         return transform::PlanDevices(module, TargetDevice(options.target));
       }},
      Planning("coalesce-storage", transform::CoalesceStorage),
      Planning("insert-kills", transform::InsertKills),
  };
  return passes;
}

namespace {

// Throws nimble::Error for a name that is not a pass, listing them.
void CheckPassName(const std::string& name, const std::string& where) {
  std::string names;
  for (const PassInfo& pass : Passes()) {
    if (pass.name == name) return;
    names += (names.empty() ? "" : ", ") + pass.name;
  }
  throw Error(where + "unknown pass '" + name + "' (passes: " + names + ")");
}

}  // namespace

std::vector<std::string> DisabledPasses() {
  const char* value = std::getenv("NIMBLE_DISABLE_PASSES");
  std::vector<std::string> disabled;
  std::stringstream list(value ? value : "");
  for (std::string name; std::getline(list, name, ',');) {
    if (name.empty()) continue;
    CheckPassName(name, "NIMBLE_DISABLE_PASSES: ");
    disabled.push_back(name);
  }
  return disabled;
}

ir::IRModule RunPasses(const ir::IRModule& module, const CompileOptions& options,
                       const std::string& stop_after) {
  if (!stop_after.empty()) CheckPassName(stop_after, "");
  CheckPrecision(options);
  const std::vector<std::string> disabled = DisabledPasses();
  // Passes recurse along the program's nesting (a chain of 100,000 graph
  // bindings overflowed the main thread's 8 MiB stack in ConstantBytes).
  return RunWithDeepStack([&] {
    ir::IRModule current = module;
    for (const PassInfo& pass : Passes()) {
      if (std::find(disabled.begin(), disabled.end(), pass.name) != disabled.end()) {
        if (pass.name == stop_after) break;
        continue;
      }
      try {
        current = pass.run(current, options);
      } catch (const Error& error) {
        throw Error("pass " + pass.name + ": " + error.what());
      }
      if (pass.name == stop_after) break;
    }
    return current;
  });
}

vm::Executable Compile(const ir::IRModule& module, const CompileOptions& options) {
  return CompileToExecutable(RunPasses(module, options), options);
}

}  // namespace nimble::backend
