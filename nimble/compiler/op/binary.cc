#include "nimble/compiler/op/op.h"

namespace nimble::op {

void RegisterBinaryOps(OpRegistry&) {}

}  // namespace nimble::op
