#include "nimble/compiler/op/op.h"

namespace nimble::op {

void RegisterCreationOps(OpRegistry&) {}

}  // namespace nimble::op
