#include "nimble/compiler/op/op.h"

namespace nimble::op {

void RegisterNnOps(OpRegistry&) {}

}  // namespace nimble::op
