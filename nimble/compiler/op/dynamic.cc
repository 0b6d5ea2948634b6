#include "nimble/compiler/op/op.h"

namespace nimble::op {

void RegisterDynamicOps(OpRegistry&) {}

}  // namespace nimble::op
