#include "nimble/compiler/transform/coalesce_storage.h"

namespace nimble::transform {

ir::IRModule CoalesceStorage(const ir::IRModule& module) { return module; }

}  // namespace nimble::transform
