#include "nimble/compiler/transform/insert_kills.h"

namespace nimble::transform {

ir::IRModule InsertKills(const ir::IRModule& module) { return module; }

}  // namespace nimble::transform
