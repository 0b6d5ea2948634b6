#include "nimble/compiler/op/op.h"

namespace nimble::op {

void RegisterReduceOps(OpRegistry&) {}

}  // namespace nimble::op
