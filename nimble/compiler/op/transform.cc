#include "nimble/compiler/op/op.h"

namespace nimble::op {

void RegisterTransformOps(OpRegistry&) {}

}  // namespace nimble::op
