#include "nimble/compiler/backend/pipeline.h"

#include "nimble/compiler/op/compute.h"
#include "nimble/compiler/transform/coalesce_storage.h"
#include "nimble/compiler/transform/dead_code.h"
#include "nimble/compiler/transform/eta_expand.h"
#include "nimble/compiler/transform/fold_constant.h"
#include "nimble/compiler/transform/fuse_ops.h"
#include "nimble/compiler/transform/insert_kills.h"
#include "nimble/compiler/transform/lambda_lift.h"
#include "nimble/compiler/transform/manifest_alloc.h"
#include "nimble/compiler/transform/plan_devices.h"
#include "nimble/compiler/transform/to_anf.h"
#include "nimble/vm/error.h"

namespace nimble::backend {
namespace {

// A pass that needs no options.
PassInfo Plain(std::string name, ir::IRModule (*pass)(const ir::IRModule&)) {
  return {std::move(name),
          [pass](const ir::IRModule& module, const CompileOptions&) { return pass(module); }};
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
      Plain("fold-constant", transform::FoldConstants),
      Plain("eta-expand", transform::EtaExpandConstructors),
      Plain("anf", transform::ToANormalForm),
      Plain("lambda-lift", transform::LambdaLift),
      {"fuse",
       [](const ir::IRModule& module, const CompileOptions& options) {
         // Only a generated kernel can run a fused primitive.
         const auto fusible = [&options](const ir::CallNode& call) {
           return GeneratesOp(static_cast<const ir::OpNode&>(*call.callee).name, options) &&
                  op::CanGenerate(call);
         };
         return transform::FuseOps(module, {.enabled = options.fuse_ops, .fusible = fusible});
       }},
      {"dead-code",
       [](const ir::IRModule& module, const CompileOptions& options) {
         return transform::EliminateDeadCode(module, options.entry_functions);
       }},
      Plain("manifest-alloc", transform::ManifestAlloc),
      {"plan-devices",
       [](const ir::IRModule& module, const CompileOptions& options) {
         return transform::PlanDevices(module, TargetDevice(options.target));
       }},
      Planning("coalesce-storage", transform::CoalesceStorage),
      Planning("insert-kills", transform::InsertKills),
  };
  return passes;
}

ir::IRModule RunPasses(const ir::IRModule& module, const CompileOptions& options,
                       const std::string& stop_after) {
  bool known = stop_after.empty();
  std::string names;
  for (const PassInfo& pass : Passes()) {
    known = known || pass.name == stop_after;
    names += (names.empty() ? "" : ", ") + pass.name;
  }
  if (!known) throw Error("unknown pass '" + stop_after + "' (passes: " + names + ")");
  ir::IRModule current = module;
  for (const PassInfo& pass : Passes()) {
    try {
      current = pass.run(current, options);
    } catch (const Error& error) {
      throw Error("pass " + pass.name + ": " + error.what());
    }
    if (pass.name == stop_after) break;
  }
  return current;
}

vm::Executable Compile(const ir::IRModule& module, const CompileOptions& options) {
  return CompileToExecutable(RunPasses(module, options), options);
}

}  // namespace nimble::backend
