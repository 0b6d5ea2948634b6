#include "nimble/compiler/op/op.h"

namespace nimble::op {

void RegisterUnaryOps(OpRegistry&) {}

}  // namespace nimble::op
