#include "nimble/compiler/backend/pipeline.h"

#include "nimble/compiler/transform/dead_code.h"
#include "nimble/compiler/transform/fold_constant.h"
#include "nimble/compiler/transform/lambda_lift.h"
#include "nimble/compiler/transform/make_primitives.h"
#include "nimble/compiler/transform/manifest_alloc.h"
#include "nimble/compiler/transform/to_anf.h"
#include "nimble/vm/error.h"

namespace nimble::backend {

const std::vector<PassInfo>& Passes() {
  static const std::vector<PassInfo> passes = {
      {"fold-constant", transform::FoldConstants}, {"anf", transform::ToANormalForm},
      {"lambda-lift", transform::LambdaLift},      {"primitives", transform::MakePrimitives},
      {"dead-code", transform::EliminateDeadCode}, {"manifest-alloc", transform::ManifestAlloc},
  };
  return passes;
}

ir::IRModule RunPasses(const ir::IRModule& module, const std::string& stop_after) {
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
      current = pass.run(current);
    } catch (const Error& error) {
      throw Error("pass " + pass.name + ": " + error.what());
    }
    if (pass.name == stop_after) break;
  }
  return current;
}

vm::Executable Compile(const ir::IRModule& module, const CompileOptions& options) {
  return CompileToExecutable(RunPasses(module), options);
}

}  // namespace nimble::backend
